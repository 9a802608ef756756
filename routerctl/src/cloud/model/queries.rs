//! [`LogQueries`] on the model: Logs Insights runs here only the queries routerctl runs (base.yaml's
//! three), answered by [`crate::insights::tally::answer`] over the router's interruption records in
//! the log group's events of the window: the computation the lab's demo makes from the records
//! its router printed. A query completes as it starts.

use router_core::insight::InterruptionRecord;

use super::{World, millis, uuid_like};
use crate::{
    cloud::{
        CallError, Cloud,
        queries::{LogQueries, QueryResults},
    },
    insights::tally,
};

impl LogQueries for World {
    async fn start_query(
        &self,
        group: &str,
        query: &str,
        from_s: i64,
        to_s: i64,
    ) -> Result<String, CallError> {
        self.gate("StartQuery")?;
        let (from, to) = (from_s * 1000, to_s * 1000 + 999);
        let exists = self.read(|_, site| {
            site.logs.contains_key(group)
                || site
                    .stacks
                    .values()
                    .any(|s| s.resources.values().any(|id| id == group))
        });
        if !exists {
            return Err(CallError::new(
                crate::cloud::missing::RESOURCE,
                format!("Log group {group} does not exist"),
            ));
        }
        let records: Vec<InterruptionRecord> = self.read(|_, site| {
            site.logs
                .get(group)
                .into_iter()
                .flatten()
                .filter(|(at, _)| (from..=to).contains(at))
                .filter_map(|(_, line)| InterruptionRecord::from_line(line))
                .collect()
        });
        let rows = tally::answer(query, &records).ok_or_else(|| {
            CallError::new(
                "MalformedQueryException",
                "the model of Logs Insights runs only routerctl's queries (insights::tally::QUERIES)",
            )
        })?;
        let id = uuid_like(&format!("{group}{query}{from}{to}{}", millis(self.now())));
        let rows = rows.into_iter().map(|r| r.into_iter().collect()).collect();
        self.site(|site| site.queries.insert(id.clone(), rows));
        Ok(id)
    }

    async fn query_results(&self, id: &str) -> Result<QueryResults, CallError> {
        self.gate("GetQueryResults")?;
        let rows = self.read(|_, site| site.queries.get(id).cloned());
        match rows {
            Some(rows) => Ok(QueryResults {
                status: "Complete".into(),
                rows: rows.into_iter().map(|r| r.into_iter().collect()).collect(),
            }),
            None => Err(CallError::new(
                "ResourceNotFoundException",
                format!("Query {id} does not exist"),
            )),
        }
    }
}
