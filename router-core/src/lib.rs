//! router-core: interruption-router's decisions, with neither the AWS SDK nor the Lambda runtime.
//!
//! Karpenter reads EC2 interruption events (spot warnings, rebalance recommendations, state
//! changes, Health scheduled changes, capacity-reservation warnings) from an SQS queue, and deletes
//! every message about an instance it does not own, so clusters cannot share a queue. The router
//! sits between one shared set of rules and one queue per cluster. Member accounts and other
//! regions forward their events to it through a spoke stack; the router acts in each account as
//! the spoke role that account created for it.
//!
//! ```text
//! EventBridge rules (hub and spokes) ─▶ ingest queue ─▶ event source mapping ─▶ router
//! member rules in the hub's region ───▶ direct queue ─▶ event source mapping ─┘
//!   event     classify: which kind, which instances, which account and region (pure)
//!   accounts  admit the account; who the router is there (its role, or a spoke role)
//!   direct    a direct queue's record: its sender is the named account's direct role
//!   resolve   instance ─▶ cluster from EC2 tags (cache + batched, hedged lookups)
//!   forward   SendMessageBatch into karpenter-<cluster>, only a queue its tenant stack made
//!             (tenancy), + dead-letter queue for permanent failures
//!   handler   one invocation: per-record outcomes, budget, hand-back, EMF metrics, and an
//!             interruption record per instance (insight: what Logs Insights queries)
//! ```
//!
//! Every effect goes through one seam, [`aws::Aws`]: AWS calls, the wall clock and retry jitter.
//! This crate holds the seam and everything decided behind it; the Lambda (`interruption-router`,
//! `router/`) puts the AWS SDK behind it and hands the handler to the Lambda runtime, the decision
//! tests (`tests/decisions/`, on aws-world's model of AWS) and the organisation simulation put a model of AWS there instead, and
//! routerctl, aws-model and the fuzz target read its event kinds, tenancy and configuration
//! without linking the SDK. Every retry is in the ladder [`retry`] writes down.

pub mod accounts;
pub mod aws;
pub mod cache;
pub mod config;
pub mod direct;
pub mod event;
pub mod forward;
pub mod handler;
pub mod insight;
pub mod logging;
pub mod metrics;
pub mod redeliver;
pub mod resolve;
pub mod retry;
pub mod scope;
pub mod tenancy;

/// The release this build is (the workspace's version): logged at start and on every line, and
/// what base.yaml's and spoke.yaml's `Version` outputs and version tags say.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
