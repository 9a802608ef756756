//! `routerctl verify` of a member account, reached through its spoke stack: a hub serving it, and
//! what verify names when the router role's AssumeRole, the spoke role, a spoke rule, the hub bus's
//! policy or a tenant queue in the member is wrong.

use anyhow::Result;
use aws_model::documents;
use e2e_tests::World;
use lab::sandbox::Sandbox;
use local_aws::moto::env_for;
use routerctl::verify;
use serde_json::Value;

use super::{assert_detail, assert_failures, assert_fix, put_role_policy, set_queue_policy};
use crate::cli::routerctl_binary;

const MEMBER: &str = "111111111111";

/// A hub (base.yaml with its central bus serving MEMBER) and, in MEMBER, spoke.yaml and two
/// tenant stacks importing from it; verify reaches MEMBER by assuming its spoke role (moto hands
/// out the member's credentials without enforcing trust).
#[tokio::test]
async fn verify_checks_a_member_account_through_its_spoke_stack() -> Result<()> {
    let world = World::start().await?;
    let hub = Sandbox::deploy_hub(&world.moto, "ir", &["alpha"], &[MEMBER]).await?;
    let spoke = hub
        .deploy_spoke(&world.moto, MEMBER, &["prod", "web"])
        .await?;
    let options = verify::Options {
        stack: "ir".into(),
        account: Some(MEMBER.into()),
        ..verify::Options::default()
    };
    let verify_fails = async |options: &verify::Options, failing: &[&str]| {
        let report = Box::pin(verify::run(&hub.aws, options)).await;
        assert_failures(&report, failing);
        report
    };

    let report = verify_fails(&options, &[]).await;
    let names: Vec<&str> = report.checks.iter().map(|c| c.name.as_str()).collect();
    for expected in [
        "rule:HubStateChangeRule",
        "router-role:assume-spoke-roles",
        "spoke:111111111111:served",
        "spoke:111111111111:access",
        "spoke:111111111111:stack",
        "spoke:111111111111:rule:SpotInterruptionRule",
        "spoke:111111111111:rule:StateChangeRule",
        "spoke:111111111111:rule:CapacityReservationInterruptionRule",
        "spoke:111111111111:hub-bus-policy",
        "spoke:111111111111:role-trust",
        "spoke:111111111111:role-permissions",
        "spoke:111111111111:tenant:prod:encryption",
        "spoke:111111111111:tenant:prod:queue-policy",
        "spoke:111111111111:tenant:prod:spoke-role",
        "spoke:111111111111:tenant:web:queue-policy",
    ] {
        assert!(names.contains(&expected), "{expected} missing: {names:?}");
    }
    assert!(
        report
            .render()
            .starts_with("verify ir in us-east-1, member account 111111111111"),
        "{}",
        report.render()
    );
    let spoke_aws = &spoke.aws;
    let spoke_role = spoke.role_arn()?.rsplit('/').next().unwrap().to_owned();
    let member = |check: &str| format!("spoke:{MEMBER}:{check}");

    // The router role's AssumeRole unscoped (the statement before it named the accounts): the
    // account gate would be the router's code alone.
    let router_role = hub
        .router_role_arn()?
        .rsplit('/')
        .next()
        .unwrap()
        .to_owned();
    let scoped = hub
        .aws
        .iam
        .get_role_policy()
        .role_name(&router_role)
        .policy_name("interruption-router")
        .send()
        .await?
        .policy_document()
        .to_owned();
    let scoped = aws_model::policy::decode_iam_document(&scoped).map_err(anyhow::Error::msg)?;
    let mut unscoped: Value = serde_json::from_str(&scoped)?;
    for statement in unscoped["Statement"].as_array_mut().unwrap() {
        if statement["Sid"] == "AssumeSpokeRoles" {
            statement.as_object_mut().unwrap().remove("Condition");
        }
    }
    put_role_policy(&hub.aws, &router_role, &unscoped.to_string()).await?;
    let report = verify_fails(&options, &["router-role:assume-spoke-roles"]).await;
    assert_detail(
        &report,
        "router-role:assume-spoke-roles",
        "an account it does not serve",
    );
    assert_fix(
        &report,
        "router-role:assume-spoke-roles",
        "aws:ResourceAccount",
    );
    put_role_policy(&hub.aws, &router_role, &scoped).await?;

    // The spoke role's queue permission widened to sqs:*.
    let original = spoke_aws
        .iam
        .get_role_policy()
        .role_name(&spoke_role)
        .policy_name("interruption-router-spoke")
        .send()
        .await?
        .policy_document()
        .to_owned();
    let original = aws_model::policy::decode_iam_document(&original).map_err(anyhow::Error::msg)?;
    let mut widened = documents::spoke_role_policy(MEMBER, local_aws::moto::REGION, "karpenter-")?;
    widened["Statement"][1]["Action"] = serde_json::json!("sqs:*");
    let put_spoke_policy = async |document: &str| {
        spoke_aws
            .iam
            .put_role_policy()
            .role_name(&spoke_role)
            .policy_name("interruption-router-spoke")
            .policy_document(document)
            .send()
            .await
    };
    put_spoke_policy(&widened.to_string()).await?;
    let report = verify_fails(&options, &[&member("role-permissions")]).await;
    let permissions = member("role-permissions");
    assert_detail(&report, &permissions, "may also sqs:ReceiveMessage");
    assert_detail(&report, &permissions, "sqs:PurgeQueue");
    assert_fix(
        &report,
        &permissions,
        "aws iam put-role-policy --role-name interruption-router-spoke",
    );
    // Without the tenant records: a member's missing queue could not be told onboarded or not.
    let mut narrowed = documents::spoke_role_policy(MEMBER, local_aws::moto::REGION, "karpenter-")?;
    narrowed["Statement"]
        .as_array_mut()
        .expect("statements")
        .retain(|s| s["Sid"] != "ReadTenantRecords");
    put_spoke_policy(&narrowed.to_string()).await?;
    // Judged per cluster, as at the hub: each cluster whose record the role may not read.
    let (prod_sender, web_sender) = (
        member("tenant:prod:spoke-role"),
        member("tenant:web:spoke-role"),
    );
    let report = verify_fails(&options, &[&prod_sender, &web_sender]).await;
    assert_detail(
        &report,
        &prod_sender,
        "may not ssm:GetParameter on its tenant record",
    );
    assert_fix(&report, &prod_sender, "ReadTenantRecords");
    assert_fix(
        &report,
        &prod_sender,
        "the spoke stack that creates the role",
    );
    put_spoke_policy(&original).await?;

    // A spoke rule disabled by hand.
    let rule = "interruption-router-state-change";
    spoke_aws.events.disable_rule().name(rule).send().await?;
    let report = verify_fails(&options, &[&member("rule:StateChangeRule")]).await;
    assert_detail(&report, &member("rule:StateChangeRule"), "is DISABLED");
    assert_fix(
        &report,
        &member("rule:StateChangeRule"),
        &format!("aws events enable-rule --name {rule} --region us-east-1"),
    );
    spoke_aws.events.enable_rule().name(rule).send().await?;

    // The hub bus's policy no longer lists the member.
    let bus = hub.base.output("HubEventBusArn")?.to_owned();
    let put_bus_policy = async |policy: serde_json::Value| {
        hub.aws
            .events
            .put_permission()
            .event_bus_name("ir-hub")
            .policy(policy.to_string())
            .send()
            .await
    };
    put_bus_policy(documents::hub_bus_policy(&bus, "222222222222", None)?).await?;
    let report = verify_fails(&options, &[&member("hub-bus-policy")]).await;
    assert_detail(
        &report,
        &member("hub-bus-policy"),
        "111111111111 may not events:PutEvents on ir-hub",
    );
    assert_fix(&report, &member("hub-bus-policy"), "ServedAccounts");

    // An organisation-wide bus policy: undetermined without --org-id, a pass with it.
    put_bus_policy(documents::hub_bus_policy(&bus, "*", Some("o-abcd123456"))?).await?;
    let report = verify_fails(&options, &[&member("hub-bus-policy")]).await;
    assert_detail(&report, &member("hub-bus-policy"), "undetermined");
    assert_fix(&report, &member("hub-bus-policy"), "--org-id");
    let with_org = verify::Options {
        org_id: Some("o-abcd123456".into()),
        ..options.clone()
    };
    verify_fails(&with_org, &[]).await;
    put_bus_policy(documents::hub_bus_policy(&bus, MEMBER, None)?).await?;

    // The spoke role trusting the whole hub account instead of the router role.
    let router = hub.router_role_arn()?.to_owned();
    let open = serde_json::json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
        "Principal": {"AWS": "arn:aws:iam::123456789012:root"}, "Action": "sts:AssumeRole"}]});
    spoke_aws
        .iam
        .update_assume_role_policy()
        .role_name(&spoke_role)
        .policy_document(open.to_string())
        .send()
        .await?;
    let report = verify_fails(&options, &[&member("role-trust")]).await;
    assert_detail(
        &report,
        &member("role-trust"),
        "another role of the hub account",
    );
    spoke_aws
        .iam
        .update_assume_role_policy()
        .role_name(&spoke_role)
        .policy_document(documents::spoke_trust_policy(&router)?.to_string())
        .send()
        .await?;

    // A tenant queue whose policy admits the hub's router role, not the spoke role.
    let prod = spoke_aws
        .sqs
        .get_queue_url()
        .queue_name("karpenter-prod")
        .send()
        .await?
        .queue_url()
        .unwrap()
        .to_owned();
    let prod_arn = format!("arn:aws:sqs:us-east-1:{MEMBER}:karpenter-prod");
    set_queue_policy(
        spoke_aws,
        &prod,
        &documents::tenant_queue_policy(&prod_arn, &router)?,
    )
    .await?;
    let report = verify_fails(&options, &[&member("tenant:prod:queue-policy")]).await;
    assert_detail(
        &report,
        &member("tenant:prod:queue-policy"),
        "the spoke role arn:aws:iam::111111111111:role/interruption-router-spoke is denied",
    );
    assert_fix(
        &report,
        &member("tenant:prod:queue-policy"),
        "BaseStackName empty",
    );
    // Put back as the tenant stack renders it, Karpenter's role the only reader.
    set_queue_policy(
        spoke_aws,
        &prod,
        &documents::tenant_queue_policy_read_by(
            &prod_arn,
            spoke.role_arn()?,
            Some(&lab::sandbox::karpenter_role_name("prod")),
        )?,
    )
    .await?;

    // All repaired, and the binary says so, reaching the member account the same way.
    verify_fails(&options, &[]).await;
    let mut command = std::process::Command::new(routerctl_binary());
    command
        .env_clear()
        .envs(env_for(world.moto.endpoint()))
        .args(["verify", "--stack", "ir", "--account", MEMBER]);
    let out = tokio::task::spawn_blocking(move || command.output()).await??;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("  PASS  spoke:111111111111:role-permissions"),
        "{stdout}"
    );
    Ok(())
}
