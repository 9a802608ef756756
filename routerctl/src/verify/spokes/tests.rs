//! The member-account checks' pure parts: account and organisation ids, the spoke role's policies.

use serde_json::Value;

use super::{parse_account_id, parse_org_id};
use aws_model::policy::{Decision, Policy, Principal, Request, evaluate};

#[test]
fn account_and_organisation_ids_are_validated() {
    assert_eq!(parse_account_id("111111111111").unwrap(), "111111111111");
    assert!(parse_account_id("11111111111").is_err());
    assert!(parse_account_id("11111111111a").is_err());
    assert!(parse_org_id("o-abcd123456").is_ok());
    assert!(parse_org_id("o-ABCD123456").is_err());
    assert!(parse_org_id("abcd123456").is_err());
}

fn bus_decision(policy: &Value, account: &str, org: Option<&str>) -> Decision {
    let policy = Policy::parse("bus policy", &policy.to_string()).unwrap();
    let principal = format!("arn:aws:iam::{account}:root");
    let mut context = vec![("aws:PrincipalAccount", account)];
    if let Some(org) = org {
        context.push(("aws:PrincipalOrgID", org));
    }
    evaluate(
        &[policy],
        &Request {
            principal: Principal::Aws(&principal),
            action: "events:PutEvents",
            resource: "arn:aws:events:us-east-1:123456789012:event-bus/ir-hub",
            context: &context,
        },
    )
}

#[test]
fn the_hub_bus_policy_admits_listed_accounts_or_the_organisation() {
    let bus = "arn:aws:events:us-east-1:123456789012:event-bus/ir-hub";
    let listed =
        aws_model::documents::hub_bus_policy(bus, "111111111111,222222222222", None).unwrap();
    assert!(bus_decision(&listed, "222222222222", None).is_allowed());
    assert_eq!(
        bus_decision(&listed, "333333333333", None),
        Decision::NotAllowed
    );
    let org = aws_model::documents::hub_bus_policy(bus, "*", Some("o-abcd123456")).unwrap();
    assert!(bus_decision(&org, "333333333333", Some("o-abcd123456")).is_allowed());
    assert_eq!(
        bus_decision(&org, "333333333333", Some("o-other00000")),
        Decision::NotAllowed
    );
    // Without the organisation's id the condition cannot be evaluated: not a pass.
    assert!(matches!(
        bus_decision(&org, "333333333333", None),
        Decision::Undetermined { .. }
    ));
}
