//! Broken copies for the checks on the queues: who may write a tenant queue, encryption at rest,
//! TLS, the ingest queue's visibility timeout, and ReportBatchItemFailures.

use aws_model::stacks::{BASE_TEMPLATE, TENANT_TEMPLATE};
use e2e_tests::policy::Check;
use serde_json::json;

use super::{Broken, broken};
use crate::policy::{base, edit, properties, remove_statement, statement, tenant};

/// [`Check::TenantQueueWritableOnlyByRouter`]: a tenant queue writable by others than the router.
pub(super) fn tenant_queue_writers() -> Vec<Broken> {
    use Check::*;
    let mut out = Vec::new();
    let mut t = tenant();
    let s = statement(&mut t, "InterruptionQueuePolicy", "AllowRouterToSend");
    let router = s["Principal"]["AWS"].clone();
    s["Principal"]["AWS"] = json!([router, "arn:aws:iam::123456789012:role/ci"]);
    out.push(broken(
        TenantQueueWritableOnlyByRouter,
        "tenant: a second principal may send",
        t,
    ));
    // Scoped to the organisation, so that only this check (and not the wildcard one) fails.
    let mut t = tenant();
    let s = statement(&mut t, "InterruptionQueuePolicy", "AllowRouterToSend");
    s["Principal"] = json!("*");
    s["Condition"] = json!({"StringEquals": {"aws:PrincipalOrgID": "o-abcdefghij"}});
    out.push(broken(
        TenantQueueWritableOnlyByRouter,
        "tenant: every principal of the organisation may send",
        t,
    ));
    let mut t = tenant();
    remove_statement(
        &mut t,
        "InterruptionQueuePolicy",
        "DenySendersOtherThanRouter",
    );
    out.push(broken(
        TenantQueueWritableOnlyByRouter,
        "tenant: no Deny for other senders",
        t,
    ));
    let mut t = tenant();
    statement(
        &mut t,
        "InterruptionQueuePolicy",
        "DenySendersOtherThanRouter",
    )["Condition"]["ArnNotEquals"]["aws:PrincipalArn"] = json!("arn:aws:iam::123456789012:role/ci");
    out.push(broken(
        TenantQueueWritableOnlyByRouter,
        "tenant: the Deny exempts another role",
        t,
    ));
    out
}

/// [`Check::DirectQueueWritableOnlyByDirectRoles`]: a direct queue writable by other roles of
/// the served accounts, or by anyone.
pub(super) fn direct_queue_writers() -> Vec<Broken> {
    use Check::*;
    let mut out = Vec::new();
    // Both branches (the organisation's and the account list's) lose the role pin.
    let mut t = base();
    fn unpin(v: &mut serde_json::Value) {
        if v.get("Sid").and_then(serde_json::Value::as_str) == Some("AllowMemberDirectRoles") {
            v["Condition"]
                .as_object_mut()
                .expect("a condition")
                .remove("ArnLike");
        }
        match v {
            serde_json::Value::Object(map) => map.values_mut().for_each(unpin),
            serde_json::Value::Array(list) => list.iter_mut().for_each(unpin),
            _ => {}
        }
    }
    unpin(t.resource_mut("DirectQueuePolicy"));
    out.push(broken(
        DirectQueueWritableOnlyByDirectRoles,
        "base: any role of a served account may send to the direct queue",
        t,
    ));
    let mut t = base();
    remove_statement(
        &mut t,
        "DirectQueuePolicy",
        "DenySendersOtherThanDirectRoles",
    );
    out.push(broken(
        DirectQueueWritableOnlyByDirectRoles,
        "base: no Deny for other senders to the direct queue",
        t,
    ));
    let mut t = base();
    statement(
        &mut t,
        "DirectQueuePolicy",
        "DenySendersOtherThanDirectRoles",
    )["Condition"]["ArnNotLike"]["aws:PrincipalArn"] = json!("arn:aws:iam::*:role/*");
    out.push(broken(
        DirectQueueWritableOnlyByDirectRoles,
        "base: the direct queue's Deny exempts every role",
        t,
    ));
    out
}

/// [`Check::QueuesEncrypted`]: a queue without encryption at rest.
pub(super) fn encryption() -> Vec<Broken> {
    use Check::*;
    let mut out = Vec::new();
    let mut t = tenant();
    assert!(
        properties(&mut t, "InterruptionQueue")
            .remove("SqsManagedSseEnabled")
            .is_some()
    );
    out.push(broken(QueuesEncrypted, "tenant: no SSE on the queue", t));
    let mut t = base();
    properties(&mut t, "DeadLetterQueue")["SqsManagedSseEnabled"] = json!(false);
    out.push(broken(QueuesEncrypted, "base: SSE off on the DLQ", t));
    let mut t = base();
    properties(&mut t, "IngestQueue")["SqsManagedSseEnabled"] =
        json!({"Fn::If": ["HasAlarmTopic", true, {"Ref": "AWS::NoValue"}]});
    out.push(broken(
        QueuesEncrypted,
        "base: ingest SSE only when an alarm topic is set",
        t,
    ));
    let mut t = base();
    properties(&mut t, "IngestQueue")["SqsManagedSseEnabled"] =
        json!({"Fn::If": ["CreatesKey", false, false]});
    out.push(broken(
        QueuesEncrypted,
        "base: ingest SSE-SQS off, so without KmsKey=Create it is unencrypted",
        t,
    ));
    out
}

/// [`Check::QueuePoliciesRequireTls`]: a queue reachable over plain HTTP.
pub(super) fn tls() -> Vec<Broken> {
    use Check::*;
    let mut out = Vec::new();
    let mut t = base();
    remove_statement(&mut t, "IngestQueuePolicy", "DenyInsecureTransport");
    out.push(broken(
        QueuePoliciesRequireTls,
        "base: ingest policy without the TLS deny",
        t,
    ));
    let mut t = tenant();
    assert!(
        t.doc["Resources"]
            .as_object_mut()
            .unwrap()
            .remove("InterruptionQueuePolicy")
            .is_some()
    );
    out.push(broken(
        QueuePoliciesRequireTls,
        "tenant: no queue policy at all",
        t,
    ));
    let t = edit(
        "tenant.yaml",
        TENANT_TEMPLATE,
        "aws:SecureTransport: \"false\"",
        "aws:SecureTransport: \"true\"",
    );
    out.push(broken(
        QueuePoliciesRequireTls,
        "tenant: TLS deny inverted",
        t,
    ));
    let mut t = base();
    statement(&mut t, "DeadLetterQueuePolicy", "DenyInsecureTransport")["Action"] =
        json!("sqs:SendMessage");
    out.push(broken(
        QueuePoliciesRequireTls,
        "base: DLQ TLS deny covers SendMessage only",
        t,
    ));
    out
}

/// [`Check::IngestVisibilityTimeout`]: an ingest queue's visibility below 6x the function timeout.
pub(super) fn visibility_timeout() -> Vec<Broken> {
    use Check::*;
    let mut out = Vec::new();
    let t = edit(
        "base.yaml",
        BASE_TEMPLATE,
        "Change both together.\n      VisibilityTimeout: 180",
        "Change both together.\n      VisibilityTimeout: 179",
    );
    out.push(broken(IngestVisibilityTimeout, "base: visibility 179 s", t));
    let t = edit("base.yaml", BASE_TEMPLATE, "Timeout: 30\n", "Timeout: 31\n");
    out.push(broken(
        IngestVisibilityTimeout,
        "base: function timeout 31 s",
        t,
    ));
    let mut t = base();
    assert!(
        properties(&mut t, "IngestQueue")
            .remove("VisibilityTimeout")
            .is_some()
    );
    out.push(broken(
        IngestVisibilityTimeout,
        "base: visibility left at the 30 s default",
        t,
    ));
    out
}

/// [`Check::ReportBatchItemFailures`]: a mapping without ReportBatchItemFailures.
pub(super) fn batch_item_failures() -> Vec<Broken> {
    use Check::*;
    let mut out = Vec::new();
    let mut t = base();
    assert!(
        properties(&mut t, "IngestEventSourceMapping")
            .remove("FunctionResponseTypes")
            .is_some()
    );
    out.push(broken(
        ReportBatchItemFailures,
        "base: no FunctionResponseTypes",
        t,
    ));
    let mut t = base();
    properties(&mut t, "IngestEventSourceMapping")["FunctionResponseTypes"] = json!([]);
    out.push(broken(
        ReportBatchItemFailures,
        "base: empty FunctionResponseTypes",
        t,
    ));
    out
}
