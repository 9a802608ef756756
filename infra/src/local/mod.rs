//! Local stand-ins for the AWS services the router meets in production, used by `routerctl demo`,
//! the benchmarks and the end-to-end tests: a moto server for the AWS APIs, a Lambda Runtime API
//! for the function, and the router binary running under it.

pub mod esm;
pub mod function;
pub mod http;
pub mod invoke_api;
pub mod lambda_logs;
pub mod moto;
pub mod proxy;
pub mod runtime_api;
