//! The organisation's storm, in virtual time: the router's own code (its handler, batch states,
//! resolve and forward logic, through its [`router_core::aws::Aws`] seam) against a model
//! of AWS at the scale the router is for: a hundred accounts of ten clusters in three regions, and
//! an Availability Zone's Spot capacity reclaimed at once.
//!
//! ```text
//!  organisation ─▶ eventbridge ─▶ ingest ─▶ esm ─▶ Router<EnvAws> (one per execution environment)
//!  (events, seed)  (rules' quotas,  (SQS:       (pollers,        │  the router's own code
//!                   hops)           visibility,  scaling,        ▼
//!                                   redrive)     environments) aws:: layers (quotas as buckets,
//!                                                               EC2's shared with karpenter;
//!                                                               latencies; the seed's faults)
//!                                                                │
//!                                                                ▼
//!                                                    aws_world's WorldAws: the one model of AWS
//!                                                    (instances, queues, records, roles, DLQ)
//! ```
//!
//! Everything runs on one thread on tokio's paused clock: a sleep or a timeout ends as soon as
//! nothing else can run, so minutes of storm take seconds, and a seed reproduces a run exactly
//! (the layers draw latencies and the router's jitter from it; the router polls its races in a
//! fixed order). [`quotas`] holds every figure with its source; [`run::run`] plays a storm and
//! judges it; `src/bin/organisation-storm.rs` prints the tables `make bench` writes to
//! BENCHMARKS.md; [`faults`] plays a reduced organisation over many seeds with faults drawn from
//! each, and judges what must hold whatever happens (`cargo test -p simulation`).

pub mod aws;
pub mod bucket;
pub mod esm;
pub mod eventbridge;
pub mod faults;
pub mod ingest;
pub mod karpenter;
pub mod organisation;
pub mod plan;
pub mod quotas;
pub mod replay;
pub mod report;
pub mod run;
pub mod scenarios;
