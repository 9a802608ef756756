//! `tenant:<cluster>:queue` and `:read`: the queue is the tenant stack's (so the router writes it),
//! and someone reads it: a message unread for a minute means no Karpenter is polling it.

use crate::deployment::Queue;
use std::time::{Duration, UNIX_EPOCH};

use router_core::{
    event::Kinds,
    tenancy::{self, KINDS_TAG, Ownership, TENANT_TAG},
};

use crate::{
    cloud::Cloud,
    verify::report::{Check, fail, pass},
};

/// What the router does to a cluster queue, and base.yaml's statement that allows it: send, and
/// tell a tenant queue from a look-alike.
pub const ROUTER_QUEUE_ACTIONS: [(&str, &str); 4] = [
    ("sqs:GetQueueUrl", "SendToClusterQueues"),
    ("sqs:SendMessage", "SendToClusterQueues"),
    ("sqs:ListQueueTags", "ReadClusterQueueOwnership"),
    ("sqs:GetQueueAttributes", "ReadClusterQueueOwnership"),
];

/// `<prefix>:queue`: the queue with the cluster's name is the tenant stack's, as the router judges
/// it ([`router_core::tenancy`]): its tenant tag, or a policy admitting the router alone. A
/// look-alike (EKS Blueprints names its own queue `karpenter-<cluster>`) is not written by the
/// router, so the cluster is not onboarded. It also says which event kinds the router sends the
/// cluster (the tenant stack's `EventKinds`, read from the same tags as the router reads them).
pub(crate) async fn check_ownership(
    aws: &impl Cloud,
    queue: &Queue,
    cluster: &str,
    sender: Option<&str>,
    prefix: &str,
) -> Check {
    let name = format!("{prefix}:queue");
    let tags = match aws.queue_tags(&queue.url).await {
        Ok(tags) => tags,
        Err(e) => {
            return fail(
                &name,
                format!("ListQueueTags {}: {e}", queue.name),
                "run verify with sqs:ListQueueTags",
            );
        }
    };
    let judged = tenancy::by_tag(tags.iter().map(|(k, v)| (k.as_str(), v.as_str())), cluster)
        .unwrap_or_else(|| tenancy::by_policy(queue.attribute("Policy"), sender));
    match judged {
        Ownership::Tenant => {
            match tenancy::kinds_by_tag(tags.iter().map(|(k, v)| (k.as_str(), v.as_str()))) {
                Ok(kinds) => pass(
                    &name,
                    format!(
                        "{} exists, tagged {TENANT_TAG}={cluster}; {}",
                        queue.name,
                        takes(kinds)
                    ),
                ),
                Err((_, why)) => fail(
                    &name,
                    format!(
                        "{} exists, tagged {TENANT_TAG}={cluster}, but {why}: the router sends it \
                     every kind",
                        queue.name
                    ),
                    "update the tenant stack with EventKinds=<kinds, comma-separated> (it writes \
                     the tag); a tag edited by hand is lost at the next update anyway",
                ),
            }
        }
        // The router reads the kinds only beside the tenant tag: without it, every kind.
        Ownership::LegacyTenant if tags.iter().any(|(k, _)| k == KINDS_TAG) => fail(
            &name,
            format!(
                "{} exists and its policy admits the router alone, so the router writes it, but \
                 its {KINDS_TAG} tag is not read without the {TENANT_TAG} tag: the router sends \
                 it every kind",
                queue.name
            ),
            format!(
                "tag it {TENANT_TAG}={cluster} (aws sqs tag-queue --queue-url {} --tags \
                 {TENANT_TAG}={cluster}); a tenant stack's update adds the tag",
                queue.url
            ),
        ),
        Ownership::LegacyTenant => pass(
            &name,
            format!(
                "{} exists, made by a tenant stack from before the {TENANT_TAG} tag (its policy \
                 admits the router alone); updating the stack adds the tag",
                queue.name
            ),
        ),
        Ownership::Foreign(why) => fail(
            &name,
            format!(
                "{} exists but the tenant stack did not make it: {why}. It looks like another \
                 tool's queue (EKS Blueprints names its own karpenter-<cluster>); the router does \
                 not write it, so {cluster} is not onboarded (counted as NoTenantQueue.{cluster}, \
                 paging nobody)",
                queue.name
            ),
            format!(
                "routerctl adopt --cluster {cluster} plans the move: the router's queue needs a \
                 name no other tool uses"
            ),
        ),
    }
}

/// The kinds a tenant takes, as verify reports them.
pub(crate) fn takes(kinds: Kinds) -> String {
    if kinds == Kinds::ALL {
        return "takes every event kind (EventKinds: all five)".to_owned();
    }
    let declined: Kinds = Kinds::ALL.iter().filter(|k| !kinds.contains(*k)).collect();
    format!("takes {kinds}; declines {declined} (EventKinds): counted as Declined, never sent")
}

/// How old a message in a cluster's queue may be: Karpenter long-polls and deletes what it reads
/// within seconds; the tenant stack's alarm pages at the same age.
pub const UNREAD_AFTER: Duration = Duration::from_secs(60);

/// `<prefix>:read`: nothing in the queue is older than [`UNREAD_AFTER`]. One receive that hides
/// nothing (visibility 0) and looks at what comes back; Karpenter deletes whatever it reads,
/// however often it was received.
pub(crate) async fn check_read(
    aws: &impl Cloud,
    queue: &Queue,
    cluster: &str,
    reader: Option<&str>,
    prefix: &str,
) -> Check {
    let name = format!("{prefix}:read");
    let messages = match aws.peek(&queue.url).await {
        Ok(messages) => messages,
        // The queue's policy lets Karpenter's role alone receive (tenant.yaml's
        // DenyReadersOtherThanKarpenter): the tenant stack's own alarm on the queue's oldest
        // message says instead whether anyone reads it.
        Err(e) if e.is_denial() => return read_by_its_alarm(aws, queue, cluster, &name, &e).await,
        Err(e) => {
            return fail(
                &name,
                format!("ReceiveMessage {}: {e}", queue.name),
                "run verify with sqs:ReceiveMessage on the cluster queues (it hides nothing: \
                 visibility 0)",
            );
        }
    };
    let now = aws
        .now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64;
    let oldest = messages
        .iter()
        .filter_map(|m| m.sent_ms)
        .map(|sent| Duration::from_millis(now.saturating_sub(sent)))
        .max();
    match oldest {
        Some(age) if age >= UNREAD_AFTER => fail(
            &name,
            format!(
                "{} holds a message {} s old: nobody reads it, and {cluster}'s Karpenter gets no \
                 interruption from the router (Karpenter deletes what it reads within seconds)",
                queue.name,
                age.as_secs()
            ),
            format!(
                "check {}: Karpenter's settings.interruptionQueue in cluster {cluster} (helm get \
                 values karpenter; or the Git repository Argo CD or Flux applies, which may have \
                 put an old value back), that its pods run, and that the role may still receive \
                 from and delete in {} (tenant:{cluster}:karpenter-role)",
                reader.map_or_else(
                    || "the Karpenter controller role (no tenant stack names it)".to_owned(),
                    |r| format!("the reader, role {r}")
                ),
                queue.name
            ),
        ),
        Some(age) => pass(
            &name,
            format!(
                "its oldest message is {} s old: someone reads it",
                age.as_secs()
            ),
        ),
        None => pass(&name, "empty: nothing waits unread"),
    }
}

/// `<prefix>:read` for a queue whose policy refuses this caller's receive: the tenant stack's
/// QueueAgeAlarm (ApproximateAgeOfOldestMessage of [`UNREAD_AFTER`] or more, evaluated by
/// CloudWatch each minute, a few minutes late at worst) in ALARM means nobody reads it.
async fn read_by_its_alarm(
    aws: &impl Cloud,
    queue: &Queue,
    cluster: &str,
    name: &str,
    refused: &router_core::aws::CallError,
) -> Check {
    // The tenant stack's alarm (`<stack>-QueueAgeAlarm-…`), else, for a queue another tool made
    // to the tenant contract, one named after the queue.
    let by_queue = format!("{}-QueueAgeAlarm", queue.name);
    // A caller refused DescribeStackResources still finds an alarm named after the queue; the
    // refusal is said if none is.
    let (stack, unread) = match aws.stack_of(&queue.url).await {
        Ok(stack) => (stack, String::new()),
        Err(e) => (
            None,
            format!(" (which stack made it is not known: DescribeStackResources failed: {e})"),
        ),
    };
    let mut alarm = None;
    for prefix in stack
        .map(|stack| format!("{stack}-QueueAgeAlarm"))
        .into_iter()
        .chain([by_queue.clone()])
    {
        match aws.alarms_named(&prefix).await {
            Ok(alarms) => alarm = alarms.into_iter().next(),
            Err(e) => {
                return fail(
                    name,
                    format!(
                        "{} refuses this caller's receive ({refused}), and DescribeAlarms failed: {e}",
                        queue.name
                    ),
                    "run verify with cloudwatch:DescribeAlarms",
                );
            }
        }
        if alarm.is_some() {
            break;
        }
    }
    let Some(alarm) = alarm else {
        return fail(
            name,
            format!(
                "{} refuses this caller's receive ({refused}), and no tenant stack's age alarm \
                 watches it{unread}, nor an alarm named {by_queue}: whether anyone reads it cannot \
                 be told",
                queue.name
            ),
            format!(
                "deploy {cluster}'s tenant stack (make deploy-tenant), which alarms on the queue's \
                 oldest message; or, for a queue made by another tool, alarm on its \
                 ApproximateAgeOfOldestMessage (60 s) as {by_queue}"
            ),
        );
    };
    match alarm.state.as_deref() {
        Some("ALARM") => fail(
            name,
            format!(
                "{}'s age alarm {} is in ALARM: a message has waited {} s or more unread, and \
                 {cluster}'s Karpenter gets no interruption from the router",
                queue.name,
                alarm.name,
                UNREAD_AFTER.as_secs()
            ),
            format!(
                "check Karpenter's settings.interruptionQueue in cluster {cluster} (helm get \
                 values karpenter), that its pods run, and that its role may still receive from \
                 and delete in {} (tenant:{cluster}:karpenter-role)",
                queue.name
            ),
        ),
        state => pass(
            name,
            format!(
                "only Karpenter's role may receive from {} (this caller is refused: {refused}); \
                 its age alarm {} is {}",
                queue.name,
                alarm.name,
                state.unwrap_or("of unknown state")
            ),
        ),
    }
}
