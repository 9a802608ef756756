//! Locked-down accounts (README, "Locked-down accounts"): customer-managed KMS keys for every
//! queue (`KmsKey=Create`, or the organisation's own), a permissions boundary and a path for the roles the stacks create.
//!
//! * [`principals`]: who may use each key and queue, as KMS and IAM decide, with a boundary;
//! * [`updates`]: what updating today's stacks to these templates replaces;
//! * [`deployed`]: the stacks deployed into moto with a key and a boundary;
//! * [`verified`]: `routerctl verify` on a member account's tenant queues under their keys;
//! * [`given_key`]: the organisation's own key (`KmsKey=<key ARN>`), its policy its owner's.

mod deployed;
mod given_key;
mod principals;
mod updates;
mod verified;
