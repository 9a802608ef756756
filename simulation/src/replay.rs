//! Batches played through one execution environment, in order: what the moto bench does with the
//! router binary (tests/tests/e2e/accounts.rs, the 10 × 10 organisation), here with the router's
//! code on the model, so the two can be compared call for call where both can run.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use router_core::{config::Config, handler::Invocation};
use serde_json::{Value, json};

use crate::{aws::World, esm::Pool, ingest::Ingest, organisation::Organisation, quotas::Quotas};

/// The router's AWS calls by action.
pub type Calls = BTreeMap<&'static str, u64>;

/// Plays each pass's batches (each a list of event bodies, one SQS record each) through one
/// environment configured with `vars` (beside the dead-letter queue, which the model provides),
/// on tokio's paused clock: the calls each pass made.
pub fn replay(org: Organisation, passes: &[Vec<Vec<String>>], vars: &[(&str, &str)]) -> Vec<Calls> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let org = Arc::new(org);
        let ingest = Arc::new(Ingest::new(Duration::from_secs(180), 20));
        let world = Arc::new(World::new(
            org.clone(),
            Quotas::defaults(18_750.0),
            ingest,
            1,
        ));
        let dlq = world.dlq_url.clone();
        let config = Config::from_lookup(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
                .or((name == "DEAD_LETTER_QUEUE_URL").then(|| dlq.clone()))
        })
        .expect("the router's configuration");
        let pool = Pool::new(world.clone(), config);
        let router = pool.one();
        let function_arn = format!(
            "arn:aws:lambda:{}:{}:function:interruption-router",
            org.shape.hub_region, org.hub_account
        );
        let mut per_pass = Vec::new();
        let mut before = Calls::new();
        for (b, batch) in passes.iter().enumerate().flat_map(|(p, pass)| {
            pass.iter()
                .enumerate()
                .map(move |(b, batch)| ((p, b), batch))
        }) {
            let records: Vec<Value> = batch
                .iter()
                .enumerate()
                .map(|(i, body)| json!({"messageId": format!("{}-{}-{i}", b.0, b.1), "body": body}))
                .collect();
            let payload =
                serde_json::value::RawValue::from_string(json!({ "Records": records }).to_string())
                    .expect("JSON");
            let deadline_ms = world
                .now_wall()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_millis() as u64
                + 30_000;
            let answered = router
                .invoke(
                    &payload,
                    Invocation {
                        request_id: "replay",
                        function_arn: &function_arn,
                        deadline_ms,
                    },
                )
                .await;
            assert!(answered.response.is_ok(), "{:?}", answered.response);
            if b.1 + 1 == passes[b.0].len() {
                let now = world.counts().by_action;
                let pass = now
                    .iter()
                    .map(|(action, n)| (*action, n - before.get(action).copied().unwrap_or(0)))
                    .filter(|(_, n)| *n > 0)
                    .collect();
                per_pass.push(pass);
                before = now;
            }
        }
        per_pass
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use router_core::event::InstanceId;
    use serde_json::json;

    use super::replay;
    use crate::organisation::{Cluster, Instance, Organisation, envelope};

    const REGION: &str = "us-east-1";

    /// The organisation of `make bench`'s storm (and of the end-to-end test that compares the
    /// emulator's calls with these): 10 member accounts × 10 clusters (the same ten names in
    /// every account), 10 nodes each, a spot warning per node. Cold, batches of 100 (one
    /// account's each); warm, one batch of all 1,000 records. Warm, the router needs one
    /// SendMessageBatch per queue and nothing else; AssumeRole once per account for the whole
    /// run. Decided on the model, so the verdict never waits on an emulator's speed.
    #[test]
    fn ten_accounts_of_ten_clusters_cost_one_send_per_queue_warm_and_one_assume_role_per_account() {
        let accounts: Vec<String> = (1..=10u64)
            .map(|n| format!("{:012}", 100_000_000_000 + n))
            .collect();
        let mut clusters = Vec::new();
        let mut instances = BTreeMap::new();
        let mut nodes: Vec<Vec<InstanceId>> = Vec::new();
        for account in &accounts {
            for c in 0..10 {
                let index = clusters.len();
                clusters.push(Cluster {
                    account: account.clone(),
                    region: REGION.into(),
                    name: format!("c{c}"),
                });
                let own: Vec<InstanceId> = (0..10)
                    .map(|n| {
                        InstanceId::parse(&format!("i-{:017x}", index * 10 + n + 1))
                            .expect("an instance id")
                    })
                    .collect();
                for node in &own {
                    let instance = Instance {
                        account: account.clone(),
                        region: REGION.into(),
                        cluster: Some(index),
                    };
                    instances.insert(node.clone(), instance);
                }
                nodes.push(own);
            }
        }
        let storm = |pass: &str| -> Vec<String> {
            let mut bodies = Vec::new();
            for n in 0..10 {
                for (cluster, own) in clusters.iter().zip(&nodes) {
                    let detail =
                        json!({"instance-id": own[n].as_str(), "instance-action": "terminate"});
                    bodies.push(envelope(
                        &format!("{pass}-{}-{}-{n}", cluster.account, cluster.name),
                        "EC2 Spot Instance Interruption Warning",
                        &cluster.account,
                        REGION,
                        &own[n],
                        detail,
                    ));
                }
            }
            bodies
        };
        // Cold, one account per batch of 100: its first lookup sweeps it.
        let mut cold = storm("cold");
        cold.sort_by_key(|b| {
            serde_json::from_str::<serde_json::Value>(b).unwrap()["account"].to_string()
        });
        let cold: Vec<Vec<String>> = cold.chunks(100).map(<[String]>::to_vec).collect();
        let warm = vec![storm("warm")];
        let org = Organisation::of("123456789012", REGION, clusters.clone(), instances);
        let served = accounts.join(",");
        let calls = replay(
            org,
            &[cold, warm],
            &[
                ("SERVED_ACCOUNTS", &served),
                ("LOOKUP_HEDGE_DELAY_MS", "off"),
            ],
        );
        let [cold, warm] = <[_; 2]>::try_from(calls).expect("two passes");
        assert_eq!(
            warm,
            BTreeMap::from([("SendMessageBatch", 100)]),
            "warm: one send per queue and nothing else (0.1 calls per event)"
        );
        let assumed = cold.get("AssumeRole").copied().unwrap_or_default()
            + warm.get("AssumeRole").copied().unwrap_or_default();
        assert_eq!(assumed, 10, "{cold:?}");
        assert!(
            cold.get("SendMessageBatch").copied().unwrap_or_default() >= 100,
            "{cold:?}"
        );
    }
}
