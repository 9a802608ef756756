//! What interruption-router's tooling knows about AWS and about the project's own stacks, shared by
//! the operator CLI (`routerctl`) and the local AWS stand-ins (`local-aws`). Nothing here runs in
//! the Lambda, and nothing here pretends to be AWS: it is AWS's rules and formats, written down.
//!
//! * [`stacks`]: the CloudFormation templates, compiled in, and the names and parameters the
//!   project's stacks take;
//! * [`documents`]: the policy documents the templates render for one deployment;
//! * [`template`]: what a template means for one deployment (intrinsics, conditions, `Rules`),
//!   as CloudFormation evaluates it;
//! * [`policy`]: IAM's evaluation of identity and resource policies, for `verify`'s checks;
//! * [`access`]: a role's permissions boundary, and KMS key policies, combined with them;
//! * [`roles`]: a role's policies, boundary and trust policy, judged as IAM would;
//! * [`kms`]: a KMS key's state and key policy;
//! * [`patterns`]: EventBridge's matching of an event pattern;
//! * [`events`]: interruption events in the exact shapes EC2, AWS Health and FIS produce;
//! * [`esm`]: Lambda's SQS event source mapping: its batches, the event it invokes with, what it
//!   leaves in the queue after the function's answer;
//! * [`arn`]: the parts of an ARN the tooling reads;
//! * [`resources`]: what the tooling reads back from AWS, as plain data;
//! * [`timing`]: AWS's timings the model and the emulator's stand-ins both play.
//!
//! No AWS SDK crate is linked here (`cargo tree -p aws-model` shows none): the clients that read
//! and deploy for real are `aws-clients`', so the model of AWS (`aws-world`), the simulation and
//! the router's decision tests build without the SDK.

pub mod access;
pub mod arn;
pub mod documents;
pub mod esm;
pub mod events;
pub mod kms;
pub mod patterns;
pub mod policy;
pub mod resources;
pub mod roles;
pub mod stacks;
pub mod template;
pub mod timing;
