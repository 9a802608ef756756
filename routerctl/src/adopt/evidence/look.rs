//! A look: adopt receiving through a queue for the one message it put there (the probe, or a
//! sentinel), making everything else it meets visible again at once.
//!
//! SQS hands a standard queue's messages out roughly oldest first ("best-effort ordering"), and a
//! look may receive only so much, for so long: each message it meets stays hidden from every
//! other reader, Karpenter included, until the look ends or [`LOOK_HIDE_SECS`] pass. So a look
//! that does not find its message ends in one of four ways ([`Look`]), and only two of them say
//! what happened to it: the queue gave everything it held (the message was taken), or the look
//! met nothing older than the message (everything before it was taken, so it was too). A look that
//! had to stop among older messages has not reached it: it cannot tell "taken" from "still
//! there", and says so ([`Look::Backlog`]).
//!
//! A look that *finds* its message says only that it was still there when the look reached it.
//! If the look paged through older messages to get there ([`Look::FoundBehind`]), that is not
//! "nothing reads this queue": a reader that came back during the round (a GitOps controller
//! reverting Karpenter to the old queue) starts on the oldest, ten messages a receive, and the
//! look, receiving up to a thousand at once, overtakes it. Only a message found with nothing
//! older met on the way ([`Look::Found`]) says nobody read the queue in front of it.

use crate::deployment::Queue;
use std::{
    collections::HashSet,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use anyhow::Result;
use serde_json::Value;

use crate::cloud::moves::{Moves, Received};

/// How long a look hides a message it receives: as long as the look takes (its receives, a few
/// seconds in AWS), since a message that shows again before the look ends is met twice and the
/// look cannot page on; short, should the look fail to make them visible again at its end (it
/// normally does), since the reader it hides them from may be Karpenter.
pub const LOOK_HIDE_SECS: i32 = 30;
/// Receives per look: up to 1,000 messages.
pub const MAX_LOOK_RECEIVES: usize = 100;

/// What a look found of the message adopt put in a queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Look {
    /// Still there, and the look met nothing sent before it: received this many times before
    /// this look.
    Found { received_before: u32 },
    /// Still there, but behind `older` messages sent at or before it, which the look paged
    /// through ahead of any reader: it proves nothing by itself (a reader on the oldest may be
    /// on its way). Received this many times before this look.
    FoundBehind { received_before: u32, older: usize },
    /// The queue gave everything it held and the message was not in it: a reader took it (or,
    /// if the round is too old, it expired).
    Gone,
    /// The look had to stop, having met only messages sent after the one it looks for: what the
    /// queue held before them, that message with it, was taken. `met` messages.
    Overtaken { met: usize },
    /// The look had to stop among messages sent before the one it looks for: it did not reach it,
    /// and cannot say whether it is still there. Why it stopped, in a sentence.
    Backlog(String),
}

/// What paging through a queue met, before [`judge`] says what it means.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Paged {
    /// The message looked for was met: SQS's receive count of it, this look's receive included.
    pub found: Option<u32>,
    /// When SQS says the message looked for was sent, if it was met.
    pub found_sent: Option<SystemTime>,
    /// A receive came back empty: the queue gave everything it held.
    pub exhausted: bool,
    /// A message met before showed again (its hide ran out): the look stopped there.
    pub wrapped: bool,
    /// When each other message met was sent (SQS's SentTimestamp).
    pub sent: Vec<SystemTime>,
}

/// What `paged` means for a message sent at `sent_at`.
pub fn judge(queue: &str, paged: &Paged, sent_at: SystemTime) -> Look {
    // Found, the message's own SentTimestamp is the measure: SQS's clock, as the others' are (the
    // round's start is adopt's, to the second).
    let reference = paged.found_sent.unwrap_or(sent_at);
    let older = paged.sent.iter().filter(|at| **at <= reference).count();
    if let Some(receives) = paged.found {
        let received_before = receives.saturating_sub(1);
        return match older {
            0 => Look::Found { received_before },
            older => Look::FoundBehind {
                received_before,
                older,
            },
        };
    }
    if paged.exhausted {
        return Look::Gone;
    }
    if older == 0 {
        return Look::Overtaken {
            met: paged.sent.len(),
        };
    }
    let why = if paged.wrapped {
        format!(
            "what the look had met showed again ({LOOK_HIDE_SECS} s) before it got through {queue}"
        )
    } else {
        format!("{queue} held more than a look receives ({MAX_LOOK_RECEIVES} receives)")
    };
    Look::Backlog(format!(
        "{why}: it met {} messages, {older} of them sent before the one it looks for",
        paged.sent.len()
    ))
}

/// What a look found, and what it left hidden.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Looked {
    pub look: Look,
    /// Messages the look received and could not make visible again: hidden from every reader,
    /// Karpenter included, until [`LOOK_HIDE_SECS`] pass. In a sentence, for the report.
    pub hidden: Option<String>,
}

/// Receives through `queue` until the message with event id `id` (sent at `sent_at`) turns up,
/// the queue has nothing more to give, or the look must stop; makes every other message visible
/// again at once, deletes adopt's.
pub(crate) async fn look(
    site: &impl Moves,
    queue: &Queue,
    id: &str,
    sent_at: SystemTime,
) -> Result<Looked> {
    let mut met: Vec<String> = Vec::new();
    let mut ids: HashSet<String> = HashSet::new();
    let mut paged = Paged::default();
    let mut found: Option<Received> = None;
    for _ in 0..MAX_LOOK_RECEIVES {
        let messages = site
            .receive(&queue.url, LOOK_HIDE_SECS)
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "ReceiveMessage on {} (adopt looks for its own message): {e}",
                    queue.name
                )
            })?;
        if messages.is_empty() {
            paged.exhausted = true;
            break;
        }
        for message in messages {
            // Met before: its hide ran out before the look ended, so the look is not paging
            // through the queue any more.
            if !message.message_id.is_empty() && !ids.insert(message.message_id.clone()) {
                paged.wrapped = true;
            }
            let is_ours = serde_json::from_str::<Value>(&message.body)
                .ok()
                .is_some_and(|b| b["id"] == id);
            if is_ours {
                found = Some(message);
                continue;
            }
            if let Some(at) = message.sent_ms {
                paged.sent.push(UNIX_EPOCH + Duration::from_millis(at));
            }
            if !message.receipt_handle.is_empty() {
                met.push(message.receipt_handle);
            }
        }
        if found.is_some() || paged.wrapped {
            break;
        }
    }
    let hidden = release(site, queue, &met).await;
    if let Some(message) = found {
        paged.found = Some(
            message
                .receive_count
                .map_or(1, |n| u32::try_from(n).unwrap_or(u32::MAX)),
        );
        paged.found_sent = message
            .sent_ms
            .map(|at| UNIX_EPOCH + Duration::from_millis(at));
        if !message.receipt_handle.is_empty() {
            site.delete_message(&queue.url, &message.receipt_handle)
                .await
                .map_err(|e| anyhow::anyhow!("DeleteMessage on {}: {e}", queue.name))?;
        }
    }
    Ok(Looked {
        look: judge(&queue.name, &paged, sent_at),
        hidden,
    })
}

/// Makes what a look received visible again, ten at a time; what it could not, in a sentence.
async fn release(site: &impl Moves, queue: &Queue, handles: &[String]) -> Option<String> {
    let (mut stuck, mut error) = (0, None);
    for chunk in handles.chunks(10) {
        // On failure they return after LOOK_HIDE_SECS on their own.
        if let Err(e) = site.release(&queue.url, chunk).await {
            stuck += chunk.len();
            error.get_or_insert(e.to_string());
        }
    }
    let error = error?;
    Some(format!(
        "{stuck} message(s) adopt's look received from {} stay hidden from every reader, Karpenter \
         included, for up to {LOOK_HIDE_SECS} s after the look: making them visible again failed \
         ({error}; adopt needs sqs:ChangeMessageVisibility on {})",
        queue.name, queue.name
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    /// On the model: the look finds adopt's message among others, deletes it, and leaves every
    /// other message visible again at once (the old queue's reader must not lose them for the
    /// look's hide).
    #[tokio::test(start_paused = true)]
    async fn a_look_deletes_only_its_own_message_and_gives_the_others_back_at_once() {
        let world = crate::cloud::model::World::new("123456789012", "us-east-1");
        let url = world.create_queue("old", &[]);
        for id in ["before", "probe", "after"] {
            world
                .sqs_send(&url, &format!(r#"{{"id":"{id}"}}"#))
                .expect("sent");
        }
        let queue = crate::deployment::load_queue(&world, "old")
            .await
            .expect("the queue");
        let looked = look(&world, &queue, "probe", world.clock())
            .await
            .expect("a look");
        // All three sent in one instant of the paused clock: "at or before" the probe, so it is
        // found behind the two it was received with.
        assert_eq!(
            looked.look,
            Look::FoundBehind {
                received_before: 0,
                older: 2
            }
        );
        assert_eq!(looked.hidden, None);
        let now = world.clock();
        let (left, visible) = world.read(|_, site| {
            let messages = &site.queues["old"].messages;
            (
                messages.iter().map(|m| m.body.clone()).collect::<Vec<_>>(),
                messages.iter().all(|m| m.visible_at <= now),
            )
        });
        assert_eq!(left, [r#"{"id":"before"}"#, r#"{"id":"after"}"#]);
        assert!(visible, "the look hid what it met");
    }

    /// What the look received and could not make visible again stays hidden from Karpenter for
    /// the look's hide: the look says so, naming the queue and for how long.
    #[tokio::test(start_paused = true)]
    async fn a_look_that_cannot_give_back_what_it_hid_says_so() {
        let world = crate::cloud::model::World::new("123456789012", "us-east-1");
        let url = world.create_queue("old", &[]);
        for id in ["one", "two", "probe"] {
            world
                .sqs_send(&url, &format!(r#"{{"id":"{id}"}}"#))
                .expect("sent");
        }
        world.refuse("ChangeMessageVisibility");
        let queue = crate::deployment::load_queue(&world, "old")
            .await
            .expect("the queue");
        let looked = look(&world, &queue, "probe", world.clock())
            .await
            .expect("a look");
        let hidden = looked.hidden.expect("the hidden messages named");
        assert!(
            hidden.starts_with("2 message(s) adopt's look received from old stay hidden"),
            "{hidden}"
        );
        assert!(
            hidden.contains(&format!("for up to {LOOK_HIDE_SECS} s")),
            "{hidden}"
        );
        assert!(hidden.contains("sqs:ChangeMessageVisibility"), "{hidden}");
    }

    #[test]
    fn a_message_met_is_found_with_the_receives_before_this_look() {
        let paged = Paged {
            found: Some(3),
            wrapped: true,
            ..Paged::default()
        };
        assert_eq!(
            judge("q", &paged, at(100)),
            Look::Found { received_before: 2 }
        );
        let once = Paged {
            found: Some(1),
            ..Paged::default()
        };
        assert_eq!(
            judge("q", &once, at(100)),
            Look::Found { received_before: 0 }
        );
    }

    /// Found behind messages sent at or before it (issue 59): a reader that came back starts on
    /// the oldest, and the look may have overtaken it. Newer messages met on the way do not
    /// count.
    #[test]
    fn a_message_found_behind_older_ones_proves_nothing_by_itself() {
        let behind = Paged {
            found: Some(1),
            sent: vec![at(40), at(100), at(101)],
            ..Paged::default()
        };
        assert_eq!(
            judge("q", &behind, at(100)),
            Look::FoundBehind {
                received_before: 0,
                older: 2
            }
        );
        let newer_only = Paged {
            found: Some(1),
            sent: vec![at(101), at(130)],
            ..Paged::default()
        };
        assert_eq!(
            judge("q", &newer_only, at(100)),
            Look::Found { received_before: 0 }
        );
    }

    #[test]
    fn a_queue_that_gave_everything_without_it_has_lost_it() {
        let paged = Paged {
            exhausted: true,
            sent: vec![at(50), at(150)],
            ..Paged::default()
        };
        assert_eq!(judge("q", &paged, at(100)), Look::Gone);
    }

    /// The drained old queue of issue 44: the cluster's own Karpenter takes everything within a
    /// poll, and the look pages through arrivals newer than the sentinel until its hide runs out.
    #[test]
    fn a_look_that_met_only_newer_messages_says_the_older_were_taken() {
        let paged = Paged {
            wrapped: true,
            sent: vec![at(101), at(130), at(160)],
            ..Paged::default()
        };
        assert_eq!(judge("q", &paged, at(100)), Look::Overtaken { met: 3 });
    }

    /// A backlog nobody reads: the look meets what was there before the sentinel, and cannot say
    /// whether the sentinel is still behind it.
    #[test]
    fn a_look_stopped_among_older_messages_cannot_tell() {
        let wrapped = Paged {
            wrapped: true,
            sent: vec![at(40), at(100), at(130)],
            ..Paged::default()
        };
        let Look::Backlog(why) = judge("alpha", &wrapped, at(100)) else {
            panic!("{:?}", judge("alpha", &wrapped, at(100)));
        };
        assert!(why.contains("showed again"), "{why}");
        assert!(
            why.contains("met 3 messages, 2 of them sent before"),
            "{why}"
        );
        let full = Paged {
            sent: vec![at(40); 1000],
            ..Paged::default()
        };
        let Look::Backlog(why) = judge("alpha", &full, at(100)) else {
            panic!("not a backlog");
        };
        assert!(
            why.contains("alpha held more than a look receives"),
            "{why}"
        );
    }
}
