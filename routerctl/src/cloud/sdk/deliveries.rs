//! [`Deliveries`] over the SDK: EC2's instances, SQS's batch send, Lambda's invoke.

use aws_clients::aws::Aws;

use super::{Blob, Filter, InvocationType, SendMessageBatchRequestEntry, call_error, named};
use crate::cloud::{
    CallError,
    deliveries::{Deliveries, Entry, Instance, Instances, Invoked},
    missing,
};

impl Deliveries for Aws {
    async fn instances(&self, which: Instances<'_>) -> Result<Vec<Instance>, CallError> {
        let request = self.ec2.describe_instances();
        let request = match which {
            Instances::Ids(ids) => request.set_instance_ids(Some(ids.to_vec())),
            Instances::Tagged { key, value, states } => {
                let tag = match value {
                    Some(value) => Filter::builder().name(format!("tag:{key}")).values(value),
                    None => Filter::builder().name("tag-key").values(key),
                };
                let states = states
                    .iter()
                    .fold(Filter::builder().name("instance-state-name"), |f, s| {
                        f.values(*s)
                    });
                request.filters(tag.build()).filters(states.build())
            }
        };
        let mut found = Vec::new();
        let mut pages = request.into_paginator().send();
        while let Some(page) = pages.next().await {
            for reservation in page.map_err(call_error)?.reservations() {
                let owner = reservation.owner_id().unwrap_or_default();
                for instance in reservation.instances() {
                    found.push(Instance {
                        id: instance.instance_id().unwrap_or_default().to_owned(),
                        owner: owner.to_owned(),
                        tags: instance
                            .tags()
                            .iter()
                            .map(|t| {
                                (
                                    t.key().unwrap_or_default().to_owned(),
                                    t.value().unwrap_or_default().to_owned(),
                                )
                            })
                            .collect(),
                    });
                }
            }
        }
        Ok(found)
    }

    async fn send_batch(
        &self,
        url: &str,
        entries: &[(String, String)],
    ) -> Result<Vec<(String, Entry)>, CallError> {
        let entries = entries
            .iter()
            .map(|(id, body)| {
                SendMessageBatchRequestEntry::builder()
                    .id(id)
                    .message_body(body)
                    .build()
                    .map_err(|e| CallError::new("InvalidParameterValue", e.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let out = self
            .sqs
            .send_message_batch()
            .queue_url(url)
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(call_error)?;
        let sent = out
            .successful()
            .iter()
            .map(|s| (s.id().to_owned(), Entry::Sent(s.message_id().to_owned())));
        let failed = out.failed().iter().map(|f| {
            (
                f.id().to_owned(),
                Entry::Failed {
                    code: f.code().to_owned(),
                    message: f.message().unwrap_or_default().to_owned(),
                    sender_fault: f.sender_fault(),
                },
            )
        });
        Ok(sent.chain(failed).collect())
    }

    async fn invoke(&self, function: &str, payload: String) -> Result<Invoked, CallError> {
        match self
            .lambda
            .invoke()
            .function_name(function)
            .invocation_type(InvocationType::RequestResponse)
            .payload(Blob::new(payload))
            .send()
            .await
        {
            Ok(out) => Ok(Invoked {
                function_error: out.function_error().map(str::to_owned),
                payload: out
                    .payload()
                    .map(|p| p.as_ref().to_vec())
                    .unwrap_or_default(),
            }),
            Err(e) => {
                let gone = e
                    .as_service_error()
                    .is_some_and(|s| s.is_resource_not_found_exception());
                Err(named(call_error(e), gone, missing::RESOURCE))
            }
        }
    }
}
