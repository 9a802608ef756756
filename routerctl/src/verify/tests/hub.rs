//! The hub the verify tests start from: built as an operator builds one, from this release's
//! templates, in the model.

use std::time::Duration;

use serde_json::json;

use crate::cloud::model::World;
use aws_model::stacks::{BASE_TEMPLATE, TENANT_TEMPLATE, tenant_parameters, tenant_stack_name};
use router_core::event::Kinds;

pub const ACCOUNT: &str = "123456789012";
pub const REGION: &str = "us-east-1";
pub const STACK: &str = "ir";
pub const CLUSTER: &str = "alpha";
pub const KARPENTER_ROLE: &str = "KarpenterController-alpha";

/// A Karpenter controller role as EKS's getting-started guide makes it: allowed to read only
/// the queue it would have created itself (here: none), so the tenant stack's grant is what
/// lets it read the tenant queue.
fn karpenter_role(world: &World) {
    world.put_role(
        KARPENTER_ROLE,
        vec![json!({"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Action": "ec2:DescribeInstances", "Resource": "*"}]})],
        json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
            "Principal": {"Federated": format!("arn:aws:iam::{ACCOUNT}:oidc-provider/oidc.eks")},
            "Action": "sts:AssumeRoleWithWebIdentity"}]}),
    );
}

/// The base stack `ir` with `parameters` (CodeS3Bucket given), cluster alpha's tenant stack, its
/// Karpenter role, a confirmed subscription to the alarm topic, and a router that ran an hour
/// and wrote its metric documents.
pub fn deployed_with(parameters: &[(&str, &str)]) -> World {
    let world = World::new(ACCOUNT, REGION);
    let mut base_parameters = vec![("CodeS3Bucket", "artefacts")];
    base_parameters.extend_from_slice(parameters);
    let base = world
        .deploy(STACK, BASE_TEMPLATE, &base_parameters)
        .expect("base.yaml deploys");
    karpenter_role(&world);
    let tenant: Vec<(String, String)> =
        tenant_parameters(&base.parameters, CLUSTER, KARPENTER_ROLE, Kinds::ALL);
    let tenant: Vec<(&str, &str)> = tenant
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    world
        .deploy(&tenant_stack_name(STACK, CLUSTER), TENANT_TEMPLATE, &tenant)
        .expect("tenant.yaml deploys");
    world.subscribe(&base.outputs["AlarmTopicArn"]);
    let function = base.outputs["FunctionName"].clone();
    let group = world.site(|site| site.stacks[STACK].resources["RouterLogGroup"].clone());
    world.site(|site| site.invocations.insert(function, 120.0));
    // A metric document as the router writes it (its directive list names CloudWatchMetrics).
    world.log(
        &group,
        r#"{"level":"INFO","_aws":{"CloudWatchMetrics":[{"Namespace":"InterruptionRouter"}]}}"#,
    );
    world
}

/// The hub with base.yaml's defaults.
pub fn deployed() -> World {
    deployed_with(&[])
}

/// Cluster alpha's tenant queue's name.
pub fn tenant_queue() -> String {
    format!("karpenter-{CLUSTER}")
}

/// A message Karpenter has not read for `ago`.
pub fn unread(world: &World, ago: Duration) {
    world.send(&tenant_queue(), ago);
}

/// The base stack's output `key`.
pub fn output(world: &World, key: &str) -> String {
    world.site(|site| site.stacks[STACK].stack.outputs[key].clone())
}

/// The physical id of the base stack's resource `logical`.
pub fn resource(world: &World, logical: &str) -> String {
    world.site(|site| site.stacks[STACK].resources[logical].clone())
}

/// A member account the hub serves, and the profile its operator uses there.
pub const MEMBER: &str = "111111111111";
pub const MEMBER_PROFILE: &str = "member";
pub const SPOKE_STACK: &str = "interruption-router-spoke";
pub const MEMBER_CLUSTER: &str = "beta";

/// A hub with its central bus serving [`MEMBER`], whose spoke stack (with `spoke` parameters)
/// forwards to it, with cluster beta's tenant stack there; `direct` points the member's rules
/// at the hub's direct queue instead of its bus.
pub fn with_member(direct: bool) -> World {
    let world = deployed_with(&[("CentralBus", "Enabled"), ("ServedAccounts", MEMBER)]);
    let (bus, router_role) = (
        output(&world, "HubEventBusArn"),
        output(&world, "RouterRoleArn"),
    );
    let direct_queue = output(&world, "DirectQueueArn");
    let member = world.at(MEMBER);
    let mut parameters = vec![
        ("HubEventBusArn", bus.as_str()),
        ("RouterRoleArn", router_role.as_str()),
    ];
    if direct {
        parameters.push(("HubDirectQueueArn", direct_queue.as_str()));
    }
    let spoke = member
        .deploy(SPOKE_STACK, aws_model::stacks::SPOKE_TEMPLATE, &parameters)
        .expect("spoke.yaml deploys");
    member.subscribe(&spoke.outputs["AlarmTopicArn"]);
    member.put_role(
        "KarpenterController-beta",
        Vec::new(),
        json!({"Version": "2012-10-17", "Statement": []}),
    );
    member
        .deploy(
            &tenant_stack_name(STACK, MEMBER_CLUSTER),
            TENANT_TEMPLATE,
            &[
                ("ClusterName", MEMBER_CLUSTER),
                ("KarpenterRoleName", "KarpenterController-beta"),
            ],
        )
        .expect("tenant.yaml deploys in the member");
    world.profile(MEMBER_PROFILE, MEMBER);
    world
}

/// The member's spoke role, as spoke.yaml names it by default.
pub fn spoke_role() -> String {
    format!("arn:aws:iam::{MEMBER}:role/interruption-router-spoke")
}

/// The member's direct role in the hub's region.
pub fn direct_role() -> String {
    format!("arn:aws:iam::{MEMBER}:role/interruption-router-spoke-direct-{REGION}")
}
