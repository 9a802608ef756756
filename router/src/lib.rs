//! interruption-router: the Lambda. One set of EventBridge interruption rules for many EKS
//! clusters.
//!
//! The decisions are [`router_core`]'s (re-exported here under the same names): classify, admit,
//! resolve, forward, one invocation's outcomes, all behind the seam [`aws::Aws`]. This crate adds
//! what only the deployed function needs: [`aws::sdk::SdkAws`], the AWS SDK behind that seam, and
//! [`bootstrap`], which reads the configuration, builds the clients once and hands the handler to
//! the Lambda runtime.

pub use router_core::{
    VERSION, accounts, cache, config, direct, event, forward, handler, insight, logging, metrics,
    redeliver, resolve, retry, scope, tenancy,
};

pub mod bootstrap;

/// The seam ([`router_core::aws`]) and the AWS SDK behind it.
pub mod aws {
    pub use router_core::aws::*;
    pub mod sdk;
}
