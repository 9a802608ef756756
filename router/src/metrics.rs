//! Metrics: one CloudWatch embedded-metric-format (EMF) document per invocation.
//!
//! The handler fills an [`InvocationMetrics`] while it works and prints [`InvocationMetrics::to_emf`]
//! to stdout once at the end, successful or not; CloudWatch Logs turns the line into metrics, with
//! no API call and no added latency. EMF takes one value per dimension per document, so the
//! per-cluster and per-reason series are separate metric names (`Forwarded.<cluster>`,
//! `Ignored.<reason>`, `DeadLettered.<reason>`) under the one `FunctionName` dimension; totals are
//! there too, for alarms.

use std::{collections::BTreeMap, sync::Arc};

use serde_json::{Map, Value, json};

/// EMF allows at most 100 metrics per directive; larger documents carry several directives.
const METRICS_PER_DIRECTIVE: usize = 100;

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct InvocationMetrics {
    /// Records (SQS messages, or the one direct event) received.
    pub received: u64,
    /// Messages delivered per cluster (a Health event can produce one per cluster).
    pub forwarded: BTreeMap<Arc<str>, u64>,
    /// Records not forwarded, per reason.
    pub ignored: BTreeMap<&'static str, u64>,
    /// Records sent to the dead-letter queue, per reason.
    pub dead_lettered: BTreeMap<&'static str, u64>,
    /// Records handed back for a retry (batchItemFailures, or a failed direct invocation).
    pub failed: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub describe_instances_calls: u64,
    pub send_message_batch_calls: u64,
    pub get_queue_url_calls: u64,
    /// Age of the oldest forwarded event (now minus its `time`), in milliseconds.
    pub oldest_event_age_ms: Option<u64>,
    pub cold_start: bool,
}

impl InvocationMetrics {
    /// The EMF document, as one line of JSON.
    pub fn to_emf(&self, namespace: &str, function_name: &str, timestamp_ms: u64) -> String {
        let mut values: Vec<(String, u64, &'static str)> = vec![
            ("Received".into(), self.received, "Count"),
            ("Forwarded".into(), self.forwarded.values().sum(), "Count"),
            ("Ignored".into(), self.ignored.values().sum(), "Count"),
            (
                "DeadLettered".into(),
                self.dead_lettered.values().sum(),
                "Count",
            ),
            ("Failed".into(), self.failed, "Count"),
            ("CacheHits".into(), self.cache_hits, "Count"),
            ("CacheMisses".into(), self.cache_misses, "Count"),
            (
                "DescribeInstancesCalls".into(),
                self.describe_instances_calls,
                "Count",
            ),
            (
                "SendMessageBatchCalls".into(),
                self.send_message_batch_calls,
                "Count",
            ),
            ("GetQueueUrlCalls".into(), self.get_queue_url_calls, "Count"),
            ("ColdStart".into(), u64::from(self.cold_start), "Count"),
        ];
        if let Some(age) = self.oldest_event_age_ms {
            values.push(("OldestEventAge".into(), age, "Milliseconds"));
        }
        values.extend(
            self.forwarded
                .iter()
                .map(|(c, n)| (format!("Forwarded.{c}"), *n, "Count")),
        );
        values.extend(
            self.ignored
                .iter()
                .map(|(r, n)| (format!("Ignored.{r}"), *n, "Count")),
        );
        values.extend(
            self.dead_lettered
                .iter()
                .map(|(r, n)| (format!("DeadLettered.{r}"), *n, "Count")),
        );

        let directives: Vec<Value> = values
            .chunks(METRICS_PER_DIRECTIVE)
            .map(|chunk| {
                let metrics: Vec<Value> = chunk.iter().map(|(name, _, unit)| json!({"Name": name, "Unit": unit})).collect();
                json!({"Namespace": namespace, "Dimensions": [["FunctionName"]], "Metrics": metrics})
            })
            .collect();
        let mut doc = Map::new();
        doc.insert(
            "_aws".into(),
            json!({"Timestamp": timestamp_ms, "CloudWatchMetrics": directives}),
        );
        doc.insert("FunctionName".into(), Value::from(function_name));
        for (name, value, _) in values {
            doc.insert(name, Value::from(value));
        }
        Value::Object(doc).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emf_document_declares_every_value_it_carries() {
        let m = InvocationMetrics {
            received: 5,
            forwarded: [(Arc::from("alpha"), 2), (Arc::from("beta"), 1)].into(),
            ignored: [("unknown-instance", 1)].into(),
            dead_lettered: [("malformed", 1)].into(),
            cache_hits: 3,
            cache_misses: 2,
            describe_instances_calls: 1,
            send_message_batch_calls: 3,
            oldest_event_age_ms: Some(1500),
            cold_start: true,
            ..Default::default()
        };
        let doc: Value =
            serde_json::from_str(&m.to_emf("InterruptionRouter", "router", 1_700_000_000_000))
                .unwrap();
        assert_eq!(doc["_aws"]["Timestamp"], 1_700_000_000_000_u64);
        let directive = &doc["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(directive["Namespace"], "InterruptionRouter");
        assert_eq!(directive["Dimensions"], json!([["FunctionName"]]));
        assert_eq!(doc["FunctionName"], "router");
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
            forwarded: (0..250).map(|i| (Arc::from(format!("c{i}")), 1)).collect(),
            ..Default::default()
        };
        let doc: Value = serde_json::from_str(&m.to_emf("ns", "f", 0)).unwrap();
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
        assert_eq!(declared, 11 + 250);
    }
}
