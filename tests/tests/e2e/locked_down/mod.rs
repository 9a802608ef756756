//! Locked-down accounts (README, "Locked-down accounts"): customer-managed KMS keys for every
//! queue (`KmsKey=Create`), a permissions boundary and a path for the roles the stacks create.
//!
//! * [`principals`]: who may use each key and queue, as KMS and IAM decide, with a boundary;
//! * [`updates`]: what updating today's stacks to these templates replaces;
//! * [`deployed`]: the stacks deployed into moto with a key and a boundary;
//! * [`verified`]: `routerctl verify` on a member account's tenant queues under their keys.

mod deployed;
mod principals;
mod updates;
mod verified;
