//! Broken copies for the checks on spoke.yaml's spoke role: whom it trusts, and exactly what it
//! may do.

use e2e_tests::policy::Check;
use serde_json::json;

use super::{Broken, broken};
use crate::policy::{properties, remove_statement, spoke, statement};

/// [`Check::SpokeRoleTrustsOnlyRouter`]: the spoke role trusting more than the router role.
pub(super) fn trust() -> Vec<Broken> {
    use Check::*;
    let mut out = Vec::new();
    let mut t = spoke();
    let s = statement(&mut t, "SpokeRole", "OnlyTheHubRouter");
    let router = s["Principal"]["AWS"].clone();
    s["Principal"]["AWS"] = json!([router, "arn:aws:iam::123456789012:role/ci"]);
    out.push(broken(
        SpokeRoleTrustsOnlyRouter,
        "spoke: a second principal may assume the spoke role",
        t,
    ));
    let mut t = spoke();
    statement(&mut t, "SpokeRole", "OnlyTheHubRouter")["Principal"]["AWS"] =
        json!("arn:aws:iam::123456789012:root");
    out.push(broken(
        SpokeRoleTrustsOnlyRouter,
        "spoke: the whole hub account may assume the spoke role",
        t,
    ));
    let mut t = spoke();
    assert!(
        t.doc["Parameters"]["RouterRoleArn"]
            .as_object_mut()
            .unwrap()
            .remove("AllowedPattern")
            .is_some()
    );
    out.push(broken(
        SpokeRoleTrustsOnlyRouter,
        "spoke: RouterRoleArn may be \"*\"",
        t,
    ));
    out
}

/// [`Check::SpokeRoleExactPermissions`]: the spoke role allowed more, or less, than the router needs.
pub(super) fn permissions() -> Vec<Broken> {
    use Check::*;
    let mut out = Vec::new();
    let mut t = spoke();
    statement(&mut t, "SpokeRole", "ResolveInstanceTags")["Action"]
        .as_array_mut()
        .unwrap()
        .push(json!("ec2:TerminateInstances"));
    out.push(broken(
        SpokeRoleExactPermissions,
        "spoke: the router may terminate instances",
        t,
    ));
    let mut t = spoke();
    statement(&mut t, "SpokeRole", "ResolveInstanceTags")["Action"] =
        json!("ec2:DescribeInstances");
    out.push(broken(
        SpokeRoleExactPermissions,
        "spoke: no tag:GetResources",
        t,
    ));
    let mut t = spoke();
    statement(&mut t, "SpokeRole", "SendToClusterQueues")["Resource"] =
        json!({"Fn::Sub": "arn:${AWS::Partition}:sqs:*:*:${QueuePrefix}*"});
    out.push(broken(
        SpokeRoleExactPermissions,
        "spoke: send to <prefix>* queues of every account",
        t,
    ));
    let mut t = spoke();
    statement(&mut t, "SpokeRole", "UseTenantQueueKeysThroughSqs")["Resource"] = json!("*");
    out.push(broken(
        SpokeRoleExactPermissions,
        "spoke: use every key of the account, not only the tenant keys given",
        t,
    ));
    let mut t = spoke();
    statement(&mut t, "SpokeRole", "UseTenantQueueKeysThroughSqs")
        .as_object_mut()
        .unwrap()
        .remove("Condition");
    out.push(broken(
        SpokeRoleExactPermissions,
        "spoke: use the tenant keys directly, not only through SQS",
        t,
    ));
    let mut t = spoke();
    statement(&mut t, "SpokeRole", "ReadTenantRecords")["Resource"] = json!(
        {"Fn::Sub": "arn:${AWS::Partition}:ssm:*:${AWS::AccountId}:parameter/*"}
    );
    out.push(broken(
        SpokeRoleExactPermissions,
        "spoke: read every SSM parameter of the account, not only tenant records",
        t,
    ));
    let mut t = spoke();
    remove_statement(&mut t, "SpokeRole", "ReadTenantRecords");
    out.push(broken(
        SpokeRoleExactPermissions,
        "spoke: no ssm:GetParameter on the tenant records",
        t,
    ));
    let mut t = spoke();
    properties(&mut t, "SpokeRole").insert(
        "ManagedPolicyArns".into(),
        json!([{"Fn::Sub": "arn:${AWS::Partition}:iam::aws:policy/ReadOnlyAccess"}]),
    );
    out.push(broken(
        SpokeRoleExactPermissions,
        "spoke: a managed policy attached beside the inline one",
        t,
    ));
    let mut t = spoke();
    assert!(
        t.doc["Parameters"]["QueuePrefix"]
            .as_object_mut()
            .unwrap()
            .remove("MinLength")
            .is_some()
    );
    out.push(broken(
        SpokeRoleExactPermissions,
        "spoke: QueuePrefix may be empty (<prefix>* = every queue)",
        t,
    ));
    out
}
