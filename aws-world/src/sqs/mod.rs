//! SQS's part of the model: sends judged by the queue's policy, a standard queue's receives,
//! receipt handles and redrive ([`Messages`], `messages.rs`, which the simulation's ingest queue
//! uses too), and the per-minute counts CloudWatch publishes for a queue.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub mod messages;

pub use messages::{Held, Messages, Receive};

use super::{ModelMessage, ModelQueue, Site, World, policy, uuid_like};
use aws_model::policy::{Decision, Principal, Request, evaluate};
use aws_model::resources::{Received, missing};
use router_core::aws::CallError;

fn minute(at: SystemTime) -> u64 {
    let secs = at.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    secs - secs % 60
}

/// A queue's RedrivePolicy attribute, read: the dead-letter queue (by name: the model's are in
/// the same account and region) and the receives a message gets before it goes there.
struct Redrive {
    dead_letter: String,
    max_receives: u32,
}

impl Redrive {
    /// The queue's, if it has one SQS would act on.
    fn of(queue: &ModelQueue) -> Option<Self> {
        let policy: serde_json::Value =
            serde_json::from_str(queue.attributes.get("RedrivePolicy")?).ok()?;
        let count = &policy["maxReceiveCount"];
        let max_receives = count.as_u64().or_else(|| count.as_str()?.parse().ok())?;
        let arn = policy["deadLetterTargetArn"].as_str()?;
        Some(Self {
            dead_letter: arn.rsplit(':').next()?.to_owned(),
            max_receives: u32::try_from(max_receives).ok()?,
        })
    }
}

/// Moves what a redrive took out of a queue into its dead-letter queue, each as it was sent.
fn redrive_to(site: &mut Site, redrive: Option<Redrive>, moved: Vec<(ModelMessage, SystemTime)>) {
    let Some(dead_letter) = redrive.and_then(|r| site.queues.get_mut(&r.dead_letter)) else {
        return;
    };
    for (message, sent) in moved {
        dead_letter.messages.send(message, sent);
    }
}

/// A receive as the seam hands it on.
fn received(m: messages::Received<SystemTime, ModelMessage>) -> Received {
    Received {
        message_id: m.payload.id,
        body: m.payload.body,
        receipt_handle: m.handle,
        receive_count: Some(u64::from(m.receives)),
        sent_ms: m
            .sent
            .duration_since(UNIX_EPOCH)
            .ok()
            .map(|d| d.as_millis() as u64),
    }
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
            let message = ModelMessage {
                attributes,
                ..ModelMessage::new(id.clone(), body)
            };
            queue.messages.send(message, now);
            Ok(id)
        })
    }

    /// ReceiveMessage of up to 10 visible messages, oldest first, hidden `hide_secs`; what the
    /// queue's redrive policy moves instead goes to its dead-letter queue.
    pub fn sqs_receive(&self, url: &str, hide_secs: i32) -> Result<Vec<Received>, CallError> {
        let now = self.clock();
        let hide = Duration::from_secs(hide_secs.max(0) as u64);
        let name = self.queue_named(url)?;
        Ok(self.site(|site| {
            let queue = site.queues.get_mut(&name).expect("found above");
            let redrive = Redrive::of(queue);
            let receive =
                queue
                    .messages
                    .receive(now, 10, hide, redrive.as_ref().map(|r| r.max_receives));
            queue.counted.entry(minute(now)).or_default().0 += receive.received.len() as f64;
            redrive_to(site, redrive, receive.redriven);
            receive.received.into_iter().map(received).collect()
        }))
    }

    /// The name of the queue at `url` in this view's site, or SQS's answer that there is none.
    fn queue_named(&self, url: &str) -> Result<String, CallError> {
        self.with_queue(url, |_| ())?;
        Ok(url.rsplit('/').next().unwrap_or_default().to_owned())
    }

    /// ChangeMessageVisibility to 0 of what these handles name.
    pub fn sqs_release(&self, url: &str, handles: &[String]) -> Result<(), CallError> {
        let now = self.clock();
        self.in_queue(url, |queue| {
            for handle in handles {
                queue
                    .messages
                    .change_visibility(handle, now, Duration::ZERO);
            }
            Ok(())
        })
    }

    /// DeleteMessage by receipt handle (an unknown handle deletes nothing, as SQS answers).
    pub fn sqs_delete(&self, url: &str, handle: &str) -> Result<(), CallError> {
        let now = self.clock();
        self.in_queue(url, |queue| {
            if queue.messages.delete(handle) {
                queue.counted.entry(minute(now)).or_default().1 += 1.0;
            }
            Ok(())
        })
    }

    /// What an event source mapping's receive of one record gives: the message `id` of queue
    /// `queue` (sent now with `body` if the queue does not hold it, as a record first delivered),
    /// received: its receive count up, hidden for the queue's visibility timeout, with a new
    /// receipt handle, which this returns. `None` when there is no such queue, or when its
    /// redrive policy moved the message to the dead-letter queue instead. The router's decision
    /// tests hand it records so.
    pub fn mapping_receive(&self, queue: &str, id: &str, body: &str) -> Option<String> {
        let now = self.clock();
        self.site(|site| {
            let model = site.queues.get_mut(queue)?;
            let hide: u64 = model
                .attributes
                .get("VisibilityTimeout")
                .and_then(|v| v.parse().ok())
                .unwrap_or(30);
            let seq = match model.messages.find(|m| m.id == id) {
                Some(seq) => seq,
                None => model
                    .messages
                    .send(ModelMessage::new(id.to_owned(), body), now),
            };
            let redrive = Redrive::of(model);
            let max = redrive.as_ref().map(|r| r.max_receives);
            match model
                .messages
                .receive_at(seq, now, Duration::from_secs(hide), max)?
            {
                Ok(received) => {
                    model.counted.entry(minute(now)).or_default().0 += 1.0;
                    Some(received.handle)
                }
                Err(moved) => {
                    redrive_to(site, redrive, vec![moved]);
                    None
                }
            }
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
