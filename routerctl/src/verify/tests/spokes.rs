//! `verify --account`: a member account reached with its operator's profile, its spoke stack,
//! the hub bus's policy for it, its rules, the spoke role and its tenant queues; each broken the
//! way it breaks there.

use super::{failed, hub, oldest_age, says, verify_with};
use crate::{
    check::Check,
    cloud::model::World,
    verify::{Options, Report},
};

/// `verify --account <account> [--profile <profile>]` on the hub `ir`.
fn verify_account(world: &World, account: &str, profile: Option<&str>) -> Report {
    verify_with(
        world,
        Options {
            stack: hub::STACK.into(),
            account: Some(account.into()),
            profile: profile.map(str::to_owned),
            ..Options::default()
        },
    )
}

fn verify_member(world: &World) -> Report {
    verify_account(world, hub::MEMBER, Some(hub::MEMBER_PROFILE))
}

fn only(world: &World, name: &str) -> Check {
    let report = verify_member(world);
    assert_eq!(failed(&report), [name], "{report:#?}");
    report.checks.into_iter().find(|c| c.name == name).unwrap()
}

#[test]
fn a_member_with_its_spoke_stack_passes_every_check() {
    for direct in [false, true] {
        let world = hub::with_member(direct);
        let report = verify_member(&world);
        assert_eq!(
            failed(&report),
            Vec::<&str>::new(),
            "direct {direct}: {report:#?}"
        );
        let names: Vec<&str> = report.checks.iter().map(|c| c.name.as_str()).collect();
        for expected in [
            "spoke:111111111111:access",
            "spoke:111111111111:stack",
            "spoke:111111111111:hub-bus-policy",
            "spoke:111111111111:rule:SpotInterruptionRule",
            "spoke:111111111111:tenant:beta:queue",
            "spoke:111111111111:tenant:beta:read",
        ] {
            assert!(
                names.contains(&expected),
                "direct {direct}: {expected} not checked: {names:?}"
            );
        }
    }
}

/// The spoke role trusts only the hub's router role: the operator's own credentials may not
/// assume it, and verify says to pass a profile.
#[test]
fn a_member_reached_without_a_profile_is_refused_by_the_spoke_roles_trust() {
    let world = hub::with_member(false);
    let report = verify_account(&world, hub::MEMBER, None);
    assert_eq!(
        failed(&report),
        ["spoke:111111111111:access"],
        "{report:#?}"
    );
    let check = report.checks.iter().find(|c| !c.passed).unwrap();
    says(
        check,
        "is not authorized to perform: sts:AssumeRole",
        "pass --profile with a profile for account 111111111111",
    );
}

#[test]
fn a_profile_of_another_account() {
    let world = hub::with_member(false);
    world.profile(hub::MEMBER_PROFILE, "222222222222");
    let report = verify_member(&world);
    assert_eq!(
        failed(&report),
        ["spoke:111111111111:access"],
        "{report:#?}"
    );
    let check = report.checks.iter().find(|c| !c.passed).unwrap();
    says(
        check,
        "in account 222222222222, not 111111111111",
        "pass --profile with a profile for account 111111111111",
    );
}

#[test]
fn a_member_without_its_spoke_stack() {
    let world = hub::with_member(false);
    world
        .at(hub::MEMBER)
        .site(|site| site.stacks.remove(hub::SPOKE_STACK));
    let check = only(&world, "spoke:111111111111:stack");
    says(
        &check,
        "interruption-router-spoke in account 111111111111",
        "spoke.yaml",
    );
}

#[test]
fn a_member_rule_disabled_by_hand() {
    let world = hub::with_member(false);
    let member = world.at(hub::MEMBER);
    let name =
        member.site(|site| site.stacks[hub::SPOKE_STACK].resources["StateChangeRule"].clone());
    member.site(|site| {
        site.rules
            .get_mut(&("default".into(), name))
            .unwrap()
            .0
            .state = Some("DISABLED".into());
    });
    let check = only(&world, "spoke:111111111111:rule:StateChangeRule");
    says(&check, "is DISABLED", "aws events enable-rule");
}

/// The hub's bus policy edited to admit nobody: the member's forwarded events are refused.
#[test]
fn a_hub_bus_that_no_longer_admits_the_member() {
    let world = hub::with_member(false);
    let bus = hub::output(&world, "HubEventBusArn");
    let name = crate::verify::rules::bus_name(&bus).to_owned();
    world.site(|site| site.buses.insert(name, None));
    let check = only(&world, "spoke:111111111111:hub-bus-policy");
    says(
        &check,
        "has no resource policy: no other account may put events on it",
        "aws events put-permission",
    );
}

#[test]
fn a_spoke_role_that_trusts_another_router() {
    let world = hub::with_member(false);
    let role = hub::spoke_role();
    world.edit(|state, _, _| {
        let trust = &mut state.roles.get_mut(&role).expect("the spoke role").trust;
        *trust = serde_json::json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
            "Principal": {"AWS": "arn:aws:iam::999999999999:role/other-router"},
            "Action": "sts:AssumeRole"}]});
    });
    let check = only(&world, "spoke:111111111111:role-trust");
    says(
        &check,
        "may not assume",
        "aws iam update-assume-role-policy",
    );
}

/// The member's direct role may no longer send to the hub's direct queue: each of its five
/// rules would deliver nothing.
#[test]
fn a_direct_role_that_may_not_send() {
    let world = hub::with_member(true);
    let role = hub::direct_role();
    world.edit(|state, _, _| {
        state
            .roles
            .get_mut(&role)
            .expect("the direct role")
            .inline
            .clear()
    });
    let report = verify_member(&world);
    let failed = failed(&report);
    assert_eq!(failed.len(), 5, "{failed:?}");
    assert!(
        failed
            .iter()
            .all(|f| f.starts_with("spoke:111111111111:rule:")),
        "{failed:?}"
    );
}

#[test]
fn a_member_tenant_queue_nobody_reads() {
    let world = hub::with_member(false);
    world
        .at(hub::MEMBER)
        .send("karpenter-beta", std::time::Duration::from_secs(300));
    let check = only(&world, "spoke:111111111111:tenant:beta:read");
    says(&check, "holds a message ", "in cluster beta");
    let age = oldest_age(&check);
    assert!(age >= 300, "{}", check.detail);
}

/// The spoke role without its policy: the router can neither look up the member's instances nor
/// write its queues.
#[test]
fn a_spoke_role_without_its_policy() {
    let world = hub::with_member(false);
    let role = hub::spoke_role();
    world.edit(|state, _, _| state.roles.get_mut(&role).unwrap().inline.clear());
    let report = verify_member(&world);
    let failed = failed(&report);
    assert!(
        failed.contains(&"spoke:111111111111:role-permissions"),
        "{failed:?}"
    );
    assert!(
        failed.iter().all(|f| f.starts_with("spoke:111111111111:")),
        "{failed:?}"
    );
}

/// A member's tenant queue whose policy admits the hub's router role, not the spoke role the
/// router sends there as: every delivery to it is refused.
#[test]
fn a_member_tenant_queue_for_the_hubs_role_instead_of_the_spoke_role() {
    let world = hub::with_member(false);
    let spoke_role = hub::spoke_role();
    let router = hub::output(&world, "RouterRoleArn");
    world.at(hub::MEMBER).site(|site| {
        let q = site.queues.get_mut("karpenter-beta").unwrap();
        let policy = q.attributes["Policy"].replace(&spoke_role, &router);
        q.attributes.insert("Policy".into(), policy);
    });
    let check = only(&world, "spoke:111111111111:tenant:beta:queue-policy");
    says(&check, "the spoke role", "");
}

/// A member's rule deleted outside CloudFormation: the spoke stack still names it.
#[test]
fn a_member_rule_deleted_outside_cloudformation() {
    let world = hub::with_member(false);
    let member = world.at(hub::MEMBER);
    let name =
        member.site(|site| site.stacks[hub::SPOKE_STACK].resources["SpotInterruptionRule"].clone());
    member.site(|site| site.rules.remove(&("default".into(), name)));
    let check = only(&world, "spoke:111111111111:rule:SpotInterruptionRule");
    says(
        &check,
        "does not exist (deleted outside CloudFormation)",
        "",
    );
}

/// A spoke stack whose last update failed and could not roll back.
#[test]
fn a_spoke_stack_that_failed_to_roll_back() {
    let world = hub::with_member(false);
    world.at(hub::MEMBER).site(|site| {
        site.stacks.get_mut(hub::SPOKE_STACK).unwrap().stack.status =
            "UPDATE_ROLLBACK_FAILED".into();
    });
    let report = verify_member(&world);
    assert!(
        failed(&report).contains(&"spoke:111111111111:stack"),
        "{report:#?}"
    );
    let check = report
        .checks
        .iter()
        .find(|c| c.name == "spoke:111111111111:stack")
        .unwrap();
    says(check, "UPDATE_ROLLBACK_FAILED", "describe-stack-events");
}

/// The router no longer serves the member (its SERVED_ACCOUNTS changed outside the stack).
#[test]
fn a_member_the_router_no_longer_serves() {
    let world = hub::with_member(false);
    let function = hub::output(&world, "FunctionName");
    world.site(|site| {
        site.functions
            .get_mut(&function)
            .unwrap()
            .environment
            .insert("SERVED_ACCOUNTS".into(), "222222222222".into());
    });
    let report = verify_member(&world);
    assert!(
        failed(&report).contains(&"spoke:111111111111:served"),
        "{report:#?}"
    );
}

/// `--account` of the hub's own account, and a profile that does not exist.
#[test]
fn the_hubs_own_account_or_an_unknown_profile() {
    let world = hub::with_member(false);
    let report = verify_account(&world, hub::ACCOUNT, None);
    let check = report
        .checks
        .iter()
        .find(|c| c.name.ends_with(":served"))
        .unwrap();
    says(check, "is the hub's own account", "a member account's id");

    let report = verify_account(&world, hub::MEMBER, Some("nobody"));
    assert!(
        failed(&report).contains(&"spoke:111111111111:access"),
        "{report:#?}"
    );
    let check = report
        .checks
        .iter()
        .find(|c| c.name.ends_with(":access"))
        .unwrap();
    says(check, "profile nobody", "aws configure list-profiles");
}

/// The member's alarm topic with no confirmed subscription: its tenant queues' alarms page
/// nobody.
#[test]
fn a_member_alarm_topic_nobody_confirmed() {
    let world = hub::with_member(false);
    world.at(hub::MEMBER).site(|site| {
        for subscriptions in site.subscriptions.values_mut() {
            subscriptions.clear();
        }
    });
    let check = only(&world, "spoke:111111111111:alarm-topic");
    says(&check, "no confirmed subscription", "aws sns subscribe");
}

/// A hub bus policy that admits the member's forwarding role by its ARN (not the whole account):
/// verify judges the bus for the role the member's rules forward as, and passes.
#[test]
fn a_hub_bus_that_admits_the_members_forwarding_role_by_name() {
    let world = hub::with_member(false);
    let bus = hub::output(&world, "HubEventBusArn");
    let forwarder = world.at(hub::MEMBER).read(|_, site| {
        site.rules
            .values()
            .find_map(|(_, targets)| targets.first()?.role_arn.clone())
            .expect("the spoke's rules forward as a role")
    });
    let policy = serde_json::json!({"Version": "2012-10-17", "Statement": [{
        "Sid": "TheMembersForwarder", "Effect": "Allow", "Principal": {"AWS": forwarder},
        "Action": "events:PutEvents", "Resource": bus}]});
    let name = crate::verify::rules::bus_name(&bus).to_owned();
    world.site(|site| site.buses.insert(name, Some(policy.to_string())));
    let report = verify_member(&world);
    assert_eq!(failed(&report), Vec::<&str>::new(), "{report:#?}");
}

/// Member rules that also feed a queue of the member's own, listed before the hub: verify still
/// finds the target that forwards to the hub and judges its role (read once for all the rules),
/// and passes.
#[test]
fn member_rules_with_another_target_before_the_hubs() {
    let world = hub::with_member(false);
    let member = world.at(hub::MEMBER);
    member.site(|site| {
        for (_, targets) in site.rules.values_mut() {
            targets.insert(
                0,
                crate::cloud::Target {
                    id: "audit".into(),
                    arn: "arn:aws:sqs:us-east-1:111111111111:audit".into(),
                    role_arn: None,
                    dead_letter_arn: None,
                },
            );
        }
    });
    let report = verify_member(&world);
    assert_eq!(failed(&report), Vec::<&str>::new(), "{report:#?}");
}

/// With the function's configuration unreadable, the spoke role is named from the base stack's
/// parameters (SpokeRolePath empty: the root path): every check of the member still finds it,
/// and only the function's check fails.
#[test]
fn a_member_checked_when_the_functions_configuration_cannot_be_read() {
    let world = hub::with_member(false);
    world.refuse("GetFunctionConfiguration");
    let report = verify_member(&world);
    assert_eq!(failed(&report), ["function"], "{}", report.render());
    for name in ["role-trust", "role-permissions", "tenant:beta:spoke-role"] {
        let name = format!("spoke:{}:{name}", hub::MEMBER);
        assert!(report.check(&name).is_some_and(|c| c.passed), "{name}");
    }
}
