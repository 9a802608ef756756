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
