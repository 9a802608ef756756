//! A queue as SQS describes it (its URL, ARN and attributes), read once: verify checks the router's
//! and the tenants' queues with it, adopt the old queues it looks through and retires.

use std::collections::HashMap;

use crate::cloud::{Cloud, missing};
use aws_model::policy::{Decision, Policy, Principal, Request, evaluate};

/// A queue as SQS describes it.
#[derive(Debug, Clone)]
pub(crate) struct Queue {
    pub name: String,
    pub arn: String,
    pub url: String,
    pub attributes: HashMap<String, String>,
}

impl Queue {
    /// An attribute by its name in SQS's API (`Policy`, `KmsMasterKeyId`, …).
    pub fn attribute(&self, name: &str) -> Option<&str> {
        self.attributes.get(name).map(String::as_str)
    }

    /// What the queue policy `policy` decides for the AWS principal `principal` doing `action` on
    /// this queue over HTTPS, as the SDKs call.
    pub fn decision(&self, policy: &Policy, principal: &str, action: &str) -> Decision {
        let context = [
            ("aws:PrincipalArn", principal),
            ("aws:SecureTransport", "true"),
        ];
        evaluate(
            std::slice::from_ref(policy),
            &Request {
                principal: Principal::Aws(principal),
                action,
                resource: &self.arn,
                context: &context,
            },
        )
    }
}

/// GetQueueUrl and GetQueueAttributes (`All`) of queue `name`: what is wrong says which call and
/// what SQS answered.
pub(crate) async fn load_queue(aws: &impl Cloud, name: &str) -> Result<Queue, String> {
    let url = match aws.queue_url(name).await {
        Ok(url) => url,
        Err(e) if e.code == missing::QUEUE => {
            return Err(format!("queue {name} does not exist in {}", aws.region()));
        }
        Err(e) => return Err(format!("GetQueueUrl {name}: {e}")),
    };
    let attributes: HashMap<String, String> = aws
        .queue_attributes(&url)
        .await
        .map_err(|e| format!("GetQueueAttributes {name}: {e}"))?;
    let arn = attributes.get("QueueArn").cloned().unwrap_or_default();
    Ok(Queue {
        name: name.to_owned(),
        arn,
        url,
        attributes,
    })
}
