//! Broken copies for the checks that hold every Allow of every policy: no wildcard actions, a
//! service principal pinned to its source, no `"*"` principal left unscoped.

use e2e_tests::policy::Check;
use serde_json::json;

use super::{Broken, broken};
use crate::policy::{base, fis, properties, spoke, statement, tenant};

/// [`Check::NoWildcardActions`]: Allows of `*`, `Describe*` or NotAction.
pub(super) fn wildcard_actions() -> Vec<Broken> {
    use Check::*;
    let mut out = Vec::new();
    let mut t = tenant();
    statement(&mut t, "KarpenterQueueAccess", "ConsumeInterruptionQueue")["Action"]
        .as_array_mut()
        .unwrap()
        .push(json!("sqs:*"));
    out.push(broken(
        NoWildcardActions,
        "tenant: Karpenter's policy gains sqs:*",
        t,
    ));
    let mut t = base();
    statement(
        &mut t,
        "DeadLetterQueuePolicy",
        "AllowDeadLettersFromTheseRules",
    )["Action"] = json!("sqs:*");
    out.push(broken(
        NoWildcardActions,
        "base: rules may sqs:* on the DLQ",
        t,
    ));
    let mut t = fis();
    statement(&mut t, "ExperimentRole", "ResolveTargets")["Action"] = json!("ec2:Describe*");
    out.push(broken(
        NoWildcardActions,
        "fis: ec2:Describe* instead of DescribeInstances",
        t,
    ));
    let mut t = fis();
    let s = statement(&mut t, "ExperimentRole", "InterruptThisClusterOnly");
    let action = s.as_object_mut().unwrap().remove("Action").unwrap();
    assert_eq!(action, "ec2:SendSpotInstanceInterruptions");
    s["NotAction"] = json!("iam:*");
    out.push(broken(
        NoWildcardActions,
        "fis: Allow with NotAction iam:*",
        t,
    ));

    let mut t = spoke();
    statement(&mut t, "ForwardToHubRole", "PutOnHubBusOnly")["Action"] = json!("events:Put*");
    out.push(broken(
        NoWildcardActions,
        "spoke: the forwarding role may events:Put*",
        t,
    ));
    out
}

/// [`Check::ServicePrincipalsPinnedToSource`]: a service allowed without `aws:SourceArn`.
pub(super) fn service_principals() -> Vec<Broken> {
    use Check::*;
    let mut out = Vec::new();
    let mut t = base();
    let s = statement(&mut t, "IngestQueuePolicy", "AllowTheseRulesOnly");
    assert!(s.as_object_mut().unwrap().remove("Condition").is_some());
    out.push(broken(
        ServicePrincipalsPinnedToSource,
        "base: any rule may send to the ingest queue",
        t,
    ));
    // The key's exception holds only as written: pinned to the account, the rule ARN a
    // wildcard-free ...IfExists.
    let mut t = base();
    let s = statement(&mut t, "QueueKey", "EventBridgeRulesOfThisAccountDeliver");
    assert!(
        s["Condition"]
            .as_object_mut()
            .unwrap()
            .remove("StringEquals")
            .is_some()
    );
    out.push(broken(
        ServicePrincipalsPinnedToSource,
        "base: EventBridge's key statement without aws:SourceAccount",
        t,
    ));
    let mut t = base();
    let s = statement(&mut t, "QueueKey", "EventBridgeRulesOfThisAccountDeliver");
    s["Condition"]["ArnLikeIfExists"]["aws:SourceArn"] = json!("*");
    out.push(broken(
        ServicePrincipalsPinnedToSource,
        "base: EventBridge's key statement for any source",
        t,
    ));
    let mut t = fis();
    let trust = &mut properties(&mut t, "ExperimentRole")["AssumeRolePolicyDocument"]["Statement"]
        [0]["Condition"];
    assert!(trust.as_object_mut().unwrap().remove("ArnLike").is_some());
    out.push(broken(
        ServicePrincipalsPinnedToSource,
        "fis: trust pinned by SourceAccount only",
        t,
    ));
    let mut t = base();
    properties(&mut t, "RouterRole")["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]["Service"] =
        json!(["lambda.amazonaws.com", "events.amazonaws.com"]);
    out.push(broken(
        ServicePrincipalsPinnedToSource,
        "base: EventBridge may assume the router role",
        t,
    ));
    let mut t = fis();
    properties(&mut t, "ExperimentRole")["AssumeRolePolicyDocument"]["Statement"][0] = json!({
        "Effect": "Allow",
        "Principal": {"Service": "lambda.amazonaws.com"},
        "Action": "sts:AssumeRole",
    });
    out.push(broken(
        ServicePrincipalsPinnedToSource,
        "fis: the Lambda exception claimed by a role no function runs as",
        t,
    ));
    let mut t = spoke();
    let s = statement(&mut t, "ForwardToHubRole", "OnlyTheseRules");
    assert!(
        s["Condition"]
            .as_object_mut()
            .unwrap()
            .remove("ArnEquals")
            .is_some()
    );
    out.push(broken(
        ServicePrincipalsPinnedToSource,
        "spoke: any rule of the account may forward to the hub (SourceAccount only)",
        t,
    ));
    out
}

/// [`Check::NoUnscopedWildcardPrincipals`]: an Allow to `"*"` no condition narrows.
pub(super) fn wildcard_principals() -> Vec<Broken> {
    use Check::*;
    let mut out = Vec::new();
    let mut t = base();
    let s = statement(&mut t, "HubEventBus", "AllowOrganizationToPutEvents");
    assert!(s.as_object_mut().unwrap().remove("Condition").is_some());
    out.push(broken(
        NoUnscopedWildcardPrincipals,
        "base: every AWS account may put events on the hub bus",
        t,
    ));
    let mut t = base();
    statement(&mut t, "HubEventBus", "AllowOrganizationToPutEvents")["Condition"] =
        json!({"StringEquals": {"aws:PrincipalOrgID": "*"}});
    out.push(broken(
        NoUnscopedWildcardPrincipals,
        "base: hub bus open to the organisation \"*\"",
        t,
    ));
    let mut t = base();
    statement(&mut t, "HubEventBus", "AllowOrganizationToPutEvents")["Condition"] =
        json!({"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}});
    out.push(broken(
        NoUnscopedWildcardPrincipals,
        "base: hub bus \"*\" narrowed by a key that does not name the caller",
        t,
    ));
    let mut t = spoke();
    t.doc["Resources"]["OpenDefaultBus"] = json!({
        "Type": "AWS::Events::EventBusPolicy",
        "Properties": {
            "StatementId": "anyone",
            "Statement": {
                "Effect": "Allow",
                "Principal": "*",
                "Action": "events:PutEvents",
                "Resource": {"Fn::Sub": "arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:event-bus/default"},
            },
        },
    });
    out.push(broken(
        NoUnscopedWildcardPrincipals,
        "spoke: the default bus opened to every account",
        t,
    ));
    let mut t = spoke();
    t.doc["Resources"]["OpenDefaultBus"] = json!({
        "Type": "AWS::Events::EventBusPolicy",
        "Properties": {"StatementId": "anyone", "Principal": "*", "Action": "events:PutEvents"},
    });
    out.push(broken(
        NoUnscopedWildcardPrincipals,
        "spoke: the default bus opened to every account (legacy Principal property)",
        t,
    ));
    out
}
