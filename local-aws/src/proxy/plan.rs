//! What goes wrong, and when: a [`FaultPlan`] of faults per API action, at a rate, for a count
//! of calls, or for a window of time (optionally only for requests that name something).

use std::{collections::BTreeMap, time::Duration};

/// A way for a call to fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// HTTP 503 (`Unavailable` / `ServiceUnavailable`).
    Unavailable,
    /// HTTP 500 (`InternalError`).
    InternalError,
    /// Throttling: EC2 `RequestLimitExceeded` (503), SQS `RequestThrottled` (400).
    Throttled,
    /// The connection closes without an answer.
    Reset,
    /// The call is done upstream, but the answer comes this late (past the SDK attempt timeout,
    /// the client retries and the work happens twice).
    Slow(Duration),
    /// SendMessageBatch only: a 200 answer in which some entries failed (SenderFault false).
    PartialBatch,
    /// The caller may not do this: SQS `AccessDenied` (HTTP 400, as SQS's common errors list
    /// it), STS `AccessDenied` (403), EC2 `UnauthorizedOperation` (403). Not retried by the SDK.
    Denied,
}

/// Which calls fail, and how.
#[derive(Debug, Clone, Default)]
pub struct FaultPlan {
    /// Failure probability per action; actions not listed never fail. `"*"` applies to all.
    pub rates: BTreeMap<String, f64>,
    /// The faults to pick from, uniformly (those that do not apply to a call are skipped).
    pub faults: Vec<Fault>,
    pub seed: u64,
    /// An outage per action: its next `n` calls all fail with the given fault, before `rates`
    /// apply. Unlike a rate, this is certain to outlast the SDK's retries, so a scenario can
    /// count on records being handed back however the concurrent calls interleave.
    pub outages: BTreeMap<String, (u64, Fault)>,
    /// Outages by time, measured from when the plan was set; checked before `outages`.
    pub windows: Vec<Window>,
}

/// Calls of `action` fail with `fault` from `from` until `until` after the plan was set; with
/// `matching`, only calls whose request (path, query or body) contains it.
#[derive(Debug, Clone)]
pub struct Window {
    pub action: String,
    pub matching: Option<String>,
    pub from: Duration,
    pub until: Duration,
    pub fault: Fault,
}

impl Window {
    pub(super) fn applies(&self, action: &str, elapsed: Duration, request: &str) -> bool {
        self.action == action
            && (self.from..self.until).contains(&elapsed)
            && self.matching.as_deref().is_none_or(|m| request.contains(m))
    }
}

impl FaultPlan {
    pub fn none() -> Self {
        Self::default()
    }

    /// The same `rate` for each of `actions`.
    pub fn rate(rate: f64, actions: &[&str], faults: &[Fault], seed: u64) -> Self {
        Self {
            rates: actions.iter().map(|a| (a.to_string(), rate)).collect(),
            faults: faults.to_vec(),
            seed,
            outages: BTreeMap::new(),
            windows: Vec::new(),
        }
    }

    /// Every call of `action` fails with `fault` during `during` (from the moment the plan is set).
    pub fn with_window(
        mut self,
        action: &str,
        during: std::ops::Range<Duration>,
        fault: Fault,
    ) -> Self {
        self.windows.push(Window {
            action: action.to_owned(),
            matching: None,
            from: during.start,
            until: during.end,
            fault,
        });
        self
    }

    /// Like [`with_window`](Self::with_window), only for calls whose request contains `matching`.
    pub fn with_window_matching(
        mut self,
        action: &str,
        matching: &str,
        during: std::ops::Range<Duration>,
        fault: Fault,
    ) -> Self {
        self.windows.push(Window {
            action: action.to_owned(),
            matching: Some(matching.to_owned()),
            from: during.start,
            until: during.end,
            fault,
        });
        self
    }

    /// The next `calls` calls of `action` fail with `fault` (an outage), then `rates` apply.
    pub fn with_outage(mut self, action: &str, calls: u64, fault: Fault) -> Self {
        self.outages.insert(action.to_owned(), (calls, fault));
        self
    }

    pub(super) fn rate_for(&self, action: &str) -> f64 {
        self.rates
            .get(action)
            .or_else(|| self.rates.get("*"))
            .copied()
            .unwrap_or(0.0)
    }
}
