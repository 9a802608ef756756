//! The ingest queue, as SQS keeps a standard queue: a received message is invisible for the
//! visibility timeout (or what ChangeMessageVisibility sets), deleted when its batch succeeds, and
//! moved to the dead-letter queue on the receive past `maxReceiveCount` (the redrive policy).

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::{sync::Notify, time::Instant};

/// One message as SQS holds it.
#[derive(Debug, Clone)]
struct Message {
    body: Arc<str>,
    event_id: Arc<str>,
    sent_at: Instant,
    visible_at: Instant,
    receive_count: u32,
    first_receive: Option<Instant>,
    receipt: Option<String>,
    sender: Option<Arc<str>>,
}

/// A message as a receive hands it out.
#[derive(Debug, Clone)]
pub struct Received {
    pub id: u64,
    pub receipt: String,
    pub body: Arc<str>,
    pub receive_count: u32,
    pub sent_at: Instant,
    pub first_receive: Instant,
    /// Its SenderId when a member's direct rule sent it (the direct queue's records); `None`
    /// for the hub bus's and default bus's rules (the ingest queue's).
    pub sender: Option<Arc<str>>,
}

#[derive(Default)]
struct State {
    next_id: u64,
    messages: BTreeMap<u64, Message>,
    /// (when visible, id) of every message.
    visible: BTreeSet<(Instant, u64)>,
    receipts: HashMap<String, u64>,
    /// Event ids SQS moved to the DLQ by redrive (no reason attached).
    redriven: Vec<Arc<str>>,
    /// When each event first entered the queue.
    entered: HashMap<Arc<str>, Instant>,
    /// Events SQS will hold twice (standard queues deliver at least once).
    twice: std::collections::HashSet<Arc<str>>,
}

pub struct Ingest {
    state: Mutex<State>,
    changed: Notify,
    visibility_timeout: Duration,
    max_receive_count: u32,
}

impl Ingest {
    /// base.yaml's queue: 180 s visibility, redrive after 20 receives.
    pub fn new(visibility_timeout: Duration, max_receive_count: u32) -> Self {
        Self {
            state: Mutex::default(),
            changed: Notify::new(),
            visibility_timeout,
            max_receive_count,
        }
    }

    /// These events will be held twice, as two messages: what SQS's at-least-once delivery
    /// allows ([`crate::faults`]).
    pub fn deliver_twice(&self, events: impl IntoIterator<Item = Arc<str>>) {
        self.state.lock().unwrap().twice.extend(events);
    }

    /// A rule delivered `body` (the event `event_id`).
    pub fn push(&self, body: Arc<str>, event_id: Arc<str>) {
        self.push_from(body, event_id, None);
    }

    /// A rule delivered `body` as `sender` (a member's direct rule: its role's SenderId), or as
    /// EventBridge itself (`None`).
    pub fn push_from(&self, body: Arc<str>, event_id: Arc<str>, sender: Option<Arc<str>>) {
        let twice = self.state.lock().unwrap().twice.remove(&event_id);
        self.store(body.clone(), event_id.clone(), sender.clone());
        if twice {
            self.store(body, event_id, sender);
        }
    }

    fn store(&self, body: Arc<str>, event_id: Arc<str>, sender: Option<Arc<str>>) {
        let now = Instant::now();
        let mut state = self.state.lock().unwrap();
        let id = state.next_id;
        state.next_id += 1;
        state.entered.entry(event_id.clone()).or_insert(now);
        state.messages.insert(
            id,
            Message {
                body,
                event_id,
                sent_at: now,
                visible_at: now,
                receive_count: 0,
                first_receive: None,
                receipt: None,
                sender,
            },
        );
        state.visible.insert((now, id));
        drop(state);
        self.changed.notify_waiters();
    }

    /// Receives up to `max` visible messages, oldest first. A message received once more than
    /// `maxReceiveCount` times is moved to the dead-letter queue instead.
    pub fn take(&self, max: usize) -> Vec<Received> {
        let now = Instant::now();
        let mut state = self.state.lock().unwrap();
        let mut taken = Vec::new();
        while taken.len() < max {
            let Some(&(at, id)) = state.visible.first() else {
                break;
            };
            if at > now {
                break;
            }
            state.visible.pop_first();
            let max_receive = self.max_receive_count;
            let timeout = self.visibility_timeout;
            let Some(message) = state.messages.get_mut(&id) else {
                continue;
            };
            if message.receive_count >= max_receive {
                let event = message.event_id.clone();
                state.messages.remove(&id);
                state.redriven.push(event);
                continue;
            }
            message.receive_count += 1;
            let first = *message.first_receive.get_or_insert(now);
            message.visible_at = now + timeout;
            let receipt = format!("{id}-{}", message.receive_count);
            let old = message.receipt.replace(receipt.clone());
            let received = Received {
                id,
                receipt: receipt.clone(),
                body: message.body.clone(),
                receive_count: message.receive_count,
                sent_at: message.sent_at,
                first_receive: first,
                sender: message.sender.clone(),
            };
            let visible_at = message.visible_at;
            if let Some(old) = old {
                state.receipts.remove(&old);
            }
            state.visible.insert((visible_at, id));
            state.receipts.insert(receipt, id);
            taken.push(received);
        }
        taken
    }

    /// Deletes a received message (its batch answered it done).
    pub fn delete(&self, receipt: &str) {
        let mut state = self.state.lock().unwrap();
        if let Some(id) = state.receipts.remove(receipt)
            && let Some(message) = state.messages.remove(&id)
        {
            state.visible.remove(&(message.visible_at, id));
        }
    }

    /// ChangeMessageVisibility: `false` for a receipt that is not the message's latest.
    pub fn change_visibility(&self, receipt: &str, timeout: Duration) -> bool {
        let now = Instant::now();
        let mut state = self.state.lock().unwrap();
        let Some(&id) = state.receipts.get(receipt) else {
            return false;
        };
        let Some(message) = state.messages.get_mut(&id) else {
            return false;
        };
        let old = message.visible_at;
        message.visible_at = now + timeout;
        let new = message.visible_at;
        state.visible.remove(&(old, id));
        state.visible.insert((new, id));
        drop(state);
        self.changed.notify_waiters();
        true
    }

    /// Messages visible now.
    pub fn backlog(&self) -> usize {
        let now = Instant::now();
        let state = self.state.lock().unwrap();
        state
            .visible
            .iter()
            .take_while(|(at, _)| *at <= now)
            .count()
    }

    /// Messages in the queue, visible or not.
    pub fn len(&self) -> usize {
        self.state.lock().unwrap().messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waits until a message may be visible (one arrives, or one's visibility runs out), or
    /// `until`.
    pub async fn wait(&self, until: Instant) {
        let notified = self.changed.notified();
        let next = {
            let state = self.state.lock().unwrap();
            state.visible.first().map(|(at, _)| *at)
        };
        let wake = next.map_or(until, |at| at.min(until));
        if wake <= Instant::now() {
            return;
        }
        tokio::select! {
            biased;
            () = notified => {}
            () = tokio::time::sleep_until(wake) => {}
        }
    }

    /// Wakes every waiter (the run is over).
    pub fn wake_all(&self) {
        self.changed.notify_waiters();
    }

    pub fn redriven(&self) -> Vec<Arc<str>> {
        self.state.lock().unwrap().redriven.clone()
    }

    /// When each event first entered the queue.
    pub fn entered(&self) -> HashMap<Arc<str>, Instant> {
        self.state.lock().unwrap().entered.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_received_message_hides_for_its_visibility_and_is_redriven_past_its_receives() {
        let q = Ingest::new(Duration::from_secs(180), 2);
        q.push(Arc::from("b"), Arc::from("e"));
        let first = q.take(10);
        assert_eq!(first.len(), 1);
        assert!(q.take(10).is_empty(), "invisible while being processed");
        assert!(q.change_visibility(&first[0].receipt, Duration::from_secs(2)));
        tokio::time::advance(Duration::from_secs(2)).await;
        let second = q.take(10);
        assert_eq!(second[0].receive_count, 2);
        assert!(
            !q.change_visibility(&first[0].receipt, Duration::ZERO),
            "a stale receipt"
        );
        tokio::time::advance(Duration::from_secs(180)).await;
        assert!(q.take(10).is_empty(), "the third receive redrives it");
        assert_eq!(q.redriven(), [Arc::from("e")]);
        assert!(q.is_empty());
    }
}
