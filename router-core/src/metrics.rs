//! Metrics: CloudWatch embedded-metric-format (EMF) documents, printed once per invocation.
//!
//! The handler fills an [`InvocationMetrics`] while it works and prints [`InvocationMetrics::to_emf`]
//! to stdout at the end, successful or not; CloudWatch Logs turns the lines into metrics, with no
//! API call and no added latency. EMF takes one value per dimension per document, so the
//! per-cluster and per-reason series are separate metric names (`Forwarded.<cluster>`,
//! `Ignored.<reason>`, `DeadLettered.<reason>`) under the one `FunctionName` dimension; totals are
//! there too, for alarms. A cluster outside the function's own account and region is named
//! `<account>.<region>.<cluster>`.
//!
//! Every document also carries `level` and `timestamp`, which CloudWatch ignores and Lambda's
//! log-level filter reads: see [`crate::logging`] for why that keeps them at every log level.
//!
//! `ForwardAge` is the exception: EMF allows a list of up to 100 values per metric, so every
//! forwarded copy's age (event `time` to forwarded) is kept and CloudWatch can give percentiles;
//! more than 100 spill into further documents that carry only `ForwardAge`.
//!
//! Each document also lists what was delivered (`Deliveries`, a property, not a metric: each
//! entry is `[cluster, event id, instances, age ms, kind]`, at most 100 per document, spilling like the
//! ages). The per-event `forwarded` log lines are INFO and go at quieter levels; the documents do
//! not, so this is the record of which events reached which cluster that `routerctl fis` reads at
//! every log level.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::{event::unix_millis_rfc3339, logging::Level};

/// EMF allows at most 100 metrics per directive; larger documents carry several directives.
const METRICS_PER_DIRECTIVE: usize = 100;
/// EMF allows at most 100 values in one metric's list.
const VALUES_PER_METRIC: usize = 100;
/// A forward later than this after the event is counted late: a spot warning gives two minutes.
pub const LATE_AFTER_MS: u64 = 120_000;

/// One copy that reached a cluster's queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivered {
    /// The cluster's metric label (`<account>.<region>.<name>` outside the home scope).
    pub cluster: String,
    pub event_id: String,
    /// The instances the copy names, comma-separated.
    pub instances: String,
    pub age_ms: Option<u64>,
    /// The event's kind (`spot-interruption`, …): `routerctl fis` needs the warning itself.
    pub kind: &'static str,
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct InvocationMetrics {
    /// Records (SQS messages, or the one direct event) received.
    pub received: u64,
    /// Messages delivered per cluster label (a Health event can produce one per cluster).
    pub forwarded: BTreeMap<String, u64>,
    /// Age of each forwarded message's event when it was sent (now minus the event's `time`), ms.
    pub forward_ages_ms: Vec<u64>,
    /// Every copy delivered, in order.
    pub deliveries: Vec<Delivered>,
    /// One interruption record per instance of each record finished ([`crate::insight`]),
    /// printed beside the EMF documents.
    pub interruptions: Vec<crate::insight::InterruptionRecord>,
    /// Copies not sent because their cluster has no tenant queue, per cluster label.
    pub no_tenant_queue: BTreeMap<String, u64>,
    /// Copies not sent because their cluster declined the event's kind, per (cluster label,
    /// kind label).
    pub declined: BTreeMap<(String, &'static str), u64>,
    /// Forwarded messages older than [`LATE_AFTER_MS`].
    pub late_forwards: u64,
    /// Records not forwarded, per reason.
    pub ignored: BTreeMap<&'static str, u64>,
    /// Records sent to the dead-letter queue, per reason.
    pub dead_lettered: BTreeMap<&'static str, u64>,
    /// Records handed back for a retry (batchItemFailures, or a failed direct invocation).
    pub failed: u64,
    /// Records handed back or dead-lettered because their account could not be reached.
    pub account_unreachable: u64,
    /// Records dead-lettered because SQS refused the router's principal (`access-denied`).
    pub access_denied: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
    /// Answers served from an expired cache entry because every lookup failed.
    pub stale_answers: u64,
    /// Lookups and sends retried inside the invocation.
    pub retries: u64,
    pub describe_instances_calls: u64,
    pub get_resources_calls: u64,
    /// Lookups that also asked the Tagging API because DescribeInstances failed or was late.
    pub hedged_lookups: u64,
    /// Sweeps of an account and region's Karpenter nodes ([`crate::resolve`]).
    pub sweeps: u64,
    pub send_message_batch_calls: u64,
    pub get_queue_url_calls: u64,
    /// ListQueueTags and GetQueueAttributes calls that tell a tenant queue from a look-alike.
    pub queue_ownership_calls: u64,
    /// GetParameter calls that tell a lost queue from a cluster that is not onboarded.
    pub tenant_record_calls: u64,
    pub assume_role_calls: u64,
    pub change_visibility_calls: u64,
    /// Handed-back records whose visibility was shortened (they return in seconds).
    pub redelivery_delays_set: u64,
    /// Handed-back records whose visibility could not be shortened (they wait out the timeout).
    pub redelivery_delays_failed: u64,
    pub cold_start: bool,
}

impl InvocationMetrics {
    /// The EMF documents, one line of JSON each: the first carries every metric, any further
    /// ones the `ForwardAge` values past the first hundred.
    pub fn to_emf(
        &self,
        namespace: &str,
        function_name: &str,
        timestamp_ms: u64,
        level: Level,
    ) -> Vec<String> {
        let stamp = Stamp {
            function_name,
            timestamp_ms,
            level,
        };
        let count = |name: &str, n: u64| (name.to_owned(), Value::from(n), "Count");
        let mut values: Vec<(String, Value, &'static str)> = vec![
            count("Received", self.received),
            count("Forwarded", self.forwarded.values().sum()),
            count("LateForwards", self.late_forwards),
            count("Ignored", self.ignored.values().sum()),
            count("DeadLettered", self.dead_lettered.values().sum()),
            count("Failed", self.failed),
            count("AccountUnreachable", self.account_unreachable),
            count("AccessDenied", self.access_denied),
            count("NoTenantQueue", self.no_tenant_queue.values().sum()),
            count("Declined", self.declined.values().sum()),
            count("CacheHits", self.cache_hits),
            count("CacheMisses", self.cache_misses),
            count("StaleAnswers", self.stale_answers),
            count("Retries", self.retries),
            count("DescribeInstancesCalls", self.describe_instances_calls),
            count("GetResourcesCalls", self.get_resources_calls),
            count("HedgedLookups", self.hedged_lookups),
            count("Sweeps", self.sweeps),
            count("SendMessageBatchCalls", self.send_message_batch_calls),
            count("GetQueueUrlCalls", self.get_queue_url_calls),
            count("QueueOwnershipCalls", self.queue_ownership_calls),
            count("TenantRecordCalls", self.tenant_record_calls),
            count("AssumeRoleCalls", self.assume_role_calls),
            count("ChangeMessageVisibilityCalls", self.change_visibility_calls),
            count("RedeliveryDelaysSet", self.redelivery_delays_set),
            count("RedeliveryDelaysFailed", self.redelivery_delays_failed),
            count("ColdStart", u64::from(self.cold_start)),
        ];
        let mut ages = self.forward_ages_ms.chunks(VALUES_PER_METRIC);
        if let Some(first) = ages.next() {
            values.push((
                "ForwardAge".into(),
                Value::from(first.to_vec()),
                "Milliseconds",
            ));
            let oldest = self
                .forward_ages_ms
                .iter()
                .max()
                .copied()
                .unwrap_or_default();
            values.push(("OldestEventAge".into(), Value::from(oldest), "Milliseconds"));
        }
        values.extend(
            self.forwarded
                .iter()
                .map(|(c, n)| (format!("Forwarded.{c}"), Value::from(*n), "Count")),
        );
        values.extend(
            self.no_tenant_queue
                .iter()
                .map(|(c, n)| (format!("NoTenantQueue.{c}"), Value::from(*n), "Count")),
        );
        values.extend(
            self.declined
                .iter()
                .map(|((c, k), n)| (format!("Declined.{c}.{k}"), Value::from(*n), "Count")),
        );
        values.extend(
            self.ignored
                .iter()
                .map(|(r, n)| (format!("Ignored.{r}"), Value::from(*n), "Count")),
        );
        values.extend(
            self.dead_lettered
                .iter()
                .map(|(r, n)| (format!("DeadLettered.{r}"), Value::from(*n), "Count")),
        );

        let mut deliveries = self
            .deliveries
            .chunks(VALUES_PER_METRIC)
            .map(deliveries_value);
        let mut documents = vec![document(namespace, &stamp, values, deliveries.next())];
        loop {
            let (more_ages, more_deliveries) = (ages.next(), deliveries.next());
            if more_ages.is_none() && more_deliveries.is_none() {
                break;
            }
            let values = more_ages
                .map(|more| {
                    (
                        "ForwardAge".to_owned(),
                        Value::from(more.to_vec()),
                        "Milliseconds",
                    )
                })
                .into_iter()
                .collect();
            documents.push(document(namespace, &stamp, values, more_deliveries));
        }
        documents
    }
}

/// What every document of one invocation carries besides its metrics.
struct Stamp<'a> {
    function_name: &'a str,
    timestamp_ms: u64,
    level: Level,
}

/// `Deliveries` as written: `[cluster, event id, instances, age ms, kind]` per copy (the kind
/// last, so readers of the four-field entries of earlier builds still read these).
fn deliveries_value(chunk: &[Delivered]) -> Value {
    Value::Array(
        chunk
            .iter()
            .map(|d| json!([d.cluster, d.event_id, d.instances, d.age_ms, d.kind]))
            .collect(),
    )
}

fn document(
    namespace: &str,
    stamp: &Stamp<'_>,
    values: Vec<(String, Value, &'static str)>,
    deliveries: Option<Value>,
) -> String {
    let directives: Vec<Value> = values
        .chunks(METRICS_PER_DIRECTIVE)
        .map(|chunk| {
            let metrics: Vec<Value> = chunk
                .iter()
                .map(|(name, _, unit)| json!({"Name": name, "Unit": unit}))
                .collect();
            json!({"Namespace": namespace, "Dimensions": [["FunctionName"]], "Metrics": metrics})
        })
        .collect();
    let mut doc = Map::new();
    doc.insert(
        "_aws".into(),
        json!({"Timestamp": stamp.timestamp_ms, "CloudWatchMetrics": directives}),
    );
    // For Lambda's log-level filter: without both, the line counts as INFO.
    doc.insert("level".into(), Value::from(stamp.level.as_str()));
    doc.insert(
        "timestamp".into(),
        Value::from(unix_millis_rfc3339(stamp.timestamp_ms as i64)),
    );
    doc.insert("FunctionName".into(), Value::from(stamp.function_name));
    if let Some(deliveries) = deliveries {
        doc.insert("Deliveries".into(), deliveries);
    }
    for (name, value, _) in values {
        doc.insert(name, value);
    }
    Value::Object(doc).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emf_document_declares_every_value_it_carries() {
        let m = InvocationMetrics {
            received: 5,
            forwarded: [("alpha".to_owned(), 2), ("beta".to_owned(), 1)].into(),
            ignored: [("unknown-instance", 1)].into(),
            dead_lettered: [("malformed", 1)].into(),
            cache_hits: 3,
            cache_misses: 2,
            describe_instances_calls: 1,
            send_message_batch_calls: 3,
            forward_ages_ms: vec![900, 1500, 700],
            late_forwards: 0,
            cold_start: true,
            ..Default::default()
        };
        let documents = m.to_emf(
            "InterruptionRouter",
            "router",
            1_700_000_000_000,
            Level::Info,
        );
        assert_eq!(documents.len(), 1);
        let doc: Value = serde_json::from_str(&documents[0]).unwrap();
        assert_eq!(doc["_aws"]["Timestamp"], 1_700_000_000_000_u64);
        let directive = &doc["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(directive["Namespace"], "InterruptionRouter");
        assert_eq!(directive["Dimensions"], json!([["FunctionName"]]));
        assert_eq!(doc["FunctionName"], "router");
        assert_eq!(doc["level"], "INFO");
        assert_eq!(doc["timestamp"], "2023-11-14T22:13:20.000Z");
        for (name, value) in [
            ("Received", 5),
            ("Forwarded", 3),
            ("Forwarded.alpha", 2),
            ("Forwarded.beta", 1),
            ("Ignored", 1),
            ("Ignored.unknown-instance", 1),
            ("DeadLettered", 1),
            ("DeadLettered.malformed", 1),
            ("Failed", 0),
            ("CacheHits", 3),
            ("CacheMisses", 2),
            ("DescribeInstancesCalls", 1),
            ("SendMessageBatchCalls", 3),
            ("GetQueueUrlCalls", 0),
            ("ColdStart", 1),
            ("OldestEventAge", 1500),
        ] {
            assert_eq!(doc[name], value, "{name}");
            let declared = directive["Metrics"]
                .as_array()
                .unwrap()
                .iter()
                .any(|d| d["Name"] == name);
            assert!(declared, "{name} carried but not declared");
        }
    }

    #[test]
    fn many_clusters_spread_over_directives_of_at_most_100_metrics() {
        let m = InvocationMetrics {
            forwarded: (0..250).map(|i| (format!("c{i}"), 1)).collect(),
            ..Default::default()
        };
        let doc: Value = serde_json::from_str(&m.to_emf("ns", "f", 0, Level::Warn)[0]).unwrap();
        let directives = doc["_aws"]["CloudWatchMetrics"].as_array().unwrap();
        assert_eq!(directives.len(), 3);
        assert!(
            directives
                .iter()
                .all(|d| d["Metrics"].as_array().unwrap().len() <= 100)
        );
        let declared: usize = directives
            .iter()
            .map(|d| d["Metrics"].as_array().unwrap().len())
            .sum();
        assert_eq!(declared, 27 + 250);
    }

    #[test]
    fn deliveries_and_unonboarded_clusters_are_recorded() {
        let m = InvocationMetrics {
            deliveries: (0..150)
                .map(|i| Delivered {
                    cluster: "alpha".into(),
                    event_id: format!("e{i}"),
                    instances: "i-1,i-2".into(),
                    age_ms: (i % 2 == 0).then_some(i),
                    kind: "spot-interruption",
                })
                .collect(),
            no_tenant_queue: [("delta".to_owned(), 3)].into(),
            declined: [(("beta".to_owned(), "scheduled-change"), 2)].into(),
            ..Default::default()
        };
        let docs: Vec<Value> = m
            .to_emf("ns", "f", 0, Level::Info)
            .iter()
            .map(|d| serde_json::from_str(d).unwrap())
            .collect();
        assert_eq!(docs.len(), 2, "150 deliveries spill into a second document");
        assert_eq!(docs[0]["Deliveries"].as_array().unwrap().len(), 100);
        assert_eq!(
            docs[1]["Deliveries"][49],
            json!(["alpha", "e149", "i-1,i-2", null, "spot-interruption"])
        );
        assert_eq!(docs[0]["NoTenantQueue"], 3);
        assert_eq!(docs[0]["NoTenantQueue.delta"], 3);
        assert!(docs[1].get("NoTenantQueue").is_none());
        assert_eq!(docs[0]["Declined"], 2);
        assert_eq!(docs[0]["Declined.beta.scheduled-change"], 2);
    }

    #[test]
    fn forward_ages_are_lists_of_at_most_a_hundred_per_document() {
        let m = InvocationMetrics {
            forward_ages_ms: (0..250).collect(),
            late_forwards: 3,
            ..Default::default()
        };
        let docs: Vec<Value> = m
            .to_emf("ns", "f", 0, Level::Fatal)
            .iter()
            .map(|d| serde_json::from_str(d).unwrap())
            .collect();
        assert_eq!(docs.len(), 3);
        let ages: Vec<u64> = docs
            .iter()
            .flat_map(|d| d["ForwardAge"].as_array().unwrap().clone())
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert_eq!(ages, (0..250).collect::<Vec<_>>());
        assert_eq!(docs[0]["LateForwards"], 3);
        assert_eq!(docs[0]["OldestEventAge"], 249);
        assert!(
            docs[1].get("Received").is_none(),
            "spill documents carry only ages"
        );
        for doc in &docs {
            assert_eq!(doc["level"], "FATAL", "every document passes the filter");
            let declared: Vec<&str> = doc["_aws"]["CloudWatchMetrics"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|d| d["Metrics"].as_array().unwrap())
                .map(|m| m["Name"].as_str().unwrap())
                .collect();
            assert!(declared.contains(&"ForwardAge"));
        }
    }
}
