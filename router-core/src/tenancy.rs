//! Tenancy: whether a queue that carries a cluster's queue name is the router's to write.
//!
//! A name is not enough. Other tools name their queues as the router does: EKS Blueprints'
//! Karpenter addon makes `karpenter-<cluster>`, the router's default name, and feeds it with rules
//! of its own, so a router that wrote into it would hand that Karpenter every event twice. The
//! router writes only into queues its tenant stack made:
//!
//! * tenant.yaml tags its queue [`TENANT_TAG`]`=<cluster>`: read once with the queue's URL
//!   (ListQueueTags) and cached with it;
//! * tenant queues made before that tag existed are recognised by what they have had from the
//!   start: a policy that admits exactly one sender, the router, and denies every other
//!   ([`admits_only`], one GetQueueAttributes). So upgrading only the base stack silences none.
//!
//! The same tags carry what the cluster takes: [`KINDS_TAG`] lists the event kinds its tenant
//! stack chose ([`kinds_by_tag`]); a queue without it (a tenant queue from before the choice
//! existed) takes all five.
//!
//! Anything else with the name is [`Ownership::Foreign`]: its cluster counts as not onboarded
//! (its own set-up still delivers to it), which `routerctl verify` and `adopt` explain.
//!
//! Whether a cluster is onboarded at all is a durable fact in AWS, not something an execution
//! environment remembers: tenant.yaml also writes a **tenant record** beside its queue, the SSM
//! parameter [`record_name`] of the queue's name. It outlives a queue deleted by hand and goes with
//! the stack. So when a cluster's queue is missing, every environment, warm or cold, reads the
//! record and decides the same: the record stands, the queue was lost (dead-lettered
//! `queue-missing`, which pages); no record, the cluster is not onboarded (counted, not paged).

use serde_json::Value;

use crate::event::Kinds;

/// The tag tenant.yaml puts on its queue; the value is the cluster's name.
pub const TENANT_TAG: &str = "interruption-router:tenant";

/// The tag tenant.yaml puts on its queue naming the event kinds the cluster takes
/// ([`Kinds`]' labels, space-separated: a tag value cannot hold a comma).
pub const KINDS_TAG: &str = "interruption-router:kinds";

/// Where tenant records live (an SSM parameter path): IAM grants the router `ssm:GetParameter`
/// under it only.
pub const RECORD_PATH: &str = "/interruption-router/tenant-queues/";

/// The tenant record of the queue named `queue` (tenant.yaml's `TenantRecord`).
pub fn record_name(queue: &str) -> String {
    format!("{RECORD_PATH}{queue}")
}

/// How long "this queue is not the router's" is believed: SQS will not let a deleted queue's
/// name be taken again for 60 s, so a tenant queue cannot replace a look-alike any sooner.
pub const FOREIGN_RECHECK: std::time::Duration = std::time::Duration::from_secs(60);

/// Whose a queue with a cluster's queue name is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ownership {
    /// Tagged by the tenant stack for this cluster.
    Tenant,
    /// Made by a tenant stack before the tag existed: its policy admits only the router.
    LegacyTenant,
    /// Not made by the router's tenant stack, and why.
    Foreign(String),
}

impl Ownership {
    pub fn is_routers(&self) -> bool {
        matches!(self, Ownership::Tenant | Ownership::LegacyTenant)
    }
}

/// What the queue's tags say: `Some` when they settle it (the tag names this cluster, or another
/// one), `None` when the queue has no tenant tag.
pub fn by_tag<'a>(
    tags: impl IntoIterator<Item = (&'a str, &'a str)>,
    cluster: &str,
) -> Option<Ownership> {
    let (_, value) = tags.into_iter().find(|(k, _)| *k == TENANT_TAG)?;
    Some(if value == cluster {
        Ownership::Tenant
    } else {
        Ownership::Foreign(format!(
            "it is tagged {TENANT_TAG}={value}, another cluster's queue"
        ))
    })
}

/// The kinds a tenant queue's tags say its cluster takes: all of them without [`KINDS_TAG`].
/// `Err` (all of them, and why) when the tag names no kind or one the router does not know: a
/// hand-edited tag costs the cluster nothing it would have had.
pub fn kinds_by_tag<'a>(
    tags: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<Kinds, (Kinds, String)> {
    match tags.into_iter().find(|(k, _)| *k == KINDS_TAG) {
        None => Ok(Kinds::ALL),
        Some((_, value)) => Kinds::parse(value).map_err(|why| {
            (
                Kinds::ALL,
                format!("its {KINDS_TAG} tag {value:?} is not a list of kinds ({why})"),
            )
        }),
    }
}

/// Judges a queue with no tenant tag by its policy (`None`: it has none).
pub fn by_policy(policy: Option<&str>, sender: Option<&str>) -> Ownership {
    match policy {
        Some(policy) if admits_only(policy, sender) => Ownership::LegacyTenant,
        Some(_) => Ownership::Foreign(format!(
            "it has no {TENANT_TAG} tag and its policy does not admit the router as its only \
             sender, so another tool made it"
        )),
        None => Ownership::Foreign(format!(
            "it has no {TENANT_TAG} tag and no policy, so another tool made it"
        )),
    }
}

/// Whether `policy` admits one sender only, `sender` (any one principal when the router does not
/// know its own role ARN): an Allow of `sqs:SendMessage` to it, and a Deny of `sqs:SendMessage` to
/// every principal whose `aws:PrincipalArn` is not it. That is tenant.yaml's policy from its first
/// version; no other tool's set-up writes it.
pub fn admits_only(policy: &str, sender: Option<&str>) -> bool {
    let Ok(document) = serde_json::from_str::<Value>(policy) else {
        return false;
    };
    let statements: Vec<&Value> = match &document["Statement"] {
        Value::Array(list) => list.iter().collect(),
        one @ Value::Object(_) => vec![one],
        _ => return false,
    };
    let allowed: Vec<&str> = statements
        .iter()
        .filter(|s| s["Effect"] == "Allow" && sends(s))
        .flat_map(|s| strings(&s["Principal"]["AWS"]))
        .collect();
    let [principal] = allowed.as_slice() else {
        return false;
    };
    if sender.is_some_and(|sender| sender != *principal) {
        return false;
    }
    statements.iter().any(|s| {
        s["Effect"] == "Deny"
            && sends(s)
            && (s["Principal"] == "*" || s["Principal"]["AWS"] == "*")
            && condition(s, "ArnNotEquals", "aws:PrincipalArn") == [*principal]
    })
}

/// Whether a statement's actions include sending.
fn sends(statement: &Value) -> bool {
    strings(&statement["Action"])
        .iter()
        .any(|a| a.eq_ignore_ascii_case("sqs:SendMessage") || a.eq_ignore_ascii_case("sqs:*"))
}

/// The values of `operator` → `key` in a statement's condition (keys compare case-insensitively,
/// as IAM's do).
fn condition<'a>(statement: &'a Value, operator: &str, key: &str) -> Vec<&'a str> {
    statement["Condition"][operator]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.eq_ignore_ascii_case(key))
        .flat_map(|(_, v)| strings(v))
        .collect()
}

/// A policy element that is a string or a list of strings.
fn strings(value: &Value) -> Vec<&str> {
    match value {
        Value::String(s) => vec![s.as_str()],
        Value::Array(list) => list.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const ROUTER: &str = "arn:aws:iam::111111111111:role/interruption-router-RouterRole-X";

    /// tenant.yaml's policy as CloudFormation renders it.
    fn tenant_policy(sender: &str) -> String {
        let queue = "arn:aws:sqs:us-east-1:111111111111:karpenter-alpha";
        json!({"Version": "2012-10-17", "Statement": [
            {"Sid": "AllowRouterToSend", "Effect": "Allow", "Principal": {"AWS": sender},
             "Action": "sqs:SendMessage", "Resource": queue},
            {"Sid": "DenySendersOtherThanRouter", "Effect": "Deny", "Principal": "*",
             "Action": "sqs:SendMessage", "Resource": queue,
             "Condition": {"ArnNotEquals": {"aws:PrincipalArn": sender}}},
            {"Sid": "DenyInsecureTransport", "Effect": "Deny", "Principal": "*",
             "Action": "sqs:*", "Resource": queue,
             "Condition": {"Bool": {"aws:SecureTransport": "false"}}}]})
        .to_string()
    }

    #[test]
    fn the_tenant_tag_settles_it() {
        assert_eq!(
            by_tag([(TENANT_TAG, "alpha"), ("team", "x")], "alpha"),
            Some(Ownership::Tenant)
        );
        let other = by_tag([(TENANT_TAG, "beta")], "alpha").unwrap();
        assert!(!other.is_routers(), "{other:?}");
        assert_eq!(by_tag([("ClusterName", "alpha")], "alpha"), None);
    }

    #[test]
    fn the_kinds_tag_says_what_the_cluster_takes_and_its_absence_all() {
        use crate::event::Kind;
        let chosen = kinds_by_tag([
            (TENANT_TAG, "alpha"),
            (KINDS_TAG, "spot-interruption state-change"),
        ])
        .unwrap();
        assert!(chosen.contains(Kind::SpotInterruption) && chosen.contains(Kind::StateChange));
        assert!(!chosen.contains(Kind::ScheduledChange));
        assert!(!chosen.contains(Kind::RebalanceRecommendation));
        assert_eq!(kinds_by_tag([(TENANT_TAG, "alpha")]), Ok(Kinds::ALL));
        for broken in ["", "spot"] {
            let (kinds, why) = kinds_by_tag([(KINDS_TAG, broken)]).unwrap_err();
            assert_eq!(kinds, Kinds::ALL, "nothing is lost to a broken tag");
            assert!(why.contains(KINDS_TAG), "{why}");
        }
    }

    #[test]
    fn a_tenant_queue_from_before_the_tag_is_known_by_its_policy() {
        assert!(admits_only(&tenant_policy(ROUTER), Some(ROUTER)));
        assert!(admits_only(&tenant_policy(ROUTER), None));
        assert_eq!(
            by_policy(Some(&tenant_policy(ROUTER)), Some(ROUTER)),
            Ownership::LegacyTenant
        );
        // Another sender's queue of the same shape is not the router's.
        let other = "arn:aws:iam::111111111111:role/someone-else";
        assert!(!admits_only(&tenant_policy(other), Some(ROUTER)));
    }

    /// Every part of tenant.yaml's policy is needed: the Allow to the router alone, and the Deny
    /// of sending to every other principal.
    #[test]
    fn only_the_whole_tenant_policy_admits_one_sender() {
        assert!(Ownership::Tenant.is_routers() && Ownership::LegacyTenant.is_routers());
        let queue = "arn:aws:sqs:us-east-1:111111111111:karpenter-alpha";
        let allow = |principal: Value| {
            json!({"Effect": "Allow", "Principal": {"AWS": principal},
                   "Action": "sqs:SendMessage", "Resource": queue})
        };
        let deny = |action: &str, principal: Value, not: &str| {
            json!({"Effect": "Deny", "Principal": principal, "Action": action, "Resource": queue,
                   "Condition": {"ArnNotEquals": {"aws:PrincipalArn": not}}})
        };
        let policy = |statements: Vec<Value>| json!({"Statement": statements}).to_string();
        // The principal as a one-item list, and the Deny's `{"AWS": "*"}` form.
        let listed = policy(vec![
            allow(json!([ROUTER])),
            deny("sqs:SendMessage", json!({"AWS": "*"}), ROUTER),
        ]);
        assert!(admits_only(&listed, Some(ROUTER)), "{listed}");
        for (why, statements) in [
            ("no Deny", vec![allow(json!(ROUTER))]),
            (
                "a Deny of receiving, not sending",
                vec![
                    allow(json!(ROUTER)),
                    deny("sqs:ReceiveMessage", json!("*"), ROUTER),
                ],
            ),
            (
                "a Deny that spares another principal",
                vec![
                    allow(json!(ROUTER)),
                    deny("sqs:SendMessage", json!("*"), "arn:aws:iam::1:role/x"),
                ],
            ),
            (
                "a Deny of one principal only",
                vec![
                    allow(json!(ROUTER)),
                    deny(
                        "sqs:SendMessage",
                        json!({"AWS": "arn:aws:iam::1:role/x"}),
                        ROUTER,
                    ),
                ],
            ),
        ] {
            assert!(!admits_only(&policy(statements), Some(ROUTER)), "{why}");
        }
    }

    #[test]
    fn other_tools_queues_are_foreign() {
        // EKS Blueprints' Karpenter addon: EventBridge may send, nothing is denied.
        let blueprints = json!({"Version": "2012-10-17", "Statement": [
            {"Sid": "SendEventsToQueue", "Effect": "Allow",
             "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
             "Action": "sqs:SendMessage",
             "Resource": "arn:aws:sqs:us-east-1:111111111111:karpenter-alpha"}]})
        .to_string();
        assert!(!admits_only(&blueprints, Some(ROUTER)));
        assert!(!by_policy(Some(&blueprints), Some(ROUTER)).is_routers());
        assert!(!by_policy(None, Some(ROUTER)).is_routers());
        // Allowing the router without denying the others is not the tenant stack's policy.
        let open = json!({"Statement": [{"Effect": "Allow", "Principal": {"AWS": ROUTER},
            "Action": ["sqs:SendMessage"], "Resource": "*"}]})
        .to_string();
        assert!(!admits_only(&open, Some(ROUTER)));
        assert!(!admits_only("not json", None));
    }
}
