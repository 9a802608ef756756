//! `routerctl insights`: what the router saw of an organisation's interruptions, in a terminal.
//! The most reclaimed node pools (by cluster, kind, instance type and Availability Zone) and
//! each cluster's delivery delay, over a window, across a hub's regions.
//!
//! It runs base.yaml's three Logs Insights queries ([`tally::QUERIES`], the ones its query
//! definitions and dashboard row hold) on each hub's router log group (its base stack's
//! `RouterLogGroup`, or `--log-group`), through the seam ([`LogQueries`]: StartQuery, then
//! GetQueryResults until the query completes), and builds the report from the answers with
//! [`tally::Insights::from_answers`]. The answers come from the router's interruption records
//! ([`router_core::insight`]).
//!
//! The report passes when no delivery in the window was later than two minutes (a spot
//! warning's notice): exit status 1 otherwise, so a scheduled run can page.

pub mod tally;

#[cfg(test)]
mod on_the_model;

use std::time::{Duration, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::cloud::{missing, queries::LogQueries};
use tally::{Answers, Insights, QUERIES, Row};

/// The window when `--since` is not given.
pub const DEFAULT_SINCE: &str = "24h";
/// How long one query may run before insights gives up on it (Logs Insights ends a query after
/// 60 minutes; a day of one hub's records takes seconds).
pub const QUERY_PATIENCE: Duration = Duration::from_secs(300);
/// How often a running query is asked for its results.
pub const POLL: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
pub struct Options {
    /// The base stack, whose `RouterLogGroup` holds the records, in each region.
    pub stack: String,
    /// This log group instead of the stack's.
    pub log_group: Option<String>,
    /// The window: from this long ago to now.
    pub since: Duration,
    /// Only these clusters' rows (every cluster's when empty).
    pub clusters: Vec<String>,
}

/// What insights found: the window, the log group queried in each hub's region, the report.
#[derive(Debug, Clone)]
pub struct Report {
    pub from_ms: i64,
    pub to_ms: i64,
    /// (region, log group) of each hub queried.
    pub hubs: Vec<(String, String)>,
    pub insights: Insights,
}

impl Report {
    /// No delivery later than two minutes.
    pub fn passed(&self) -> bool {
        self.insights.late.is_empty()
    }

    pub fn render(&self) -> String {
        let hubs: Vec<String> = self
            .hubs
            .iter()
            .map(|(region, group)| format!("{group} in {region}"))
            .collect();
        format!(
            "interruptions the router recorded from {} to {} ({})\n\n{}\n{}\n",
            aws_model::events::rfc3339(UNIX_EPOCH + Duration::from_millis(self.from_ms as u64)),
            aws_model::events::rfc3339(UNIX_EPOCH + Duration::from_millis(self.to_ms as u64)),
            hubs.join(", "),
            self.insights.render(),
            match self.passed() {
                true => "PASS: no delivery later than 120 s".to_owned(),
                false => format!(
                    "FAIL: {} deliveries later than 120 s (a spot warning gives two minutes)",
                    self.insights.late.len()
                ),
            }
        )
    }

    /// The report as JSON (`--json`): the window, the hubs, the pools, the delays, the late
    /// deliveries.
    pub fn to_json(&self) -> Value {
        json!({
            "from_ms": self.from_ms,
            "to_ms": self.to_ms,
            "hubs": self.hubs.iter().map(|(region, group)| json!({"region": region, "log_group": group})).collect::<Vec<_>>(),
            "passed": self.passed(),
            "pools": self.insights.pools,
            "delays": self.insights.delays,
            "late": self.insights.late,
        })
    }
}

/// Runs the queries on each hub (one per `--region`) and builds the report.
pub async fn run<C: LogQueries>(hubs: &[C], options: &Options) -> Result<Report> {
    let Some(first) = hubs.first() else {
        bail!("no region to query: pass --region, or configure a default region");
    };
    let to = first.now();
    let from = to.checked_sub(options.since).unwrap_or(UNIX_EPOCH);
    let ms = |t: std::time::SystemTime| {
        t.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis() as i64
    };
    let (from_ms, to_ms) = (ms(from), ms(to));
    let mut answers = Vec::new();
    let mut queried = Vec::new();
    for hub in hubs {
        let group = match &options.log_group {
            Some(group) => group.clone(),
            None => router_log_group(hub, &options.stack).await?,
        };
        answers.push(answer(hub, &group, from_ms / 1000, to_ms / 1000).await?);
        queried.push((hub.region().to_owned(), group));
    }
    let insights = Insights::from_answers(&answers, &options.clusters)
        .map_err(anyhow::Error::msg)
        .context("reading the queries' answers")?;
    Ok(Report {
        from_ms,
        to_ms,
        hubs: queried,
        insights,
    })
}

/// The base stack's RouterLogGroup in this hub's region.
async fn router_log_group(hub: &impl LogQueries, stack: &str) -> Result<String> {
    let resources = hub.stack_resources(stack).await.map_err(|e| {
        anyhow::anyhow!(
            "DescribeStackResources {stack} in {}: {e}. Fix: pass the base stack's name with \
             --stack, or its log group with --log-group",
            hub.region()
        )
    })?;
    resources.get("RouterLogGroup").cloned().with_context(|| {
        format!(
            "stack {stack} in {} has no resource RouterLogGroup: is it the router's base stack \
             (cloudformation/base.yaml)? Fix: --stack <base stack>, or --log-group <group>",
            hub.region()
        )
    })
}

/// The three queries' answers over `group` from `from_s` to `to_s`: all started, then each read
/// until it completes.
async fn answer(hub: &impl LogQueries, group: &str, from_s: i64, to_s: i64) -> Result<Answers> {
    let mut started = Vec::new();
    for (name, query) in QUERIES {
        let id = hub
            .start_query(group, query, from_s, to_s)
            .await
            .map_err(|e| {
                let fix = match e.code == missing::RESOURCE {
                    true => {
                        "the log group does not exist here: is --region the hub's, and \
                             --stack or --log-group right?"
                    }
                    false => {
                        "the caller needs logs:StartQuery and logs:GetQueryResults on the \
                              router's log group"
                    }
                };
                anyhow::anyhow!(
                    "StartQuery ({name}) on {group} in {}: {e}. Fix: {fix}",
                    hub.region()
                )
            })?;
        started.push((name, id));
    }
    let mut rows: Vec<Vec<Row>> = Vec::new();
    for (name, id) in started {
        rows.push(completed(hub, name, &id).await?);
    }
    let late = rows.pop().unwrap_or_default();
    let delays = rows.pop().unwrap_or_default();
    let pools = rows.pop().unwrap_or_default();
    Ok(Answers {
        hub: hub.region().to_owned(),
        pools,
        delays,
        late,
    })
}

/// Query `id`'s rows once it completes, within [`QUERY_PATIENCE`].
async fn completed(hub: &impl LogQueries, name: &str, id: &str) -> Result<Vec<Row>> {
    let deadline = tokio::time::Instant::now() + QUERY_PATIENCE;
    loop {
        let results = hub
            .query_results(id)
            .await
            .map_err(|e| anyhow::anyhow!("GetQueryResults ({name}) {id}: {e}"))?;
        match results.status.as_str() {
            "Complete" => return Ok(results.rows),
            "Scheduled" | "Running" | "Unknown" if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(POLL).await;
            }
            "Scheduled" | "Running" | "Unknown" => bail!(
                "query {id} ({name}) still {} after {} s. Fix: a shorter --since",
                results.status,
                QUERY_PATIENCE.as_secs()
            ),
            other => bail!(
                "query {id} ({name}) ended {other}. Fix: run it again, or a shorter --since (Logs \
                 Insights ends a query after 60 minutes)"
            ),
        }
    }
}
