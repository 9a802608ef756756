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

/// `account`'s forwarding role (spoke.yaml's ForwardToHubRole) putting events on the bus.
fn bus_decision(policy: &Value, account: &str, org: Option<&str>) -> Decision {
    let principal =
        format!("arn:aws:iam::{account}:role/interruption-router-spoke-forward-us-east-1");
    put_as(policy, &principal, account, org)
}

fn put_as(policy: &Value, principal: &str, account: &str, org: Option<&str>) -> Decision {
    let policy = Policy::parse("bus policy", &policy.to_string()).unwrap();
    let mut context = vec![
        ("aws:PrincipalAccount", account),
        ("aws:PrincipalArn", principal),
    ];
    if let Some(org) = org {
        context.push(("aws:PrincipalOrgID", org));
    }
    evaluate(
        &[policy],
        &Request {
            principal: Principal::Aws(principal),
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
    // Only the forwarding roles: the account's administrator or its root puts nothing there.
    for other in [
        "arn:aws:iam::222222222222:root",
        "arn:aws:iam::222222222222:role/admin",
    ] {
        assert!(
            !put_as(&listed, other, "222222222222", None).is_allowed(),
            "{other}"
        );
    }
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

mod spoke_stack {
    //! `spoke:<account>:stack`, judged on the stack as DescribeStacks answered it.

    use std::collections::BTreeMap;

    use crate::cloud::Stack;

    use super::super::{Hub, Member, spoke_stack::judge};
    use crate::{deployment::Base, fixtures};

    const BUS: &str = "arn:aws:events:us-east-1:123456789012:event-bus/ir-hub";
    const SPOKE_ROLE: &str = "arn:aws:iam::111111111111:role/interruption-router-spoke";

    fn base() -> Base {
        fixtures::base(&[], &[])
    }

    fn hub(base: &Base) -> Hub<'_> {
        Hub {
            base,
            region: "us-east-1",
            bus: Some(BUS),
            router_role: Some("arn:aws:iam::123456789012:role/router"),
            spoke_role_name: "interruption-router-spoke",
            spoke_role_path: "/",
            spoke_role_arn: SPOKE_ROLE.into(),
            queue_prefix: "karpenter-".into(),
            prefix: "spoke:111111111111".into(),
        }
    }

    const MEMBER: Member<'static> = Member {
        account: "111111111111",
        spoke_stack: "interruption-router-spoke",
        profile: None,
        org_id: None,
    };

    /// The spoke stack: `status`, and spoke.yaml's outputs with `changed` in place of theirs.
    fn stack(status: &str, changed: &[(&str, &str)]) -> Stack {
        let mut outputs = BTreeMap::from([
            ("HubEventBusArn", BUS),
            ("QueuePrefix", "karpenter-"),
            ("RegionRouterRoleArn", SPOKE_ROLE),
            ("AlarmTopicArn", "arn:aws:sns:us-east-1:111111111111:alarms"),
        ]);
        outputs.extend(changed.iter().copied());
        let outputs: Vec<(&str, &str)> = outputs.into_iter().collect();
        fixtures::described(
            "arn:aws:cloudformation:us-east-1:111111111111:stack/interruption-router-spoke/0",
            status,
            &[],
            &outputs,
        )
    }

    fn resources() -> Result<BTreeMap<String, String>, String> {
        Ok(BTreeMap::from([(
            "ForwardToHubRole".to_owned(),
            "spoke-ForwardToHubRole-X".to_owned(),
        )]))
    }

    #[test]
    fn a_complete_spoke_of_this_hub_passes_and_names_what_the_others_read() {
        let base = base();
        let (check, spoke) = judge(
            &hub(&base),
            &MEMBER,
            &stack("UPDATE_ROLLBACK_COMPLETE", &[]),
            resources(),
        );
        assert!(check.passed, "{}", check.detail);
        assert_eq!(check.name, "spoke:111111111111:stack");
        assert_eq!(
            spoke.alarm_topic.as_deref(),
            Some("arn:aws:sns:us-east-1:111111111111:alarms")
        );
        assert!(spoke.resources.contains_key("ForwardToHubRole"));
    }

    /// Each defect alone fails the check with its own finding and fix.
    #[test]
    fn each_defect_of_the_spoke_stack_fails_with_its_fix() {
        let base = base();
        let hub = hub(&base);
        let other_bus = "arn:aws:events:us-east-1:222222222222:event-bus/other";
        for (status, changed, found, fix) in [
            (
                "ROLLBACK_COMPLETE",
                vec![],
                "is ROLLBACK_COMPLETE",
                "describe-stack-events",
            ),
            (
                "CREATE_COMPLETE",
                vec![("HubEventBusArn", other_bus)],
                "it forwards to arn:aws:events:us-east-1:222222222222:event-bus/other, not this hub's",
                "with HubEventBusArn=arn:aws:events:us-east-1:123456789012:event-bus/ir-hub",
            ),
            (
                "CREATE_COMPLETE",
                vec![("QueuePrefix", "other-")],
                "its QueuePrefix is other-, but the router names queues karpenter-<cluster>",
                "with QueuePrefix=karpenter-, then update its tenant stacks",
            ),
            (
                "CREATE_COMPLETE",
                vec![(
                    "RegionRouterRoleArn",
                    "arn:aws:iam::111111111111:role/elsewhere",
                )],
                "it exports RouterRoleArn arn:aws:iam::111111111111:role/elsewhere",
                "with SpokeRoleName=interruption-router-spoke",
            ),
        ] {
            let (check, _) = judge(&hub, &MEMBER, &stack(status, &changed), resources());
            assert!(!check.passed, "{changed:?}");
            assert!(check.detail.contains(found), "{}", check.detail);
            let given = check.fix.unwrap_or_default();
            assert!(given.contains(fix), "{given}");
        }
        let (unread, _) = judge(
            &hub,
            &MEMBER,
            &stack("CREATE_COMPLETE", &[]),
            Err("AccessDenied".into()),
        );
        assert!(!unread.passed);
        assert!(
            unread
                .fix
                .unwrap_or_default()
                .contains("cloudformation:DescribeStackResources"),
        );
    }
}

mod spoke_role {
    //! `spoke:<account>:role-trust`, `:role-permissions` and `:role-reads-direct-role`, judged on
    //! the spoke role's policies as spoke.yaml renders them, and each broken.

    use aws_model::{documents, policy::Policy, roles::Role};
    use serde_json::{Value, json};

    use super::super::{
        Hub, Member,
        spoke_role::{check_reads_direct_role, check_role_permissions, check_role_trust},
    };
    use crate::{deployment::Base, fixtures};

    const ROUTER: &str = "arn:aws:iam::123456789012:role/router";
    const SPOKE_ROLE: &str = "arn:aws:iam::111111111111:role/interruption-router-spoke";
    const MEMBER: Member<'static> = Member {
        account: "111111111111",
        spoke_stack: "interruption-router-spoke",
        profile: None,
        org_id: None,
    };

    fn hub(base: &Base) -> Hub<'_> {
        Hub {
            base,
            region: "us-east-1",
            bus: None,
            router_role: Some(ROUTER),
            spoke_role_name: "interruption-router-spoke",
            spoke_role_path: "/",
            spoke_role_arn: SPOKE_ROLE.into(),
            queue_prefix: "karpenter-".into(),
            prefix: "spoke:111111111111".into(),
        }
    }

    fn policy(document: &Value) -> Policy {
        Policy::parse("policy", &document.to_string()).unwrap()
    }

    /// The spoke role with spoke.yaml's policy edited by `edit` and its trust `trust`.
    fn spoke_role(edit: impl FnOnce(&mut Value), trust: Result<Value, String>) -> Role {
        let mut document =
            documents::spoke_role_policy("111111111111", "us-east-1", "karpenter-").unwrap();
        edit(&mut document);
        Role::new(
            SPOKE_ROLE,
            vec![policy(&document)],
            None,
            trust.map(|t| policy(&t)),
        )
    }

    fn rendered_trust() -> Result<Value, String> {
        Ok(documents::spoke_trust_policy(ROUTER).unwrap())
    }

    fn without(sid: &'static str) -> impl FnOnce(&mut Value) {
        move |d| {
            d["Statement"]
                .as_array_mut()
                .unwrap()
                .retain(|s| s["Sid"] != sid)
        }
    }

    #[test]
    fn the_role_spoke_yaml_renders_passes_every_check() {
        let base = fixtures::base(&[], &[]);
        let hub = hub(&base);
        let role = spoke_role(|_| {}, rendered_trust());
        for check in [
            check_role_trust(&hub, &MEMBER, &role),
            check_role_permissions(&hub, &MEMBER, &role),
            check_reads_direct_role(&hub, &MEMBER, &role),
        ] {
            assert!(check.passed, "{check:?}");
        }
    }

    #[test]
    fn a_trust_that_admits_more_or_another_router_fails() {
        let base = fixtures::base(&[], &[]);
        let hub = hub(&base);
        let mut wider = rendered_trust().unwrap();
        wider["Statement"][0]["Principal"]["AWS"] = json!([ROUTER, "111111111111"]);
        let check = check_role_trust(&hub, &MEMBER, &spoke_role(|_| {}, Ok(wider)));
        assert!(
            !check.passed && check.detail.contains("it also admits"),
            "{check:?}"
        );
        let mut other = rendered_trust().unwrap();
        other["Statement"][0]["Principal"]["AWS"] = json!("arn:aws:iam::123456789012:role/other");
        let check = check_role_trust(&hub, &MEMBER, &spoke_role(|_| {}, Ok(other)));
        assert!(
            !check.passed && check.detail.contains("may not assume"),
            "{check:?}"
        );
        let check = check_role_trust(
            &hub,
            &MEMBER,
            &spoke_role(|_| {}, Err("GetRole: AccessDenied".into())),
        );
        assert!(
            !check.passed && check.detail.contains("AccessDenied"),
            "{check:?}"
        );
        assert!(
            check
                .fix
                .is_some_and(|f| f.contains("update-assume-role-policy"))
        );
    }

    /// Its lookups (sending is judged per tenant queue, `tenant:<c>:spoke-role`).
    #[test]
    fn a_role_without_a_lookup_or_with_a_wider_grant_fails() {
        let base = fixtures::base(&[], &[]);
        let hub = hub(&base);
        let check = check_role_permissions(
            &hub,
            &MEMBER,
            &spoke_role(without("ResolveInstanceTags"), rendered_trust()),
        );
        assert!(!check.passed, "{check:?}");
        let wider = |d: &mut Value| {
            d["Statement"]
                .as_array_mut()
                .unwrap()
                .push(json!({"Effect": "Allow", "Action": "sqs:*", "Resource": "*"}))
        };
        let check = check_role_permissions(&hub, &MEMBER, &spoke_role(wider, rendered_trust()));
        assert!(!check.passed, "{check:?}");
        assert!(check.fix.is_some_and(|f| f.contains("put-role-policy")));
    }

    #[test]
    fn a_role_that_may_not_read_the_direct_roles_id_fails() {
        let base = fixtures::base(&[], &[]);
        let hub = hub(&base);
        let check = check_reads_direct_role(
            &hub,
            &MEMBER,
            &spoke_role(without("ReadDirectRoleId"), rendered_trust()),
        );
        assert!(
            !check.passed && check.detail.contains("may not iam:GetRole"),
            "{check:?}"
        );
        assert!(check.fix.is_some_and(|f| f.contains("ReadDirectRoleId")));
    }
}

mod hub_bus {
    //! `spoke:<account>:hub-bus-policy`, judged on the bus's policy as DescribeEventBus answered
    //! it: base.yaml's for a list of accounts and for an organisation, and each way it breaks.

    use aws_model::documents::hub_bus_policy;
    use serde_json::json;

    use super::super::{Hub, Member, hub_bus::judge_bus_policy};
    use crate::{check::Check, deployment::Base, fixtures};

    const BUS: &str = "arn:aws:events:us-east-1:123456789012:event-bus/ir-hub";
    const ACCOUNT: &str = "111111111111";

    fn hub<'a>(base: &'a Base, bus: Option<&'static str>) -> Hub<'a> {
        Hub {
            base,
            region: "us-east-1",
            bus,
            router_role: Some("arn:aws:iam::123456789012:role/router"),
            spoke_role_name: "interruption-router-spoke",
            spoke_role_path: "/",
            spoke_role_arn: format!("arn:aws:iam::{ACCOUNT}:role/interruption-router-spoke"),
            queue_prefix: "karpenter-".into(),
            prefix: format!("spoke:{ACCOUNT}"),
        }
    }

    fn member(org_id: Option<&'static str>) -> Member<'static> {
        Member {
            account: ACCOUNT,
            spoke_stack: "interruption-router-spoke",
            profile: None,
            org_id,
        }
    }

    /// The check for a hub deployed with `parameters`, on the bus policy `described`.
    fn judged(
        parameters: &[(&str, &str)],
        org_id: Option<&'static str>,
        described: Result<Option<String>, String>,
    ) -> Check {
        let base = fixtures::base(&[("HubEventBusArn", BUS)], parameters);
        judge_bus_policy(&hub(&base, Some(BUS)), &member(org_id), None, described)
    }

    fn rendered(served: &str, org: Option<&str>) -> Result<Option<String>, String> {
        Ok(Some(hub_bus_policy(BUS, served, org).unwrap().to_string()))
    }

    fn assert_fails(check: &Check, problem: &str, fix: &str) {
        assert!(
            !check.passed && check.detail.contains(problem),
            "{problem}: {check:?}"
        );
        assert!(
            check.fix.as_deref().is_some_and(|f| f.contains(fix)),
            "{fix}: {check:?}"
        );
    }

    #[test]
    fn base_yamls_policy_admits_the_member_and_no_stranger() {
        let listed = [("ServedAccounts", "111111111111,222222222222")];
        let check = judged(&listed, None, rendered("111111111111,222222222222", None));
        assert!(check.passed, "{check:?}");
        assert!(check.detail.contains("no other account may"), "{check:?}");
        let org = [("ServedAccounts", "*"), ("OrganizationId", "o-abcd123456")];
        let check = judged(
            &org,
            Some("o-abcd123456"),
            rendered("*", Some("o-abcd123456")),
        );
        assert!(check.passed, "{check:?}");
    }

    #[test]
    fn a_member_the_policy_leaves_out_fails_with_the_served_accounts_to_set() {
        let check = judged(
            &[("ServedAccounts", "222222222222")],
            None,
            rendered("222222222222", None),
        );
        assert_fails(
            &check,
            "111111111111 may not events:PutEvents",
            "ServedAccounts (222222222222,111111111111)",
        );
        // An organisation's bus and a member of another one.
        let org = [("ServedAccounts", "*"), ("OrganizationId", "o-abcd123456")];
        let check = judged(
            &org,
            Some("o-zzzz999999"),
            rendered("*", Some("o-abcd123456")),
        );
        assert_fails(
            &check,
            "may not events:PutEvents",
            "move 111111111111 into it",
        );
        // Without --org-id, the organisation's condition cannot be decided: not a pass.
        let check = judged(&org, None, rendered("*", Some("o-abcd123456")));
        assert_fails(&check, "whether 111111111111 may", "--org-id");
    }

    #[test]
    fn an_open_or_missing_or_unreadable_policy_fails() {
        let listed = [("ServedAccounts", ACCOUNT)];
        let open = json!({"Statement": [{"Effect": "Allow", "Principal": "*",
            "Action": "events:PutEvents", "Resource": BUS}]});
        let check = judged(&listed, None, Ok(Some(open.to_string())));
        assert_fails(&check, "any account may put events", "put-permission");
        let check = judged(&listed, None, Ok(None));
        assert_fails(&check, "has no resource policy", "put-permission");
        let check = judged(
            &listed,
            None,
            Err("DescribeEventBus ir-hub: ResourceNotFound".into()),
        );
        assert_fails(&check, "ResourceNotFound", "re-deploy the base stack");
        // No central bus at all.
        let base = fixtures::base(&[], &listed);
        let check = judge_bus_policy(&hub(&base, None), &member(None), None, Ok(None));
        assert_fails(&check, "has no central bus", "CentralBus=Enabled");
    }
}
