//! What interruption-router's tooling knows about AWS and about the project's own stacks, shared by
//! the operator CLI (`routerctl`) and the local AWS stand-ins (`local-aws`). Nothing here runs in
//! the Lambda, and nothing here pretends to be AWS: it is AWS's rules and formats, written down.
//!
//! * [`stacks`]: the CloudFormation templates, compiled in, and a small deployer;
//! * [`documents`]: the policy documents the templates render for one deployment;
//! * [`template`]: what a template means for one deployment (intrinsics, conditions, `Rules`),
//!   as CloudFormation evaluates it;
//! * [`policy`]: IAM's evaluation of identity and resource policies, for `verify`'s checks;
//! * [`access`]: a role's permissions boundary, and KMS key policies, combined with them;
//! * [`roles`]: a role's policies, boundary and trust policy, read from IAM;
//! * [`kms`]: a KMS key's state and key policy, read from KMS;
//! * [`patterns`]: EventBridge's matching of an event pattern;
//! * [`events`]: interruption events in the exact shapes EC2, AWS Health and FIS produce;
//! * [`aws`]: the SDK clients for one account and region, and error text that names what AWS said.

pub mod access;
pub mod aws;
pub mod deployed;
pub mod documents;
pub mod events;
pub mod kms;
pub mod patterns;
pub mod policy;
pub mod resources;
pub mod roles;
pub mod stacks;
pub mod template;
