//! The base stack's queues and mapping, and the tenant queues: each defect alone failing its own
//! check with its fix.

use std::time::Duration;

use serde_json::{Value, json};

use super::{failed, hub, oldest_age, only, queue_attribute, queue_name, says, verify};
use crate::cloud::model::World;

/// Lambda refuses a mapping whose queue's visibility is under the function's timeout; at the
/// timeout or above it, under six times it, a batch Lambda retries can reappear mid-work. Six
/// times passes.
#[test]
fn an_ingest_queue_whose_visibility_does_not_suit_the_function() {
    for (visibility, why) in [
        ("20", "Lambda refuses to update the event source mapping"),
        ("30", "under Lambda's recommended 6×"),
        ("60", "under Lambda's recommended 6×"),
    ] {
        let world = hub::deployed();
        queue_attribute(
            &world,
            &queue_name(&world, "IngestQueueArn"),
            "VisibilityTimeout",
            Some(visibility),
        );
        let check = only(&world, "ingest-queue");
        says(
            &check,
            &format!("visibility timeout {visibility} s against the function timeout 30 s: {why}"),
            "VisibilityTimeout=180",
        );
    }
    let world = hub::deployed();
    queue_attribute(
        &world,
        &queue_name(&world, "IngestQueueArn"),
        "VisibilityTimeout",
        Some("180"),
    );
    assert_eq!(failed(&verify(&world)), Vec::<&str>::new());
}

/// A queue that cannot be read is not a queue that does not exist: the check says what AWS
/// answered.
#[test]
fn an_ingest_queue_that_cannot_be_looked_up_is_not_called_missing() {
    let world = hub::deployed();
    world.refuse("GetQueueUrl");
    let report = verify(&world);
    let check = report
        .checks
        .iter()
        .find(|c| c.name == "ingest-queue")
        .unwrap();
    assert!(!check.passed);
    assert!(
        check.detail.contains("GetQueueUrl ir-ingest: AccessDenied"),
        "{}",
        check.detail
    );
    assert!(!check.detail.contains("does not exist"), "{}", check.detail);
}

/// Without its redrive, or redriving elsewhere than the stack's DLQ, records that keep failing
/// are lost.
#[test]
fn an_ingest_queue_without_its_redrive_or_redriving_elsewhere() {
    let world = hub::deployed();
    queue_attribute(
        &world,
        &queue_name(&world, "IngestQueueArn"),
        "RedrivePolicy",
        None,
    );
    let check = only(&world, "ingest-queue");
    says(
        &check,
        "redrive target is None, not the stack's DLQ",
        "deadLetterTargetArn",
    );

    let world = hub::deployed();
    let elsewhere = json!({"deadLetterTargetArn": "arn:aws:sqs:us-east-1:123456789012:other", "maxReceiveCount": 5});
    queue_attribute(
        &world,
        &queue_name(&world, "IngestQueueArn"),
        "RedrivePolicy",
        Some(&elsewhere.to_string()),
    );
    let check = only(&world, "ingest-queue");
    says(
        &check,
        "redrive target is Some(\"arn:aws:sqs:us-east-1:123456789012:other\")",
        "deadLetterTargetArn",
    );
}

#[test]
fn an_unencrypted_dead_letter_queue() {
    let world = hub::deployed();
    queue_attribute(
        &world,
        &queue_name(&world, "DeadLetterQueueArn"),
        "SqsManagedSseEnabled",
        Some("false"),
    );
    let check = only(&world, "dead-letter-queue");
    says(
        &check,
        "is not encrypted at rest",
        "SqsManagedSseEnabled=true",
    );
}

#[test]
fn an_ingest_queue_without_its_policy() {
    let world = hub::deployed();
    queue_attribute(
        &world,
        &queue_name(&world, "IngestQueueArn"),
        "Policy",
        None,
    );
    let check = only(&world, "ingest-queue:policy");
    says(
        &check,
        "has no queue policy: EventBridge cannot deliver to it",
        "aws sqs set-queue-attributes",
    );
}

/// A statement without `aws:SourceArn` lets any rule anywhere inject events.
#[test]
fn a_dead_letter_queue_policy_open_to_every_rule() {
    let world = hub::deployed();
    let dlq = queue_name(&world, "DeadLetterQueueArn");
    let arn = hub::output(&world, "DeadLetterQueueArn");
    let open = json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
        "Principal": {"Service": "events.amazonaws.com"}, "Action": "sqs:SendMessage", "Resource": arn}]});
    queue_attribute(&world, &dlq, "Policy", Some(&open.to_string()));
    let check = only(&world, "dead-letter-queue:policy");
    says(
        &check,
        "no aws:SourceArn condition",
        "aws sqs set-queue-attributes",
    );
}

fn mapping(world: &World, change: impl FnOnce(&mut Vec<crate::cloud::Mapping>)) {
    let function = hub::output(world, "FunctionName");
    world.site(|site| change(site.mappings.get_mut(&function).expect("the mappings")));
}

#[test]
fn an_event_source_mapping_disabled_or_without_partial_failures_or_deleted() {
    let world = hub::deployed();
    mapping(&world, |m| m[0].state = Some("Disabled".into()));
    let check = only(&world, "event-source-mapping");
    says(
        &check,
        "is Disabled",
        "aws lambda update-event-source-mapping --region us-east-1 --uuid",
    );

    let world = hub::deployed();
    mapping(&world, |m| m[0].function_response_types.clear());
    let check = only(&world, "event-source-mapping");
    says(
        &check,
        "lacks ReportBatchItemFailures",
        "--function-response-types ReportBatchItemFailures",
    );

    let world = hub::deployed();
    mapping(&world, Vec::clear);
    let check = only(&world, "event-source-mapping");
    says(
        &check,
        "nothing reads the queue",
        "aws lambda create-event-source-mapping",
    );
}

/// A message older than a minute: nobody reads the queue (Karpenter deletes what it reads
/// within seconds). Younger, someone may still.
#[test]
fn a_tenant_queue_nobody_reads() {
    let world = hub::deployed();
    hub::unread(&world, Duration::from_secs(20));
    assert_eq!(failed(&verify(&world)), Vec::<&str>::new());
    world.advance(Duration::from_secs(50));
    let check = only(&world, "tenant:alpha:read");
    says(
        &check,
        "s old: nobody reads it",
        "settings.interruptionQueue in cluster alpha",
    );
    assert!(oldest_age(&check) >= 70, "{}", check.detail);
    // And names the reader the tenant stack grants.
    says(
        &check,
        "nobody reads it",
        &format!("the reader, role {}", hub::KARPENTER_ROLE),
    );
}

#[test]
fn a_tenant_record_deleted() {
    let world = hub::deployed();
    world.site(|site| site.parameters.clear());
    let check = only(&world, "tenant:alpha:record");
    says(
        &check,
        "no tenant record /interruption-router/tenant-queues/karpenter-alpha",
        "make deploy-tenant CLUSTER=alpha",
    );
}

#[test]
fn a_tenant_queue_unencrypted() {
    let world = hub::deployed();
    queue_attribute(
        &world,
        &hub::tenant_queue(),
        "SqsManagedSseEnabled",
        Some("false"),
    );
    let check = only(&world, "tenant:alpha:encryption");
    says(
        &check,
        "is not encrypted at rest",
        "SqsManagedSseEnabled=true",
    );
}

/// A tenant queue whose policy lost its Deny: it still admits the router, but any principal of
/// the account allowed sqs:SendMessage by its own policies can write a fake interruption.
#[test]
fn a_tenant_queue_policy_that_denies_nobody() {
    let world = hub::deployed();
    let queue = hub::tenant_queue();
    let mut policy: Value =
        world.site(|site| serde_json::from_str(&site.queues[&queue].attributes["Policy"]).unwrap());
    policy["Statement"]
        .as_array_mut()
        .unwrap()
        .retain(|s| s["Effect"] == "Allow");
    queue_attribute(&world, &queue, "Policy", Some(&policy.to_string()));
    let check = only(&world, "tenant:alpha:queue-policy");
    says(
        &check,
        "other principals in the account are not denied",
        "aws sqs set-queue-attributes",
    );
}

/// Karpenter's role loses the tenant stack's grant: its controller gets AccessDenied.
#[test]
fn a_karpenter_role_without_the_tenant_stacks_grant() {
    let world = hub::deployed();
    let role = format!("arn:aws:iam::{}:role/{}", hub::ACCOUNT, hub::KARPENTER_ROLE);
    world.edit(|state, _, _| state.roles.get_mut(&role).unwrap().managed.clear());
    let check = only(&world, "tenant:alpha:karpenter-role");
    says(&check, hub::KARPENTER_ROLE, "");
}

/// A queue of the cluster's name that is not the tenant stack's (no tenant tag, no policy
/// admitting the router alone): the router does not write it.
#[test]
fn a_look_alike_queue_is_not_onboarded() {
    let world = hub::deployed();
    let queue = hub::tenant_queue();
    world.site(|site| {
        let q = site.queues.get_mut(&queue).unwrap();
        q.tags.clear();
        q.attributes.remove("Policy");
    });
    let report = verify(&world);
    let failed = failed(&report);
    assert!(failed.contains(&"tenant:alpha:queue"), "{failed:?}");
    let check = report
        .checks
        .iter()
        .find(|c| c.name == "tenant:alpha:queue")
        .unwrap();
    says(
        check,
        "the tenant stack did not make it",
        "routerctl adopt --cluster alpha",
    );
}

#[test]
fn no_cluster_onboarded() {
    let world = hub::deployed();
    let queue = hub::tenant_queue();
    world.site(|site| site.queues.remove(&queue));
    let check = only(&world, "tenants");
    says(&check, "karpenter-", "make deploy-tenant");

    // A hub that serves other accounts may run no cluster of its own.
    let world = hub::deployed_with(&[("CentralBus", "Enabled"), ("ServedAccounts", hub::MEMBER)]);
    world.site(|site| site.queues.remove(&queue));
    let report = verify(&world);
    let tenants = report.check("tenants").expect("the tenants check");
    assert!(tenants.passed, "{tenants:?}");
    assert!(
        tenants.detail.contains("the router serves other accounts"),
        "{tenants:?}"
    );
}

/// `--cluster alpha` whose queue was deleted by hand while its tenant stack and record stand:
/// the router dead-letters alpha's events, and only deleting the stack brings the queue back.
#[test]
fn a_named_clusters_queue_deleted_under_its_stack() {
    let world = hub::deployed();
    let queue = hub::tenant_queue();
    world.site(|site| site.queues.remove(&queue));
    let report = crate::verify::tests::verify_with(
        &world,
        crate::verify::Options {
            stack: hub::STACK.into(),
            clusters: vec!["alpha".into()],
            ..crate::verify::Options::default()
        },
    );
    let check = report
        .check("tenant:alpha:queue")
        .expect("alpha's queue is checked");
    says(
        check,
        "while its tenant record stands: the router dead-letters every event for alpha",
        "which an update does not repair: delete the tenant stack and",
    );
}

/// A tenant queue without any policy: it does not grant the router, and anyone in the account
/// with sqs:SendMessage could write a fake interruption.
#[test]
fn a_tenant_queue_without_a_policy() {
    let world = hub::deployed();
    queue_attribute(&world, &hub::tenant_queue(), "Policy", None);
    let report = verify(&world);
    let check = report
        .checks
        .iter()
        .find(|c| c.name == "tenant:alpha:queue-policy")
        .unwrap();
    assert!(!check.passed);
    says(check, "has no queue policy", "aws sqs set-queue-attributes");
}

/// The ingest queue's policy written for other rules: EventBridge refuses the stack's own.
#[test]
fn an_ingest_queue_policy_for_other_rules() {
    let world = hub::deployed();
    let ingest = queue_name(&world, "IngestQueueArn");
    let policy = world.site(|site| site.queues[&ingest].attributes["Policy"].clone());
    let moved = policy.replace("rule/ir-", "rule/old-");
    assert_ne!(moved, policy);
    queue_attribute(&world, &ingest, "Policy", Some(&moved));
    let check = only(&world, "ingest-queue:policy");
    says(
        &check,
        "ir-SpotInterruptionRule-GENERATED",
        "aws sqs set-queue-attributes",
    );
}

/// A tenant queue under another account's key: the stacks grant roles their own account's keys.
#[test]
fn a_tenant_queue_under_another_accounts_key() {
    let world = hub::deployed();
    let queue = hub::tenant_queue();
    queue_attribute(
        &world,
        &queue,
        "KmsMasterKeyId",
        Some("arn:aws:kms:us-east-1:999999999999:key/elsewhere"),
    );
    let report = verify(&world);
    let check = report
        .checks
        .iter()
        .find(|c| c.name == "tenant:alpha:key")
        .unwrap();
    assert!(!check.passed, "{check:?}");
    says(
        check,
        "a key of account 999999999999, not the queue's account 123456789012",
        "KMS_KEY=<a customer-managed key of account 123456789012",
    );
}

/// A tenant queue whose policy lost its reader Deny (DenyReadersOtherThanKarpenter): Karpenter's
/// role still reads it, but any principal of the account allowed sqs:ReceiveMessage by its own
/// policies can take (and, as Karpenter does, delete) the cluster's interruptions.
#[test]
fn a_tenant_queue_policy_that_lets_any_reader_in() {
    let world = hub::deployed();
    let queue = hub::tenant_queue();
    let mut policy: Value =
        world.site(|site| serde_json::from_str(&site.queues[&queue].attributes["Policy"]).unwrap());
    super::without_statement(&mut policy, "DenyReadersOtherThanKarpenter");
    queue_attribute(&world, &queue, "Policy", Some(&policy.to_string()));
    let check = only(&world, "tenant:alpha:queue-policy");
    says(
        &check,
        "other principals in the account are not denied sqs:ReceiveMessage",
        "DenyReadersOtherThanKarpenter",
    );
    // The policy the fix restores has it, for Karpenter's role.
    says(&check, "", hub::KARPENTER_ROLE);
}

/// A queue without the tenant tag whose policy admits the router alone is written as a tenant
/// queue from before the tag (every kind): a kinds tag beside it is not read, so the cluster gets
/// kinds it declined.
#[test]
fn a_kinds_tag_without_the_tenant_tag() {
    let world = hub::deployed();
    let queue = hub::tenant_queue();
    world.site(|site| {
        let tags = &mut site.queues.get_mut(&queue).unwrap().tags;
        tags.remove(router_core::tenancy::TENANT_TAG);
        tags.insert(
            router_core::tenancy::KINDS_TAG.to_owned(),
            "spot-interruption".to_owned(),
        );
    });
    let check = only(&world, "tenant:alpha:queue");
    says(
        &check,
        "its interruption-router:kinds tag is not read without the interruption-router:tenant tag",
        "interruption-router:tenant=alpha",
    );
    // Without the kinds tag it is what a tenant queue from before the tag is: written, every kind.
    world.site(|site| {
        let tags = &mut site.queues.get_mut(&queue).unwrap().tags;
        tags.remove(router_core::tenancy::KINDS_TAG);
    });
    let report = verify(&world);
    assert_eq!(failed(&report), Vec::<&str>::new(), "{report:#?}");
}
