//! The hub's router role and its queues' policies edited by hand, the tenant queue's kinds, a
//! queue deleted and a stack that is not there: the rest of what used to be one end-to-end
//! test's walk of breakages, each now its own test on the model.

use serde_json::Value;

use super::{failed, hub, only, says, verify, verify_with};
use crate::{cloud::model::World, verify::Options};

/// The router role's inline policy as text, edited by `edit` (which must change it).
fn edit_router_policy(world: &World, edit: impl Fn(&str) -> String) {
    let arn = hub::output(world, "RouterRoleArn");
    world.edit(|state, _, _| {
        let role = state.roles.get_mut(&arn).expect("the router role");
        let (_, document) = &mut role.inline[0];
        let text = document.to_string();
        let edited = edit(&text);
        assert_ne!(edited, text, "the edit changes the policy");
        *document = serde_json::from_str(&edited).expect("still JSON");
    });
}

#[test]
fn a_router_role_whose_sends_are_narrowed_to_another_cluster() {
    let world = hub::deployed();
    edit_router_policy(&world, |p| p.replace("karpenter-*", "karpenter-beta"));
    let check = only(&world, "tenant:alpha:router-role");
    for finding in [
        "may not sqs:GetQueueUrl (",
        "sqs:ListQueueTags (",
        "on karpenter-alpha",
    ] {
        says(&check, finding, "");
    }
    // Two refused actions of one statement name that statement once.
    let fix = check.fix.as_deref().unwrap_or_default();
    for statement in ["SendToClusterQueues", "ReadClusterQueueOwnership"] {
        assert_eq!(fix.matches(statement).count(), 1, "{fix}");
    }
}

#[test]
fn a_router_role_without_a_lookup_path_or_the_hand_back() {
    let world = hub::deployed();
    edit_router_policy(&world, |p| {
        p.replace("\"tag:GetResources\"", "\"tag:GetTagKeys\"")
            .replace("\"sqs:ChangeMessageVisibility\"", "\"sqs:ListQueues\"")
    });
    let check = only(&world, "router-role");
    says(
        &check,
        "may not tag:GetResources on *",
        "statements ResolveInstanceTagsByArn, ConsumeIngestQueue",
    );
    says(&check, "sqs:ChangeMessageVisibility on ir-ingest", "");
}

/// Every SQS action on the cluster queues: the router could read and purge them.
#[test]
fn a_router_role_widened_to_every_sqs_action() {
    let world = hub::deployed();
    edit_router_policy(&world, |p| p.replace("\"sqs:ListQueueTags\"", "\"sqs:*\""));
    let check = only(&world, "router-role");
    says(
        &check,
        "may also sqs:ReceiveMessage on karpenter-",
        "list-attached-role-policies",
    );
    says(&check, "sqs:PurgeQueue", "");
}

fn edit_queue_policy(world: &World, queue: &str, edit: impl FnOnce(&mut Value)) {
    world.site(|site| {
        let attributes = &mut site.queues.get_mut(queue).expect("the queue").attributes;
        let mut policy: Value = serde_json::from_str(&attributes["Policy"]).unwrap();
        edit(&mut policy);
        attributes.insert("Policy".into(), policy.to_string());
    });
}

/// The ingest queue's policy as it was before it denied other senders; then also open to every
/// rule.
#[test]
fn an_ingest_queue_policy_that_denies_no_other_sender() {
    let world = hub::deployed();
    let ingest = aws_model::arn::arn_name(&hub::output(&world, "IngestQueueArn")).to_owned();
    edit_queue_policy(&world, &ingest, |p| {
        p["Statement"]
            .as_array_mut()
            .unwrap()
            .retain(|s| s["Sid"] != "DenySendersOtherThanTheseRules");
    });
    let check = only(&world, "ingest-queue:policy");
    says(
        &check,
        "it does not deny other senders",
        "DenySendersOtherThanTheseRules",
    );

    edit_queue_policy(&world, &ingest, |p| {
        p["Statement"][0]
            .as_object_mut()
            .unwrap()
            .remove("Condition");
    });
    let check = only(&world, "ingest-queue:policy");
    says(&check, "lets any EventBridge rule send", "");
}

/// A tenant queue policy written for another router role: it denies the real one.
#[test]
fn a_tenant_queue_policy_for_another_router() {
    let world = hub::deployed();
    let router = hub::output(&world, "RouterRoleArn");
    let queue = hub::tenant_queue();
    edit_queue_policy(&world, &queue, |p| {
        *p = serde_json::from_str(
            &p.to_string()
                .replace(&router, "arn:aws:iam::123456789012:role/old-router"),
        )
        .unwrap();
    });
    let check = only(&world, "tenant:alpha:queue-policy");
    says(&check, "the router role", "DenySendersOtherThanRouter");
}

/// The kinds a tenant takes, as its stack tags its queue (EventKinds), are said; a tag that
/// names no kind fails with the fix (the router then sends every kind).
#[test]
fn the_kinds_a_tenant_takes_come_from_its_queues_tag() {
    let world = hub::deployed();
    let report = verify(&world);
    let queue_check = |report: &crate::verify::Report| {
        report
            .checks
            .iter()
            .find(|c| c.name == "tenant:alpha:queue")
            .unwrap()
            .clone()
    };
    says(&queue_check(&report), "takes every event kind", "");
    let tag = |value: &str| {
        world.site(|site| {
            site.queues
                .get_mut(&hub::tenant_queue())
                .unwrap()
                .tags
                .insert(router_core::tenancy::KINDS_TAG.to_owned(), value.to_owned());
        })
    };
    tag("spot-interruption state-change");
    let report = verify(&world);
    assert_eq!(failed(&report), Vec::<&str>::new());
    says(
        &queue_check(&report),
        "takes spot-interruption state-change; declines rebalance-recommendation \
         capacity-reservation-interruption scheduled-change (EventKinds)",
        "",
    );
    tag("health");
    let check = only(&world, "tenant:alpha:queue");
    says(&check, "the router sends it every kind", "EventKinds=");
}

/// Only a named cluster can be missed: its queue deleted while its tenant record stands.
#[test]
fn a_named_clusters_queue_deleted() {
    let world = hub::deployed();
    world.site(|site| site.queues.remove(&hub::tenant_queue()));
    let report = verify_with(
        &world,
        Options {
            stack: hub::STACK.into(),
            clusters: vec![hub::CLUSTER.into()],
            ..Options::default()
        },
    );
    assert_eq!(failed(&report), ["tenant:alpha:queue"], "{report:#?}");
    let check = report.checks.iter().find(|c| !c.passed).unwrap();
    says(
        check,
        "does not exist in us-east-1, while its tenant record stands",
        "make deploy-tenant CLUSTER=alpha",
    );
}

#[test]
fn a_stack_that_is_not_deployed() {
    let world = hub::deployed();
    let report = verify_with(
        &world,
        Options {
            stack: "nope".into(),
            ..Options::default()
        },
    );
    assert_eq!(failed(&report), ["stack"]);
    assert_eq!(report.checks.len(), 1);
    says(
        &report.checks[0],
        "nope: ValidationError: Stack with id nope does not exist",
        "make deploy-base BUCKET=… REGION=us-east-1 STACK_NAME=nope",
    );
}

/// A tenant stack deployed with KARPENTER_ROLE=none names no controller role: verify says that
/// Karpenter's own getting-started policy reaches only the queue it made, and how to name it.
#[test]
fn a_tenant_stack_that_names_no_karpenter_role() {
    let world = hub::deployed();
    let stack = aws_model::stacks::tenant_stack_name(hub::STACK, hub::CLUSTER);
    world.site(|site| {
        site.stacks
            .get_mut(&stack)
            .expect("the tenant stack")
            .stack
            .parameters
            .insert("KarpenterRoleName".into(), String::new())
    });
    let check = only(&world, "tenant:alpha:karpenter-role");
    says(
        &check,
        "no Karpenter controller role is named for alpha",
        "verify --karpenter-role alpha=<its role name>",
    );
}
