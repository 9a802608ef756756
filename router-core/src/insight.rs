//! The interruption record: one JSON line per instance an interruption named, written for each
//! record the router finished (forwarded, ignored or dead-lettered), so that CloudWatch Logs
//! Insights can answer what the router alone sees across an organisation's clusters: which node
//! pools, instance types and Availability Zones are reclaimed, where, how often, and how late each
//! cluster heard.
//!
//! What the record says of an instance is what its lookup already returned, and nothing is asked
//! for it: DescribeInstances answers with the type, the zone and how the instance was bought
//! ([`crate::aws::Described`]), and the tags name its node pool (`karpenter.sh/nodepool`), on both
//! lookup paths; a sweep's answer and the cache keep them too. The Tagging API returns tags only,
//! so an instance it alone answered for has its type, zone and capacity type [`UNKNOWN`].
//!
//! Like the EMF documents ([`crate::metrics`]), the lines are data, printed by the handler at the
//! lowest level Lambda's log filter keeps, so the queries keep working at every `LogLevel`. A
//! record handed back (to be retried) writes none: it writes its line when it is finished.

use serde::{Deserialize, Serialize};

use crate::{event::unix_millis_rfc3339, logging::Level};

/// The `record` field of every interruption record: what the queries filter on.
pub const RECORD: &str = "interruption";
/// What a record says of an attribute the lookup did not return.
pub const UNKNOWN: &str = "unknown";
/// The tag naming an instance's Karpenter node pool (Karpenter tags every instance it launches).
pub const NODE_POOL_TAG: &str = "karpenter.sh/nodepool";

/// One instance's interruption as the router finished it. `None` (JSON `null`) is a field that
/// does not apply (no cluster owns the instance, a forwarded record's reason, a delay of what was
/// not delivered); [`UNKNOWN`] a lookup attribute the router did not learn.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterruptionRecord {
    /// `forwarded`, `ignored` or `dead-lettered`.
    pub outcome: String,
    /// Why it was ignored or dead-lettered (the metrics' reason labels).
    pub reason: Option<String>,
    /// The account and region the event came from.
    pub account: Option<String>,
    pub region: Option<String>,
    /// The owning cluster's name (in its account and region).
    pub cluster: Option<String>,
    /// The event's kind (`spot-interruption`, `rebalance-recommendation`, `state-change`,
    /// `scheduled-change`, `capacity-reservation-interruption`).
    pub kind: Option<String>,
    pub instance: Option<String>,
    pub instance_type: String,
    pub zone: String,
    /// `spot`, `on-demand` or `reserved` (Karpenter's `karpenter.sh/capacity-type` values).
    pub capacity_type: String,
    pub node_pool: String,
    pub event_id: Option<String>,
    /// The event's own `time`.
    pub event_time: Option<String>,
    /// Forwarded: from the event's `time` to the router's send into the cluster's queue, ms.
    pub delay_ms: Option<u64>,
}

/// A record as written: the line's level and time, what it is, then its fields.
#[derive(Serialize)]
struct Line<'a> {
    level: &'static str,
    timestamp: String,
    record: &'static str,
    #[serde(flatten)]
    fields: &'a InterruptionRecord,
}

/// A line read back: [`Line`]'s `record` and the fields.
#[derive(Deserialize)]
struct Read {
    record: String,
    #[serde(flatten)]
    fields: InterruptionRecord,
}

impl InterruptionRecord {
    /// The record as one line of JSON, written at `timestamp_ms` (ms since the epoch) with `level`
    /// (the lowest level Lambda's log filter keeps, as the EMF documents carry).
    pub fn to_line(&self, timestamp_ms: u64, level: Level) -> String {
        serde_json::to_string(&Line {
            level: level.as_str(),
            timestamp: unix_millis_rfc3339(timestamp_ms as i64),
            record: RECORD,
            fields: self,
        })
        .expect("a record serialises")
    }

    /// The record a log line holds, if it is one.
    pub fn from_line(line: &str) -> Option<Self> {
        if !line.contains(RECORD) {
            return None;
        }
        let read: Read = serde_json::from_str(line).ok()?;
        (read.record == RECORD).then_some(read.fields)
    }
}

/// Every field of a record line, in the order it is written: what docs/operating.md lists.
pub fn fields() -> Vec<String> {
    let text = InterruptionRecord::default().to_line(0, Level::Info);
    let line: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&text).expect("a record line is a JSON object");
    let mut names: Vec<String> = line.keys().cloned().collect();
    // serde_json's map is ordered by key; the line's order is the struct's.
    names.sort_by_key(|k| text.find(&format!("\"{k}\":")));
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spot() -> InterruptionRecord {
        InterruptionRecord {
            outcome: "forwarded".into(),
            reason: None,
            account: Some("111111111111".into()),
            region: Some("us-east-1".into()),
            cluster: Some("alpha".into()),
            kind: Some("spot-interruption".into()),
            instance: Some("i-0123456789abcdef0".into()),
            instance_type: "m6i.large".into(),
            zone: "us-east-1a".into(),
            capacity_type: "spot".into(),
            node_pool: "default".into(),
            event_id: Some("e1".into()),
            event_time: Some("2026-11-27T21:46:40Z".into()),
            delay_ms: Some(812),
        }
    }

    /// A record is one line of flat JSON, marked as one, with Lambda's `level` and `timestamp`,
    /// and it reads back as written; other lines (an EMF document, a log line) are not records.
    #[test]
    fn a_record_is_one_flat_json_line_that_reads_back() {
        let record = spot();
        let line = record.to_line(1_795_824_000_000, Level::Warn);
        assert!(!line.contains('\n'));
        let json: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(json["record"], "interruption");
        assert_eq!(json["level"], "WARN");
        assert_eq!(json["timestamp"], "2026-11-28T00:00:00.000Z");
        assert_eq!(json["delay_ms"], 812);
        assert_eq!(json["reason"], serde_json::Value::Null);
        assert!(
            line.starts_with(r#"{"level":"WARN","timestamp":"#),
            "{line}"
        );
        assert_eq!(InterruptionRecord::from_line(&line), Some(record));
        assert_eq!(
            InterruptionRecord::from_line(r#"{"record":"other","outcome":"forwarded"}"#),
            None
        );
        assert_eq!(
            InterruptionRecord::from_line(r#"{"_aws":{},"Deliveries":[["interruption"]]}"#),
            None
        );
    }

    #[test]
    fn the_fields_are_listed_in_the_order_written() {
        assert_eq!(
            fields(),
            [
                "level",
                "timestamp",
                "record",
                "outcome",
                "reason",
                "account",
                "region",
                "cluster",
                "kind",
                "instance",
                "instance_type",
                "zone",
                "capacity_type",
                "node_pool",
                "event_id",
                "event_time",
                "delay_ms"
            ]
        );
    }
}
