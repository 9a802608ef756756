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
