//! What verify and adopt both read of a deployment, read one way for both: the base stack
//! ([`Base`], judged by [`base::load`]), a queue ([`Queue`], [`load_queue`]) and a role's policies
//! ([`Role`], whose reader and judgement live in [`aws_model::roles`], shared with the Karpenter
//! stand-in).
//!
//! ```text
//!   verify ──┐                    ┌── base.rs   the base stack: outputs, parameters, resources
//!            ├── deployment ──────┼── queue.rs  a queue: URL, ARN, attributes, its policy's say
//!   adopt ───┘                    └── Role      a role's policies, boundary and trust
//! ```

pub(crate) mod base;
mod queue;

pub(crate) use self::{
    base::Base,
    queue::{Queue, load_queue},
};
pub(crate) use aws_model::roles::Role;
