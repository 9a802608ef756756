//! The release directory, made by `make release`'s own script (tools/release.py) from the debug
//! router binary instead of a 15-minute release build, without cargo-deny and cargo-cyclonedx
//! (what only `make release` runs: the script's CHECKS file says so, and `verify` refuses the
//! directory as a release until it has its SBOMs). What this shows: the layout a bucket holds,
//! the checksums `sha256sum --check` reads, the zip Lambda takes, base.yaml evaluated as
//! CloudFormation does naming the zip beside it, `latest/`, the same bytes from two runs, and the
//! checks `verify` makes on checksums and SBOMs.

use std::{
    collections::BTreeSet,
    path::Path,
    process::{Command, Output},
};

use anyhow::{Context, Result};
use aws_model::template::{Stage, Template};
use interruption_router::VERSION;
use local_aws::function::router_binary;
use serde_json::json;

use super::{Scratch, repo};

fn release(args: &[&str]) -> Output {
    Command::new("python3")
        .arg(repo().join("tools/release.py"))
        .args(args)
        .output()
        .expect("python3 runs tools/release.py")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A release of the debug router binary for x86_64 into `out`.
fn build(out: &Path, prefix: &str) -> Result<String> {
    let binary = router_binary()?;
    let made = release(&[
        "build",
        "--out",
        out.to_str().context("path")?,
        "--prefix",
        prefix,
        "--arch",
        "x86_64",
        "--binary",
        &format!("x86_64={}", binary.display()),
    ]);
    assert!(made.status.success(), "{}", text(&made));
    Ok(text(&made))
}

fn files(dir: &Path) -> Result<BTreeSet<String>> {
    Ok(std::fs::read_dir(dir)?
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .collect())
}

fn sha256sum_check(dir: &Path) -> Output {
    Command::new("sha256sum")
        .args(["--check", "--strict", "SHA256SUMS"])
        .current_dir(dir)
        .output()
        .expect("sha256sum")
}

/// The key base.yaml's function takes its code from, evaluated as CloudFormation does.
fn code_key(base_yaml: &Path, code_key: Option<&str>) -> Result<String> {
    let template = Template::parse("base.yaml", &std::fs::read_to_string(base_yaml)?)?;
    let mut stage = Stage::new("ir", "123456789012", "eu-west-1")
        .parameter("CodeS3Bucket", "artifacts")
        .parameter("Architecture", "x86_64");
    if let Some(key) = code_key {
        stage = stage.parameter("CodeS3Key", key);
    }
    let deployed = template.deploy(&stage)?;
    let function = deployed
        .properties("RouterFunction")?
        .context("RouterFunction")?;
    assert_eq!(function["Code"]["S3Bucket"], "artifacts");
    Ok(function["Code"]["S3Key"]
        .as_str()
        .context("S3Key")?
        .to_owned())
}

#[test]
fn a_release_is_laid_out_for_a_bucket_checksummed_reproducible_and_names_its_own_code() -> Result<()>
{
    let scratch = Scratch::new("layout");
    let (one, two) = (scratch.path().join("one"), scratch.path().join("two"));
    let said = build(&one, "interruption-router")?;
    assert!(
        said.contains(&format!(
            "x86_64: interruption-router/{VERSION}/bootstrap-x86_64.zip"
        )),
        "{said}"
    );
    let version_dir = one.join("interruption-router").join(VERSION);
    let latest = one.join("interruption-router/latest");
    assert_eq!(
        files(&version_dir)?,
        BTreeSet::from(
            [
                "CHANGELOG.md",
                "CHECKS",
                "SHA256SUMS",
                "base.yaml",
                "bootstrap-x86_64.zip",
                "deployer.yaml",
                "fis.yaml",
                "spoke.yaml",
                "tenant.yaml"
            ]
            .map(str::to_owned)
        )
    );
    assert_eq!(
        files(&latest)?,
        BTreeSet::from(
            [
                "SHA256SUMS",
                "VERSION",
                "base.yaml",
                "deployer.yaml",
                "fis.yaml",
                "spoke.yaml",
                "tenant.yaml"
            ]
            .map(str::to_owned)
        )
    );
    assert_eq!(
        std::fs::read_to_string(latest.join("VERSION"))?,
        format!("{VERSION}\n")
    );
    // What a platform team runs before uploading.
    for dir in [&version_dir, &latest] {
        let checked = sha256sum_check(dir);
        assert!(checked.status.success(), "{}", text(&checked));
    }
    let sums = std::fs::read_to_string(version_dir.join("SHA256SUMS"))?;
    assert_eq!(sums.lines().count(), 8, "{sums}");

    // The zip holds the binary as `bootstrap`, executable, and says its architecture as
    // make deploy-base reads it.
    let zip = version_dir.join("bootstrap-x86_64.zip");
    let unzipped = Command::new("unzip")
        .arg("-p")
        .arg(&zip)
        .arg("bootstrap")
        .output()?;
    assert!(unzipped.status.success());
    assert!(
        unzipped.stdout == std::fs::read(router_binary()?)?,
        "the zip holds the binary"
    );
    let listing = text(&Command::new("zipinfo").arg(&zip).output()?);
    assert!(
        listing
            .lines()
            .any(|l| l.starts_with("-rwxr-xr-x") && l.ends_with(" bootstrap")),
        "{listing}"
    );
    assert_eq!(listing.matches(" bootstrap").count(), 1, "{listing}");
    let arch = Command::new("python3")
        .arg(repo().join("tools/zip_arch.py"))
        .arg(&zip)
        .output()?;
    assert_eq!(String::from_utf8(arch.stdout)?, "x86_64\n");

    // The templates are the checkout's, and base.yaml runs the zip beside it when CodeS3Key is
    // empty (a key given still wins).
    for name in [
        "base.yaml",
        "tenant.yaml",
        "spoke.yaml",
        "fis.yaml",
        "deployer.yaml",
    ] {
        let shipped = std::fs::read(version_dir.join(name))?;
        assert_eq!(
            shipped,
            std::fs::read(repo().join("cloudformation").join(name))?
        );
        assert_eq!(shipped, std::fs::read(latest.join(name))?, "latest/{name}");
    }
    let key = code_key(&latest.join("base.yaml"), None)?;
    assert_eq!(
        key,
        format!("interruption-router/{VERSION}/bootstrap-x86_64.zip")
    );
    assert!(one.join(&key).is_file(), "{key} is in the release");
    assert_eq!(
        code_key(&version_dir.join("base.yaml"), Some("mine/bootstrap-1.zip"))?,
        "mine/bootstrap-1.zip"
    );
    let checks = std::fs::read_to_string(version_dir.join("CHECKS"))?;
    assert!(checks.contains("licences, duplicate versions, sources, advisories: NOT CHECKED"));
    assert!(checks.contains("SBOM: NOT MADE"), "{checks}");

    // Reproducible: another run of the same commit and binary gives the same bytes.
    build(&two, "interruption-router")?;
    assert_eq!(
        sums,
        std::fs::read_to_string(
            two.join("interruption-router")
                .join(VERSION)
                .join("SHA256SUMS")
        )?
    );

    // Another bucket prefix: base.yaml's copy names the zip where that prefix puts it.
    let other = scratch.path().join("other");
    build(&other, "platform/ir")?;
    let key = code_key(&other.join("platform/ir/latest/base.yaml"), None)?;
    assert_eq!(key, format!("platform/ir/{VERSION}/bootstrap-x86_64.zip"));
    assert!(other.join(&key).is_file());
    Ok(())
}

#[test]
fn verify_refuses_a_release_without_sboms_or_with_a_changed_file_or_a_missing_dependency()
-> Result<()> {
    let scratch = Scratch::new("verify");
    let out = scratch.path();
    build(out, "interruption-router")?;
    let dir = out.join("interruption-router").join(VERSION);
    let verify = |extra: &[&str]| {
        let mut args = vec!["verify", out.to_str().unwrap()];
        args.extend_from_slice(extra);
        release(&args)
    };
    let fine = verify(&["--no-sbom"]);
    assert!(fine.status.success(), "{}", text(&fine));
    // A release has an SBOM per zip.
    let unreleased = verify(&[]);
    assert!(!unreleased.status.success());
    assert!(
        text(&unreleased).contains("bootstrap-x86_64.cdx.json: missing (every zip has its SBOM)"),
        "{}",
        text(&unreleased)
    );

    // An SBOM listing every crate the router links for x86_64 (cargo's own resolution) passes;
    // one that leaves tokio out is refused, naming it.
    let deps = router_dependencies()?;
    let tokio = deps
        .iter()
        .find(|(name, _)| name == "tokio")
        .context("the router links tokio")?
        .clone();
    let sbom = |components: &[(String, String)]| {
        json!({
            "bomFormat": "CycloneDX",
            "specVersion": "1.5",
            "metadata": {
                "component": {"name": "interruption-router", "version": VERSION},
                "properties": [{"name": "cdx:rustc:sbom:target:triple", "value": "x86_64-unknown-linux-gnu"}],
            },
            "components": components.iter().map(|(n, v)| json!({"name": n, "version": v})).collect::<Vec<_>>(),
        })
        .to_string()
    };
    let sbom_path = dir.join("bootstrap-x86_64.cdx.json");
    std::fs::write(&sbom_path, sbom(&deps))?;
    let listed = text(&verify(&[]));
    assert!(!listed.contains("lacks"), "{listed}");
    let without: Vec<_> = deps.iter().filter(|d| **d != tokio).cloned().collect();
    std::fs::write(&sbom_path, sbom(&without))?;
    let lacking = text(&verify(&[]));
    assert!(
        lacking.contains(&format!(
            "lacks 1 of the router's dependencies: tokio@{}",
            tokio.1
        )),
        "{lacking}"
    );
    std::fs::remove_file(&sbom_path)?;

    // A file changed after the sums were written.
    let tenant = dir.join("tenant.yaml");
    let mut bytes = std::fs::read(&tenant)?;
    bytes.push(b'\n');
    std::fs::write(&tenant, bytes)?;
    let changed = verify(&["--no-sbom"]);
    assert!(!changed.status.success());
    assert!(
        text(&changed).contains("tenant.yaml: its SHA-256 is not the one SHA256SUMS lists"),
        "{}",
        text(&changed)
    );
    assert!(!sha256sum_check(&dir).status.success());

    // A binary for another architecture than it is given as.
    let wrong = release(&[
        "build",
        "--out",
        out.to_str().unwrap(),
        "--arch",
        "arm64",
        "--binary",
        &format!("arm64={}", router_binary()?.display()),
    ]);
    assert!(!wrong.status.success());
    assert!(
        text(&wrong).contains("is a x86_64 binary, not arm64"),
        "{}",
        text(&wrong)
    );
    Ok(())
}

/// (name, version) of every crate the router links for x86_64, as `cargo tree` resolves it.
fn router_dependencies() -> Result<Vec<(String, String)>> {
    let out = Command::new("cargo")
        .args([
            "tree",
            "--locked",
            "--package",
            "interruption-router",
            "--edges",
            "normal",
            "--target",
            "x86_64-unknown-linux-gnu",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .current_dir(repo())
        .output()?;
    assert!(out.status.success(), "{}", text(&out));
    let mut deps: Vec<(String, String)> = String::from_utf8(out.stdout)?
        .lines()
        .filter_map(|l| {
            let mut parts = l.split_whitespace();
            let (name, version) = (parts.next()?, parts.next()?.strip_prefix('v')?);
            (name != "interruption-router").then(|| (name.to_owned(), version.to_owned()))
        })
        .collect();
    deps.sort();
    deps.dedup();
    Ok(deps)
}
