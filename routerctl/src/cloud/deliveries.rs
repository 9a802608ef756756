//! What `routerctl simulate` asks of AWS: the instances to interrupt, and where it sends their
//! events (the ingest queue, or the router function as the mapping would invoke it).

use std::future::Future;

use super::{CallError, Cloud};

/// An instance as DescribeInstances answers it: its id, its reservation's owner, its tags.
#[derive(Debug, Clone, Default)]
pub struct Instance {
    pub id: String,
    pub owner: String,
    pub tags: Vec<(String, String)>,
}

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

/// One SendMessageBatch entry's result, as SQS lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// Stored, with its message id.
    Sent(String),
    /// Refused: SQS's code and message, and whether the entry itself is wrong (`SenderFault`).
    Failed {
        code: String,
        message: String,
        sender_fault: bool,
    },
}

/// A synchronous invocation's answer.
#[derive(Debug, Clone, Default)]
pub struct Invoked {
    /// `Unhandled` when the function failed the invocation.
    pub function_error: Option<String>,
    pub payload: Vec<u8>,
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
