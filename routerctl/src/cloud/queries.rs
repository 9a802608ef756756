//! What `routerctl insights` asks of AWS: CloudWatch Logs Insights queries of the router's log
//! group, and the base stack's resources to find it by.

use std::{collections::BTreeMap, future::Future};

use super::{CallError, Cloud};

/// A query's state and, once it is `Complete`, its rows (each field's value, as text).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryResults {
    /// `Scheduled`, `Running`, `Complete`, `Failed`, `Cancelled`, `Timeout` or `Unknown`.
    pub status: String,
    pub rows: Vec<BTreeMap<String, String>>,
}

/// What `routerctl insights` runs (see the module documentation).
pub trait LogQueries: Cloud {
    /// CloudWatch Logs StartQuery of `query` over log group `group`, from `from_s` to `to_s`
    /// (seconds since the epoch): the query's id (a missing group: [`super::missing::RESOURCE`]).
    fn start_query(
        &self,
        group: &str,
        query: &str,
        from_s: i64,
        to_s: i64,
    ) -> impl Future<Output = Result<String, CallError>>;
    /// CloudWatch Logs GetQueryResults.
    fn query_results(&self, id: &str) -> impl Future<Output = Result<QueryResults, CallError>>;
}
