//! One hub, many accounts and regions: the router binary on moto with the hub account and two
//! member accounts, in two regions.
//!
//! A cluster is (account, region, name): `prod` exists in the hub, in member A in two regions and
//! in member B, and each has its own queue in its own account and region. The router reaches a
//! member account with the credentials AssumeRole returns for its spoke role (moto isolates
//! accounts by them), so every lookup and send here really happens in the event's account.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use anyhow::{Context, Result};
use aws_sdk_sqs::types::MessageSystemAttributeName;
use e2e_tests::{
    assert_batch_handled, batch_item_failures, health_event,
    organisation::{Organisation, Place, event_in, member_places},
    sqs_event,
};
use interruption_router::event::InstanceId;
use local_aws::{
    esm,
    moto::{ACCOUNT, REGION},
    proxy::{Fault, FaultPlan},
};
use serde_json::{Value, json};
use simulation::organisation::{Cluster, Instance};

const MEMBER_A: &str = "111111111111";
const MEMBER_B: &str = "222222222222";
const UNSERVED: &str = "333333333333";
const OTHER_REGION: &str = "eu-west-1";
const INVOKE_BUDGET: std::time::Duration = std::time::Duration::from_secs(30);

/// The router's configuration for these tests: both members served, the unserved one not.
fn router_config(org: &Organisation) -> Vec<(&'static str, &str)> {
    vec![
        ("DEAD_LETTER_QUEUE_URL", org.dlq.as_str()),
        ("SERVED_ACCOUNTS", "111111111111,222222222222"),
        // As base.yaml sets it, from the ingest queue's maxReceiveCount.
        ("MAX_RECEIVE_COUNT", "20"),
    ]
}

/// The instances an event names.
fn named(event: &Value) -> Vec<String> {
    if let Some(id) = event["detail"]["instance-id"].as_str() {
        return vec![id.to_owned()];
    }
    event["detail"]["affectedEntities"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|e| e["entityValue"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn every_kind_reaches_exactly_its_account_region_and_cluster() -> Result<()> {
    let hub_prod: Place = (ACCOUNT, REGION, "prod");
    let a_prod: Place = (MEMBER_A, REGION, "prod");
    let a_web: Place = (MEMBER_A, REGION, "web");
    let a_eu_prod: Place = (MEMBER_A, OTHER_REGION, "prod");
    let b_prod: Place = (MEMBER_B, REGION, "prod");
    let estate = Organisation::new(&[hub_prod, a_prod, a_web, a_eu_prod, b_prod], 2).await?;
    let router = estate.world.start_router(&router_config(&estate)).await?;

    let node = |place: Place, n: usize| estate.nodes(place)[n].to_owned();
    let ev = |place: Place, fixture: &str, n: usize, id: &str| {
        event_in(place.0, place.1, fixture, &node(place, n), id)
    };
    let mut health = health_event(&[&node(a_prod, 1), &node(a_web, 1)], "health-a");
    health["account"] = json!(MEMBER_A);
    health["region"] = json!(REGION);
    let unserved = event_in(
        UNSERVED,
        REGION,
        "spot-interruption-warning.json",
        "i-0123456789abcdef0",
        "spot-unserved",
    );
    let events = [
        ev(hub_prod, "spot-interruption-warning.json", 0, "spot-hub"),
        ev(a_prod, "spot-interruption-warning.json", 0, "spot-a"),
        ev(a_web, "rebalance-recommendation.json", 0, "rebalance-a-web"),
        ev(a_eu_prod, "state-change-stopping.json", 0, "stopping-a-eu"),
        ev(
            b_prod,
            "capacity-reservation-interruption-warning.json",
            0,
            "odcr-b",
        ),
        ev(b_prod, "spot-interruption-warning.json", 1, "spot-b"),
        health,
        unserved,
    ];
    let bodies: Vec<String> = events.iter().map(Value::to_string).collect();
    assert_batch_handled(&router, &bodies).await;

    let expected: BTreeMap<Place, BTreeSet<&str>> = [
        (hub_prod, BTreeSet::from(["spot-hub"])),
        (a_prod, BTreeSet::from(["spot-a", "health-a"])),
        (a_web, BTreeSet::from(["rebalance-a-web", "health-a"])),
        (a_eu_prod, BTreeSet::from(["stopping-a-eu"])),
        (b_prod, BTreeSet::from(["odcr-b", "spot-b"])),
    ]
    .into();
    let received = estate.drain_all().await?;
    for (place, messages) in &received {
        let ids: BTreeSet<&str> = messages
            .iter()
            .map(|m| m["id"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(ids, expected[place], "queue of {place:?}");
        assert_eq!(ids.len(), messages.len(), "duplicates in {place:?}");
        for m in messages {
            for instance in named(m) {
                assert_eq!(
                    estate.owner.get(&instance),
                    Some(place),
                    "{place:?} received {instance}: {m}"
                );
            }
            assert_eq!(m["account"], place.0, "the event keeps its account");
        }
    }

    // The unserved account's event: dead-lettered with its reason, never looked up.
    let dead = estate.world.drain(&estate.dlq).await?;
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0].json()["id"], "spot-unserved");
    assert_eq!(
        dead[0].attributes.get("reason").map(String::as_str),
        Some("account-not-served")
    );
    // One AssumeRole per member account, however many regions and events.
    let calls = estate.world.proxy.calls();
    assert_eq!(calls.get("AssumeRole"), Some(&2), "{calls:?}");
    Ok(())
}

#[tokio::test]
async fn a_member_account_that_cannot_be_reached_is_retried_then_dead_lettered() -> Result<()> {
    let a_prod: Place = (MEMBER_A, REGION, "prod");
    let b_prod: Place = (MEMBER_B, REGION, "prod");
    let estate = Organisation::new(&[a_prod, b_prod], 1).await?;
    let router = estate.world.start_router(&router_config(&estate)).await?;
    // A real ingest queue, so the records carry real receipt handles and the router can read its
    // redrive policy and shorten visibilities.
    let (ingest, ingest_arn) = estate
        .world
        .ingest_queue(&estate.dlq, std::time::Duration::from_secs(180), 20)
        .await?;
    for (place, id) in [(a_prod, "spot-a"), (b_prod, "spot-b")] {
        let body = event_in(
            place.0,
            place.1,
            "spot-interruption-warning.json",
            estate.nodes(place)[0],
            id,
        );
        estate
            .world
            .sqs
            .send_message()
            .queue_url(&ingest)
            .message_body(body.to_string())
            .send()
            .await?;
    }
    // Member B's spoke role cannot be assumed.
    estate
        .world
        .proxy
        .set_plan(FaultPlan::none().with_window_matching(
            "AssumeRole",
            MEMBER_B,
            std::time::Duration::ZERO..std::time::Duration::from_secs(3600),
            Fault::Unavailable,
        ));
    let received = estate
        .world
        .sqs
        .receive_message()
        .queue_url(&ingest)
        .max_number_of_messages(10)
        .message_system_attribute_names(MessageSystemAttributeName::All)
        .send()
        .await?;
    assert_eq!(received.messages().len(), 2);
    let event = esm::sqs_event(received.messages(), &ingest_arn);
    let b_message = received
        .messages()
        .iter()
        .find(|m| m.body().unwrap_or_default().contains("spot-b"))
        .and_then(|m| m.message_id())
        .context("no spot-b")?
        .to_owned();

    // First receive: A's event is delivered; B's is retried, then handed back with a short
    // visibility.
    let response = router.invoke(event.to_string(), INVOKE_BUDGET).await;
    assert_eq!(batch_item_failures(&response), vec![b_message.clone()]);
    let calls = estate.world.proxy.calls();
    assert!(
        calls.get("AssumeRole").copied().unwrap_or_default() >= 2,
        "AssumeRole was not retried: {calls:?}"
    );
    assert_eq!(
        calls.get("ChangeMessageVisibilityBatch"),
        Some(&1),
        "{calls:?}"
    );

    // On its last receive (20 of 20) it goes to the dead-letter queue with its reason.
    let mut last = event.clone();
    for record in last["Records"].as_array_mut().context("records")? {
        record["attributes"]["ApproximateReceiveCount"] = json!("20");
    }
    last["Records"]
        .as_array_mut()
        .context("records")?
        .retain(|r| r["messageId"] == b_message.as_str());
    let response = router.invoke(last.to_string(), INVOKE_BUDGET).await;
    assert_eq!(batch_item_failures(&response), Vec::<String>::new());
    let dead = estate.world.drain(&estate.dlq).await?;
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0].json()["id"], "spot-b");
    assert_eq!(
        dead[0].attributes.get("reason").map(String::as_str),
        Some("account-unreachable")
    );
    let unreachable: u64 = router
        .emf_documents()
        .iter()
        .filter_map(|d| d["AccountUnreachable"].as_u64())
        .sum();
    assert!(unreachable >= 2, "AccountUnreachable metric: {unreachable}");

    // Never misrouted: A's queue has A's event only, B's queue nothing.
    let queues = estate.drain_all().await?;
    let ids = |p: Place| -> Vec<String> {
        queues[&p]
            .iter()
            .map(|m| m["id"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    assert_eq!(ids(a_prod), ["spot-a"]);
    assert!(ids(b_prod).is_empty());
    Ok(())
}

/// The storm benchmark's organisation, as exact counts: 10 member accounts × 10 clusters
/// (the same ten names in every account), 1,000 spot warnings per storm. Cold, the cache fills from
/// batches of 100, one account's each (what moto answers within the SDK's attempt timeout);
/// warm, one SQS batch of 1,000 records (an event source mapping's BatchSize may
/// reach 10,000 with a batching window; with 100 clusters a batch of 100 would need a send per
/// event). Warm, the router needs one SendMessageBatch per queue per batch and nothing else;
/// AssumeRole is called once per account for the whole run. `make bench` prints the warm row with
/// throughput (its cold storm mixes the accounts in every batch, on an otherwise idle machine).
///
/// The verdict itself is decided on the model, where no emulator's speed can change it
/// (`simulation::replay::tests::ten_accounts_of_ten_clusters_cost_one_send_per_queue_warm_and_one_assume_role_per_account`);
/// what this test adds is that the router binary against moto makes exactly the calls the model
/// makes, batch for batch: the model's conformance.
#[tokio::test]
async fn ten_accounts_of_ten_clusters_cost_at_most_012_calls_per_event_warm() -> Result<()> {
    const NODES: i32 = 10;
    let (accounts, places) = member_places(10, 10);
    let estate = Organisation::new(&places, NODES).await?;
    let served = accounts.join(",");
    // Exact counts need the emulator to answer every call within the router's 3-s attempt
    // timeout. Python's moto answers one call at a time, and the first batch asks it ~300 at once:
    // on a machine busy with other tests it can be slower, and then the router does what it
    // should (falls back, hands records back) but makes other calls. Such a run is not this
    // test's subject: each attempt waits (up to 30 s) for an emulator that answers a
    // sweep-sized call within a second, and one that still times out is played again on a fresh
    // router process, at most five times in all (a clean clone's make test met three in a row).
    const ATTEMPTS: u32 = 5;
    let mut attempt = 0;
    let (rows, passes) = loop {
        attempt += 1;
        let prompt = estate
            .wait_for_a_prompt_emulator(Duration::from_secs(1), Duration::from_secs(30))
            .await?;
        println!("attempt {attempt}: the emulator answers a sweep within 1 s: {prompt}");
        match storm_passes(&estate, &places, &served, NODES as usize).await? {
            Played::Counted(rows, passes) => break (rows, passes),
            Played::EmulatorTooSlow(lines) if attempt < ATTEMPTS => {
                println!(
                    "attempt {attempt}: the emulator was slower than the attempt timeout, again: {lines:#?}"
                );
                estate.drain_all().await?;
            }
            Played::EmulatorTooSlow(lines) => {
                panic!(
                    "the emulator was slower than the attempt timeout in {ATTEMPTS} runs: {lines:#?}"
                )
            }
        }
    };
    let (_, warm, warm_calls) = &rows[1];
    assert!(*warm <= 0.12, "warm: {warm:.3} calls/event: {warm_calls:?}");
    let assumed: u64 = rows
        .iter()
        .map(|(_, _, c)| c.get("AssumeRole").copied().unwrap_or_default())
        .sum();
    assert!(
        assumed <= accounts.len() as u64,
        "{assumed} AssumeRole calls for {} accounts",
        accounts.len()
    );

    // The organisation storm of BENCHMARKS.md runs the same router code on the model of AWS
    // (aws-world, under the simulation's layers): played the same batches of the same organisation, it makes the same calls as here.
    let clusters: Vec<Cluster> = places
        .iter()
        .map(|(account, region, name)| Cluster {
            account: account.to_string(),
            region: region.to_string(),
            name: name.to_string(),
        })
        .collect();
    let instances = estate
        .owner
        .iter()
        .map(|(id, place)| {
            let instance = Instance {
                account: place.0.to_owned(),
                region: place.1.to_owned(),
                cluster: places.iter().position(|p| p == place),
            };
            (InstanceId::parse(id).expect("an instance id"), instance)
        })
        .collect();
    let org = simulation::organisation::Organisation::of(ACCOUNT, REGION, clusters, instances);
    // On a thread of its own: the simulation runs its own runtime, on a paused clock.
    let modelled = std::thread::spawn(move || {
        simulation::replay::replay(
            org,
            &passes,
            &[
                ("SERVED_ACCOUNTS", served.as_str()),
                ("LOOKUP_HEDGE_DELAY_MS", "off"),
            ],
        )
    })
    .join()
    .expect("the simulation");
    for ((pass, _, emulated), modelled) in rows.iter().zip(&modelled) {
        let modelled: BTreeMap<String, u64> =
            modelled.iter().map(|(a, n)| (a.to_string(), *n)).collect();
        let emulated: BTreeMap<String, u64> = emulated
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(a, n)| (a.clone(), *n))
            .collect();
        assert_eq!(
            modelled, emulated,
            "{pass}: the simulation's calls, then the emulator's"
        );
        println!("{pass}: the simulation makes the same calls ({modelled:?})");
    }
    Ok(())
}

/// What one run of [`ten_accounts_of_ten_clusters_cost_at_most_012_calls_per_event_warm`]'s
/// storms gave: per pass its calls (and the batches, for the simulation), or the router's log
/// lines showing the emulator answered later than the attempt timeout.
enum Played {
    Counted(
        Vec<(&'static str, f64, BTreeMap<String, u64>)>,
        Vec<Vec<Vec<String>>>,
    ),
    EmulatorTooSlow(Vec<String>),
}

/// The cold and the warm storm on a fresh router process, every record delivered and every queue
/// holding exactly its own cluster's events of each pass.
async fn storm_passes(
    estate: &Organisation,
    places: &[Place],
    served: &str,
    nodes: usize,
) -> Result<Played> {
    let router = estate
        .world
        .start_router(&[
            ("DEAD_LETTER_QUEUE_URL", estate.dlq.as_str()),
            ("SERVED_ACCOUNTS", served),
            // Whether a lookup is hedged depends on the emulator's latency, which the simulation
            // does not share: without hedges both make exactly the same calls.
            ("LOOKUP_HEDGE_DELAY_MS", "off"),
        ])
        .await?;
    let mut rows = Vec::new();
    let mut passes = Vec::new();
    for pass in ["cold", "warm"] {
        let mut bodies = estate.storm(places, pass);
        if pass == "cold" {
            // One account per batch of 100: its first lookup sweeps it. Ten accounts' sweeps at
            // once (100 instances each) are more than moto answers within the attempt timeout on
            // a busy machine; AWS answers them side by side.
            bodies.sort_by_key(|b| {
                serde_json::from_str::<Value>(b).expect("an event")["account"]
                    .as_str()
                    .map(str::to_owned)
            });
        }
        estate.world.proxy.reset_counts();
        let batch = if pass == "cold" { 100 } else { bodies.len() };
        passes.push(
            bodies
                .chunks(batch)
                .map(<[String]>::to_vec)
                .collect::<Vec<_>>(),
        );
        for chunk in bodies.chunks(batch) {
            let response = router
                .invoke(sqs_event(chunk).to_string(), INVOKE_BUDGET)
                .await;
            let lines = router.stdout_lines();
            let timeouts: Vec<String> = lines
                .iter()
                .filter(|l| l.contains("Timeout: request has timed out"))
                .take(3)
                .cloned()
                .collect();
            if !timeouts.is_empty() {
                return Ok(Played::EmulatorTooSlow(timeouts));
            }
            let failed: Vec<String> = lines
                .into_iter()
                .filter(|l| l.contains("failed"))
                .take(3)
                .collect();
            assert_eq!(
                batch_item_failures(&response),
                Vec::<String>::new(),
                "{failed:#?}"
            );
        }
        let calls = estate.world.proxy.calls();
        let total: u64 = calls.values().sum();
        let per_event = total as f64 / bodies.len() as f64;
        println!(
            "10 accounts x 10 clusters, {} events in batches of {batch}, {pass}: {per_event:.3} AWS calls/event ({calls:?})",
            bodies.len()
        );
        // Every queue holds exactly its own cluster's events of this pass.
        estate.check_storm(pass, nodes).await?;
        rows.push((pass, per_event, calls));
    }
    Ok(Played::Counted(rows, passes))
}

#[tokio::test]
async fn the_hubs_own_cluster_in_another_region_is_written_as_the_spoke_role_its_queue_admits()
-> Result<()> {
    use aws_model::{
        policy::{Decision, Policy, Principal, Request, authorize},
        stacks::{SPOKE_TEMPLATE, TENANT_TEMPLATE},
        template::{Stage, Template},
    };
    use interruption_router::config::DEFAULT_SPOKE_ROLE_NAME;

    let hub_eu: Place = (ACCOUNT, OTHER_REGION, "prod");
    let estate = Organisation::new(&[hub_eu], 1).await?;
    let router = estate.world.start_router(&router_config(&estate)).await?;
    let node = estate.nodes(hub_eu)[0].to_owned();
    let event = event_in(
        ACCOUNT,
        OTHER_REGION,
        "spot-interruption-warning.json",
        &node,
        "spot-hub-eu",
    );
    estate.world.proxy.reset_counts();
    let response = router
        .invoke(sqs_event(&[event.to_string()]).to_string(), INVOKE_BUDGET)
        .await;
    assert_eq!(batch_item_failures(&response), Vec::<String>::new());
    let received = estate.drain_all().await?;
    assert_eq!(received[&hub_eu].len(), 1);

    // Who the router was: it assumed the hub account's own spoke role, and wrote the queue in
    // eu-west-1 with the credentials that returned, not with the function's own.
    let log = estate.world.proxy.log();
    let spoke_role = format!("arn:aws:iam::{ACCOUNT}:role/{DEFAULT_SPOKE_ROLE_NAME}");
    let assumed: Vec<_> = log.iter().filter(|c| c.action == "AssumeRole").collect();
    assert_eq!(assumed.len(), 1, "{log:#?}");
    assert!(
        assumed[0]
            .request
            .contains(&spoke_role.replace(':', "%3A").replace('/', "%2F"))
            || assumed[0].request.contains(&spoke_role),
        "{:?}",
        assumed[0]
    );
    let sends: Vec<_> = log
        .iter()
        .filter(|c| c.action == "SendMessageBatch" && c.region == OTHER_REGION)
        .collect();
    assert!(!sends.is_empty(), "{log:#?}");
    for send in &sends {
        assert_ne!(
            send.access_key, "testing",
            "written with the function's own credentials: {send:?}"
        );
    }

    // What AWS would say: the tenant queue there, deployed as `make deploy-tenant` does (importing
    // the region's exports, which the spoke stack makes: the only stack of the project in that
    // region), admits exactly that role.
    let spoke = Template::parse("spoke.yaml", SPOKE_TEMPLATE)?;
    let spoke_stage = Stage::new("interruption-router-spoke", ACCOUNT, OTHER_REGION)
        .parameter(
            "HubEventBusArn",
            "arn:aws:events:us-east-1:123456789012:event-bus/ir-hub",
        )
        .parameter(
            "RouterRoleArn",
            "arn:aws:iam::123456789012:role/ir-RouterRole-X",
        );
    let spoke_deployment = spoke.deploy(&spoke_stage)?;
    let mut tenant_stage =
        Stage::new("prod-tenant", ACCOUNT, OTHER_REGION).parameter("ClusterName", "prod");
    tenant_stage.exports = spoke_deployment.exports()?;
    let tenant = Template::parse("tenant.yaml", TENANT_TEMPLATE)?;
    let tenant_deployment = tenant.deploy(&tenant_stage)?;
    let policy = Policy::parse(
        "queue policy",
        &tenant_deployment
            .property("InterruptionQueuePolicy", &["PolicyDocument"])?
            .to_string(),
    )
    .map_err(anyhow::Error::msg)?;
    let queue = format!("arn:aws:sqs:{OTHER_REGION}:{ACCOUNT}:karpenter-prod");
    let decide = |principal: &str| {
        let context = [
            ("aws:SecureTransport", "true"),
            ("aws:PrincipalArn", principal),
        ];
        authorize(
            &[],
            std::slice::from_ref(&policy),
            principal,
            ACCOUNT,
            &Request {
                principal: Principal::Attached,
                action: "sqs:SendMessage",
                resource: &queue,
                context: &context,
            },
        )
    };
    assert!(decide(&spoke_role).is_allowed(), "{}", decide(&spoke_role));
    assert!(matches!(
        decide("arn:aws:iam::123456789012:role/ir-RouterRole-X"),
        Decision::Denied { .. }
    ));
    Ok(())
}
