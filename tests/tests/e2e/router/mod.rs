//! The router binary, unmodified, under a Lambda Runtime API, against moto: every kind of event
//! reaches exactly its cluster's queue, in both invocation shapes, and nothing is lost.

use std::collections::BTreeMap;

use anyhow::Result;
use e2e_tests::{
    INVOKE_BUDGET, Received, World, batch_item_failures, ec2_event, fixture, health_event,
    karpenter_tags, managed_nodegroup_tags, sqs_event,
};
use local_aws::{
    function::{Function, router_binary},
    proxy::{Fault, FaultPlan},
    runtime_api::Invocation,
};
use serde_json::{Value, json};

/// Three clusters with queues, one without, and the distractors the router must leave alone.
struct Estate {
    world: World,
    alpha: [String; 2],
    beta: [String; 2],
    gamma: String,
    delta: String,
    managed_nodegroup: String,
    untagged: String,
    unknown: &'static str,
    queues: BTreeMap<&'static str, String>,
}

impl Estate {
    async fn new() -> Result<Self> {
        let world = World::start().await?;
        let mut queues = BTreeMap::new();
        for cluster in ["alpha", "beta", "gamma"] {
            queues.insert(cluster, world.create_tenant_queue(cluster).await?);
        }
        queues.insert("dlq", world.create_queue("router-dlq").await?);
        Ok(Self {
            alpha: [
                world.launch(&karpenter_tags("alpha")).await?,
                world.launch(&karpenter_tags("alpha")).await?,
            ],
            beta: [
                world.launch(&karpenter_tags("beta")).await?,
                world.launch(&karpenter_tags("beta")).await?,
            ],
            gamma: world.launch(&karpenter_tags("gamma")).await?,
            // A Karpenter cluster whose tenant stack was never deployed.
            delta: world.launch(&karpenter_tags("delta")).await?,
            managed_nodegroup: world.launch(&managed_nodegroup_tags("alpha")).await?,
            untagged: world.launch(&[]).await?,
            unknown: "i-0000000000000dead",
            queues,
            world,
        })
    }

    fn router_config(&self) -> Vec<(&'static str, &str)> {
        vec![("DEAD_LETTER_QUEUE_URL", self.queues["dlq"].as_str())]
    }

    /// One event of every sort, with what must become of it.
    fn events(&self) -> Vec<(Value, Expect)> {
        let arn = |id: &str| format!("arn:aws:ec2:us-east-1:123456789012:instance/{id}");
        vec![
            (
                ec2_event("spot-interruption-warning.json", &self.alpha[0], "spot-a0"),
                Expect::Verbatim("alpha"),
            ),
            (
                ec2_event(
                    "rebalance-recommendation.json",
                    &self.beta[0],
                    "rebalance-b0",
                ),
                Expect::Verbatim("beta"),
            ),
            (
                ec2_event("state-change-stopping.json", &self.gamma, "stopping-g"),
                Expect::Verbatim("gamma"),
            ),
            (
                ec2_event(
                    "state-change-terminated.json",
                    &self.alpha[1],
                    "terminated-a1",
                ),
                Expect::Verbatim("alpha"),
            ),
            (
                ec2_event(
                    "capacity-reservation-interruption-warning.json",
                    &self.beta[1],
                    "capacity-b1",
                ),
                Expect::Verbatim("beta"),
            ),
            (
                ec2_event("state-change-pending.json", &self.alpha[0], "pending-a0"),
                Expect::Ignored,
            ),
            (
                health_event(
                    &[
                        &arn(&self.alpha[1]),
                        &self.beta[0],
                        &self.managed_nodegroup,
                        self.unknown,
                    ],
                    "health-two-clusters",
                ),
                Expect::HealthSplit(vec![
                    ("alpha", self.alpha[1].clone()),
                    ("beta", self.beta[0].clone()),
                ]),
            ),
            (
                ec2_event(
                    "spot-interruption-warning.json",
                    &self.managed_nodegroup,
                    "spot-mng",
                ),
                Expect::Ignored,
            ),
            (
                ec2_event(
                    "spot-interruption-warning.json",
                    &self.untagged,
                    "spot-untagged",
                ),
                Expect::Ignored,
            ),
            (
                ec2_event(
                    "spot-interruption-warning.json",
                    self.unknown,
                    "spot-unknown",
                ),
                Expect::Ignored,
            ),
            // delta is not onboarded (no tenant queue yet): nothing lost, nothing to page about.
            (
                ec2_event("spot-interruption-warning.json", &self.delta, "spot-delta"),
                Expect::Ignored,
            ),
            (
                json!({"detail-type": "EC2 Spot Instance Interruption Warning", "source": 5}),
                Expect::DeadLetter("malformed"),
            ),
            (
                fixture("asg-terminate-lifecycle-action.json"),
                Expect::Ignored,
            ),
            (fixture("health-non-ec2-risk.json"), Expect::Ignored),
        ]
    }

    /// Reads every queue and checks it holds exactly what `events` says, once each.
    async fn assert_queues_hold_exactly(&self, events: &[(String, Expect)]) -> Result<()> {
        let mut contents = BTreeMap::new();
        for (key, url) in &self.queues {
            contents.insert(*key, self.world.drain(url).await?);
        }
        let mut expected: BTreeMap<&str, Vec<Matcher<'_>>> = BTreeMap::new();
        for (body, expect) in events {
            match expect {
                Expect::Verbatim(cluster) => expected
                    .entry(cluster)
                    .or_default()
                    .push(Box::new(move |r| r.body == *body)),
                Expect::HealthSplit(parts) => {
                    for (cluster, instance) in parts {
                        let others: Vec<&str> = parts
                            .iter()
                            .filter(|(c, _)| c != cluster)
                            .map(|(_, i)| i.as_str())
                            .collect();
                        expected
                            .entry(cluster)
                            .or_default()
                            .push(Box::new(move |r| {
                                health_copy_is(r, body, instance, &others)
                            }));
                    }
                }
                Expect::DeadLetter(reason) => {
                    expected.entry("dlq").or_default().push(Box::new(move |r| {
                        r.body == *body
                            && r.attributes.get("reason").map(String::as_str) == Some(*reason)
                    }))
                }
                Expect::Ignored => {}
            }
        }
        for (key, received) in &contents {
            let wanted = expected.remove(key).unwrap_or_default();
            assert_eq!(
                received.len(),
                wanted.len(),
                "queue {key} holds {} messages, expected {}: {received:#?}",
                received.len(),
                wanted.len()
            );
            let mut unmatched: Vec<&Received> = received.iter().collect();
            for (n, matches) in wanted.iter().enumerate() {
                let position = unmatched.iter().position(|r| matches(r));
                assert!(
                    position.is_some(),
                    "queue {key}: expected message #{n} missing; it holds {unmatched:#?}"
                );
                unmatched.remove(position.unwrap());
            }
        }
        assert!(
            expected.is_empty(),
            "expected messages for queues that do not exist: {:?}",
            expected.keys()
        );
        Ok(())
    }
}

/// A test a received message must pass.
type Matcher<'a> = Box<dyn Fn(&Received) -> bool + 'a>;

enum Expect {
    /// The original body, byte for byte, in this cluster's queue.
    Verbatim(&'static str),
    /// A copy per (cluster, instance) naming only that instance.
    HealthSplit(Vec<(&'static str, String)>),
    /// In the dead-letter queue with this reason.
    DeadLetter(&'static str),
    /// Nowhere.
    Ignored,
}

fn health_copy_is(received: &Received, original: &str, instance: &str, others: &[&str]) -> bool {
    let copy = received.json();
    let mut original: Value = serde_json::from_str(original).unwrap();
    let entities = copy["detail"]["affectedEntities"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let ids: Vec<&str> = entities
        .iter()
        .filter_map(|e| e["entityValue"].as_str())
        .collect();
    // Apart from the entity list and resources, the copy is the original.
    let mut stripped = copy.clone();
    stripped["detail"]["affectedEntities"] = Value::Null;
    stripped["resources"] = Value::Null;
    original["detail"]["affectedEntities"] = Value::Null;
    original["resources"] = Value::Null;
    ids == [instance]
        && copy["resources"] == json!([instance])
        && stripped == original
        && others.iter().all(|o| !received.body.contains(o))
}

fn total(emf: &Value, metric: &str) -> u64 {
    emf[metric]
        .as_u64()
        .unwrap_or_else(|| panic!("EMF document has no {metric}: {emf}"))
}

#[tokio::test]
async fn every_event_reaches_exactly_its_cluster_from_an_sqs_batch() -> Result<()> {
    let estate = Estate::new().await?;
    let router = estate.world.start_router(&estate.router_config()).await?;
    let events: Vec<(String, Expect)> = estate
        .events()
        .into_iter()
        .map(|(e, x)| (e.to_string(), x))
        .collect();
    let bodies: Vec<String> = events.iter().map(|(b, _)| b.clone()).collect();

    let response = router
        .invoke(sqs_event(&bodies).to_string(), INVOKE_BUDGET)
        .await;
    assert_eq!(
        batch_item_failures(&response),
        Vec::<String>::new(),
        "{:?}",
        router.stdout_lines()
    );
    estate.assert_queues_hold_exactly(&events).await?;

    // All misses of the batch went to EC2 in one call; one SendMessageBatch per queue per round.
    let calls = estate.world.proxy.calls();
    assert_eq!(calls.get("DescribeInstances"), Some(&1), "{calls:?}");
    // alpha, beta, gamma, then the DLQ once for the malformed record.
    assert_eq!(calls.get("SendMessageBatch"), Some(&4), "{calls:?}");
    let emf = router
        .emf_documents()
        .pop()
        .expect("an EMF document per invocation");
    assert_eq!(total(&emf, "Received"), 14);
    assert_eq!(total(&emf, "Forwarded.alpha"), 3);
    assert_eq!(total(&emf, "Forwarded.beta"), 3);
    assert_eq!(total(&emf, "Forwarded.gamma"), 1);
    assert_eq!(total(&emf, "Ignored"), 7);
    assert_eq!(total(&emf, "Ignored.unknown-instance"), 1);
    assert_eq!(total(&emf, "Ignored.unmanaged-instance"), 2);
    assert_eq!(total(&emf, "Ignored.no-tenant-queue"), 1);
    assert_eq!(total(&emf, "NoTenantQueue.delta"), 1);
    assert_eq!(total(&emf, "DeadLettered"), 1);
    assert_eq!(total(&emf, "DeadLettered.malformed"), 1);
    assert_eq!(total(&emf, "Failed"), 0);
    assert_eq!(total(&emf, "ColdStart"), 1);

    // The same batch again: everything is cached, so EC2 and GetQueueUrl are not asked again.
    estate.world.proxy.reset_counts();
    let response = router
        .invoke(sqs_event(&bodies).to_string(), INVOKE_BUDGET)
        .await;
    assert_eq!(batch_item_failures(&response), Vec::<String>::new());
    estate.assert_queues_hold_exactly(&events).await?;
    let calls = estate.world.proxy.calls();
    assert_eq!(calls.get("DescribeInstances"), None, "{calls:?}");
    assert_eq!(calls.get("GetQueueUrl"), None, "{calls:?}");
    let emf = router.emf_documents().pop().unwrap();
    assert_eq!(total(&emf, "ColdStart"), 0);
    assert_eq!(total(&emf, "CacheMisses"), 0);

    // The structured logs name the event, kind, instance and cluster of each delivery.
    let logs = router.log_records();
    let delivery = logs
        .iter()
        .find(|l| l["fields"]["event_id"] == "stopping-g" && l["fields"]["outcome"] == "forwarded")
        .unwrap_or_else(|| panic!("no log of the delivery: {logs:#?}"));
    assert_eq!(delivery["fields"]["cluster"], "gamma");
    assert_eq!(delivery["fields"]["kind"], "state-change");
    assert_eq!(delivery["fields"]["instances"], estate.gamma.as_str());
    Ok(())
}

#[tokio::test]
async fn every_event_reaches_exactly_its_cluster_from_direct_invocations() -> Result<()> {
    let estate = Estate::new().await?;
    let router = estate.world.start_router(&estate.router_config()).await?;
    let events: Vec<(String, Expect)> = estate
        .events()
        .into_iter()
        .map(|(e, x)| (e.to_string(), x))
        .collect();
    for (body, expect) in &events {
        let outcome = router
            .invoke(body.clone(), INVOKE_BUDGET)
            .await
            .json()
            .unwrap_or_default();
        let wanted = match expect {
            Expect::Verbatim(_) | Expect::HealthSplit(_) => "forwarded",
            Expect::DeadLetter(_) => "dead-lettered",
            Expect::Ignored => "ignored",
        };
        assert_eq!(outcome["outcome"], wanted, "{body}");
    }
    estate.assert_queues_hold_exactly(&events).await?;
    assert_eq!(
        router.emf_documents().len(),
        events.len(),
        "one EMF document per invocation"
    );
    Ok(())
}

#[tokio::test]
async fn without_a_dead_letter_queue_permanent_failures_are_handed_back() -> Result<()> {
    let estate = Estate::new().await?;
    let router = estate.world.start_router(&[]).await?;
    // gamma had a queue (the router used it), and it is gone: its events are lost unless kept.
    let first = ec2_event("state-change-stopping.json", &estate.gamma, "before").to_string();
    let response = router
        .invoke(sqs_event(&[first]).to_string(), INVOKE_BUDGET)
        .await;
    assert_eq!(batch_item_failures(&response), Vec::<String>::new());
    estate
        .world
        .sqs
        .delete_queue()
        .queue_url(&estate.queues["gamma"])
        .send()
        .await?;
    let bodies = vec![
        ec2_event("spot-interruption-warning.json", &estate.alpha[0], "ok").to_string(),
        ec2_event("spot-interruption-warning.json", &estate.gamma, "no-queue").to_string(),
        "{\"not\": \"an event\"}".to_owned(),
        ec2_event("spot-interruption-warning.json", &estate.beta[0], "ok-too").to_string(),
    ];
    let response = router
        .invoke(sqs_event(&bodies).to_string(), INVOKE_BUDGET)
        .await;
    assert_eq!(batch_item_failures(&response), ["msg-1", "msg-2"]);
    assert_eq!(
        estate.world.drain(&estate.queues["alpha"]).await?.len(),
        1,
        "a neighbour's failure fails nobody else"
    );
    assert_eq!(estate.world.drain(&estate.queues["beta"]).await?.len(), 1);
    assert_eq!(estate.world.depth(&estate.queues["dlq"]).await?, 0);

    // Direct: the invocation fails, so Lambda's async retries and on-failure destination keep it.
    match router.invoke(bodies[1].clone(), INVOKE_BUDGET).await {
        Invocation::Error {
            error_type,
            message,
        } => {
            assert_eq!(error_type, "InterruptionRouter.NotRouted");
            assert!(message.contains("karpenter-gamma"), "{message}");
        }
        other => panic!("expected an invocation error, got {other:?}"),
    }
    Ok(())
}

#[tokio::test]
async fn entries_sqs_fails_inside_a_200_answer_are_retried_or_handed_back_never_counted_sent()
-> Result<()> {
    let estate = Estate::new().await?;
    let router = estate.world.start_router(&estate.router_config()).await?;
    // 30 spot warnings for alpha: three SendMessageBatch calls of ten.
    let bodies: Vec<String> = (0..30)
        .map(|i| {
            ec2_event(
                "spot-interruption-warning.json",
                &estate.alpha[i % 2],
                &format!("spot-{i}"),
            )
            .to_string()
        })
        .collect();
    // Every SendMessageBatch answer (retries included) reports at least one entry failed.
    estate.world.proxy.set_plan(FaultPlan::rate(
        1.0,
        &["SendMessageBatch"],
        &[Fault::PartialBatch],
        42,
    ));
    let response = router
        .invoke(sqs_event(&bodies).to_string(), INVOKE_BUDGET)
        .await;
    let failed = batch_item_failures(&response);
    assert!(
        !failed.is_empty(),
        "every batch lost an entry on every attempt"
    );

    let delivered: Vec<Value> = estate
        .world
        .drain(&estate.queues["alpha"])
        .await?
        .iter()
        .map(Received::json)
        .collect();
    let delivered_ids: Vec<&str> = delivered
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    for (i, _) in bodies.iter().enumerate() {
        let id = format!("spot-{i}");
        let handed_back = failed.contains(&format!("msg-{i}"));
        let present = delivered_ids.iter().filter(|d| **d == id).count();
        // Withheld entries never reached SQS: a failed record is absent, a handled one present once.
        assert_eq!(
            present,
            usize::from(!handed_back),
            "{id}: handed back {handed_back}, delivered {present}x"
        );
    }
    // Retries happened: more calls than the three a clean run needs.
    assert!(estate.world.proxy.calls()["SendMessageBatch"] > 3);

    // Redelivering the handed-back records (as the event source mapping does) completes the set.
    estate.world.proxy.set_plan(FaultPlan::none());
    let retry: Vec<String> = failed
        .iter()
        .map(|m| bodies[m.trim_start_matches("msg-").parse::<usize>().unwrap()].clone())
        .collect();
    assert_eq!(
        batch_item_failures(
            &router
                .invoke(sqs_event(&retry).to_string(), INVOKE_BUDGET)
                .await
        ),
        Vec::<String>::new()
    );
    assert_eq!(
        estate.world.drain(&estate.queues["alpha"]).await?.len(),
        failed.len()
    );
    Ok(())
}

#[tokio::test]
async fn a_close_deadline_hands_back_undone_records_instead_of_timing_out() -> Result<()> {
    let estate = Estate::new().await?;
    let router = estate.world.start_router(&estate.router_config()).await?;
    let bodies = vec![
        ec2_event("spot-interruption-warning.json", &estate.alpha[0], "slow-1").to_string(),
        ec2_event("spot-interruption-warning.json", &estate.beta[0], "slow-2").to_string(),
        fixture("asg-terminate-lifecycle-action.json").to_string(),
    ];
    // SQS answers only after 20 s; the invocation has 2 s.
    estate.world.proxy.set_plan(FaultPlan::rate(
        1.0,
        &["SendMessageBatch"],
        &[Fault::Slow(std::time::Duration::from_secs(20))],
        7,
    ));
    let response = router
        .invoke(
            sqs_event(&bodies).to_string(),
            std::time::Duration::from_secs(2),
        )
        .await;
    assert_eq!(
        batch_item_failures(&response),
        ["msg-0", "msg-1"],
        "undone records are handed back, the ignored one is done"
    );
    let logs = router.log_records();
    assert!(
        logs.iter().any(|l| l["fields"]["outcome"] == "failed"
            && l["fields"]["error"]
                .as_str()
                .is_some_and(|e| e.contains("deadline"))),
        "the failure names the deadline: {logs:#?}"
    );
    Ok(())
}

/// Starts the router with `env`, which it must refuse: it exits, having reported a configuration
/// error to `/init/error`; the function and that error's message.
async fn refused_start(env: &[(String, String)]) -> Result<(Function, String)> {
    let mut function = Function::start(&router_binary()?, env).await?;
    let status = function
        .wait_exit(std::time::Duration::from_secs(30))
        .await
        .expect("the process exits");
    assert!(!status.success());
    let reported: Value = serde_json::from_str(
        &function
            .api()
            .init_error()
            .expect("reported to /init/error"),
    )?;
    assert_eq!(reported["errorType"], "Runtime.ConfigError");
    let message = reported["errorMessage"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    Ok((function, message))
}

#[tokio::test]
async fn a_bad_configuration_stops_start_up_naming_the_variable_and_the_fix() -> Result<()> {
    let world = World::start().await?;
    let env = world.router_env(&[("QUEUE_NAME_TEMPLATE", "karpenter-queue")]);
    let (function, message) = refused_start(&env).await?;
    assert!(
        message.contains("QUEUE_NAME_TEMPLATE=\"karpenter-queue\""),
        "{message}"
    );
    assert!(
        message.contains("{cluster}") && message.contains("Fix:"),
        "{message}"
    );
    assert!(
        function.api().first_poll().is_none(),
        "it never asked for work"
    );
    Ok(())
}

#[tokio::test]
async fn unsupported_payloads_fail_the_invocation_with_a_clear_error() -> Result<()> {
    let world = World::start().await?;
    let router = world.start_router(&[]).await?;
    let kinesis =
        json!({"Records": [{"eventSource": "aws:kinesis", "eventID": "x", "kinesis": {}}]});
    match router.invoke(kinesis.to_string(), INVOKE_BUDGET).await {
        Invocation::Error {
            error_type,
            message,
        } => {
            assert_eq!(error_type, "InterruptionRouter.UnsupportedPayload");
            assert!(message.contains("aws:kinesis"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    // The process survives to serve the next invocation.
    let ok = router
        .invoke(
            fixture("asg-terminate-lifecycle-action.json").to_string(),
            INVOKE_BUDGET,
        )
        .await;
    assert_eq!(ok.json().unwrap()["outcome"], "ignored");
    Ok(())
}

#[tokio::test]
async fn duplicates_reach_their_own_cluster_again_and_never_another() -> Result<()> {
    let estate = Estate::new().await?;
    let router = estate.world.start_router(&estate.router_config()).await?;
    let spot = ec2_event(
        "spot-interruption-warning.json",
        &estate.alpha[0],
        "spot-twice",
    )
    .to_string();
    // AWS Health sends backup copies (`backupEvent: "true"`, same communication) for resilience;
    // the router forwards them too, since the primary may be the copy that was lost.
    let mut health = health_event(
        &[&estate.alpha[1], &estate.beta[0], &estate.alpha[1]],
        "retirement",
    );
    let primary = health.to_string();
    health["detail"]["backupEvent"] = json!("true");
    let backup = health.to_string();

    // The same event twice in one batch, and the Health pair; then everything once more.
    let batch = vec![spot.clone(), spot.clone(), primary.clone(), backup.clone()];
    for _ in 0..2 {
        let response = router
            .invoke(sqs_event(&batch).to_string(), INVOKE_BUDGET)
            .await;
        assert_eq!(batch_item_failures(&response), Vec::<String>::new());
    }

    let alpha = estate.world.drain(&estate.queues["alpha"]).await?;
    let beta = estate.world.drain(&estate.queues["beta"]).await?;
    let spots = alpha.iter().filter(|m| m.body == spot).count();
    assert_eq!(spots, 4, "every copy of the spot warning reached alpha");
    for (queue, mine, theirs) in [
        (&alpha, &estate.alpha[1], &estate.beta[0]),
        (&beta, &estate.beta[0], &estate.alpha[1]),
    ] {
        let copies: Vec<Value> = queue
            .iter()
            .map(Received::json)
            .filter(|e| e["source"] == "aws.health")
            .collect();
        assert_eq!(copies.len(), 4, "primary and backup, twice");
        for copy in &copies {
            let ids: Vec<&str> = copy["detail"]["affectedEntities"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["entityValue"].as_str().unwrap())
                .collect();
            assert_eq!(
                ids,
                [mine.as_str()],
                "the repeated entity is listed once, and only this cluster's"
            );
            assert!(!copy.to_string().contains(theirs.as_str()));
        }
    }
    assert_eq!(
        beta.len(),
        4,
        "beta got its Health copies and nothing of alpha's"
    );
    assert_eq!(estate.world.depth(&estate.queues["gamma"]).await?, 0);
    assert_eq!(estate.world.depth(&estate.queues["dlq"]).await?, 0);
    Ok(())
}

/// `event` (from [`sqs_event`]) with record `i` first received at `first_receive_ms[i]`.
fn first_received(mut event: Value, first_receive_ms: &[u128]) -> Value {
    for (record, at) in event["Records"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .zip(first_receive_ms)
    {
        record["attributes"]["ApproximateFirstReceiveTimestamp"] = json!(at.to_string());
    }
    event
}

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

#[tokio::test]
async fn access_denied_is_dead_lettered_with_its_cause_once_its_grace_is_over() -> Result<()> {
    let estate = Estate::new().await?;
    let router = estate.world.start_router(&estate.router_config()).await?;
    // beta's queue refuses the router (its queue policy admits another principal): SQS answers
    // AccessDenied to every SendMessageBatch there, as it would in AWS. (Matched on the queue
    // URL's end, not the name alone: the dead letter's detail names the queue too.)
    estate
        .world
        .proxy
        .set_plan(FaultPlan::none().with_window_matching(
            "SendMessageBatch",
            "/karpenter-beta\"",
            std::time::Duration::ZERO..std::time::Duration::from_secs(3600),
            Fault::Denied,
        ));
    let bodies = vec![
        ec2_event("spot-interruption-warning.json", &estate.alpha[0], "ok").to_string(),
        ec2_event(
            "spot-interruption-warning.json",
            &estate.beta[0],
            "denied-long",
        )
        .to_string(),
        ec2_event(
            "spot-interruption-warning.json",
            &estate.beta[1],
            "denied-new",
        )
        .to_string(),
    ];
    // Record 1 was first received ten minutes ago (past the grace), record 2 just now.
    let ten_minutes_ago = now_ms() - 600_000;
    let event = first_received(sqs_event(&bodies), &[now_ms(), ten_minutes_ago, now_ms()]);
    let response = router.invoke(event.to_string(), INVOKE_BUDGET).await;

    // The new one is retried (IAM and queue policies take time to propagate after a deploy);
    // the old one is not retried for minutes as a brownout would be: it is dead-lettered now.
    assert_eq!(
        batch_item_failures(&response),
        ["msg-2"],
        "{}",
        router.printed_lines().join("\n")
    );
    assert_eq!(estate.world.drain(&estate.queues["alpha"]).await?.len(), 1);
    assert_eq!(estate.world.depth(&estate.queues["beta"]).await?, 0);
    let dead = estate.world.drain(&estate.queues["dlq"]).await?;
    assert_eq!(dead.len(), 1, "{dead:#?}");
    assert_eq!(dead[0].body, bodies[1]);
    assert_eq!(dead[0].attributes["reason"], "access-denied");
    let detail = &dead[0].attributes["detail"];
    for names in [
        "karpenter-beta",
        "the router's execution role",
        "AccessDenied",
        "Fix:",
    ] {
        assert!(
            detail.contains(names),
            "the detail names {names:?}: {detail}"
        );
    }
    let emf = router.emf_documents().pop().unwrap();
    assert_eq!(total(&emf, "AccessDenied"), 1);
    assert_eq!(total(&emf, "DeadLettered.access-denied"), 1);
    assert_eq!(total(&emf, "Failed"), 1);
    let logs = router.log_records();
    assert!(
        logs.iter()
            .any(|l| l["level"] == "ERROR" && l["fields"]["reason"] == "access-denied"),
        "an ERROR line says what to fix: {logs:#?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_hanging_redrive_policy_read_costs_one_bounded_wait_per_batch() -> Result<()> {
    let estate = Estate::new().await?;
    // A fresh router: it has never read the ingest queue's redrive policy.
    let router = estate.world.start_router(&estate.router_config()).await?;
    // beta's queue is down, and GetQueueAttributes hangs for a minute (an SQS slowdown).
    estate.world.proxy.set_plan(
        FaultPlan::rate(
            1.0,
            &["GetQueueAttributes"],
            &[Fault::Slow(std::time::Duration::from_secs(60))],
            3,
        )
        .with_window_matching(
            "SendMessageBatch",
            "karpenter-beta",
            std::time::Duration::ZERO..std::time::Duration::from_secs(3600),
            Fault::Unavailable,
        ),
    );
    let mut bodies =
        vec![ec2_event("spot-interruption-warning.json", &estate.alpha[0], "ok").to_string()];
    for i in 0..4 {
        let node = &estate.beta[i % 2];
        bodies.push(
            ec2_event("spot-interruption-warning.json", node, &format!("down-{i}")).to_string(),
        );
    }
    // Twelve seconds to the deadline: four reads one after another, each waiting for the SDK's
    // operation timeout, would not fit.
    let budget = std::time::Duration::from_secs(12);
    for round in 0..2 {
        let response = router.invoke(sqs_event(&bodies).to_string(), budget).await;
        assert!(
            matches!(response, Invocation::Response(_)),
            "round {round}: the invocation must answer before its deadline: {response:?}"
        );
        assert_eq!(
            batch_item_failures(&response),
            ["msg-1", "msg-2", "msg-3", "msg-4"],
            "round {round}: only beta's records are handed back"
        );
    }
    assert_eq!(
        estate.world.drain(&estate.queues["alpha"]).await?.len(),
        2,
        "the forwarded record is acknowledged, not handed back with the batch"
    );
    let calls = estate.world.proxy.calls();
    assert_eq!(
        calls.get("GetQueueAttributes"),
        Some(&1),
        "one read for the first batch, and its failure remembered for the second: {calls:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_router_that_does_not_know_its_own_account_routes_nothing() -> Result<()> {
    let estate = Estate::new().await?;
    let router = estate.world.start_router(&estate.router_config()).await?;
    // An invoked function ARN without an account: the router cannot tell its own account from
    // any other, so it must not use its own credentials on a guess.
    router
        .api()
        .set_function_arn("arn:aws:lambda:us-east-1::function:interruption-router");
    let bodies = vec![
        ec2_event("spot-interruption-warning.json", &estate.alpha[0], "home?").to_string(),
        {
            let mut foreign =
                ec2_event("spot-interruption-warning.json", &estate.beta[0], "member?");
            foreign["account"] = json!("222222222222");
            foreign.to_string()
        },
    ];
    let response = router
        .invoke(sqs_event(&bodies).to_string(), INVOKE_BUDGET)
        .await;
    assert_eq!(batch_item_failures(&response), ["msg-0", "msg-1"]);
    for queue in ["alpha", "beta", "dlq"] {
        assert_eq!(
            estate.world.depth(&estate.queues[queue]).await?,
            0,
            "{queue}"
        );
    }
    let calls = estate.world.proxy.calls();
    for action in [
        "DescribeInstances",
        "GetResources",
        "SendMessageBatch",
        "AssumeRole",
    ] {
        assert_eq!(calls.get(action), None, "{action}: {calls:?}");
    }
    Ok(())
}

#[tokio::test]
async fn a_cluster_onboarded_while_events_flow_gets_them_seconds_after_its_queue_exists()
-> Result<()> {
    use interruption_router::forward::MISSING_QUEUE_RECHECK;
    use std::time::{Duration, Instant};

    let estate = Estate::new().await?;
    let router = estate.world.start_router(&estate.router_config()).await?;
    let node = estate.world.launch(&karpenter_tags("epsilon")).await?;
    // One spot warning for epsilon every 250 ms, each in its own batch, as a steady trickle.
    let mut sent: Vec<(String, Instant)> = Vec::new();
    let mut send = async |n: usize| -> Result<()> {
        let id = format!("spot-{n}");
        let body = ec2_event("spot-interruption-warning.json", &node, &id).to_string();
        let at = Instant::now();
        let response = router
            .invoke(sqs_event(&[body]).to_string(), INVOKE_BUDGET)
            .await;
        assert_eq!(batch_item_failures(&response), Vec::<String>::new(), "{id}");
        sent.push((id, at));
        tokio::time::sleep(Duration::from_millis(250)).await;
        Ok(())
    };
    for n in 0..8 {
        send(n).await?;
    }
    // The tenant stack arrives while events flow.
    let queue = estate.world.create_tenant_queue("epsilon").await?;
    let created = Instant::now();
    for n in 8..40 {
        send(n).await?;
    }

    let delivered: Vec<String> = estate
        .world
        .drain(&queue)
        .await?
        .iter()
        .map(|m| m.json()["id"].as_str().unwrap_or_default().to_owned())
        .collect();
    // Every event sent once "missing" can no longer be remembered (it was last learned before
    // the queue existed) reached the new queue; every other one was counted as epsilon not being
    // onboarded, and none was dead-lettered: that pages nobody.
    let settled = created + MISSING_QUEUE_RECHECK;
    for (id, at) in &sent {
        if *at >= settled {
            assert!(
                delivered.contains(id),
                "{id} sent after {settled:?} is missing"
            );
        }
    }
    let undelivered = sent
        .iter()
        .filter(|(id, _)| !delivered.contains(id))
        .count();
    let not_onboarded: u64 = router
        .emf_documents()
        .iter()
        .filter_map(|d| d["NoTenantQueue.epsilon"].as_u64())
        .sum();
    assert_eq!(not_onboarded as usize, undelivered);
    assert!(
        undelivered >= 8,
        "the 8 events sent before the queue existed"
    );
    assert!(sent.iter().filter(|(_, at)| *at >= settled).count() >= 20);
    assert_eq!(estate.world.depth(&estate.queues["dlq"]).await?, 0);
    let early = router.emf_documents().first().cloned().unwrap();
    assert_eq!(total(&early, "NoTenantQueue.epsilon"), 1);
    assert_eq!(total(&early, "Ignored.no-tenant-queue"), 1);

    // Once it has one, losing it pages: the next event is dead-lettered queue-missing.
    estate
        .world
        .sqs
        .delete_queue()
        .queue_url(&queue)
        .send()
        .await?;
    let body = ec2_event("spot-interruption-warning.json", &node, "after-loss").to_string();
    let response = router
        .invoke(sqs_event(&[body]).to_string(), INVOKE_BUDGET)
        .await;
    assert_eq!(batch_item_failures(&response), Vec::<String>::new());
    let dead = estate.world.drain(&estate.queues["dlq"]).await?;
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].attributes["reason"], "queue-missing");
    Ok(())
}

/// The `<prefix>.<name>` metrics of an EMF document, by name.
fn per_name(emf: &Value, prefix: &str) -> BTreeMap<String, u64> {
    emf.as_object()
        .unwrap()
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix(prefix)?.to_owned(), v.as_u64()?)))
        .collect()
}

/// How to compare before switching clusters over (shadow mode is gone: it sent nothing, not
/// even to clusters already reading the router's queue): in forward mode a cluster without a
/// tenant queue, or whose queue name another tool's queue holds (EKS Blueprints names its own
/// `karpenter-<cluster>`), is counted per cluster (`NoTenantQueue.<cluster>`) and nothing is
/// written there; the others are forwarded. A function still set for shadow mode does not start.
#[tokio::test]
async fn clusters_not_onboarded_are_counted_per_cluster_and_shadow_mode_does_not_start()
-> Result<()> {
    let estate = Estate::new().await?;
    // delta's name, held by a queue the tenant stack did not make.
    let foreign = estate.world.create_queue("karpenter-delta").await?;
    let events: Vec<String> = estate
        .events()
        .into_iter()
        .map(|(e, _)| e.to_string())
        .collect();
    let router = estate.world.start_router(&estate.router_config()).await?;
    let response = router
        .invoke(sqs_event(&events).to_string(), INVOKE_BUDGET)
        .await;
    assert_eq!(batch_item_failures(&response), Vec::<String>::new());
    let emf = router.emf_documents().pop().unwrap();
    assert_eq!(
        per_name(&emf, "NoTenantQueue."),
        [("delta".to_owned(), 1)].into()
    );
    assert_eq!(total(&emf, "Ignored.no-tenant-queue"), 1, "{emf}");
    assert_eq!(
        estate.world.depth(&foreign).await?,
        0,
        "the router wrote another tool's queue"
    );
    let forwarded = per_name(&emf, "Forwarded.");
    assert_eq!(forwarded["alpha"], 3, "{emf}");
    let lines = router.log_records();
    assert!(
        lines.iter().any(|l| l["fields"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("not a tenant queue"))
            && l["fields"]["queue"] == "karpenter-delta"),
        "{lines:#?}"
    );
    router.stop().await;

    let mut shadow = estate.router_config();
    shadow.push(("ROUTING_MODE", "shadow"));
    let env = estate.world.router_env(&shadow);
    let (_, message) = refused_start(&env).await?;
    assert!(message.contains("ROUTING_MODE"), "{message}");
    assert!(message.contains("NoTenantQueue.<cluster>"), "{message}");
    Ok(())
}
