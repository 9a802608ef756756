//! [`LogQueries`] over the SDK: CloudWatch Logs Insights.

use aws_clients::aws::Aws;

use super::{call_error, named};
use crate::cloud::{
    CallError, missing,
    queries::{LogQueries, QueryResults},
};

impl LogQueries for Aws {
    async fn start_query(
        &self,
        group: &str,
        query: &str,
        from_s: i64,
        to_s: i64,
    ) -> Result<String, CallError> {
        let out = self
            .logs
            .start_query()
            .log_group_name(group)
            .query_string(query)
            .start_time(from_s)
            .end_time(to_s)
            .send()
            .await
            .map_err(|e| {
                let gone = e
                    .as_service_error()
                    .is_some_and(|s| s.is_resource_not_found_exception());
                named(call_error(e), gone, missing::RESOURCE)
            })?;
        out.query_id().map(str::to_owned).ok_or_else(|| {
            CallError::new(CallError::RESPONSE, "StartQuery answered without a queryId")
        })
    }

    async fn query_results(&self, id: &str) -> Result<QueryResults, CallError> {
        let out = self
            .logs
            .get_query_results()
            .query_id(id)
            .send()
            .await
            .map_err(call_error)?;
        Ok(QueryResults {
            status: out.status().map_or("Unknown", |s| s.as_str()).to_owned(),
            rows: out
                .results()
                .iter()
                .map(|row| {
                    row.iter()
                        .filter_map(|f| Some((f.field()?.to_owned(), f.value()?.to_owned())))
                        .collect()
                })
                .collect(),
        })
    }
}
