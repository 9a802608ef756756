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

#[cfg(test)]
mod tests {
    use super::*;

    fn report(checks: Vec<Check>) -> Report {
        Report {
            stack: "ir".into(),
            region: "eu-west-1".into(),
            spoke: Some(("222222222222".into(), "ir-spoke".into())),
            checks,
        }
    }

    #[test]
    fn a_report_passes_only_when_every_check_does_and_names_what_failed_with_its_fix() {
        let good = pass("ingest-queue", "exists");
        let bad = fail("rule:SpotRule", "disabled", "aws events enable-rule");
        let all_good = report(vec![good.clone()]);
        assert!(all_good.passed());
        assert!(all_good.failures().is_empty());
        assert!(
            all_good.render().ends_with("PASS: 1 checks\n"),
            "{}",
            all_good.render()
        );

        let mixed = report(vec![good, bad]);
        assert!(!mixed.passed());
        let failed: Vec<&str> = mixed.failures().iter().map(|c| c.name.as_str()).collect();
        assert_eq!(failed, ["rule:SpotRule"]);
        assert_eq!(mixed.check("rule:SpotRule").map(|c| c.passed), Some(false));
        assert!(mixed.check("nothing").is_none());
        let text = mixed.render();
        assert_eq!(
            text,
            "verify ir in eu-west-1, member account 222222222222 (spoke stack ir-spoke)\n\
             \x20 PASS  ingest-queue   exists\n\
             \x20 FAIL  rule:SpotRule  disabled\n\
             \x20                      fix: aws events enable-rule\n\
             FAIL: 1 of 2 checks failed: rule:SpotRule\n"
        );
    }

    #[test]
    fn a_pasted_document_is_its_json_or_says_why_it_is_not() {
        assert_eq!(pasted(Ok(serde_json::json!({"a": 1}))), r#"{"a":1}"#);
        let why = pasted(Err(anyhow::anyhow!("no such parameter")));
        assert!(
            why.contains("could not be rendered here: no such parameter"),
            "{why}"
        );
    }
}
