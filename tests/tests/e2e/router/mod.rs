//! The router binary, unmodified, under a Lambda Runtime API, against moto: every kind of event
//! reaches exactly its cluster's queue, in both invocation shapes, and nothing is lost.
//!
//! [`routing`] shows the routes, [`failures`] what happens when forwarding fails, [`refusals`]
//! what the router will not do, [`onboarding`] clusters joining while events flow. This file holds
//! the [`Estate`] they all start from and the matchers their expectations are written in.

use std::collections::BTreeMap;

use anyhow::Result;
use e2e_tests::{
    Received, World, ec2_event, fixture, health_event, karpenter_tags, managed_nodegroup_tags,
};
use local_aws::function::{Function, router_binary};
use serde_json::{Value, json};

mod failures;
mod onboarding;
mod refusals;
mod routing;

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

    /// One event of every sort, as the JSON text it travels as, with what must become of it.
    fn events(&self) -> Vec<(String, Expect)> {
        let arn = |id: &str| format!("arn:aws:ec2:us-east-1:123456789012:instance/{id}");
        let events: Vec<(Value, Expect)> = vec![
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
        ];
        events
            .into_iter()
            .map(|(event, expect)| (event.to_string(), expect))
            .collect()
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

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
}
