//! The AWS SDK side of interruption-router's tooling: the clients for one account and region
//! ([`aws::Aws`], with error text that names what AWS said), and what reads or deploys through
//! them. What they read is judged by `aws-model`, which links no SDK crate, so the model of AWS
//! and everything tested on it build without the SDK.
//!
//! * [`aws`]: the clients, built once from one SDK configuration, and the reads the commands share;
//! * [`stacks`]: a small deployer (create, update, delete, each waited on until it is done);
//! * [`deployed`]: a deployed stack read back and rendered from its own template;
//! * [`roles`]: an IAM role's policies, boundary and trust policy, read from IAM;
//! * [`kms`]: a KMS key's state and key policy, read from KMS;
//! * [`events`]: a synthetic interruption event as PutEvents takes it.

pub mod aws;
pub mod deployed;
pub mod events;
pub mod kms;
pub mod roles;
pub mod stacks;
