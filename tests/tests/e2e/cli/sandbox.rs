//! `lab demo --sandbox`, as an operator runs it to try `routerctl` on the emulator (the
//! operating guide's `simulate` and `verify` transcripts were captured this way): it prints the
//! endpoint to point at, stays up, and what it deployed passes `verify` and takes `simulate`.

use std::{
    io::{BufRead, BufReader},
    process::{Command, Stdio},
};

use anyhow::{Context, Result};

use super::{lab_binary, routerctl_binary};

/// The running `lab demo --sandbox`, stopped with Ctrl-C (SIGINT) however the test ends, so
/// that its emulator never outlives the test.
struct Kept(std::process::Child);

impl Kept {
    /// Ctrl-C, as the operator stops it; whether it then exited 0.
    fn stop(&mut self) -> Result<bool> {
        Command::new("kill")
            .args(["-INT", &self.0.id().to_string()])
            .status()?;
        Ok(self.0.wait()?.success())
    }
}

impl Drop for Kept {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.stop();
        }
    }
}

#[test]
fn demo_sandbox_stays_up_with_stacks_that_verify_passes_and_simulate_reaches() -> Result<()> {
    let mut kept = Kept(
        Command::new(lab_binary())
            .args(["demo", "--sandbox"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?,
    );
    let stdout = kept.0.stdout.take().context("no stdout")?;
    let mut printed = Vec::new();
    let mut endpoint = None;
    let mut ingest = None;
    for line in BufReader::new(stdout).lines() {
        let line = line?;
        if let Some(rest) = line.trim().strip_prefix("export AWS_ENDPOINT_URL=") {
            endpoint = rest.split_whitespace().next().map(str::to_owned);
        }
        if let Some(at) = line.find(" --to ") {
            ingest = Some(line[at + 6..].trim().to_owned());
        }
        let up = line.contains("stays up until Ctrl-C");
        printed.push(line);
        if up {
            break;
        }
    }
    let endpoint = endpoint.with_context(|| format!("no endpoint: {printed:#?}"))?;
    let ingest = ingest.with_context(|| format!("no ingest queue: {printed:#?}"))?;
    let routerctl = |args: &[&str]| {
        Command::new(routerctl_binary())
            .args(args)
            .env("AWS_ENDPOINT_URL", &endpoint)
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_REGION", "us-east-1")
            .output()
    };
    let verified = routerctl(&[
        "verify",
        "--stack",
        "ir",
        "--cluster",
        "alpha",
        "--cluster",
        "gamma",
    ])?;
    let report = String::from_utf8_lossy(&verified.stdout);
    assert!(verified.status.success(), "{report}");
    assert!(report.contains("\nPASS: "), "{report}");
    let sent = routerctl(&[
        "simulate",
        "--cluster",
        "alpha",
        "--kind",
        "fis",
        "--count",
        "2",
        "--to",
        &ingest,
    ])?;
    let report = String::from_utf8_lossy(&sent.stdout);
    assert!(sent.status.success(), "{report}");
    assert!(
        report.starts_with("Sent 8 of 8 events for cluster alpha"),
        "{report}"
    );
    // Ctrl-C: it stops its emulator and exits 0.
    assert!(kept.stop()?, "demo --sandbox did not exit 0 on Ctrl-C");
    Ok(())
}
