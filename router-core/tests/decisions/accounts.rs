//! Accounts: member accounts through their spoke role, the hub's other regions, refusals, and an
//! account whose role cannot be assumed.

use super::{
    FUNCTION_ARN, Msg, aws, dead_letter_reasons, handed_back, invoke, router, spot, sum,
    world::{HUB, MEMBER, OTHER_REGION, REGION},
};
use router_core::{accounts::REFRESH_BEFORE, aws::Aws, handler::Invocation};
use std::time::Duration;

fn estate() -> std::sync::Arc<super::world::WorldAws> {
    let aws = aws();
    for (account, region, cluster, node) in [
        (HUB, REGION, "alpha", "i-0a000001"),
        (HUB, OTHER_REGION, "alpha", "i-0a000002"),
        (MEMBER, REGION, "alpha", "i-0b000001"),
        (MEMBER, OTHER_REGION, "beta", "i-0b000002"),
    ] {
        aws.tenant(account, region, cluster);
        aws.node(account, region, node, cluster);
    }
    aws
}

fn warning(n: &str, instance: &str, account: &str, region: &str) -> Msg {
    Msg::new(n, spot(n, instance, account, region))
}

#[tokio::test(start_paused = true)]
async fn each_event_reaches_its_cluster_in_its_own_account_and_region() {
    let aws = estate();
    let router = router(&aws, &[]);
    let records = [
        warning("1", "i-0a000001", HUB, REGION),
        warning("2", "i-0a000002", HUB, OTHER_REGION),
        warning("3", "i-0b000001", MEMBER, REGION),
        warning("4", "i-0b000002", MEMBER, OTHER_REGION),
        warning("5", "i-0b000001", MEMBER, REGION),
    ];
    let answered = invoke(&router, &aws, &records).await;
    assert!(handed_back(&answered).is_empty(), "{:?}", answered.response);
    // Same cluster name in two places: each copy in its own (the world refuses a caller acting in
    // the wrong account, so each was written as that account's principal).
    assert_eq!(aws.bodies(HUB, REGION, "karpenter-alpha").len(), 1);
    assert_eq!(aws.bodies(HUB, OTHER_REGION, "karpenter-alpha").len(), 1);
    assert_eq!(aws.bodies(MEMBER, REGION, "karpenter-alpha").len(), 2);
    assert_eq!(aws.bodies(MEMBER, OTHER_REGION, "karpenter-beta").len(), 1);
    // One AssumeRole per account, shared by its regions; none at home.
    assert_eq!(aws.count("AssumeRole"), 2);
    assert_eq!(answered.metrics.assume_role_calls, 2);
    assert_eq!(router.assume_role_calls(), 2, "the environment's own count");
    let labels: Vec<&String> = answered.metrics.forwarded.keys().collect();
    assert_eq!(
        labels,
        [
            "111111111111.eu-west-1.alpha",
            "222222222222.eu-west-1.beta",
            "222222222222.us-east-1.alpha",
            "alpha"
        ]
    );
    // A second batch reuses the credentials.
    invoke(&router, &aws, &records).await;
    assert_eq!(aws.count("AssumeRole"), 2);
}

#[tokio::test(start_paused = true)]
async fn an_account_not_served_is_dead_lettered_without_a_call_in_it() {
    let aws = estate();
    let router = router(&aws, &[("SERVED_ACCOUNTS", "")]);
    let answered = invoke(&router, &aws, &[warning("m", "i-0b000001", MEMBER, REGION)]).await;
    assert!(handed_back(&answered).is_empty());
    assert_eq!(dead_letter_reasons(&aws), ["account-not-served"]);
    assert!(
        aws.calls()
            .iter()
            .all(|c| c.action == "SendMessageBatch" && c.account == HUB)
    );
}

#[tokio::test(start_paused = true)]
async fn a_function_arn_that_names_no_account_routes_nothing_and_loses_nothing() {
    let aws = estate();
    let router = router(&aws, &[]);
    let records = [warning("m", "i-0a000001", HUB, REGION)];
    let answered = router
        .invoke(
            &super::sqs_event(&aws, &records),
            Invocation {
                request_id: "r",
                function_arn: "interruption-router",
                deadline_ms: u64::MAX,
            },
        )
        .await;
    assert_eq!(handed_back(&answered), ["m"]);
    let lookups = aws
        .calls()
        .iter()
        .filter(|c| c.action != "ChangeMessageVisibilityBatch")
        .count();
    assert_eq!(lookups, 0, "{:?}", aws.calls());
    // The same record with the function's real ARN routes.
    let answered = invoke(&router, &aws, &records).await;
    assert_eq!(sum(&answered.metrics.forwarded), 1);
    let _ = FUNCTION_ARN;
}

#[tokio::test(start_paused = true)]
async fn a_role_that_cannot_be_assumed_costs_few_calls_and_hands_its_records_back() {
    let aws = estate();
    aws.forbid_role("arn:aws:iam::222222222222:role/interruption-router-spoke");
    let router = router(&aws, &[]);
    let records: Vec<Msg> = (0..5)
        .map(|n| warning(&format!("m{n}"), "i-0b000001", MEMBER, REGION))
        .chain([warning("home", "i-0a000001", HUB, REGION)])
        .collect();
    let answered = invoke(&router, &aws, &records).await;
    assert_eq!(handed_back(&answered), ["m0", "m1", "m2", "m3", "m4"]);
    assert_eq!(
        aws.bodies(HUB, REGION, "karpenter-alpha").len(),
        1,
        "home unaffected"
    );
    assert_eq!(answered.metrics.account_unreachable, 5);
    assert_eq!(
        answered.metrics.failed, 5,
        "handed back as failed, to be retried"
    );
    // Every retry of the window would assume again; the failure memory answers those within
    // 500 ms of a failed call: 4 calls (at 0, 0.6, 1.4 and 3 s of jittered backoff), not 5 × 4.
    assert!(aws.count("AssumeRole") <= 4, "{}", aws.count("AssumeRole"));
}

/// A spoke role's credentials are reused while they last and renewed `REFRESH_BEFORE` their
/// expiry (the world's last an hour), so no call is made with credentials about to expire.
#[tokio::test(start_paused = true)]
async fn spoke_credentials_are_reused_then_renewed_before_they_expire() {
    let aws = estate();
    let router = router(&aws, &[]);
    let issued = aws.now();
    let answered = invoke(&router, &aws, &[warning("1", "i-0b000001", MEMBER, REGION)]).await;
    assert!(handed_back(&answered).is_empty(), "{:?}", answered.response);
    assert_eq!(
        aws.now(),
        issued,
        "the first invocation took no virtual time"
    );
    assert_eq!(aws.count("AssumeRole"), 1);
    let renew_at = Duration::from_secs(3600) - REFRESH_BEFORE;

    tokio::time::advance(renew_at - Duration::from_secs(1)).await;
    invoke(&router, &aws, &[warning("2", "i-0b000001", MEMBER, REGION)]).await;
    assert_eq!(
        aws.count("AssumeRole"),
        1,
        "a second before renewal: reused"
    );

    tokio::time::advance(Duration::from_secs(1)).await;
    let renewed = invoke(&router, &aws, &[warning("3", "i-0b000001", MEMBER, REGION)]).await;
    assert_eq!(
        renewed.metrics.assume_role_calls, 1,
        "this invocation's own call"
    );
    assert_eq!(aws.count("AssumeRole"), 2, "at the renewal point: renewed");
    assert_eq!(aws.bodies(MEMBER, REGION, "karpenter-alpha").len(), 3);
}

/// A failed AssumeRole is remembered for `ASSUME_FAILURE_MEMORY`: the account's two regions,
/// looked up in the same retry round, cost one call per round between them, not one each.
#[tokio::test(start_paused = true)]
async fn a_failed_assume_role_answers_the_accounts_other_regions_too() {
    let aws = estate();
    aws.forbid_role("arn:aws:iam::222222222222:role/interruption-router-spoke");
    let r = router(&aws, &[]);
    let one_region = invoke(&r, &aws, &[warning("a", "i-0b000001", MEMBER, REGION)]).await;
    assert_eq!(handed_back(&one_region), ["a"]);
    let rounds = aws.count("AssumeRole");
    assert!(rounds > 1, "the lookups were retried: {rounds}");

    let aws = estate();
    aws.forbid_role("arn:aws:iam::222222222222:role/interruption-router-spoke");
    let r = router(&aws, &[]);
    let records = [
        warning("a", "i-0b000001", MEMBER, REGION),
        warning("b", "i-0b000002", MEMBER, OTHER_REGION),
    ];
    let both = invoke(&r, &aws, &records).await;
    assert_eq!(handed_back(&both), ["a", "b"]);
    assert_eq!(aws.count("AssumeRole"), rounds);
}

/// At its last receive a record whose account stays unreachable is dead-lettered
/// `account-unreachable`, and counted as such, not as failed.
#[tokio::test(start_paused = true)]
async fn an_unreachable_account_at_the_last_receive_is_dead_lettered_and_counted() {
    let aws = estate();
    aws.forbid_role("arn:aws:iam::222222222222:role/interruption-router-spoke");
    let r = router(&aws, &[]);
    let records = [
        warning("a", "i-0b000001", MEMBER, REGION).receive(20),
        warning("b", "i-0b000002", MEMBER, OTHER_REGION).receive(20),
    ];
    let answered = invoke(&r, &aws, &records).await;
    assert!(handed_back(&answered).is_empty(), "{:?}", answered.response);
    assert_eq!(
        dead_letter_reasons(&aws),
        ["account-unreachable", "account-unreachable"]
    );
    assert_eq!(answered.metrics.account_unreachable, 2);
    assert_eq!(
        answered.metrics.dead_lettered.get("account-unreachable"),
        Some(&2)
    );
    assert_eq!(answered.metrics.failed, 0);
}
