//! What operators run links no lab: `routerctl` and the router depend on no emulator, fault
//! proxy or HTTP server of the tests (`local-aws`), as `cargo tree` resolves them.

use std::process::Command;

fn tree(package: &str) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .args([
            "tree",
            "--offline",
            "-p",
            package,
            "-e",
            "normal,build",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .output()
        .expect("cargo tree runs");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn routerctl_and_the_router_link_no_emulator() {
    for package in ["routerctl", "interruption-router"] {
        let tree = tree(package);
        for lab in ["local-aws ", "lab ", "e2e-tests "] {
            assert!(
                !tree.lines().any(|l| l.starts_with(lab)),
                "{package} depends on {lab}:\n{tree}"
            );
        }
    }
    // The lab does, which is why it is a crate of its own.
    assert!(tree("lab").lines().any(|l| l.starts_with("local-aws ")));
}

/// The router's decisions build without the AWS SDK or the Lambda runtime (what the fuzz target,
/// the simulation and routerctl link of the router), and routerctl links not the Lambda itself.
#[test]
fn the_core_links_neither_the_sdk_nor_the_lambda_runtime() {
    let core = tree("router-core");
    for sdk in [
        "aws-sdk-",
        "aws-config ",
        "aws-credential-types ",
        "aws-smithy-",
        "lambda_runtime",
    ] {
        assert!(
            !core.lines().any(|l| l.starts_with(sdk)),
            "router-core depends on {sdk}:\n{core}"
        );
    }
    assert!(
        tree("interruption-router")
            .lines()
            .any(|l| l.starts_with("aws-sdk-sqs "))
    );
    let routerctl = tree("routerctl");
    assert!(routerctl.lines().any(|l| l.starts_with("router-core ")));
    assert!(
        !routerctl
            .lines()
            .any(|l| l.starts_with("interruption-router ")),
        "routerctl links the Lambda:\n{routerctl}"
    );
}

/// The release workflow (`.github/workflows/release.yml`) builds what the README tells a platform
/// team to download: on a version tag that must equal the workspace's version, `make release`
/// with every Rust target the release script builds installed, the directory verified with both
/// architectures' zips and routerctl in it, and every file of it published.
#[test]
fn the_release_workflow_builds_both_architectures_and_publishes_the_directory() {
    let repo = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let workflow = std::fs::read_to_string(repo.join(".github/workflows/release.yml")).unwrap();
    let script = std::fs::read_to_string(repo.join("tools/release.py")).unwrap();
    let triples: Vec<&str> = script
        .lines()
        .find(|l| l.starts_with("TRIPLES = "))
        .expect("release.py's TRIPLES")
        .split('"')
        .skip(3)
        .step_by(4)
        .collect();
    assert_eq!(
        triples,
        ["x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu"]
    );
    let run_lines: Vec<&str> = workflow.lines().map(str::trim).collect();
    let installs = run_lines
        .iter()
        .find(|l| l.contains("rustup target add"))
        .expect("a rustup target add step");
    for triple in &triples {
        assert!(installs.contains(triple), "{installs}");
    }
    for needed in [
        "tags: [\"v[0-9]+.[0-9]+.[0-9]+\"]",
        "run: make release",
        "python3 tools/release.py verify target/release-dist",
        "for arch in x86_64 arm64; do",
        "test -f \"target/release-dist/interruption-router/$version/routerctl-linux-$arch\"",
        "target/release-dist/interruption-router/\"$version\"/*",
        "version=$(python3 tools/release.py version)",
        "python3 tools/release.py notes > target/release-notes.md",
    ] {
        assert!(
            run_lines.iter().any(|l| l.contains(needed)),
            "the workflow lacks {needed:?}"
        );
    }
    // The script answers the workflow's two questions.
    for (command, starts) in [
        ("version", interruption_router::VERSION.to_owned()),
        ("notes", format!("## {}", interruption_router::VERSION)),
    ] {
        let out = Command::new("python3")
            .arg(repo.join("tools/release.py"))
            .arg(command)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).starts_with(&starts),
            "{out:?}"
        );
    }
}
