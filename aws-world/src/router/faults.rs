//! The layer of faults over the world that the router's decision tests script: a call that fails,
//! hangs past the attempt timeout or answers late, a queue whose every batch fails, entries SQS
//! refuses, and what someone else changes right after an answer. The world stays as AWS keeps
//! it; the layer decides only whether and when a call reaches it. Every call is recorded, so a
//! test counts what the router asked.

use std::{
    collections::{BTreeMap, VecDeque},
    time::Duration,
};

use router_core::{aws::CallError, retry::ATTEMPT_TIMEOUT};

/// Faults scripted for this (`fail(SWEEP, …)`) apply to sweeps (DescribeInstances by tag key)
/// before any scripted for DescribeInstances itself.
pub const SWEEP: &str = "Sweep";

/// What a scripted call does instead of answering.
#[derive(Debug, Clone)]
pub enum Fault {
    /// Fails with this AWS error.
    Error(CallError),
    /// Gives no answer: the SDK's attempt timeout ends it ([`ATTEMPT_TIMEOUT`], then `Timeout`).
    Hang,
    /// Answers after this long.
    Slow(Duration),
}

impl Fault {
    pub fn code(code: &str) -> Self {
        Fault::Error(CallError::new(code, format!("the model says {code}")))
    }

    /// Plays the fault: its error, or the time it costs before the call answers.
    pub(super) async fn play(self) -> Result<(), CallError> {
        match self {
            Fault::Error(e) => Err(e),
            Fault::Hang => {
                tokio::time::sleep(ATTEMPT_TIMEOUT).await;
                Err(CallError::new(
                    CallError::TIMEOUT,
                    "no answer within the attempt timeout",
                ))
            }
            Fault::Slow(d) => {
                tokio::time::sleep(d).await;
                Ok(())
            }
        }
    }
}

/// A call the router made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub action: &'static str,
    pub account: String,
    pub region: String,
}

/// What is scripted, and what was called.
#[derive(Debug, Default)]
pub(super) struct Faults {
    /// Per action, consumed in order.
    pub scripted: BTreeMap<&'static str, VecDeque<Fault>>,
    /// Per action, every call.
    pub always: BTreeMap<&'static str, Fault>,
    /// Per queue name: how many more entries SendMessageBatch refuses, the code, sender fault.
    pub entries: BTreeMap<String, (usize, String, bool)>,
    /// Per queue name: every SendMessageBatch to it.
    pub queues: BTreeMap<String, Fault>,
    pub calls: Vec<Call>,
    /// ChangeMessageVisibilityBatch's entries: receipt handle, timeout.
    pub visibility: Vec<(String, u32)>,
}

impl Faults {
    /// Records the call and takes its fault: one scripted for `kind` first, then the action's.
    pub fn take(&mut self, call: Call, kind: Option<&'static str>) -> Option<Fault> {
        let action = call.action;
        self.calls.push(call);
        kind.and_then(|k| self.scripted.get_mut(k).and_then(VecDeque::pop_front))
            .or_else(|| self.scripted.get_mut(action).and_then(VecDeque::pop_front))
            .or_else(|| self.always.get(action).cloned())
    }

    /// Whether the next entry to queue `name` is refused: its code and sender fault.
    pub fn entry(&mut self, name: &str) -> Option<(String, bool)> {
        match self.entries.get_mut(name) {
            Some((left, code, sender_fault)) if *left > 0 => {
                *left -= 1;
                Some((code.clone(), *sender_fault))
            }
            _ => None,
        }
    }
}
