//! The world's own semantics, where the tests of both halves lean on them: who may assume a role,
//! what a queue's policy refuses, what a receive hides and for how long, and that a view sees
//! only its own account's queues.

use std::time::Duration;

use serde_json::json;

use super::{World, missing};

const HUB: &str = "111111111111";
const MEMBER: &str = "222222222222";

fn trusting(world: &World, name: &str, principal: &str) -> String {
    world.put_role(
        name,
        Vec::new(),
        json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
            "Principal": {"AWS": principal}, "Action": "sts:AssumeRole"}]}),
    )
}

#[test]
fn assume_role_admits_only_whom_the_trust_policy_names_and_acts_in_the_roles_account() {
    let world = World::new(HUB, "us-east-1");
    let router = world.as_caller(HUB, "arn:aws:iam::111111111111:role/router");
    let spoke = trusting(
        &world.at(MEMBER),
        "spoke",
        "arn:aws:iam::111111111111:role/router",
    );
    let session = router
        .assume_role(&spoke, "s")
        .expect("the trust names the router");
    assert_eq!(session.account(), MEMBER);
    assert_eq!(
        session.caller(),
        "arn:aws:sts::222222222222:assumed-role/spoke/s"
    );
    let stranger = world.as_caller(HUB, "arn:aws:iam::111111111111:role/other");
    let refused = stranger.assume_role(&spoke, "s").unwrap_err();
    assert_eq!(refused.code, "AccessDenied");
    let missing_role = router
        .assume_role("arn:aws:iam::222222222222:role/none", "s")
        .unwrap_err();
    assert_eq!(missing_role.code, "AccessDenied");
}

#[test]
fn a_queue_policy_refuses_a_sender_it_denies_and_no_other() {
    let world = World::new(HUB, "us-east-1");
    let arn = "arn:aws:sqs:us-east-1:111111111111:q";
    let deny = json!({"Version": "2012-10-17", "Statement": [{"Effect": "Deny",
        "Principal": {"AWS": "arn:aws:iam::111111111111:role/bad"}, "Action": "sqs:SendMessage",
        "Resource": arn}]});
    let url = world.create_queue("q", &[("Policy", &deny.to_string())]);
    let bad = world.as_caller(HUB, "arn:aws:iam::111111111111:role/bad");
    assert_eq!(bad.sqs_send(&url, "x").unwrap_err().code, "AccessDenied");
    let good = world.as_caller(HUB, "arn:aws:iam::111111111111:role/good");
    good.sqs_send(&url, "y").expect("not denied");
    assert_eq!(world.take("q"), ["y"]);
    let elsewhere = url.replace("/q", "/gone");
    assert_eq!(
        good.sqs_send(&elsewhere, "z").unwrap_err().code,
        missing::QUEUE
    );
}

#[tokio::test(start_paused = true)]
async fn a_receive_hides_for_the_queues_visibility_timeout_and_a_delete_needs_its_handle() {
    let world = World::new(HUB, "us-east-1");
    let url = world.create_queue("ingest", &[("VisibilityTimeout", "180")]);
    let first = world.mapping_receive("ingest", "m1", "body").unwrap();
    assert!(world.sqs_receive(&url, 30).unwrap().is_empty(), "hidden");
    tokio::time::advance(Duration::from_secs(181)).await;
    let again = world.mapping_receive("ingest", "m1", "body").unwrap();
    assert_ne!(first, again, "each receive its own handle");
    world.mapping_delete("ingest", &first);
    let held = world.read(|_, site| site.queues["ingest"].messages.len());
    assert_eq!(held, 1, "an old handle deletes nothing");
    world.mapping_delete("ingest", &again);
    let held = world.read(|_, site| site.queues["ingest"].messages.len());
    assert_eq!(held, 0);
}

#[test]
fn a_view_sees_its_own_accounts_queue_and_not_a_namesake_elsewhere() {
    let world = World::new(HUB, "us-east-1");
    let url = world.create_queue("karpenter-alpha", &[]);
    let member = world.at(MEMBER);
    member.create_queue("karpenter-alpha", &[]);
    assert_eq!(
        member.sqs_send(&url, "x").unwrap_err().code,
        missing::QUEUE,
        "the hub's URL names no queue of the member's"
    );
    world.sqs_send(&url, "x").expect("the hub's own");
}

/// EventBridge applies a rule's state change "after a short period": the model delivers by the
/// old state for [`crate::RULE_CHANGE_DELAY`], then by the new; ListRules shows the new at once.
#[tokio::test(start_paused = true)]
async fn a_rule_change_reaches_delivery_only_after_eventbridges_delay() {
    let delay = crate::RULE_CHANGE_DELAY;
    let world = World::new(HUB, "us-east-1");
    let arn = "arn:aws:sqs:us-east-1:111111111111:old";
    let allow = json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
        "Principal": {"Service": "events.amazonaws.com"}, "Action": "sqs:SendMessage",
        "Resource": arn}]});
    world.create_queue("old", &[("Policy", &allow.to_string())]);
    world.put_rule("Spot", &json!({"source": ["aws.ec2"]}), &[("q", arn)]);
    let event = json!({"version": "0", "id": "e", "source": "aws.ec2", "detail-type": "x"});
    assert_eq!(world.publish(&event), ["old"]);

    world.set_rule_state("Spot", "DISABLED").unwrap();
    let listed = world.read(|_, site| {
        site.rules[&("default".into(), "Spot".into())]
            .0
            .state
            .clone()
    });
    assert_eq!(
        listed.as_deref(),
        Some("DISABLED"),
        "ListRules shows it at once"
    );
    tokio::time::advance(delay - Duration::from_millis(1)).await;
    assert_eq!(world.publish(&event), ["old"], "still delivering");
    tokio::time::advance(Duration::from_millis(1)).await;
    assert!(world.publish(&event).is_empty(), "disabled for delivery");

    world.set_rule_state("Spot", "ENABLED").unwrap();
    assert!(
        world.publish(&event).is_empty(),
        "not enabled for delivery yet"
    );
    tokio::time::advance(delay).await;
    assert_eq!(world.publish(&event), ["old"]);
}
