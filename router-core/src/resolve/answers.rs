//! What a lookup answers: an instance's owner and what else it told of it, the key an instance
//! is known by, a lookup's failure, and the counters and result of a round of lookups.

use std::{
    collections::HashMap,
    sync::{Arc, atomic::AtomicU64},
};

use super::{LookupCalls, Owner};
use crate::{
    accounts::{Place, Unreachable},
    aws::Capacity,
    event::InstanceId,
};

/// What a lookup told of an instance besides its owner, as the interruption record carries it
/// ([`crate::insight`]): its Karpenter node pool (its `karpenter.sh/nodepool` tag, on either path)
/// and what DescribeInstances describes (its type, zone and capacity type; `None` when the
/// Tagging API alone answered, which returns tags only). Cached with the owner, a sweep's too.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct About {
    pub node_pool: Option<Arc<str>>,
    pub instance_type: Option<Arc<str>>,
    pub zone: Option<Arc<str>>,
    pub capacity: Option<Capacity>,
}

/// An instance's owner, and what the lookup that found it told of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub owner: Owner,
    pub about: About,
}

impl Found {
    /// An answer that told nothing but the owner.
    pub fn only(owner: Owner) -> Self {
        Self {
            owner,
            about: About::default(),
        }
    }
}

/// An instance as seen from the place its event was admitted into.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InstanceKey {
    pub place: Place,
    pub instance: InstanceId,
}

/// A lookup that failed on every path: transient, the records that needed it are retried.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    #[error(transparent)]
    Unreachable(#[from] Unreachable),
    #[error("instance lookup failed: {0}")]
    Failed(String),
}

/// Counters of one or more lookups.
#[derive(Debug, Default)]
pub struct LookupStats {
    /// Shared with the DescribeInstances calls a hedge outran, which run on to their end.
    pub calls: Arc<LookupCalls>,
    /// Lookups that asked the Tagging API because EC2 failed or was late (not those that asked
    /// it first while EC2 was suspected).
    pub hedged: AtomicU64,
    /// Answers served from an expired entry because every lookup path failed.
    pub stale_answers: AtomicU64,
    /// Sweeps of an account and region made (each page is a DescribeInstances call).
    pub sweeps: AtomicU64,
}

/// What [`Resolver::resolve`] found, and what it cost.
#[derive(Debug, Default)]
pub struct Resolution {
    pub owners: HashMap<InstanceKey, Result<Owner, Arc<ResolveError>>>,
    /// What the answers told of each instance besides its owner.
    pub about: HashMap<InstanceKey, About>,
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub describe_calls: u64,
    pub get_resources_calls: u64,
    pub hedged: u64,
    pub stale_answers: u64,
    pub sweeps: u64,
}
