//! Where an AWS call goes: an account and a region, and the region's partition. A leaf module:
//! the AWS seam ([`crate::aws`]) takes a [`Scope`] with every call, and [`crate::accounts`], which
//! decides the scope and the credentials for it, calls through that seam.

use std::{fmt, sync::Arc};

/// An account and a region, both known.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Scope {
    pub account: Arc<str>,
    pub region: Arc<str>,
}

impl Scope {
    pub fn new(account: &str, region: &str) -> Self {
        Self {
            account: Arc::from(account),
            region: Arc::from(region),
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.account, self.region)
    }
}

/// The ARN partition of a region.
pub fn partition(region: &str) -> &'static str {
    if region.starts_with("cn-") {
        "aws-cn"
    } else if region.starts_with("us-gov-") {
        "aws-us-gov"
    } else if region.starts_with("us-isob-") {
        "aws-iso-b"
    } else if region.starts_with("us-iso-") {
        "aws-iso"
    } else if region.starts_with("eusc-") {
        "aws-eusc"
    } else {
        "aws"
    }
}
