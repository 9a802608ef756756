//! Local stand-ins for the AWS services interruption-router meets in production: what
//! `lab demo` (`make demo`), the end-to-end tests and the benchmarks run on. None of it ships to AWS.
//!
//! Each stand-in answers as AWS does, with AWS's delays and failure modes kept in (a stand-in
//! kinder than AWS hides the bug a test looks for):
//!
//! * [`moto`]: the moto server for the AWS APIs, with the fixes where moto answers otherwise
//!   than AWS (`moto_fixes/`), each forked from one process that imported moto once
//!   (`zygote`);
//! * [`runtime_api`], [`function`], [`lambda_logs`]: the router binary as a real process under a
//!   Lambda Runtime API, its logs as Lambda's log filter would keep them;
//! * [`invoke_api`], [`esm`]: Lambda's Invoke API and the SQS event source mapping (batching,
//!   visibility timeouts, partial batch responses);
//! * [`eventbridge`]: the default event bus, with rule changes that take effect late;
//! * [`proxy`]: a fault-injecting proxy in front of moto (throttling, errors, hangs);
//! * [`karpenter`]: Karpenter's interruption controller reading its queue, as its role, through
//!   [`sse`] (a queue under a KMS key is read only by a caller KMS lets decrypt);
//! * [`http`], [`ports`]: the small HTTP server the stand-ins share, and the loopback ports
//!   they and moto are given.

pub mod esm;
pub mod eventbridge;
pub mod function;
pub mod http;
pub mod invoke_api;
pub mod karpenter;
pub mod lambda_logs;
pub mod moto;
mod moto_install;
pub mod ports;
pub mod proxy;
pub mod reader;
pub mod runtime_api;
pub mod sse;
mod zygote;
