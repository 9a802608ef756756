//! SQS's part of the model: sends judged by the queue's policy, receives that hide what they
//! return for the visibility asked, receive counts, deletes by receipt handle, and the per-minute
//! counts CloudWatch publishes for a queue.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{ModelMessage, ModelQueue, World, policy, uuid_like};
use aws_model::policy::{Decision, Principal, Request, evaluate};
use aws_model::resources::{Received, missing};
use router_core::aws::CallError;

fn minute(at: SystemTime) -> u64 {
    let secs = at.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    secs - secs % 60
}

fn gone() -> CallError {
    CallError::new(
        missing::QUEUE,
        "The specified queue does not exist for this wsdl version.",
    )
}

impl World {
    /// `act` on the queue at `url` in this view's site, or SQS's answer that there is none.
    fn in_queue<T>(
        &self,
        url: &str,
        act: impl FnOnce(&mut ModelQueue) -> Result<T, CallError>,
    ) -> Result<T, CallError> {
        let name = url.rsplit('/').next().unwrap_or_default().to_owned();
        self.site(|site| {
            let queue = site
                .queues
                .get_mut(&name)
                .filter(|q| q.url == url)
                .ok_or_else(gone)?;
            act(queue)
        })
    }

    /// SendMessage as the caller: refused when the queue's policy denies the caller outright
    /// (the caller's own identity policies are taken to allow it).
    pub fn sqs_send(&self, url: &str, body: &str) -> Result<String, CallError> {
        self.sqs_admits(url)?;
        self.sqs_store(url, body, Vec::new())
    }

    /// Whether the queue's policy lets this view's caller send to it: the queue's absence, or an
    /// explicit deny for the caller, as SQS answers either before storing anything.
    pub fn sqs_admits(&self, url: &str) -> Result<(), CallError> {
        let (text, arn) = self.with_queue(url, |queue| {
            let attribute = |name: &str| queue.attributes.get(name).cloned();
            (
                attribute("Policy"),
                attribute("QueueArn").unwrap_or_default(),
            )
        })?;
        let Some(text) = text else {
            return Ok(());
        };
        let parsed: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        let Ok(queue_policy) = policy("queue policy", &parsed) else {
            return Ok(());
        };
        let context = [
            ("aws:PrincipalArn", self.caller.as_str()),
            ("aws:SecureTransport", "true"),
        ];
        let decision = evaluate(
            std::slice::from_ref(&queue_policy),
            &Request {
                principal: Principal::Aws(&self.caller),
                action: "sqs:SendMessage",
                resource: &arn,
                context: &context,
            },
        );
        if matches!(decision, Decision::Denied { .. }) {
            return Err(CallError::new(
                "AccessDenied",
                format!(
                    "User: {} is not authorized to perform: sqs:sendmessage on resource: \
                     {arn} with an explicit deny in a resource-based policy",
                    self.caller
                ),
            ));
        }
        Ok(())
    }

    /// A message stored in the queue now, with its message attributes: its id.
    pub fn sqs_store(
        &self,
        url: &str,
        body: &str,
        attributes: Vec<(String, String)>,
    ) -> Result<String, CallError> {
        let now = self.clock();
        self.in_queue(url, |queue| {
            let id = uuid_like(&format!("{url}{}{body}", queue.messages.len()));
            queue.messages.push(ModelMessage {
                attributes,
                ..ModelMessage::new(id.clone(), body, now)
            });
            Ok(id)
        })
    }

    /// ReceiveMessage of up to 10 visible messages, oldest first, hidden `hide_secs`.
    pub fn sqs_receive(&self, url: &str, hide_secs: i32) -> Result<Vec<Received>, CallError> {
        let now = self.clock();
        self.in_queue(url, |queue| {
            let mut received = Vec::new();
            for message in queue
                .messages
                .iter_mut()
                .filter(|m| m.visible_at <= now)
                .take(10)
            {
                message.receives += 1;
                message.visible_at = now + Duration::from_secs(hide_secs.max(0) as u64);
                message.handle = uuid_like(&format!("{}{}", message.id, message.receives));
                received.push(Received {
                    message_id: message.id.clone(),
                    body: message.body.clone(),
                    receipt_handle: message.handle.clone(),
                    receive_count: Some(u64::from(message.receives)),
                    sent_ms: message
                        .sent
                        .duration_since(UNIX_EPOCH)
                        .ok()
                        .map(|d| d.as_millis() as u64),
                });
            }
            queue.counted.entry(minute(now)).or_default().0 += received.len() as f64;
            Ok(received)
        })
    }

    /// ChangeMessageVisibility to 0 of what these handles name.
    pub fn sqs_release(&self, url: &str, handles: &[String]) -> Result<(), CallError> {
        let now = self.clock();
        self.in_queue(url, |queue| {
            for message in queue.messages.iter_mut() {
                if handles.contains(&message.handle) {
                    message.visible_at = now;
                }
            }
            Ok(())
        })
    }

    /// DeleteMessage by receipt handle (an unknown handle deletes nothing, as SQS answers).
    pub fn sqs_delete(&self, url: &str, handle: &str) -> Result<(), CallError> {
        let now = self.clock();
        self.in_queue(url, |queue| {
            let before = queue.messages.len();
            queue.messages.retain(|m| m.handle != handle);
            let deleted = (before - queue.messages.len()) as f64;
            queue.counted.entry(minute(now)).or_default().1 += deleted;
            Ok(())
        })
    }

    /// What an event source mapping's receive of one record gives: the message `id` of queue
    /// `queue` (sent now with `body` if the queue does not hold it, as a record first delivered),
    /// received: its receive count up, hidden for the queue's visibility timeout, with a new
    /// receipt handle, which this returns. The router's decision tests hand it records so.
    pub fn mapping_receive(&self, queue: &str, id: &str, body: &str) -> Option<String> {
        let now = self.clock();
        self.site(|site| {
            let queue = site.queues.get_mut(queue)?;
            let hide: u64 = queue
                .attributes
                .get("VisibilityTimeout")
                .and_then(|v| v.parse().ok())
                .unwrap_or(30);
            if !queue.messages.iter().any(|m| m.id == id) {
                queue
                    .messages
                    .push(ModelMessage::new(id.to_owned(), body, now));
            }
            let message = queue.messages.iter_mut().find(|m| m.id == id)?;
            message.receives += 1;
            message.visible_at = now + Duration::from_secs(hide);
            message.handle = uuid_like(&format!("{}{}{:?}", message.id, message.receives, now));
            queue.counted.entry(minute(now)).or_default().0 += 1.0;
            Some(message.handle.clone())
        })
    }

    /// The mapping's delete of a record the function did not hand back.
    pub fn mapping_delete(&self, queue: &str, handle: &str) {
        if let Some(url) = self.site(|site| site.queues.get(queue).map(|q| q.url.clone())) {
            let _ = self.sqs_delete(&url, handle);
        }
    }

    /// A reader of queue `name` (Karpenter's controller polling it): every visible message is
    /// received and deleted now; their bodies.
    pub fn take(&self, queue: &str) -> Vec<String> {
        let Some(url) = self.site(|site| site.queues.get(queue).map(|q| q.url.clone())) else {
            return Vec::new();
        };
        let mut taken = Vec::new();
        while let Ok(received) = self.sqs_receive(&url, 30) {
            if received.is_empty() {
                break;
            }
            for message in received {
                let _ = self.sqs_delete(&url, &message.receipt_handle);
                taken.push(message.body);
            }
        }
        taken
    }

    /// [`World::take`], counted.
    pub fn drain(&self, queue: &str) -> usize {
        self.take(queue).len()
    }
}
