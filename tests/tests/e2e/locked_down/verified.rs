//! `routerctl verify` on a member account whose tenant queues are locked down (`make
//! deploy-tenant KMS_KEY=Create` there): `spoke:<account>:tenant:<cluster>:key` passes on the
//! stacks as deployed (the key enabled and customer managed, its policy letting the spoke role,
//! which the router writes as there, use it through SQS), and fails, with its fix, when the key is
//! disabled or its policy no longer names the spoke role. What the policies allow is decided as
//! KMS and IAM decide ([`aws_model::access`]); moto stores them without evaluating them.

use anyhow::{Context, Result};
use aws_model::stacks::tenant_stack_name;
use e2e_tests::World;
use lab::sandbox::Sandbox;
use routerctl::verify;
use serde_json::Value;

const MEMBER: &str = "111111111111";
const KEY_CHECK: &str = "spoke:111111111111:tenant:prod:key";

async fn key_check(hub: &Sandbox) -> Result<(verify::Check, String)> {
    let options = verify::Options {
        stack: "ir".into(),
        account: Some(MEMBER.into()),
        ..verify::Options::default()
    };
    let report = Box::pin(verify::run(&hub.aws, &options)).await;
    let check = report
        .check(KEY_CHECK)
        .with_context(|| format!("no {KEY_CHECK}: {}", report.render()))?
        .clone();
    Ok((check, report.render()))
}

#[tokio::test]
async fn verify_checks_the_keys_of_a_member_accounts_tenant_queues() -> Result<()> {
    let world = World::start().await?;
    let hub = Sandbox::deploy_hub(&world.moto, "ir", &["alpha"], &[MEMBER]).await?;
    let spoke = hub
        .deploy_spoke_with(&world.moto, MEMBER, &["prod"], &[("KmsKey", "Create")])
        .await?;
    let (check, report) = key_check(&hub).await?;
    assert!(check.passed, "{report}");
    assert!(
        check.detail.contains("customer-managed key")
            && check.detail.contains("the spoke role")
            && check.detail.contains("may kms:GenerateDataKey through SQS"),
        "{report}"
    );

    let tenant = spoke
        .aws
        .cfn
        .describe_stacks()
        .stack_name(tenant_stack_name(verify::DEFAULT_SPOKE_STACK, "prod"))
        .send()
        .await?;
    let key = tenant.stacks()[0]
        .outputs()
        .iter()
        .find(|o| o.output_key() == Some("QueueKeyArn"))
        .and_then(|o| o.output_value())
        .context("the tenant stack exports no QueueKeyArn")?
        .to_owned();
    let kms = &spoke.aws.kms;
    // By its id: moto's DisableKey and EnableKey look keys up by id only (AWS takes the ARN too).
    let key = key.rsplit('/').next().unwrap_or(&key).to_owned();

    // A disabled key: nobody can send or receive.
    kms.disable_key().key_id(&key).send().await?;
    let (check, report) = key_check(&hub).await?;
    assert!(!check.passed, "{report}");
    assert!(check.detail.contains("is Disabled"), "{report}");
    assert!(
        check
            .fix
            .as_deref()
            .is_some_and(|f| f.contains("aws kms enable-key")),
        "{report}"
    );
    kms.enable_key().key_id(&key).send().await?;

    // The key policy without the statement naming the spoke role (someone edited it by hand).
    let policy = kms
        .get_key_policy()
        .key_id(&key)
        .policy_name("default")
        .send()
        .await?;
    let mut policy: Value = serde_json::from_str(policy.policy().unwrap_or_default())?;
    let statements = policy["Statement"]
        .as_array_mut()
        .context("no statements")?;
    let before = statements.len();
    statements.retain(|s| s["Sid"] != "RouterSendsThroughSqs");
    assert_eq!(statements.len(), before - 1, "{policy}");
    kms.put_key_policy()
        .key_id(&key)
        .policy_name("default")
        .policy(policy.to_string())
        .send()
        .await?;
    let (check, report) = key_check(&hub).await?;
    assert!(!check.passed, "{report}");
    assert!(
        check.detail.contains("the spoke role")
            && check.detail.contains("may not kms:GenerateDataKey"),
        "{report}"
    );
    assert!(
        check
            .fix
            .as_deref()
            .is_some_and(|f| f
                .contains("account 111111111111's credentials: make deploy-tenant CLUSTER=prod")),
        "{report}"
    );
    Ok(())
}
