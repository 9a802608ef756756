//! The SQS event source mapping and the function's execution environments.
//!
//! The mapping reads batches with concurrent pollers: five at first, then, while messages are
//! still waiting, up to 300 more per minute, at most `MaximumConcurrency` (Lambda developer guide,
//! "Configuring scaling behavior for SQS event source mappings"). Each poller gathers a batch
//! (up to `BatchSize` records, or what came within the batching window) and invokes the function
//! with it; records named in `batchItemFailures` stay in the queue, the rest are deleted. When a
//! batch is ready, the event and what an answer leaves are [`aws_model::esm`]'s, which the
//! emulator's poller (`local-aws`) follows too.
//!
//! An execution environment handles one batch at a time ([`Pool`]): the most recently used idle
//! one takes the next batch, and when none is idle a new one starts cold, its init time spent
//! before its first invocation, its caches empty and no credentials at hand: a fresh
//! [`Router`] over its own [`EnvAws`].

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use aws_model::esm::{self, Answer, Batching, Record};
use router_core::{
    config::Config,
    handler::{Invocation, Router},
};
use tokio::time::Instant;

use crate::{
    aws::{EnvAws, World},
    ingest::Received,
    quotas,
};

/// base.yaml's event source mapping and function.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mapping {
    pub batch_size: usize,
    pub batching_window: Duration,
    /// `ScalingConfig.MaximumConcurrency`; `None`: the mapping's own limit.
    pub max_concurrency: Option<usize>,
    pub function_timeout: Duration,
}

impl Mapping {
    /// base.yaml's defaults (a test reads them from the template).
    pub fn base_stack() -> Self {
        Self {
            batch_size: 100,
            batching_window: Duration::from_secs(1),
            max_concurrency: Some(5),
            function_timeout: Duration::from_secs(30),
        }
    }
}

/// What the mapping and the environments did.
#[derive(Debug, Default, Clone)]
pub struct Usage {
    pub invocations: u64,
    pub records: u64,
    pub cold_starts: u64,
    pub peak_concurrency: usize,
    pub pollers: usize,
    /// Each invocation's duration.
    pub durations: Vec<Duration>,
    /// Invocations whose environment died mid-batch ([`Esm::kill`]).
    pub killed: u64,
}

/// The function's execution environments.
pub struct Pool {
    world: Arc<World>,
    config: Config,
    routers: Mutex<Vec<Arc<Router<EnvAws>>>>,
    idle: Mutex<Vec<usize>>,
}

impl Pool {
    pub fn new(world: Arc<World>, config: Config) -> Self {
        Self {
            world,
            config,
            routers: Mutex::default(),
            idle: Mutex::default(),
        }
    }

    /// An idle environment (the most recently used), or a new one: `true` when it is cold.
    fn acquire(&self) -> (usize, Arc<Router<EnvAws>>, bool) {
        if let Some(env) = self.idle.lock().unwrap().pop() {
            return (env, self.routers.lock().unwrap()[env].clone(), false);
        }
        let mut routers = self.routers.lock().unwrap();
        let env = routers.len();
        let aws = Arc::new(EnvAws {
            env,
            world: self.world.clone(),
        });
        let router = Arc::new(Router::new(
            &self.config,
            aws,
            &self.world.org.shape.hub_region,
            "interruption-router".into(),
        ));
        routers.push(router.clone());
        (env, router, true)
    }

    /// One environment, for batches played by hand ([`crate::replay`]).
    pub fn one(&self) -> Arc<Router<EnvAws>> {
        self.acquire().1
    }

    fn release(&self, env: usize) {
        self.idle.lock().unwrap().push(env);
    }

    /// Environments started.
    pub fn environments(&self) -> usize {
        self.routers.lock().unwrap().len()
    }

    /// AssumeRole calls per environment, as each router counted them.
    pub fn assume_role_calls(&self) -> Vec<u64> {
        self.routers
            .lock()
            .unwrap()
            .iter()
            .map(|r| r.assume_role_calls())
            .collect()
    }
}

/// The mapping at work until `stop`.
pub struct Esm {
    world: Arc<World>,
    pool: Arc<Pool>,
    mapping: Mapping,
    stop: AtomicBool,
    busy: AtomicUsize,
    usage: Mutex<Usage>,
    /// Invocations started so far, and the ones whose environment dies mid-batch.
    invoked: AtomicUsize,
    kills: Mutex<std::collections::BTreeSet<usize>>,
}

impl Esm {
    pub fn new(world: Arc<World>, pool: Arc<Pool>, mapping: Mapping) -> Arc<Self> {
        Arc::new(Self {
            world,
            pool,
            mapping,
            stop: AtomicBool::new(false),
            busy: AtomicUsize::new(0),
            usage: Mutex::default(),
            invoked: AtomicUsize::new(0),
            kills: Mutex::default(),
        })
    }

    /// The environments of these invocations (numbered from 1) die mid-batch: the process is
    /// killed (out of memory, a crash) at a moment drawn from the run's seed. Lambda sees an
    /// invocation error, so every record of the batch waits out its visibility timeout, whatever
    /// the router had already sent; the environment is gone ([`crate::faults`]).
    pub fn kill(&self, invocations: impl IntoIterator<Item = usize>) {
        self.kills.lock().unwrap().extend(invocations);
    }

    pub fn usage(&self) -> Usage {
        self.usage.lock().unwrap().clone()
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.world.ingest.wake_all();
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// The pollers, and the scaler that adds them while messages wait.
    pub async fn run(self: &Arc<Self>) {
        let quotas = &self.world.quotas;
        let ceiling = self
            .mapping
            .max_concurrency
            .unwrap_or(quotas.esm_max)
            .min(quotas.esm_max);
        let mut pollers = Vec::new();
        for _ in 0..quotas.esm_initial.min(ceiling) {
            pollers.push(tokio::spawn(self.clone().poll()));
        }
        // Up to 300 more per minute: 5 a second while records are still waiting.
        let per_second = (quotas.esm_more_per_minute / 60).max(1);
        while !self.stopped() {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if self.world.ingest.backlog() > 0 && pollers.len() < ceiling {
                let more = per_second.min(ceiling - pollers.len());
                for _ in 0..more {
                    pollers.push(tokio::spawn(self.clone().poll()));
                }
            }
            self.usage.lock().unwrap().pollers = pollers.len();
        }
        self.world.ingest.wake_all();
        for poller in pollers {
            let _ = poller.await;
        }
    }

    /// One poller: gather a batch, invoke, again.
    async fn poll(self: Arc<Self>) {
        while !self.stopped() {
            let batch = self.gather().await;
            if !batch.is_empty() {
                self.invoke(batch).await;
            }
        }
    }

    /// Up to BatchSize records: the first that is visible, then what arrives within the
    /// batching window.
    async fn gather(&self) -> Vec<Received> {
        let ingest = &self.world.ingest;
        let size = self.mapping.batch_size;
        let mut batch = ingest.take(size);
        while batch.is_empty() {
            if self.stopped() {
                return batch;
            }
            ingest.wait(Instant::now() + Duration::from_secs(20)).await;
            batch = ingest.take(size);
        }
        let first = Instant::now();
        let batching = Batching {
            size,
            window: self.mapping.batching_window,
        };
        while let Some(left) = batching.left(batch.len(), first.elapsed()) {
            if self.stopped() {
                break;
            }
            ingest.wait(Instant::now() + left).await;
            batch.extend(ingest.take(size - batch.len()));
        }
        batch
    }

    async fn invoke(&self, batch: Vec<Received>) {
        let started = Instant::now();
        let busy = self.busy.fetch_add(1, Ordering::SeqCst) + 1;
        let (env, router, cold) = self.pool.acquire();
        let quotas = &self.world.quotas;
        if cold {
            tokio::time::sleep(quotas.cold_start).await;
        }
        // The router's own work on the records, at the function's share of a vCPU.
        let cpu = quotas::CPU_PER_RECORD.mul_f64(batch.len() as f64 / quotas.cpu_share);
        tokio::time::sleep(cpu).await;

        let payload = self.payload(&batch);
        let wall = self.world.now_wall();
        let deadline_ms = wall
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as u64
            + self.mapping.function_timeout.as_millis() as u64;
        let function_arn = format!(
            "arn:aws:lambda:{}:{}:function:interruption-router",
            self.world.org.shape.hub_region, self.world.org.hub_account
        );
        let invocation = router.invoke(
            &payload,
            Invocation {
                request_id: "sim",
                function_arn: &function_arn,
                deadline_ms,
            },
        );
        let number = self.invoked.fetch_add(1, Ordering::SeqCst) + 1;
        let answered = if self.kills.lock().unwrap().contains(&number) {
            let dies_after = Duration::from_millis((self.world.jitter() * 400.0) as u64);
            tokio::time::timeout(dies_after, invocation).await.ok()
        } else {
            Some(invocation.await)
        };
        let Some(answered) = answered else {
            // Killed: nothing is deleted, the environment is not given back.
            self.busy.fetch_sub(1, Ordering::SeqCst);
            let mut usage = self.usage.lock().unwrap();
            usage.invocations += 1;
            usage.killed += 1;
            usage.records += batch.len() as u64;
            return;
        };
        let ids: Vec<String> = batch.iter().map(|r| r.id.to_string()).collect();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        let left = esm::left(
            match &answered.response {
                Ok(response) => Answer::Response(Some(response)),
                Err(_) => Answer::Error,
            },
            &ids,
        );
        for (record, id) in batch.iter().zip(&ids) {
            if !left.keeps(id) {
                self.world.ingest.delete(&record.receipt);
            }
        }
        self.pool.release(env);
        self.busy.fetch_sub(1, Ordering::SeqCst);
        let mut usage = self.usage.lock().unwrap();
        usage.invocations += 1;
        usage.records += batch.len() as u64;
        usage.cold_starts += u64::from(cold);
        usage.peak_concurrency = usage.peak_concurrency.max(busy);
        usage.durations.push(started.elapsed());
    }

    /// The SQS event the mapping hands the function.
    fn payload(&self, batch: &[Received]) -> Box<serde_json::value::RawValue> {
        let ms = |at: Instant| {
            let wall = self.world.now_wall() - Instant::now().saturating_duration_since(at);
            wall.duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_millis()
                .to_string()
        };
        let queue_arn = self.world.org.ingest_queue_arn();
        let direct_arn = self.world.org.direct_queue_arn();
        let ids: Vec<String> = batch.iter().map(|r| r.id.to_string()).collect();
        let event = esm::sqs_event(batch.iter().zip(&ids).map(|(r, id)| {
            let mut attributes = vec![
                (
                    "ApproximateReceiveCount".to_owned(),
                    r.receive_count.to_string(),
                ),
                (
                    "ApproximateFirstReceiveTimestamp".to_owned(),
                    ms(r.first_receive),
                ),
                ("SentTimestamp".to_owned(), ms(r.sent_at)),
            ];
            // A direct rule's record: from the direct queue, sent by the member's role. (One
            // mapping plays both queues' here: their records share its concurrency.)
            let source = match &r.sender {
                Some(sender) => {
                    attributes.push(("SenderId".to_owned(), sender.to_string()));
                    &direct_arn
                }
                None => &queue_arn,
            };
            Record {
                message_id: id,
                receipt_handle: &r.receipt,
                body: &r.body,
                attributes,
                md5_of_body: "",
                queue_arn: source,
                region: &self.world.org.shape.hub_region,
            }
        }));
        serde_json::value::RawValue::from_string(event.to_string()).expect("JSON")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        organisation::{Organisation, Shape},
        quotas::Quotas,
    };

    /// The mapping with `records` waiting from the start, after `seconds` of virtual time.
    async fn after(seconds: u64, max_concurrency: Option<usize>, records: usize) -> Usage {
        let shape = Shape {
            accounts: 2,
            clusters_per_account: 2,
            storm_nodes: 40,
            duration: Duration::from_secs(10),
            ..Shape::issue()
        };
        let org = Arc::new(Organisation::new(shape, 7));
        let ingest = Arc::new(crate::ingest::Ingest::new(Duration::from_secs(180), 20));
        // Environments slow to start keep their batches in flight, so the backlog stays while
        // the mapping scales (and the router's work stays small).
        let quotas = Quotas {
            cold_start: Duration::from_secs(60),
            ..Quotas::defaults(18_750.0)
        };
        let world = Arc::new(World::new(org.clone(), quotas, ingest.clone(), 7));
        let event = &org.events[0];
        for n in 0..records {
            ingest.push(
                Arc::from(event.body.as_str()),
                Arc::from(format!("e{n}").as_str()),
            );
        }
        let config = Config::from_lookup(|name| match name {
            "DEAD_LETTER_QUEUE_URL" => Some(world.dlq_url.clone()),
            "MAX_RECEIVE_COUNT" => Some("20".into()),
            "SERVED_ACCOUNTS" => Some("*".into()),
            _ => None,
        })
        .expect("a configuration");
        let pool = Arc::new(Pool::new(world.clone(), config));
        let mapping = Mapping {
            max_concurrency,
            ..Mapping::base_stack()
        };
        let esm = Esm::new(world, pool, mapping);
        let running = tokio::spawn({
            let esm = esm.clone();
            async move { esm.run().await }
        });
        // Just past the scaler's tick of second `seconds`.
        tokio::time::sleep(Duration::from_secs(seconds) + Duration::from_millis(500)).await;
        let usage = esm.usage();
        esm.stop();
        running.await.expect("the mapping stops");
        usage
    }

    #[tokio::test(start_paused = true)]
    async fn the_mapping_starts_with_five_batches_and_adds_five_a_second_while_records_wait() {
        // 300 a minute: 5 + 5 × 4 after four seconds.
        let usage = after(4, None, 5_000).await;
        assert_eq!(usage.pollers, 25);
        assert!(usage.peak_concurrency <= 25, "{}", usage.peak_concurrency);
    }

    #[tokio::test(start_paused = true)]
    async fn maximum_concurrency_caps_the_batches_in_flight() {
        let usage = after(6, Some(12), 5_000).await;
        assert_eq!(usage.pollers, 12);
        assert!(usage.peak_concurrency <= 12, "{}", usage.peak_concurrency);
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_backlog_the_mapping_does_not_grow() {
        let usage = after(6, None, 50).await;
        assert_eq!(usage.pollers, 5);
    }
}

#[cfg(test)]
mod template {
    use super::*;

    /// A parameter's `Default:` in base.yaml.
    fn default_of(parameter: &str) -> u64 {
        let template = include_str!("../../cloudformation/base.yaml");
        let mut lines = template
            .lines()
            .skip_while(|l| *l != format!("  {parameter}:"));
        lines
            .next()
            .unwrap_or_else(|| panic!("base.yaml has no parameter {parameter}"));
        lines
            .take_while(|l| l.starts_with("    "))
            .find_map(|l| l.trim().strip_prefix("Default: "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{parameter} has no numeric default"))
    }

    #[test]
    fn the_simulated_mapping_is_the_base_stacks() {
        let mapping = Mapping::base_stack();
        assert_eq!(mapping.batch_size as u64, default_of("BatchSize"));
        assert_eq!(
            mapping.batching_window.as_secs(),
            default_of("MaximumBatchingWindowInSeconds")
        );
        assert_eq!(
            mapping.max_concurrency.map(|n| n as u64),
            Some(default_of("MaximumConcurrency"))
        );
        let template = include_str!("../../cloudformation/base.yaml");
        assert!(
            template.contains(&format!(
                "      Timeout: {}\n",
                mapping.function_timeout.as_secs()
            )),
            "the function's Timeout"
        );
    }
}
