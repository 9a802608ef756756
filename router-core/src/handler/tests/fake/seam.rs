//! The seam's calls ([`Aws`]) answered from the fake's world: each checks the caller's account
//! as IAM would, takes a scripted fault before answering, and records itself.

use super::*;

impl Aws for FakeAws {
    fn now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(EPOCH_MS) + self.started.elapsed()
    }

    fn jitter(&self) -> f64 {
        self.jitter
    }

    async fn assume_role(&self, role_arn: &str) -> Result<Credentials, CallError> {
        self.call("AssumeRole", None).await?;
        let mut world = self.world();
        if !world.roles.contains(role_arn) {
            return Err(CallError::new(
                "AccessDenied",
                format!("not authorized to perform sts:AssumeRole on {role_arn}"),
            ));
        }
        world.issued += 1;
        let account = role_arn.split(':').nth(4).unwrap_or_default();
        Ok(Credentials::new(
            format!("AKIA-{account}-{}", world.issued),
            "secret",
            Some("token".into()),
            Some(self.now() + Duration::from_secs(3600)),
        ))
    }

    async fn get_role_id(&self, at: &Session, name: &str) -> Result<String, CallError> {
        self.call("GetRole", Some(at)).await?;
        assert_eq!(
            name, "interruption-router-spoke-direct-us-east-1",
            "the direct role's name"
        );
        self.world()
            .direct_roles
            .get(&*at.scope.account)
            .cloned()
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
        let kind = matches!(query.filter, InstanceFilter::TagKey(_)).then_some(SWEEP);
        self.call_as("DescribeInstances", kind, Some(at)).await?;
        match query.filter {
            InstanceFilter::Ids(ids) => Ok(InstancePage {
                instances: self.tagged(&at.scope, ids),
                next_token: None,
            }),
            InstanceFilter::TagKey(key) => {
                let world = self.world();
                let all: Vec<Tagged> = world
                    .instances
                    .get(&(at.scope.account.to_string(), at.scope.region.to_string()))
                    .into_iter()
                    .flatten()
                    .filter(|(_, tags)| tags.iter().any(|(k, _)| k == key))
                    .map(|(id, tags)| Tagged {
                        id: id.clone(),
                        tags: tags.clone(),
                    })
                    .collect();
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
        self.call("GetResources", Some(at)).await?;
        // Untagged instances are not listed.
        Ok(self
            .tagged(&at.scope, ids)
            .into_iter()
            .filter(|t| !t.tags.is_empty())
            .collect())
    }

    async fn get_queue_url(&self, at: &Session, name: &str) -> Result<String, CallError> {
        self.call("GetQueueUrl", Some(at)).await?;
        let answer = self
            .world()
            .queues
            .get(&Self::key(at, name))
            .map(|q| q.url.clone())
            .ok_or_else(|| {
                CallError::new("QueueDoesNotExist", "The specified queue does not exist.")
            });
        self.answered("GetQueueUrl");
        answer
    }

    async fn list_queue_tags(
        &self,
        at: &Session,
        url: &str,
    ) -> Result<Vec<(String, String)>, CallError> {
        self.call("ListQueueTags", Some(at)).await?;
        let key = self.queue_named_by(at, url).ok_or_else(missing_queue)?;
        Ok(self.world().queues[&key].tags.clone())
    }

    async fn get_queue_policy(&self, at: &Session, url: &str) -> Result<Option<String>, CallError> {
        self.call("GetQueueAttributes", Some(at)).await?;
        let key = self.queue_named_by(at, url).ok_or_else(missing_queue)?;
        Ok(self.world().queues[&key].policy.clone())
    }

    async fn get_parameter(&self, at: &Session, name: &str) -> Result<String, CallError> {
        self.call("GetParameter", Some(at)).await?;
        if self.world().parameters.contains(&Self::key(at, name)) {
            Ok("onboarded".into())
        } else {
            Err(CallError::new(
                "ParameterNotFound",
                format!("{name} not found"),
            ))
        }
    }

    async fn send_message_batch(
        &self,
        at: &Session,
        url: &str,
        entries: &[SendEntry<'_>],
    ) -> Result<Vec<EntryResult>, CallError> {
        self.call("SendMessageBatch", Some(at)).await?;
        if entries.len() > 10 {
            return Err(CallError::new("TooManyEntriesInBatchRequest", "at most 10"));
        }
        let key = self.queue_named_by(at, url).ok_or_else(missing_queue)?;
        let broken = self.world().broken_queues.get(&key.2).cloned();
        match broken {
            Some(Fault::Error(e)) => return Err(e),
            Some(Fault::Hang) => {
                tokio::time::sleep(ATTEMPT_TIMEOUT).await;
                return Err(CallError::new(CallError::TIMEOUT, "no answer"));
            }
            Some(Fault::Slow(d)) => tokio::time::sleep(d).await,
            None => {}
        }
        let mut world = self.world();
        let mut results = Vec::new();
        for entry in entries {
            let fault = match world.entry_faults.get_mut(&key.2) {
                Some((left, code, sender_fault)) if *left > 0 => {
                    *left -= 1;
                    Some((code.clone(), *sender_fault))
                }
                _ => None,
            };
            results.push(match fault {
                Some((code, sender_fault)) => EntryResult::Failed(EntryFailure {
                    id: entry.id.to_owned(),
                    message: format!("the fake fails this entry with {code}"),
                    code,
                    sender_fault,
                }),
                None => {
                    world
                        .queues
                        .get_mut(&key)
                        .expect("found above")
                        .messages
                        .push(Held {
                            body: entry.body.to_owned(),
                            attributes: entry
                                .attributes
                                .iter()
                                .map(|(k, v)| (k.to_string(), v.clone()))
                                .collect(),
                        });
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
        _url: &str,
        entries: &[VisibilityEntry<'_>],
    ) -> Result<Vec<EntryResult>, CallError> {
        self.call("ChangeMessageVisibilityBatch", Some(at)).await?;
        let mut world = self.world();
        Ok(entries
            .iter()
            .map(|e| {
                world
                    .visibility
                    .push((e.receipt_handle.to_owned(), e.timeout_secs));
                EntryResult::Ok {
                    id: e.id.to_owned(),
                }
            })
            .collect())
    }
}
