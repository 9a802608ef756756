//! The report: one named [`Check`] per line, PASS or FAIL, every failure with its fix (each
//! check's rows judged by [`crate::check::evaluate`]).

pub use crate::check::{Check, fail, pass};

#[derive(Debug, Clone)]
pub struct Report {
    pub stack: String,
    pub region: String,
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
        let spoke = self
            .spoke
            .as_ref()
            .map(|(account, stack)| format!(", member account {account} (spoke stack {stack})"))
            .unwrap_or_default();
        let mut out = format!("verify {} in {}{spoke}\n", self.stack, self.region);
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

/// A document a template renders ([`aws_model::documents`]), as a fix pastes it; if it cannot be
/// rendered, a placeholder that says why (the fix's other half, updating the stack, still holds).
pub(crate) fn pasted(document: anyhow::Result<serde_json::Value>) -> String {
    match document {
        Ok(document) => document.to_string(),
        Err(e) => format!("<the template's document, which could not be rendered here: {e:#}>"),
    }
}
