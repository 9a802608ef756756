//! Every figure the model uses, with the document it comes from, or why it is an assumption.
//! [`MODEL`] is the table BENCHMARKS.md prints beside the results.

use std::time::Duration;

/// A token bucket: burst and refill per second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub burst: f64,
    pub per_second: f64,
}

/// The quotas and latencies of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Quotas {
    /// EC2 DescribeInstances with filters, per account and region.
    pub describe_instances: Rate,
    /// The Tagging API's GetResources, per account and region (unpublished: assumed).
    pub get_resources: Rate,
    /// STS AssumeRole from the hub account (unpublished: assumed).
    pub assume_role: Rate,
    /// EventBridge target invocations in the hub account's hub region.
    pub hub_target_invocations: Rate,
    /// EventBridge target invocations of a member account's region (its forwarding rules).
    pub member_target_invocations: Rate,
    /// The event source mapping: batches at first, more per minute, at most.
    pub esm_initial: usize,
    pub esm_more_per_minute: usize,
    pub esm_max: usize,
    /// A new execution environment's init (Lambda's sandbox and the router's own start).
    pub cold_start: Duration,
    /// Lambda's CPU at the function's memory, as a fraction of one vCPU.
    pub cpu_share: f64,
}

impl Quotas {
    /// AWS's defaults for a hub region with `hub_targets_per_second` target invocations.
    pub fn defaults(hub_targets_per_second: f64) -> Self {
        Self {
            describe_instances: Rate {
                burst: 100.0,
                per_second: 20.0,
            },
            get_resources: Rate {
                burst: 20.0,
                per_second: 5.0,
            },
            assume_role: Rate {
                burst: 100.0,
                per_second: 50.0,
            },
            hub_target_invocations: Rate {
                burst: hub_targets_per_second,
                per_second: hub_targets_per_second,
            },
            member_target_invocations: Rate {
                burst: 2_250.0,
                per_second: 2_250.0,
            },
            esm_initial: 5,
            esm_more_per_minute: 300,
            esm_max: 1_000,
            cold_start: Duration::from_millis(300),
            cpu_share: 128.0 / 1_769.0,
        }
    }
}

/// Service latencies the model draws from (uniform in [low, high]): unpublished; typical figures
/// for calls inside a region, chosen on the slow side.
#[derive(Debug, Clone, Copy)]
pub struct Latency {
    pub low: Duration,
    pub high: Duration,
}

const fn ms(low: u64, high: u64) -> Latency {
    Latency {
        low: Duration::from_millis(low),
        high: Duration::from_millis(high),
    }
}

pub const DESCRIBE_INSTANCES: Latency = ms(80, 200);
pub const GET_RESOURCES: Latency = ms(100, 250);
pub const ASSUME_ROLE: Latency = ms(40, 120);
pub const SQS_SMALL_CALL: Latency = ms(8, 25);
pub const SEND_MESSAGE_BATCH: Latency = ms(15, 45);
pub const GET_PARAMETER: Latency = ms(10, 30);
/// IAM GetRole (the router's check of a direct delivery's sender, once per account and
/// execution environment): assumed, IAM being a global service.
pub const GET_ROLE: Latency = ms(30, 100);
/// One EventBridge hop (a rule to its target: a bus or the ingest queue).
pub const EVENTBRIDGE_HOP: Latency = ms(150, 500);
/// A throttled call's answer.
pub const THROTTLED: Latency = ms(5, 20);

/// The router's own CPU per record and per AWS call at one full vCPU (parsing, signing), scaled
/// by [`Quotas::cpu_share`]: measured by `make bench`'s criterion figures (a 100-record batch
/// classifies and plans in ~200 µs; SigV4 and the SDK's serialisation are taken as 50 µs a call).
pub const CPU_PER_RECORD: Duration = Duration::from_micros(2);
pub const CPU_PER_CALL: Duration = Duration::from_micros(50);

/// What is modelled, from which document, and what is not: BENCHMARKS.md's table.
pub const MODEL: &[(&str, &str, &str)] = &[
    (
        "EC2 DescribeInstances",
        "a token bucket per account and region, 100 burst, 20/s refill (filtered calls); an empty bucket answers RequestLimitExceeded at once; shared with the account's Karpenters",
        "EC2 API reference, \"Request throttling for the Amazon EC2 API\"",
    ),
    (
        "Karpenter's EC2 calls",
        "per cluster: DescribeInstanceStatus once a minute; while its nodes are being replaced (the storm and 90 s after), one batched DescribeInstances a second",
        "karpenter-provider-aws v1.14 (pkg/batcher: ≤ 500 ids, 1 s max window; the interruption controller's status poll); the replacement rate is an assumption",
    ),
    (
        "Tagging API GetResources",
        "a token bucket per account and region, 20 burst, 5/s (assumed: its quota is not published)",
        "Resource Groups Tagging API reference, GetResources (\"has a rate limit\"); the figure is conservative, not documented",
    ),
    (
        "STS AssumeRole",
        "a token bucket for the hub account, 100 burst, 50/s (assumed); AWS advises caching credentials and regional endpoints",
        "IAM user guide / Knowledge Center, STS throttling (rate not published)",
    ),
    (
        "EventBridge target invocations",
        "a bucket per account and region (the hub's: 18,750/s or 750/s; a member's: 2,250/s); over the quota a delivery waits its turn, never dropped; one hop 150-500 ms",
        "EventBridge user guide, \"Amazon EventBridge quotas\" (invocations throttle limit); hop latency assumed",
    ),
    (
        "spoke → hub forwarding",
        "a storm region's events cross two rules: the member's forwarding rule (its account's quota) and the hub bus's rule (the hub's)",
        "EventBridge user guide, cross-account and cross-Region targets",
    ),
    (
        "regional hubs, direct rules",
        "a hub per region (base stack in the hub account), each serving its region's clusters; a member account's rule in the hub's region targets the ingest queue in the hub account directly: one rule, on the member's quota (a what-if: spoke.yaml has no direct rules yet)",
        "EventBridge user guide, \"Sending events to an AWS service in another account\" (same Region, an execution role in the sender's account); quotas per account and Region (\"Amazon EventBridge quotas\")",
    ),
    (
        "SQS event source mapping",
        "5 concurrent batches at first, up to 300 more per minute, at most 1,000 (or MaximumConcurrency); BatchSize and MaximumBatchingWindowInSeconds as base.yaml sets them; a batch handed back waits the visibility the router set",
        "Lambda developer guide, \"Configuring scaling behavior for SQS event source mappings\"",
    ),
    (
        "ingest queue",
        "visibility timeout 180 s, the router's ChangeMessageVisibility honoured, redrive to the DLQ after maxReceiveCount (20) receives",
        "SQS developer guide (visibility timeout, dead-letter queues); base.yaml",
    ),
    (
        "Lambda execution environments",
        "one batch at a time; a new one starts cold (empty caches, no credentials) after a 300 ms init (assumed, provided.al2023 at 128 MB); the most recently used idle one is reused; CPU at 128/1,769 of a vCPU",
        "Lambda developer guide, \"Lambda execution environment\" and \"Memory and computing power\"",
    ),
    (
        "service latencies",
        "uniform draws: DescribeInstances 80-200 ms, GetResources 100-250 ms, AssumeRole 40-120 ms, SendMessageBatch 15-45 ms, other SQS calls 8-25 ms, GetParameter 10-30 ms",
        "not published; chosen on the slow side of in-region figures",
    ),
    (
        "not modelled",
        "SQS and SSM throttling (SQS standard queues: nearly unlimited per action), network failures and brownouts (the fault scenarios in make test cover those on the emulator), Lambda's account concurrency beyond 1,000, EventBridge's PutEvents quota (events from AWS services do not use it), the DLQ's alarm delay",
        "SQS developer guide, \"Amazon SQS quotas\"",
    ),
];
