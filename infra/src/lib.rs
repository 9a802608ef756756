//! routerctl: operator tooling for interruption-router, and the local harness it shares with the
//! end-to-end tests and benchmarks.
//!
//! * [`simulate`], [`verify`], [`fis`]: the operator commands, each a function returning a report
//!   (the binary prints it and sets the exit status);
//! * [`policy`]: the IAM policy evaluator `verify` uses;
//! * [`local`]: moto, a Lambda Runtime API and Invoke API, an event source mapping and a
//!   fault-injecting proxy;
//! * [`sandbox`]: the real stacks deployed into moto, completed where moto skips resources;
//! * [`events`]: synthetic interruption events in real formats;
//! * [`stacks`]: the CloudFormation templates and a deployer;
//! * [`template`]: what a template means for one deployment (intrinsics, conditions, Rules).

pub mod adopt;
pub mod aws;
pub mod demo;
pub mod events;
pub mod fis;
pub mod local;
pub mod patterns;
pub mod policy;
pub mod sandbox;
pub mod simulate;
pub mod stacks;
pub mod template;
pub mod verify;
