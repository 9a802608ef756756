//! [`SdkAws`]: the seam on the AWS SDK, the only place the router's code touches it.
//!
//! Every call is one attempt (the bootstrap turns the SDK's retries off and bounds each attempt
//! with [`crate::retry::ATTEMPT_TIMEOUT`]); errors become [`CallError`]s carrying AWS's code.
//! Clients are built once per region for the function's own role, and once per account and
//! region for a spoke role, whose credentials the caller hands over in each [`Session`] (the
//! router caches and renews them in [`crate::accounts`]; the clients here only carry the latest).

use std::{
    collections::HashMap,
    fmt,
    sync::{Arc, Mutex},
    time::SystemTime,
};

use aws_call_error::{call_error, missing};
use aws_config::{Region, SdkConfig, identity::IdentityCache};
use aws_credential_types::{
    Credentials as SdkCredentials,
    provider::{ProvideCredentials, SharedCredentialsProvider, future},
};
use aws_sdk_ec2::types::Filter;
use aws_sdk_sqs::types::{
    ChangeMessageVisibilityBatchRequestEntry, MessageAttributeValue, QueueAttributeName,
    SendMessageBatchRequestEntry,
};

use super::{
    Aws, CallError, Capacity, Credentials, DescribeInstances, Described, EntryFailure, EntryResult,
    Identity, InstanceFilter, InstancePage, SWEEP_PAGE, SendEntry, Session, Tagged,
    VisibilityEntry,
};
use crate::{
    event::InstanceId,
    scope::{Scope, partition},
};

/// The session name the router's AssumeRole calls carry (CloudTrail shows it in the member
/// accounts).
const SESSION_NAME: &str = "interruption-router";

pub struct SdkAws {
    base: SdkConfig,
    sts: aws_sdk_sts::Client,
    clients: Mutex<HashMap<ClientsKey, Arc<Clients>>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum ClientsKey {
    Home { region: Arc<str> },
    Assumed { account: Arc<str>, region: Arc<str> },
}

struct Clients {
    ec2: aws_sdk_ec2::Client,
    tagging: aws_sdk_resourcegroupstagging::Client,
    sqs: aws_sdk_sqs::Client,
    ssm: aws_sdk_ssm::Client,
    iam: aws_sdk_iam::Client,
    /// The spoke role's current credentials, for clients acting as it.
    credentials: Option<Arc<CredentialsSlot>>,
}

impl Clients {
    fn new(config: &SdkConfig, credentials: Option<Arc<CredentialsSlot>>) -> Self {
        Self {
            ec2: aws_sdk_ec2::Client::new(config),
            tagging: aws_sdk_resourcegroupstagging::Client::new(config),
            sqs: aws_sdk_sqs::Client::new(config),
            ssm: aws_sdk_ssm::Client::new(config),
            iam: aws_sdk_iam::Client::new(config),
            credentials,
        }
    }
}

/// The credentials a spoke role's clients sign with: the router's latest for that account.
struct CredentialsSlot(Mutex<SdkCredentials>);

impl fmt::Debug for CredentialsSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CredentialsSlot")
    }
}

/// The router's credentials as the SDK signs with them.
fn sdk_credentials(c: &Credentials) -> SdkCredentials {
    SdkCredentials::new(
        &c.access_key_id,
        &c.secret_access_key,
        c.session_token.clone(),
        c.expiry,
        "AssumeRole",
    )
}

impl ProvideCredentials for CredentialsSlot {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        future::ProvideCredentials::ready(Ok(self.0.lock().unwrap().clone()))
    }
}

impl SdkAws {
    /// `base` is the function's own configuration: its region, credentials and timeouts, with
    /// the SDK's retries off.
    pub fn new(base: SdkConfig) -> Self {
        Self {
            sts: aws_sdk_sts::Client::new(&base),
            base,
            clients: Mutex::default(),
        }
    }

    fn clients(&self, at: &Session) -> Arc<Clients> {
        let region = at.scope.region.clone();
        let mut clients = self.clients.lock().unwrap();
        match &at.identity {
            Identity::Home => clients
                .entry(ClientsKey::Home {
                    region: region.clone(),
                })
                .or_insert_with(|| {
                    let mut config = self.base.to_builder();
                    config.set_region(Some(Region::new(region.to_string())));
                    Arc::new(Clients::new(&config.build(), None))
                })
                .clone(),
            Identity::Assumed { credentials, .. } => {
                let key = ClientsKey::Assumed {
                    account: at.scope.account.clone(),
                    region: region.clone(),
                };
                let entry = clients.entry(key).or_insert_with(|| {
                    let slot = Arc::new(CredentialsSlot(Mutex::new(sdk_credentials(credentials))));
                    let mut config = self.base.to_builder();
                    config.set_region(Some(Region::new(region.to_string())));
                    config.set_credentials_provider(Some(SharedCredentialsProvider::new(
                        SlotProvider(slot.clone()),
                    )));
                    // The router caches the account's credentials once, for all its regions.
                    config.set_identity_cache(Some(IdentityCache::no_cache()));
                    Arc::new(Clients::new(&config.build(), Some(slot)))
                });
                if let Some(slot) = &entry.credentials {
                    let mut current = slot.0.lock().unwrap();
                    if current.access_key_id() != credentials.access_key_id {
                        *current = sdk_credentials(credentials);
                    }
                }
                entry.clone()
            }
        }
    }
}

/// A shared handle on a [`CredentialsSlot`].
#[derive(Debug)]
struct SlotProvider(Arc<CredentialsSlot>);

impl ProvideCredentials for SlotProvider {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        self.0.provide_credentials()
    }
}

/// SQS's modelled "no such queue" as the code its API reference names, whatever the protocol's
/// spelling.
fn missing_queue(mut error: CallError, missing: bool) -> CallError {
    if missing {
        error.code = missing::QUEUE.to_owned();
    }
    error
}

fn tags<'a>(
    pairs: impl Iterator<Item = (Option<&'a str>, Option<&'a str>)>,
) -> Vec<(String, String)> {
    pairs
        .filter_map(|(k, v)| Some((k?.to_owned(), v?.to_owned())))
        .collect()
}

impl Aws for SdkAws {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }

    fn jitter(&self) -> f64 {
        fastrand::f64()
    }

    async fn assume_role(&self, role_arn: &str) -> Result<Credentials, CallError> {
        let out = self
            .sts
            .assume_role()
            .role_arn(role_arn)
            .role_session_name(SESSION_NAME)
            .send()
            .await
            .map_err(call_error)?;
        let c = out.credentials().ok_or_else(|| {
            CallError::new(
                CallError::RESPONSE,
                "AssumeRole answered without credentials",
            )
        })?;
        let expiry = SystemTime::try_from(*c.expiration()).ok();
        Ok(Credentials::new(
            c.access_key_id(),
            c.secret_access_key(),
            Some(c.session_token().to_owned()),
            expiry,
        ))
    }

    async fn get_role_id(&self, at: &Session, name: &str) -> Result<String, CallError> {
        let out = self
            .clients(at)
            .iam
            .get_role()
            .role_name(name)
            .send()
            .await
            .map_err(call_error)?;
        out.role()
            .map(|r| r.role_id().to_owned())
            .ok_or_else(|| CallError::new(CallError::RESPONSE, "GetRole answered without a role"))
    }

    async fn describe_instances(
        &self,
        at: &Session,
        query: DescribeInstances<'_>,
    ) -> Result<InstancePage, CallError> {
        let clients = self.clients(at);
        let request = clients.ec2.describe_instances();
        let request = match query.filter {
            InstanceFilter::Ids(ids) => request.filters(
                Filter::builder()
                    .name("instance-id")
                    .set_values(Some(ids.iter().map(|id| id.as_str().to_owned()).collect()))
                    .build(),
            ),
            InstanceFilter::TagKey(key) => request
                .filters(Filter::builder().name("tag-key").values(key).build())
                .max_results(SWEEP_PAGE),
        };
        let page = request
            .set_next_token(query.next_token.map(str::to_owned))
            .send()
            .await
            .map_err(call_error)?;
        let instances = page
            .reservations()
            .iter()
            .flat_map(|r| r.instances())
            .filter_map(|i| {
                Some(Tagged {
                    id: InstanceId::parse(i.instance_id()?)?,
                    tags: tags(i.tags().iter().map(|t| (t.key(), t.value()))),
                    // What every answer carries: the interruption record's, at no extra call.
                    described: Some(Described {
                        instance_type: i
                            .instance_type()
                            .map_or_else(String::new, |t| t.as_str().to_owned()),
                        zone: i
                            .placement()
                            .and_then(|p| p.availability_zone())
                            .unwrap_or_default()
                            .to_owned(),
                        capacity: Capacity::of(
                            i.instance_lifecycle().map(|l| l.as_str()),
                            i.capacity_reservation_id(),
                        ),
                    }),
                })
            })
            .collect();
        Ok(InstancePage {
            instances,
            next_token: page
                .next_token()
                .filter(|t| !t.is_empty())
                .map(str::to_owned),
        })
    }

    async fn get_resources(
        &self,
        at: &Session,
        ids: &[InstanceId],
    ) -> Result<Vec<Tagged>, CallError> {
        let clients = self.clients(at);
        let Scope { account, region } = &at.scope;
        let arns = ids
            .iter()
            .map(|id| {
                format!(
                    "arn:{}:ec2:{region}:{account}:instance/{id}",
                    partition(region)
                )
            })
            .collect();
        // AWS answers an ARN list in one page; the local emulator pages it anyway.
        let mut pages = clients
            .tagging
            .get_resources()
            .set_resource_arn_list(Some(arns))
            .into_paginator()
            .send();
        let mut found = Vec::with_capacity(ids.len());
        while let Some(page) = pages.next().await {
            let page = page.map_err(call_error)?;
            found.extend(page.resource_tag_mapping_list().iter().filter_map(|m| {
                Some(Tagged {
                    id: InstanceId::parse(m.resource_arn()?)?,
                    tags: tags(m.tags().iter().map(|t| (Some(t.key()), Some(t.value())))),
                    // The Tagging API returns tags only.
                    described: None,
                })
            }));
        }
        Ok(found)
    }

    async fn get_queue_url(&self, at: &Session, name: &str) -> Result<String, CallError> {
        let clients = self.clients(at);
        match clients.sqs.get_queue_url().queue_name(name).send().await {
            Ok(out) => out.queue_url().map(str::to_owned).ok_or_else(|| {
                CallError::new(CallError::RESPONSE, "GetQueueUrl answered without a URL")
            }),
            Err(e) => {
                let missing = e
                    .as_service_error()
                    .is_some_and(|s| s.is_queue_does_not_exist());
                Err(missing_queue(call_error(e), missing))
            }
        }
    }

    async fn list_queue_tags(
        &self,
        at: &Session,
        url: &str,
    ) -> Result<Vec<(String, String)>, CallError> {
        let clients = self.clients(at);
        let out = clients
            .sqs
            .list_queue_tags()
            .queue_url(url)
            .send()
            .await
            .map_err(call_error)?;
        let mut tags: Vec<(String, String)> = out
            .tags()
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        tags.sort();
        Ok(tags)
    }

    async fn get_queue_policy(&self, at: &Session, url: &str) -> Result<Option<String>, CallError> {
        let clients = self.clients(at);
        let out = clients
            .sqs
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::Policy)
            .send()
            .await
            .map_err(call_error)?;
        Ok(out
            .attributes()
            .and_then(|a| a.get(&QueueAttributeName::Policy))
            .cloned())
    }

    async fn get_parameter(&self, at: &Session, name: &str) -> Result<String, CallError> {
        let clients = self.clients(at);
        match clients.ssm.get_parameter().name(name).send().await {
            Ok(out) => Ok(out
                .parameter()
                .and_then(|p| p.value())
                .unwrap_or_default()
                .to_owned()),
            Err(e) => {
                let missing = e
                    .as_service_error()
                    .is_some_and(|s| s.is_parameter_not_found());
                let mut error = call_error(e);
                if missing {
                    error.code = missing::PARAMETER.to_owned();
                }
                Err(error)
            }
        }
    }

    async fn send_message_batch(
        &self,
        at: &Session,
        url: &str,
        entries: &[SendEntry<'_>],
    ) -> Result<Vec<EntryResult>, CallError> {
        let clients = self.clients(at);
        let entries = entries
            .iter()
            .map(send_entry)
            .collect::<Result<Vec<_>, _>>()?;
        match clients
            .sqs
            .send_message_batch()
            .queue_url(url)
            .set_entries(Some(entries))
            .send()
            .await
        {
            Ok(out) => Ok(entry_results(
                out.successful().iter().map(|ok| ok.id()),
                out.failed(),
            )),
            Err(e) => {
                let missing = e
                    .as_service_error()
                    .is_some_and(|s| s.is_queue_does_not_exist());
                Err(missing_queue(call_error(e), missing))
            }
        }
    }

    async fn change_message_visibility_batch(
        &self,
        at: &Session,
        url: &str,
        entries: &[VisibilityEntry<'_>],
    ) -> Result<Vec<EntryResult>, CallError> {
        let clients = self.clients(at);
        let entries = entries
            .iter()
            .map(|e| {
                ChangeMessageVisibilityBatchRequestEntry::builder()
                    .id(e.id)
                    .receipt_handle(e.receipt_handle)
                    .visibility_timeout(e.timeout_secs.min(43_200) as i32)
                    .build()
                    .map_err(|e| CallError::new("ConstructionFailure", e.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let out = clients
            .sqs
            .change_message_visibility_batch()
            .queue_url(url)
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(call_error)?;
        Ok(entry_results(
            out.successful().iter().map(|ok| ok.id()),
            out.failed(),
        ))
    }
}

/// A batch call's answer per entry: the ids SQS took, then those it failed and why.
fn entry_results<'a>(
    successful: impl Iterator<Item = &'a str>,
    failed: &[aws_sdk_sqs::types::BatchResultErrorEntry],
) -> Vec<EntryResult> {
    let mut results: Vec<EntryResult> = successful
        .map(|id| EntryResult::Ok { id: id.to_owned() })
        .collect();
    results.extend(failed.iter().map(|f| {
        EntryResult::Failed(EntryFailure {
            id: f.id().to_owned(),
            code: f.code().to_owned(),
            message: f.message().unwrap_or_default().to_owned(),
            sender_fault: f.sender_fault(),
        })
    }));
    results
}

fn send_entry(entry: &SendEntry<'_>) -> Result<SendMessageBatchRequestEntry, CallError> {
    let construction = |e: &dyn fmt::Display| CallError::new("ConstructionFailure", e.to_string());
    let mut attributes = HashMap::with_capacity(entry.attributes.len());
    for (name, value) in entry.attributes {
        let value = MessageAttributeValue::builder()
            .data_type("String")
            .string_value(value)
            .build()
            .map_err(|e| construction(&e))?;
        attributes.insert((*name).to_owned(), value);
    }
    SendMessageBatchRequestEntry::builder()
        .id(entry.id)
        .message_body(entry.body)
        .set_message_attributes((!attributes.is_empty()).then_some(attributes))
        .build()
        .map_err(|e| construction(&e))
}
