//! A round of evidence as adopt keeps it between runs: when it started and its probe, in a tag on
//! the cluster's tenant queue ([`Round::tag`]), and when it can be read ([`Round::ripe_at`]) and
//! when it is too old to ([`Round::expired`]).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use router_core::event::rfc3339_unix_millis;

use super::{
    QUIET_WINDOW,
    counts::{self, Looked, Window},
};
use crate::deployment::Queue;
use aws_model::events::rfc3339;

/// What a round leaves to the queue's retention: read it later and the messages may have expired.
const RETENTION_MARGIN: Duration = Duration::from_secs(30);

/// A round: when it started and the probe's event id (the sentinels' ids derive from it), and,
/// once its first read met an old queue it could not search, when that read looked: SQS's own
/// counts decide from then on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Round {
    pub started: SystemTime,
    pub probe: String,
    pub backlog: Option<Looked>,
}

fn parse_time(at: &str) -> Option<SystemTime> {
    let ms = u64::try_from(rfc3339_unix_millis(at)?).ok()?;
    Some(UNIX_EPOCH + Duration::from_millis(ms))
}

impl Round {
    /// `<start> <probe>`, or `<start> <probe> <looked from> <looked until>`.
    pub fn parse(tag: &str) -> Option<Round> {
        let parts: Vec<&str> = tag.split(' ').collect();
        let backlog = match parts[..] {
            [_, _] => None,
            [_, _, from, until] => Some(Looked {
                from: parse_time(from)?,
                until: parse_time(until)?,
            }),
            _ => return None,
        };
        Some(Round {
            started: parse_time(parts[0])?,
            probe: parts[1].to_owned(),
            backlog,
        })
    }

    pub fn tag(&self) -> String {
        match &self.backlog {
            None => format!("{} {}", rfc3339(self.started), self.probe),
            Some(l) => format!(
                "{} {} {} {}",
                rfc3339(self.started),
                self.probe,
                rfc3339(l.from),
                rfc3339(l.until)
            ),
        }
    }

    pub fn sentinel(&self) -> String {
        format!("{}-sentinel", self.probe)
    }

    /// How long it has run at `now`.
    pub fn age(&self, now: SystemTime) -> Duration {
        now.duration_since(self.started).unwrap_or_default()
    }

    /// The minutes SQS's counts must cover, for a round with a backlog.
    pub fn window(&self) -> Option<Window> {
        self.backlog.map(|looked| Window::of(self.started, looked))
    }

    /// When it is old enough to read: once its quiet window has passed and its first whole
    /// minute has ended (so that, should the look meet a backlog, SQS's counts have a minute of
    /// the round before it: [`counts::first_read_after`]), or, with a backlog, once its counts'
    /// window has ended (whether CloudWatch has them yet is read, not assumed).
    pub fn ripe_at(&self) -> SystemTime {
        match self.window() {
            None => (self.started + QUIET_WINDOW).max(counts::first_read_after(self.started)),
            Some(window) => window.closes(),
        }
    }

    /// Old enough to read at `now` ([`Round::ripe_at`]).
    pub fn ripe(&self, now: SystemTime) -> bool {
        now >= self.ripe_at()
    }

    /// Too old to read: its messages may have expired from `queues` (their retention). A round
    /// with a backlog needs none of its messages any more: SQS's counts decide it.
    pub(crate) fn expired<'a>(
        &self,
        now: SystemTime,
        queues: impl IntoIterator<Item = &'a Queue>,
    ) -> bool {
        self.backlog.is_none() && self.age(now) > Self::expired_after(queues)
    }

    /// How long after its start a round over `queues` can still be read: the shortest retention,
    /// less a margin.
    pub(super) fn expired_after<'a>(queues: impl IntoIterator<Item = &'a Queue>) -> Duration {
        queues
            .into_iter()
            .filter_map(|q| {
                q.attributes
                    .get("MessageRetentionPeriod")?
                    .parse::<u64>()
                    .ok()
            })
            .min()
            .map_or(Duration::MAX, |s| {
                Duration::from_secs(s).saturating_sub(RETENTION_MARGIN)
            })
    }
}
