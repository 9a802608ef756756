//! Updating stacks deployed from the templates as they were before locked-down accounts
//! (`tests/fixtures/templates-59db6f7`): with the new parameters at their defaults every resource
//! keeps exactly the properties it had (so nothing is replaced, deleted or even modified, and
//! `make demo` is what it was); turning a key or a boundary on updates in place; a role path
//! replaces the role it is set on and nothing else, by the rule CloudFormation documents (a
//! change to a create-only property, here `Path`, replaces the resource).

use anyhow::Result;
use aws_model::{
    stacks::{BASE_TEMPLATE, FIS_TEMPLATE, SPOKE_TEMPLATE, TENANT_TEMPLATE},
    template::{ResourceSchemas, Stage, Template, replacements},
};
use serde_json::Value;

const REGION: &str = "us-east-1";

fn current(name: &str) -> &'static str {
    match name {
        "base.yaml" => BASE_TEMPLATE,
        "tenant.yaml" => TENANT_TEMPLATE,
        "fis.yaml" => FIS_TEMPLATE,
        _ => SPOKE_TEMPLATE,
    }
}

/// The deployments of today's stacks the updates start from: the update tests' own, a spoke
/// stack in a region that does not create the spoke role, and a cluster's FIS stack.
fn deployed() -> Vec<(&'static str, &'static str, Stage)> {
    let mut scenarios = super::super::stacks::update_scenarios();
    let (_, _, spoke) = scenarios
        .iter()
        .find(|(name, _, _)| *name == "spoke.yaml")
        .cloned()
        .expect("a spoke scenario");
    scenarios.push((
        "spoke.yaml",
        "another region",
        spoke.parameter("CreateSpokeRole", "false"),
    ));
    scenarios.push((
        "fis.yaml",
        "a cluster under test",
        Stage::new("interruption-router-fis-alpha", "123456789012", REGION)
            .parameter("ClusterName", "alpha"),
    ));
    scenarios
}

/// What changed in the templates after the fixture for reasons of their own (tenant records and
/// `MAX_RECEIVE_COUNT`, which one truth across execution environments needs; Direct mode's
/// removal; the mapping's `MaximumConcurrency`, which bounds a storm's AssumeRole and EC2 calls;
/// each cluster's event kinds: the queue's kinds tag and the dashboard's declined widget; alarms
/// that page by default: their actions; a hub's direct queue: the router's variable and role
/// statements, and the spoke role's read of the direct role's id; the security review: the
/// DLQ's deny of other senders, a tenant queue's deny of other readers, the hub bus's admitting
/// only the forwarding roles, which takes their name, and the Karpenter grant's path),
/// taken out of a
/// resource's properties before the comparison below, which is about the locked-down parameters.
fn without_later_changes(logical: &str, properties: Option<Value>) -> Option<Value> {
    let mut properties = properties?;
    if let Some(statements) = properties
        .pointer_mut("/PolicyDocument/Statement")
        .and_then(Value::as_array_mut)
    {
        statements.retain(|s| {
            s["Sid"] != "DenySendersOtherThanTheRouterAndTheseRules"
                && s["Sid"] != "DenyReadersOtherThanKarpenter"
        });
    }
    if logical == "HubEventBus"
        && let Some(statements) = properties
            .pointer_mut("/Policy/Statement")
            .and_then(Value::as_array_mut)
    {
        for s in statements.iter_mut().filter_map(Value::as_object_mut) {
            if let Some(condition) = s.get_mut("Condition").and_then(Value::as_object_mut) {
                condition.remove("ArnLike");
                if condition.is_empty() {
                    s.remove("Condition");
                }
            }
        }
    }
    // The spoke rules' targets name the forwarding role, which has a name of its own now.
    if let Some(targets) = properties.get_mut("Targets").and_then(Value::as_array_mut) {
        for target in targets.iter_mut().filter_map(Value::as_object_mut) {
            let forwarder = target
                .get("RoleArn")
                .and_then(Value::as_str)
                .is_some_and(|arn| arn.contains("-ForwardToHubRole-") || arn.contains("-forward-"));
            if forwarder {
                target.insert("RoleArn".into(), Value::from("the forwarding role"));
            }
        }
    }
    if matches!(logical, "ForwardToHubRole" | "KarpenterQueueAccess")
        && let Some(resource) = properties.as_object_mut()
    {
        resource.remove("RoleName");
        resource.remove("Path");
    }
    if let Some(policies) = properties["Policies"].as_array_mut() {
        for policy in policies {
            if let Some(statements) = policy["PolicyDocument"]["Statement"].as_array_mut() {
                statements
                    .retain(|s| s["Sid"] != "ReadTenantRecords" && s["Sid"] != "ReadDirectRoleId");
                // A hub's router role consumes (and never writes) its direct queue too.
                for s in statements.iter_mut() {
                    let on_queues = ["ConsumeIngestQueue", "NeverSendToIngestQueue"]
                        .contains(&s["Sid"].as_str().unwrap_or_default());
                    if let Some(both) = s["Resource"].as_array().filter(|_| on_queues) {
                        s["Resource"] = both[0].clone();
                    }
                }
            }
        }
    }
    if let Some(body) = properties["DashboardBody"].as_str() {
        // Direct mode is gone: the ingest queue's widget no longer says "(Queue mode)".
        let mut body = body.replace(" (Queue mode)", "");
        // Each cluster's event kinds: the widget of declined events (and the Logs Insights row
        // after it, the interruption records' queries).
        if let (Some(from), Some(to)) = (
            body.find(",\n    {\"type\": \"metric\", \"x\": 0, \"y\": 30"),
            body.rfind("\n  ]\n}"),
        ) && body[from..to].contains("\"id\": \"declined\"")
        {
            body.replace_range(from..to, "");
        }
        properties["DashboardBody"] = Value::from(body);
    }
    // Each cluster's event kinds: tenant.yaml's tag of them on the queue.
    if let Some(tags) = properties.get_mut("Tags").and_then(Value::as_array_mut) {
        tags.retain(|t| t["Key"] != interruption_router::tenancy::KINDS_TAG);
    }
    // Alarms page by default: given no topic, they notify the one the stack creates.
    if let Some(alarm) = properties.as_object_mut() {
        for actions in ["AlarmActions", "OKActions"] {
            alarm.remove(actions);
        }
    }
    if logical == "IngestEventSourceMapping"
        && let Some(mapping) = properties.as_object_mut()
    {
        mapping.remove("ScalingConfig");
    }
    if logical == "RouterFunction"
        && let Some(variables) = properties["Environment"]["Variables"].as_object_mut()
    {
        variables.remove("MAX_RECEIVE_COUNT");
        variables.remove("DIRECT_QUEUE_ARN");
    }
    // Dashboards are global to the account: the name carries the region since 0.2.0.
    if logical == "RouterDashboard"
        && let Some(dashboard) = properties.as_object_mut()
    {
        dashboard.remove("DashboardName");
    }
    Some(properties)
}

/// Resources added after the fixture for reasons of their own (see [`without_later_changes`]):
/// tenant records, the topic alarms page when a stack is given none, a hub's direct queue
/// (CentralBus=Enabled: member rules straight into the hub), and the saved Logs Insights queries
/// of the interruption records (made whatever the parameters).
const LATER_RESOURCES: [&str; 9] = [
    "TenantRecord",
    "AlarmTopic",
    "DirectQueue",
    "DirectQueuePolicy",
    "DirectEventSourceMapping",
    "DirectQueueAgeAlarm",
    "InterruptionsByPoolQuery",
    "DeliveryDelayByClusterQuery",
    "LateDeliveriesQuery",
];

#[test]
fn at_their_defaults_the_new_parameters_change_no_resource() -> Result<()> {
    for (name, scenario, stage) in deployed() {
        let old = Template::parse(name, &e2e_tests::template_before_locked_down(name))?;
        let new = Template::parse(name, current(name))?;
        // `aws cloudformation deploy` keeps the stack's parameters (their deployed values,
        // defaults included); the new ones take their defaults.
        let before = old.deploy(&stage)?;
        let kept = stage.updating(&before, &new);
        let after = new.deploy(&kept)?;
        for (logical, _) in new.resources() {
            if LATER_RESOURCES.contains(&logical) {
                continue;
            }
            // A resource new to the template must not be created at the defaults.
            let was = match old.doc["Resources"].get(logical) {
                Some(_) => without_later_changes(logical, before.properties(logical)?),
                None => None,
            };
            // The release's version tag (CHANGELOG.md, 0.2.0) is the one property releases add.
            let is =
                without_later_changes(logical, after.properties(logical)?).map(without_version_tag);
            assert_eq!(
                was, is,
                "{name} ({scenario}): {logical} changes with the new parameters at their defaults"
            );
        }
        for (logical, _) in old.resources() {
            // Direct mode's resources went with it; a stack in Queue mode never had them.
            let condition = old.doc["Resources"][logical]["Condition"].as_str();
            if matches!(condition, Some("DirectMode" | "HubDirectMode")) {
                continue;
            }
            assert!(
                new.doc["Resources"].get(logical).is_some(),
                "{name}: {logical} is gone"
            );
        }
    }
    Ok(())
}

/// A resource's properties without the `interruption-router:version` tag (and without Tags when
/// that was the only one).
fn without_version_tag(mut properties: serde_json::Value) -> serde_json::Value {
    if let Some(tags) = properties.get_mut("Tags").and_then(|t| t.as_array_mut()) {
        tags.retain(|t| t["Key"] != "interruption-router:version");
        if tags.is_empty() {
            properties.as_object_mut().map(|p| p.remove("Tags"));
        }
    }
    properties
}

#[test]
fn a_key_or_a_boundary_updates_in_place_and_a_role_path_replaces_only_its_role() -> Result<()> {
    let schemas = ResourceSchemas::load(&e2e_tests::cfn_schemas()?, REGION)?;
    let boundary = "boundary";
    for (name, scenario, stage) in deployed() {
        let old = Template::parse(name, &e2e_tests::template_before_locked_down(name))?;
        let new = Template::parse(name, current(name))?;
        let before = old.deploy(&stage)?;
        let mut changes = vec![];
        let path_of = |role: &str| {
            vec![format!(
                "{role} (AWS::IAM::Role) is replaced: Path changes from null to \"/platform/\""
            )]
        };
        if matches!(name, "base.yaml" | "tenant.yaml") {
            changes.push(("KmsKey", "Create", vec![]));
        }
        if name != "tenant.yaml" {
            changes.push(("PermissionsBoundary", boundary, vec![]));
            let role = match name {
                "base.yaml" => "RouterRole",
                "fis.yaml" => "ExperimentRole",
                _ => "ForwardToHubRole",
            };
            changes.push(("RolePath", "/platform/", path_of(role)));
        }
        // The spoke role's path: the hub only names it (its policy and the router's variable
        // change in place); the region that creates the role replaces it, the others name it.
        match (name, scenario) {
            ("base.yaml", _) | ("spoke.yaml", "another region") => {
                changes.push(("SpokeRolePath", "/platform/", vec![]));
            }
            ("spoke.yaml", _) => {
                changes.push(("SpokeRolePath", "/platform/", path_of("SpokeRole")))
            }
            _ => {}
        }
        for (parameter, value, expected) in changes {
            let given = stage.clone().parameter(parameter, value);
            let after = new.deploy(&given)?;
            let replaced = e2e_tests::losing_state(replacements(&before, &after, &schemas)?);
            assert_eq!(
                replaced, expected,
                "{name} ({scenario}) with {parameter}={value}"
            );
        }
    }
    Ok(())
}
