//! docs/architecture.md and the module docs name files, directories and types that exist: a file
//! moved, split or renamed fails here until the docs say where it went.
//!
//! What is checked, in backticks: a name ending in `.rs`, `.py` or a slash is a path (from the
//! checkout's root, the crate the text is about, or the documented file's own directory, else
//! found by its file name anywhere in the checkout); a CamelCase name in architecture.md must
//! still be spelled somewhere in the workspace's Rust (a type, a variant, or an AWS code the code
//! handles), so a type renamed leaves its old name failing here. Other backticked text (commands,
//! values, functions) is left alone.

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every file under `dir` (recursively), skipping build output and hidden directories.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name == "target" || name == "node_modules" {
            continue;
        }
        if path.is_dir() {
            out.push(path.clone());
            out.extend(files(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// The crates of the workspace, by directory name.
const CRATES: [&str; 11] = [
    "router-core",
    "router",
    "aws-call-error",
    "aws-model",
    "aws-clients",
    "aws-world",
    "local-aws",
    "routerctl",
    "lab",
    "tests",
    "simulation",
];

/// The backticked spans of `text`.
fn spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// Paths the docs name that are not the checkout's: a release's layout in its bucket.
const NOT_THE_CHECKOUTS: [&str; 1] = ["latest/"];

fn is_path(span: &str) -> bool {
    span.len() > 3
        && !span.starts_with('.')
        && !NOT_THE_CHECKOUTS.contains(&span)
        && !span.contains(' ')
        && !span.contains('<')
        && !span.contains('*')
        && !span.starts_with("http")
        && !span.starts_with("--")
        && (span.ends_with(".rs") || span.ends_with(".py") || span.ends_with('/'))
}

fn is_type(span: &str) -> bool {
    let mut chars = span.chars();
    chars.next().is_some_and(|c| c.is_ascii_uppercase())
        && span.chars().all(|c| c.is_ascii_alphanumeric())
        && span.chars().any(|c| c.is_ascii_lowercase())
        && span.len() > 2
}

/// Whether `span` names a path that exists: from the root, from each of `within`, or by its
/// file name under one of `within` (never merely somewhere else in the checkout: a file moved to
/// another crate fails).
fn path_exists(span: &str, within: &[&Path], all: &[PathBuf]) -> bool {
    let trimmed = span.trim_end_matches('/');
    root().join(trimmed).exists()
        || within.iter().any(|w| w.join(trimmed).exists())
        || all.iter().any(|p| {
            within.iter().any(|w| p.starts_with(w))
                && p.to_string_lossy().ends_with(&format!("/{trimmed}"))
        })
}

/// Every word the workspace's Rust spells (code, strings and comments alike).
fn spelled(all: &[PathBuf]) -> BTreeSet<String> {
    let mut words = BTreeSet::new();
    for path in all
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
    {
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        words.extend(
            text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|w| w.chars().next().is_some_and(|c| c.is_ascii_uppercase()))
                .map(str::to_owned),
        );
    }
    words
}

/// The crate directory a table row or paragraph of architecture.md is about, if it names one first.
fn crate_of(line: &str) -> Option<&'static str> {
    let first = spans(line).into_iter().next()?;
    let first = first.trim_end_matches('/');
    CRATES.into_iter().find(|c| *c == first)
}

#[test]
fn every_file_module_and_type_architecture_md_names_exists() {
    let root = root();
    let all = files(&root);
    let types = spelled(&all);
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let mut missing = Vec::new();
    for (n, line) in doc.lines().enumerate() {
        let within = crate_of(line).map_or_else(|| root.clone(), |c| root.join(c));
        for span in spans(line) {
            if is_path(span) && !path_exists(span, &[&within], &all) {
                missing.push(format!("line {}: path `{span}`", n + 1));
            } else if is_type(span) && !types.contains(span) {
                missing.push(format!("line {}: type `{span}`", n + 1));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/architecture.md names what does not exist:\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_file_a_module_doc_names_exists() {
    let root = root();
    let all = files(&root);
    let mut missing = Vec::new();
    for krate in CRATES {
        let dir = root.join(krate);
        for path in files(&dir)
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let docs: String = text
                .lines()
                .filter(|l| l.trim_start().starts_with("//!"))
                .collect::<Vec<_>>()
                .join("\n");
            for span in spans(&docs) {
                let here = path.parent().unwrap_or(&dir);
                if is_path(span) && !path_exists(span, &[&dir, here], &all) {
                    missing.push(format!(
                        "{}: `{span}`",
                        path.strip_prefix(&root).unwrap_or(&path).display()
                    ));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "module docs name files that do not exist:\n{}",
        missing.join("\n")
    );
}
