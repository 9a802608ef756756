//! routerctl: operator tooling for interruption-router, and the local harness it shares with the
//! end-to-end tests and benchmarks.
//!
//! * [`local`]: moto, a Lambda Runtime API, an event source mapping and a fault-injecting proxy;
//! * [`events`]: synthetic interruption events in real formats;
//! * [`stacks`]: the CloudFormation templates and a deployer.

pub mod demo;
pub mod events;
pub mod local;
pub mod stacks;
