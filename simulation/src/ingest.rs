//! The ingest queue the event source mapping polls: an SQS standard queue as aws-world's
//! [`Messages`] keeps one (visibility, receive counts, receipt handles, redrive past
//! `maxReceiveCount`: taught there, once), on tokio's paused clock, with what the simulation
//! itself needs around it: a waiter woken when a message may be visible (a long poll), the
//! duplicates SQS's at-least-once delivery may hold ([`Ingest::deliver_twice`]), and the record
//! of what entered and what was redriven that the run is judged by.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
    time::Duration,
};

use aws_world::sqs::Messages;
use tokio::{sync::Notify, time::Instant};

/// A message as the rule delivered it.
#[derive(Debug, Clone)]
struct Sent {
    body: Arc<str>,
    event_id: Arc<str>,
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
    messages: Messages<Instant, Sent>,
    /// Event ids SQS moved to the DLQ by redrive (no reason attached).
    redriven: Vec<Arc<str>>,
    /// When each event first entered the queue.
    entered: HashMap<Arc<str>, Instant>,
    /// Events SQS will hold twice (standard queues deliver at least once).
    twice: HashSet<Arc<str>>,
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
        let now = Instant::now();
        let mut state = self.state.lock().unwrap();
        let copies = if state.twice.remove(&event_id) { 2 } else { 1 };
        state.entered.entry(event_id.clone()).or_insert(now);
        let sent = Sent {
            body,
            event_id,
            sender,
        };
        for _ in 0..copies {
            state.messages.send(sent.clone(), now);
        }
        drop(state);
        self.changed.notify_waiters();
    }

    /// Receives up to `max` visible messages, oldest first, each hidden for the visibility
    /// timeout; a message past `maxReceiveCount` is moved to the dead-letter queue instead.
    pub fn take(&self, max: usize) -> Vec<Received> {
        let now = Instant::now();
        let mut state = self.state.lock().unwrap();
        let receive = state.messages.receive(
            now,
            max,
            self.visibility_timeout,
            Some(self.max_receive_count),
        );
        let redriven = receive.redriven.into_iter().map(|(sent, _)| sent.event_id);
        state.redriven.extend(redriven);
        receive
            .received
            .into_iter()
            .map(|m| Received {
                id: m.seq,
                receipt: m.handle,
                body: m.payload.body,
                receive_count: m.receives,
                sent_at: m.sent,
                first_receive: m.first_receive,
                sender: m.payload.sender,
            })
            .collect()
    }

    /// Deletes a received message (its batch answered it done).
    pub fn delete(&self, receipt: &str) {
        self.state.lock().unwrap().messages.delete(receipt);
    }

    /// ChangeMessageVisibility: `false` for a receipt that is not the message's latest.
    pub fn change_visibility(&self, receipt: &str, timeout: Duration) -> bool {
        let now = Instant::now();
        let changed =
            (self.state.lock().unwrap().messages).change_visibility(receipt, now, timeout);
        if changed {
            self.changed.notify_waiters();
        }
        changed
    }

    /// Messages visible now.
    pub fn backlog(&self) -> usize {
        self.state.lock().unwrap().messages.visible(Instant::now())
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
        let next = self.state.lock().unwrap().messages.next_visible();
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
