//! Lookup: an instance's tags from AWS, by two paths that do not share a throttle.
//!
//! * [`describe_instances`] (EC2): one call per 200 ids (every page of it), with the
//!   `instance-id` filter: one unknown id in `InstanceIds` fails the whole call with
//!   `InvalidInstanceID.NotFound`, while under the filter unknown ids are simply absent. EC2 is the
//!   authority on which instances exist, so it is asked first. It is also what every Karpenter in
//!   the account calls during a storm: its Describe* token bucket is the account's.
//! * [`get_resources`] (Resource Groups Tagging API): up to 100 instance ARNs per call, each
//!   tagged instance with its tags. Another service with its own limits, so it answers while EC2
//!   throttles or fails. It lists only resources that carry tags (and may lag a launch), so an
//!   id it leaves out is unknown, untagged *or* not indexed yet: only EC2 can say which, and
//!   until it does the resolver takes no answer for that id.
//!
//! Both answer with the owner of each instance they found, by the same [`TagRules`], and what
//! their answer said of it besides ([`About`]): its node pool from its tags on both paths, and
//! from DescribeInstances its type, zone and capacity type, which the Tagging API does not give.

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use super::{About, Found, tags::TagRules};
use crate::{
    aws::{Aws, CallError, DescribeInstances, InstanceFilter, Session, Tagged},
    event::InstanceId,
};

/// EC2 filters take at most 200 values.
pub const MAX_IDS_PER_DESCRIBE: usize = 200;
/// GetResources takes at most 100 ARNs.
pub const MAX_ARNS_PER_GET_RESOURCES: usize = 100;

/// Which API answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Path {
    DescribeInstances,
    GetResources,
}

impl Path {
    pub fn label(self) -> &'static str {
        match self {
            Path::DescribeInstances => "DescribeInstances",
            Path::GetResources => "GetResources",
        }
    }
}

/// Calls made, per path.
#[derive(Debug, Default)]
pub struct LookupCalls {
    pub describe_instances: AtomicU64,
    pub get_resources: AtomicU64,
}

/// The owner (and what EC2 says) of every instance EC2 knows among `ids` (at most [`MAX_IDS_PER_DESCRIBE`]).
pub async fn describe_instances<A: Aws>(
    aws: &A,
    at: &Session,
    rules: &TagRules,
    ids: &[InstanceId],
    calls: &LookupCalls,
) -> Result<HashMap<InstanceId, Found>, CallError> {
    described(aws, at, rules, InstanceFilter::Ids(ids), usize::MAX, calls).await
}

/// The owner of every instance of the session's account and region that carries `tag` (the
/// managed tag: every Karpenter node), at most `max_pages` pages of 1,000.
pub async fn sweep<A: Aws>(
    aws: &A,
    at: &Session,
    rules: &TagRules,
    tag: &str,
    max_pages: usize,
    calls: &LookupCalls,
) -> Result<HashMap<InstanceId, Found>, CallError> {
    described(
        aws,
        at,
        rules,
        InstanceFilter::TagKey(tag),
        max_pages,
        calls,
    )
    .await
}

/// The owners DescribeInstances gives for `filter`, following its pages (at most `max_pages`).
async fn described<A: Aws>(
    aws: &A,
    at: &Session,
    rules: &TagRules,
    filter: InstanceFilter<'_>,
    max_pages: usize,
    calls: &LookupCalls,
) -> Result<HashMap<InstanceId, Found>, CallError> {
    let mut owners = HashMap::new();
    let mut names = Names::default();
    let mut next_token: Option<String> = None;
    for _ in 0..max_pages {
        // Counted when sent: a call the hedge outran still answers after the lookup is done.
        calls.describe_instances.fetch_add(1, Ordering::Relaxed);
        let page = aws
            .describe_instances(
                at,
                DescribeInstances {
                    filter,
                    next_token: next_token.as_deref(),
                },
            )
            .await?;
        owners.extend(
            page.instances
                .iter()
                .map(|t| (t.id.clone(), found(rules, t, &mut names))),
        );
        match page.next_token {
            Some(token) => next_token = Some(token),
            None => break,
        }
    }
    Ok(owners)
}

/// The owner of every tagged instance among `ids`, [`MAX_ARNS_PER_GET_RESOURCES`] per call.
pub async fn get_resources<A: Aws>(
    aws: &A,
    at: &Session,
    rules: &TagRules,
    ids: &[InstanceId],
    calls: &LookupCalls,
) -> Result<HashMap<InstanceId, Found>, CallError> {
    let mut owners = HashMap::with_capacity(ids.len());
    let mut names = Names::default();
    for part in ids.chunks(MAX_ARNS_PER_GET_RESOURCES) {
        calls.get_resources.fetch_add(1, Ordering::Relaxed);
        let listed = aws.get_resources(at, part).await?;
        // The ARN list bounds the answer: anything else it lists is not ours to keep.
        owners.extend(
            listed
                .iter()
                .filter(|t| part.contains(&t.id))
                .map(|t| (t.id.clone(), found(rules, t, &mut names))),
        );
    }
    Ok(owners)
}

/// An instance's owner by its tags, and what the answer said of it.
fn found(rules: &TagRules, tagged: &Tagged, names: &mut Names) -> Found {
    let tags: Vec<(&str, &str)> = tagged
        .tags
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let about = About {
        node_pool: tags
            .iter()
            .find(|(k, _)| *k == crate::insight::NODE_POOL_TAG)
            .map(|(_, v)| names.get(v)),
        instance_type: tagged
            .described
            .as_ref()
            .map(|d| names.get(&d.instance_type)),
        zone: tagged.described.as_ref().map(|d| names.get(&d.zone)),
        capacity: tagged.described.as_ref().map(|d| d.capacity),
    };
    Found {
        owner: rules.owner(&tags),
        about,
    }
}

/// The names one answer repeats (a sweep's thousand nodes share a few types, zones and pools),
/// each kept once for the cache.
#[derive(Default)]
struct Names(HashMap<String, Arc<str>>);

impl Names {
    fn get(&mut self, name: &str) -> Arc<str> {
        if let Some(kept) = self.0.get(name) {
            return kept.clone();
        }
        let kept: Arc<str> = Arc::from(name);
        self.0.insert(name.to_owned(), kept.clone());
        kept
    }
}
