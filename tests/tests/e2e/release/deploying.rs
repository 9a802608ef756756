//! Deploying a release with the make targets (README, "Deploying"): each template is deployed from
//! its own URL in the bucket (tools/deploy_stack.py), which must hold the release, the base stack
//! runs the release's zip from there (CodeS3Key empty), and CFN_ROLE has CloudFormation deploy as
//! the deployer's role, which only a release may use. Against the recording AWS CLI stand-in of
//! `deploy_targets`.

use std::path::Path;

use anyhow::Result;
use interruption_router::VERSION;

use super::{Scratch, repo};
use crate::deploy_targets::{Cli, has, overrides};

/// A release directory of `out`, made by tools/release.py from a stand-in x86_64 binary (an ELF
/// header is all make deploy-base reads).
pub(super) fn stand_in_release(out: &Path) {
    let binary = out.join("bootstrap-stand-in");
    let mut header = b"\x7fELF\x02\x01\x01".to_vec();
    header.extend([0; 9]);
    header.extend(2u16.to_le_bytes());
    header.extend(62u16.to_le_bytes());
    header.extend([0; 44]);
    std::fs::create_dir_all(out).unwrap();
    std::fs::write(&binary, header).unwrap();
    let made = std::process::Command::new("python3")
        .arg(repo().join("tools/release.py"))
        .args(["build", "--out"])
        .arg(out.join("dist"))
        .args(["--arch", "x86_64", "--binary"])
        .arg(format!("x86_64={}", binary.display()))
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
}

/// The release directory `dist` copied into the emulator's bucket `artifacts`, as the README's
/// `aws s3 sync` puts it.
pub(super) async fn release_into(moto: &local_aws::moto::MotoServer, dist: &Path) -> Result<()> {
    let version_dir = dist.join("interruption-router").join(VERSION);
    for entry in std::fs::read_dir(&version_dir)?.flatten() {
        let key = format!(
            "interruption-router/{VERSION}/{}",
            entry.file_name().to_string_lossy()
        );
        moto.put_object("artifacts", &key, &std::fs::read(entry.path())?)
            .await?;
    }
    Ok(())
}

#[test]
fn a_release_deploys_from_its_directory_and_runs_the_zip_the_bucket_holds() -> Result<()> {
    let scratch = Scratch::new("deploying");
    stand_in_release(scratch.path());
    let dist = scratch.path().join("dist");
    let cli = Cli::new("release");
    let release_dir = format!("RELEASE_DIR={}", dist.display());
    let release = format!("RELEASE={VERSION}");
    let base = [
        "deploy-base",
        "BUCKET=artifacts",
        "REGION=eu-west-1",
        release.as_str(),
        release_dir.as_str(),
    ];

    // Not copied into the bucket yet: refused, saying how.
    let (ok, out) = cli.make(&base);
    assert!(!ok);
    assert!(
        out.contains(&format!(
            "error: s3://artifacts/interruption-router/{VERSION}/base.yaml not found: RELEASE={VERSION} deploys the release's templates from the bucket; copy the release into it (make release, then aws s3 sync {}/ s3://artifacts/)",
            dist.display()
        )),
        "{out}"
    );
    assert!(cli.deploys().is_empty());

    let (ok, out) = cli.aws(&[
        "s3",
        "sync",
        &format!("{}/", dist.display()),
        "s3://artifacts/",
    ]);
    assert!(ok, "{out}");
    let (ok, out) = cli.make(
        &[
            &base[..],
            &["CFN_ROLE=arn:aws:iam::123456789012:role/deployer-cfn"],
        ]
        .concat(),
    );
    assert!(ok, "{out}");
    let (stack, args) = cli.deploys().pop().unwrap();
    assert_eq!(stack, "interruption-router");
    let url = format!(
        "https://artifacts.s3.eu-west-1.amazonaws.com/interruption-router/{VERSION}/base.yaml"
    );
    assert!(has(&args, "--template-url") && has(&args, &url), "{args:?}");
    // CodeS3Key empty: the release's zip for the architecture the bucket holds.
    let given = overrides(&args);
    assert_eq!(
        given.get("CodeS3Key").map(String::as_str),
        Some(""),
        "{args:?}"
    );
    assert_eq!(given["Architecture"], "x86_64");
    assert_eq!(given["CodeS3Bucket"], "artifacts");
    assert!(has(&args, "--role-arn"), "{args:?}");
    assert!(
        has(&args, "arn:aws:iam::123456789012:role/deployer-cfn"),
        "{args:?}"
    );
    // Deployed once more with nothing new: the change set changes nothing, and says so.
    let (ok, out) = cli.make(&base);
    assert!(ok, "{out}");
    assert!(
        out.contains("No changes to deploy. Stack interruption-router is up to date"),
        "{out}"
    );

    // An architecture the release was not built for is refused before anything is deployed.
    let deployed = cli.deploys().len();
    let (ok, out) = cli.make(&[&base[..], &["ARCH=arm64"]].concat());
    assert!(!ok);
    assert!(
        out.contains(&format!(
            "s3://artifacts/interruption-router/{VERSION}/bootstrap-arm64.zip not found"
        )),
        "{out}"
    );
    assert_eq!(cli.deploys().len(), deployed);

    // The other stacks take the release's templates from the bucket too, keeping on an update
    // every parameter not given.
    let tenant = [
        "deploy-tenant",
        "CLUSTER=alpha",
        "REGION=eu-west-1",
        "BUCKET=artifacts",
        &release,
        &release_dir,
    ];
    cli.role("alpha-karpenter");
    let (ok, out) = cli.make(&[&tenant[..], &["KARPENTER_ROLE=alpha-karpenter"]].concat());
    assert!(ok, "{out}");
    let (_, args) = cli.deploys().pop().unwrap();
    assert!(
        has(&args, &url.replace("base.yaml", "tenant.yaml")),
        "{args:?}"
    );
    assert!(!has(&args, "--role-arn"), "no CFN_ROLE, no role: {args:?}");
    let (ok, out) = cli.make(&[&tenant[..], &["EVENT_KINDS=spot-interruption"]].concat());
    assert!(ok, "{out}");
    let (_, args) = cli.deploys().pop().unwrap();
    let parameters: Vec<serde_json::Value> =
        serde_json::from_str(&args[args.iter().position(|a| a == "--parameters").unwrap() + 1])?;
    assert!(
        parameters.contains(
            &serde_json::json!({"ParameterKey": "KarpenterRoleName", "UsePreviousValue": true})
        ),
        "{parameters:?}"
    );
    let (ok, out) = cli.aws(&[
        "cloudformation",
        "describe-stacks",
        "--stack-name",
        "interruption-router-tenant-alpha",
        "--query",
        "Stacks[0].Parameters[?ParameterKey=='KarpenterRoleName'].ParameterValue",
    ]);
    assert!(ok && out.trim() == "alpha-karpenter", "{out}");

    // A release that is not in the bucket says what to copy where.
    let (ok, out) = cli.make(&[&base[..3], &["RELEASE=9.9.9", &release_dir]].concat());
    assert!(!ok);
    assert!(
        out.contains("s3://artifacts/interruption-router/9.9.9/base.yaml not found: RELEASE=9.9.9 deploys the release's templates from the bucket"),
        "{out}"
    );
    // CFN_ROLE without a release: refused before anything runs.
    let calls = cli.calls().len();
    let (ok, out) = cli.make(&[
        "deploy-fis",
        "CLUSTER=alpha",
        "REGION=eu-west-1",
        "CFN_ROLE=arn:aws:iam::123456789012:role/deployer-cfn",
    ]);
    assert!(!ok);
    assert!(out.contains("CFN_ROLE deploys a release only"), "{out}");
    assert_eq!(cli.calls().len(), calls);
    Ok(())
}

/// The same targets with the real AWS CLI against the emulator, the release copied into its S3:
/// each stack deployed from the release's own URL (a change set from that URL, created, waited
/// for and executed; the tenant importing the base stack's exports), and a re-run with nothing
/// new changing nothing.
#[tokio::test]
async fn a_release_deploys_from_its_urls_with_the_make_targets_on_the_emulator() -> Result<()> {
    use local_aws::moto::{MotoServer, REGION};
    let scratch = Scratch::new("deploying-emulator");
    stand_in_release(scratch.path());
    let dist = scratch.path().join("dist");
    let moto = MotoServer::start().await?;
    release_into(&moto, &dist).await?;
    let path = format!(
        "{}/.venv/bin:{}",
        repo().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let make = |args: &[&str]| {
        let out = std::process::Command::new("make")
            .arg("-C")
            .arg(repo())
            .args(args)
            .args([
                format!("RELEASE={VERSION}"),
                format!("RELEASE_DIR={}", dist.display()),
                "BUCKET=artifacts".to_owned(),
                format!("REGION={REGION}"),
            ])
            .envs(moto.env())
            .env("PATH", &path)
            .output()
            .expect("make runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    };
    let (ok, out) = make(&["deploy-base"]);
    assert!(ok, "{out}");
    assert!(
        out.contains("Successfully created/updated stack - interruption-router"),
        "{out}"
    );
    let (ok, out) = make(&["deploy-tenant", "CLUSTER=alpha", "KARPENTER_ROLE=none"]);
    assert!(ok, "{out}");
    // An update from the URL: what is given changes, what is not is kept (UsePreviousValue).
    // (The base stack's update by change set is the stand-in's test above: moto 5.2.5 loses a
    // resource of a stack made by a change set when a second one updates it,
    // docs/aws-vs-emulator.md.)
    let (ok, out) = make(&[
        "deploy-tenant",
        "CLUSTER=alpha",
        "EVENT_KINDS=spot-interruption",
    ]);
    assert!(ok, "{out}");

    let cfn = aws_sdk_cloudformation::Client::new(&moto.sdk_config().await);
    let stack = cfn
        .describe_stacks()
        .stack_name("interruption-router")
        .send()
        .await?;
    let stack = &stack.stacks()[0];
    let parameter = |key: &str| {
        stack
            .parameters()
            .iter()
            .find(|p| p.parameter_key() == Some(key))
            .and_then(|p| p.parameter_value())
            .map(str::to_owned)
    };
    assert_eq!(parameter("CodeS3Key").as_deref(), Some(""));
    assert_eq!(parameter("CodeS3Bucket").as_deref(), Some("artifacts"));
    assert_eq!(parameter("Architecture").as_deref(), Some("x86_64"));
    let tenant = cfn
        .describe_stacks()
        .stack_name("interruption-router-tenant-alpha")
        .send()
        .await?;
    let tenant = &tenant.stacks()[0];
    assert!(
        tenant
            .outputs()
            .iter()
            .any(|o| o.output_value() == Some("karpenter-alpha")),
        "{tenant:?}"
    );
    let kept = |key: &str| {
        tenant
            .parameters()
            .iter()
            .find(|p| p.parameter_key() == Some(key))
            .and_then(|p| p.parameter_value())
            .map(str::to_owned)
    };
    assert_eq!(kept("EventKinds").as_deref(), Some("spot-interruption"));
    assert_eq!(kept("ClusterName").as_deref(), Some("alpha"));
    Ok(())
}
