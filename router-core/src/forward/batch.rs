//! What one copy for one cluster's queue is, and how copies are packed into SendMessageBatch
//! calls within SQS's limits (10 entries, 256 KiB per call).

use std::{collections::HashMap, sync::Arc};

use crate::{accounts::Place, event::Kind};

/// SendMessageBatch limits.
pub const MAX_BATCH_ENTRIES: usize = 10;
pub const MAX_BATCH_BYTES: usize = 256 * 1024;

/// Where a message goes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Destination {
    /// The Karpenter queue of `cluster`, in `place`'s account and region, written as its sender.
    Cluster { place: Place, cluster: Arc<str> },
    /// `DEAD_LETTER_QUEUE_URL`, written as the function's own role (`home`).
    DeadLetter { home: Place },
}

/// One SQS message to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub destination: Destination,
    pub body: String,
    /// String message attributes (`reason` and context on dead-lettered messages).
    pub attributes: Vec<(&'static str, String)>,
    /// The event's kind, for a copy to a cluster (which may decline it); `None` for a dead
    /// letter, which is always sent.
    pub kind: Option<Kind>,
}

impl Message {
    /// The size SQS counts against the 256 KiB limit: body plus attribute names, types and values.
    pub fn size(&self) -> usize {
        self.body.len()
            + self
                .attributes
                .iter()
                .map(|(k, v)| k.len() + "String".len() + v.len())
                .sum::<usize>()
    }
}

/// Groups messages into SendMessageBatch calls: same destination, at most [`MAX_BATCH_ENTRIES`]
/// entries and [`MAX_BATCH_BYTES`] per call, message order kept within a destination. A message
/// larger than the limit on its own gets a batch of its own (SQS will refuse it, per entry).
pub fn plan_batches(messages: &[Message]) -> Vec<Vec<usize>> {
    let mut order: Vec<&Destination> = Vec::new();
    let mut by_destination: HashMap<&Destination, Vec<usize>> = HashMap::new();
    for (i, m) in messages.iter().enumerate() {
        by_destination
            .entry(&m.destination)
            .or_insert_with(|| {
                order.push(&m.destination);
                Vec::new()
            })
            .push(i);
    }
    let mut batches = Vec::with_capacity(messages.len().div_ceil(MAX_BATCH_ENTRIES));
    for destination in order {
        let mut batch: Vec<usize> = Vec::with_capacity(MAX_BATCH_ENTRIES);
        let mut bytes = 0;
        for i in by_destination.remove(destination).unwrap_or_default() {
            let size = messages[i].size();
            if !batch.is_empty()
                && (batch.len() == MAX_BATCH_ENTRIES || bytes + size > MAX_BATCH_BYTES)
            {
                batches.push(std::mem::take(&mut batch));
                bytes = 0;
            }
            batch.push(i);
            bytes += size;
        }
        if !batch.is_empty() {
            batches.push(batch);
        }
    }
    batches
}
