//! SQS's own counts of an old queue: the evidence where a look cannot reach the sentinel.
//!
//! SQS reports, per queue and minute, how many messages ReceiveMessage returned
//! (`NumberOfMessagesReceived`) and how many DeleteMessage calls succeeded
//! (`NumberOfMessagesDeleted`), counting every caller, and "a non-negative value if the queue is
//! active", zero included (SQS Developer Guide, "Available CloudWatch metrics for Amazon SQS").
//! Karpenter deletes every message it receives. So a queue that no caller received from, in
//! every minute of a window, had no reader in that window: not the cluster's own Karpenter, not
//! another cluster's, not one under a role adopt cannot see. That holds however full the queue
//! is, which is what a look cannot promise.
//!
//! The price is time: the datapoints come minute by minute and minutes late. And a minute in
//! which adopt looked counts adopt's own receives (and its delete of what it put there), so the
//! [`Window`] leaves those minutes out, and asks for whole minutes on both sides of the look:
//! one before it (a round is read no sooner than its first whole minute has ended:
//! [`first_read_after`]), which shows the round's own span, and one after, which shows a reader
//! present at its end. One minute alone is never the evidence. A reader that arrives after the last minute CloudWatch
//! has is not seen, as a reader that arrives after step 5 is not: the tenant queue's
//! unread-message alarm pages for it (its Karpenter has left the tenant queue).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::cloud::moves::Moves;
use anyhow::Result;
use aws_model::events::rfc3339;

/// How long after the window's last minute ends adopt waits for CloudWatch to have it. SQS
/// documents no figure ("minutes"); past this, adopt says it cannot tell.
pub const PATIENCE: Duration = Duration::from_secs(15 * 60);

/// When adopt's looks of a round's first read ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Looked {
    pub from: SystemTime,
    pub until: SystemTime,
}

/// The minutes (Unix seconds of their start) SQS's counts must cover.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// The first whole minute after the round started.
    pub first: u64,
    /// The minutes adopt looked in, `[start, end)`: their counts are partly adopt's own.
    pub looked: (u64, u64),
    /// Where the minutes that must all be in end (exclusive): one whole minute past the looks.
    pub end: u64,
}

fn secs(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs()
}

fn floor_minute(secs: u64) -> u64 {
    secs / 60 * 60
}

fn ceil_minute(secs: u64) -> u64 {
    secs.div_ceil(60) * 60
}

/// `HH:MM` (UTC) of a minute.
pub fn clock(minute: u64) -> String {
    rfc3339(UNIX_EPOCH + Duration::from_secs(minute))[11..16].to_owned()
}

/// When a round started at `started` may first be looked at, so that a whole minute of it lies
/// before the look: the end of its first whole minute.
pub fn first_read_after(started: SystemTime) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(ceil_minute(secs(started)) + 60)
}

impl Window {
    /// The window of a round started at `started` whose first read looked during `looked`.
    pub fn of(started: SystemTime, looked: Looked) -> Self {
        // A look that straddles a second boundary touches the minute of its last instant.
        let until = secs(looked.until) + 1;
        let looked = (floor_minute(secs(looked.from)), ceil_minute(until));
        let first = ceil_minute(secs(started));
        // A whole minute before the look and one after; a look read too early (no whole minute
        // of the round before it) asks for two after instead, never one minute alone.
        let after = if looked.0 > first { 60 } else { 120 };
        Self {
            first,
            looked,
            end: looked.1 + after,
        }
    }

    /// The minutes whose counts are evidence: from the first, up to `end` and past it for as
    /// long as CloudWatch has more, but not those adopt looked in.
    fn counts(&self, minute: u64) -> bool {
        minute >= self.first && !(self.looked.0..self.looked.1).contains(&minute)
    }

    /// The minutes that must all be in CloudWatch.
    pub fn required(&self) -> impl Iterator<Item = u64> + '_ {
        (self.first..self.end)
            .step_by(60)
            .filter(|m| self.counts(*m))
    }

    /// When the last required minute ends: no sooner can the counts be read.
    pub fn closes(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(self.end)
    }

    /// When adopt stops waiting for CloudWatch.
    pub fn gives_up(&self) -> SystemTime {
        self.closes() + PATIENCE
    }

    pub fn describe(&self) -> String {
        let required: Vec<u64> = self.required().collect();
        format!(
            "{} minute(s) from {} to {} UTC{}",
            required.len(),
            clock(self.first),
            clock(self.end),
            if self.looked.0 < self.looked.1 && self.looked.1 > self.first {
                format!(
                    ", but {}-{}, when adopt looked",
                    clock(self.looked.0.max(self.first)),
                    clock(self.looked.1)
                )
            } else {
                String::new()
            }
        )
    }
}

/// SQS's datapoints for one queue: (minute, sum) per metric.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Datapoints {
    pub received: Vec<(u64, f64)>,
    pub deleted: Vec<(u64, f64)>,
}

/// What SQS's counts say of a queue over a [`Window`].
#[derive(Debug, Clone, PartialEq)]
pub enum Counted {
    /// Something received or deleted messages in minutes that count: it reads the queue. Decided
    /// as soon as one such minute is in, whatever is still missing.
    Read {
        received: f64,
        deleted: f64,
        minutes: Vec<u64>,
    },
    /// CloudWatch does not have these required minutes yet.
    Incomplete { missing: Vec<u64> },
    /// Every required minute is in, and in none of the minutes that count (`minutes` of them)
    /// did anything receive or delete a message.
    Quiet { minutes: usize },
}

/// Judges `points` over `window`.
pub fn judge(window: &Window, points: &Datapoints) -> Counted {
    let (mut received, mut deleted, mut read_in) = (0.0, 0.0, Vec::new());
    let mut counted = std::collections::BTreeSet::new();
    for (series, total) in [
        (&points.received, &mut received),
        (&points.deleted, &mut deleted),
    ] {
        for (minute, sum) in series.iter().filter(|(m, _)| window.counts(*m)) {
            *total += sum;
            if *sum > 0.0 {
                read_in.push(*minute);
            }
        }
    }
    if received + deleted > 0.0 {
        read_in.sort_unstable();
        read_in.dedup();
        return Counted::Read {
            received,
            deleted,
            minutes: read_in,
        };
    }
    let has = |series: &[(u64, f64)], m: u64| series.iter().any(|(at, _)| *at == m);
    let missing: Vec<u64> = window
        .required()
        .filter(|m| !has(&points.received, *m) || !has(&points.deleted, *m))
        .collect();
    if !missing.is_empty() {
        return Counted::Incomplete { missing };
    }
    for (minute, _) in points.received.iter().chain(&points.deleted) {
        if window.counts(*minute) {
            counted.insert(*minute);
        }
    }
    Counted::Quiet {
        minutes: counted.len(),
    }
}

/// SQS's datapoints for `queue` from the window's first minute to now.
pub async fn fetch(site: &impl Moves, queue: &str, window: &Window) -> Result<Datapoints> {
    let now = site.now();
    let from = UNIX_EPOCH + Duration::from_secs(window.first);
    let mut points = Datapoints::default();
    if now <= from {
        return Ok(points);
    }
    for (metric, series) in [
        ("NumberOfMessagesReceived", &mut points.received),
        ("NumberOfMessagesDeleted", &mut points.deleted),
    ] {
        let out = site
            .queue_metric(queue, metric, from, now)
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "GetMetricStatistics AWS/SQS {metric} of {queue} (adopt reads SQS's own \
                     counts of a queue too full to look through; it needs \
                     cloudwatch:GetMetricStatistics): {e}"
                )
            })?;
        series.extend(out.into_iter().map(|(at, sum)| (floor_minute(at), sum)));
    }
    Ok(points)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    /// Started at 10:00:30, looked from 10:01:35 to 10:01:50 (before its first whole minute
    /// ended: two whole minutes after the look are required).
    fn window() -> Window {
        Window::of(
            at(36_030),
            Looked {
                from: at(36_095),
                until: at(36_110),
            },
        )
    }

    fn minutes(range: std::ops::Range<u64>, value: f64) -> Vec<(u64, f64)> {
        range.step_by(60).map(|m| (m, value)).collect()
    }

    /// Every minute of `range` in CloudWatch, nothing received or deleted in any.
    fn quiet(range: std::ops::Range<u64>) -> Datapoints {
        Datapoints {
            received: minutes(range.clone(), 0.0),
            deleted: minutes(range, 0.0),
        }
    }

    /// A round read as soon as it may be ([`first_read_after`]): a whole minute of it before the
    /// look, the look's minutes left out, a whole minute after.
    #[test]
    fn the_window_covers_a_whole_minute_before_the_look_and_one_after() {
        assert_eq!(first_read_after(at(36_030)), at(36_120));
        assert_eq!(first_read_after(at(36_060)), at(36_120));
        let w = Window::of(
            at(36_030),
            Looked {
                from: at(36_120),
                until: at(36_135),
            },
        );
        assert_eq!(w.first, 36_060);
        assert_eq!(w.looked, (36_120, 36_180));
        assert_eq!(w.required().collect::<Vec<_>>(), vec![36_060, 36_180]);
        assert_eq!(w.closes(), at(36_240));
    }

    #[test]
    fn the_window_starts_after_the_round_leaves_out_the_look_and_never_rests_on_one_minute() {
        // Looked before its first whole minute ended (a round of an older routerctl): two whole
        // minutes after the look, not one.
        let w = window();
        assert_eq!(w.first, 36_060);
        assert_eq!(w.looked, (36_060, 36_120));
        assert_eq!(w.end, 36_240);
        assert_eq!(w.required().collect::<Vec<_>>(), vec![36_120, 36_180]);
        assert_eq!(w.closes(), at(36_240));
        assert_eq!(w.gives_up(), at(36_240) + PATIENCE);
        // A look that ends on a minute's first second touches that minute.
        let edge = Window::of(
            at(36_000),
            Looked {
                from: at(36_100),
                until: at(36_120),
            },
        );
        assert_eq!(edge.looked, (36_060, 36_180));
        assert_eq!(edge.required().collect::<Vec<_>>(), vec![36_000, 36_180]);
        assert!(
            w.describe().contains("2 minute(s) from 10:01 to 10:04 UTC"),
            "{}",
            w.describe()
        );
    }

    /// A reader's minutes are the ones something was received or deleted in, not every minute
    /// that counts.
    #[test]
    fn a_reader_is_named_by_the_minutes_it_read_in() {
        let mut points = quiet(36_180..36_360);
        points.received[1].1 = 3.0;
        points.deleted[1].1 = 3.0;
        assert_eq!(
            judge(&window(), &points),
            Counted::Read {
                received: 3.0,
                deleted: 3.0,
                minutes: vec![36_240],
            }
        );
    }

    #[test]
    fn every_minute_in_and_nothing_received_or_deleted_is_quiet() {
        let points = quiet(36_060..36_240);
        assert_eq!(judge(&window(), &points), Counted::Quiet { minutes: 2 });
    }

    /// adopt's own look receives (and deletes what it put there): its minutes do not count.
    #[test]
    fn what_adopt_itself_received_while_it_looked_does_not_count() {
        let mut points = quiet(36_060..36_240);
        points.received[0].1 = 1000.0;
        points.deleted[0].1 = 1.0;
        assert_eq!(judge(&window(), &points), Counted::Quiet { minutes: 2 });
    }

    #[test]
    fn a_delete_or_a_receive_outside_the_look_is_a_reader() {
        for (received, deleted) in [(0.0, 3.0), (2.0, 0.0)] {
            let points = Datapoints {
                received: vec![(36_060, 0.0), (36_120, received)],
                deleted: vec![(36_060, 0.0), (36_120, deleted)],
            };
            assert_eq!(
                judge(&window(), &points),
                Counted::Read {
                    received,
                    deleted,
                    minutes: vec![36_120]
                }
            );
        }
        // Before the round: not counted.
        let before = Datapoints {
            received: vec![(36_000, 5.0), (36_120, 0.0), (36_180, 0.0)],
            deleted: vec![(36_000, 5.0), (36_120, 0.0), (36_180, 0.0)],
        };
        assert_eq!(judge(&window(), &before), Counted::Quiet { minutes: 2 });
    }

    /// A reader seen in a later minute than the window needs still counts: more coverage.
    #[test]
    fn a_reader_in_a_minute_past_the_window_counts_and_decides_before_the_rest_is_in() {
        let points = Datapoints {
            received: vec![(36_240, 0.0)],
            deleted: vec![(36_240, 4.0)],
        };
        assert_eq!(
            judge(&window(), &points),
            Counted::Read {
                received: 0.0,
                deleted: 4.0,
                minutes: vec![36_240]
            }
        );
    }

    #[test]
    fn a_minute_missing_from_either_series_is_waited_for() {
        let points = Datapoints {
            received: vec![(36_120, 0.0)],
            deleted: Vec::new(),
        };
        assert_eq!(
            judge(&window(), &points),
            Counted::Incomplete {
                missing: vec![36_120, 36_180]
            }
        );
        assert_eq!(
            judge(&window(), &Datapoints::default()),
            Counted::Incomplete {
                missing: vec![36_120, 36_180]
            }
        );
    }
}
