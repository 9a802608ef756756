//! adopt's evidence that a cluster's Karpenter has moved: it reads the router's queue, and
//! nothing reads the old one any more. Current and positive: read by the same `--apply` that then
//! disables the old rules, from nothing that lags.
//!
//! CloudWatch cannot say it. SQS reports `NumberOfMessagesDeleted` in one-minute datapoints,
//! minutes late, and counts every caller: "deleted lately" stays true for minutes after Karpenter
//! has left a queue (a GitOps controller reverting the helm value), and is as true when another
//! cluster's Karpenter reads it (a helm command run in the wrong kube-context). So a round puts
//! two kinds of message where only the right reader takes them, and looks for them later:
//!
//! * a **probe** through the router: a rebalance recommendation for one of the cluster's nodes,
//!   invoked synchronously so the router's answer confirms it reached the cluster's tenant queue.
//!   Karpenter reads it and deletes it without acting (a rebalance recommendation only records a
//!   Kubernetes event). Only this cluster's controller role may read that queue (step 2 checks
//!   every Karpenter role), so whoever took it is this cluster's Karpenter;
//! * a **sentinel** in each old queue: an EventBridge-shaped event that none of Karpenter's parsers
//!   knows (source `routerctl.adopt`), which Karpenter deletes as a no-op if it reads that queue.
//!
//! After [`QUIET_WINDOW`] (three of Karpenter's 20-s receive cycles, with a margin) the probe must
//! be gone and every sentinel still there, received by nobody. The messages live as long as their
//! queues keep messages (300 s for Karpenter's own queues), so a round read too late is started
//! again. Looking is a receive: each message met on the way is made visible again at once
//! (ChangeMessageVisibility to 0); what adopt put there is deleted. Plans never look: a look
//! receives the sentinel itself, and only the one `--apply` that decides may do that.
//!
//! **A busy old queue.** Karpenter's own rules have no cluster filter, so once Karpenter has moved
//! the old queue fills with every interruption event of the account and region, up to its
//! retention: tens of thousands of messages in a busy account, among which a look (at most
//! [`MAX_LOOK_RECEIVES`] receives) cannot find the sentinel. That backlog is itself what nobody
//! reading looks like, but it cannot show a reader that came back during the round (a GitOps
//! revert): such a reader starts on the oldest messages, far from the sentinel. So where an old
//! queue is too full to look through, and no other Karpenter role may read it (IAM, as step 2
//! reads it), the round gets a **closing probe**: a second probe through the router, read
//! [`CLOSING_WINDOW`] later. Karpenter reads one queue; taking the closing probe from the tenant
//! queue puts this cluster's Karpenter there at the end of the round, the moment before step 5
//! disables the old rules, and no other Karpenter may read the old queue. A round costs the same
//! bounded number of calls whatever the backlog: two looks of at most [`MAX_LOOK_RECEIVES`]
//! receives per queue, two probes.

use std::{
    collections::HashSet,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use anyhow::{Context, Result, bail};
use aws_sdk_lambda::{primitives::Blob, types::InvocationType};
use aws_sdk_sqs::types::{
    ChangeMessageVisibilityBatchRequestEntry, Message, MessageSystemAttributeName,
};
use interruption_router::event::rfc3339_unix_millis;
use serde_json::{Value, json};

use crate::verify::queues::Queue;
use aws_model::{
    aws::{Aws, describe},
    events::{Origin, rfc3339},
};

/// The round under way, on the cluster's tenant queue: `<RFC 3339 start> <probe event id>`.
pub const EVIDENCE_TAG: &str = "interruption-router:adopt-evidence";
/// When evidence last held (RFC 3339), on the tenant queue: with the old rules disabled since,
/// step 4 stays done until a rollback.
pub const VERIFIED_TAG: &str = "interruption-router:adopt-verified";

/// How long a round runs before `--apply` reads it: Karpenter long-polls for 20 s at a time on
/// its leader and returns as soon as a message arrives, so a reader takes a message within one
/// cycle; three cycles, and a margin for a leader handing over.
pub const QUIET_WINDOW: Duration = Duration::from_secs(65);
/// What a round leaves to the queue's retention: read it later and the messages may have expired.
const RETENTION_MARGIN: Duration = Duration::from_secs(30);
/// How long a look hides a message it receives: as long as the look takes (its receives, a few
/// seconds in AWS), since a message that shows again before the look ends is met twice and the
/// look cannot page on; short, should the look fail to make them visible again at its end (it
/// normally does), since the reader it hides them from may be Karpenter.
const LOOK_HIDE_SECS: i32 = 30;
/// Receives per look: up to 1,000 messages; a fuller queue is not one Karpenter reads.
pub const MAX_LOOK_RECEIVES: usize = 100;
/// How long after the closing probe `--apply` reads it: one of Karpenter's 20-s receive cycles,
/// and a margin.
pub const CLOSING_WINDOW: Duration = Duration::from_secs(25);

/// A round: when it started and the probe's event id (the sentinels' ids derive from it), and its
/// closing probe once one was sent (a busy old queue).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Round {
    pub started: SystemTime,
    pub probe: String,
    pub closing: Option<Closing>,
}

/// The second probe of a round whose old queue was too full to look through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closing {
    pub sent: SystemTime,
    pub probe: String,
}

fn parse_time(at: &str) -> Option<SystemTime> {
    let ms = u64::try_from(rfc3339_unix_millis(at)?).ok()?;
    Some(UNIX_EPOCH + Duration::from_millis(ms))
}

impl Round {
    /// `<start> <probe>`, or `<start> <probe> <closing sent> <closing probe>`.
    pub fn parse(tag: &str) -> Option<Round> {
        let parts: Vec<&str> = tag.split(' ').collect();
        let closing = match parts[..] {
            [_, _] => None,
            [_, _, sent, probe] => Some(Closing {
                sent: parse_time(sent)?,
                probe: probe.to_owned(),
            }),
            _ => return None,
        };
        Some(Round {
            started: parse_time(parts[0])?,
            probe: parts[1].to_owned(),
            closing,
        })
    }

    pub fn tag(&self) -> String {
        match &self.closing {
            None => format!("{} {}", rfc3339(self.started), self.probe),
            Some(c) => format!(
                "{} {} {} {}",
                rfc3339(self.started),
                self.probe,
                rfc3339(c.sent),
                c.probe
            ),
        }
    }

    pub fn sentinel(&self) -> String {
        format!("{}-sentinel", self.probe)
    }

    pub fn age(&self) -> Duration {
        since(self.started)
    }

    /// Old enough to read: the round's quiet window, or its closing probe's.
    pub fn ripe(&self) -> bool {
        match &self.closing {
            None => self.age() >= QUIET_WINDOW,
            Some(c) => since(c.sent) >= CLOSING_WINDOW,
        }
    }

    /// Too old to read: its messages may have expired from `queues` (their retention). Once a
    /// closing probe is out, only it is still to be read.
    pub(crate) fn expired<'a>(&self, queues: impl IntoIterator<Item = &'a Queue>) -> bool {
        let since_sent = match &self.closing {
            None => self.age(),
            Some(c) => since(c.sent),
        };
        since_sent > Self::expired_after(queues)
    }

    /// How long after its start a round over `queues` can still be read: the shortest retention,
    /// less a margin.
    fn expired_after<'a>(queues: impl IntoIterator<Item = &'a Queue>) -> Duration {
        queues
            .into_iter()
            .filter_map(|q| {
                q.attributes
                    .get("MessageRetentionPeriod")?
                    .parse::<u64>()
                    .ok()
            })
            .min()
            .map_or(Duration::MAX, |s| {
                Duration::from_secs(s).saturating_sub(RETENTION_MARGIN)
            })
    }
}

fn since(at: SystemTime) -> Duration {
    SystemTime::now().duration_since(at).unwrap_or_default()
}

/// What a round is sent with, and read with.
pub(crate) struct Start<'a> {
    pub cluster: &'a str,
    pub account: &'a str,
    pub region: &'a str,
    /// The router function (the base stack's FunctionName output).
    pub function: &'a str,
    /// A node of the cluster the probe names.
    pub node: &'a str,
    pub tenant: &'a Queue,
    pub old: &'a [&'a Queue],
}

/// Sends the probe through the router and a sentinel into each old queue, then records the round
/// on the tenant queue. What was sent, in a sentence.
pub(crate) async fn start(aws: &Aws, s: &Start<'_>) -> Result<String> {
    let origin = Origin {
        account: s.account.to_owned(),
        region: s.region.to_owned(),
    };
    let started = SystemTime::now();
    let millis = started
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    let round = Round {
        started,
        probe: format!("routerctl-adopt-{}-{millis}", s.cluster),
        closing: None,
    };
    send_probe(aws, s, &origin, &round.probe).await?;
    for queue in s.old {
        let body = json!({
            "version": "0", "id": round.sentinel(), "source": "routerctl.adopt",
            "detail-type": "routerctl adopt sentinel", "account": s.account,
            "time": rfc3339(started), "region": s.region, "resources": [],
            "detail": {"cluster": s.cluster, "purpose": "adopt checks that nothing reads this \
                queue any more: Karpenter deletes this message unread if it still does"}});
        aws.sqs
            .send_message()
            .queue_url(&queue.url)
            .message_body(body.to_string())
            .send()
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "SendMessage to {} (adopt's sentinel): {}; adopt needs sqs:SendMessage on the \
                     old queue to tell whether anything still reads it",
                    queue.name,
                    describe(&e)
                )
            })?;
    }
    tag(aws, &s.tenant.url, EVIDENCE_TAG, &round.tag()).await?;
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
async fn send_probe(aws: &Aws, s: &Start<'_>, origin: &Origin, id: &str) -> Result<()> {
    let probe = origin.rebalance(s.node, id);
    // Synchronous, so the router's answer says whether the probe reached the tenant queue: a
    // probe that never arrived would look taken. Sent as the one record of an SQS batch, the only
    // payload the router reads; without an eventSourceARN, the router answers its outcome.
    let batch = json!({"Records": [{
        "messageId": id, "body": probe.body(), "eventSource": "aws:sqs",
        "attributes": {"ApproximateReceiveCount": "1"}, "messageAttributes": {},
    }]});
    let out = aws
        .lambda
        .invoke()
        .function_name(s.function)
        .invocation_type(InvocationType::RequestResponse)
        .payload(Blob::new(batch.to_string()))
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("Invoke {} (the probe): {}", s.function, describe(&e)))?;
    let answer: Value = out
        .payload()
        .and_then(|p| serde_json::from_slice(p.as_ref()).ok())
        .unwrap_or(Value::Null);
    if out.function_error().is_some() || answer["outcomes"][id] != "forwarded" {
        bail!(
            "the router did not forward the probe ({id}) to {}: it answered {answer}{}; routerctl \
             verify --cluster {} says why",
            s.tenant.name,
            out.function_error()
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
    /// The round goes on: a closing probe was sent (what to do next, in a sentence).
    pub pending: Option<String>,
}

impl Reading {
    /// The round is over and everything held.
    pub fn held(&self) -> bool {
        self.problems.is_empty() && self.pending.is_none()
    }
}

/// Reads `round`. First: the probe gone from the tenant queue, each sentinel still in its old
/// queue and received by nobody; an old queue too full to look through, that no other Karpenter
/// role may read (`others`, per old queue), gets the round a closing probe instead, read on the
/// next `--apply`. Then: the closing probe gone too. Concludes the round unless a closing probe is
/// pending (its tag removed, adopt's messages deleted); records [`VERIFIED_TAG`] when it held.
pub(crate) async fn read(
    aws: &Aws,
    s: &Start<'_>,
    round: &Round,
    others: &[Vec<String>],
) -> Result<Reading> {
    let mut reading = match &round.closing {
        None => first_read(aws, s, round, others).await?,
        Some(closing) => closing_read(aws, s, closing, others).await?,
    };
    if reading.problems.is_empty() && reading.pending.is_some() {
        return Ok(reading);
    }
    reading.pending = None;
    untag(aws, &s.tenant.url, EVIDENCE_TAG).await?;
    if reading.held() {
        tag(
            aws,
            &s.tenant.url,
            VERIFIED_TAG,
            &rfc3339(SystemTime::now()),
        )
        .await?;
    }
    Ok(reading)
}

async fn first_read(
    aws: &Aws,
    s: &Start<'_>,
    round: &Round,
    others: &[Vec<String>],
) -> Result<Reading> {
    let Start {
        cluster, tenant, ..
    } = *s;
    let mut reading = Reading::default();
    let since = format!("sent {} s ago", round.age().as_secs());
    match look(aws, tenant, &round.probe).await? {
        Look::Gone => reading.facts.push(format!(
            "the probe {since} was taken from {}: Karpenter of {cluster} reads it",
            tenant.name
        )),
        Look::Found { .. } => reading.problems.push(format!(
            "the probe {since} is still in {}: nothing reads it. Check cluster {cluster}'s \
             Karpenter: settings.interruptionQueue (helm get values karpenter, or the Git \
             repository Argo CD or Flux applies), its pods and logs, and step 2's grant",
            tenant.name
        )),
        Look::TooMany(why) => reading.problems.push(why),
    }
    let mut busy = Vec::new();
    for (n, queue) in s.old.iter().enumerate() {
        match look(aws, queue, &round.sentinel()).await? {
            Look::Found { received_before: 0 } => reading.facts.push(format!(
                "the sentinel {since} is still in {}, received by nobody: nothing reads it",
                queue.name
            )),
            Look::Found { received_before } => reading.problems.push(format!(
                "the sentinel {since} in {} was received {received_before} time(s) and not \
                 deleted: something still reads {} and fails to delete (a Karpenter whose role \
                 lost sqs:DeleteMessage?)",
                queue.name, queue.name
            )),
            Look::Gone => reading.problems.push(format!(
                "the sentinel {since} was taken from {}: something still reads it. Karpenter of \
                 {cluster} still points at it: the helm change did not happen, ran in another \
                 kube-context (which points that cluster's Karpenter at the new queue: check \
                 there too), or was put back by whatever owns the value (Argo CD self-heal, \
                 Flux, a Terraform helm_release): change settings.interruptionQueue where it \
                 reads it",
                queue.name
            )),
            Look::TooMany(why) => match others.get(n).filter(|o| !o.is_empty()) {
                Some(readers) => reading.problems.push(format!(
                    "{why}; and {} may read it too, so the sentinel was the only way to tell that \
                     none of them does: make sure none reads {} (routerctl verify), or take \
                     sqs:ReceiveMessage on it from their policies",
                    readers.join(", "),
                    queue.name
                )),
                None => busy.push(queue.name.as_str()),
            },
        }
    }
    if !reading.problems.is_empty() || busy.is_empty() {
        return Ok(reading);
    }
    // Too full to find the sentinel in: a closing probe puts Karpenter on the tenant queue at the
    // end of the round.
    let closing = Closing {
        sent: SystemTime::now(),
        probe: format!("{}-closing", round.probe),
    };
    let origin = Origin {
        account: s.account.to_owned(),
        region: s.region.to_owned(),
    };
    send_probe(aws, s, &origin, &closing.probe).await?;
    let closed = Round {
        closing: Some(closing.clone()),
        ..round.clone()
    };
    tag(aws, &tenant.url, EVIDENCE_TAG, &closed.tag()).await?;
    reading.facts.push(format!(
        "{} hold(s) more than {} messages, too many to find the sentinel in: nothing has \
         drained them, and no other Karpenter role may read them",
        busy.join(", "),
        MAX_LOOK_RECEIVES * 10
    ));
    reading.pending = Some(format!(
        "sent closing probe {} through {} to {}: Karpenter of {cluster} must take it too, which \
         puts it on {} now and so off {} (a Karpenter reads one queue); run --apply again in {} s \
         to read it",
        closing.probe,
        s.function,
        tenant.name,
        tenant.name,
        busy.join(", "),
        CLOSING_WINDOW.as_secs()
    ));
    Ok(reading)
}

async fn closing_read(
    aws: &Aws,
    s: &Start<'_>,
    closing: &Closing,
    others: &[Vec<String>],
) -> Result<Reading> {
    let Start {
        cluster, tenant, ..
    } = *s;
    let mut reading = Reading::default();
    let since = format!("sent {} s ago", since(closing.sent).as_secs());
    let old: Vec<&str> = s.old.iter().map(|q| q.name.as_str()).collect();
    match look(aws, tenant, &closing.probe).await? {
        Look::Gone => reading.facts.push(format!(
            "the closing probe {since} was taken from {}: Karpenter of {cluster} reads it now, \
             so not {} (a Karpenter reads one queue), which no other Karpenter role may read",
            tenant.name,
            old.join(", ")
        )),
        Look::Found { .. } => reading.problems.push(format!(
            "the closing probe {since} is still in {}: Karpenter of {cluster} took the first \
             probe but no longer reads {}. Whatever owns settings.interruptionQueue (Argo CD \
             self-heal, Flux, a Terraform helm_release) may have put the old queue back: change \
             it where it is read",
            tenant.name, tenant.name
        )),
        Look::TooMany(why) => reading.problems.push(why),
    }
    // Roles may have changed since the first read.
    for (queue, readers) in s.old.iter().zip(others) {
        if !readers.is_empty() {
            reading.problems.push(format!(
                "{} may now read {} too: make sure none does (routerctl verify), or take \
                 sqs:ReceiveMessage on it from their policies",
                readers.join(", "),
                queue.name
            ));
        }
    }
    Ok(reading)
}

/// What a look found of the message adopt put in a queue.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Look {
    /// Still there; received this many times before this look.
    Found { received_before: u32 },
    /// Not there: deleted by a reader (or, if the round is too old, expired).
    Gone,
    /// Too many messages in the way to find it.
    TooMany(String),
}

/// Receives through `queue` until the message with event id `id` turns up or the queue has
/// nothing more to give; makes every other message visible again at once, deletes adopt's.
async fn look(aws: &Aws, queue: &Queue, id: &str) -> Result<Look> {
    let mut met: Vec<String> = Vec::new();
    let mut ids: HashSet<String> = HashSet::new();
    let mut found: Option<Message> = None;
    let mut exhausted = false;
    let mut wrapped = false;
    for _ in 0..MAX_LOOK_RECEIVES {
        let out = aws
            .sqs
            .receive_message()
            .queue_url(&queue.url)
            .max_number_of_messages(10)
            .visibility_timeout(LOOK_HIDE_SECS)
            // Long polling asks every SQS server; a short poll samples some and may miss it.
            .wait_time_seconds(1)
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            .send()
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "ReceiveMessage on {} (adopt looks for its own message): {}",
                    queue.name,
                    describe(&e)
                )
            })?;
        let messages = out.messages();
        if messages.is_empty() {
            exhausted = true;
            break;
        }
        for message in messages {
            // Met before: its hide ran out before the look ended, so the look is not paging
            // through the queue any more.
            if let Some(id) = message.message_id()
                && !ids.insert(id.to_owned())
            {
                wrapped = true;
            }
            let is_ours = message
                .body()
                .and_then(|b| serde_json::from_str::<Value>(b).ok())
                .is_some_and(|b| b["id"] == id);
            match (is_ours, message.receipt_handle()) {
                (true, _) => found = Some(message.clone()),
                (false, Some(handle)) => met.push(handle.to_owned()),
                (false, None) => {}
            }
        }
        if found.is_some() || wrapped {
            break;
        }
    }
    release(aws, queue, &met).await;
    if let Some(message) = found {
        let receives: u32 = message
            .attributes()
            .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
            .and_then(|n| n.parse().ok())
            .unwrap_or(1);
        if let Some(handle) = message.receipt_handle() {
            aws.sqs
                .delete_message()
                .queue_url(&queue.url)
                .receipt_handle(handle)
                .send()
                .await
                .map_err(|e| {
                    anyhow::anyhow!("DeleteMessage on {}: {}", queue.name, describe(&e))
                })?;
        }
        return Ok(Look::Found {
            received_before: receives.saturating_sub(1),
        });
    }
    Ok(if wrapped {
        Look::TooMany(format!(
            "{} could not be looked through before what the look had met showed again ({} s): \
             it holds more than {} receives take in that time",
            queue.name,
            LOOK_HIDE_SECS,
            ids.len()
        ))
    } else if exhausted {
        Look::Gone
    } else {
        Look::TooMany(format!(
            "{} holds more than {} messages, too many to look through: nothing reads it, or \
             something writes it faster than Karpenter reads",
            queue.name,
            MAX_LOOK_RECEIVES * 10
        ))
    })
}

/// Makes what a look received visible again, ten at a time.
async fn release(aws: &Aws, queue: &Queue, handles: &[String]) {
    for chunk in handles.chunks(10) {
        let entries = chunk
            .iter()
            .enumerate()
            .filter_map(|(n, handle)| {
                ChangeMessageVisibilityBatchRequestEntry::builder()
                    .id(n.to_string())
                    .receipt_handle(handle)
                    .visibility_timeout(0)
                    .build()
                    .ok()
            })
            .collect();
        // On failure they return after LOOK_HIDE_SECS on their own.
        if let Err(e) = aws
            .sqs
            .change_message_visibility_batch()
            .queue_url(&queue.url)
            .set_entries(Some(entries))
            .send()
            .await
        {
            tracing::warn!(queue = %queue.name, error = %describe(&e), "could not make messages visible again; they return in {LOOK_HIDE_SECS} s");
        }
    }
}

/// Puts one tag on a queue.
pub(super) async fn tag(aws: &Aws, url: &str, key: &str, value: &str) -> Result<()> {
    aws.sqs
        .tag_queue()
        .queue_url(url)
        .tags(key, value)
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("TagQueue {url}: {}", describe(&e)))?;
    Ok(())
}

/// Removes one tag from a queue.
pub(super) async fn untag(aws: &Aws, url: &str, key: &str) -> Result<()> {
    aws.sqs
        .untag_queue()
        .queue_url(url)
        .tag_keys(key)
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("UntagQueue {url}: {}", describe(&e)))
        .context("concluding adopt's evidence round")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_reads_back_from_its_tag_and_ripens() {
        let round = Round {
            started: UNIX_EPOCH + Duration::from_millis(1_700_000_000_000),
            probe: "routerctl-adopt-alpha-1700000000000".into(),
            closing: None,
        };
        assert_eq!(Round::parse(&round.tag()), Some(round.clone()));
        assert!(round.ripe());
        let fresh = Round {
            started: SystemTime::now(),
            ..round
        };
        assert!(!fresh.ripe());
        assert_eq!(Round::parse("not a round"), None);
    }

    #[test]
    fn a_round_older_than_its_queues_keep_messages_is_expired() {
        let queue = |retention: &str| Queue {
            name: "q".into(),
            arn: "arn".into(),
            url: "url".into(),
            attributes: [("MessageRetentionPeriod".to_owned(), retention.to_owned())].into(),
        };
        let round = |age: u64| Round {
            started: SystemTime::now() - Duration::from_secs(age),
            probe: "p".into(),
            closing: None,
        };
        let (short, long) = (queue("300"), queue("345600"));
        assert!(!round(100).expired([&short, &long]));
        assert!(round(280).expired([&short, &long]));
        assert!(!round(280).expired([&long]));
        assert_eq!(
            Round::expired_after([&short, &long]),
            Duration::from_secs(270)
        );
    }

    #[test]
    fn a_round_with_a_closing_probe_reads_back_and_ripens_on_the_closing_probes_window() {
        let started = UNIX_EPOCH + Duration::from_millis(1_700_000_000_000);
        let closing = Closing {
            sent: SystemTime::now(),
            probe: "routerctl-adopt-alpha-1700000000000-closing".into(),
        };
        let round = Round {
            started,
            probe: "routerctl-adopt-alpha-1700000000000".into(),
            closing: Some(Closing {
                // The tag keeps whole seconds.
                sent: UNIX_EPOCH
                    + Duration::from_secs(
                        closing.sent.duration_since(UNIX_EPOCH).unwrap().as_secs(),
                    ),
                ..closing
            }),
        };
        assert_eq!(Round::parse(&round.tag()), Some(round.clone()));
        // Long past its quiet window, but its closing probe was just sent.
        assert!(!round.ripe());
        let later = Round {
            closing: Some(Closing {
                sent: SystemTime::now() - CLOSING_WINDOW,
                probe: "c".into(),
            }),
            ..round
        };
        assert!(later.ripe());
        // Its first messages are long gone; the closing probe is what is read now.
        let queue = Queue {
            name: "q".into(),
            arn: "arn".into(),
            url: "url".into(),
            attributes: [("MessageRetentionPeriod".to_owned(), "300".to_owned())].into(),
        };
        assert!(!later.expired([&queue]));
        assert!(
            Round {
                closing: None,
                ..later.clone()
            }
            .expired([&queue])
        );
        assert_eq!(Round::parse("2026-01-01T00:00:00Z a b"), None);
    }
}
