//! Deploying a release with the make targets (README, "Deploying"): the templates come from the
//! release directory, the base stack runs the release's zip from the bucket (CodeS3Key empty),
//! which must hold it, and CFN_ROLE has CloudFormation deploy as the deployer's role. Against the
//! recording AWS CLI stand-in of `deploy_targets`.

use std::path::Path;

use anyhow::Result;
use interruption_router::VERSION;

use super::{Scratch, repo};
use crate::deploy_targets::{Cli, has};

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
            "error: s3://artifacts/interruption-router/{VERSION}/bootstrap-x86_64.zip not found: copy the release into the bucket (aws s3 sync {}/ s3://artifacts/)",
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
    let template = dist.join(format!("interruption-router/{VERSION}/base.yaml"));
    assert!(has(&args, &template.display().to_string()), "{args:?}");
    // CodeS3Key empty: the release's zip for the architecture the release directory holds.
    assert!(has(&args, "CodeS3Key="), "{args:?}");
    assert!(has(&args, "Architecture=x86_64"), "{args:?}");
    assert!(has(&args, "CodeS3Bucket=artifacts"), "{args:?}");
    assert!(has(&args, "--role-arn"), "{args:?}");
    assert!(
        has(&args, "arn:aws:iam::123456789012:role/deployer-cfn"),
        "{args:?}"
    );

    // An architecture the release was not built for is refused before anything is deployed.
    let (ok, out) = cli.make(&[&base[..], &["ARCH=arm64"]].concat());
    assert!(!ok);
    assert!(
        out.contains(&format!(
            "s3://artifacts/interruption-router/{VERSION}/bootstrap-arm64.zip not found"
        )),
        "{out}"
    );
    assert_eq!(cli.deploys().len(), 1);

    // The other stacks take the release's templates too.
    let (ok, out) = cli.make(&[
        "deploy-tenant",
        "CLUSTER=alpha",
        "REGION=eu-west-1",
        "KARPENTER_ROLE=none",
        &release,
        &release_dir,
    ]);
    assert!(ok, "{out}");
    let (_, args) = cli.deploys().pop().unwrap();
    let tenant = dist.join(format!("interruption-router/{VERSION}/tenant.yaml"));
    assert!(has(&args, &tenant.display().to_string()), "{args:?}");
    assert!(!has(&args, "--role-arn"), "no CFN_ROLE, no role: {args:?}");

    // A release that is not there says which directory it looked for.
    let (ok, out) = cli.make(&[&base[..3], &["RELEASE=9.9.9", &release_dir]].concat());
    assert!(!ok);
    assert!(
        out.contains("base.yaml not found: RELEASE=9.9.9 needs that release's directory"),
        "{out}"
    );
    Ok(())
}
