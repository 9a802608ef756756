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
/// architectures' zips and routerctl in it, and its assets (the archive, every file of the
/// version, their sums) published.
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
        "python3 tools/release.py assets target/release-dist --to target/release-assets",
        "gh release upload \"$tag\" --clobber target/release-assets/*",
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

/// The release workflow, as YAML.
fn workflow() -> (String, serde_norway::Value) {
    let path = super::repo().join(".github/workflows/release.yml");
    let text = std::fs::read_to_string(&path).unwrap();
    let doc = serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (text, doc)
}

fn jobs(doc: &serde_norway::Value) -> Vec<(&str, &serde_norway::Value)> {
    doc["jobs"]
        .as_mapping()
        .expect("jobs")
        .iter()
        .map(|(name, job)| (name.as_str().expect("a job's name"), job))
        .collect()
}

fn steps(job: &serde_norway::Value) -> &[serde_norway::Value] {
    job["steps"].as_sequence().expect("steps")
}

/// The shell lines of a job's `run:` steps, in order.
fn run_lines(job: &serde_norway::Value) -> Vec<String> {
    steps(job)
        .iter()
        .filter_map(|s| s["run"].as_str())
        .flat_map(|run| run.lines().map(|l| l.trim().to_owned()))
        .collect()
}

/// A release a reviewer can trust is built by code nobody could change under it: every action
/// the workflow uses is pinned by a full commit SHA (the version in a comment), no checkout
/// leaves the token in `.git/config` for the build's crates to read, nothing holds more than
/// its job needs, and only the publishing step is handed a token.
#[test]
fn the_release_workflow_pins_every_action_and_hands_no_credentials_to_the_build() {
    let (text, doc) = workflow();
    let mut uses = 0;
    for (name, job) in jobs(&doc) {
        for step in steps(job) {
            let Some(action) = step["uses"].as_str() else {
                continue;
            };
            uses += 1;
            let (repo, rev) = action.split_once('@').expect("an action@ref");
            assert!(
                rev.len() == 40 && rev.bytes().all(|b| b.is_ascii_hexdigit()),
                "{name}: {action} is not pinned by a full commit SHA"
            );
            assert!(
                text.lines()
                    .any(|l| l.contains(&format!("uses: {action} # v"))),
                "{name}: {action} says not which version it is"
            );
            if repo == "actions/checkout" {
                assert_eq!(
                    step["with"]["persist-credentials"].as_bool(),
                    Some(false),
                    "{name}: a checkout that keeps the token"
                );
            }
        }
        let run = run_lines(job).join("\n");
        assert!(
            !run.contains("github.token") && !run.contains("GITHUB_TOKEN"),
            "{name}: a token in a script"
        );
    }
    assert!(uses >= 5, "{uses} actions found");
    assert!(!text.contains("write-all"), "permissions: write-all");
    // Nothing by default: each job names what it needs.
    assert_eq!(
        doc["permissions"].as_mapping().map(|m| m.len()),
        Some(0),
        "the workflow's default permissions: {:?}",
        doc["permissions"]
    );
    let permissions = |job: &str| -> Vec<(String, String)> {
        doc["jobs"][job]["permissions"]
            .as_mapping()
            .unwrap_or_else(|| panic!("{job}: no permissions of its own"))
            .iter()
            .map(|(k, v)| (k.as_str().unwrap().into(), v.as_str().unwrap().into()))
            .collect()
    };
    assert_eq!(permissions("test"), [("contents".into(), "read".into())]);
    assert_eq!(
        permissions("release"),
        [
            ("contents".into(), "write".into()),
            ("id-token".into(), "write".into()),
            ("attestations".into(), "write".into())
        ]
    );
    // The token goes to the one step that publishes, through its environment.
    let with_token: Vec<&str> = jobs(&doc)
        .iter()
        .flat_map(|(_, job)| steps(job))
        .filter(|s| {
            s["env"].as_mapping().is_some_and(|env| {
                env.values()
                    .any(|v| v.as_str() == Some("${{ github.token }}"))
            })
        })
        .map(|s| s["name"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(with_token, ["Upload into a draft release, then publish it"]);
    for (name, job) in jobs(&doc) {
        assert!(
            job["env"].is_null(),
            "{name}: an environment for every step"
        );
    }
}

/// Nothing is published that did not pass `make test` (what .ci/run runs), and nothing is
/// published half-made: the release is created as a draft, its assets uploaded (a re-run
/// replaces a draft's), and only then published. Every asset, the archive and SHA256SUMS among
/// them, has its build provenance attested, so `gh attestation verify` answers for each download.
#[test]
fn the_release_is_tested_first_drafted_attested_and_published_last() {
    let (_, doc) = workflow();
    let repo = super::repo();
    assert!(
        std::fs::read_to_string(repo.join(".ci/run"))
            .unwrap()
            .lines()
            .any(|l| l.trim() == "make test")
    );
    let test = &doc["jobs"]["test"];
    assert!(
        run_lines(test).iter().any(|l| l == "make test"),
        "the test job runs no make test"
    );
    let release = &doc["jobs"]["release"];
    let needs: Vec<&str> = match &release["needs"] {
        serde_norway::Value::String(one) => vec![one.as_str()],
        many => many
            .as_sequence()
            .expect("needs")
            .iter()
            .filter_map(|n| n.as_str())
            .collect(),
    };
    assert!(needs.contains(&"test"), "the release needs not the tests");
    // The release job builds with the advisories required.
    let lines = run_lines(release);
    assert!(
        lines
            .iter()
            .any(|l| l == "make release ADVISORIES=required"),
        "{lines:#?}"
    );
    // Made, attested, then uploaded into a draft that is published last.
    let position = |name: &str| {
        steps(release)
            .iter()
            .position(|s| {
                s["run"].as_str().is_some_and(|r| r.contains(name))
                    || s["uses"].as_str().is_some_and(|u| u.starts_with(name))
            })
            .unwrap_or_else(|| panic!("no step {name}"))
    };
    let made =
        position("python3 tools/release.py assets target/release-dist --to target/release-assets");
    let attested = position("actions/attest-build-provenance@");
    let published = position("gh release edit");
    assert!(made < attested && attested < published);
    assert_eq!(
        steps(release)[attested]["with"]["subject-path"].as_str(),
        Some("target/release-assets/*"),
        "the attestation covers not every asset"
    );
    let script = steps(release)[published]["run"].as_str().unwrap();
    let at = |needle: &str| {
        script
            .find(needle)
            .unwrap_or_else(|| panic!("the publishing step lacks {needle:?}"))
    };
    let creates: Vec<&str> = script
        .lines()
        .filter(|l| l.contains("gh release create"))
        .collect();
    assert!(
        !creates.is_empty() && creates.iter().all(|l| l.contains("--draft")),
        "{creates:?}"
    );
    assert!(
        at("gh release create")
            < at("gh release upload \"$tag\" --clobber target/release-assets/*")
    );
    assert!(at("--clobber") < at("gh release edit \"$tag\" --draft=false"));
    // A published release is never replaced; a draft's stale assets are.
    assert!(script.contains("--json isDraft"), "{script}");
    assert!(script.contains("gh release delete-asset"), "{script}");
    assert!(!script.contains("gh release delete "), "{script}");
}

/// One compiler for the tests, the release and the workflow: rust-toolchain.toml pins it, with
/// the components make test runs (clippy, rustfmt) and no target (rustup would download each on
/// the first cargo command of every checkout; the workflow adds the Lambda targets), and the
/// workspace's rust-version is no newer.
#[test]
fn the_toolchain_is_pinned_for_every_build() {
    let repo = super::repo();
    let pinned = std::fs::read_to_string(repo.join("rust-toolchain.toml")).unwrap();
    let value = |key: &str| -> String {
        pinned
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key} = ")))
            .unwrap_or_else(|| panic!("rust-toolchain.toml: no {key}"))
            .to_owned()
    };
    let channel = value("channel");
    let channel = channel.trim_matches('"');
    assert!(
        semver_of(channel).len() == 3,
        "a channel that moves: {channel}"
    );
    assert_eq!(value("components"), r#"["clippy", "rustfmt"]"#);
    assert!(
        !pinned.lines().any(|l| l.starts_with("targets")),
        "{pinned}"
    );
    let manifest = std::fs::read_to_string(repo.join("Cargo.toml")).unwrap();
    let rust_version = manifest
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = "))
        .expect("the workspace's rust-version")
        .trim_matches('"');
    assert!(semver_of(rust_version) <= semver_of(channel));
    // The compiler cargo runs here is the pinned one.
    let out = Command::new("rustc")
        .arg("--version")
        .current_dir(&repo)
        // What cargo's rustup proxy set for this test: the file's choice is what is asked.
        .env_remove("RUSTUP_TOOLCHAIN")
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with(&format!("rustc {channel} ")),
        "{out:?}"
    );
    // The workflow installs it in each job before building.
    let (_, doc) = workflow();
    for (name, job) in jobs(&doc) {
        assert!(
            run_lines(job)
                .iter()
                .any(|l| l.starts_with("rustup toolchain install")),
            "{name}: the pinned toolchain is not installed"
        );
    }
}

fn semver_of(v: &str) -> Vec<u64> {
    v.split('.')
        .map(|n| n.parse().unwrap_or(u64::MAX))
        .collect()
}

/// The macOS runner labels of GitHub's hosted images, and the CPU each one is (actions/runner-images'
/// README, its table of images, as of 749514466, 2026-08-21: `macos-26` is "macOS 26 Arm64",
/// `macos-26-intel` "macOS 26", x64).
const MACOS_RUNNERS: [(&str, &str); 2] = [("macos-26", "arm64"), ("macos-26-intel", "x86_64")];

/// routerctl for macOS is built where it runs: one job per architecture on a GitHub-hosted Mac of
/// that CPU (so `build-darwin` runs the binary it built), both of release.py's macOS targets, the
/// pinned toolchain, cargo-cyclonedx at the Makefile's version for its SBOM, nothing but
/// `contents: read` and no token; each hands its directory over as a workflow artifact, and the
/// release job `needs` them, puts them into the directory make release wrote (`release.py add`)
/// before verifying it (both Macs' binaries required), making the assets and attesting them.
#[test]
fn the_release_workflow_builds_routerctl_for_macos_on_a_mac_of_each_architecture() {
    let (text, doc) = workflow();
    let script = std::fs::read_to_string(super::repo().join("tools/release.py")).unwrap();
    let darwin: Vec<(&str, &str)> = script
        .lines()
        .find(|l| l.starts_with("DARWIN_TRIPLES = "))
        .expect("release.py's DARWIN_TRIPLES")
        .split('"')
        .skip(1)
        .step_by(2)
        .collect::<Vec<_>>()
        .chunks(2)
        .map(|c| (c[0], c[1]))
        .collect();
    assert_eq!(
        darwin,
        [
            ("x86_64", "x86_64-apple-darwin"),
            ("arm64", "aarch64-apple-darwin")
        ]
    );
    let macos: Vec<(&str, &serde_norway::Value)> = jobs(&doc)
        .into_iter()
        .filter(|(_, job)| {
            job["strategy"]["matrix"]["include"]
                .as_sequence()
                .is_some_and(|m| {
                    m.iter().any(|i| {
                        i["runner"]
                            .as_str()
                            .is_some_and(|r| r.starts_with("macos-"))
                    })
                })
        })
        .collect();
    assert_eq!(
        macos.len(),
        1,
        "one macOS job (a matrix of both architectures)"
    );
    let (name, job) = macos[0];
    assert_eq!(
        job["runs-on"].as_str(),
        Some("${{ matrix.runner }}"),
        "{name}"
    );
    let mut built: Vec<(String, String)> = job["strategy"]["matrix"]["include"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|i| {
            let runner = i["runner"].as_str().expect("a runner label");
            let native = MACOS_RUNNERS
                .iter()
                .find(|(label, _)| *label == runner)
                .unwrap_or_else(|| panic!("{name}: {runner} is no macOS runner label known here"))
                .1;
            let arch = i["arch"].as_str().expect("an arch");
            assert_eq!(
                arch, native,
                "{name}: {arch} built on {runner}, a {native} Mac"
            );
            (arch.to_owned(), runner.to_owned())
        })
        .collect();
    built.sort();
    assert_eq!(
        built.iter().map(|(a, _)| a.as_str()).collect::<Vec<_>>(),
        ["arm64", "x86_64"],
        "{name}: both Macs"
    );
    assert_eq!(
        job["strategy"]["fail-fast"].as_bool(),
        Some(true),
        "{name}: one Mac failing stops the other"
    );
    // Nothing but reading the checkout, and no token anywhere in it.
    let permissions: Vec<(&str, &str)> = job["permissions"]
        .as_mapping()
        .unwrap_or_else(|| panic!("{name}: no permissions of its own"))
        .iter()
        .map(|(k, v)| (k.as_str().unwrap(), v.as_str().unwrap()))
        .collect();
    assert_eq!(permissions, [("contents", "read")], "{name}");
    assert!(
        !serde_norway::to_string(job)
            .unwrap()
            .contains("github.token"),
        "{name}"
    );
    // Built by release.py with its SBOM, from cargo-cyclonedx at the Makefile's pin.
    let lines = run_lines(job);
    assert!(
        lines.iter().any(|l| l
            == "python3 tools/release.py build-darwin --arch \"$ARCH\" --to target/routerctl-darwin \
                --cyclonedx .tools/bin/cargo-cyclonedx"),
        "{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l == "version=$(sed -n 's/^CARGO_CYCLONEDX_VERSION := //p' Makefile)"),
        "{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l == "cargo install --locked --root .tools \"cargo-cyclonedx@$version\""),
        "{lines:#?}"
    );
    let arch_env = steps(job)
        .iter()
        .find(|s| {
            s["run"]
                .as_str()
                .is_some_and(|r| r.contains("build-darwin"))
        })
        .map(|s| s["env"]["ARCH"].as_str())
        .unwrap();
    assert_eq!(arch_env, Some("${{ matrix.arch }}"));
    let upload = steps(job)
        .iter()
        .find(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("actions/upload-artifact@"))
        })
        .unwrap_or_else(|| panic!("{name}: hands nothing over"));
    assert_eq!(
        upload["with"]["name"].as_str(),
        Some("routerctl-darwin-${{ matrix.arch }}")
    );
    assert_eq!(
        upload["with"]["path"].as_str(),
        Some("target/routerctl-darwin/")
    );
    assert_eq!(upload["with"]["if-no-files-found"].as_str(), Some("error"));
    assert!(text.contains(
        "uses: actions/upload-artifact@bbbca2ddaa5d8feaa63e36b76fdaad77386f024f # v7.0.0"
    ));

    // The release job waits for both Macs and puts their binaries in before anything is checked,
    // made into assets or attested.
    let release = &doc["jobs"]["release"];
    let needs: Vec<&str> = release["needs"]
        .as_sequence()
        .expect("the release job needs a list")
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    assert!(
        needs.contains(&"test") && needs.contains(&name),
        "{needs:?}"
    );
    let position = |what: &str| {
        steps(release)
            .iter()
            .position(|s| {
                s["run"].as_str().is_some_and(|r| r.contains(what))
                    || s["uses"].as_str().is_some_and(|u| u.starts_with(what))
            })
            .unwrap_or_else(|| panic!("the release job has no step {what}"))
    };
    let made = position("make release ADVISORIES=required");
    let downloaded = position("actions/download-artifact@");
    let added = position("python3 tools/release.py add target/release-dist");
    let verified = position("python3 tools/release.py verify target/release-dist");
    let assets = position("python3 tools/release.py assets target/release-dist");
    let attested = position("actions/attest-build-provenance@");
    assert!(
        made < downloaded
            && downloaded < added
            && added < verified
            && verified < assets
            && assets < attested,
        "{made} {downloaded} {added} {verified} {assets} {attested}"
    );
    let download = &steps(release)[downloaded]["with"];
    assert_eq!(download["pattern"].as_str(), Some("routerctl-darwin-*"));
    assert_eq!(download["path"].as_str(), Some("target/routerctl-darwin"));
    assert!(text.contains(
        "uses: actions/download-artifact@3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c # v8.0.1"
    ));
    let add = steps(release)[added]["run"].as_str().unwrap();
    for (arch, _) in &built {
        assert!(
            add.contains(&format!(
                "--from target/routerctl-darwin/routerctl-darwin-{arch}"
            )),
            "{add}"
        );
    }
    let verify = steps(release)[verified]["run"].as_str().unwrap();
    assert!(
        verify.contains(
            "test -f \"target/release-dist/interruption-router/$version/routerctl-darwin-$arch\""
        ),
        "{verify}"
    );
}
