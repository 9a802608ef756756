//! Each of the seam's calls, answered by the world as the session sees it, after the layer of
//! faults has had its say.

use std::time::{Duration, SystemTime};

use super::WorldAws;
use crate::{missing, role_id};
use router_core::aws::{
    Aws, CallError, Credentials, DescribeInstances, EntryFailure, EntryResult, InstanceFilter,
    InstancePage, SendEntry, Session, Tagged, VisibilityEntry, sweep_page,
};
use router_core::event::InstanceId;

/// How long AssumeRole's credentials last (its default `DurationSeconds`).
const SESSION_LIFETIME: Duration = Duration::from_secs(3600);

/// SQS's answer to a ChangeMessageVisibilityBatch entry whose receipt handle no receive gave,
/// or whose message is gone.
pub fn invalid_receipt(entry: &VisibilityEntry<'_>) -> EntryResult {
    EntryResult::Failed(EntryFailure {
        id: entry.id.to_owned(),
        code: "ReceiptHandleIsInvalid".into(),
        message: format!(
            "The input receipt handle \"{}\" is not a valid receipt handle.",
            entry.receipt_handle
        ),
        sender_fault: true,
    })
}

fn missing_queue() -> CallError {
    CallError::new(missing::QUEUE, "The specified queue does not exist.")
}

/// The instances of the view's site, with their tags, that `keep` keeps.
fn instances(view: &crate::World, keep: impl Fn(&[(String, String)]) -> bool) -> Vec<Tagged> {
    view.read(|_, site| {
        site.instances
            .iter()
            .filter(|(_, i)| keep(&i.tags))
            .filter_map(|(id, i)| {
                Some(Tagged {
                    id: InstanceId::parse(id)?,
                    tags: i.tags.clone(),
                    described: Some(i.described.clone()),
                })
            })
            .collect()
    })
}

/// The instances of the view's site among `ids` whose tags `keep` keeps, in the site's order
/// (looked up one by one: an organisation's site holds thousands), described as DescribeInstances
/// describes them when `described`, with their tags alone as the Tagging API answers otherwise.
fn with_ids(
    view: &crate::World,
    ids: &[InstanceId],
    keep: impl Fn(&[(String, String)]) -> bool,
    described: bool,
) -> Vec<Tagged> {
    let mut found: Vec<Tagged> = view.read(|_, site| {
        ids.iter()
            .filter_map(|id| {
                let instance = site.instances.get(id.as_str())?;
                keep(&instance.tags).then(|| Tagged {
                    id: id.clone(),
                    tags: instance.tags.clone(),
                    described: described.then(|| instance.described.clone()),
                })
            })
            .collect()
    });
    found.sort_by(|a, b| a.id.as_str().cmp(b.id.as_str()));
    found.dedup_by(|a, b| a.id == b.id);
    found
}

impl Aws for WorldAws {
    fn now(&self) -> SystemTime {
        self.home.clock()
    }

    fn jitter(&self) -> f64 {
        self.jitter
    }

    async fn assume_role(&self, role_arn: &str) -> Result<Credentials, CallError> {
        let home = self.call("AssumeRole", None, None).await?;
        let session = home.assume_role(role_arn, "interruption-router")?;
        let mut sessions = self.sessions.lock().unwrap();
        let key = format!("ASIA{:016}", sessions.len() + 1);
        sessions.insert(key.clone(), session);
        Ok(Credentials::new(
            key.clone(),
            format!("secret-{key}"),
            Some(format!("token-{key}")),
            Some(self.now() + SESSION_LIFETIME),
        ))
    }

    async fn get_role_id(&self, at: &Session, name: &str) -> Result<String, CallError> {
        let view = self.call("GetRole", None, Some(at)).await?;
        let suffix = format!("/{name}");
        let prefix = format!("arn:aws:iam::{}:role/", view.account());
        view.read(|state, _| {
            state
                .roles
                .values()
                .find(|r| r.arn.starts_with(&prefix) && r.arn.ends_with(&suffix))
                .map(|r| {
                    if r.id.is_empty() {
                        role_id(&r.arn)
                    } else {
                        r.id.clone()
                    }
                })
        })
        .ok_or_else(|| {
            CallError::new(
                "NoSuchEntity",
                format!("The role with name {name} cannot be found."),
            )
        })
    }

    async fn describe_instances(
        &self,
        at: &Session,
        query: DescribeInstances<'_>,
    ) -> Result<InstancePage, CallError> {
        let kind = matches!(query.filter, InstanceFilter::TagKey(_)).then_some(super::SWEEP);
        let view = self.call("DescribeInstances", kind, Some(at)).await?;
        match query.filter {
            // The `instance-id` filter: unknown ids are absent, not an error.
            InstanceFilter::Ids(ids) => Ok(InstancePage {
                instances: with_ids(&view, ids, |_| true, true),
                next_token: None,
            }),
            InstanceFilter::TagKey(key) => {
                let all = instances(&view, |tags| tags.iter().any(|(k, _)| k == key));
                let (instances, next_token) = sweep_page(&all, query.next_token);
                Ok(InstancePage {
                    instances,
                    next_token,
                })
            }
        }
    }

    async fn get_resources(
        &self,
        at: &Session,
        ids: &[InstanceId],
    ) -> Result<Vec<Tagged>, CallError> {
        let view = self.call("GetResources", None, Some(at)).await?;
        // The Tagging API lists tagged resources only.
        Ok(with_ids(&view, ids, |tags| !tags.is_empty(), false))
    }

    async fn get_queue_url(&self, at: &Session, name: &str) -> Result<String, CallError> {
        let view = self.call("GetQueueUrl", None, Some(at)).await?;
        let answer = view
            .read(|_, site| site.queues.get(name).map(|q| q.url.clone()))
            .ok_or_else(missing_queue);
        self.answered("GetQueueUrl");
        answer
    }

    async fn list_queue_tags(
        &self,
        at: &Session,
        url: &str,
    ) -> Result<Vec<(String, String)>, CallError> {
        let view = self.call("ListQueueTags", None, Some(at)).await?;
        view.with_queue(url, |q| q.tags.clone().into_iter().collect())
            .map_err(|_| missing_queue())
    }

    async fn get_queue_policy(&self, at: &Session, url: &str) -> Result<Option<String>, CallError> {
        let view = self.call("GetQueueAttributes", None, Some(at)).await?;
        view.with_queue(url, |q| q.attributes.get("Policy").cloned())
            .map_err(|_| missing_queue())
    }

    async fn get_parameter(&self, at: &Session, name: &str) -> Result<String, CallError> {
        let view = self.call("GetParameter", None, Some(at)).await?;
        view.read(|_, site| site.parameters.get(name).cloned())
            .ok_or_else(|| CallError::new(missing::PARAMETER, format!("{name} not found")))
    }

    async fn send_message_batch(
        &self,
        at: &Session,
        url: &str,
        entries: &[SendEntry<'_>],
    ) -> Result<Vec<EntryResult>, CallError> {
        let view = self.call("SendMessageBatch", None, Some(at)).await?;
        if entries.len() > 10 {
            return Err(CallError::new(
                "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
                "Maximum number of entries per request are 10.",
            ));
        }
        view.sqs_admits(url).map_err(|e| {
            if e.code == missing::QUEUE {
                missing_queue()
            } else {
                e
            }
        })?;
        let name = url.rsplit('/').next().unwrap_or_default().to_owned();
        let broken = self.faults().queues.get(&name).cloned();
        if let Some(fault) = broken {
            fault.play().await?;
        }
        let mut results = Vec::new();
        for entry in entries {
            let refused = self.faults().entry(&name);
            results.push(match refused {
                Some((code, sender_fault)) => EntryResult::Failed(EntryFailure {
                    id: entry.id.to_owned(),
                    message: format!("the model refuses this entry with {code}"),
                    code,
                    sender_fault,
                }),
                None => {
                    let attributes = entry
                        .attributes
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.clone()))
                        .collect();
                    view.sqs_store(url, entry.body, attributes)?;
                    EntryResult::Ok {
                        id: entry.id.to_owned(),
                    }
                }
            });
        }
        Ok(results)
    }

    async fn change_message_visibility_batch(
        &self,
        at: &Session,
        queue_url: &str,
        entries: &[VisibilityEntry<'_>],
    ) -> Result<Vec<EntryResult>, CallError> {
        let view = self
            .call("ChangeMessageVisibilityBatch", None, Some(at))
            .await?;
        view.with_queue(queue_url, |_| ())
            .map_err(|_| missing_queue())?;
        let now = view.clock();
        let name = queue_url.rsplit('/').next().unwrap_or_default().to_owned();
        let mut faults = self.faults();
        Ok(entries
            .iter()
            .map(|e| {
                faults
                    .visibility
                    .push((e.receipt_handle.to_owned(), e.timeout_secs));
                // The message the handle's receive returned, hidden until then; a handle no
                // receive gave (or a deleted message's) is refused, as SQS refuses it.
                let changed = view.site(|site| {
                    site.queues.get_mut(&name).is_some_and(|q| {
                        let hide = Duration::from_secs(u64::from(e.timeout_secs));
                        q.messages.change_visibility(e.receipt_handle, now, hide)
                    })
                });
                if changed {
                    EntryResult::Ok {
                        id: e.id.to_owned(),
                    }
                } else {
                    invalid_receipt(e)
                }
            })
            .collect())
    }
}
