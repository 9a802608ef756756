//! The report: one named [`Check`] per line, PASS or FAIL, every failure with its fix; and
//! [`Findings`], how a check gathers what it found before it becomes one.

/// One line of the report.
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

#[derive(Debug, Clone)]
pub struct Report {
    pub stack: String,
    pub region: String,
    pub mode: Option<Mode>,
    /// The member account checked with `--account`, and its spoke stack.
    pub spoke: Option<(String, String)>,
    pub checks: Vec<Check>,
}

impl Report {
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.passed)
    }

    pub fn failures(&self) -> Vec<&Check> {
        self.checks.iter().filter(|c| !c.passed).collect()
    }

    pub fn check(&self, name: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.name == name)
    }

    pub fn render(&self) -> String {
        let mode = self
            .mode
            .map(|m| format!(", {m:?} mode"))
            .unwrap_or_default();
        let spoke = self
            .spoke
            .as_ref()
            .map(|(account, stack)| format!(", member account {account} (spoke stack {stack})"))
            .unwrap_or_default();
        let mut out = format!("verify {} in {}{mode}{spoke}\n", self.stack, self.region);
        let width = self.checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
        for c in &self.checks {
            let status = if c.passed { "PASS" } else { "FAIL" };
            out += &format!("  {status}  {:<width$}  {}\n", c.name, c.detail);
            if let Some(fix) = &c.fix {
                out += &format!("        {:<width$}  fix: {fix}\n", "");
            }
        }
        let failed = self.failures();
        if failed.is_empty() {
            out += &format!("PASS: {} checks\n", self.checks.len());
        } else {
            let names: Vec<&str> = failed.iter().map(|c| c.name.as_str()).collect();
            out += &format!(
                "FAIL: {} of {} checks failed: {}\n",
                failed.len(),
                self.checks.len(),
                names.join(", ")
            );
        }
        out
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Queue,
    Direct,
}

/// What a check found, gathered before it becomes a [`Check`].
#[derive(Default)]
pub(crate) struct Findings {
    ok: Vec<String>,
    problems: Vec<String>,
    fixes: Vec<String>,
}

impl Findings {
    pub(super) fn ok(&mut self, what: impl Into<String>) {
        self.ok.push(what.into());
    }

    pub(super) fn problem(&mut self, problem: impl Into<String>, fix: impl Into<String>) {
        self.problems.push(problem.into());
        let fix = fix.into();
        if !self.fixes.contains(&fix) {
            self.fixes.push(fix);
        }
    }

    pub(super) fn into_check(self, name: impl Into<String>) -> Check {
        let passed = self.problems.is_empty();
        Check {
            name: name.into(),
            passed,
            detail: if passed {
                self.ok.join("; ")
            } else {
                self.problems.join("; ")
            },
            fix: (!passed).then(|| self.fixes.join("; then ")),
        }
    }
}

/// A check that failed for one reason.
pub(super) fn fail(name: &str, problem: impl Into<String>, fix: impl Into<String>) -> Check {
    let mut f = Findings::default();
    f.problem(problem, fix);
    f.into_check(name)
}

/// A check that passed with one finding.
pub(super) fn pass(name: &str, what: impl Into<String>) -> Check {
    let mut f = Findings::default();
    f.ok(what);
    f.into_check(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_check_lists_every_problem_and_each_fix_once() {
        let mut f = Findings::default();
        f.ok("fine");
        f.problem("a", "fix it");
        f.problem("b", "fix it");
        let c = f.into_check("x");
        assert!(!c.passed);
        assert_eq!(c.detail, "a; b");
        assert_eq!(c.fix.as_deref(), Some("fix it"));
    }
}
