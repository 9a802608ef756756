//! Direct deliveries: a record of the direct queue is routed only when SQS says the named
//! account's direct role sent it ([`router_core::direct`]).

use std::sync::Arc;

use super::{
    DIRECT_ARN, Msg, aws, dead_letter_reasons, handed_back, invoke, router, spot,
    world::{Fault, HUB, MEMBER, OTHER_REGION, REGION, WorldAws},
};
use router_core::{direct::REREAD_AFTER, handler::Router, retry::DENIAL_GRACE};

/// A third account, served like MEMBER.
const NEIGHBOUR: &str = "333333333333";
const MEMBER_ROLE: &str = "AROAMEMBERDIRECT00001";
const NEIGHBOUR_ROLE: &str = "AROANEIGHBOURDIRECT01";

/// MEMBER's and NEIGHBOUR's cluster alpha in the hub's region, each with its direct role.
fn estate() -> Arc<WorldAws> {
    let aws = aws();
    aws.allow_role(&format!(
        "arn:aws:iam::{NEIGHBOUR}:role/interruption-router-spoke"
    ));
    for (account, node, role) in [
        (MEMBER, "i-0b000001", MEMBER_ROLE),
        (NEIGHBOUR, "i-0c000001", NEIGHBOUR_ROLE),
    ] {
        aws.tenant(account, REGION, "alpha");
        aws.node(account, REGION, node, "alpha");
        aws.direct_role(account, role);
    }
    aws.tenant(HUB, REGION, "alpha");
    aws.node(HUB, REGION, "i-0a000001", "alpha");
    aws
}

fn direct_router(aws: &Arc<WorldAws>) -> Router<WorldAws> {
    router(aws, &[("DIRECT_QUEUE_ARN", DIRECT_ARN)])
}

/// Record `n`, a spot warning for MEMBER's node, from the direct queue as `sender`.
fn members_warning(n: &str, sender: Option<&str>) -> Msg {
    Msg::new(n, spot(n, "i-0b000001", MEMBER, REGION)).direct(sender)
}

fn session(role: &str) -> String {
    format!("{role}:1700000000000000000")
}

#[tokio::test(start_paused = true)]
async fn a_members_event_sent_by_its_own_direct_role_is_forwarded() {
    let aws = estate();
    let router = direct_router(&aws);
    let records: Vec<Msg> = (0..5)
        .map(|i| members_warning(&i.to_string(), Some(&session(MEMBER_ROLE))))
        .collect();
    let answered = invoke(&router, &aws, &records).await;
    assert!(handed_back(&answered).is_empty(), "{:?}", answered.response);
    assert_eq!(aws.bodies(MEMBER, REGION, "karpenter-alpha").len(), 5);
    assert!(dead_letter_reasons(&aws).is_empty());
    // One GetRole for the account, made as its spoke role (the world refuses anyone else), and
    // none on the next batch.
    assert_eq!(aws.count("GetRole"), 1);
    invoke(
        &router,
        &aws,
        &[members_warning("6", Some(&session(MEMBER_ROLE)))],
    )
    .await;
    assert_eq!(aws.bodies(MEMBER, REGION, "karpenter-alpha").len(), 6);
    assert_eq!(aws.count("GetRole"), 1);
}

/// (what the record is, why it is refused)
#[tokio::test(start_paused = true)]
async fn every_record_the_named_accounts_role_did_not_send_is_dead_lettered_and_sends_nothing() {
    let neighbours = session(NEIGHBOUR_ROLE);
    let cases: [(&str, Msg); 6] = [
        (
            "another member's role naming MEMBER's instance",
            members_warning("m", Some(&neighbours)),
        ),
        ("no SenderId", members_warning("m", None)),
        (
            "a user, not a role session",
            members_warning("m", Some("AIDAADMINUSER0000001")),
        ),
        (
            "the hub's own account",
            Msg::new("m", spot("m", "i-0a000001", HUB, REGION)).direct(Some(&neighbours)),
        ),
        (
            "MEMBER's role, but another region than the hub's",
            Msg::new("m", spot("m", "i-0b000001", MEMBER, OTHER_REGION))
                .direct(Some(&session(MEMBER_ROLE))),
        ),
        (
            "MEMBER's role id with another session: still MEMBER's role",
            members_warning("m", Some(&format!("{MEMBER_ROLE}:other"))),
        ),
    ];
    for (what, record) in cases {
        let aws = estate();
        let router = direct_router(&aws);
        let answered = invoke(&router, &aws, &[record]).await;
        assert!(handed_back(&answered).is_empty(), "{what}");
        let sent = aws.bodies(MEMBER, REGION, "karpenter-alpha").len()
            + aws.bodies(HUB, REGION, "karpenter-alpha").len()
            + aws.bodies(MEMBER, OTHER_REGION, "karpenter-alpha").len();
        if what.starts_with("MEMBER's role id") {
            assert_eq!((sent, dead_letter_reasons(&aws).len()), (1, 0), "{what}");
        } else {
            assert_eq!(sent, 0, "{what}: nothing is sent");
            assert_eq!(dead_letter_reasons(&aws), ["foreign-sender"], "{what}");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn an_account_without_a_direct_role_has_no_direct_deliveries() {
    let aws = estate();
    aws.delete_direct_role(MEMBER);
    let router = direct_router(&aws);
    invoke(
        &router,
        &aws,
        &[members_warning("m", Some(&session(MEMBER_ROLE)))],
    )
    .await;
    assert!(aws.bodies(MEMBER, REGION, "karpenter-alpha").is_empty());
    assert_eq!(dead_letter_reasons(&aws), ["foreign-sender"]);
}

#[tokio::test(start_paused = true)]
async fn the_ingest_queues_records_are_not_asked_for_a_sender() {
    let aws = estate();
    let router = direct_router(&aws);
    let mut record = Msg::new("m", spot("m", "i-0b000001", MEMBER, REGION));
    record.sender_id = None;
    let answered = invoke(&router, &aws, &[record]).await;
    assert!(handed_back(&answered).is_empty());
    assert_eq!(aws.bodies(MEMBER, REGION, "karpenter-alpha").len(), 1);
    assert_eq!(aws.count("GetRole"), 0);
}

#[tokio::test(start_paused = true)]
async fn a_role_made_again_is_read_again_but_a_stranger_cannot_make_the_router_ask_each_time() {
    let aws = estate();
    let router = direct_router(&aws);
    invoke(
        &router,
        &aws,
        &[members_warning("1", Some(&session(MEMBER_ROLE)))],
    )
    .await;
    assert_eq!(aws.count("GetRole"), 1);
    // The spoke stack deleted and deployed again: a new role, a new id.
    aws.direct_role(MEMBER, "AROAMEMBERDIRECT00002");
    let renewed = session("AROAMEMBERDIRECT00002");
    // Within a minute of the last read, a sender that does not match is refused from memory.
    invoke(&router, &aws, &[members_warning("2", Some(&renewed))]).await;
    assert_eq!(aws.count("GetRole"), 1);
    assert_eq!(dead_letter_reasons(&aws), ["foreign-sender"]);
    // Later, the mismatch is read again once, and the new role's sends go through.
    tokio::time::advance(REREAD_AFTER).await;
    invoke(&router, &aws, &[members_warning("3", Some(&renewed))]).await;
    invoke(&router, &aws, &[members_warning("4", Some(&renewed))]).await;
    assert_eq!(aws.count("GetRole"), 2);
    assert_eq!(
        aws.bodies(MEMBER, REGION, "karpenter-alpha").len(),
        3,
        "1, 3 and 4"
    );
    assert_eq!(dead_letter_reasons(&aws).len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_role_that_cannot_be_read_routes_nothing_unchecked() {
    // Throttled: handed back, and forwarded on the next receive.
    let aws = estate();
    let router = direct_router(&aws);
    aws.fail("GetRole", 1, Fault::code("Throttling"));
    let record = members_warning("m", Some(&session(MEMBER_ROLE)));
    let answered = invoke(&router, &aws, std::slice::from_ref(&record)).await;
    assert_eq!(handed_back(&answered), ["m"]);
    assert!(aws.bodies(MEMBER, REGION, "karpenter-alpha").is_empty());
    let answered = invoke(&router, &aws, &[record.clone().receive(2)]).await;
    assert!(handed_back(&answered).is_empty());
    assert_eq!(aws.bodies(MEMBER, REGION, "karpenter-alpha").len(), 1);
    // Still throttled on its last receive: dead-lettered as retries exhausted, not as a denial.
    let aws = estate();
    let router = direct_router(&aws);
    aws.break_action("GetRole", Fault::code("Throttling"));
    invoke(&router, &aws, &[record.receive(20)]).await;
    assert_eq!(dead_letter_reasons(&aws), ["retries-exhausted"]);

    // Denied (a spoke role without iam:GetRole): retried for IAM's grace, then dead-lettered
    // access-denied; never sent.
    let aws = estate();
    let router = direct_router(&aws);
    aws.break_action("GetRole", Fault::code("AccessDenied"));
    let record = members_warning("m", Some(&session(MEMBER_ROLE)));
    let answered = invoke(&router, &aws, std::slice::from_ref(&record)).await;
    assert_eq!(handed_back(&answered), ["m"]);
    tokio::time::advance(DENIAL_GRACE).await;
    let answered = invoke(&router, &aws, &[record.receive(5)]).await;
    assert!(handed_back(&answered).is_empty());
    assert_eq!(dead_letter_reasons(&aws), ["access-denied"]);
    assert!(aws.bodies(MEMBER, REGION, "karpenter-alpha").is_empty());
}
