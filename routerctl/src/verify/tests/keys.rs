//! Queues under the KMS keys the stacks create (`KmsKey=Create`), and the central bus's direct
//! queue: each broken as it breaks in an account, each failing its own check.

use super::{failed, hub, says, verify, without_statement};
use crate::{check::Check, cloud::model::World};

fn failing(world: &World) -> (Vec<String>, Vec<Check>) {
    let report = verify(world);
    let names = failed(&report).iter().map(|n| n.to_string()).collect();
    (
        names,
        report.checks.into_iter().filter(|c| !c.passed).collect(),
    )
}

/// The key of the base stack's queues (the one key ARN its ingest queue names).
fn base_key(world: &World) -> String {
    let ingest = aws_model::arn::arn_name(&hub::output(world, "IngestQueueArn")).to_owned();
    world.site(|site| site.queues[&ingest].attributes["KmsMasterKeyId"].clone())
}

#[test]
fn a_disabled_key_fails_each_queue_under_it() {
    let world = hub::deployed_with(&[("KmsKey", "Create")]);
    let key = base_key(&world);
    world.edit(|state, _, _| state.keys.get_mut(&key).expect("the key").enabled = false);
    for check in &base_queues_fail(&world) {
        says(check, "Disabled", "");
    }
}

/// Without its statement for EventBridge, the key refuses the rules' deliveries: every
/// interruption is lost before the router sees it.
#[test]
fn a_key_policy_without_eventbridge_fails_the_queues_the_rules_feed() {
    let world = hub::deployed_with(&[("KmsKey", "Create")]);
    let key = base_key(&world);
    key_without(&world, &key, "EventBridgeRulesOfThisAccountDeliver");
    for check in &base_queues_fail(&world) {
        says(
            check,
            "EventBridge may not kms:GenerateDataKey and kms:Decrypt",
            "make deploy-base STACK_NAME=ir",
        );
    }
}

/// The tenant stack's own key without the statement that lets the account's roles decrypt
/// through SQS: Karpenter's role may no longer read the queue.
#[test]
fn a_tenant_key_that_karpenter_may_not_use() {
    let world = hub::deployed_with(&[("KmsKey", "Create")]);
    let queue = hub::tenant_queue();
    let key = world.site(|site| site.queues[&queue].attributes["KmsMasterKeyId"].clone());
    assert_ne!(key, base_key(&world), "the tenant stack makes its own key");
    key_without(&world, &key, "AccountRolesDecryptThroughSqs");
    let (names, checks) = failing(&world);
    assert!(
        names.contains(&"tenant:alpha:key".to_owned()),
        "{checks:#?}"
    );
    assert!(
        names.iter().all(|n| n.starts_with("tenant:alpha:")),
        "{names:?}"
    );
}

/// The direct queue's policy opened to every principal of the served accounts, and its mapping
/// deleted: each fails its own check.
#[test]
fn a_direct_queue_open_to_any_member_role_or_read_by_nothing() {
    let served = [
        ("CentralBus", "Enabled"),
        ("ServedAccounts", "111111111111"),
    ];
    let world = hub::deployed_with(&served);
    let direct = aws_model::arn::arn_name(&hub::output(&world, "DirectQueueArn")).to_owned();
    let arn = hub::output(&world, "DirectQueueArn");
    let open = serde_json::json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
        "Principal": {"AWS": "arn:aws:iam::111111111111:root"}, "Action": "sqs:SendMessage",
        "Resource": arn}]});
    world.site(|site| {
        site.queues
            .get_mut(&direct)
            .unwrap()
            .attributes
            .insert("Policy".into(), open.to_string());
    });
    let (names, checks) = failing(&world);
    assert_eq!(names, ["direct-queue:policy"], "{checks:#?}");

    let world = hub::deployed_with(&served);
    let function = hub::output(&world, "FunctionName");
    world.site(|site| {
        site.mappings
            .get_mut(&function)
            .unwrap()
            .retain(|m| m.event_source_arn.as_deref() != Some(arn.as_str()))
    });
    let (names, checks) = failing(&world);
    assert_eq!(names, ["event-source-mapping:direct"], "{checks:#?}");
    says(
        &checks[0],
        "nothing reads the queue",
        "aws lambda create-event-source-mapping",
    );
}

/// The direct queue as the ingest queue is judged: encrypted, its visibility suiting the
/// function, read by an enabled mapping.
#[test]
fn a_direct_queue_unencrypted_too_visible_or_its_mapping_disabled() {
    let served = [
        ("CentralBus", "Enabled"),
        ("ServedAccounts", "111111111111"),
    ];
    let direct =
        |world: &World| aws_model::arn::arn_name(&hub::output(world, "DirectQueueArn")).to_owned();
    let world = hub::deployed_with(&served);
    super::queue_attribute(
        &world,
        &direct(&world),
        "SqsManagedSseEnabled",
        Some("false"),
    );
    let (names, _) = failing(&world);
    assert_eq!(names, ["direct-queue"]);

    let world = hub::deployed_with(&served);
    super::queue_attribute(&world, &direct(&world), "VisibilityTimeout", Some("10"));
    let (names, checks) = failing(&world);
    assert_eq!(names, ["direct-queue"]);
    says(
        &checks[0],
        "Lambda refuses to update the event source mapping",
        "VisibilityTimeout=180",
    );

    let world = hub::deployed_with(&served);
    let arn = hub::output(&world, "DirectQueueArn");
    let function = hub::output(&world, "FunctionName");
    world.site(|site| {
        for m in site.mappings.get_mut(&function).unwrap() {
            if m.event_source_arn.as_deref() == Some(arn.as_str()) {
                m.state = Some("Disabled".into());
            }
        }
    });
    let (names, _) = failing(&world);
    assert_eq!(names, ["event-source-mapping:direct"]);
}

/// The checks that fail: exactly the two queues under the base stack's key.
fn base_queues_fail(world: &World) -> Vec<Check> {
    let (names, checks) = failing(world);
    assert_eq!(
        names,
        ["ingest-queue:key", "dead-letter-queue:key"],
        "{checks:#?}"
    );
    checks
}

/// Key `key`'s policy without its statement `sid`.
fn key_without(world: &World, key: &str, sid: &str) {
    world.edit(|state, _, _| {
        without_statement(&mut state.keys.get_mut(key).expect("the key").policy, sid)
    });
}
