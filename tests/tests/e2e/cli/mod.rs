//! `routerctl simulate`, `verify` and `fis` against the real stacks deployed into moto.
//!
//! The stacks come from [`Sandbox::deploy`]: base.yaml and tenant.yaml through CloudFormation,
//! plus what moto skips (queue policies, the FIS template) set through the service APIs with the
//! templates' documents. Events simulate sends are carried by the real router binary under the
//! local Lambda Runtime API, fed by the local event source mapping, or by the local Invoke API
//! when simulate hands the function its batch directly.

mod experiments;
mod sandbox;
mod simulating;
pub(crate) mod verifying;

use std::{path::PathBuf, process::Output, time::Duration};

use anyhow::Result;
use aws_clients::aws::Aws;
use e2e_tests::{World, karpenter_tags, managed_nodegroup_tags};
use lab::sandbox::Sandbox;
use local_aws::{esm::EventSourceMapping, function::Function, moto::env_for};

/// The real stacks for clusters alpha and beta, three Karpenter nodes of alpha, two of beta, and
/// a managed-node-group node of alpha that simulate must never pick (the router ignores it).
struct Estate {
    world: World,
    sandbox: Sandbox,
    alpha: Vec<String>,
    beta: Vec<String>,
    managed: String,
}

impl Estate {
    async fn deploy() -> Result<Self> {
        let world = World::start().await?;
        let sandbox = Sandbox::deploy(&world.moto, "ir", &["alpha", "beta"]).await?;
        let mut alpha = Vec::new();
        for _ in 0..3 {
            alpha.push(world.launch(&karpenter_tags("alpha")).await?);
        }
        let mut beta = Vec::new();
        for _ in 0..2 {
            beta.push(world.launch(&karpenter_tags("beta")).await?);
        }
        let managed = world.launch(&managed_nodegroup_tags("alpha")).await?;
        alpha.sort();
        beta.sort();
        Ok(Self {
            world,
            sandbox,
            alpha,
            beta,
            managed,
        })
    }

    fn aws(&self) -> &Aws {
        &self.sandbox.aws
    }

    /// The router binary with the deployed function's environment (through the counting proxy).
    async fn start_router(&self) -> Result<Function> {
        let env = self.sandbox.function_environment().await?;
        let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        self.world.start_router(&pairs).await
    }

    /// Takes over moto's event source mapping, which would otherwise consume what simulate sends
    /// (and, without Docker, dead-letter it).
    async fn take_over_mapping(&self) -> Result<EventSourceMapping> {
        EventSourceMapping::take_over(
            &self.aws().lambda,
            &self.aws().sqs,
            self.sandbox.function_name()?,
            Duration::from_secs(30),
        )
        .await
    }

    /// The event ids in a queue, read and deleted as Karpenter does, sorted.
    async fn ids_in(&self, queue: &str) -> Result<Vec<String>> {
        let url = self.sandbox.queue_url(queue).await?;
        let mut ids: Vec<String> = self
            .world
            .drain(&url)
            .await?
            .iter()
            .map(|m| m.json()["id"].as_str().unwrap_or("(no id)").to_owned())
            .collect();
        ids.sort();
        Ok(ids)
    }
}

fn sorted(ids: Vec<&str>) -> Vec<String> {
    let mut ids: Vec<String> = ids.into_iter().map(str::to_owned).collect();
    ids.sort();
    ids
}

/// The routerctl binary of this build: next to the test executable's directory, or $ROUTERCTL_BIN.
pub(crate) fn routerctl_binary() -> PathBuf {
    binary("routerctl", "ROUTERCTL_BIN")
}

/// The lab binary (`make demo`) of this build, or $LAB_BIN.
pub(crate) fn lab_binary() -> PathBuf {
    binary("lab", "LAB_BIN")
}

fn binary(name: &str, variable: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(variable) {
        return path.into();
    }
    let exe = std::env::current_exe().expect("test executable");
    exe.ancestors()
        .skip(1)
        .take(2)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} not built: cargo build --workspace --bins"))
}

/// Runs the binary against the emulator with nothing but the emulator's environment.
async fn routerctl(estate: &Estate, args: &[&str]) -> Result<(Option<i32>, String, String)> {
    let mut command = std::process::Command::new(routerctl_binary());
    command
        .env_clear()
        .envs(env_for(estate.world.moto.endpoint()))
        .args(args);
    let Output {
        status,
        stdout,
        stderr,
    } = tokio::task::spawn_blocking(move || command.output()).await??;
    Ok((
        status.code(),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    ))
}

#[tokio::test]
async fn the_binary_prints_reports_and_exits_by_verdict() -> Result<()> {
    let estate = Estate::deploy().await?;
    estate.sandbox.create_fis_template("alpha").await?;

    let (code, out, _) = routerctl(&estate, &["verify", "--stack", "ir"]).await?;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.starts_with("verify ir in us-east-1\n"), "{out}");
    assert!(out.contains("  PASS  tenant:beta:router-role"), "{out}");
    assert!(out.lines().last().unwrap().starts_with("PASS: "), "{out}");

    let rule = estate.sandbox.resource("StateChangeRule").await?;
    estate
        .aws()
        .events
        .disable_rule()
        .name(&rule)
        .send()
        .await?;
    let (code, out, _) =
        routerctl(&estate, &["verify", "--stack", "ir", "--cluster", "alpha"]).await?;
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("  FAIL  rule:StateChangeRule"), "{out}");
    assert!(
        out.contains(&format!(
            "fix: aws events enable-rule --name {rule} --region us-east-1"
        )),
        "{out}"
    );
    assert!(
        out.ends_with("FAIL: 1 of 28 checks failed: rule:StateChangeRule\n"),
        "{out}"
    );

    let ingest = estate.sandbox.ingest_queue_url().await?;
    let (code, _, err) = routerctl(
        &estate,
        &[
            "simulate",
            "--cluster",
            "nope",
            "--kind",
            "spot",
            "--to",
            &ingest,
        ],
    )
    .await?;
    assert_eq!(code, Some(2));
    assert!(
        err.starts_with("error: no running instances tagged eks:eks-cluster-name=nope"),
        "{err}"
    );

    // FIS: refused without --yes; then started, and failed because nothing reached alpha (the
    // emulator sends no events for an experiment).
    let (code, _, err) =
        routerctl(&estate, &["fis", "--cluster", "alpha", "--stack", "ir"]).await?;
    assert_eq!(code, Some(2));
    assert!(err.contains("pass --yes"), "{err}");
    let (code, _, err) = routerctl(&estate, &["fis", "--cluster", "beta", "--yes"]).await?;
    assert_eq!(code, Some(2));
    assert!(
        err.contains("no FIS experiment template tagged cluster=beta"),
        "{err}"
    );
    let (code, out, err) = routerctl(
        &estate,
        &[
            "fis",
            "--cluster",
            "alpha",
            "--stack",
            "ir",
            "--settle",
            "0s",
            "--yes",
        ],
    )
    .await?;
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(err.contains("starting experiment template"), "{err}");
    assert!(out.contains("alpha (target)"), "{out}");
    // moto's FIS resolves no target and logs nothing: no evidence about the interrupted node.
    assert!(out.contains("problem: FIS named no instance"), "{out}");
    assert!(out.ends_with("FAIL: 1 problem(s)\n"), "{out}");
    Ok(())
}
