//! interruption-router: one set of EventBridge interruption rules for many EKS clusters.
//!
//! Karpenter reads EC2 interruption events (spot warnings, rebalance recommendations, state
//! changes, Health scheduled changes, capacity-reservation warnings) from an SQS queue, and deletes
//! every message about an instance it does not own, so clusters cannot share a queue. This Lambda
//! sits between one shared set of rules and one queue per cluster:
//!
//! ```text
//! EventBridge rules ─▶ [ingest queue ─▶ event source mapping | direct invoke] ─▶ router
//!   event    classify: which kind, which instances (pure)
//!   resolve  instance ─▶ cluster from EC2 tags (moka cache + batched DescribeInstances)
//!   forward  SendMessageBatch into karpenter-<cluster>, only a queue its tenant stack made
//!            (tenancy), + dead-letter queue for permanent failures
//!   handler  one invocation: both payload shapes, per-record outcomes, deadline, EMF metrics
//! ```
//!
//! The pure parts ([`event`], [`config`], batch planning in [`forward`], tag rules in [`resolve`],
//! [`metrics`]) hold the policy; the AWS calls sit behind [`resolve::Resolver`] and
//! [`forward::Forwarder`]; [`bootstrap`] wires them for the binary.

pub mod accounts;
pub mod bootstrap;
pub mod config;
pub mod event;
pub mod forward;
pub mod handler;
pub mod logging;
pub mod metrics;
pub mod redeliver;
pub mod resolve;
pub mod retry;
pub mod tenancy;

/// The release this build is (the workspace's version): logged at start and on every line, and
/// what base.yaml's and spoke.yaml's `Version` outputs and version tags say.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
