//! Broken copies for the checks on the router's own role: what it may send to, read, assume, and
//! what it needs to do its work.

use aws_model::stacks::BASE_TEMPLATE;
use e2e_tests::policy::Check;
use serde_json::json;

use super::{Broken, broken};
use crate::policy::{base, edit, remove_statement, statement, statement_list};

/// [`Check::RouterSendsOnlyToPrefixAndDlq`]: the router sending beyond `<QueuePrefix>*` and its DLQ.
pub(super) fn sends() -> Vec<Broken> {
    use Check::*;
    let mut out = Vec::new();
    let mut t = base();
    statement(&mut t, "RouterRole", "SendToClusterQueues")["Resource"] = json!("*");
    out.push(broken(
        RouterSendsOnlyToPrefixAndDlq,
        "base: SendMessage on *",
        t,
    ));
    let mut t = base();
    statement(&mut t, "RouterRole", "SendToClusterQueues")["Resource"] =
        json!({"Fn::Sub": "arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:*"});
    out.push(broken(
        RouterSendsOnlyToPrefixAndDlq,
        "base: SendMessage on every queue of the account (prefix dropped)",
        t,
    ));
    let mut t = base();
    statement_list(&mut t, "RouterRole", "SendToClusterQueues").push(json!({
        "Sid": "AlsoElsewhere",
        "Effect": "Allow",
        "Action": "sqs:SendMessage",
        "Resource": "arn:aws:sqs:us-east-1:999999999999:karpenter-alpha",
    }));
    out.push(broken(
        RouterSendsOnlyToPrefixAndDlq,
        "base: SendMessage to another account's queue",
        t,
    ));
    let mut t = base();
    let removed = t.doc["Parameters"]["QueuePrefix"]
        .as_object_mut()
        .unwrap()
        .remove("MinLength");
    assert!(removed.is_some());
    out.push(broken(
        RouterSendsOnlyToPrefixAndDlq,
        "base: QueuePrefix may be empty (<prefix>* = every queue)",
        t,
    ));
    out
}

/// [`Check::RouterReadsOnlyIngestQueue`]: the router reading queues other than its ingest queue.
pub(super) fn reads() -> Vec<Broken> {
    use Check::*;
    let mut out = Vec::new();
    let mut t = base();
    statement(&mut t, "RouterRole", "SendToClusterQueues")["Action"]
        .as_array_mut()
        .unwrap()
        .push(json!("sqs:ReceiveMessage"));
    out.push(broken(
        RouterReadsOnlyIngestQueue,
        "base: router may receive from the cluster queues",
        t,
    ));
    let mut t = base();
    // The central bus's branch (the ingest and direct queues) gains the DLQ.
    statement(&mut t, "RouterRole", "ConsumeIngestQueue")["Resource"]["Fn::If"][1]
        .as_array_mut()
        .expect("the ingest and direct queues")
        .push(json!({"Fn::GetAtt": ["DeadLetterQueue", "Arn"]}));
    out.push(broken(
        RouterReadsOnlyIngestQueue,
        "base: router may consume the DLQ",
        t,
    ));
    let mut t = base();
    t.doc["Resources"]["ExtraRouterPolicy"] = json!({
        "Type": "AWS::IAM::Policy",
        "Properties": {
            "PolicyName": "extra",
            "Roles": [{"Ref": "RouterRole"}],
            "PolicyDocument": {"Version": "2012-10-17", "Statement": [{
                "Effect": "Allow",
                "Action": "sqs:PurgeQueue",
                "Resource": {"Fn::Sub": "arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:karpenter-alpha"},
            }]},
        },
    });
    out.push(broken(
        RouterReadsOnlyIngestQueue,
        "base: a policy attached to the router role purges a cluster queue",
        t,
    ));
    let mut t = base();
    statement_list(&mut t, "RouterRole", "SendToDeadLetterQueue").push(json!({
        "Sid": "DelayDeadLetters",
        "Effect": "Allow",
        "Action": "sqs:ChangeMessageVisibility",
        "Resource": {"Fn::GetAtt": ["DeadLetterQueue", "Arn"]},
    }));
    out.push(broken(
        RouterReadsOnlyIngestQueue,
        "base: ChangeMessageVisibility on the DLQ as well",
        t,
    ));
    out
}

/// [`Check::RouterHasNeededPermissions`]: the router without a permission its code needs.
pub(super) fn needed_permissions() -> Vec<Broken> {
    use Check::*;
    let mut out = Vec::new();
    let mut t = base();
    remove_statement(&mut t, "RouterRole", "ResolveInstanceTagsByArn");
    out.push(broken(
        RouterHasNeededPermissions,
        "base: no tag:GetResources",
        t,
    ));
    let mut t = base();
    statement(&mut t, "RouterRole", "ResolveInstanceTags")["Resource"] =
        json!({"Fn::Sub": "arn:${AWS::Partition}:ec2:${AWS::Region}:${AWS::AccountId}:instance/*"});
    out.push(broken(
        RouterHasNeededPermissions,
        "base: DescribeInstances on instance ARNs (AWS accepts only *)",
        t,
    ));
    let mut t = base();
    statement(&mut t, "RouterRole", "ConsumeIngestQueue")["Action"]
        .as_array_mut()
        .unwrap()
        .retain(|a| a != "sqs:ChangeMessageVisibility");
    out.push(broken(
        RouterHasNeededPermissions,
        "base: no ChangeMessageVisibility on the ingest queue",
        t,
    ));
    let mut t = base();
    remove_statement(&mut t, "RouterRole", "ReadTenantRecords");
    out.push(broken(
        RouterHasNeededPermissions,
        "base: no ssm:GetParameter on the tenant records",
        t,
    ));
    out
}

/// [`Check::RouterAssumesOnlySpokeRoles`]: the router assuming more than the spoke roles.
pub(super) fn assumes() -> Vec<Broken> {
    use Check::*;
    let mut out = Vec::new();
    let mut t = base();
    statement(&mut t, "RouterRole", "AssumeSpokeRoles")["Resource"] = json!("*");
    out.push(broken(
        RouterAssumesOnlySpokeRoles,
        "base: router may assume any role",
        t,
    ));
    let t = edit(
        "base.yaml",
        BASE_TEMPLATE,
        ":role/${SpokeRoleName}\"",
        ":role/*\"",
    );
    out.push(broken(
        RouterAssumesOnlySpokeRoles,
        "base: router may assume every role of every account (name dropped)",
        t,
    ));
    let mut t = base();
    t.doc["Parameters"]["SpokeRoleName"]["AllowedPattern"] = json!("^[A-Za-z0-9+=,.@_*-]{1,64}$");
    out.push(broken(
        RouterAssumesOnlySpokeRoles,
        "base: SpokeRoleName may be \"*\"",
        t,
    ));
    out
}
