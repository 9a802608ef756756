//! The checks on the queues: only the router may write a tenant queue, only the member accounts'
//! direct roles the direct queue, every queue is encrypted
//! and refuses plain HTTP, the ingest queue's visibility timeout outlasts the function, and its
//! mapping reports batch item failures.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use aws_model::template::Template;

use super::{
    Found,
    router::is_router_role,
    statements::{PolicyKind, Principal, Statement, direct_queues, statements},
    values::{alternatives, branches, get_att, items, list_branches, reference, text},
};

/// A queue policy granting an AWS principal anything grants it to the router's role alone, and
/// denies SendMessage to every other principal (an identity policy elsewhere in the account
/// cannot then write fake interruptions).
pub(super) fn tenant_queue_writable_only_by_router(t: &Template) -> Found {
    let mut found = Found::new();
    let all = statements(t);
    let queue_policies: BTreeSet<&str> = all
        .iter()
        .filter(|s| s.kind == PolicyKind::Resource && t.is_a(&s.holder, "AWS::SQS::QueuePolicy"))
        .map(|s| s.holder.as_str())
        .collect();
    let direct = direct_queues(t);
    for policy in queue_policies {
        let of_policy: Vec<&Statement> = all.iter().filter(|s| s.holder == policy).collect();
        // The direct queue's writers are the member accounts' direct roles, held by their own
        // check ([`direct_queue_writable_only_by_direct_roles`]).
        if of_policy
            .iter()
            .any(|s| s.subjects.iter().any(|q| direct.contains(q)))
        {
            continue;
        }
        let mut grants_aws = false;
        for s in of_policy.iter().filter(|s| s.is_allow()) {
            if s.body.get("NotPrincipal").is_some() {
                found.push((s.label(), "Allow with NotPrincipal".into()));
            }
            for set in s.principal_sets() {
                let aws: Vec<&Principal> = set
                    .iter()
                    .filter(|p| !matches!(p, Principal::Service(_)))
                    .collect();
                if aws.is_empty() {
                    continue;
                }
                grants_aws = true;
                if aws.len() > 1 {
                    found.push((
                        s.label(),
                        format!(
                            "Allow to {} principals; only the router role may send",
                            aws.len()
                        ),
                    ));
                }
                for p in aws {
                    match p {
                        Principal::Aws(v) if is_router_role(t, v) => {}
                        other => found.push((
                            s.label(),
                            format!("Allow to {other:?}, which is not the router role"),
                        )),
                    }
                }
            }
        }
        if !grants_aws {
            continue;
        }
        let denies_others = of_policy.iter().any(|s| {
            s.is_deny()
                && s.principals() == [Principal::Any]
                && s.covers("sqs:SendMessage")
                && [
                    "ArnNotEquals",
                    "ArnNotLike",
                    "StringNotEquals",
                    "StringNotLike",
                ]
                .iter()
                .any(|op| {
                    s.condition("aws:PrincipalArn").iter().any(|(o, v)| {
                        o == op
                            && list_branches(v)
                                .iter()
                                .all(|l| l.len() == 1 && is_router_role(t, l[0]))
                    })
                })
        });
        if !denies_others {
            found.push((
                policy.to_owned(),
                "no Deny of sqs:SendMessage for principals other than the router role".into(),
            ));
        }
    }
    found
}

/// The two branches of a top-level `Fn::If` (`None` for `AWS::NoValue`), nested choices left
/// whole.
fn top_branches(v: &Value) -> Vec<Option<&Value>> {
    let present = |b: &'_ Value| -> bool { !(b.is_null() || reference(b) == Some("AWS::NoValue")) };
    match v.get("Fn::If").and_then(Value::as_array) {
        Some(b) if b.len() == 3 => [&b[1], &b[2]]
            .into_iter()
            .map(|b| present(b).then_some(b))
            .collect(),
        _ => vec![present(v).then_some(v)],
    }
}

fn is_true(v: &Value) -> bool {
    v == &json!(true) || v == &json!("true")
}

/// Encryption at rest: SSE-SQS or a KMS key on every queue, whatever the parameters. Both
/// chosen by one `Fn::If` on the same condition (`KmsKey`) are judged branch by branch.
pub(super) fn queues_encrypted(t: &Template) -> Found {
    let mut found = Found::new();
    let condition = |v: &Value| v.get("Fn::If").and_then(|b| b.get(0)).cloned();
    for (id, q) in t.resources_of("AWS::SQS::Queue") {
        let props = &q["Properties"];
        let (sse, kms) = (&props["SqsManagedSseEnabled"], &props["KmsMasterKeyId"]);
        // Paired on the one condition they share, a nested choice inside a branch (which key)
        // is that branch's value.
        let (sse_branches, kms_branches) =
            if condition(sse).is_some() && condition(sse) == condition(kms) {
                (top_branches(sse), top_branches(kms))
            } else {
                (branches(sse), branches(kms))
            };
        let encrypted = if condition(sse).is_some()
            && condition(sse) == condition(kms)
            && sse_branches.len() == kms_branches.len()
        {
            sse_branches
                .iter()
                .zip(&kms_branches)
                .all(|(s, k)| s.is_some_and(is_true) || k.is_some())
        } else {
            sse_branches.into_iter().all(|b| b.is_some_and(is_true))
                || kms_branches.into_iter().all(|b| b.is_some())
        };
        if !encrypted {
            found.push((
                id.to_owned(),
                "neither SqsManagedSseEnabled: true nor a KmsMasterKeyId".into(),
            ));
        }
    }
    found
}

/// Every queue is covered by a queue policy, and every queue policy denies all SQS actions to
/// everyone over plain HTTP.
pub(super) fn queue_policies_require_tls(t: &Template) -> Found {
    let mut found = Found::new();
    let all = statements(t);
    let tls_deny_covers = |s: &Statement, queue: &str| {
        s.is_deny()
            && s.principals() == [Principal::Any]
            && s.actions().iter().any(|a| a == "sqs:*" || a == "*")
            && s.condition("aws:SecureTransport").iter().any(|(op, v)| {
                op == "Bool"
                    && list_branches(v)
                        .iter()
                        .all(|l| *l == [&json!("false")] || *l == [&json!(false)])
            })
            && s.resources()
                .iter()
                .any(|r| get_att(r, "Arn") == Some(queue) || *r == "*")
    };
    for (id, p) in t.resources_of("AWS::SQS::QueuePolicy") {
        for queue in items(&p["Properties"]["Queues"]) {
            let queue = reference(queue).map_or_else(|| text(queue), str::to_owned);
            if !all
                .iter()
                .any(|s| s.holder == id && tls_deny_covers(s, &queue))
            {
                found.push((
                    id.to_owned(),
                    format!("no Deny of sqs:* on {queue} when aws:SecureTransport is false"),
                ));
            }
        }
    }
    for (queue, _) in t.resources_of("AWS::SQS::Queue") {
        let covered = t.resources_of("AWS::SQS::QueuePolicy").any(|(_, p)| {
            items(&p["Properties"]["Queues"])
                .iter()
                .any(|q| reference(q) == Some(queue))
        });
        if !covered {
            found.push((
                queue.to_owned(),
                "no queue policy, so nothing refuses plain-HTTP access".into(),
            ));
        }
    }
    found
}

fn literal_u64(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| v.as_str()?.parse().ok())
}

/// Lambda requires an SQS source's visibility timeout to be at least 6x the function timeout;
/// below it a slow batch reappears in the queue while still being processed.
pub(super) fn ingest_visibility_timeout(t: &Template) -> Found {
    let mut found = Found::new();
    for (id, m) in t.resources_of("AWS::Lambda::EventSourceMapping") {
        let props = &m["Properties"];
        let Some(queue) =
            get_att(&props["EventSourceArn"], "Arn").filter(|q| t.is_a(q, "AWS::SQS::Queue"))
        else {
            found.push((id.into(), "source is not a queue of this template".into()));
            continue;
        };
        let function = reference(&props["FunctionName"])
            .or_else(|| get_att(&props["FunctionName"], "Arn"))
            .filter(|f| t.is_a(f, "AWS::Lambda::Function"));
        let Some(function) = function else {
            found.push((id.into(), "function is not one of this template".into()));
            continue;
        };
        // The AWS defaults when the property is absent: 30 s visibility, 3 s timeout.
        let visibility = &t.doc["Resources"][queue]["Properties"]["VisibilityTimeout"];
        let timeout = &t.doc["Resources"][function]["Properties"]["Timeout"];
        let visibility = if visibility.is_null() {
            Some(30)
        } else {
            literal_u64(visibility)
        };
        let timeout = if timeout.is_null() {
            Some(3)
        } else {
            literal_u64(timeout)
        };
        match (visibility, timeout) {
            (Some(v), Some(f)) if v >= 6 * f => {}
            (Some(v), Some(f)) => found.push((
                queue.into(),
                format!("VisibilityTimeout {v} < 6 x {function} Timeout {f}"),
            )),
            _ => found.push((
                queue.into(),
                format!("VisibilityTimeout or {function} Timeout is not a literal: cannot verify"),
            )),
        }
    }
    found
}

/// Without ReportBatchItemFailures one failed record makes Lambda redeliver the whole batch,
/// and the records already forwarded arrive twice.
pub(super) fn report_batch_item_failures(t: &Template) -> Found {
    let mut found = Found::new();
    for (id, m) in t.resources_of("AWS::Lambda::EventSourceMapping") {
        let always = branches(&m["Properties"]["FunctionResponseTypes"])
            .into_iter()
            .all(|b| {
                b.is_some_and(|types| items(types).contains(&&json!("ReportBatchItemFailures")))
            });
        if !always {
            found.push((
                id.into(),
                "FunctionResponseTypes lacks ReportBatchItemFailures".into(),
            ));
        }
    }
    found
}

/// The direct queue (`DIRECT_QUEUE_ARN`) admits only the direct roles of the served accounts:
/// every Allow to an AWS principal carries `ArnLike aws:PrincipalArn` on the direct role's ARN
/// (any account: the principal or aws:PrincipalOrgID says which), and a Deny refuses every other
/// principal's sqs:SendMessage by the same ARN. Without either, any role of a served account (or
/// of the hub) could put made-up events there.
pub(super) fn direct_queue_writable_only_by_direct_roles(t: &Template) -> Found {
    let mut found = Found::new();
    let all = statements(t);
    for queue in direct_queues(t) {
        let of_queue: Vec<&Statement> = all
            .iter()
            .filter(|s| s.kind == PolicyKind::Resource && s.subjects.contains(&queue))
            .collect();
        if of_queue.is_empty() {
            found.push((queue.clone(), "the direct queue has no queue policy".into()));
            continue;
        }
        let pins = |s: &Statement, op: &str| {
            let pinned = s.condition("aws:PrincipalArn");
            !pinned.is_empty()
                && pinned
                    .iter()
                    .all(|(o, v)| o == op && alternatives(v).iter().all(|v| is_direct_role(v)))
        };
        for s in of_queue.iter().filter(|s| s.is_allow()) {
            let aws = s
                .principal_sets()
                .iter()
                .flatten()
                .any(|p| !matches!(p, Principal::Service(_)));
            if s.body.get("NotPrincipal").is_some() || (aws && !pins(s, "ArnLike")) {
                found.push((
                    s.label(),
                    "Allow not pinned to the direct role (ArnLike aws:PrincipalArn)".into(),
                ));
            }
        }
        let denies_others = of_queue.iter().any(|s| {
            s.is_deny()
                && s.principals() == [Principal::Any]
                && s.covers("sqs:SendMessage")
                && pins(s, "ArnNotLike")
        });
        if !denies_others {
            found.push((
                queue.clone(),
                "no Deny of sqs:SendMessage for principals other than the direct roles".into(),
            ));
        }
    }
    found
}

/// `arn:<partition>:iam::*:role<path><SpokeRoleName>-direct-<region>`, as a Fn::Sub.
fn is_direct_role(v: &Value) -> bool {
    let pattern = match v.get("Fn::Sub") {
        Some(Value::String(s)) => s.as_str(),
        Some(Value::Array(a)) => a.first().and_then(Value::as_str).unwrap_or_default(),
        _ => return false,
    };
    pattern.starts_with("arn:${AWS::Partition}:iam::*:role")
        && pattern.ends_with("${SpokeRoleName}-direct-${AWS::Region}")
}
