//! Local stand-ins for the AWS services the router meets in production, used by `routerctl demo`,
//! the benchmarks and the end-to-end tests: a moto server for the AWS APIs, a Lambda Runtime API
//! for the function, and the router binary running under it; for `routerctl adopt`'s test and
//! demo also the default event bus as AWS runs it, Karpenter reading its queue, and the
//! interruption set-ups clusters run before the router.

pub mod esm;
pub mod eventbridge;
pub mod function;
pub mod http;
pub mod invoke_api;
pub mod karpenter;
pub mod lambda_logs;
pub mod moto;
pub mod old_setups;
pub mod proxy;
pub mod runtime_api;
