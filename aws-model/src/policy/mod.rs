//! A small IAM policy evaluator: "may this principal do this action on this resource?" for the
//! identity and resource policies the stacks create.
//!
//! Why not IAM's SimulatePrincipalPolicy: it does not read SQS queue policies or Lambda function
//! policies by itself, and the emulator answers it with a 500, so `verify` could not be tested.
//! What this covers: Allow/Deny, Action/NotAction (case-insensitive, `*` and `?`),
//! Resource/NotResource, Principal/NotPrincipal (`*`, AWS ARNs and account ids, services), and the
//! condition operators the templates use (String*, Arn*, Bool, `…IfExists`) against a request
//! context the caller states. A key the caller did not state is absent from the request: a
//! negated operator (`ArnNotEquals`, …) on it is true, as IAM documents; a positive one, or an
//! operator not listed, makes the statement *undetermined* rather than guessed.
//! [`authorize`] combines a principal's identity policies with a resource's policy as IAM does
//! within one account and across two; [`crate::access`] adds a role's permissions boundary and
//! KMS key policies, the primary authority over their keys. SCPs and session policies are out of
//! scope.
//!
//! This file is the evaluation order (which statements apply, Deny before Allow, one account or
//! two); the condition operators and pattern matching are in `conditions.rs`, the tests in
//! `tests.rs`.

use serde_json::Value;

mod conditions;
#[cfg(test)]
mod tests;

use conditions::{Match, conditions};
pub use conditions::{glob, strings};

/// A parsed policy document.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Where it came from, for messages (`inline interruption-router`, `queue policy`, …).
    pub source: String,
    statements: Vec<Value>,
}

impl Policy {
    /// Parses a JSON policy document. IAM returns documents URL-encoded; pass those through
    /// [`Policy::parse_iam`].
    pub fn parse(source: impl Into<String>, text: &str) -> Result<Self, String> {
        let source = source.into();
        let doc: Value = serde_json::from_str(text)
            .map_err(|e| format!("{source}: not a JSON policy document ({e})"))?;
        Self::from_document(source, &doc)
    }

    /// A policy document already parsed (a template's rendered policy, a model's stored one).
    pub fn from_document(source: impl Into<String>, doc: &Value) -> Result<Self, String> {
        let source = source.into();
        let statements = match &doc["Statement"] {
            Value::Array(list) => list.clone(),
            one @ Value::Object(_) => vec![one.clone()],
            _ => return Err(format!("{source}: no Statement")),
        };
        Ok(Self { source, statements })
    }

    /// Its statements, as written.
    pub fn statements(&self) -> &[Value] {
        &self.statements
    }

    /// Parses a document as IAM's Get*Policy* calls return it (URL-encoded JSON).
    pub fn parse_iam(source: impl Into<String>, encoded: &str) -> Result<Self, String> {
        Self::parse(source, &decode_iam_document(encoded)?)
    }
}

/// IAM returns policy documents URL-encoded (RFC 3986).
pub fn decode_iam_document(encoded: &str) -> Result<String, String> {
    percent_encoding::percent_decode_str(encoded)
        .decode_utf8()
        .map(|text| text.into_owned())
        .map_err(|e| format!("policy document is not UTF-8 after URL decoding: {e}"))
}

/// Who is asking.
#[derive(Debug, Clone, Copy)]
pub enum Principal<'a> {
    /// Identity policies: the principal is whoever the policy is attached to.
    Attached,
    /// An IAM role or user ARN (resource policies): named by its ARN, or by its account.
    Aws(&'a str),
    /// An IAM role or user ARN named by that ARN itself (or `*`), not by its account: what a
    /// resource policy grants a principal directly rather than delegates to its account's IAM.
    Named(&'a str),
    /// A service principal such as `events.amazonaws.com`.
    Service(&'a str),
}

/// One request to evaluate.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub principal: Principal<'a>,
    pub action: &'a str,
    pub resource: &'a str,
    /// Condition keys the request carries (`aws:SourceArn`, …); matched case-insensitively.
    pub context: &'a [(&'a str, &'a str)],
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// An Allow statement applies and no Deny does.
    Allowed { by: String },
    /// A Deny statement applies.
    Denied { by: String },
    /// No statement applies (IAM's implicit deny).
    NotAllowed,
    /// A statement might apply but its condition could not be evaluated.
    Undetermined { why: String },
}

impl Decision {
    pub fn is_allowed(&self) -> bool {
        matches!(self, Decision::Allowed { .. })
    }
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Decision::Allowed { by } => write!(f, "allowed by {by}"),
            Decision::Denied { by } => write!(f, "denied by {by}"),
            Decision::NotAllowed => f.write_str("not allowed by any statement"),
            Decision::Undetermined { why } => write!(f, "undetermined: {why}"),
        }
    }
}

/// Evaluates `request` against `policies` together: an applicable Deny wins, then an Allow.
pub fn evaluate(policies: &[Policy], request: &Request<'_>) -> Decision {
    let mut allowed = None;
    let mut unknown = None;
    for policy in policies {
        for (n, statement) in policy.statements.iter().enumerate() {
            let name = match statement["Sid"].as_str() {
                Some(sid) if !sid.is_empty() => format!("{} statement {sid}", policy.source),
                _ => format!("{} statement #{}", policy.source, n + 1),
            };
            let deny = statement["Effect"] == "Deny";
            match applies(statement, request) {
                Match::Yes if deny => return Decision::Denied { by: name },
                Match::Yes => {
                    allowed.get_or_insert(name);
                }
                Match::No => {}
                Match::Unknown(why) => {
                    // An undetermined Deny could block; an undetermined Allow only matters when
                    // nothing else allows.
                    if deny || unknown.is_none() {
                        unknown = Some((deny, format!("{name}: {why}")));
                    }
                }
            }
        }
    }
    match (unknown, allowed) {
        (Some((true, why)), _) => Decision::Undetermined { why },
        (_, Some(by)) => Decision::Allowed { by },
        (Some((false, why)), None) => Decision::Undetermined { why },
        (None, None) => Decision::NotAllowed,
    }
}

/// The first explicit Deny, or condition the evaluator cannot judge, among `decisions`: either
/// ends an evaluation, whatever else allows.
pub(crate) fn first_refusal<'a>(
    decisions: impl IntoIterator<Item = &'a Decision>,
) -> Option<Decision> {
    decisions
        .into_iter()
        .find(|d| matches!(d, Decision::Denied { .. } | Decision::Undetermined { .. }))
        .cloned()
}

/// IAM's answer for an AWS principal's request on a resource that has a resource policy: an
/// explicit Deny in either kind of policy wins; within one account an Allow in either suffices;
/// across accounts both must allow (IAM policy evaluation logic, "cross-account"). `identity` are
/// the principal's own policies, `resource` the resource's (a queue or trust policy).
pub fn authorize(
    identity: &[Policy],
    resource: &[Policy],
    principal_arn: &str,
    resource_account: &str,
    request: &Request<'_>,
) -> Decision {
    let as_identity = evaluate(
        identity,
        &Request {
            principal: Principal::Attached,
            ..*request
        },
    );
    let as_resource = evaluate(
        resource,
        &Request {
            principal: Principal::Aws(principal_arn),
            ..*request
        },
    );
    if let Some(refusal) = first_refusal([&as_identity, &as_resource]) {
        return refusal;
    }
    let same_account = crate::arn::arn_account(principal_arn) == Some(resource_account);
    match (as_identity, as_resource) {
        (a @ Decision::Allowed { .. }, Decision::Allowed { .. }) => a,
        (a @ Decision::Allowed { .. }, _) | (_, a @ Decision::Allowed { .. }) if same_account => a,
        _ => Decision::NotAllowed,
    }
}

fn applies(statement: &Value, request: &Request<'_>) -> Match {
    let action = |list: &Value| {
        strings(list).iter().any(|p| {
            glob(
                &p.to_ascii_lowercase(),
                &request.action.to_ascii_lowercase(),
            )
        })
    };
    let action_matches = match (&statement["Action"], &statement["NotAction"]) {
        (Value::Null, Value::Null) => false,
        (list, Value::Null) => action(list),
        (_, list) => !action(list),
    };
    let resource = |list: &Value| strings(list).iter().any(|p| glob(p, request.resource));
    let resource_matches = match (&statement["Resource"], &statement["NotResource"]) {
        // Trust policies have no Resource; everything else here does.
        (Value::Null, Value::Null) => true,
        (list, Value::Null) => resource(list),
        (_, list) => !resource(list),
    };
    let principal_matches = match request.principal {
        Principal::Attached => true,
        asked => match (&statement["Principal"], &statement["NotPrincipal"]) {
            (Value::Null, Value::Null) => false,
            (p, Value::Null) => principal_in(p, asked),
            (_, p) => !principal_in(p, asked),
        },
    };
    if !(action_matches && resource_matches && principal_matches) {
        return Match::No;
    }
    conditions(&statement["Condition"], request.context)
}

fn principal_in(element: &Value, asked: Principal<'_>) -> bool {
    if element == "*" {
        return true;
    }
    match asked {
        Principal::Attached => true,
        Principal::Aws(arn) => strings(&element["AWS"]).iter().any(|p| {
            let account = crate::arn::arn_account(arn).unwrap_or_default();
            let partition = arn.split(':').nth(1).unwrap_or("aws");
            // An account principal delegates to the account's own IAM policies.
            p == "*"
                || p == arn
                || p == account
                || *p == format!("arn:{partition}:iam::{account}:root")
        }),
        Principal::Named(arn) => strings(&element["AWS"])
            .iter()
            .any(|p| p == "*" || p == arn),
        Principal::Service(service) => strings(&element["Service"]).iter().any(|p| p == service),
    }
}
