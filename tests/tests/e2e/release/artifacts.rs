//! The release directory, made by `make release`'s own script (tools/release.py) from a stand-in
//! of the router binary (an ELF header, all the script reads of it: deflating the 66-MB debug
//! binary cost two CPU-s a build) and the debug routerctl instead of a 15-minute release build, without cargo-deny and cargo-cyclonedx
//! (what only `make release` runs: the script's CHECKS file says so, and `verify` refuses the
//! directory as a release until it has its SBOMs). What this shows: the layout a bucket holds,
//! the checksums `sha256sum --check` reads, the zip Lambda takes, base.yaml evaluated as
//! CloudFormation does naming the zip beside it, `latest/`, the same bytes from two runs, and the
//! checks `verify` makes on checksums and SBOMs.

use std::{
    collections::BTreeSet,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::{Command, Output},
};

use anyhow::{Context, Result};
use aws_model::template::{Stage, Template};
use interruption_router::VERSION;
use local_aws::function::router_binary;
use serde_json::json;

use super::{Scratch, repo};
use crate::cli::routerctl_binary;

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

/// The router binary [`build`] gives the release script for `out`: an x86_64 ELF header in a
/// directory beside it, under one name (the release's CHECKS names the file it was given).
fn stand_in_router(out: &Path) -> PathBuf {
    out.with_extension("stand-in").join("router")
}

/// A release of a stand-in router and the debug routerctl binary for x86_64 into `out`.
fn build(out: &Path, prefix: &str) -> Result<String> {
    let binary = stand_in_router(out);
    std::fs::create_dir_all(binary.parent().context("a directory")?)?;
    elf_stand_in(&binary, 62)?;
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
        "--routerctl",
        &format!("x86_64={}", routerctl_binary().display()),
    ]);
    assert!(made.status.success(), "{}", text(&made));
    Ok(text(&made))
}

/// An ELF header for `machine` (62 x86_64, 183 aarch64): all the release script reads of a binary
/// it is given.
pub(super) fn elf_stand_in(path: &Path, machine: u16) -> Result<()> {
    let mut header = b"\x7fELF\x02\x01\x01".to_vec();
    header.extend([0; 9]);
    header.extend(2u16.to_le_bytes());
    header.extend(machine.to_le_bytes());
    header.extend([0; 44]);
    std::fs::write(path, header)?;
    Ok(())
}

/// base.yaml's Architecture default, as the release wrote it.
fn default_architecture(base: &Path) -> Result<String> {
    let template = Template::parse("base.yaml", &std::fs::read_to_string(base)?)?;
    Ok(template.doc["Parameters"]["Architecture"]["Default"]
        .as_str()
        .context("no Architecture default")?
        .to_owned())
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
                "routerctl-linux-x86_64",
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
    assert_eq!(sums.lines().count(), 9, "{sums}");
    // routerctl, ready to run: the binary itself, executable, and the version it says is the
    // release's.
    let cli = version_dir.join("routerctl-linux-x86_64");
    assert_eq!(std::fs::read(&cli)?, std::fs::read(routerctl_binary())?);
    let version = Command::new(&cli).arg("--version").output()?;
    assert_eq!(
        String::from_utf8(version.stdout)?,
        format!("routerctl {VERSION}\n")
    );

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
        unzipped.stdout == std::fs::read(stand_in_router(&one))?,
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
    for name in ["tenant.yaml", "spoke.yaml", "fis.yaml", "deployer.yaml"] {
        let shipped = std::fs::read(version_dir.join(name))?;
        assert_eq!(
            shipped,
            std::fs::read(repo().join("cloudformation").join(name))?
        );
        assert_eq!(shipped, std::fs::read(latest.join(name))?, "latest/{name}");
    }
    // base.yaml is the checkout's but for its Architecture default: the one zip it holds.
    let shipped = std::fs::read_to_string(version_dir.join("base.yaml"))?;
    let checkout = std::fs::read_to_string(repo().join("cloudformation/base.yaml"))?;
    assert_eq!(
        shipped.replacen(
            "  Architecture:\n    Type: String\n    Default: x86_64\n",
            "  Architecture:\n    Type: String\n    Default: arm64\n",
            1
        ),
        checkout
    );
    assert_eq!(
        default_architecture(&version_dir.join("base.yaml"))?,
        "x86_64"
    );
    assert_eq!(
        shipped,
        std::fs::read_to_string(latest.join("base.yaml"))?,
        "latest/base.yaml"
    );
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
        text(&unreleased)
            .contains("bootstrap-x86_64.cdx.json: missing (every artifact has its SBOM)"),
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
            "lacks 1 of interruption-router's dependencies: tokio@{}",
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

/// Deployed with its defaults, a release's base.yaml names a zip the release holds: arm64 where it
/// holds arm64's, else x86_64; `verify` refuses a base.yaml whose default names a missing zip.
#[test]
fn a_releases_default_architecture_is_one_it_holds() -> Result<()> {
    let scratch = Scratch::new("architectures");
    let (x86, arm) = (scratch.path().join("x86"), scratch.path().join("arm"));
    elf_stand_in(&x86, 62)?;
    elf_stand_in(&arm, 183)?;
    let out = scratch.path().join("dist");
    let made = |arches: &[(&str, &Path)]| {
        let mut args = vec![
            "build".to_owned(),
            "--out".into(),
            out.display().to_string(),
        ];
        for (arch, binary) in arches {
            args.extend([
                "--arch".into(),
                arch.to_string(),
                "--binary".into(),
                format!("{arch}={}", binary.display()),
                "--routerctl".into(),
                format!("{arch}={}", binary.display()),
            ]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        release(&args)
    };
    let dir = out.join("interruption-router").join(VERSION);
    let both = made(&[("x86_64", &x86), ("arm64", &arm)]);
    assert!(both.status.success(), "{}", text(&both));
    assert_eq!(default_architecture(&dir.join("base.yaml"))?, "arm64");
    assert!(dir.join("routerctl-linux-arm64").is_file());
    let only_x86 = made(&[("x86_64", &x86)]);
    assert!(only_x86.status.success(), "{}", text(&only_x86));
    assert_eq!(default_architecture(&dir.join("base.yaml"))?, "x86_64");
    let checks = std::fs::read_to_string(dir.join("CHECKS"))?;
    assert!(
        checks.contains("Architecture defaults to x86_64 (the release holds no arm64 zip)"),
        "{checks}"
    );

    // The checkout's base.yaml (arm64) in an x86_64-only release, its sums rewritten: refused.
    std::fs::copy(
        repo().join("cloudformation/base.yaml"),
        dir.join("base.yaml"),
    )?;
    let sums: String = std::fs::read_dir(&dir)?
        .flatten()
        .filter(|e| e.file_name() != "SHA256SUMS")
        .map(|e| {
            let bytes = std::fs::read(e.path()).unwrap();
            format!(
                "{}  {}\n",
                sha256_hex(&bytes),
                e.file_name().to_string_lossy()
            )
        })
        .collect();
    std::fs::write(dir.join("SHA256SUMS"), sums)?;
    std::fs::copy(
        dir.join("base.yaml"),
        out.join("interruption-router/latest/base.yaml"),
    )?;
    let latest_sums = std::fs::read_to_string(out.join("interruption-router/latest/SHA256SUMS"))?
        .lines()
        .map(|l| {
            if l.ends_with("  base.yaml") {
                let bytes = std::fs::read(dir.join("base.yaml")).unwrap();
                format!("{}  base.yaml\n", sha256_hex(&bytes))
            } else {
                format!("{l}\n")
            }
        })
        .collect::<String>();
    std::fs::write(
        out.join("interruption-router/latest/SHA256SUMS"),
        latest_sums,
    )?;
    let refused = release(&["verify", out.to_str().context("path")?, "--no-sbom"]);
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains(
            "Architecture defaults to arm64, but the release holds no \
             bootstrap-arm64.zip"
        ),
        "{}",
        text(&refused)
    );
    Ok(())
}

fn sha256_hex(bytes: &[u8]) -> String {
    let out = Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(bytes)?;
            child.wait_with_output()
        })
        .expect("sha256sum");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned()
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

/// A stand-in for cargo-deny that writes each command line it is given to `deny-args` beside it
/// and answers as `CARGO_DENY_ADVISORIES` says: `unreadable`, as cargo-deny 0.20.2 failed here
/// where the RustSec advisory database cannot be fetched (its own words, from a run on this
/// machine), or `found`, an advisory whose text mentions a database; licences, bans and sources
/// pass.
fn stand_in_cargo_deny(dir: &Path) -> Result<PathBuf> {
    let path = dir.join("cargo-deny");
    std::fs::write(
        &path,
        r#"#!/bin/sh
echo "$@" >> "$(dirname "$0")/deny-args"
case "$*" in --version) echo "cargo-deny 0.20.2-stand-in"; exit 0;; esac
case "$*" in *"check advisories"*)
  case "$CARGO_DENY_ADVISORIES" in
    unreadable)
      echo '2026-12-03 13:04:13 [ERROR] failed to fetch advisory database https://github.com/RustSec/advisory-db with cli: failed to clone: ["clone", "--depth=1", "--branch", "main", "https://github.com/RustSec/advisory-db", "/root/.cargo/advisory-dbs/advisory-db-3157b0e258782691"]' >&2
      echo "fatal: unable to access 'https://github.com/RustSec/advisory-db/': Could not resolve host: github.com" >&2
      exit 1;;
    found)
      echo 'error[vulnerability]: failed to load advisory database entries it should not have: SQL injection' >&2
      echo '   ├ ID: RUSTSEC-2099-0001' >&2
      echo 'advisories FAILED' >&2
      exit 1;;
  esac;;
esac
exit 0
"#,
    )?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    Ok(path)
}

/// A release of a stand-in router and routerctl for x86_64 into `out`, checked by `cargo_deny`
/// answering advisories as `advisories` says, with `extra` arguments.
fn build_checked(out: &Path, cargo_deny: &Path, advisories: &str, extra: &[&str]) -> Output {
    let binary = stand_in_router(out);
    std::fs::create_dir_all(binary.parent().unwrap()).unwrap();
    elf_stand_in(&binary, 62).unwrap();
    let given = format!("x86_64={}", binary.display());
    Command::new("python3")
        .arg(repo().join("tools/release.py"))
        .args(["build", "--out", out.to_str().unwrap(), "--arch", "x86_64"])
        .args(["--binary", &given, "--routerctl", &given])
        .arg("--cargo-deny")
        .arg(cargo_deny)
        .args(extra)
        .env("CARGO_DENY_ADVISORIES", advisories)
        .output()
        .expect("python3 runs tools/release.py")
}

/// The licence, bans, sources and advisory gate runs over everything the release ships: one
/// crate graph rooted at the router and routerctl (and the workspace crates they link), the
/// lab, the emulator and the tests left out; dev-dependencies too.
#[test]
fn the_gate_covers_routerctl_as_well_as_the_router() -> Result<()> {
    let scratch = Scratch::new("gate");
    let deny = stand_in_cargo_deny(scratch.path())?;
    let made = build_checked(&scratch.path().join("dist"), &deny, "pass", &[]);
    assert!(made.status.success(), "{}", text(&made));
    let recorded = std::fs::read_to_string(scratch.path().join("deny-args"))?;
    let checks: Vec<&str> = recorded.lines().filter(|l| l.contains(" check ")).collect();
    assert_eq!(checks.len(), 2, "{recorded}");
    assert!(checks[0].ends_with("--offline check licenses bans sources"));
    assert!(checks[1].ends_with(" check advisories"));
    // The workspace's members not excluded are the graph's roots.
    let members: BTreeSet<String> = {
        let out = Command::new("cargo")
            .args([
                "metadata",
                "--format-version",
                "1",
                "--no-deps",
                "--offline",
            ])
            .current_dir(repo())
            .output()?;
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        doc["packages"]
            .as_array()
            .context("packages")?
            .iter()
            .filter_map(|p| p["name"].as_str().map(str::to_owned))
            .collect()
    };
    for check in &checks {
        let words: Vec<&str> = check.split_whitespace().collect();
        let manifest = repo().join("Cargo.toml");
        assert!(
            check.starts_with(&format!(
                "--manifest-path {} --workspace ",
                manifest.display()
            )),
            "{check}"
        );
        assert!(words.contains(&"--exclude-dev"), "{check}");
        let excluded: BTreeSet<String> = words
            .windows(2)
            .filter(|w| w[0] == "--exclude")
            .map(|w| w[1].to_owned())
            .collect();
        let roots: BTreeSet<&str> = members
            .iter()
            .filter(|m| !excluded.contains(*m))
            .map(String::as_str)
            .collect();
        assert_eq!(
            roots,
            BTreeSet::from([
                "aws-call-error",
                "aws-clients",
                "aws-model",
                "interruption-router",
                "router-core",
                "routerctl"
            ]),
            "{check}"
        );
        assert!(
            excluded.contains("lab") && excluded.contains("local-aws"),
            "{check}"
        );
    }
    let checks_file = std::fs::read_to_string(
        scratch
            .path()
            .join("dist/interruption-router")
            .join(VERSION)
            .join("CHECKS"),
    )?;
    assert!(
        checks_file.contains(
            "licences, duplicate versions, sources: passed (cargo-deny 0.20.2-stand-in, \
             deny.toml, over interruption-router, routerctl and every crate they link"
        ),
        "{checks_file}"
    );
    assert!(
        checks_file.contains("advisories: passed (cargo-deny 0.20.2-stand-in"),
        "{checks_file}"
    );
    Ok(())
}

/// Where the advisory database cannot be fetched or read, `--advisories required` (what the
/// release workflow runs) stops the release before anything is built; make release's default,
/// best-effort, goes on and says so in its output and in CHECKS. An advisory found stops both,
/// whatever its text says (this one mentions a database).
#[test]
fn advisories_required_stop_a_release_whose_database_cannot_be_read() -> Result<()> {
    let scratch = Scratch::new("advisories");
    let deny = stand_in_cargo_deny(scratch.path())?;
    let out = scratch.path().join("dist");

    let required = build_checked(&out, &deny, "unreadable", &["--advisories", "required"]);
    assert!(!required.status.success(), "{}", text(&required));
    assert!(
        text(&required).contains(
            "error: ADVISORIES NOT CHECKED: cargo-deny could not fetch or read the RustSec \
             advisory database (above), and this release requires them"
        ),
        "{}",
        text(&required)
    );
    assert!(
        text(&required).contains("Could not resolve host: github.com"),
        "{}",
        text(&required)
    );
    assert!(
        !out.join("interruption-router").exists(),
        "a release was written"
    );

    let best_effort = build_checked(&out, &deny, "unreadable", &[]);
    assert!(best_effort.status.success(), "{}", text(&best_effort));
    assert!(
        text(&best_effort).contains(
            "release: ADVISORIES NOT CHECKED: cargo-deny could not fetch or read the RustSec \
             advisory database from this machine"
        ),
        "{}",
        text(&best_effort)
    );
    let checks =
        std::fs::read_to_string(out.join("interruption-router").join(VERSION).join("CHECKS"))?;
    assert!(
        checks.contains(
            "advisories: NOT CHECKED (the RustSec advisory database could not be fetched or read \
             where this release was built; --advisories best-effort went on without them)"
        ),
        "{checks}"
    );

    for mode in ["best-effort", "required"] {
        let found = build_checked(&out, &deny, "found", &["--advisories", mode]);
        assert!(!found.status.success(), "{mode}: {}", text(&found));
        assert!(
            text(&found).contains("cargo-deny found advisories against the dependencies"),
            "{mode}: {}",
            text(&found)
        );
    }
    // Required advisories need cargo-deny to check them.
    let binary = stand_in_router(&out);
    let unchecked = release(&[
        "build",
        "--out",
        out.to_str().context("path")?,
        "--arch",
        "x86_64",
        "--binary",
        &format!("x86_64={}", binary.display()),
        "--advisories",
        "required",
    ]);
    assert!(!unchecked.status.success());
    assert!(
        text(&unchecked).contains("--advisories required: the advisory check needs --cargo-deny"),
        "{}",
        text(&unchecked)
    );
    Ok(())
}

/// What the GitHub release publishes (`release.py assets`): the release directory as one
/// archive, every file of the version beside it, and a SHA256SUMS of its own that lists them all,
/// the archive included (the one inside the archive cannot vouch for the archive). The same
/// directory gives the same archive; one that does not verify gives none.
#[test]
fn the_published_assets_hold_sums_beside_the_archive() -> Result<()> {
    let scratch = Scratch::new("assets");
    let dist = scratch.path().join("dist");
    build(&dist, "interruption-router")?;
    let version_dir = dist.join("interruption-router").join(VERSION);
    let assets = |to: &Path, extra: &[&str]| {
        let mut args = vec![
            "assets",
            dist.to_str().unwrap(),
            "--to",
            to.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        release(&args)
    };
    let published = scratch.path().join("assets");
    let made = assets(&published, &["--no-sbom"]);
    assert!(made.status.success(), "{}", text(&made));
    let archive = format!("interruption-router-{VERSION}.tar.gz");
    let mut expected = files(&version_dir)?;
    expected.insert(archive.clone());
    assert_eq!(files(&published)?, expected);
    let checked = sha256sum_check(&published);
    assert!(checked.status.success(), "{}", text(&checked));
    let sums = std::fs::read_to_string(published.join("SHA256SUMS"))?;
    assert!(
        sums.lines().any(|l| l.ends_with(&format!("  {archive}"))),
        "{sums}"
    );
    assert_eq!(sums.lines().count(), expected.len() - 1, "{sums}");
    // Each file beside the archive is the release's own, and its line the version's.
    let inner = std::fs::read_to_string(version_dir.join("SHA256SUMS"))?;
    for line in inner.lines() {
        assert!(sums.lines().any(|l| l == line), "{line} not in {sums}");
    }
    // What a platform team extracts: the version and latest/, their own sums checking.
    let extracted = scratch.path().join("extracted");
    std::fs::create_dir_all(&extracted)?;
    let untar = Command::new("tar")
        .arg("-xzf")
        .arg(published.join(&archive))
        .current_dir(&extracted)
        .output()?;
    assert!(untar.status.success(), "{}", text(&untar));
    assert_eq!(
        files(&extracted.join("interruption-router"))?,
        BTreeSet::from([VERSION.to_owned(), "latest".to_owned()])
    );
    for dir in [VERSION, "latest"] {
        let checked = sha256sum_check(&extracted.join("interruption-router").join(dir));
        assert!(checked.status.success(), "{dir}: {}", text(&checked));
    }
    let cli = extracted
        .join("interruption-router")
        .join(VERSION)
        .join("routerctl-linux-x86_64");
    assert_ne!(
        std::fs::metadata(&cli)?.permissions().mode() & 0o111,
        0,
        "routerctl extracted not executable"
    );
    // Reproducible: the same directory, the same archive.
    let again = scratch.path().join("again");
    assert!(assets(&again, &["--no-sbom"]).status.success());
    assert!(
        std::fs::read(again.join(&archive))? == std::fs::read(published.join(&archive))?,
        "two archives of one directory differ"
    );
    // A directory that is not a release (no SBOMs) gives no assets.
    let refused = scratch.path().join("refused");
    let unreleased = assets(&refused, &[]);
    assert!(!unreleased.status.success());
    assert!(
        text(&unreleased).contains("bootstrap-x86_64.cdx.json: missing"),
        "{}",
        text(&unreleased)
    );
    assert!(!refused.join(&archive).exists());
    Ok(())
}

/// `<mach-o/loader.h>` and `<mach/machine.h>`: the 64-bit Mach-O magic, and the CPU types of the
/// two Macs routerctl ships for (CPU_ARCH_ABI64 | CPU_TYPE_ARM, | CPU_TYPE_X86).
const MH_MAGIC_64: u32 = 0xfeed_facf;
const CPU_ARM64: u32 = 0x0100_000c;
const CPU_X86_64: u32 = 0x0100_0007;

/// A 64-bit Mach-O executable's header for `cpu` (little-endian, as both Macs are): all the
/// release script reads of a macOS binary it is given.
pub(super) fn macho_stand_in(path: &Path, cpu: u32) -> Result<()> {
    let mut header = MH_MAGIC_64.to_le_bytes().to_vec();
    header.extend(cpu.to_le_bytes());
    header.extend(0u32.to_le_bytes()); // cpusubtype
    header.extend(2u32.to_le_bytes()); // filetype: MH_EXECUTE
    header.extend([0; 16]); // ncmds, sizeofcmds, flags, reserved
    std::fs::write(path, header)?;
    Ok(())
}

/// What one macOS job of the release workflow hands over (`release.py build-darwin`), made here
/// from a stand-in for the binary it builds: into `<scratch>/handed/routerctl-darwin-<arch>/`.
fn build_darwin(scratch: &Path, arch: &str, cpu: u32) -> Result<PathBuf> {
    let binary = scratch.join(format!("mach-o-{arch}"));
    macho_stand_in(&binary, cpu)?;
    let to = scratch
        .join("handed")
        .join(format!("routerctl-darwin-{arch}"));
    let made = release(&[
        "build-darwin",
        "--arch",
        arch,
        "--to",
        to.to_str().context("path")?,
        "--routerctl",
        binary.to_str().context("path")?,
    ]);
    assert!(made.status.success(), "{}", text(&made));
    Ok(to)
}

/// `SHA256SUMS` of `dir` written again for what it holds now (what an attacker, or a release
/// step that changed a file after the sums, would leave).
fn rewrite_sums(dir: &Path) -> Result<()> {
    let mut names: Vec<String> = files(dir)?
        .into_iter()
        .filter(|n| n != "SHA256SUMS")
        .collect();
    names.sort();
    let sums: String = names
        .iter()
        .map(|n| {
            Ok(format!(
                "{}  {n}\n",
                sha256_hex(&std::fs::read(dir.join(n))?)
            ))
        })
        .collect::<Result<_>>()?;
    std::fs::write(dir.join("SHA256SUMS"), sums)?;
    Ok(())
}

fn mode(path: &Path) -> Result<u32> {
    Ok(std::fs::metadata(path)?.permissions().mode() & 0o777)
}

/// routerctl for macOS cannot be linked here (Apple's linker and SDK): the release workflow builds
/// it on a Mac of each architecture (`release.py build-darwin`: the binary, its SBOM, a CHECKS
/// line and the sums of what it hands over) and the release job puts both into the directory make
/// release wrote (`release.py add`) before `verify` and `assets`: executable again (workflow
/// artifacts keep no mode), in the version's SHA256SUMS, its CHECKS line in place of make
/// release's "not built here", `latest/` untouched. A handover whose sums do not match, that
/// holds anything else, or a binary of the other CPU is refused, and nothing is added.
#[test]
fn routerctl_for_macos_is_built_on_a_mac_and_added_to_the_release_before_its_sums() -> Result<()> {
    let scratch = Scratch::new("darwin");
    let out = scratch.path().join("dist");
    build(&out, "interruption-router")?;
    let dir = out.join("interruption-router").join(VERSION);
    let latest = out.join("interruption-router/latest");
    let latest_before = std::fs::read_to_string(latest.join("SHA256SUMS"))?;
    let checks = std::fs::read_to_string(dir.join("CHECKS"))?;
    for arch in ["arm64", "x86_64"] {
        assert!(
            checks.contains(&format!(
                "routerctl-darwin-{arch}: not built here (routerctl for macOS is built on a Mac: \
                 the release workflow's macOS jobs, then tools/release.py add)"
            )),
            "{checks}"
        );
    }

    // What each macOS job hands over.
    let arm = build_darwin(scratch.path(), "arm64", CPU_ARM64)?;
    let intel = build_darwin(scratch.path(), "x86_64", CPU_X86_64)?;
    assert_eq!(
        files(&arm)?,
        BTreeSet::from(["CHECKS", "SHA256SUMS", "routerctl-darwin-arm64"].map(str::to_owned))
    );
    let checked = sha256sum_check(&arm);
    assert!(checked.status.success(), "{}", text(&checked));
    let handed_checks = std::fs::read_to_string(arm.join("CHECKS"))?;
    assert!(
        handed_checks
            .contains("routerctl-darwin-arm64: the binary given (mach-o-arm64), not built here"),
        "{handed_checks}"
    );
    assert!(
        handed_checks.contains("routerctl-darwin-arm64: SBOM NOT MADE"),
        "{handed_checks}"
    );
    // The other Mac's binary, or Linux's, is not taken for arm64.
    let x86 = scratch.path().join("mach-o-x86_64");
    let elf = stand_in_router(&out);
    for (given, says) in [
        (&x86, "is an x86_64 Mach-O executable, not arm64"),
        (&elf, "is not a 64-bit Mach-O executable, not arm64"),
    ] {
        let wrong = release(&[
            "build-darwin",
            "--arch",
            "arm64",
            "--to",
            scratch.path().join("wrong").to_str().context("path")?,
            "--routerctl",
            given.to_str().context("path")?,
        ]);
        assert!(!wrong.status.success(), "{}", text(&wrong));
        assert!(text(&wrong).contains(says), "{}", text(&wrong));
    }

    // Handed over as workflow artifacts, which keep no file mode.
    for (d, arch) in [(&arm, "arm64"), (&intel, "x86_64")] {
        std::fs::set_permissions(
            d.join(format!("routerctl-darwin-{arch}")),
            std::fs::Permissions::from_mode(0o644),
        )?;
    }
    let add = |from: &[&Path]| {
        let mut args = vec![
            "add".to_owned(),
            out.display().to_string(),
            "--no-sbom".into(),
        ];
        for f in from {
            args.extend(["--from".to_owned(), f.display().to_string()]);
        }
        release(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };

    // A handover changed after its sums, or holding something else, is refused whole.
    let sums_before = std::fs::read_to_string(dir.join("SHA256SUMS"))?;
    let binary = intel.join("routerctl-darwin-x86_64");
    let original = std::fs::read(&binary)?;
    std::fs::write(&binary, [original.as_slice(), b"tampered"].concat())?;
    let refused = add(&[&arm, &intel]);
    assert!(!refused.status.success(), "{}", text(&refused));
    assert!(
        text(&refused)
            .contains("routerctl-darwin-x86_64: its SHA-256 is not the one SHA256SUMS lists"),
        "{}",
        text(&refused)
    );
    std::fs::write(&binary, &original)?;
    std::fs::write(intel.join("notes.txt"), "not a release file")?;
    rewrite_sums(&intel)?;
    let refused_stray = add(&[&arm, &intel]);
    assert!(!refused_stray.status.success(), "{}", text(&refused_stray));
    assert!(
        text(&refused_stray).contains("notes.txt: not something a macOS job hands over"),
        "{}",
        text(&refused_stray)
    );
    std::fs::remove_file(intel.join("notes.txt"))?;
    rewrite_sums(&intel)?;
    assert_eq!(
        std::fs::read_to_string(dir.join("SHA256SUMS"))?,
        sums_before
    );
    assert!(
        !dir.join("routerctl-darwin-arm64").exists(),
        "a refused handover added a file"
    );

    let added = add(&[&arm, &intel]);
    assert!(added.status.success(), "{}", text(&added));
    let arm_binary = scratch.path().join("mach-o-arm64");
    for (arch, given) in [("arm64", &arm_binary), ("x86_64", &x86)] {
        let cli = dir.join(format!("routerctl-darwin-{arch}"));
        assert_eq!(std::fs::read(&cli)?, std::fs::read(given)?);
        assert_eq!(mode(&cli)?, 0o755, "{}", cli.display());
    }
    let checked = sha256sum_check(&dir);
    assert!(checked.status.success(), "{}", text(&checked));
    let sums = std::fs::read_to_string(dir.join("SHA256SUMS"))?;
    assert_eq!(sums.lines().count(), 11, "{sums}");
    let checks = std::fs::read_to_string(dir.join("CHECKS"))?;
    for arch in ["arm64", "x86_64"] {
        assert!(
            !checks.contains(&format!("routerctl-darwin-{arch}: not built here (")),
            "{checks}"
        );
        assert!(
            checks.contains(&format!(
                "routerctl-darwin-{arch}: the binary given (mach-o-{arch}), not built here"
            )),
            "{checks}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(latest.join("SHA256SUMS"))?,
        latest_before,
        "latest/ changed"
    );
    let fine = release(&["verify", out.to_str().context("path")?, "--no-sbom"]);
    assert!(fine.status.success(), "{}", text(&fine));

    // Published beside the archive and in it, executable.
    let published = scratch.path().join("assets");
    let assets = release(&[
        "assets",
        out.to_str().context("path")?,
        "--to",
        published.to_str().context("path")?,
        "--no-sbom",
    ]);
    assert!(assets.status.success(), "{}", text(&assets));
    let listing = text(
        &Command::new("tar")
            .arg("-tvzf")
            .arg(published.join(format!("interruption-router-{VERSION}.tar.gz")))
            .output()?,
    );
    for arch in ["arm64", "x86_64"] {
        let name = format!("routerctl-darwin-{arch}");
        assert_eq!(mode(&published.join(&name))?, 0o755);
        assert!(
            listing
                .lines()
                .any(|l| l.starts_with("-rwxr-xr-x") && l.ends_with(&format!("/{VERSION}/{name}"))),
            "{listing}"
        );
    }
    Ok(())
}

/// (name, version) of every crate routerctl links for `triple`, as `cargo tree` resolves it.
fn routerctl_dependencies(triple: &str) -> Result<Vec<(String, String)>> {
    let out = Command::new("cargo")
        .args([
            "tree",
            "--locked",
            "--package",
            "routerctl",
            "--edges",
            "normal",
            "--target",
            triple,
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
            (name != "routerctl").then(|| (name.to_owned(), version.to_owned()))
        })
        .collect();
    deps.sort();
    deps.dedup();
    Ok(deps)
}

/// `verify` holds routerctl for macOS to what it holds every artifact to: a Mach-O executable of
/// the CPU its name says (not the other Mac's, not Linux's), executable, in SHA256SUMS, and its
/// SBOM present, made for the macOS target, and listing every crate routerctl links there (which
/// is not what it links on Linux: security-framework, the macOS keychain's certificates).
#[test]
fn verify_refuses_a_macos_routerctl_of_the_wrong_cpu_unlisted_or_without_its_sbom() -> Result<()> {
    let scratch = Scratch::new("darwin-verify");
    let out = scratch.path().join("dist");
    build(&out, "interruption-router")?;
    let arm = build_darwin(scratch.path(), "arm64", CPU_ARM64)?;
    let added = release(&[
        "add",
        out.to_str().context("path")?,
        "--from",
        arm.to_str().context("path")?,
        "--no-sbom",
    ]);
    assert!(added.status.success(), "{}", text(&added));
    let dir = out.join("interruption-router").join(VERSION);
    let cli = dir.join("routerctl-darwin-arm64");
    let verify = |extra: &[&str]| {
        let mut args = vec!["verify", out.to_str().unwrap()];
        args.extend_from_slice(extra);
        text(&release(&args))
    };
    assert!(
        !verify(&["--no-sbom"]).contains("routerctl-darwin"),
        "{}",
        verify(&["--no-sbom"])
    );

    // The other Mac's binary under arm64's name, or Linux's, its sums rewritten to match.
    let original = std::fs::read(&cli)?;
    for (mach_o, is) in [
        (true, "an x86_64 Mach-O executable"),
        (false, "not a 64-bit Mach-O executable"),
    ] {
        if mach_o {
            macho_stand_in(&cli, CPU_X86_64)?;
        } else {
            elf_stand_in(&cli, 183)?;
        }
        rewrite_sums(&dir)?;
        let said = verify(&["--no-sbom"]);
        assert!(
            said.contains(&format!(
                "routerctl-darwin-arm64: not an arm64 Mach-O executable ({is})"
            )),
            "{said}"
        );
    }
    std::fs::write(&cli, &original)?;
    rewrite_sums(&dir)?;
    std::fs::set_permissions(&cli, std::fs::Permissions::from_mode(0o644))?;
    assert!(
        verify(&["--no-sbom"]).contains("routerctl-darwin-arm64: not executable"),
        "{}",
        verify(&["--no-sbom"])
    );
    std::fs::set_permissions(&cli, std::fs::Permissions::from_mode(0o755))?;
    // Left out of SHA256SUMS.
    let sums = std::fs::read_to_string(dir.join("SHA256SUMS"))?;
    let without: String = sums
        .lines()
        .filter(|l| !l.ends_with("  routerctl-darwin-arm64"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(dir.join("SHA256SUMS"), without)?;
    assert!(
        verify(&["--no-sbom"]).contains("routerctl-darwin-arm64: not in SHA256SUMS"),
        "{}",
        verify(&["--no-sbom"])
    );
    std::fs::write(dir.join("SHA256SUMS"), &sums)?;
    // A name of no Mac routerctl ships for.
    std::fs::copy(&cli, dir.join("routerctl-darwin-i386"))?;
    rewrite_sums(&dir)?;
    assert!(
        verify(&["--no-sbom"]).contains(
            "routerctl-darwin-i386: i386 is not an architecture routerctl is released for \
             on macOS (arm64, x86_64)"
        ),
        "{}",
        verify(&["--no-sbom"])
    );
    std::fs::remove_file(dir.join("routerctl-darwin-i386"))?;
    rewrite_sums(&dir)?;

    // Its SBOM: missing, made for Linux's target, lacking what only macOS links, then right.
    assert!(
        verify(&[])
            .contains("routerctl-darwin-arm64.cdx.json: missing (every artifact has its SBOM)"),
        "{}",
        verify(&[])
    );
    let sbom = |triple: &str, components: &[(String, String)]| {
        json!({
            "bomFormat": "CycloneDX",
            "specVersion": "1.5",
            "metadata": {
                "component": {"name": "routerctl", "version": VERSION},
                "properties": [{"name": "cdx:rustc:sbom:target:triple", "value": triple}],
            },
            "components": components.iter().map(|(n, v)| json!({"name": n, "version": v})).collect::<Vec<_>>(),
        })
        .to_string()
    };
    let deps = routerctl_dependencies("aarch64-apple-darwin")?;
    let linux = routerctl_dependencies("aarch64-unknown-linux-gnu")?;
    let only_macos: Vec<_> = deps.iter().filter(|d| !linux.contains(d)).collect();
    assert!(
        only_macos.iter().any(|(n, _)| n == "security-framework"),
        "{only_macos:?}"
    );
    let security = deps
        .iter()
        .find(|(n, _)| n == "security-framework")
        .context("security-framework")?
        .clone();
    let sbom_path = dir.join("routerctl-darwin-arm64.cdx.json");
    for (document, says) in [
        (
            sbom("aarch64-unknown-linux-gnu", &linux),
            "routerctl-darwin-arm64.cdx.json: made for ['aarch64-unknown-linux-gnu'], not \
             aarch64-apple-darwin"
                .to_owned(),
        ),
        (
            sbom(
                "aarch64-apple-darwin",
                &deps
                    .iter()
                    .filter(|d| **d != security)
                    .cloned()
                    .collect::<Vec<_>>(),
            ),
            format!(
                "routerctl-darwin-arm64.cdx.json: lacks 1 of routerctl's dependencies: \
                 security-framework@{}",
                security.1
            ),
        ),
    ] {
        std::fs::write(&sbom_path, document)?;
        rewrite_sums(&dir)?;
        let said = verify(&[]);
        assert!(said.contains(&says), "{said}");
    }
    std::fs::write(&sbom_path, sbom("aarch64-apple-darwin", &deps))?;
    rewrite_sums(&dir)?;
    let said = verify(&[]);
    assert!(!said.contains("routerctl-darwin-arm64"), "{said}");
    Ok(())
}
