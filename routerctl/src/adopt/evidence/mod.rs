//! adopt's evidence that a cluster's Karpenter has moved: it reads the router's queue, and
//! nothing reads the old one any more. Current and positive: read by the same `--apply` that then
//! disables the old rules.
//!
//! Deleted-lately counts of the *new* queue cannot say it: "deleted lately" stays true for minutes
//! after Karpenter has left (a GitOps controller reverting the helm value), and is as true when
//! another cluster's Karpenter reads it (a helm command run in the wrong kube-context). So a round
//! puts two kinds of message where only the right reader takes them, and looks for them later:
//!
//! * a **probe** through the router: a rebalance recommendation for one of the cluster's nodes,
//!   invoked synchronously so the router's answer confirms it reached the cluster's tenant queue.
//!   Karpenter reads it and deletes it without acting (a rebalance recommendation only records a
//!   Kubernetes event). Taken, it shows that *something* reads the tenant queue: of the Karpenter
//!   roles adopt can see, only this cluster's may (step 2), but a reader under a role adopt does
//!   not recognise could be another cluster's Karpenter. The probe alone never disables a rule;
//! * a **sentinel** in each old queue: an EventBridge-shaped event that none of Karpenter's parsers
//!   knows (source `routerctl.adopt`), which Karpenter deletes as a no-op if it reads that queue.
//!   Still there after the round, received by nobody, it shows that *nothing* reads the old
//!   queue, whoever the reader would be: that is what lets step 5 disable the old rules.
//!
//! After [`QUIET_WINDOW`] (three of Karpenter's 20-s receive cycles, with a margin) the probe must
//! be gone and every sentinel still there. The messages live as long as their queues keep
//! messages (300 s for Karpenter's own queues), so a round read too late is started again. Looking
//! is a receive ([`look`]): each message met on the way is made visible again at once; what adopt
//! put there is deleted. Plans never look: a look receives the sentinel itself, and only the one
//! `--apply` that decides may do that.
//!
//! **A look that finds the sentinel** proves nothing read the old queue only if it met nothing
//! sent before the sentinel on the way. Found behind older messages ([`look::Look::FoundBehind`]),
//! it proves nothing by itself: a reader that came back during the round (a GitOps revert) starts
//! on the oldest, ten messages a receive, and the look, receiving up to a thousand, gets there
//! first. Such a round is a backlog, decided by SQS's counts like the one below.
//!
//! **A look that does not find the sentinel.** The queue gave everything it held: the sentinel was
//! taken. The look met only messages newer than the sentinel before it had to stop: everything
//! older, the sentinel with it, was taken (the cluster's own Karpenter draining its old queue
//! while the look pages through new arrivals). Both refuse. The look met older messages and had
//! to stop: a **backlog** it cannot search, which is what an old queue nobody reads becomes in a
//! busy account (Karpenter's rules have no cluster filter, so it fills with every interruption
//! of the account, up to its retention), and also what a reader that came back during the round
//! leaves behind (it starts on the oldest). A look cannot tell those apart, so a round with a
//! backlog is decided by SQS's own counts of the old queue ([`counts`]): no message received or
//! deleted by anyone, in every whole minute of the round but those adopt looked in, a whole
//! minute before its look (a round is read no sooner: [`Round::ripe_at`]) and one past it. That waits minutes for CloudWatch; while a minute is missing nothing is
//! disabled, and past [`counts::PATIENCE`] adopt says it cannot tell and prints the command for
//! the operator who can.

pub mod counts;
pub mod look;
mod round;

pub use self::round::Round;

use crate::deployment::Queue;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use self::{
    counts::{Counted, Looked, Window},
    look::{Look, look},
};
use crate::cloud::{deliveries::Deliveries, moves::Moves};
use aws_model::events::{Origin, rfc3339};

/// The round under way, on the cluster's tenant queue ([`Round::tag`]).
pub const EVIDENCE_TAG: &str = "interruption-router:adopt-evidence";
/// When evidence last held (RFC 3339), on the tenant queue: with the old rules disabled since,
/// step 4 stays done until a rollback.
pub const VERIFIED_TAG: &str = "interruption-router:adopt-verified";

/// How long a round runs before `--apply` reads it: Karpenter long-polls for 20 s at a time on
/// its leader and returns as soon as a message arrives, so a reader takes a message within one
/// cycle; three cycles, and a margin for a leader handing over.
pub const QUIET_WINDOW: Duration = Duration::from_secs(65);
/// What a round is sent with, and read with.
pub(crate) struct Start<'a, R> {
    /// The hub's clients, which invoke the router function (the cluster's account may be a
    /// member's: everything else is read and sent there).
    pub hub: &'a R,
    pub cluster: &'a str,
    pub account: &'a str,
    pub region: &'a str,
    /// The router function (the base stack's FunctionName output).
    pub function: &'a str,
    /// A node of the cluster the probe names.
    pub node: &'a str,
    pub tenant: &'a Queue,
    pub old: &'a [&'a Queue],
    /// The old rules still enabled: what the operator disables by hand where adopt cannot tell.
    pub rules: &'a [String],
}

/// Sends the probe through the router and a sentinel into each old queue, then records the round
/// on the tenant queue. What was sent, in a sentence.
pub(crate) async fn start(site: &impl Moves, s: &Start<'_, impl Deliveries>) -> Result<String> {
    let origin = Origin {
        account: s.account.to_owned(),
        region: s.region.to_owned(),
    };
    let started = site.now();
    let millis = started
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    let round = Round {
        started,
        probe: format!("routerctl-adopt-{}-{millis}", s.cluster),
        backlog: None,
    };
    send_probe(s, &origin, &round.probe).await?;
    for queue in s.old {
        let body = json!({
            "version": "0", "id": round.sentinel(), "source": "routerctl.adopt",
            "detail-type": "routerctl adopt sentinel", "account": s.account,
            "time": rfc3339(started), "region": s.region, "resources": [],
            "detail": {"cluster": s.cluster, "purpose": "adopt checks that nothing reads this \
                queue any more: Karpenter deletes this message unread if it still does"}});
        site.send_message(&queue.url, &body.to_string())
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "SendMessage to {} (adopt's sentinel): {e}; adopt needs sqs:SendMessage on the \
                     old queue to tell whether anything still reads it",
                    queue.name
                )
            })?;
    }
    tag(site, &s.tenant.url, EVIDENCE_TAG, &round.tag()).await?;
    let old: Vec<&str> = s.old.iter().map(|q| q.name.as_str()).collect();
    Ok(format!(
        "sent probe {} (a rebalance recommendation for {}) through {} to {}{}; run --apply again \
         in {} s, within {} s, to read them",
        round.probe,
        s.node,
        s.function,
        s.tenant.name,
        if old.is_empty() {
            String::new()
        } else {
            format!(" and a sentinel into {}", old.join(", "))
        },
        QUIET_WINDOW.as_secs(),
        Round::expired_after(s.old.iter().copied().chain([s.tenant])).as_secs(),
    ))
}

/// Sends a probe (event id `id`) through the router and checks that the router forwarded it to
/// the tenant queue.
async fn send_probe(s: &Start<'_, impl Deliveries>, origin: &Origin, id: &str) -> Result<()> {
    let probe = origin.rebalance(s.node, id);
    // Synchronous, so the router's answer says whether the probe reached the tenant queue: a
    // probe that never arrived would look taken. Sent as the one record of an SQS batch, the only
    // payload the router reads; without an eventSourceARN, the router answers its outcome.
    let batch = json!({"Records": [{
        "messageId": id, "body": probe.body(), "eventSource": "aws:sqs",
        "attributes": {"ApproximateReceiveCount": "1"}, "messageAttributes": {},
    }]});
    let out = s
        .hub
        .invoke(s.function, batch.to_string())
        .await
        .map_err(|e| anyhow::anyhow!("Invoke {} (the probe): {e}", s.function))?;
    let answer: Value = serde_json::from_slice(&out.payload).unwrap_or(Value::Null);
    if out.function_error.is_some() || answer["outcomes"][id] != "forwarded" {
        bail!(
            "the router did not forward the probe ({id}) to {}: it answered {answer}{}; routerctl \
             verify --cluster {} says why",
            s.tenant.name,
            out.function_error
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default(),
            s.cluster
        );
    }
    Ok(())
}

/// What reading a round found.
#[derive(Debug, Clone, Default)]
pub struct Reading {
    /// What holds.
    pub facts: Vec<String>,
    /// What does not, each with what to check.
    pub problems: Vec<String>,
    /// The round goes on: SQS's counts decide it (what to do next, in a sentence).
    pub pending: Option<String>,
}

impl Reading {
    /// The round is over and everything held.
    pub fn held(&self) -> bool {
        self.problems.is_empty() && self.pending.is_none()
    }
}

/// What to check when something still reads an old queue.
fn still_read(cluster: &str) -> String {
    format!(
        "Karpenter of {cluster} may still point at it: the helm change did not happen, ran in \
         another kube-context (which points that cluster's Karpenter at the new queue: check \
         there too), or was put back by whatever owns the value (Argo CD self-heal, Flux, a \
         Terraform helm_release): change settings.interruptionQueue where it reads it"
    )
}

/// Reads `round`. First: the probe gone from the tenant queue, each sentinel still in its old
/// queue and received by nobody; an old queue with a backlog the look could not search leaves
/// the round to SQS's counts ([`counts`]), read on a later `--apply`. Concludes the round unless
/// it goes on (its tag removed); records [`VERIFIED_TAG`] when it held.
pub(crate) async fn read(
    site: &impl Moves,
    s: &Start<'_, impl Deliveries>,
    round: &Round,
) -> Result<Reading> {
    let mut reading = match round.window() {
        None => first_read(site, s, round).await?,
        Some(window) => counts_read(site, s, &window).await?,
    };
    if reading.problems.is_empty() && reading.pending.is_some() {
        return Ok(reading);
    }
    reading.pending = None;
    untag(site, &s.tenant.url, EVIDENCE_TAG).await?;
    if reading.held() {
        tag(site, &s.tenant.url, VERIFIED_TAG, &rfc3339(site.now())).await?;
    }
    Ok(reading)
}

/// A round's first reading: the probe's look and each sentinel's, left to SQS's counts when an
/// old queue has a backlog the look could not search and nothing else failed.
async fn first_read(
    site: &impl Moves,
    s: &Start<'_, impl Deliveries>,
    round: &Round,
) -> Result<Reading> {
    let Start {
        cluster, tenant, ..
    } = *s;
    let mut reading = Reading::default();
    let mut backlog = Vec::new();
    let since = format!("sent {} s ago", round.age(site.now()).as_secs());
    let looked_from = site.now();
    let probe = look(site, tenant, &round.probe, round.started).await?;
    reading.facts.extend(probe.hidden);
    reading.record(
        judge_probe(probe.look, &since, cluster, tenant),
        &mut backlog,
    );
    for queue in s.old {
        let sentinel = look(site, queue, &round.sentinel(), round.started).await?;
        reading.facts.extend(sentinel.hidden);
        reading.record(
            judge_sentinel(sentinel.look, &since, cluster, queue),
            &mut backlog,
        );
    }
    if !reading.problems.is_empty() || backlog.is_empty() {
        return Ok(reading);
    }
    leave_to_counts(site, s, round, looked_from, &backlog, reading).await
}

/// What one look says of its queue, as the reading records it.
enum Verdict {
    /// It holds: a fact.
    Holds(String),
    /// It does not: a problem, with what to check.
    Fails(String),
    /// A backlog the look cannot judge: SQS's counts must.
    Backlog(String),
}

impl Reading {
    /// Files `verdict` under the facts or the problems, or with the backlogs in `backlog`.
    fn record(&mut self, verdict: Verdict, backlog: &mut Vec<String>) {
        match verdict {
            Verdict::Holds(fact) => self.facts.push(fact),
            Verdict::Fails(problem) => self.problems.push(problem),
            Verdict::Backlog(why) => backlog.push(why),
        }
    }
}

/// The probe must be gone from the tenant queue (sent `since`): only then does something read
/// it as Karpenter reads.
fn judge_probe(probe: Look, since: &str, cluster: &str, tenant: &Queue) -> Verdict {
    match probe {
        Look::Gone | Look::Overtaken { .. } => Verdict::Holds(format!(
            "the probe {since} was taken from {}: something reads it, and of the Karpenter roles \
             adopt sees only {cluster}'s may (step 2)",
            tenant.name
        )),
        Look::Found { .. } | Look::FoundBehind { .. } => Verdict::Fails(format!(
            "the probe {since} is still in {}: nothing reads it. Check cluster {cluster}'s \
             Karpenter: settings.interruptionQueue (helm get values karpenter, or the Git \
             repository Argo CD or Flux applies), its pods and logs, and step 2's grant",
            tenant.name
        )),
        Look::Backlog(why) => Verdict::Fails(format!(
            "{why}: {} is not being read as Karpenter reads. Check cluster {cluster}'s Karpenter \
             (settings.interruptionQueue, its pods and logs)",
            tenant.name
        )),
    }
}

/// The sentinel (sent `since`) must still be in its old queue, received by nobody, with nothing
/// older met before it: only then does nothing read that queue.
fn judge_sentinel(sentinel: Look, since: &str, cluster: &str, queue: &Queue) -> Verdict {
    match sentinel {
        Look::Found { received_before: 0 } => Verdict::Holds(format!(
            "the sentinel {since} is still in {}, received by nobody, and nothing older than \
             it was met: nothing reads it",
            queue.name
        )),
        // A reader that came back starts on the oldest: it may not have reached the
        // sentinel yet. The backlog is judged by SQS's counts, as one a look cannot search.
        Look::FoundBehind {
            received_before: 0,
            older,
        } => Verdict::Backlog(format!(
            "the sentinel {since} is still in {}, received by nobody, but behind {older} \
             message(s) sent before the sentinel, which a reader on the queue would read first",
            queue.name
        )),
        Look::Found { received_before }
        | Look::FoundBehind {
            received_before, ..
        } => Verdict::Fails(format!(
            "the sentinel {since} in {} was received {received_before} time(s) and not \
             deleted: something still reads {} and fails to delete (a Karpenter whose role \
             lost sqs:DeleteMessage?)",
            queue.name, queue.name
        )),
        Look::Gone => Verdict::Fails(format!(
            "the sentinel {since} was taken from {}: something still reads it. {}",
            queue.name,
            still_read(cluster)
        )),
        Look::Overtaken { met } => Verdict::Fails(format!(
            "the look met {met} message(s) in {}, every one sent after the sentinel {since}, \
             and had to stop: what {} held before them was taken, the sentinel with it, so \
             something still reads it. {}",
            queue.name,
            queue.name,
            still_read(cluster)
        )),
        Look::Backlog(why) => Verdict::Backlog(why),
    }
}

/// A backlog the look could not search (`backlog`, the look having begun at `looked_from`):
/// SQS's own counts decide, over minutes to come, so the round's tag records the look and the
/// reading goes on.
async fn leave_to_counts(
    site: &impl Moves,
    s: &Start<'_, impl Deliveries>,
    round: &Round,
    looked_from: SystemTime,
    backlog: &[String],
    mut reading: Reading,
) -> Result<Reading> {
    let looked = Looked {
        from: looked_from,
        until: site.now(),
    };
    let counted = Round {
        backlog: Some(looked),
        ..round.clone()
    };
    tag(site, &s.tenant.url, EVIDENCE_TAG, &counted.tag()).await?;
    let window = Window::of(round.started, looked);
    reading.facts.push(format!(
        "{}: what the look met cannot say whether anything reads it",
        backlog.join("; ")
    ));
    reading.pending = Some(format!(
        "SQS's own counts of {} decide: nothing may have received or deleted a message of it in \
         {} (CloudWatch has each minute minutes after it ends); run --apply again after {}",
        s.old
            .iter()
            .map(|q| q.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        window.describe(),
        rfc3339(window.closes())
    ));
    Ok(reading)
}

/// A round with a backlog: SQS's counts of every old queue over the round's [`Window`].
async fn counts_read(
    site: &impl Moves,
    s: &Start<'_, impl Deliveries>,
    window: &Window,
) -> Result<Reading> {
    let cluster = s.cluster;
    let mut reading = Reading::default();
    let mut missing = Vec::new();
    for queue in s.old {
        let points = counts::fetch(site, &queue.name, window).await?;
        match counts::judge(window, &points) {
            Counted::Quiet { minutes } => reading.facts.push(format!(
                "SQS counted no message received or deleted from {} in {minutes} minute(s) of \
                 the round and after it ({}): nothing reads it",
                queue.name,
                window.describe()
            )),
            Counted::Read {
                received,
                deleted,
                minutes,
            } => reading.problems.push(format!(
                "SQS counted {received:.0} message(s) received and {deleted:.0} deleted from {} \
                 in {} UTC, besides adopt's own look: something still reads it. {}",
                queue.name,
                minutes
                    .iter()
                    .map(|m| counts::clock(*m))
                    .collect::<Vec<_>>()
                    .join(", "),
                still_read(cluster)
            )),
            Counted::Incomplete { missing: minutes } => missing.push((queue, minutes)),
        }
    }
    if !reading.problems.is_empty() || missing.is_empty() {
        return Ok(reading);
    }
    let what = missing
        .iter()
        .map(|(q, minutes)| {
            format!(
                "{} ({} UTC)",
                q.name,
                minutes
                    .iter()
                    .map(|m| counts::clock(*m))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    if site.now() < window.gives_up() {
        reading.pending = Some(format!(
            "CloudWatch does not have SQS's counts of {what} yet; run --apply again later"
        ));
    } else {
        reading.problems.push(format!(
            "CloudWatch still lacks SQS's counts of {what}, {} min after the round's last minute \
             ended: adopt cannot tell whether anything reads the old queue, so it disables \
             nothing. Run --apply again for a new round; or, once you have made sure that \
             Karpenter of {cluster} reads {} and nothing reads {} (helm get values karpenter in \
             its kube-context; its logs), disable the old rules yourself: {}",
            counts::PATIENCE.as_secs() / 60,
            s.tenant.name,
            s.old
                .iter()
                .map(|q| q.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            disable_commands(s.rules, s.region)
        ));
    }
    Ok(reading)
}

/// The commands that disable `rules` on the default bus, as the operator pastes them.
pub fn disable_commands(rules: &[String], region: &str) -> String {
    rules
        .iter()
        .map(|r| format!("aws events disable-rule --region {region} --name {r}"))
        .collect::<Vec<_>>()
        .join(" && ")
}

/// Puts one tag on a queue.
pub(super) async fn tag(site: &impl Moves, url: &str, key: &str, value: &str) -> Result<()> {
    site.tag_queue(url, key, value)
        .await
        .map_err(|e| anyhow::anyhow!("TagQueue {url}: {e}"))
}

/// Removes one tag from a queue.
pub(super) async fn untag(site: &impl Moves, url: &str, key: &str) -> Result<()> {
    site.untag_queue(url, key)
        .await
        .map_err(|e| anyhow::anyhow!("UntagQueue {url}: {e}"))
        .context("concluding adopt's evidence round")
}

#[cfg(test)]
mod tests;
