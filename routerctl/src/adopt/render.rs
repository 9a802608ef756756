//! The report of `routerctl adopt` as the operator reads it: per cluster, what it runs today, its
//! seven steps with their states, the next command, and the outcome of this run.

use std::{
    fmt::Write,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use super::{Action, ClusterPlan, Outcome, Report, State, Step};
use aws_model::events::rfc3339;

impl Report {
    pub fn render(&self) -> String {
        let mut out = self.heading();
        // A rollback's report shows one helm command, the one that rolls back (at its end): an
        // operator in a hurry must not find the one that moves Karpenter again above it.
        let rolled_back = matches!(self.outcome, Outcome::RolledBack { .. });
        for cluster in &self.clusters {
            self.render_cluster(&mut out, cluster, rolled_back);
        }
        self.render_left_alone(&mut out);
        self.render_outcome(&mut out);
        out
    }

    /// The first line: which account and region, and how they reach the router.
    fn heading(&self) -> String {
        match &self.spoke_stack {
            None => format!(
                "routerctl adopt: account {}, {}, router stack {}\n",
                self.account, self.region, self.stack,
            ),
            Some(spoke) => format!(
                "routerctl adopt: member account {}, {}, connected by spoke stack {spoke} to \
                 router stack {}\n",
                self.account, self.region, self.stack,
            ),
        }
    }

    /// One cluster: what it runs today, its steps, and what comes next (with its snippet, unless
    /// this run rolled back).
    fn render_cluster(&self, out: &mut String, cluster: &ClusterPlan, rolled_back: bool) {
        let _ = writeln!(
            out,
            "\n{}: {} Karpenter node(s)",
            cluster.name, cluster.nodes
        );
        for (n, line) in cluster.today.iter().enumerate() {
            let _ = writeln!(out, "  {} {line}", if n == 0 { "today:" } else { "      " });
        }
        for step in &cluster.steps {
            let _ = writeln!(
                out,
                "  {}. [{:<7}] {}: {}",
                step.number,
                step.state.label(),
                step.title,
                step.detail
            );
        }
        let next = cluster.next().filter(|_| !rolled_back);
        let _ = writeln!(
            out,
            "  next: {}",
            self.next_line(cluster, next, rolled_back)
        );
        if let Some(snippet) = next.and_then(|s| s.snippet.as_deref()) {
            for line in snippet.lines() {
                let _ = writeln!(out, "    {line}");
            }
        }
    }

    /// What the operator does next for `cluster`, whose next step is `next`.
    fn next_line(&self, cluster: &ClusterPlan, next: Option<&Step>, rolled_back: bool) -> String {
        match next {
            None if rolled_back => format!(
                "yours: the helm command at the end of this report, which points Karpenter \
                 back at its old queue; to move again later, {} --cluster {} \
                 prints the command that does",
                self.command, cluster.name
            ),
            None => "nothing: it is on the router and its old set-up is gone".to_owned(),
            Some(step) => match &step.action {
                Action::Apply(change) => format!(
                    "{}{} --cluster {} --apply {}",
                    if step.snippet.is_some() {
                        "yours first, the helm command below; then "
                    } else {
                        ""
                    },
                    self.command,
                    cluster.name,
                    change.describe()
                ),
                Action::Operator(what) => format!("yours: {what}"),
                Action::Nothing => waiting_line(step),
            },
        }
    }

    /// What adopt found but leaves alone: shared queues, unclaimed ones, and unreadable rules.
    fn render_left_alone(&self, out: &mut String) {
        if !self.shared.is_empty() {
            let _ = writeln!(
                out,
                "\nqueues several clusters read (each Karpenter deletes the others' messages, so \
                 each cluster misses interruptions):"
            );
            for q in &self.shared {
                let _ = writeln!(out, "  {q}");
            }
        }
        if !self.unclaimed.is_empty() {
            let _ = writeln!(
                out,
                "\ninterruption queues no cluster could be tied to (name one's Karpenter role \
                 with --karpenter-role <cluster>=<role>; adopt leaves them alone):"
            );
            for q in &self.unclaimed {
                let _ = writeln!(out, "  {q}");
            }
        }
        if !self.unreadable.is_empty() {
            let _ = writeln!(out, "\nrules adopt could not evaluate (left alone):");
            for (rule, why) in &self.unreadable {
                let _ = writeln!(out, "  {rule}: {why}");
            }
        }
    }

    /// What this run did, last (a rollback's helm command with it).
    fn render_outcome(&self, out: &mut String) {
        match &self.outcome {
            Outcome::Planned => {}
            Outcome::Applied { step, did } => {
                let _ = writeln!(out, "\napplied step {step}: {did}");
            }
            Outcome::Refused { why, .. } => {
                let _ = writeln!(out, "\nnothing applied: {why}");
            }
            Outcome::Finished => {
                let _ = writeln!(out, "\nnothing to apply: every step is done");
            }
            Outcome::Template { stack, step, edit } => {
                let _ = writeln!(
                    out,
                    "\nstack {stack}'s template for step {step} (printed on stdout): {}",
                    edit.summary()
                );
            }
            Outcome::RolledBack {
                enabled,
                waited,
                helm,
            } => {
                let _ = writeln!(
                    out,
                    "\nrolled back: {}; the old queue gets every event from now on. No old rule \
                     is disabled again until --apply sees Karpenter on the router's queue anew. \
                     Point Karpenter back at its old queue now:",
                    re_enabled(enabled, *waited)
                );
                for line in helm.lines() {
                    let _ = writeln!(out, "    {line}");
                }
            }
        }
    }
}

/// The next line of a step with nothing to apply: a wait (until when, if known), or a block.
fn waiting_line(step: &Step) -> String {
    match step.state {
        State::Waiting { until: Some(at) } => {
            format!(
                "wait until {}: {}",
                rfc3339(whole_second_after(at)),
                step.detail
            )
        }
        State::Waiting { until: None } => format!("wait: {}", step.detail),
        _ => format!("step {} is blocked: {}", step.number, step.detail),
    }
}

/// What a rollback did to the old rules: re-enabled them (and waited for EventBridge), or found
/// them still enabled.
fn re_enabled(enabled: &[String], waited: Duration) -> String {
    if enabled.is_empty() {
        "the old rules were still enabled".to_owned()
    } else {
        format!(
            "re-enabled {} and waited {} s for EventBridge to apply it",
            enabled.join(", "),
            waited.as_secs()
        )
    }
}

/// `at` rounded up to its second: the plan prints whole seconds, and an operator who runs adopt
/// at the second it names must find the wait over, not a fraction short of it.
fn whole_second_after(at: SystemTime) -> SystemTime {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let up = since.as_secs() + u64::from(since.subsec_nanos() > 0);
    UNIX_EPOCH + Duration::from_secs(up)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::super::{
        ClusterPlan, Outcome, Report,
        steps::{Action, State, Step},
    };

    fn with_next(state: State) -> String {
        let step = |number: u8, state: State| Step {
            number,
            title: format!("step {number}"),
            state,
            detail: "the detail".into(),
            action: Action::Nothing,
            snippet: None,
        };
        Report {
            account: "123456789012".into(),
            region: "us-east-1".into(),
            stack: "ir".into(),
            spoke_stack: None,
            command: "routerctl adopt".into(),
            clusters: vec![ClusterPlan {
                name: "alpha".into(),
                nodes: 1,
                today: Vec::new(),
                steps: vec![step(1, State::Done), step(2, state)],
                rolled_back: false,
            }],
            shared: Vec::new(),
            unclaimed: Vec::new(),
            unreadable: Vec::new(),
            outcome: Outcome::Planned,
        }
        .render()
    }

    /// A next step nobody can move is named blocked; one that waits on time says to wait, and
    /// until when where the plan knows.
    #[test]
    fn a_next_step_with_nothing_to_do_is_blocked_or_waited_for() {
        let blocked = with_next(State::Blocked);
        assert!(
            blocked.contains("\n  next: step 2 is blocked: the detail\n"),
            "{blocked}"
        );
        let waiting = with_next(State::Waiting { until: None });
        assert!(
            waiting.contains("\n  next: wait: the detail\n"),
            "{waiting}"
        );
        // A wait that ends at a known instant names it, rounded up to the second it prints.
        let at = UNIX_EPOCH + Duration::from_millis(1_795_824_000_250);
        let timed = with_next(State::Waiting { until: Some(at) });
        assert!(
            timed.contains("\n  next: wait until 2026-11-28T00:00:01Z: the detail\n"),
            "{timed}"
        );
        let whole = UNIX_EPOCH + Duration::from_secs(1_795_824_000);
        let timed = with_next(State::Waiting { until: Some(whole) });
        assert!(
            timed.contains("\n  next: wait until 2026-11-28T00:00:00Z: the detail\n"),
            "{timed}"
        );
    }
}
