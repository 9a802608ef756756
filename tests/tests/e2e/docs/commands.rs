//! Every command the README and docs give to paste, against the code that runs it: each
//! `routerctl …` line parses with routerctl's own argument parser ([`routerctl::cli::Cli`]), each
//! `make …` line names a target of the Makefile with the variables that target requires, and each
//! template parameter or output a command names (`ParameterKey=`, `PARAMS='Key=…'`,
//! `OutputKey=='…'`) is one a template has. A renamed flag, target, parameter or output fails
//! here, not in a reader's terminal.

use std::collections::{BTreeMap, BTreeSet};

use aws_model::{
    stacks::{BASE_TEMPLATE, FIS_TEMPLATE, SPOKE_TEMPLATE, TENANT_TEMPLATE},
    template::Template,
};
use clap::Parser;
use routerctl::cli::Cli;

use super::repo_file;

/// The Markdown files whose shell blocks a reader pastes.
pub(super) const DOCS: [&str; 10] = [
    "README.md",
    "docs/security.md",
    "docs/locked-down.md",
    "docs/operating.md",
    "docs/adopting.md",
    "docs/many-accounts.md",
    "docs/testing.md",
    "docs/architecture.md",
    "docs/performance.md",
    "docs/aws-vs-emulator.md",
];

/// The commands of every shell block (```sh or ```bash) of `doc`: continuation lines joined,
/// comments and prompts dropped, each with the line it starts on.
pub(super) fn shell_commands(doc: &str) -> Vec<(usize, String)> {
    let mut commands = Vec::new();
    let mut in_block = false;
    let mut pending: Option<(usize, String)> = None;
    for (n, line) in doc.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") {
            in_block = !in_block && matches!(trimmed.trim_end(), "```sh" | "```bash" | "```shell");
            continue;
        }
        if !in_block {
            continue;
        }
        let code = strip_comment(trimmed);
        let code = code.strip_prefix("$ ").unwrap_or(code);
        let (start, mut text) = pending.take().unwrap_or((n + 1, String::new()));
        match code.trim_end().strip_suffix('\\') {
            Some(head) => {
                text.push_str(head);
                text.push(' ');
                pending = Some((start, text));
            }
            None => {
                text.push_str(code.trim_end());
                if !text.trim().is_empty() {
                    commands.push((start, text));
                }
            }
        }
    }
    commands
}

/// The inline code spans of `doc`'s prose that are routerctl commands (`` `routerctl adopt …` ``),
/// each with its line.
fn inline_routerctl(doc: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut in_block = false;
    for (n, line) in doc.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block {
            continue;
        }
        for (i, span) in line.split('`').enumerate() {
            if i % 2 == 1 && span.starts_with("routerctl ") {
                found.push((n + 1, span.to_owned()));
            }
        }
    }
    found
}

/// `line` without a trailing `# comment` (a `#` after whitespace and outside quotes).
fn strip_comment(line: &str) -> &str {
    let (mut single, mut double) = (false, false);
    let mut previous = ' ';
    for (i, c) in line.char_indices() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && previous.is_whitespace() => return &line[..i],
            _ => {}
        }
        previous = c;
    }
    line
}

/// A command line split as the shell splits words (quotes removed), one command of a `&&` or
/// `;` chain at a time.
pub(super) fn words(command: &str) -> Vec<Vec<String>> {
    let mut commands = vec![Vec::new()];
    let mut word = String::new();
    let mut has_word = false;
    let (mut single, mut double) = (false, false);
    let mut chars = command.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' if !double => {
                single = !single;
                has_word = true;
            }
            '"' if !single => {
                double = !double;
                has_word = true;
            }
            c if c.is_whitespace() && !single && !double => {
                if has_word {
                    commands.last_mut().unwrap().push(std::mem::take(&mut word));
                    has_word = false;
                }
            }
            ';' if !single && !double => {
                if has_word {
                    commands.last_mut().unwrap().push(std::mem::take(&mut word));
                    has_word = false;
                }
                commands.push(Vec::new());
            }
            '&' if !single && !double && chars.peek() == Some(&'&') => {
                chars.next();
                if has_word {
                    commands.last_mut().unwrap().push(std::mem::take(&mut word));
                    has_word = false;
                }
                commands.push(Vec::new());
            }
            c => {
                word.push(c);
                has_word = true;
            }
        }
    }
    if has_word {
        commands.last_mut().unwrap().push(word);
    }
    commands.retain(|c| !c.is_empty());
    commands
}

/// A synopsis as a command: each `<what goes here>` one word, an optional `[…]` part taken (its
/// first alternative where it lists several, `a | b`), and a word of alternatives (`spot|health`)
/// its first. Only for `routerctl` and `make` lines: other commands keep their brackets (JSON).
fn synopsis(command: &str) -> String {
    let mut out = String::new();
    let mut rest = command;
    while let Some(open) = rest.find('<') {
        let Some(close) = rest[open + 1..].find('>') else {
            break;
        };
        if rest[open + 1..open + 1 + close].contains('<') {
            break;
        }
        out.push_str(&rest[..open]);
        out.push_str("<placeholder>");
        rest = &rest[open + close + 2..];
    }
    out.push_str(rest);
    let mut expanded = String::new();
    let mut rest = out.as_str();
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find(']') else {
            break;
        };
        expanded.push_str(&rest[..open]);
        let inner = &rest[open + 1..open + close];
        expanded.push_str(inner.split(" | ").next().unwrap_or_default());
        rest = &rest[open + close + 1..];
    }
    expanded.push_str(rest);
    expanded
}

/// A documented placeholder (`<account id>`, `…`) as a value the flag's parser takes.
fn placeholder(flag: &str, value: &str) -> String {
    // `<what>`, `…`, a shell variable, or a capital standing for a value (`--count N`).
    let stands_for = value.contains(['<', '…', '$'])
        || (!value.is_empty() && value.chars().all(|c| c.is_ascii_uppercase()));
    if !stands_for {
        return value.to_owned();
    }
    match flag {
        "--account" => "111111111111".to_owned(),
        "--org-id" => "o-abcd123456".to_owned(),
        "--karpenter-role" => "alpha=KarpenterController-alpha".to_owned(),
        "--settle" | "--timeout" => "3m".to_owned(),
        "--count" => "1".to_owned(),
        _ => "placeholder".to_owned(),
    }
}

/// The routerctl invocation in `argv` (after `routerctl`, or a path ending in it), with the
/// documented placeholders made values.
fn routerctl_args(argv: &[String]) -> Option<Vec<String>> {
    // The command word, after any `VAR=value` assignments: not a path that merely ends in it
    // (`install … /usr/local/bin/routerctl`).
    let start = argv.iter().position(|w| !w.contains('='))?;
    let word = &argv[start];
    if word != "routerctl" && !word.ends_with("/routerctl") {
        return None;
    }
    let mut args = vec!["routerctl".to_owned()];
    let mut flag = String::new();
    for word in &argv[start + 1..] {
        // What a shell would do next: a pipe or a redirect ends the command.
        if matches!(word.as_str(), "|" | ">" | "2>&1") || word.starts_with('>') {
            break;
        }
        // A repetition mark (`--cluster alpha …`).
        if word == "…" {
            continue;
        }
        let word = word.split('|').next().unwrap_or_default();
        if word.starts_with("--") {
            flag = word.split('=').next().unwrap_or_default().to_owned();
            args.push(word.to_owned());
        } else {
            args.push(placeholder(&flag, word));
        }
    }
    Some(args)
}

#[test]
fn every_documented_routerctl_command_parses_with_routerctls_own_parser() {
    let mut seen = 0;
    let mut refused = Vec::new();
    for doc in DOCS {
        let text = repo_file(doc);
        let blocks = shell_commands(&text).into_iter().map(|c| (c, true));
        let prose = inline_routerctl(&text).into_iter().map(|c| (c, false));
        for ((line, command), whole) in blocks.chain(prose) {
            if !command.contains("routerctl") {
                continue;
            }
            for argv in words(&synopsis(&command)) {
                let Some(args) = routerctl_args(&argv) else {
                    continue;
                };
                seen += 1;
                let Err(e) = Cli::try_parse_from(&args) else {
                    continue;
                };
                use clap::error::ErrorKind::*;
                let wrong = match e.kind() {
                    DisplayVersion | DisplayHelp => false,
                    // Prose names a command without all it takes (`routerctl fis`): only a word
                    // routerctl does not know is wrong there.
                    _ if !whole => {
                        matches!(e.kind(), UnknownArgument | InvalidSubcommand | InvalidValue)
                            && !e.to_string().contains("a value is required")
                    }
                    _ => true,
                };
                if wrong {
                    refused.push(format!("{doc}:{line}: {command}\n    {}", e.kind()));
                }
            }
        }
    }
    assert!(seen >= 10, "only {seen} routerctl commands found");
    assert!(refused.is_empty(), "{}", refused.join("\n"));
}

/// The Makefile's targets, each with the variables its recipe requires (`$(call require,VAR,…)`).
fn make_targets() -> BTreeMap<String, BTreeSet<String>> {
    let makefile = repo_file("Makefile");
    let mut targets: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in makefile.lines() {
        if let Some(recipe) = line.strip_prefix('\t') {
            if let (Some(target), Some(rest)) = (&current, recipe.split("$(call require,").nth(1)) {
                let variable = rest.split(',').next().unwrap_or_default().to_owned();
                targets.get_mut(target).unwrap().insert(variable);
            }
            continue;
        }
        current = None;
        if let Some((name, _)) = line.split_once(':')
            && !name.is_empty()
            && !name.contains(['$', ' ', '=', '\t', '.', '%', '/'])
            && !line.contains(":=")
        {
            current = Some(name.to_owned());
            targets.entry(name.to_owned()).or_default();
        }
    }
    targets
}

#[test]
fn every_documented_make_command_names_a_target_with_the_variables_it_requires() {
    let targets = make_targets();
    for required in ["demo", "test", "release", "deploy-base", "deploy-tenant"] {
        assert!(targets.contains_key(required), "{targets:?}");
    }
    assert_eq!(
        targets["deploy-base"],
        BTreeSet::from(["BUCKET".to_owned(), "REGION".to_owned()])
    );
    let mut seen = 0;
    let mut wrong = Vec::new();
    for doc in DOCS {
        for (line, command) in shell_commands(&repo_file(doc)) {
            if !command.contains("make ") {
                continue;
            }
            for argv in words(&synopsis(&command)) {
                let Some(start) = argv.iter().position(|w| w == "make") else {
                    continue;
                };
                let args = &argv[start + 1..];
                let given: BTreeSet<&str> = args
                    .iter()
                    .filter_map(|a| a.split_once('=').map(|(k, _)| k))
                    .collect();
                for target in args
                    .iter()
                    .filter(|a| !a.contains('=') && !a.starts_with('-'))
                {
                    seen += 1;
                    match targets.get(target.as_str()) {
                        None => wrong.push(format!("{doc}:{line}: no make target {target}")),
                        Some(required) => {
                            for variable in required {
                                if !given.contains(variable.as_str()) {
                                    wrong.push(format!(
                                        "{doc}:{line}: make {target} without {variable}= (it \
                                         requires it): {command}"
                                    ));
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(seen >= 5, "only {seen} make commands found");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Every template's parameters and outputs, by template file name.
pub(super) fn templates() -> Vec<(&'static str, Template)> {
    let deployer = repo_file("cloudformation/deployer.yaml");
    [
        ("base.yaml", BASE_TEMPLATE),
        ("tenant.yaml", TENANT_TEMPLATE),
        ("spoke.yaml", SPOKE_TEMPLATE),
        ("fis.yaml", FIS_TEMPLATE),
        ("deployer.yaml", deployer.as_str()),
    ]
    .into_iter()
    .map(|(name, text)| (name, Template::parse(name, text).unwrap()))
    .collect()
}

pub(super) fn keys(template: &Template, section: &str) -> BTreeSet<String> {
    template.doc[section]
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn every_parameter_and_output_a_documented_command_names_exists() {
    let all = templates();
    let parameters: BTreeSet<String> = all
        .iter()
        .flat_map(|(_, t)| keys(t, "Parameters"))
        .collect();
    let outputs: BTreeSet<String> = all.iter().flat_map(|(_, t)| keys(t, "Outputs")).collect();
    let mut named = 0;
    let mut unknown = Vec::new();
    for doc in DOCS {
        for (line, command) in shell_commands(&repo_file(doc)) {
            for argv in words(&command) {
                for word in &argv {
                    let mut found = Vec::new();
                    for piece in word.split([',', ' ']) {
                        if let Some(key) = piece.strip_prefix("ParameterKey=") {
                            found.push(("parameter", key.to_owned()));
                        }
                    }
                    if let Some(params) = word.strip_prefix("PARAMS=") {
                        found.extend(params.split_whitespace().filter_map(|p| {
                            p.split_once('=').map(|(k, _)| ("parameter", k.to_owned()))
                        }));
                    }
                    for part in word.split("OutputKey=='").skip(1) {
                        found.push(("output", part.split('\'').next().unwrap().to_owned()));
                    }
                    for (kind, key) in found {
                        named += 1;
                        let known = if kind == "parameter" {
                            &parameters
                        } else {
                            &outputs
                        };
                        if !known.contains(&key) {
                            unknown.push(format!("{doc}:{line}: no template has the {kind} {key}"));
                        }
                    }
                }
            }
        }
    }
    assert!(named >= 5, "only {named} parameters and outputs named");
    assert!(unknown.is_empty(), "{}", unknown.join("\n"));
}

#[test]
fn the_shell_reading_here_joins_continuations_drops_comments_and_splits_chains() {
    let doc = "text\n```sh\nmake deploy-base BUCKET=b \\\n  REGION=r   # a comment\n$ routerctl verify --cluster \"a b\" && echo '#1'\n```\n```text\nrouterctl nothing\n```\n";
    let commands = shell_commands(doc);
    assert_eq!(
        commands,
        vec![
            (3, "make deploy-base BUCKET=b  REGION=r".to_owned()),
            (
                5,
                "routerctl verify --cluster \"a b\" && echo '#1'".to_owned()
            ),
        ]
    );
    assert_eq!(
        words(&commands[1].1),
        vec![
            vec!["routerctl", "verify", "--cluster", "a b"],
            vec!["echo", "#1"]
        ]
    );
    assert!(Cli::try_parse_from(["routerctl", "verify", "--clusters", "a"]).is_err());
    assert_eq!(
        synopsis(
            "routerctl simulate --kind spot|health [--count N | --instance i-… …] --to <queue URL | function>"
        ),
        "routerctl simulate --kind spot|health --count N --to <placeholder>"
    );
}
