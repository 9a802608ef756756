//! Hedge: when a cold lookup asks the Tagging API too, and when it asks it first.
//!
//! DescribeInstances answers most lookups in ~100 ms, but in a brownout it fails or hangs, and a
//! lookup that waits for it (the SDK's retry backoff, a 3-s attempt timeout) holds back every
//! record of its batch. The Tagging API reads the same tags through another service. So, as in
//! "The Tail at Scale" (Dean and Barroso, 2013), a lookup sends a second request when the first
//! is late or has failed, and takes whichever answers:
//!
//! * [`race`] asks EC2, and asks the Tagging API as well once EC2 has failed or has not answered
//!   within the hedge delay. EC2 stays the authority: a Tagging answer that leaves an id out
//!   (untagged, unknown, or not yet indexed) waits for EC2's.
//! * [`Ec2Health`], per scope, learns the delay and EC2's state from every DescribeInstances that
//!   completes, including those the hedge outran (they run on to their own end): the delay is
//!   the p95 of recent latencies, so about one cold lookup in twenty is hedged when EC2 is well;
//!   after [`LookupConfig::suspect_after`] consecutive failures (errors, throttles, attempt
//!   timeouts) EC2 is suspected for [`LookupConfig::suspect_for`] and the Tagging API is asked
//!   first, which also takes the router's load off an EC2 every Karpenter of the account needs:
//!   while suspected, EC2 is asked at most once per [`PROBE_INTERVAL`] (for what the Tagging API
//!   did not list, or when it failed too), so the router learns when EC2 is back.

use std::{
    collections::{HashMap, VecDeque},
    future::Future,
    sync::Mutex,
    time::Duration,
};

use tokio::time::Instant;

use crate::accounts::Scope;

/// The hedge delay while a scope has too few latencies to learn from.
pub const INITIAL_HEDGE_DELAY: Duration = Duration::from_millis(300);
/// The learnt delay's bounds: no hedge on scheduling noise, and never a wait past a second.
pub const MIN_HEDGE_DELAY: Duration = Duration::from_millis(50);
pub const MAX_HEDGE_DELAY: Duration = Duration::from_secs(1);
/// While EC2 is suspected, how often a lookup may still ask it (a probe): it finds out when EC2
/// is back, and the account's bucket, which every Karpenter of the account needs, sees at most
/// one call per probe interval from the router.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(10);
/// How many recent DescribeInstances latencies a scope keeps, and how many it needs to use them.
const LATENCY_WINDOW: usize = 64;
const LATENCY_MIN_SAMPLES: usize = 8;

/// When a lookup sends its hedge (`LOOKUP_HEDGE_DELAY_MS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HedgeDelay {
    /// The p95 of the scope's recent DescribeInstances latencies (the default).
    Auto,
    /// After this long, whatever EC2's latencies.
    Fixed(Duration),
    /// Never on time; the Tagging API is asked only once EC2 has failed.
    Off,
}

/// How lookups treat EC2's health; `Config::lookup`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LookupConfig {
    pub hedge: HedgeDelay,
    /// Consecutive DescribeInstances failures after which a scope asks the Tagging API first
    /// (`EC2_SUSPECT_AFTER_FAILURES`).
    pub suspect_after: u32,
    /// How long it does (`EC2_SUSPECT_SECONDS`); every later failure starts it again.
    pub suspect_for: Duration,
}

impl Default for LookupConfig {
    fn default() -> Self {
        Self {
            hedge: HedgeDelay::Auto,
            suspect_after: 2,
            suspect_for: Duration::from_secs(30),
        }
    }
}

/// What a scope's EC2 has done lately.
#[derive(Debug, Default)]
struct ScopeHealth {
    consecutive_failures: u32,
    suspected_until: Option<Instant>,
    /// While suspected: when EC2 may be probed again.
    next_probe: Option<Instant>,
    latencies: VecDeque<Duration>,
}

/// EC2's health per scope, learnt from every DescribeInstances that completes.
#[derive(Debug)]
pub struct Ec2Health {
    config: LookupConfig,
    scopes: Mutex<HashMap<Scope, ScopeHealth>>,
}

impl Ec2Health {
    pub fn new(config: LookupConfig) -> Self {
        Self {
            config,
            scopes: Mutex::default(),
        }
    }

    pub fn config(&self) -> &LookupConfig {
        &self.config
    }

    /// Whether `scope` asks the Tagging API first.
    pub fn suspected(&self, scope: &Scope) -> bool {
        self.scopes
            .lock()
            .unwrap()
            .get(scope)
            .and_then(|h| h.suspected_until)
            .is_some_and(|until| Instant::now() < until)
    }

    /// While `scope` is suspected, whether this lookup may ask EC2 (at most once per
    /// [`PROBE_INTERVAL`]); always, when it is not suspected.
    pub fn may_probe(&self, scope: &Scope) -> bool {
        let now = Instant::now();
        let mut scopes = self.scopes.lock().unwrap();
        let Some(health) = scopes.get_mut(scope) else {
            return true;
        };
        let suspected = health.suspected_until.is_some_and(|until| now < until);
        if !suspected {
            return true;
        }
        if health.next_probe.is_some_and(|at| now < at) {
            return false;
        }
        health.next_probe = Some(now + PROBE_INTERVAL);
        true
    }

    /// How long a lookup in `scope` waits for EC2 before it hedges; `None` never on time.
    pub fn hedge_delay(&self, scope: &Scope) -> Option<Duration> {
        match self.config.hedge {
            HedgeDelay::Off => None,
            HedgeDelay::Fixed(delay) => Some(delay),
            HedgeDelay::Auto => Some(
                self.scopes
                    .lock()
                    .unwrap()
                    .get(scope)
                    .map_or(INITIAL_HEDGE_DELAY, |h| learnt_delay(&h.latencies)),
            ),
        }
    }

    /// A DescribeInstances in `scope` answered after `latency`.
    pub fn answered(&self, scope: &Scope, latency: Duration) {
        let mut scopes = self.scopes.lock().unwrap();
        let health = scopes.entry(scope.clone()).or_default();
        health.consecutive_failures = 0;
        health.suspected_until = None;
        health.next_probe = None;
        if health.latencies.len() == LATENCY_WINDOW {
            health.latencies.pop_front();
        }
        health.latencies.push_back(latency);
    }

    /// A DescribeInstances in `scope` failed (an error, a throttle, an attempt timeout). Returns
    /// whether the scope is now suspected.
    pub fn failed(&self, scope: &Scope) -> bool {
        let mut scopes = self.scopes.lock().unwrap();
        let health = scopes.entry(scope.clone()).or_default();
        health.consecutive_failures = health.consecutive_failures.saturating_add(1);
        if health.consecutive_failures >= self.config.suspect_after {
            let now = Instant::now();
            health.suspected_until = Some(now + self.config.suspect_for);
            health.next_probe.get_or_insert(now + PROBE_INTERVAL);
        }
        health.suspected_until.is_some()
    }
}

/// The p95 of `latencies`, within [`MIN_HEDGE_DELAY`, `MAX_HEDGE_DELAY`]; the initial delay
/// while there are too few.
fn learnt_delay(latencies: &VecDeque<Duration>) -> Duration {
    if latencies.len() < LATENCY_MIN_SAMPLES {
        return INITIAL_HEDGE_DELAY;
    }
    let mut sorted: Vec<Duration> = latencies.iter().copied().collect();
    sorted.sort_unstable();
    let p95 = sorted[(sorted.len() * 95).div_ceil(100) - 1];
    p95.clamp(MIN_HEDGE_DELAY, MAX_HEDGE_DELAY)
}

/// How a hedged lookup ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Raced<T, E> {
    /// EC2 answered (`hedged`: the Tagging API had been asked too).
    Primary { answer: T, hedged: bool },
    /// The Tagging API's answer stands: complete before EC2 answered, or EC2 failed (`primary`).
    Hedge { answer: T, primary: Option<E> },
    /// Neither answered.
    BothFailed { primary: E, hedge: E },
}

/// Runs `primary`; runs `hedge` too once `primary` fails or `hedge_after` completes, whichever
/// comes first, and returns the first answer that stands. A hedge answer stands when
/// `complete(answer)` or `primary` has failed; otherwise `primary`'s answer is awaited. `hedge`
/// is not polled (so not sent) before it is needed. Dropping the losing `primary` future must not
/// cancel its request when its outcome is still to be learnt: the caller passes a spawned task.
pub async fn race<T, E>(
    primary: impl Future<Output = Result<T, E>>,
    hedge: impl Future<Output = Result<T, E>>,
    hedge_after: impl Future<Output = ()>,
    complete: impl Fn(&T) -> bool,
) -> Raced<T, E> {
    tokio::pin!(primary, hedge, hedge_after);
    // Alone until EC2 answers or is late.
    let primary_error = tokio::select! {
        // Deterministic polling order: a seeded simulation must replay the same race.
        biased;
        result = &mut primary => match result {
            Ok(answer) => return Raced::Primary { answer, hedged: false },
            Err(e) => Some(e),
        },
        () = &mut hedge_after => None,
    };
    if let Some(primary) = primary_error {
        return match hedge.await {
            Ok(answer) => Raced::Hedge {
                answer,
                primary: Some(primary),
            },
            Err(hedge) => Raced::BothFailed { primary, hedge },
        };
    }
    // Both in flight.
    tokio::select! {
        biased;
        result = &mut primary => match result {
            Ok(answer) => Raced::Primary { answer, hedged: true },
            Err(primary) => match hedge.await {
                Ok(answer) => Raced::Hedge { answer, primary: Some(primary) },
                Err(hedge) => Raced::BothFailed { primary, hedge },
            },
        },
        result = &mut hedge => match result {
            Ok(answer) if complete(&answer) => Raced::Hedge { answer, primary: None },
            Ok(partial) => match primary.await {
                Ok(answer) => Raced::Primary { answer, hedged: true },
                Err(primary) => Raced::Hedge { answer: partial, primary: Some(primary) },
            },
            Err(hedge) => match primary.await {
                Ok(answer) => Raced::Primary { answer, hedged: true },
                Err(primary) => Raced::BothFailed { primary, hedge },
            },
        },
    }
}

#[cfg(test)]
mod tests;
