//! A platform team's first deployment from the release directory alone (README, "Deploying"):
//! the directory copied into a bucket, base.yaml deployed from its URL with nothing but
//! `CodeS3Bucket`, then a tenant from its URL; every alarm of both notifies a topic; and the
//! release's own routerctl says its version and verifies the deployment. moto keeps a function's
//! code without running it, so the release's router zip holds a stand-in binary here; routerctl is
//! this build's.

use std::{path::Path, process::Command};

use anyhow::{Context, Result};
use aws_clients::deployed::Rendered;
use aws_model::stacks;
use interruption_router::VERSION;
use lab::sandbox::{Sandbox, Templates};
use local_aws::moto::{MotoServer, REGION};

use super::{Scratch, artifacts::elf_stand_in, repo};
use crate::cli::routerctl_binary;

const BUCKET: &str = "artifacts";

/// `aws s3 sync <dir>/ s3://<bucket>/`, into the emulator.
async fn sync(moto: &MotoServer, dir: &Path, bucket: &str) -> Result<()> {
    let mut pending = vec![dir.to_owned()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next)?.flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            let key = path.strip_prefix(dir)?.to_str().context("a UTF-8 path")?;
            moto.put_object(bucket, key, &std::fs::read(&path)?).await?;
        }
    }
    Ok(())
}

#[tokio::test]
async fn from_the_release_alone_the_stacks_deploy_with_their_defaults_and_routerctl_verifies()
-> Result<()> {
    let scratch = Scratch::new("from-release");
    let router = scratch.path().join("router");
    elf_stand_in(&router, 62)?;
    let dist = scratch.path().join("dist");
    let made = Command::new("python3")
        .arg(repo().join("tools/release.py"))
        .args(["build", "--out"])
        .arg(&dist)
        .args(["--arch", "x86_64", "--binary"])
        .arg(format!("x86_64={}", router.display()))
        .arg("--routerctl")
        .arg(format!("x86_64={}", routerctl_binary().display()))
        .output()?;
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let moto = MotoServer::start().await?;
    sync(&moto, &dist, BUCKET).await?;
    let url = |name: &str| {
        format!("https://{BUCKET}.s3.{REGION}.amazonaws.com/interruption-router/{VERSION}/{name}")
    };
    let (base, tenant) = (url("base.yaml"), url("tenant.yaml"));
    let templates = Templates {
        base: aws_clients::stacks::Source::Url(&base),
        tenant: aws_clients::stacks::Source::Url(&tenant),
    };
    // Its defaults name the zip the release holds (x86_64's: no arm64 was built): moto's Lambda
    // refuses a function whose code is not in the bucket.
    let sandbox = Sandbox::deploy_from(
        &moto,
        local_aws::moto::REGION,
        "interruption-router",
        &["alpha"],
        &templates,
        &[("CodeS3Bucket", BUCKET)],
        &[],
    )
    .await?;
    let aws = &sandbox.aws;
    let deployed = aws_clients::stacks::parameters(
        &aws_clients::stacks::describe(&aws.cfn, sandbox.stack()).await?,
    );
    assert_eq!(deployed["Architecture"], "x86_64");
    assert_eq!(deployed["CodeS3Key"], "");

    // Every alarm of both stacks notifies a topic that exists (base.yaml created it).
    let topic = sandbox.base.output("AlarmTopicArn")?.to_owned();
    for stack in [
        sandbox.stack().to_owned(),
        stacks::tenant_stack_name(sandbox.stack(), "alpha"),
    ] {
        let rendered = Rendered::of(aws, &stack).await?;
        let alarms: Vec<String> = rendered
            .template
            .resources_of("AWS::CloudWatch::Alarm")
            .map(|(id, _)| id.to_owned())
            .collect();
        assert!(!alarms.is_empty(), "{stack}");
        for alarm in alarms {
            let actions = rendered.property(&alarm, &["AlarmActions"])?;
            if actions.is_null() {
                // Its condition is false (AccountUnreachableAlarm, serving no other account).
                continue;
            }
            assert_eq!(actions, serde_json::json!([topic]), "{stack} {alarm}");
        }
    }
    aws.sns
        .get_topic_attributes()
        .topic_arn(&topic)
        .send()
        .await
        .with_context(|| format!("{topic} exists"))?;

    // routerctl from the release: its version, and verify passing on what was deployed.
    let routerctl = dist.join(format!(
        "interruption-router/{VERSION}/routerctl-linux-x86_64"
    ));
    let version = Command::new(&routerctl).arg("--version").output()?;
    assert_eq!(
        String::from_utf8(version.stdout)?,
        format!("routerctl {VERSION}\n")
    );
    let verified = Command::new(&routerctl)
        .args(["verify", "--region", REGION])
        .envs(moto.env())
        .output()?;
    let report = String::from_utf8_lossy(&verified.stdout);
    assert!(
        verified.status.success(),
        "{report}{}",
        String::from_utf8_lossy(&verified.stderr)
    );
    assert!(report.contains("PASS  alarm-topic"), "{report}");
    assert!(
        report.contains(&format!("{topic}: 1 confirmed subscription(s)")),
        "{report}"
    );
    Ok(())
}
