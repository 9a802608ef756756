//! A KMS key as KMS describes it, with its key policy: what `routerctl verify`'s key checks judge
//! and what the Karpenter stand-in decides a receive by (`local-aws/src/sse.rs`).

use crate::policy::Policy;

/// The key as KMS describes it.
pub struct Key {
    pub arn: String,
    pub aws_managed: bool,
    /// `None` when enabled, else its state.
    pub disabled: Option<String>,
    pub policy: Policy,
}
