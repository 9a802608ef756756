//! The router's two AWS edges on their own, against moto through the counting proxy: the
//! Resolver (DescribeInstances, GetResources, the cache; [`resolver`]) and the Forwarder
//! (GetQueueUrl, SendMessageBatch; [`forwarder`]). This file builds them as the function does.

use std::sync::Arc;

use e2e_tests::World;
use interruption_router::{
    accounts::{Accounts, Served},
    config::Config,
    event::{InstanceId, Scope},
    forward::{Destination, Forwarder, Message},
    resolve::{InstanceKey, Resolver},
};
use local_aws::moto::{ACCOUNT, REGION, sdk_config_for};

mod forwarder;
mod resolver;

/// The emulator's account and region, as the handler completes an event's scope.
fn home() -> Scope {
    Scope {
        account: Some(Arc::from(ACCOUNT)),
        region: Some(Arc::from(REGION)),
    }
}

fn key(id: &str) -> InstanceKey {
    InstanceKey {
        scope: home(),
        instance: InstanceId::parse(id).unwrap(),
    }
}

/// The function's accounts, reaching the emulator through the proxy with the router's SDK
/// settings (two attempts per call).
async fn accounts(world: &World) -> Arc<Accounts> {
    let sdk = sdk_config_for(&world.proxy.endpoint())
        .await
        .into_builder()
        .retry_config(aws_config::retry::RetryConfig::standard().with_max_attempts(2))
        .build();
    let accounts = Accounts::new(sdk, Served::Own, "interruption-router-spoke".into());
    accounts.learn_home_account(&format!(
        "arn:aws:lambda:{REGION}:{ACCOUNT}:function:interruption-router"
    ));
    Arc::new(accounts)
}

async fn resolver_with(world: &World, vars: &[(&str, &str)]) -> Resolver {
    let config = Config::from_lookup(|k| {
        vars.iter()
            .find(|(name, _)| *name == k)
            .map(|(_, v)| v.to_string())
    })
    .unwrap();
    Resolver::new(
        accounts(world).await,
        config.tags,
        &config.cache,
        config.lookup,
    )
}

async fn resolver(world: &World) -> Resolver {
    resolver_with(world, &[]).await
}

/// Message `n` for `cluster`'s queue, in the emulator's account and region.
fn to(cluster: &str, n: usize) -> Message {
    Message {
        destination: Destination::Cluster {
            scope: home(),
            cluster: Arc::from(cluster),
        },
        body: format!("{{\"n\":{n}}}"),
        attributes: Vec::new(),
    }
}

fn forwarder(accounts: Arc<Accounts>) -> Forwarder {
    let config = Config::from_lookup(|_| None).unwrap();
    Forwarder::new(accounts, config.queue_names, None, None, &config.cache)
}
