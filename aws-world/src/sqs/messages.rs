//! What a standard SQS queue does with its messages, taught once: the model's queues
//! ([`crate::ModelQueue`]) and the simulation's ingest queue both hold their messages in a
//! [`Messages`], each with a payload of its own and on a clock of its own (the world's
//! `SystemTime`, the simulation's tokio `Instant`).
//!
//! The semantics, from the SQS Developer Guide:
//!
//! * a receive returns up to its maximum of the messages visible now, in the order they were sent
//!   (standard queues promise best-effort order; moto and SQS both hand out the oldest first), and
//!   hides each for the visibility timeout asked ("Amazon SQS visibility timeout");
//! * each receive gives the message a new receipt handle; only the latest deletes it or changes
//!   its visibility (an older one is refused by ChangeMessageVisibility, and deletes nothing);
//! * a redrive policy moves a message to the dead-letter queue on the receive after its
//!   `maxReceiveCount`-th ("when the ReceiveCount for a message exceeds the maxReceiveCount for a
//!   queue, Amazon SQS moves the message to a dead-letter queue"): that receive does not return
//!   it, and the message keeps its payload and when it was sent (retention counts from there).
//!
//! Every operation takes `now`; a message hidden until then is visible again from then. The index
//! keeps each receive and delete logarithmic in the queue's length, as an organisation's storm
//! (tens of thousands of messages in flight) needs.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    ops::{Add, Deref},
    time::Duration,
};

/// A message as the queue holds it: its payload and SQS's bookkeeping.
#[derive(Debug, Clone)]
pub struct Held<At, P> {
    pub payload: P,
    pub sent: At,
    /// ApproximateReceiveCount.
    pub receives: u32,
    /// ApproximateFirstReceiveTimestamp.
    pub first_receive: Option<At>,
    /// Hidden until then by a receive (`sent` for a message never received).
    pub visible_at: At,
    /// The latest receive's receipt handle.
    pub handle: Option<String>,
}

impl<At, P> Deref for Held<At, P> {
    type Target = P;

    fn deref(&self) -> &P {
        &self.payload
    }
}

/// A message a receive returned.
#[derive(Debug, Clone)]
pub struct Received<At, P> {
    /// Its place in the queue: sends are numbered from 0.
    pub seq: u64,
    pub handle: String,
    pub payload: P,
    pub sent: At,
    pub receives: u32,
    pub first_receive: At,
}

/// What one receive did: the messages it returned, and the payloads the redrive policy moved to
/// the dead-letter queue instead (with when each was sent).
#[derive(Debug)]
pub struct Receive<At, P> {
    pub received: Vec<Received<At, P>>,
    pub redriven: Vec<(P, At)>,
}

/// The messages of one standard queue.
#[derive(Debug, Clone)]
pub struct Messages<At, P> {
    next: u64,
    held: BTreeMap<u64, Held<At, P>>,
    /// Visible as of the last operation, by send order.
    ready: BTreeSet<u64>,
    /// Hidden, by when each is visible again.
    hidden: BTreeSet<(At, u64)>,
    handles: HashMap<String, u64>,
}

impl<At, P> Default for Messages<At, P> {
    fn default() -> Self {
        Self {
            next: 0,
            held: BTreeMap::new(),
            ready: BTreeSet::new(),
            hidden: BTreeSet::new(),
            handles: HashMap::new(),
        }
    }
}

impl<At, P> Messages<At, P>
where
    At: Copy + Ord + Add<Duration, Output = At>,
    P: Clone,
{
    /// A message sent at `sent` (visible from then): its place in the queue.
    pub fn send(&mut self, payload: P, sent: At) -> u64 {
        let seq = self.next;
        self.next += 1;
        self.held.insert(
            seq,
            Held {
                payload,
                sent,
                receives: 0,
                first_receive: None,
                visible_at: sent,
                handle: None,
            },
        );
        self.hidden.insert((sent, seq));
        seq
    }

    /// Messages whose hiding has run out by `now` become visible.
    fn promote(&mut self, now: At) {
        while let Some(&(at, seq)) = self.hidden.first() {
            if at > now {
                break;
            }
            self.hidden.pop_first();
            self.ready.insert(seq);
        }
    }

    /// ReceiveMessage: up to `max` visible messages, oldest first, each hidden for `hide`; past
    /// `max_receives` (the redrive policy's `maxReceiveCount`) a message goes to the dead-letter
    /// queue instead.
    pub fn receive(
        &mut self,
        now: At,
        max: usize,
        hide: Duration,
        max_receives: Option<u32>,
    ) -> Receive<At, P> {
        self.promote(now);
        let mut receive = Receive {
            received: Vec::new(),
            redriven: Vec::new(),
        };
        while receive.received.len() < max {
            let Some(seq) = self.ready.pop_first() else {
                break;
            };
            match self.receive_one(seq, now, hide, max_receives) {
                Ok(received) => receive.received.push(received),
                Err(redriven) => receive.redriven.push(redriven),
            }
        }
        receive
    }

    /// The message at `seq` received now, visible or not (an event source mapping handing a
    /// test's record to the function): its receive, or its payload and when it was sent when the
    /// redrive policy moved it instead. `None`: no such message.
    pub fn receive_at(
        &mut self,
        seq: u64,
        now: At,
        hide: Duration,
        max_receives: Option<u32>,
    ) -> Option<Result<Received<At, P>, (P, At)>> {
        let visible_at = self.held.get(&seq)?.visible_at;
        self.ready.remove(&seq);
        self.hidden.remove(&(visible_at, seq));
        Some(self.receive_one(seq, now, hide, max_receives))
    }

    /// Receives the message at `seq`, already out of both indexes.
    fn receive_one(
        &mut self,
        seq: u64,
        now: At,
        hide: Duration,
        max_receives: Option<u32>,
    ) -> Result<Received<At, P>, (P, At)> {
        let message = self.held.get_mut(&seq).expect("an indexed message is held");
        if max_receives.is_some_and(|max| message.receives >= max) {
            let message = self.held.remove(&seq).expect("held");
            if let Some(handle) = message.handle {
                self.handles.remove(&handle);
            }
            return Err((message.payload, message.sent));
        }
        message.receives += 1;
        let first_receive = *message.first_receive.get_or_insert(now);
        message.visible_at = now + hide;
        let handle = format!("{seq}-{}", message.receives);
        if let Some(old) = message.handle.replace(handle.clone()) {
            self.handles.remove(&old);
        }
        let received = Received {
            seq,
            handle: handle.clone(),
            payload: message.payload.clone(),
            sent: message.sent,
            receives: message.receives,
            first_receive,
        };
        self.hidden.insert((message.visible_at, seq));
        self.handles.insert(handle, seq);
        Ok(received)
    }

    /// DeleteMessage: whether the handle was the message's latest (and so deleted it).
    pub fn delete(&mut self, handle: &str) -> bool {
        let Some(seq) = self.handles.remove(handle) else {
            return false;
        };
        if let Some(message) = self.held.remove(&seq) {
            self.ready.remove(&seq);
            self.hidden.remove(&(message.visible_at, seq));
        }
        true
    }

    /// ChangeMessageVisibility: hidden for `timeout` from `now` (0: visible now); `false` for a
    /// handle that is not a held message's latest, which SQS refuses.
    pub fn change_visibility(&mut self, handle: &str, now: At, timeout: Duration) -> bool {
        let Some(&seq) = self.handles.get(handle) else {
            return false;
        };
        let Some(message) = self.held.get_mut(&seq) else {
            return false;
        };
        self.ready.remove(&seq);
        self.hidden.remove(&(message.visible_at, seq));
        message.visible_at = now + timeout;
        self.hidden.insert((message.visible_at, seq));
        true
    }

    /// ApproximateNumberOfMessages: those visible at `now`.
    pub fn visible(&self, now: At) -> usize {
        self.ready.len() + self.hidden.iter().take_while(|(at, _)| *at <= now).count()
    }

    /// When the next message is visible: `None` for an empty queue (a time at or before the
    /// last operation's when one is visible already).
    pub fn next_visible(&self) -> Option<At> {
        let ready = self.ready.first().map(|seq| self.held[seq].visible_at);
        let hidden = self.hidden.first().map(|(at, _)| *at);
        ready.into_iter().chain(hidden).min()
    }

    /// The message at `seq`.
    pub fn get(&self, seq: u64) -> Option<&Held<At, P>> {
        self.held.get(&seq)
    }

    /// The first message (oldest first) whose payload `is` picks: its place.
    pub fn find(&self, is: impl Fn(&P) -> bool) -> Option<u64> {
        self.held
            .iter()
            .find(|(_, m)| is(&m.payload))
            .map(|(seq, _)| *seq)
    }

    /// Every message held, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Held<At, P>> {
        self.held.values()
    }

    pub fn len(&self) -> usize {
        self.held.len()
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// PurgeQueue.
    pub fn clear(&mut self) {
        *self = Self {
            next: self.next,
            ..Self::default()
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Queue = Messages<Duration, &'static str>;
    const S: Duration = Duration::from_secs(1);

    fn bodies(r: &Receive<Duration, &'static str>) -> Vec<&'static str> {
        r.received.iter().map(|m| m.payload).collect()
    }

    #[test]
    fn a_receive_hides_what_it_returns_oldest_first_for_the_visibility_asked() {
        let mut q = Queue::default();
        q.send("a", Duration::ZERO);
        q.send("b", S);
        q.send("later", 5 * S);
        let first = q.receive(2 * S, 10, 30 * S, None);
        assert_eq!(bodies(&first), ["a", "b"], "not what is sent after now");
        assert_eq!(q.visible(2 * S), 0);
        assert_eq!(q.visible(5 * S), 1);
        assert_eq!(bodies(&q.receive(31 * S, 10, 30 * S, None)), ["later"]);
        let again = q.receive(32 * S, 1, 30 * S, None);
        assert_eq!(bodies(&again), ["a"], "back in send order, one at most");
        assert_eq!(again.received[0].receives, 2);
        assert_eq!(again.received[0].first_receive, 2 * S);
        assert_eq!(q.len(), 3, "a receive deletes nothing");
    }

    #[test]
    fn only_the_latest_receipt_handle_deletes_or_changes_visibility() {
        let mut q = Queue::default();
        q.send("a", Duration::ZERO);
        let old = q.receive(S, 10, S, None).received[0].handle.clone();
        let new = q.receive(2 * S, 10, 60 * S, None).received[0]
            .handle
            .clone();
        assert_ne!(old, new);
        assert!(!q.change_visibility(&old, 2 * S, Duration::ZERO));
        assert!(!q.delete(&old));
        assert_eq!(q.len(), 1);
        assert!(
            q.change_visibility(&new, 3 * S, Duration::ZERO),
            "visible now"
        );
        assert_eq!(q.visible(3 * S), 1);
        assert_eq!(q.next_visible(), Some(3 * S));
        assert!(q.delete(&new));
        assert!(q.is_empty());
        assert_eq!(q.next_visible(), None);
    }

    #[test]
    fn the_receive_after_max_receive_count_moves_the_message_to_the_dead_letter_queue() {
        let mut q = Queue::default();
        q.send("poison", S);
        q.send("fine", 2 * S);
        for at in [3, 4] {
            let r = q.receive(at * S, 1, Duration::ZERO, Some(2));
            assert_eq!(bodies(&r), ["poison"]);
        }
        let third = q.receive(5 * S, 10, Duration::ZERO, Some(2));
        assert_eq!(third.redriven, [("poison", S)], "with when it was sent");
        assert_eq!(bodies(&third), ["fine"], "the receive goes on past it");
        assert_eq!(q.len(), 1);
        assert_eq!(
            q.receive_at(q.find(|p| *p == "fine").unwrap(), 6 * S, S, Some(1))
                .map(|r| r.map(|m| m.payload)),
            Some(Err(("fine", 2 * S)))
        );
        assert!(q.is_empty());
    }
}
