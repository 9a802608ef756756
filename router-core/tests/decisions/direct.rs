//! Direct deliveries: a record of the direct queue is routed only when SQS says the named
//! account's direct role sent it ([`router_core::direct`]).

use std::sync::Arc;

use super::{
    DIRECT_ARN, DLQ, Msg, aws, dead_letter_reasons, handed_back, invoke, invoke_directly,
    replay_batch, router, spot,
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
async fn a_role_made_again_is_read_again_at_once_and_its_first_send_goes_through() {
    let aws = estate();
    let router = direct_router(&aws);
    invoke(
        &router,
        &aws,
        &[members_warning("1", Some(&session(MEMBER_ROLE)))],
    )
    .await;
    assert_eq!(aws.count("GetRole"), 1);
    // The spoke stack deleted and deployed again: a new role, a new id. Its first send, a second
    // after the last read, is read again before anything is refused: a real interruption.
    aws.direct_role(MEMBER, "AROAMEMBERDIRECT00002");
    let renewed = session("AROAMEMBERDIRECT00002");
    tokio::time::advance(std::time::Duration::from_secs(1)).await;
    let answered = invoke(&router, &aws, &[members_warning("2", Some(&renewed))]).await;
    assert!(handed_back(&answered).is_empty(), "{:?}", answered.response);
    assert!(dead_letter_reasons(&aws).is_empty());
    assert_eq!(aws.count("GetRole"), 2);
    // The new id is known now: no more reads.
    invoke(&router, &aws, &[members_warning("3", Some(&renewed))]).await;
    assert_eq!(aws.count("GetRole"), 2);
    assert_eq!(
        aws.bodies(MEMBER, REGION, "karpenter-alpha").len(),
        3,
        "1, 2 and 3"
    );
}

#[tokio::test(start_paused = true)]
async fn a_stranger_is_refused_only_after_a_fresh_read_and_cannot_make_the_router_ask_each_time() {
    let aws = estate();
    let router = direct_router(&aws);
    invoke(
        &router,
        &aws,
        &[members_warning("1", Some(&session(MEMBER_ROLE)))],
    )
    .await;
    assert_eq!(aws.count("GetRole"), 1);
    // NEIGHBOUR's direct role names MEMBER's instance: MEMBER's role is read again (it might
    // have been made again), and the fresh read's mismatch is foreign-sender. Ten of them in one
    // batch cost one read.
    let stranger = session(NEIGHBOUR_ROLE);
    let forged: Vec<Msg> = (0..10)
        .map(|i| members_warning(&format!("f{i}"), Some(&stranger)))
        .collect();
    let answered = invoke(&router, &aws, &forged).await;
    assert!(handed_back(&answered).is_empty());
    assert_eq!(aws.count("GetRole"), 2);
    assert_eq!(dead_letter_reasons(&aws), ["foreign-sender"; 10]);
    // The same stranger again within a minute: no read (at most one a minute per sender), and
    // no refusal either, since no read made for it is fresh: handed back, nothing sent.
    tokio::time::advance(std::time::Duration::from_secs(5)).await;
    let answered = invoke(&router, &aws, &[members_warning("g", Some(&stranger))]).await;
    assert_eq!(handed_back(&answered), ["g"]);
    assert_eq!(aws.count("GetRole"), 2);
    assert_eq!(dead_letter_reasons(&aws).len(), 10);
    // MEMBER's own role still goes through from memory meanwhile.
    invoke(
        &router,
        &aws,
        &[members_warning("2", Some(&session(MEMBER_ROLE)))],
    )
    .await;
    assert_eq!(aws.count("GetRole"), 2);
    // A minute on, the stranger's record is read for once more, and refused.
    tokio::time::advance(REREAD_AFTER).await;
    let answered = invoke(
        &router,
        &aws,
        &[members_warning("g", Some(&stranger)).receive(2)],
    )
    .await;
    assert!(handed_back(&answered).is_empty());
    assert_eq!(aws.count("GetRole"), 3);
    assert_eq!(dead_letter_reasons(&aws).len(), 11);
    assert_eq!(
        aws.bodies(MEMBER, REGION, "karpenter-alpha").len(),
        2,
        "1 and 2, none of the stranger's"
    );
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

/// A direct delivery forged by NEIGHBOUR naming MEMBER's instance, dead-lettered `access-denied`
/// while MEMBER's spoke role could not read its direct role (GetRole denied past IAM's grace: a
/// 0.1.0 spoke, a boundary or an SCP), then replayed exactly as docs/operating.md's loop builds
/// the batch: refused `foreign-sender` on replay, and MEMBER's queue stays empty.
#[tokio::test(start_paused = true)]
async fn a_forged_direct_delivery_replayed_from_the_dead_letter_queue_is_judged_by_its_sender() {
    let aws = estate();
    let router = direct_router(&aws);
    aws.fail("GetRole", 2, Fault::code("AccessDenied"));
    let forged = members_warning("f", Some(&session(NEIGHBOUR_ROLE)));
    let answered = invoke(&router, &aws, std::slice::from_ref(&forged)).await;
    assert_eq!(handed_back(&answered), ["f"]);
    tokio::time::advance(DENIAL_GRACE).await;
    invoke(&router, &aws, &[forged.receive(2)]).await;
    assert_eq!(dead_letter_reasons(&aws), ["access-denied"]);
    let dead = aws.held(HUB, REGION, DLQ).remove(0);
    let attribute = |name: &str| {
        dead.attributes
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(attribute("source").as_deref(), Some(DIRECT_ARN));
    assert_eq!(attribute("sender"), Some(session(NEIGHBOUR_ROLE)));

    // The fix (GetRole granted), then the documented replay.
    let answered = invoke_directly(&router, &aws, &replay_batch(&dead, "f")).await;
    let response = answered.response.expect("an answer");
    assert_eq!(response["outcomes"]["f"], "dead-lettered", "{response}");
    assert!(aws.bodies(MEMBER, REGION, "karpenter-alpha").is_empty());
    assert_eq!(
        dead_letter_reasons(&aws),
        ["access-denied", "foreign-sender"]
    );
    // The new dead letter keeps where the record first came from, so replaying it again is
    // judged the same way.
    let again = aws.held(HUB, REGION, DLQ).remove(1);
    assert!(
        again
            .attributes
            .contains(&("source".into(), DIRECT_ARN.into()))
    );

    // MEMBER's own role's delivery, dead-lettered the same way, is forwarded when replayed.
    let aws = estate();
    let router = direct_router(&aws);
    aws.fail("GetRole", 2, Fault::code("AccessDenied"));
    let real = members_warning("r", Some(&session(MEMBER_ROLE)));
    invoke(&router, &aws, std::slice::from_ref(&real)).await;
    tokio::time::advance(DENIAL_GRACE).await;
    invoke(&router, &aws, &[real.receive(2)]).await;
    let dead = aws.held(HUB, REGION, DLQ).remove(0);
    let answered = invoke_directly(&router, &aws, &replay_batch(&dead, "r")).await;
    assert_eq!(answered.response.unwrap()["outcomes"]["r"], "forwarded");
    assert_eq!(aws.bodies(MEMBER, REGION, "karpenter-alpha").len(), 1);
}
