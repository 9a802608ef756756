//! The router's AWS edges against moto through the counting proxy: the seam's SDK
//! implementation ([`SdkAws`]) with the Resolver (DescribeInstances, GetResources, the cache;
//! [`resolver`]) and the Forwarder (GetQueueUrl, ListQueueTags, GetParameter, SendMessageBatch;
//! [`forwarder`]) on top, built as the function builds them: one attempt per call. And the model
//! of AWS against the emulator: the router's seam ([`model`]) and a standard queue's semantics
//! ([`queues`]).

use std::sync::Arc;

use e2e_tests::World;
use interruption_router::{
    accounts::{Accounts, Place, Scope, Sender, Served},
    aws::sdk::SdkAws,
    config::Config,
    event::InstanceId,
    forward::{Destination, Forwarder, Message},
    resolve::{InstanceKey, Resolver},
};
use local_aws::moto::{ACCOUNT, REGION, sdk_config_for};

mod forwarder;
mod model;
mod queues;
mod resolver;

/// The emulator's account and region, where the router is its own role.
fn home() -> Place {
    Place {
        scope: Scope::new(ACCOUNT, REGION),
        sender: Sender::Home,
    }
}

fn key(id: &str) -> InstanceKey {
    InstanceKey {
        place: home(),
        instance: InstanceId::parse(id).unwrap(),
    }
}

/// The seam on the SDK, reaching the emulator through the proxy with the router's retry setting
/// (one attempt per call). Without the attempt timeout: moto's first GetResources call imports
/// its tagging backend and can take seconds on a loaded machine, which these tests of answers,
/// not of timing, should not see as a failure.
async fn aws(world: &World) -> Arc<SdkAws> {
    let sdk = sdk_config_for(&world.proxy.endpoint())
        .await
        .into_builder()
        .retry_config(aws_config::retry::RetryConfig::disabled())
        .build();
    Arc::new(SdkAws::new(sdk))
}

fn accounts(aws: &Arc<SdkAws>) -> Arc<Accounts<SdkAws>> {
    Arc::new(Accounts::new(
        aws.clone(),
        Served::Own,
        "interruption-router-spoke".into(),
    ))
}

fn config(vars: &[(&str, &str)]) -> Config {
    Config::from_lookup(|k| {
        vars.iter()
            .find(|(name, _)| *name == k)
            .map(|(_, v)| v.to_string())
    })
    .unwrap()
}

/// A resolver whose lookups are the subject: without sweeps (an account's first miss would also
/// list its nodes, answering later misses; `resolver_sweeping` has them), configured by `vars`.
async fn resolver_with(world: &World, vars: &[(&str, &str)]) -> Resolver<SdkAws> {
    let vars: Vec<(&str, &str)> = vars
        .iter()
        .copied()
        .chain([("SWEEP_INTERVAL_SECONDS", "0")])
        .collect();
    resolver_sweeping(world, &vars).await
}

/// A resolver configured by `vars` alone (sweeps on unless they say otherwise).
async fn resolver_sweeping(world: &World, vars: &[(&str, &str)]) -> Resolver<SdkAws> {
    let config = config(vars);
    let aws = aws(world).await;
    Resolver::new(
        aws.clone(),
        accounts(&aws),
        config.tags,
        &config.cache,
        config.lookup,
    )
}

async fn resolver(world: &World) -> Resolver<SdkAws> {
    resolver_with(world, &[]).await
}

/// Message `n` for `cluster`'s queue, in the emulator's account and region.
fn to(cluster: &str, n: usize) -> Message {
    Message {
        destination: Destination::Cluster {
            place: home(),
            cluster: Arc::from(cluster),
        },
        body: format!("{{\"n\":{n}}}"),
        attributes: Vec::new(),
        kind: None,
    }
}

async fn forwarder_with(world: &World, router_role: Option<&str>) -> Forwarder<SdkAws> {
    let config = config(&[]);
    let aws = aws(world).await;
    Forwarder::new(
        aws.clone(),
        accounts(&aws),
        config.queue_names,
        None,
        router_role.map(str::to_owned),
        &config.cache,
    )
}

async fn forwarder(world: &World) -> Forwarder<SdkAws> {
    forwarder_with(world, None).await
}
