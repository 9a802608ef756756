//! The stacks deployed into moto locked down, as `make deploy-base KMS_KEY=Create
//! PERMISSIONS_BOUNDARY=… ROLE_PATH=…`, `make deploy-tenant KMS_KEY=Create` and `make
//! deploy-spoke PERMISSIONS_BOUNDARY=… SPOKE_ROLE_PATH=…` deploy them: every queue reports its
//! stack's key, every key is enabled with rotation on, every role carries the boundary, the spoke
//! role its path. moto evaluates neither key
//! policies nor boundaries: what they allow is [`super::principals`]'s.

use anyhow::{Context, Result};
use aws_clients::aws::Aws;
use aws_model::stacks::{self, BASE_TEMPLATE, SPOKE_TEMPLATE, TENANT_TEMPLATE};
use aws_sdk_sqs::types::QueueAttributeName;
use e2e_tests::World;

const BASE: &str = "interruption-router";
const KARPENTER_ROLE: &str = "karpenter-controller-alpha";
/// The spoke stack goes to another region of the hub's account: in the hub's own region the base
/// stack exports the names it would.
const SPOKE_REGION: &str = "eu-west-1";

/// The KMS key a queue (by name) reports; empty under SSE-SQS.
pub(super) async fn kms_key_of(aws: &Aws, queue: &str) -> Result<String> {
    let url = aws.sqs.get_queue_url().queue_name(queue).send().await?;
    let attributes = aws
        .sqs
        .get_queue_attributes()
        .queue_url(url.queue_url().context("no url")?)
        .attribute_names(QueueAttributeName::KmsMasterKeyId)
        .send()
        .await?;
    Ok(attributes
        .attributes()
        .and_then(|a| a.get(&QueueAttributeName::KmsMasterKeyId))
        .cloned()
        .unwrap_or_default())
}

async fn assert_key_enabled_and_rotated(aws: &Aws, key: &str) -> Result<()> {
    let described = aws.kms.describe_key().key_id(key).send().await?;
    let metadata = described.key_metadata().context("no key metadata")?;
    assert!(metadata.enabled(), "{key} is enabled");
    let rotation = aws.kms.get_key_rotation_status().key_id(key).send().await?;
    assert!(rotation.key_rotation_enabled(), "{key} rotates");
    Ok(())
}

async fn boundary_of(aws: &Aws, role_arn: &str) -> Result<Option<String>> {
    let name = aws_model::arn::arn_name_after_slash(role_arn);
    let role = aws.iam.get_role().role_name(name).send().await?;
    Ok(role
        .role()
        .and_then(|r| r.permissions_boundary())
        .and_then(|b| b.permissions_boundary_arn())
        .map(str::to_owned))
}

#[tokio::test]
async fn every_queue_reports_its_stacks_key_and_every_role_the_boundary() -> Result<()> {
    let world = World::start().await?;
    let aws = Aws::new(&world.moto.sdk_config().await)?;
    world
        .moto
        .put_object(
            "artifacts",
            &stacks::release_code_key("arm64"),
            b"not run here",
        )
        .await?;
    let boundary = aws
        .iam
        .create_policy()
        .policy_name("platform-boundary")
        .path("/platform/")
        .policy_document(r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}"#)
        .send()
        .await?;
    let boundary = boundary
        .policy()
        .and_then(|p| p.arn())
        .context("no policy ARN")?
        .to_owned();
    let base = aws_clients::stacks::create(
        &aws.cfn,
        BASE,
        BASE_TEMPLATE,
        &[
            ("CodeS3Bucket", "artifacts"),
            ("KmsKey", "Create"),
            ("PermissionsBoundary", "platform/platform-boundary"),
            ("RolePath", "/platform/"),
        ],
    )
    .await?;
    lab::sandbox::create_karpenter_role(&aws.iam, KARPENTER_ROLE).await?;
    let tenant = aws_clients::stacks::create(
        &aws.cfn,
        &stacks::tenant_stack_name(BASE, "alpha"),
        TENANT_TEMPLATE,
        &[
            ("ClusterName", "alpha"),
            ("KmsKey", "Create"),
            ("KarpenterRoleName", KARPENTER_ROLE),
        ],
    )
    .await?;

    let base_key = base.output("QueueKeyArn")?;
    for queue in [format!("{BASE}-ingest"), format!("{BASE}-dlq")] {
        assert_eq!(kms_key_of(&aws, &queue).await?, base_key, "{queue}");
    }
    let tenant_key = tenant.output("QueueKeyArn")?;
    assert_ne!(tenant_key, base_key, "each stack has its own key");
    assert_eq!(kms_key_of(&aws, "karpenter-alpha").await?, tenant_key);
    for key in [base_key, tenant_key] {
        assert_key_enabled_and_rotated(&aws, key).await?;
    }

    let router_role = base.output("RouterRoleArn")?;
    assert!(router_role.contains(":role/platform/"), "{router_role}");
    assert_eq!(
        boundary_of(&aws, router_role).await?.as_deref(),
        Some(boundary.as_str())
    );

    // The spoke stack's two roles, in another region of the account.
    let there = aws
        .config
        .to_builder()
        .region(aws_config::Region::new(SPOKE_REGION))
        .build();
    let spoke_aws = Aws::new(&there)?;
    let hub_bus = format!(
        "arn:aws:events:us-east-1:{}:event-bus/{BASE}-hub",
        local_aws::moto::ACCOUNT
    );
    let spoke = aws_clients::stacks::create(
        &spoke_aws.cfn,
        "interruption-router-spoke",
        SPOKE_TEMPLATE,
        &[
            ("HubEventBusArn", hub_bus.as_str()),
            ("RouterRoleArn", router_role),
            ("PermissionsBoundary", "platform/platform-boundary"),
            ("SpokeRolePath", "/platform/spokes/"),
        ],
    )
    .await?;
    // The spoke role under its path, as the router assumes it and tenant stacks import it.
    let spoke_role = spoke.output("SpokeRoleArn")?;
    let exported = spoke.output("RouterRoleArn")?;
    assert!(
        spoke_role.ends_with(":role/platform/spokes/interruption-router-spoke"),
        "{spoke_role}"
    );
    assert_eq!(exported, spoke_role);
    let role = aws
        .iam
        .get_role()
        .role_name("interruption-router-spoke")
        .send()
        .await?;
    assert_eq!(
        role.role().map(|r| r.path()),
        Some("/platform/spokes/"),
        "{role:?}"
    );
    let roles = spoke_aws
        .cfn
        .describe_stack_resources()
        .stack_name(&spoke.name)
        .send()
        .await?;
    let mut checked = 0;
    for resource in roles.stack_resources() {
        if resource.resource_type() == Some("AWS::IAM::Role") {
            let name = resource.physical_resource_id().context("no role name")?;
            let arn = format!("arn:aws:iam::{}:role/{name}", local_aws::moto::ACCOUNT);
            assert_eq!(
                boundary_of(&aws, &arn).await?.as_deref(),
                Some(boundary.as_str()),
                "{name}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 2, "the spoke role and the forwarding role");
    Ok(())
}
