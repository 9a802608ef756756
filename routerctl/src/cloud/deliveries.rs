//! What `routerctl simulate` asks of AWS: the instances to interrupt, and where it sends their
//! events (the ingest queue, or the router function as the mapping would invoke it).

use std::future::Future;

pub use aws_model::resources::{Entry, Instance, Invoked};

use super::{CallError, Cloud};

/// Which instances a DescribeInstances asks for.
#[derive(Debug, Clone)]
pub enum Instances<'a> {
    /// These ids (one unknown id fails the whole call).
    Ids(&'a [String]),
    /// Instances in one of `states` (`running`, `pending`, …) with the tag `key` (any value:
    /// `value` `None`) or `key=value`.
    Tagged {
        key: &'a str,
        value: Option<&'a str>,
        states: &'a [&'a str],
    },
}

/// What `routerctl simulate` reads and sends (see the module documentation).
pub trait Deliveries: Cloud {
    /// EC2 DescribeInstances, every page.
    fn instances(
        &self,
        which: Instances<'_>,
    ) -> impl Future<Output = Result<Vec<Instance>, CallError>>;
    /// SQS SendMessageBatch of `(id, body)` entries (at most 10): the result of each entry SQS
    /// listed, by id.
    fn send_batch(
        &self,
        url: &str,
        entries: &[(String, String)],
    ) -> impl Future<Output = Result<Vec<(String, Entry)>, CallError>>;
    /// Lambda Invoke, RequestResponse (a missing function: [`super::missing::RESOURCE`]).
    fn invoke(
        &self,
        function: &str,
        payload: String,
    ) -> impl Future<Output = Result<Invoked, CallError>>;
}
