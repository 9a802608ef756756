//! The check engine `verify` and `adopt` share. A check against a live account is data: rows of
//! what it expects, what it found where it looked, and the exact fix when it does not hold.
//! [`evaluate`] is the one function that turns rows into a report line ([`Check`]); the check
//! functions only read AWS and write rows.
//!
//! ```text
//! let rows = [
//!     Expect::lookup(&described, restore.clone()),                // where: no stack, no check
//!     Expect::that(stable, format!("{stack}: {status}"))          // expect
//!         .otherwise(format!("{stack} is {status}"), see_why),     // what is wrong, the fix
//!     Expect::equal("HubEventBusArn", found, bus)...
//! ];
//! evaluate("spoke:111111111111:stack", rows)
//! ```
//!
//! The rules of evaluation, the same for every check (users read the messages, so they are
//! stable): rows are judged in order; a row that holds adds its finding to the PASS line (if it
//! has one); a row that does not adds its problem, and its fix once (several problems often share
//! one fix); a failed [`Expect::lookup`] ends the check, because nothing after it can be judged.
//! The check passes when no row failed.

/// One line of a report.
#[derive(Debug, Clone)]
pub struct Check {
    /// Stable name, e.g. `rule:StateChangeRule`, `tenant:alpha:encryption`.
    pub name: String,
    pub passed: bool,
    /// What was found (on failure: every problem).
    pub detail: String,
    /// How to fix it, on failure.
    pub fix: Option<String>,
}

/// One row of a check: an expectation, judged.
#[derive(Debug, Clone)]
pub struct Expect {
    holds: bool,
    /// What was found when it holds (`None`: the row says nothing on a PASS line).
    found: Option<String>,
    /// What is wrong when it does not.
    problem: String,
    fix: String,
    /// A failed row after which nothing can be judged (a lookup that found nothing).
    ends: bool,
}

/// An expectation waiting for what to say when it fails ([`Expect::that`]).
#[must_use = "say what is wrong and how to fix it with .otherwise(…)"]
pub struct Unjudged {
    holds: bool,
    found: Option<String>,
}

impl Unjudged {
    pub fn otherwise(self, problem: impl Into<String>, fix: impl Into<String>) -> Expect {
        Expect {
            holds: self.holds,
            found: self.found,
            problem: problem.into(),
            fix: fix.into(),
            ends: false,
        }
    }
}

impl Expect {
    /// `holds`, reported as `found` when it does.
    pub fn that(holds: bool, found: impl Into<String>) -> Unjudged {
        Unjudged {
            holds,
            found: Some(found.into()),
        }
    }

    /// `holds`, silent on a PASS line.
    pub fn quietly(holds: bool) -> Unjudged {
        Unjudged { holds, found: None }
    }

    /// A finding with nothing to judge: it holds.
    pub fn found(what: impl Into<String>) -> Expect {
        Expect::that(true, what).otherwise(String::new(), String::new())
    }

    /// A problem found outright.
    pub fn problem(problem: impl Into<String>, fix: impl Into<String>) -> Expect {
        Expect::quietly(false).otherwise(problem, fix)
    }

    /// Where the check looks: a lookup that failed (the error says what and where) ends the check
    /// with `fix`; one that succeeded adds nothing.
    pub fn lookup<T, E: std::fmt::Display>(
        looked: &Result<T, E>,
        fix: impl Into<String>,
    ) -> Expect {
        match looked {
            Ok(_) => Expect::quietly(true).otherwise(String::new(), String::new()),
            Err(problem) => Expect {
                ends: true,
                ..Expect::problem(problem.to_string(), fix)
            },
        }
    }

    /// This row ends the check when it fails.
    pub fn ending(self) -> Expect {
        Expect { ends: true, ..self }
    }
}

/// The rows of one check, judged into its report line.
pub fn evaluate(name: impl Into<String>, rows: impl IntoIterator<Item = Expect>) -> Check {
    let (mut found, mut problems, mut fixes) = (Vec::new(), Vec::new(), Vec::<String>::new());
    for row in rows {
        if row.holds {
            found.extend(row.found);
            continue;
        }
        problems.push(row.problem);
        if !fixes.contains(&row.fix) {
            fixes.push(row.fix);
        }
        if row.ends {
            break;
        }
    }
    let passed = problems.is_empty();
    Check {
        name: name.into(),
        passed,
        detail: if passed {
            found.join("; ")
        } else {
            problems.join("; ")
        },
        fix: (!passed).then(|| fixes.join("; then ")),
    }
}

/// A check that failed for one reason.
pub fn fail(name: &str, problem: impl Into<String>, fix: impl Into<String>) -> Check {
    evaluate(name, [Expect::problem(problem, fix)])
}

/// A check that passed with one finding.
pub fn pass(name: &str, what: impl Into<String>) -> Check {
    evaluate(name, [Expect::found(what)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_check_lists_every_problem_and_each_fix_once() {
        let c = evaluate(
            "x",
            [
                Expect::found("fine"),
                Expect::problem("a", "fix it"),
                Expect::that(false, "unseen").otherwise("b", "fix it"),
            ],
        );
        assert!(!c.passed);
        assert_eq!(c.detail, "a; b");
        assert_eq!(c.fix.as_deref(), Some("fix it"));
    }

    #[test]
    fn a_passing_check_lists_what_it_found_and_quiet_rows_say_nothing() {
        let c = evaluate(
            "x",
            [
                Expect::that(true, "one").otherwise("no", "f"),
                Expect::quietly(true).otherwise("no", "f"),
                Expect::found("two"),
            ],
        );
        assert!(c.passed);
        assert_eq!(c.detail, "one; two");
        assert_eq!(c.fix, None);
    }

    #[test]
    fn a_failed_lookup_ends_the_check_and_a_found_one_adds_nothing() {
        let missing: Result<(), String> = Err("no stack s".into());
        let here: Result<(), String> = Ok(());
        let c = evaluate(
            "x",
            [
                Expect::lookup(&here, "unused"),
                Expect::problem("first", "fix 1"),
                Expect::lookup(&missing, "deploy s"),
                Expect::problem("after", "fix 2"),
            ],
        );
        assert_eq!(c.detail, "first; no stack s");
        assert_eq!(c.fix.as_deref(), Some("fix 1; then deploy s"));
    }
}
