//! `lab demo --sandbox`: the stacks deployed into the emulator as AWS would have them (the
//! [`Sandbox`] the `verify`, `simulate` and `fis` tests run on: base.yaml and a
//! tenant stack per cluster, completed where moto skips parts), with Karpenter's nodes running,
//! left up for an operator to try `routerctl` against. Nothing routes here: the router is not
//! started, so what `simulate` sends waits in the ingest queue.

use anyhow::Result;
use local_aws::moto::{MotoServer, REGION, karpenter_tags, launch};

use super::sandbox::Sandbox;

/// The base stack's name, as the operating guide's transcripts use it.
pub const STACK: &str = "ir";
const CLUSTERS: [&str; 2] = ["alpha", "gamma"];
const NODES: i32 = 3;

/// Deploys the sandbox, prints how to reach it, and waits for Ctrl-C.
pub async fn run() -> Result<()> {
    let moto = MotoServer::start().await?;
    let sandbox = Sandbox::deploy(&moto, STACK, &CLUSTERS).await?;
    for cluster in CLUSTERS {
        launch(&sandbox.aws.ec2, &karpenter_tags(cluster), NODES).await?;
    }
    let ingest = sandbox.ingest_queue_url().await?;
    println!(
        "Stack {STACK} and tenant stacks for {} in the emulator, {NODES} Karpenter \
         nodes each; the router is not running.",
        CLUSTERS.join(", ")
    );
    println!("Point routerctl and the aws CLI at it:");
    println!(
        "  export AWS_ENDPOINT_URL={} AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION={REGION}",
        moto.endpoint()
    );
    println!("  routerctl verify --stack {STACK} --cluster alpha --cluster gamma");
    println!("  routerctl simulate --cluster alpha --kind fis --count 2 --to {ingest}");
    println!("The emulator stays up until Ctrl-C.");
    tokio::signal::ctrl_c().await?;
    Ok(())
}
