//! The checks on the router's own role: it sends only to `<QueuePrefix>*` and its DLQ, reads only
//! its ingest queue, assumes only the spoke roles, and has what its code needs.

use serde_json::Value;

use aws_model::template::Template;

use super::{
    Found,
    statements::{
        PolicyKind, Statement, dead_letter_queues, execution_roles, ingest_queues, statements,
    },
    values::{alternatives, get_att, reference, text},
};

/// IAM actions that send to a queue (SendMessageBatch is authorised as SendMessage).
const SEND_ACTIONS: [&str; 2] = ["sqs:SendMessage", "sqs:GetQueueUrl"];
/// IAM actions that read or change a queue's messages or settings.
const QUEUE_READ_ACTIONS: [&str; 9] = [
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibility",
    "sqs:PurgeQueue",
    "sqs:GetQueueAttributes",
    "sqs:SetQueueAttributes",
    "sqs:ListDeadLetterSourceQueues",
    "sqs:StartMessageMoveTask",
    "sqs:DeleteQueue",
];
/// The only cluster-queue resource the router may send to: this account and region (anywhere else
/// it writes as that account's spoke role), the prefix.
const PREFIX_QUEUES: &str =
    "arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:${QueuePrefix}*";

/// The router's identity statements that allow something: inline, or attached from elsewhere.
fn router_allows(t: &Template) -> Vec<(String, Statement)> {
    let roles = execution_roles(t);
    statements(t)
        .into_iter()
        .filter(|s| s.kind == PolicyKind::Identity && s.is_allow())
        .flat_map(|s| {
            roles
                .iter()
                .filter(|r| s.subjects.contains(r))
                .map(|r| (r.clone(), s.clone()))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The router can send to `<QueuePrefix>*` in this account and region and to its DLQ, nothing
/// else; and `QueuePrefix` cannot be empty (that would be every queue).
pub(super) fn router_sends_only_to_prefix_and_dlq(t: &Template) -> Found {
    let mut found = Found::new();
    let dlqs = dead_letter_queues(t);
    let mut uses_prefix = false;
    for (role, s) in router_allows(t) {
        if !SEND_ACTIONS.iter().any(|a| s.covers(a)) {
            continue;
        }
        if s.body.get("NotResource").is_some() {
            found.push((s.label(), format!("{role} sends with NotResource")));
        }
        for r in s.resources() {
            if r.get("Fn::Sub").and_then(Value::as_str) == Some(PREFIX_QUEUES) {
                uses_prefix = true;
            } else if !get_att(r, "Arn").is_some_and(|q| dlqs.iter().any(|d| d == q)) {
                found.push((
                    s.label(),
                    format!(
                        "{role} may send to {}, outside <QueuePrefix>* and the DLQ",
                        text(r)
                    ),
                ));
            }
        }
    }
    if uses_prefix {
        let p = &t.doc["Parameters"]["QueuePrefix"];
        if p["MinLength"].as_u64().unwrap_or(0) < 1 {
            found.push((
                "Parameters.QueuePrefix".into(),
                "no MinLength >= 1: an empty prefix lets the router send to every queue".into(),
            ));
        }
    }
    found
}

/// The router reads (receives, deletes, …) only the queue its event source mapping consumes. On
/// the cluster queues it may read their settings only (GetQueueAttributes: a tenant queue from
/// before the tenant tag is known by its policy), never their messages.
pub(super) fn router_reads_only_ingest_queue(t: &Template) -> Found {
    let mut found = Found::new();
    let ingest = ingest_queues(t);
    for (role, s) in router_allows(t) {
        let reads: Vec<&str> = QUEUE_READ_ACTIONS
            .into_iter()
            .filter(|a| s.covers(a))
            .collect();
        if reads.is_empty() {
            continue;
        }
        if s.body.get("NotResource").is_some() {
            found.push((s.label(), format!("{role} reads queues with NotResource")));
        }
        for r in s.resources() {
            let settings_of_cluster_queues = r.get("Fn::Sub").and_then(Value::as_str)
                == Some(PREFIX_QUEUES)
                && reads == ["sqs:GetQueueAttributes"];
            if settings_of_cluster_queues {
                continue;
            }
            if !get_att(r, "Arn").is_some_and(|q| ingest.iter().any(|i| i == q)) {
                found.push((
                    s.label(),
                    format!("{role} may {reads:?} on {}, not the ingest queue", text(r)),
                ));
            }
        }
    }
    found
}

/// A reference to the router's role: the export of the stack that connects the region (by the
/// router's name, or by the stack's), the tenant's explicit parameter, or (in the base template)
/// the role itself.
pub(super) fn is_router_role(t: &Template, v: &Value) -> bool {
    let roles = execution_roles(t);
    let alternatives = alternatives(v);
    !alternatives.is_empty()
        && alternatives.into_iter().all(|alt| {
            let import = alt
                .get("Fn::ImportValue")
                .and_then(|i| i.get("Fn::Sub"))
                .and_then(Value::as_str);
            matches!(
                import,
                Some("${BaseStackName}-RouterRoleArn" | "${RouterName}:RouterRoleArn")
            ) || reference(alt) == Some("RouterRoleArn")
                || get_att(alt, "Arn").is_some_and(|r| roles.iter().any(|x| x == r))
        })
}

/// Whether some Allow of the router covers `action` on a resource `fits` accepts.
fn router_may(t: &Template, action: &str, fits: impl Fn(&Value) -> bool) -> bool {
    router_allows(t).iter().any(|(_, s)| {
        s.covers(action)
            && s.body.get("NotResource").is_none()
            && s.resources().into_iter().any(&fits)
    })
}

/// The router can do what its code does: look instances up both ways (DescribeInstances and the
/// Tagging API's GetResources, neither of which takes a resource narrower than "*": anything else
/// is an AccessDenied at the first lookup), and shorten a handed-back record's visibility on the
/// ingest queue (ChangeMessageVisibility), without which every retry waits the full visibility
/// timeout and a short outage dead-letters by redrive.
pub(super) fn router_has_needed_permissions(t: &Template) -> Found {
    let mut found = Found::new();
    let roles = execution_roles(t);
    if roles.is_empty() {
        return found;
    }
    for action in ["ec2:DescribeInstances", "tag:GetResources"] {
        if !router_may(t, action, |r| *r == "*") {
            found.push((
                roles.join(", "),
                format!("no Allow of {action} on \"*\" (it has no resource-level permissions)"),
            ));
        }
    }
    let records = |r: &Value| r.get("Fn::Sub").and_then(Value::as_str) == Some(TENANT_RECORDS);
    if !router_may(t, "ssm:GetParameter", records) {
        found.push((
            roles.join(", "),
            format!(
                "no Allow of ssm:GetParameter on {TENANT_RECORDS}: a cluster whose queue is \
                 missing cannot be told lost from not onboarded, and a lost queue pages nobody"
            ),
        ));
    }
    for queue in ingest_queues(t) {
        if !router_may(t, "sqs:ChangeMessageVisibility", |r| {
            get_att(r, "Arn") == Some(queue.as_str())
        }) {
            found.push((
                queue.clone(),
                "the router may not sqs:ChangeMessageVisibility on it: handed-back records wait \
                 the whole visibility timeout"
                    .into(),
            ));
        }
    }
    found
}

/// The tenant records of this account and region's cluster queues (tenant.yaml's SSM parameters).
const TENANT_RECORDS: &str = "arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter/interruption-router/tenant-queues/${QueuePrefix}*";

/// The only roles the router may assume: the spoke role's name in any account, at `/` or under
/// the SpokeRolePath parameter.
const SPOKE_ROLES: [&str; 2] = [
    "arn:${AWS::Partition}:iam::*:role/${SpokeRoleName}",
    "arn:${AWS::Partition}:iam::*:role${SpokeRolePath}${SpokeRoleName}",
];

/// Whether an IAM path pattern admits no wildcard: every character class excludes `*`, `?` and
/// escapes, and nothing outside a class matches any character.
pub fn path_pattern_admits_no_wildcard(pattern: &str) -> bool {
    let mut outside = String::new();
    let mut rest = pattern;
    while let Some((before, after)) = rest.split_once('[') {
        outside.push_str(before);
        let Some((class, tail)) = after.split_once(']') else {
            return false;
        };
        if class.contains(['*', '?', '\\', '[', '^']) {
            return false;
        }
        rest = tail;
    }
    outside.push_str(rest);
    !outside.contains(['.', '\\'])
}

/// Whether a parameter's AllowedPattern admits only names: `^[class]{m,n}$` or `^[class]+$`
/// with m >= 1 and no `*` or `?` (IAM wildcards) and no escape in the class. Anything else
/// cannot be shown to exclude a wildcard.
pub fn pattern_admits_only_names(pattern: &str) -> bool {
    let Some(body) = pattern.strip_prefix("^[").and_then(|p| p.strip_suffix('$')) else {
        return false;
    };
    let Some((class, quantifier)) = body.split_once(']') else {
        return false;
    };
    let min = if quantifier == "+" {
        Some(1)
    } else {
        quantifier
            .strip_prefix('{')
            .and_then(|q| q.strip_suffix('}'))
            .and_then(|q| q.split(',').next())
            .and_then(|m| m.parse::<u32>().ok())
    };
    !class.is_empty() && !class.contains(['*', '?', '\\', '[', '^']) && min.is_some_and(|m| m >= 1)
}

/// sts:AssumeRole is granted on `arn:…:iam::*:role/${SpokeRoleName}` alone, and SpokeRoleName
/// cannot be a wildcard (a "*" would be every role, in every account, that trusts the router).
pub(super) fn router_assumes_only_spoke_roles(t: &Template) -> Found {
    let mut found = Found::new();
    let mut uses_spoke_name = false;
    for (role, s) in router_allows(t) {
        if !s.covers("sts:AssumeRole") {
            continue;
        }
        if s.body.get("NotResource").is_some() {
            found.push((s.label(), format!("{role} assumes roles with NotResource")));
        }
        for r in s.resources() {
            // `Fn::If` on SpokeRolePath: each branch must be one of the two.
            let branches = match r.get("Fn::If").and_then(Value::as_array) {
                Some(args) if args.len() == 3 => vec![&args[1], &args[2]],
                _ => vec![r],
            };
            for r in branches {
                let sub = r.get("Fn::Sub").and_then(Value::as_str);
                if sub.is_some_and(|sub| SPOKE_ROLES.contains(&sub)) {
                    uses_spoke_name = true;
                } else {
                    found.push((
                        s.label(),
                        format!("{role} may assume {}, not only {SPOKE_ROLES:?}", text(r)),
                    ));
                }
            }
        }
    }
    if uses_spoke_name {
        let path = t.doc["Parameters"]["SpokeRolePath"]["AllowedPattern"]
            .as_str()
            .unwrap_or_default();
        if !path_pattern_admits_no_wildcard(path) {
            found.push((
                "Parameters.SpokeRolePath".into(),
                format!("AllowedPattern {path:?} may admit a wildcard in the role's path"),
            ));
        }
        let pattern = t.doc["Parameters"]["SpokeRoleName"]["AllowedPattern"]
            .as_str()
            .unwrap_or_default();
        if !pattern_admits_only_names(pattern) {
            found.push((
                "Parameters.SpokeRoleName".into(),
                format!("AllowedPattern {pattern:?} may admit a wildcard role name"),
            ));
        }
    }
    found
}
