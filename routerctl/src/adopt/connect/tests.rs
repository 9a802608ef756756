use super::*;

use crate::fixtures::{self, HUB};

const MEMBER: &str = "111111111111";

/// The hub's base stack with these parameters, and its central bus when `bus`.
fn base(parameters: &[(&str, &str)], bus: bool) -> Base {
    let router = format!("arn:aws:iam::{HUB}:role/router");
    let hub_bus = format!("arn:aws:events:us-east-1:{HUB}:event-bus/ir-hub");
    let mut outputs = vec![("RouterRoleArn", router.as_str())];
    if bus {
        outputs.push(("HubEventBusArn", hub_bus.as_str()));
    }
    fixtures::base(&outputs, parameters)
}

/// Clients no test reaches AWS with: each case below is decided before any call.
fn offline(region: &str) -> Aws {
    let config = aws_config::SdkConfig::builder()
        .region(aws_config::Region::new(region.to_owned()))
        .behavior_version(aws_config::BehaviorVersion::latest())
        .build();
    Aws::new(&config).expect("clients")
}

fn member() -> Member {
    Member {
        account: MEMBER.into(),
        spoke_stack: "interruption-router-spoke".into(),
    }
}

#[test]
fn which_accounts_a_base_stack_serves() {
    let listed = base(&[("ServedAccounts", "222222222222, 111111111111")], true);
    assert!(serves(&listed, MEMBER));
    assert!(!serves(&listed, "333333333333"));
    assert!(serves(&base(&[("ServedAccounts", "*")], true), MEMBER));
    assert!(!serves(&base(&[("ServedAccounts", "")], true), MEMBER));
    // Its own account in another region: through the central bus, which must exist.
    assert!(serves(&base(&[], true), HUB));
    assert!(!serves(&base(&[], false), HUB));
}

use crate::cloud::Stack;

const BUS: &str = "arn:aws:events:us-east-1:123456789012:event-bus/ir-hub";
const ROUTER: &str = "arn:aws:iam::123456789012:role/router";
const SPOKE_ROLE: &str = "arn:aws:iam::111111111111:role/interruption-router-spoke";

/// A spoke stack as DescribeStacks answers it: `status`, these parameters, and the outputs
/// spoke.yaml gives.
fn spoke_stack(status: &str, parameters: &[(&str, &str)]) -> Stack {
    fixtures::described(
        "arn:aws:cloudformation:us-west-2:111111111111:stack/interruption-router-spoke/0",
        status,
        parameters,
        &[
            ("RegionRouterRoleArn", SPOKE_ROLE),
            ("RegionQueuePrefix", "karpenter-"),
        ],
    )
}

fn served_base() -> Base {
    let mut base = base(&[("ServedAccounts", MEMBER)], true);
    base.outputs
        .insert("QueuePrefix".into(), "karpenter-".into());
    base
}

fn judged(stack: Option<&Stack>) -> Result<Connection> {
    judge_spoke(&served_base(), &member(), "us-west-2", stack)
}

const OURS: [(&str, &str); 3] = [
    ("HubEventBusArn", BUS),
    ("RouterRoleArn", ROUTER),
    ("RouterName", "interruption-router"),
];

#[test]
fn a_spoke_of_this_hub_connects_the_member_with_its_spoke_role_and_exports() {
    let stack = spoke_stack("UPDATE_COMPLETE", &OURS);
    let connected = judged(Some(&stack)).unwrap();
    assert_eq!(
        connected.place,
        Place::Spoke("interruption-router-spoke".into())
    );
    assert_eq!(connected.sender.as_deref(), Some(SPOKE_ROLE));
    assert_eq!(
        (connected.account.as_str(), connected.region.as_str()),
        (MEMBER, "us-west-2")
    );
    assert_eq!(
        connected.inherits.get("RouterName").map(String::as_str),
        Some("interruption-router")
    );
    assert!(!connected.inherits.contains_key("KmsKey"));
    let key = format!("arn:aws:kms:us-west-2:{MEMBER}:key/k");
    let keyed = spoke_stack(
        "CREATE_COMPLETE",
        &[OURS[0], OURS[1], ("KmsKey", key.as_str())],
    );
    assert_eq!(
        judged(Some(&keyed)).unwrap().inherits.get("KmsKey"),
        Some(&key)
    );
}

#[test]
fn each_spoke_adopt_cannot_feed_is_refused_with_its_fix() {
    let refusal = |stack: Option<&Stack>| judged(stack).unwrap_err().to_string();
    let none = refusal(None);
    assert!(
        none.contains("has no spoke stack interruption-router-spoke in us-west-2")
            && none.contains(&format!("HubEventBusArn={BUS} RouterRoleArn={ROUTER}")),
        "{none}"
    );
    let failed = refusal(Some(&spoke_stack("ROLLBACK_COMPLETE", &OURS)));
    assert!(
        failed.contains("is ROLLBACK_COMPLETE") && failed.contains("describe-stack-events"),
        "{failed}"
    );
    let other_bus = "arn:aws:events:us-east-1:222222222222:event-bus/other";
    for (parameters, named) in [
        ([("HubEventBusArn", other_bus), OURS[1]], other_bus),
        (
            [
                OURS[0],
                ("RouterRoleArn", "arn:aws:iam::222222222222:role/other"),
            ],
            "role/other",
        ),
    ] {
        let other = refusal(Some(&spoke_stack("CREATE_COMPLETE", &parameters)));
        assert!(
            other.contains("serves another hub")
                && other.contains(named)
                && other.contains(&format!("RouterRoleArn={ROUTER}")),
            "{other}"
        );
    }
    let mut prefixed = served_base();
    prefixed
        .outputs
        .insert("QueuePrefix".into(), "interruption-router-".into());
    let stack = spoke_stack("CREATE_COMPLETE", &OURS);
    let prefix = judge_spoke(&prefixed, &member(), "us-west-2", Some(&stack))
        .unwrap_err()
        .to_string();
    assert!(
        prefix.contains("exports QueuePrefix karpenter-")
            && prefix.contains("QueuePrefix=interruption-router-"),
        "{prefix}"
    );
}

/// The hub's own account in another region is a member like any other: its spoke stack
/// connects it (the clients here reach nothing, so DescribeStacks fails and says so).
#[tokio::test]
async fn the_hubs_account_in_another_region_is_connected_by_a_spoke_stack() {
    let own = Member {
        account: HUB.into(),
        ..member()
    };
    let refused = connect(
        &offline("us-west-2"),
        &base(&[], true),
        "us-east-1",
        Some(&own),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        refused.contains(&format!("account {HUB} has no spoke stack")),
        "{refused}"
    );
}

#[test]
fn the_command_line_says_whose_credentials_reach_the_clusters() {
    assert!(at_the_hub(None, None));
    assert!(!at_the_hub(Some(MEMBER), None));
    assert!(
        !at_the_hub(None, Some("us-east-1")),
        "the hub's account elsewhere"
    );
    assert_eq!(
        credentials_for(HUB, MEMBER, Some("member")).unwrap(),
        Some("member")
    );
    assert_eq!(credentials_for(MEMBER, MEMBER, None).unwrap(), None);
    let refused = credentials_for(HUB, MEMBER, None).unwrap_err().to_string();
    assert!(
        refused.contains("pass --profile with a profile for account 111111111111 (docs")
            && refused.contains("The spoke role is no way in"),
        "{refused}"
    );
}

#[test]
fn a_tenant_takes_the_spokes_one_key_of_its_account_and_region() {
    let key =
        |region: &str, account: &str, id: &str| format!("arn:aws:kms:{region}:{account}:key/{id}");
    let here = key("us-west-2", MEMBER, "a");
    let elsewhere = key("eu-west-1", MEMBER, "b");
    let foreign = key("us-west-2", HUB, "c");
    let listed = [elsewhere.as_str(), here.as_str(), foreign.as_str()].join(",");
    assert_eq!(
        tenant_key(&listed, MEMBER, "us-west-2"),
        Some(here.as_str())
    );
    assert_eq!(tenant_key(&listed, MEMBER, "ap-south-1"), None);
    let two = [here.as_str(), key("us-west-2", MEMBER, "d").as_str()].join(",");
    assert_eq!(
        tenant_key(&two, MEMBER, "us-west-2"),
        None,
        "which one is a guess"
    );
    assert_eq!(tenant_key("", MEMBER, "us-west-2"), None);
}

#[tokio::test]
async fn the_hubs_own_account_and_region_is_connected_by_the_base_stack() {
    let base = base(&[], false);
    let hub = connect(&offline("us-east-1"), &base, "us-east-1", None)
        .await
        .unwrap();
    assert_eq!(hub.place, Place::Hub);
    assert_eq!(hub.sender.as_deref(), base.output("RouterRoleArn"));
    let own = Member {
        account: HUB.into(),
        ..member()
    };
    let same = connect(&offline("us-east-1"), &base, "us-east-1", Some(&own))
        .await
        .unwrap();
    assert_eq!(same.place, Place::Hub, "--account of the hub itself");
}

#[tokio::test]
async fn a_member_the_base_stack_does_not_serve_is_refused_with_the_fix() {
    let base = base(&[("ServedAccounts", "222222222222")], true);
    let refused = connect(&offline("us-west-2"), &base, "us-east-1", Some(&member()))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("does not serve account 111111111111 (ServedAccounts: 222222222222)")
            && refused.contains("ServedAccounts listing 111111111111"),
        "{refused}"
    );
}
