//! BENCHMARKS.md's "What it costs" is what `tools/cost.py` prints, and the router's settings that
//! script assumes are base.yaml's defaults: a table edited by hand, or a default changed without
//! the model, fails here.

use std::process::Command;

use aws_model::{stacks::BASE_TEMPLATE, template::Template};

use super::{repo_file, section};

fn printed() -> String {
    let script = format!("{}/../tools/cost.py", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("python3")
        .arg(&script)
        .output()
        .expect("python3 runs tools/cost.py");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

#[test]
fn the_cost_table_is_what_the_cost_model_prints() {
    let benchmarks = repo_file("BENCHMARKS.md");
    let costs = section(&benchmarks, "## What it costs");
    let table = printed();
    assert!(
        costs.contains(table.trim()),
        "BENCHMARKS.md's cost table is not tools/cost.py's; run python3 tools/cost.py and paste \
         its table:\n{table}"
    );
    for source in ["tools/cost.py", "2026-12-04"] {
        assert!(costs.contains(source), "the section names {source}");
    }
}

#[test]
fn the_cost_model_assumes_base_yamls_defaults() {
    let script = repo_file("tools/cost.py");
    let base = Template::parse("base.yaml", BASE_TEMPLATE).expect("base.yaml");
    let default = |name: &str| -> String {
        let v = &base.doc["Parameters"][name]["Default"];
        v.as_str().map_or_else(|| v.to_string(), str::to_owned)
    };
    for (parameter, line) in [
        (
            "MemorySize",
            format!("MEMORY_GB = {} / 1024", default("MemorySize")),
        ),
        (
            "BatchSize",
            format!("BATCH_SIZE = {}", default("BatchSize")),
        ),
        (
            "CacheTtlSeconds",
            format!("CACHE_TTL_S = {}", default("CacheTtlSeconds")),
        ),
        ("Architecture", "LAMBDA_ARM_PER_GB_SECOND".to_owned()),
    ] {
        assert!(
            script.contains(&line),
            "tools/cost.py should assume base.yaml's {parameter} default ({line:?})"
        );
    }
    assert_eq!(default("Architecture"), "arm64", "the price the model uses");
}

/// The README's one line of cost is the table's row for 100 clusters in 10 accounts, rounded.
#[test]
fn the_readmes_cost_line_is_the_tables() {
    let table = printed();
    let row = table
        .lines()
        .find(|l| l.starts_with("| 100 (10) | quiet |"))
        .expect("the row of 100 clusters in 10 accounts");
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    let dollars = |cell: &str| -> f64 {
        cell.trim_matches('*')
            .trim_start_matches('$')
            .replace(',', "")
            .parse()
            .unwrap_or_else(|_| panic!("a dollar figure: {cell}"))
    };
    let (router, own) = (dollars(cells[7]), dollars(cells[8]));
    let readme = repo_file("README.md")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for figure in [router, own] {
        let said = format!("about ${}", (figure / 10.0).round() * 10.0);
        assert!(
            readme.contains(&said),
            "the README should say {said:?} ({row})"
        );
    }
}
