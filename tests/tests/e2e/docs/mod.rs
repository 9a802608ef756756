//! The reference docs against the code and templates they describe, so that they cannot drift:
//! docs/operating.md's table of the function's variables (what the router reads, what base.yaml
//! sets each from), its table of dead-letter reasons (what the router writes), its stack
//! parameters and outputs (what each template takes and gives), and every command the docs give
//! to paste ([`commands`]). Nothing here needs an emulator.

mod architecture;
mod commands;
mod cost;
mod install;
mod keys;

use std::collections::BTreeSet;

use aws_model::{
    stacks::{BASE_TEMPLATE, SPOKE_TEMPLATE},
    template::Template,
};
use interruption_router::{config::VARIABLES, handler::DeadLetterReason};
use serde_json::Value;

/// A file of the checkout, by its path there.
fn repo_file(path: &str) -> String {
    let full = format!("{}/../{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

fn operating() -> String {
    repo_file("docs/operating.md")
}

/// The shell blocks of the README's quick path, in order, each as pasted: its lines without the
/// indentation of the numbered step they sit under, joined by newlines.
pub(crate) fn quick_path_blocks() -> Vec<String> {
    let readme = repo_file("README.md");
    let start = readme.find("\n## The quick path\n").expect("a quick path");
    let end = readme[start + 1..]
        .find("\n## ")
        .map_or(readme.len(), |n| start + 1 + n);
    readme[start..end]
        .split("```sh\n")
        .skip(1)
        .map(|rest| {
            rest[..rest.find("```").expect("a closed block")]
                .lines()
                .map(|l| l.strip_prefix("   ").unwrap_or(l))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect()
}

/// The section of `doc` under `heading` (a whole heading line), up to the next heading of any
/// level.
fn section<'a>(doc: &'a str, heading: &str) -> &'a str {
    let start = doc
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("no {heading:?}"))
        + heading.len()
        + 2;
    let end = doc[start..].find("\n#").map_or(doc.len(), |n| start + n);
    &doc[start..end]
}

/// The rows of the first Markdown table in `text` whose header starts with `header`, as cells.
fn table(text: &str, header: &str) -> Vec<Vec<String>> {
    let start = text
        .find(&format!("| {header} |"))
        .unwrap_or_else(|| panic!("no table headed {header:?}"));
    text[start..]
        .lines()
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(|l| {
            l.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_owned())
                .collect()
        })
        .collect()
}

/// `` `name` `` → `name`.
fn code(cell: &str) -> &str {
    cell.trim_matches('`')
}

fn parameters(template: &Template) -> BTreeSet<String> {
    template.doc["Parameters"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect()
}

/// The parameters a value refers to (`Ref`, or `${Name}` in a `Fn::Sub`).
fn referred(value: &Value, parameters: &BTreeSet<String>) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    match value {
        Value::Object(map) => {
            if let Some(Value::String(name)) = map.get("Ref") {
                found.insert(name.clone());
            }
            for inner in map.values() {
                found.extend(referred(inner, parameters));
            }
        }
        Value::Array(items) => items
            .iter()
            .for_each(|i| found.extend(referred(i, parameters))),
        Value::String(text) => found.extend(
            parameters
                .iter()
                .filter(|p| text.contains(&format!("${{{p}}}")))
                .cloned(),
        ),
        _ => {}
    }
    found.retain(|p| parameters.contains(p));
    found
}

#[test]
fn the_configuration_table_lists_what_the_router_reads_and_where_base_yaml_sets_it() {
    let doc = operating();
    let rows = table(section(&doc, "## Configuration"), "variable");
    let listed: Vec<&str> = rows.iter().map(|r| code(&r[0])).collect();
    assert_eq!(
        listed, VARIABLES,
        "the table's variables, in the router's order"
    );

    let base = Template::parse("base.yaml", BASE_TEMPLATE).unwrap();
    let parameters = parameters(&base);
    let function = base
        .resources_of("AWS::Lambda::Function")
        .next()
        .expect("base.yaml's function")
        .1;
    let variables = function["Properties"]["Environment"]["Variables"]
        .as_object()
        .unwrap();
    for name in variables.keys() {
        assert!(
            VARIABLES.contains(&name.as_str()),
            "base.yaml sets {name}, which the router does not read"
        );
    }
    for row in &rows {
        let (variable, from) = (code(&row[0]), row[2].as_str());
        let set = variables.get(variable);
        let from_stack = set.map(|v| referred(v, &parameters)).unwrap_or_default();
        if let Some(named) = from.strip_prefix('`') {
            let parameter = named.split('`').next().unwrap();
            assert!(
                parameters.contains(parameter),
                "{variable}: base.yaml has no parameter {parameter}"
            );
            assert!(
                from_stack.contains(parameter),
                "{variable}: the table says base.yaml sets it from {parameter}, the template \
                 sets it to {set:?}"
            );
        } else if from.starts_with("fixed") {
            assert!(
                set.is_some(),
                "{variable}: the table says fixed, base.yaml does not set it"
            );
            assert!(
                from_stack.is_empty(),
                "{variable}: the table says fixed, base.yaml sets it from {from_stack:?}"
            );
        } else {
            assert_eq!(from, "not set", "{variable}");
            assert!(
                set.is_none(),
                "{variable}: the table says not set, base.yaml sets it"
            );
        }
    }
}

#[test]
fn the_dead_letter_reasons_the_docs_give_are_the_ones_the_router_writes() {
    let doc = operating();
    let rows = table(section(&doc, "## Failure semantics"), "reason");
    let documented: Vec<&str> = rows.iter().map(|r| code(&r[0])).collect();
    let written: Vec<&str> = DeadLetterReason::ALL.iter().map(|r| r.label()).collect();
    assert_eq!(documented, written);
    // Nowhere else in the docs a reason the router does not write (e.g. `lookup-failed`).
    for retired in ["lookup-failed", "send-failed", "queue-unknown"] {
        for file in ["operating.md", "many-accounts.md", "architecture.md"] {
            let text =
                std::fs::read_to_string(format!("{}/../docs/{file}", env!("CARGO_MANIFEST_DIR")))
                    .unwrap();
            assert!(!text.contains(&format!("`{retired}`")), "{file}: {retired}");
        }
    }
}

/// Every parameter of every template is in operating.md's list, and every name the list gives a
/// template (a backticked `CamelCase` word) is one of its parameters or outputs: a renamed
/// parameter fails here both ways.
#[test]
fn every_template_parameter_is_in_the_stack_parameters_list() {
    let doc = operating();
    let list = section(&doc, "### Stack parameters");
    for (name, template) in commands::templates() {
        let item = list
            .split("\n- ")
            .find(|i| i.starts_with(&format!("`{name}`")))
            .unwrap_or_else(|| panic!("no item for {name}"));
        let missing: Vec<String> = parameters(&template)
            .into_iter()
            .filter(|p| !item.contains(&format!("`{p}`")))
            .collect();
        assert!(missing.is_empty(), "{name}: {missing:?} not in the list");
        let known: BTreeSet<String> = commands::keys(&template, "Parameters")
            .into_iter()
            .chain(commands::keys(&template, "Outputs"))
            .collect();
        let unknown: Vec<&str> = item
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|w| {
                w.len() > 2
                    && w.starts_with(|c: char| c.is_ascii_uppercase())
                    && w.chars().all(|c| c.is_ascii_alphanumeric())
                    && w.chars().any(|c| c.is_ascii_lowercase())
            })
            .filter(|w| !known.contains(*w))
            .collect();
        assert!(
            unknown.is_empty(),
            "{name}: the list names {unknown:?}, which it has not"
        );
    }
}

/// operating.md's table of outputs is every template's outputs, no more, no fewer.
#[test]
fn the_stack_outputs_table_is_every_templates_outputs() {
    let doc = operating();
    let rows = table(section(&doc, "### Stack outputs"), "template");
    for (name, template) in commands::templates() {
        let listed: BTreeSet<String> = rows
            .iter()
            .filter(|r| code(&r[0]) == name)
            .map(|r| code(&r[1]).to_owned())
            .collect();
        assert_eq!(listed, commands::keys(&template, "Outputs"), "{name}");
    }
    let named: BTreeSet<&str> = rows.iter().map(|r| code(&r[0])).collect();
    assert_eq!(named.len(), 5, "{named:?}");
}

#[test]
fn the_spoke_roles_actions_in_the_docs_are_the_ones_spoke_yaml_grants() {
    let spoke = Template::parse("spoke.yaml", SPOKE_TEMPLATE).unwrap();
    let role = spoke
        .resources_of("AWS::IAM::Role")
        .find(|(id, _)| *id == "SpokeRole");
    let role = role.expect("spoke.yaml's SpokeRole").1;
    let mut granted = BTreeSet::new();
    for policy in role["Properties"]["Policies"].as_array().unwrap() {
        for statement in policy["PolicyDocument"]["Statement"].as_array().unwrap() {
            // A statement granted under a condition (`!If [cond, statement, NoValue]`).
            let statement = match statement.get("Fn::If") {
                Some(branches) => &branches[1],
                None => statement,
            };
            match &statement["Action"] {
                Value::String(a) => {
                    granted.insert(a.clone());
                }
                Value::Array(actions) => {
                    granted.extend(actions.iter().filter_map(|a| a.as_str().map(str::to_owned)))
                }
                other => panic!("{other}"),
            }
        }
    }
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/many-accounts.md"
    ))
    .unwrap();
    let start = doc
        .find("may do exactly what the router does in the account")
        .expect("the spoke role's paragraph");
    let paragraph = &doc[start..start + doc[start..].find("Deploy that region first").unwrap()];
    let documented: BTreeSet<String> = paragraph
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|c| {
            c.split_once(':').is_some_and(|(service, action)| {
                ["ec2", "tag", "sqs", "ssm", "sts", "kms", "iam"].contains(&service)
                    && action
                        .chars()
                        .next()
                        .is_some_and(|c| c.is_ascii_uppercase())
            })
        })
        .map(str::to_owned)
        .collect();
    assert_eq!(documented, granted);
}

/// Each tuning parameter reaches the function's variable of the table (and the router accepts the
/// value); at its default the variable is left to the router's own default.
#[test]
fn a_tuned_parameter_reaches_the_function_and_the_router_accepts_it() {
    use aws_model::template::Stage;

    let base = Template::parse("base.yaml", BASE_TEMPLATE).unwrap();
    let stage = || {
        Stage::new("interruption-router", "123456789012", "us-east-1")
            .parameter("CodeS3Bucket", "artifacts")
            .parameter("CodeS3Key", "bootstrap.zip")
    };
    let environment = |stage: &Stage| -> serde_json::Map<String, Value> {
        let deployed = base.deploy(stage).unwrap();
        deployed.properties("RouterFunction").unwrap().unwrap()["Environment"]["Variables"]
            .as_object()
            .unwrap()
            .clone()
    };
    let tuned = [
        ("CacheTtlSeconds", "CACHE_TTL_SECONDS", "7200"),
        (
            "NegativeCacheTtlSeconds",
            "NEGATIVE_CACHE_TTL_SECONDS",
            "30",
        ),
        ("CacheMaxEntries", "CACHE_MAX_ENTRIES", "5000"),
        ("SweepIntervalSeconds", "SWEEP_INTERVAL_SECONDS", "0"),
        ("LookupHedgeDelayMs", "LOOKUP_HEDGE_DELAY_MS", "250"),
        ("Ec2SuspectAfterFailures", "EC2_SUSPECT_AFTER_FAILURES", "3"),
        ("Ec2SuspectSeconds", "EC2_SUSPECT_SECONDS", "60"),
    ];
    let mut all = stage();
    for (parameter, _, value) in tuned {
        all = all.parameter(parameter, value);
    }
    let variables = environment(&all);
    for (_, variable, value) in tuned {
        assert_eq!(variables[variable], value, "{variable}");
    }
    let config = interruption_router::config::Config::from_lookup(|name| {
        variables
            .get(name)
            .and_then(|v| v.as_str())
            .map(str::to_owned)
    })
    .unwrap();
    assert_eq!(config.cache.sweep_every, std::time::Duration::ZERO);

    let defaults = environment(&stage());
    for variable in [
        "SWEEP_INTERVAL_SECONDS",
        "LOOKUP_HEDGE_DELAY_MS",
        "EC2_SUSPECT_AFTER_FAILURES",
        "EC2_SUSPECT_SECONDS",
    ] {
        assert!(!defaults.contains_key(variable), "{variable}: {defaults:?}");
    }
    assert_eq!(defaults["CACHE_TTL_SECONDS"], "3600");
}

/// operating.md's list of metrics names every metric the router's EMF documents carry (a
/// per-cluster, per-reason or per-kind one as `Name.<…>`), and nothing it does not write.
#[test]
fn the_metrics_the_docs_list_are_the_ones_the_router_writes() {
    use interruption_router::metrics::InvocationMetrics;
    let mut metrics = InvocationMetrics {
        forward_ages_ms: vec![1],
        ..InvocationMetrics::default()
    };
    metrics.forwarded.insert("alpha".into(), 1);
    metrics.no_tenant_queue.insert("alpha".into(), 1);
    metrics
        .declined
        .insert(("alpha".into(), "spot-interruption"), 1);
    metrics.ignored.insert("no-tenant-queue", 1);
    metrics.dead_lettered.insert("queue-missing", 1);
    let documents = metrics.to_emf(
        "InterruptionRouter",
        "f",
        0,
        interruption_router::logging::Level::Info,
    );
    let mut written = BTreeSet::new();
    for document in documents {
        let document: Value = serde_json::from_str(&document).unwrap();
        for metric in document["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .unwrap()
        {
            let name = metric["Name"].as_str().unwrap();
            // The per-cluster, per-reason, per-kind series: `Name.<…>` in the docs.
            let base = name.split('.').next().unwrap();
            written.insert(if base == name {
                name.to_owned()
            } else {
                format!("{base}.<")
            });
        }
    }
    let doc = operating();
    let start = doc.find("- **Metrics**:").expect("the Metrics item");
    let item = &doc[start..start + doc[start..].find("\n- **").unwrap()];
    let listed: BTreeSet<String> = item
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|w| w.starts_with(|c: char| c.is_ascii_uppercase()) && !w.contains(' '))
        .map(|w| match w.split_once(".<") {
            Some((base, _)) => format!("{base}.<"),
            None => w.to_owned(),
        })
        .filter(|w| w != "FunctionName" && w != "Deliveries")
        .collect();
    assert_eq!(listed, written);
}

/// operating.md's table of the interruption record's fields lists every field the router writes,
/// in the order it writes them, and nothing it does not.
#[test]
fn the_record_fields_the_docs_list_are_the_ones_the_router_writes() {
    let doc = operating();
    let rows = table(section(&doc, "### Interruption records"), "field");
    let listed: Vec<String> = rows
        .iter()
        .flat_map(|row| row[0].split(", ").map(|f| code(f).to_owned()))
        .collect();
    assert_eq!(listed, interruption_router::insight::fields());
}

/// Every `fn` of the test sources: where docs/security.md's tests must be.
fn test_functions() -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let root = std::path::PathBuf::from(format!("{}/..", env!("CARGO_MANIFEST_DIR")));
    let mut pending = vec![root.join("tests/tests"), root.join("router-core/tests")];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for line in text.lines() {
                    let line = line.trim_start();
                    let rest = line
                        .strip_prefix("async fn ")
                        .or_else(|| line.strip_prefix("fn "));
                    if let Some(name) = rest.and_then(|r| r.split(['(', '<']).next()) {
                        found.insert(name.to_owned());
                    }
                }
            }
        }
    }
    found
}

/// docs/security.md's threat model names, in every row, a test that exists: a control without
/// its proof, or a proof renamed away, fails here.
#[test]
fn every_row_of_the_threat_model_names_a_test_that_exists() {
    let doc = repo_file("docs/security.md");
    let rows = table(&doc, "principal");
    assert!(rows.len() >= 15, "{} rows", rows.len());
    let functions = test_functions();
    for row in &rows {
        let proof = row.last().expect("a proof cell");
        let named: Vec<&str> = proof
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|span| span.contains("::"))
            .collect();
        assert!(!named.is_empty(), "no test named in {row:?}");
        for path in named {
            let name = path.rsplit("::").next().unwrap();
            assert!(functions.contains(name), "{path}: no such test ({row:?})");
        }
    }
}

/// GitHub's anchor of a Markdown heading: lower case, punctuation but `-` and `_` dropped, spaces
/// as `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Every relative link of the README and the docs names a file that exists, and an anchor a
/// heading of that file has: a section moved or renamed fails here, not in a reader's browser.
#[test]
fn every_link_of_the_readme_and_the_docs_leads_somewhere() {
    let root = std::path::PathBuf::from(format!("{}/..", env!("CARGO_MANIFEST_DIR")));
    let mut docs: Vec<String> = vec![
        "README.md".into(),
        "CHANGELOG.md".into(),
        "BENCHMARKS.md".into(),
    ];
    for entry in std::fs::read_dir(root.join("docs")).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") {
            docs.push(format!("docs/{name}"));
        }
    }
    let anchors_of = |path: &std::path::Path| -> BTreeSet<String> {
        let mut in_code = false;
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .filter(|l| {
                if l.trim_start().starts_with("```") {
                    in_code = !in_code;
                }
                !in_code && l.starts_with('#')
            })
            .map(|l| anchor(l.trim_start_matches('#')))
            .collect()
    };
    let mut checked = 0;
    for doc in &docs {
        let text = repo_file(doc);
        let here = root.join(doc);
        let dir = here.parent().unwrap().to_owned();
        let mut in_code = false;
        for line in text.lines() {
            if line.trim_start().starts_with("```") {
                in_code = !in_code;
                continue;
            }
            if in_code {
                continue;
            }
            for part in line.split("](").skip(1) {
                let Some(target) = part.split(')').next() else {
                    continue;
                };
                if target.starts_with("http")
                    || target.starts_with("mailto:")
                    || target.contains(' ')
                {
                    continue;
                }
                let (file, fragment) = target.split_once('#').unwrap_or((target, ""));
                let path = if file.is_empty() {
                    here.clone()
                } else {
                    dir.join(file)
                };
                assert!(
                    path.exists(),
                    "{doc}: link to {target}: no {}",
                    path.display()
                );
                if !fragment.is_empty() && path.extension().is_some_and(|e| e == "md") {
                    assert!(
                        anchors_of(&path).contains(fragment),
                        "{doc}: link to {target}: no heading #{fragment} in {file}"
                    );
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 50, "{checked} links");
}

/// The README starts with the reader's cluster (which path fits) before any command, and stays
/// short: the rest is in docs/.
#[test]
fn the_readme_leads_with_the_path_that_fits_and_stays_short() {
    let readme = repo_file("README.md");
    let lines = readme.lines().count();
    assert!(
        lines <= 300,
        "README.md is {lines} lines: move detail into docs/"
    );
    let first = readme
        .find("\n## ")
        .map(|at| &readme[at + 1..])
        .unwrap_or_default();
    assert!(
        first.starts_with("## Which path fits your cluster"),
        "the README's first section is not the paths: {}",
        first.lines().next().unwrap_or_default()
    );
    assert!(
        readme.find("```sh").unwrap() > readme.find("## Which path fits your cluster").unwrap()
    );
}
