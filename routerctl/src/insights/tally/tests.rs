use router_core::insight::InterruptionRecord;

use super::*;

/// A forwarded record of `cluster`'s `pool` node in us-east-1 of 111111111111, `delay_ms` late.
fn forwarded(
    cluster: &str,
    kind: &str,
    pool: &str,
    zone: &str,
    delay_ms: u64,
) -> InterruptionRecord {
    InterruptionRecord {
        outcome: "forwarded".into(),
        account: Some("111111111111".into()),
        region: Some("us-east-1".into()),
        cluster: Some(cluster.into()),
        kind: Some(kind.into()),
        instance: Some(format!("i-0{cluster}")),
        instance_type: "m6i.large".into(),
        zone: zone.into(),
        capacity_type: "spot".into(),
        node_pool: pool.into(),
        event_time: Some("2026-11-28T00:00:00Z".into()),
        delay_ms: Some(delay_ms),
        ..InterruptionRecord::default()
    }
}

fn ignored() -> InterruptionRecord {
    InterruptionRecord {
        outcome: "ignored".into(),
        reason: Some("unknown-instance".into()),
        instance_type: "unknown".into(),
        zone: "unknown".into(),
        capacity_type: "unknown".into(),
        node_pool: "unknown".into(),
        ..InterruptionRecord::default()
    }
}

fn records() -> Vec<InterruptionRecord> {
    vec![
        forwarded("alpha", "spot-interruption", "batch", "us-east-1a", 900),
        forwarded("alpha", "spot-interruption", "batch", "us-east-1a", 1100),
        forwarded("alpha", "state-change", "batch", "us-east-1a", 1000),
        forwarded("alpha", "spot-interruption", "batch", "us-east-1b", 130_000),
        forwarded("beta", "spot-interruption", "default", "us-east-1a", 400),
        ignored(),
    ]
}

fn cell<'r>(row: &'r Row, name: &str) -> &'r str {
    row.get(name).map(String::as_str).unwrap_or("-")
}

/// The pools query counts forwarded records by every field it groups by (the ignored one is no
/// interruption of a pool), most first.
#[test]
fn the_pools_query_counts_forwarded_records_by_pool_most_first() {
    let rows = answer(POOLS, &records()).unwrap();
    let seen: Vec<(&str, &str, &str, &str, &str)> = rows
        .iter()
        .map(|r| {
            (
                cell(r, "interruptions"),
                cell(r, "cluster"),
                cell(r, "kind"),
                cell(r, "zone"),
                cell(r, "node_pool"),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("2", "alpha", "spot-interruption", "us-east-1a", "batch"),
            ("1", "alpha", "spot-interruption", "us-east-1b", "batch"),
            ("1", "alpha", "state-change", "us-east-1a", "batch"),
            ("1", "beta", "spot-interruption", "us-east-1a", "default"),
        ]
    );
    assert_eq!(cell(&rows[0], "capacity_type"), "spot");
    assert_eq!(cell(&rows[0], "instance_type"), "m6i.large");
    assert_eq!(cell(&rows[0], "account"), "111111111111");
}

/// The delays query gives each cluster's deliveries, nearest-rank p50 and p99 and the longest,
/// latest p99 first; the late query the deliveries over two minutes, at most its limit.
#[test]
fn the_delays_and_late_queries_measure_each_clusters_delivery() {
    let rows = answer(DELAYS, &records()).unwrap();
    let seen: Vec<[&str; 5]> = rows
        .iter()
        .map(|r| ["cluster", "delivered", "p50_ms", "p99_ms", "max_ms"].map(|f| cell(r, f)))
        .collect();
    assert_eq!(
        seen,
        [
            ["alpha", "4", "1000", "130000", "130000"],
            ["beta", "1", "400", "400", "400"],
        ]
    );
    let late = answer(LATE, &records()).unwrap();
    assert_eq!(late.len(), 1);
    assert_eq!(cell(&late[0], "delay_ms"), "130000");
    assert_eq!(cell(&late[0], "zone"), "us-east-1b");
    let many: Vec<InterruptionRecord> = (0..1500)
        .map(|n| {
            forwarded(
                "alpha",
                "spot-interruption",
                "batch",
                "us-east-1a",
                120_001 + n,
            )
        })
        .collect();
    let late = answer(LATE, &many).unwrap();
    assert_eq!(late.len(), LATE_LIMIT);
    assert_eq!(cell(&late[0], "delay_ms"), "121500", "latest first");
    assert_eq!(percentile(&[], 50), 0);
    assert_eq!(percentile(&[1, 2, 3, 4], 50), 2);
    assert_eq!(percentile(&[1, 2, 3, 4], 99), 4);
}

/// Only the three queries are answered, whatever their line breaks (a dashboard widget writes
/// one on a line).
#[test]
fn only_the_three_queries_are_answered() {
    assert!(answer("fields @message | limit 5", &records()).is_none());
    let one_line = POOLS.replace('\n', " ");
    assert_eq!(answer(&one_line, &records()), answer(POOLS, &records()));
    assert_eq!(QUERIES.map(|(_, q)| q), [POOLS, DELAYS, LATE]);
}

/// Two hubs' answers: the pools summed across them, each cluster's delay as its own hub measured
/// it, with its late deliveries counted; `--cluster` keeps only that cluster's rows.
#[test]
fn hubs_answers_are_merged_and_filtered_by_cluster() {
    let east = Answers::of("us-east-1", &records());
    let mut west_records = records();
    for r in &mut west_records {
        r.region = Some("us-west-2".into());
    }
    west_records.push(forwarded(
        "alpha",
        "spot-interruption",
        "batch",
        "us-east-1a",
        200,
    ));
    let west = Answers::of("us-west-2", &west_records[..1]);
    let insights = Insights::from_answers(&[east.clone(), west], &[]).unwrap();
    let top = &insights.pools[0];
    assert_eq!(
        (top.interruptions, top.cluster.as_str(), top.zone.as_str()),
        (2, "alpha", "us-east-1a")
    );
    assert_eq!(insights.interruptions(), 6);
    let delays: Vec<(&str, &str, &str, u64, u64)> = insights
        .delays
        .iter()
        .map(|d| {
            (
                d.hub.as_str(),
                d.region.as_str(),
                d.cluster.as_str(),
                d.p99_ms,
                d.late,
            )
        })
        .collect();
    assert_eq!(
        delays,
        [
            ("us-east-1", "us-east-1", "alpha", 130_000, 1),
            ("us-west-2", "us-west-2", "alpha", 900, 0),
            ("us-east-1", "us-east-1", "beta", 400, 0),
        ]
    );
    assert_eq!(insights.late.len(), 1);

    let beta = Insights::from_answers(&[east], &["beta".to_owned()]).unwrap();
    assert_eq!(beta.interruptions(), 1);
    assert!(beta.delays.iter().all(|d| d.cluster == "beta"));
    assert!(beta.late.is_empty());
}

/// Logs Insights writes its numbers as text, percentiles with decimals; a row without a field
/// the report needs is refused, naming the field and where to look.
#[test]
fn answers_are_read_as_logs_insights_writes_them() {
    let row = |fields: &[(&str, &str)]| -> Row {
        fields
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let answers = Answers {
        hub: "us-east-1".into(),
        pools: vec![],
        delays: vec![row(&[
            ("account", "1"),
            ("region", "us-east-1"),
            ("cluster", "alpha"),
            ("delivered", "3"),
            ("p50_ms", "812.4"),
            ("p99_ms", "1020.5"),
            ("max_ms", "1100"),
        ])],
        late: vec![],
    };
    let insights = Insights::from_answers(std::slice::from_ref(&answers), &[]).unwrap();
    assert_eq!(
        (insights.delays[0].p50_ms, insights.delays[0].p99_ms),
        (812, 1021)
    );
    let mut broken = answers;
    broken.delays[0].remove("p99_ms");
    let error = Insights::from_answers(&[broken], &[]).unwrap_err();
    assert!(error.contains("\"p99_ms\""), "{error}");
    assert!(error.contains("RouterLogGroup"), "{error}");
}

/// The terminal's tables: the pools with their counts, each cluster's delay with its late count
/// (≥ when the late query stopped at its limit), the late deliveries; and an empty window says so.
#[test]
fn the_report_renders_both_tables() {
    let insights = Insights::from_answers(&[Answers::of("us-east-1", &records())], &[]).unwrap();
    let text = insights.render();
    assert!(text.contains("most reclaimed pools"), "{text}");
    let pools: Vec<String> = text
        .lines()
        .skip_while(|l| !l.contains("total"))
        .take(4)
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    // One row per pool of a cluster, its kinds in columns, most reclaimed first.
    assert_eq!(
        pools,
        [
            "total spot rebal state cr health account region cluster node pool type zone capacity",
            "3 2 0 1 0 0 111111111111 us-east-1 alpha batch m6i.large us-east-1a spot",
            "1 1 0 0 0 0 111111111111 us-east-1 alpha batch m6i.large us-east-1b spot",
            "1 1 0 0 0 0 111111111111 us-east-1 beta default m6i.large us-east-1a spot",
        ],
        "{text}"
    );
    assert!(text.contains("late: over 120 s"), "{text}");
    let alpha = text
        .lines()
        .find(|l| l.contains("alpha") && l.contains("130000") && l.contains("us-east-1  "))
        .unwrap();
    assert!(
        alpha.contains(" 1  us-east-1"),
        "one late delivery: {alpha}"
    );
    assert!(text.contains("late deliveries, latest first"), "{text}");

    let many: Vec<InterruptionRecord> = (0..1500)
        .map(|n| {
            forwarded(
                "alpha",
                "spot-interruption",
                "batch",
                "us-east-1a",
                120_001 + n,
            )
        })
        .collect();
    let capped = Insights::from_answers(&[Answers::of("us-east-1", &many)], &[]).unwrap();
    assert!(capped.delays[0].late_capped);
    assert!(capped.render().contains("≥1000"), "{}", capped.render());

    let empty = Insights::from_answers(&[Answers::of("us-east-1", &[])], &[]).unwrap();
    assert_eq!(empty.render().matches("none in the window").count(), 2);
}
