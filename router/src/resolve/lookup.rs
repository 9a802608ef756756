//! Lookup: an instance's tags from AWS, by two paths that do not share a throttle.
//!
//! * [`describe_instances`] (EC2): one call per 200 ids, with the `instance-id` filter rather than
//!   `InstanceIds`, because one unknown id in `InstanceIds` fails the whole call with
//!   `InvalidInstanceID.NotFound`; with the filter, unknown ids are simply absent. EC2 is the
//!   authority on which instances exist, so it is asked first. It is also what every Karpenter in
//!   the account calls during a storm, and its Describe* rate limit is shared account-wide.
//! * [`get_resources`] (Resource Groups Tagging API): `GetResources` with a `ResourceARNList` of
//!   up to 100 instance ARNs returns each tagged instance's tags. Another service with its own
//!   limits, so it answers while EC2 throttles or fails. It lists only resources that carry tags,
//!   so an id it leaves out is unknown *or* untagged: the caller does not cache that answer.
//!
//! Both answer with the owner of each instance they found, by the same [`TagRules`].

use std::{
    collections::HashMap,
    sync::atomic::{AtomicU64, Ordering},
    time::Instant,
};

use aws_sdk_ec2::{config::retry::RetryConfig, error::DisplayErrorContext, types::Filter};

use super::tags::{Owner, TagRules};
use crate::{
    accounts::partition,
    event::{InstanceId, Scope},
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

/// The owner of every instance EC2 knows among `ids` (at most [`MAX_IDS_PER_DESCRIBE`]).
/// `sdk_retries: false` makes each page a single attempt: a hedged lookup's retry is the other
/// path, and a failed attempt should start it at once rather than after the SDK's backoff.
pub async fn describe_instances(
    ec2: &aws_sdk_ec2::Client,
    rules: &TagRules,
    ids: &[InstanceId],
    calls: &LookupCalls,
    sdk_retries: bool,
) -> Result<HashMap<InstanceId, Owner>, String> {
    let filter = Filter::builder()
        .name("instance-id")
        .set_values(Some(ids.iter().map(|id| id.as_str().to_owned()).collect()))
        .build();
    let mut owners = HashMap::with_capacity(ids.len());
    let started = Instant::now();
    let mut next_token = None;
    loop {
        let request = ec2
            .describe_instances()
            .filters(filter.clone())
            .set_next_token(next_token.take());
        // Counted when sent: a call the hedge outran still answers after the lookup is done.
        calls.describe_instances.fetch_add(1, Ordering::Relaxed);
        let page = if sdk_retries {
            request.send().await
        } else {
            request
                .customize()
                .config_override(
                    aws_sdk_ec2::config::Builder::default().retry_config(RetryConfig::disabled()),
                )
                .send()
                .await
        }
        .map_err(|e| DisplayErrorContext(&e).to_string())?;
        for instance in page.reservations().iter().flat_map(|r| r.instances()) {
            let Some(id) = instance.instance_id().and_then(InstanceId::parse) else {
                continue;
            };
            let tags: Vec<(&str, &str)> = instance
                .tags()
                .iter()
                .filter_map(|t| Some((t.key()?, t.value()?)))
                .collect();
            owners.insert(id, rules.owner(&tags));
        }
        match page.next_token() {
            Some(token) if !token.is_empty() => next_token = Some(token.to_owned()),
            _ => break,
        }
    }
    tracing::debug!(
        ids = ids.len(),
        found = owners.len(),
        ms = started.elapsed().as_millis() as u64,
        "DescribeInstances"
    );
    Ok(owners)
}

/// The owner of every tagged instance among `ids` of `scope` (at most
/// [`MAX_ARNS_PER_GET_RESOURCES`]).
pub async fn get_resources(
    tagging: &aws_sdk_resourcegroupstagging::Client,
    rules: &TagRules,
    scope: &Scope,
    ids: &[InstanceId],
    calls: &LookupCalls,
) -> Result<HashMap<InstanceId, Owner>, String> {
    let (Some(account), Some(region)) = (scope.account.as_deref(), scope.region.as_deref()) else {
        return Err(format!(
            "GetResources needs the instances' account and region, and {scope} lacks one"
        ));
    };
    let arns = ids
        .iter()
        .map(|id| {
            format!(
                "arn:{}:ec2:{region}:{account}:instance/{id}",
                partition(region)
            )
        })
        .collect();
    // AWS answers an ARN list in one page; the paginator only matters to a service that pages
    // it anyway (the local emulator does).
    let mut pages = tagging
        .get_resources()
        .set_resource_arn_list(Some(arns))
        .into_paginator()
        .send();
    let mut owners = HashMap::with_capacity(ids.len());
    let started = Instant::now();
    while let Some(page) = pages.next().await {
        calls.get_resources.fetch_add(1, Ordering::Relaxed);
        let page = page.map_err(|e| DisplayErrorContext(&e).to_string())?;
        for mapping in page.resource_tag_mapping_list() {
            let Some(id) = mapping.resource_arn().and_then(InstanceId::parse) else {
                continue;
            };
            let tags: Vec<(&str, &str)> = mapping
                .tags()
                .iter()
                .map(|t| (t.key(), t.value()))
                .collect();
            owners.insert(id, rules.owner(&tags));
        }
    }
    tracing::debug!(
        ids = ids.len(),
        found = owners.len(),
        ms = started.elapsed().as_millis() as u64,
        "GetResources"
    );
    Ok(owners)
}
