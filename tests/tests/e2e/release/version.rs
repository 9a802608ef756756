//! The version everywhere: the workspace's version is the templates' Release mappings, the
//! CHANGELOG's top section and `routerctl --version`; the router logs it at start and on every
//! line; the deployed stacks output it and tag what they create with it.

use std::process::Command;

use anyhow::{Context, Result};
use aws_clients::aws::Aws;
use aws_model::stacks::{self, BASE_TEMPLATE, SPOKE_TEMPLATE};
use e2e_tests::{World, assert_batch_handled, ec2_event, karpenter_tags};
use interruption_router::VERSION;
use serde_json::{Value, json};

use super::{previous_release, repo};
use crate::cli::routerctl_binary;

#[test]
fn the_templates_the_changelog_and_routerctl_name_one_release() -> Result<()> {
    assert_eq!(stacks::template_version(BASE_TEMPLATE)?, VERSION);
    assert_eq!(stacks::template_version(SPOKE_TEMPLATE)?, VERSION);
    assert_eq!(
        stacks::release_code_key("x86_64"),
        format!("interruption-router/{VERSION}/bootstrap-x86_64.zip")
    );

    // The CHANGELOG says, for this release, how to upgrade from the one before.
    let changelog = std::fs::read_to_string(repo().join("CHANGELOG.md"))?;
    let section = changelog
        .split("\n## ")
        .find(|s| s.starts_with(&format!("{VERSION}\n")))
        .with_context(|| format!("CHANGELOG.md has no section ## {VERSION}"))?;
    let previous = previous_release();
    assert!(
        section.contains(&format!("**Upgrading from {previous}**")),
        "CHANGELOG.md's {VERSION} says what upgrading from {previous} takes"
    );
    // A release's kept templates never change: a change is a new version.
    let kept = repo().join("releases").join(VERSION);
    if kept.exists() {
        for name in [
            "base.yaml",
            "tenant.yaml",
            "spoke.yaml",
            "fis.yaml",
            "deployer.yaml",
        ] {
            assert_eq!(
                std::fs::read_to_string(kept.join(name))?,
                std::fs::read_to_string(repo().join("cloudformation").join(name))?,
                "releases/{VERSION}/{name} is what {VERSION} shipped: bump the version to change cloudformation/{name}"
            );
        }
    }

    let out = Command::new(routerctl_binary()).arg("--version").output()?;
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout)?,
        format!("routerctl {VERSION}\n")
    );
    Ok(())
}

#[tokio::test]
async fn the_router_logs_its_release_at_start_and_on_every_line() -> Result<()> {
    let world = World::start().await?;
    world.create_tenant_queue("alpha").await?;
    let dlq = world.create_queue("router-dlq").await?;
    let node = world.launch(&karpenter_tags("alpha")).await?;
    let release = json!({"name": "router", "version": VERSION});
    for level in ["INFO", "WARN"] {
        let router = world
            .start_router(&[
                ("DEAD_LETTER_QUEUE_URL", dlq.as_str()),
                ("AWS_LAMBDA_LOG_LEVEL", level),
            ])
            .await?;
        // A forwarded record (an INFO line) and a malformed one (a WARN line).
        let bodies = vec![
            ec2_event(
                "spot-interruption-warning.json",
                &node,
                &format!("v-{level}"),
            )
            .to_string(),
            r#"{"detail-type":"EC2 Spot Instance Interruption Warning","source":5}"#.to_owned(),
        ];
        assert_batch_handled(&router, &bodies).await;
        let records = router.log_records();
        if level == "INFO" {
            assert_eq!(
                records[0]["fields"]["message"],
                format!("interruption-router {VERSION} starting"),
                "{records:#?}"
            );
            assert!(
                records
                    .iter()
                    .any(|r| r["fields"]["message"] == "router ready"
                        && r["fields"]["version"] == VERSION)
            );
        }
        let per_event: Vec<&Value> = records
            .iter()
            .filter(|r| r["fields"]["outcome"].is_string())
            .collect();
        assert_eq!(
            per_event.len(),
            if level == "INFO" { 2 } else { 1 },
            "{records:#?}"
        );
        for record in &records {
            assert!(
                record["spans"]
                    .as_array()
                    .is_some_and(|spans| spans.contains(&release)),
                "{level}: a line without the release: {record}"
            );
        }
        router.stop().await;
    }
    Ok(())
}

#[tokio::test]
async fn deployed_stacks_output_their_release_and_tag_the_function_and_roles() -> Result<()> {
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
    let base = aws_clients::stacks::create(
        &aws.cfn,
        "ir",
        BASE_TEMPLATE,
        &[("CodeS3Bucket", "artifacts")],
    )
    .await?;
    assert_eq!(base.output("Version")?, VERSION);
    let function = aws
        .lambda
        .get_function()
        .function_name(base.output("FunctionName")?)
        .send()
        .await?;
    let tags = function.tags().context("the function has tags")?;
    assert_eq!(
        tags.get("interruption-router:version").map(String::as_str),
        Some(VERSION)
    );

    // A spoke stack (here in the hub's account under another RouterName: moto keeps one account
    // per credential, and its exports must not collide with the base stack's).
    let spoke = aws_clients::stacks::create(
        &aws.cfn,
        "ir-spoke",
        SPOKE_TEMPLATE,
        &[
            (
                "HubEventBusArn",
                "arn:aws:events:us-east-1:123456789012:event-bus/ir-hub",
            ),
            ("RouterRoleArn", "arn:aws:iam::123456789012:role/router"),
            ("RouterName", "spoke-router"),
            ("RuleNamePrefix", "ir-spoke"),
        ],
    )
    .await?;
    assert_eq!(spoke.output("Version")?, VERSION);
    let resources = aws_clients::aws::stack_resources(&aws.cfn, "ir-spoke").await?;
    for role in ["SpokeRole", "ForwardToHubRole"] {
        let name = resources
            .get(role)
            .with_context(|| format!("the spoke stack's {role}"))?;
        let name = name.rsplit('/').next().unwrap_or(name);
        let tags = aws.iam.list_role_tags().role_name(name).send().await?;
        assert!(
            tags.tags()
                .iter()
                .any(|t| t.key() == "interruption-router:version" && t.value() == VERSION),
            "{role}: {tags:?}"
        );
    }
    Ok(())
}
