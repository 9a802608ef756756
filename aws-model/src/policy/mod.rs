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

use serde_json::Value;

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
    let same_account = crate::aws::arn_account(principal_arn) == Some(resource_account);
    match (as_identity, as_resource) {
        (a @ Decision::Allowed { .. }, Decision::Allowed { .. }) => a,
        (a @ Decision::Allowed { .. }, _) | (_, a @ Decision::Allowed { .. }) if same_account => a,
        _ => Decision::NotAllowed,
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Match {
    Yes,
    No,
    Unknown(String),
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
            let account = crate::aws::arn_account(arn).unwrap_or_default();
            // An account principal delegates to the account's own IAM policies.
            p == "*" || p == arn || p == account || *p == format!("arn:aws:iam::{account}:root")
        }),
        Principal::Named(arn) => strings(&element["AWS"])
            .iter()
            .any(|p| p == "*" || p == arn),
        Principal::Service(service) => strings(&element["Service"]).iter().any(|p| p == service),
    }
}

/// All condition blocks must hold. A No anywhere decides; otherwise an Unknown is reported.
fn conditions(block: &Value, context: &[(&str, &str)]) -> Match {
    let Some(block) = block.as_object() else {
        return Match::Yes;
    };
    let mut unknown = None;
    for (operator, keys) in block {
        let Some(keys) = keys.as_object() else {
            return Match::Unknown(format!("condition {operator} is not an object"));
        };
        for (key, expected) in keys {
            match condition(operator, key, &strings(expected), context) {
                Match::No => return Match::No,
                Match::Unknown(why) => unknown = Some(why),
                Match::Yes => {}
            }
        }
    }
    unknown.map_or(Match::Yes, Match::Unknown)
}

fn condition(operator: &str, key: &str, expected: &[String], context: &[(&str, &str)]) -> Match {
    let (operator, if_exists) = match operator.strip_suffix("IfExists") {
        Some(op) => (op, true),
        None => (operator, false),
    };
    let Some(actual) = context
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, v)| *v)
    else {
        // A key the request does not carry: "If the policy condition requires that the key is
        // not matched, such as StringNotLike or ArnNotLike, and the right key is not present, the
        // condition is true" (IAM condition operators reference); so is any ...IfExists. A
        // positive operator would be false, but the caller may simply not have stated the key,
        // so that is left undetermined rather than guessed.
        return if if_exists || operator.contains("Not") {
            Match::Yes
        } else {
            Match::Unknown(format!(
                "{operator} on {key}, which this check does not model"
            ))
        };
    };
    let any = |f: &dyn Fn(&str) -> bool| expected.iter().any(|e| f(e));
    let result = match operator {
        "StringEquals" => any(&|e| e == actual),
        "StringNotEquals" => !any(&|e| e == actual),
        "StringEqualsIgnoreCase" => any(&|e| e.eq_ignore_ascii_case(actual)),
        "StringNotEqualsIgnoreCase" => !any(&|e| e.eq_ignore_ascii_case(actual)),
        "StringLike" => any(&|e| glob(e, actual)),
        "StringNotLike" => !any(&|e| glob(e, actual)),
        "ArnEquals" | "ArnLike" => any(&|e| arn_like(e, actual)),
        "ArnNotEquals" | "ArnNotLike" => !any(&|e| arn_like(e, actual)),
        "Bool" => any(&|e| e.eq_ignore_ascii_case(actual)),
        other => return Match::Unknown(format!("condition operator {other} is not modelled")),
    };
    if result { Match::Yes } else { Match::No }
}

/// IAM's ArnLike: each of the six `:`-separated fields is matched on its own.
fn arn_like(pattern: &str, arn: &str) -> bool {
    let p: Vec<&str> = pattern.splitn(6, ':').collect();
    let a: Vec<&str> = arn.splitn(6, ':').collect();
    p.len() == a.len() && p.iter().zip(&a).all(|(p, a)| glob(p, a))
}

/// `*` matches any run of characters, `?` one character.
pub fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// A policy element that may be a string, a list, or a scalar.
pub fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::Null => vec![],
        Value::String(s) => vec![s.clone()],
        Value::Array(list) => list.iter().flat_map(strings).collect(),
        other => vec![other.to_string()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROLE: &str = "arn:aws:iam::123456789012:role/ir-RouterRole-ABC";
    const QUEUE: &str = "arn:aws:sqs:us-east-1:123456789012:karpenter-alpha";

    /// The router role's inline policy as base.yaml writes it (Queue mode, stack "ir").
    fn router_role() -> Policy {
        Policy::parse(
            "inline interruption-router",
            r#"{"Version":"2012-10-17","Statement":[
              {"Sid":"ResolveInstanceTags","Effect":"Allow","Action":"ec2:DescribeInstances","Resource":"*"},
              {"Sid":"SendToClusterQueues","Effect":"Allow","Action":["sqs:GetQueueUrl","sqs:SendMessage"],
               "Resource":"arn:aws:sqs:us-east-1:123456789012:karpenter-*"},
              {"Sid":"NeverSendToIngestQueue","Effect":"Deny","Action":["sqs:SendMessage"],
               "Resource":"arn:aws:sqs:us-east-1:123456789012:karpenter-ingest"}]}"#,
        )
        .unwrap()
    }

    /// tenant.yaml's queue policy.
    fn tenant_queue_policy(router: &str) -> Policy {
        let doc = serde_json::json!({"Version": "2012-10-17", "Statement": [
            {"Sid": "AllowRouterToSend", "Effect": "Allow", "Principal": {"AWS": router},
             "Action": "sqs:SendMessage", "Resource": QUEUE},
            {"Sid": "DenySendersOtherThanRouter", "Effect": "Deny", "Principal": "*",
             "Action": "sqs:SendMessage", "Resource": QUEUE,
             "Condition": {"ArnNotEquals": {"aws:PrincipalArn": router}}},
            {"Sid": "DenyInsecureTransport", "Effect": "Deny", "Principal": "*", "Action": "sqs:*",
             "Resource": QUEUE, "Condition": {"Bool": {"aws:SecureTransport": "false"}}}]});
        Policy::parse("queue policy", &doc.to_string()).unwrap()
    }

    fn send(principal: Principal<'_>, resource: &str, context: &[(&str, &str)]) -> Decision {
        let policies = match principal {
            Principal::Attached => vec![router_role()],
            _ => vec![tenant_queue_policy(ROLE)],
        };
        evaluate(
            &policies,
            &Request {
                principal,
                action: "sqs:SendMessage",
                resource,
                context,
            },
        )
    }

    #[test]
    fn identity_policy_wildcards_and_explicit_deny() {
        assert!(send(Principal::Attached, QUEUE, &[]).is_allowed());
        let ingest = "arn:aws:sqs:us-east-1:123456789012:karpenter-ingest";
        assert_eq!(
            send(Principal::Attached, ingest, &[]),
            Decision::Denied {
                by: "inline interruption-router statement NeverSendToIngestQueue".into()
            }
        );
        let other_region = "arn:aws:sqs:eu-west-1:123456789012:karpenter-alpha";
        assert_eq!(
            send(Principal::Attached, other_region, &[]),
            Decision::NotAllowed
        );
        // Actions are case-insensitive; the action must still be one the statement names.
        let describe = Request {
            principal: Principal::Attached,
            action: "EC2:describeinstances",
            resource: "*",
            context: &[],
        };
        assert!(evaluate(&[router_role()], &describe).is_allowed());
        let receive = Request {
            action: "sqs:ReceiveMessage",
            resource: QUEUE,
            ..describe
        };
        assert_eq!(evaluate(&[router_role()], &receive), Decision::NotAllowed);
    }

    #[test]
    fn tenant_queue_policy_lets_only_the_router_send() {
        let secure = [("aws:SecureTransport", "true"), ("aws:PrincipalArn", ROLE)];
        assert_eq!(
            send(Principal::Aws(ROLE), QUEUE, &secure),
            Decision::Allowed {
                by: "queue policy statement AllowRouterToSend".into()
            }
        );
        let intruder = "arn:aws:iam::123456789012:role/ci";
        let context = [
            ("aws:SecureTransport", "true"),
            ("aws:PrincipalArn", intruder),
        ];
        assert_eq!(
            send(Principal::Aws(intruder), QUEUE, &context),
            Decision::Denied {
                by: "queue policy statement DenySendersOtherThanRouter".into()
            }
        );
        // A policy written for a previous router role denies the current one.
        let stale = tenant_queue_policy("arn:aws:iam::123456789012:role/old-router");
        let request = Request {
            principal: Principal::Aws(ROLE),
            action: "sqs:SendMessage",
            resource: QUEUE,
            context: &secure,
        };
        assert!(matches!(
            evaluate(&[stale], &request),
            Decision::Denied { .. }
        ));
    }

    #[test]
    fn conditions_on_unstated_keys_are_undetermined_not_guessed() {
        // No aws:SecureTransport in the context: the Deny might apply.
        let decision = send(Principal::Aws(ROLE), QUEUE, &[("aws:PrincipalArn", ROLE)]);
        assert!(
            matches!(&decision, Decision::Undetermined { why } if why.contains("aws:SecureTransport")),
            "{decision:?}"
        );
    }

    #[test]
    fn source_arn_conditions_for_service_principals() {
        let rule = "arn:aws:events:us-east-1:123456789012:rule/ir-SpotInterruptionRule-X";
        let policy = Policy::parse(
            "queue policy",
            &serde_json::json!({"Statement": [{"Effect": "Allow",
                "Principal": {"Service": "events.amazonaws.com"}, "Action": "sqs:SendMessage",
                "Resource": QUEUE, "Condition": {"ArnEquals": {"aws:SourceArn": [rule]}}}]})
            .to_string(),
        )
        .unwrap();
        let decide = |source: &str, service: &str| {
            let context = [("AWS:SourceArn", source)];
            let request = Request {
                principal: Principal::Service(service),
                action: "sqs:SendMessage",
                resource: QUEUE,
                context: &context,
            };
            evaluate(std::slice::from_ref(&policy), &request)
        };
        assert!(decide(rule, "events.amazonaws.com").is_allowed());
        let other = "arn:aws:events:us-east-1:999999999999:rule/theirs";
        assert_eq!(decide(other, "events.amazonaws.com"), Decision::NotAllowed);
        assert_eq!(decide(rule, "sns.amazonaws.com"), Decision::NotAllowed);
    }

    #[test]
    fn lambda_permissions_as_get_policy_returns_them() {
        // What AWS::Lambda::Permission with SourceArn and SourceAccount leaves in the function
        // policy (Direct mode); note the AWS: prefix casing Lambda writes.
        let function = "arn:aws:lambda:us-east-1:123456789012:function:ir-RouterFunction-X";
        let rule = "arn:aws:events:us-east-1:123456789012:rule/ir-SpotInterruptionRule-X";
        let policy = Policy::parse(
            "function policy",
            &serde_json::json!({"Version": "2012-10-17", "Id": "default", "Statement": [{
                "Sid": "ir-SpotInterruptionRulePermission-X", "Effect": "Allow",
                "Principal": {"Service": "events.amazonaws.com"}, "Action": "lambda:InvokeFunction",
                "Resource": function,
                "Condition": {"StringEquals": {"AWS:SourceAccount": "123456789012"},
                              "ArnLike": {"AWS:SourceArn": rule}}}]})
            .to_string(),
        )
        .unwrap();
        let decide = |source: &str| {
            let context = [
                ("aws:SourceArn", source),
                ("aws:SourceAccount", "123456789012"),
            ];
            evaluate(
                std::slice::from_ref(&policy),
                &Request {
                    principal: Principal::Service("events.amazonaws.com"),
                    action: "lambda:InvokeFunction",
                    resource: function,
                    context: &context,
                },
            )
        };
        assert!(decide(rule).is_allowed());
        let other = "arn:aws:events:us-east-1:123456789012:rule/ir-StateChangeRule-X";
        assert_eq!(decide(other), Decision::NotAllowed);
    }

    #[test]
    fn iam_documents_are_url_decoded() {
        let encoded = "%7B%22Statement%22%3A%7B%22Effect%22%3A%22Allow%22%2C%22Action%22%3A%22sqs%3A%2A%22%2C%22Resource%22%3A%22%2A%22%7D%7D";
        let policy = Policy::parse_iam("managed", encoded).unwrap();
        assert!(
            evaluate(
                &[policy],
                &Request {
                    principal: Principal::Attached,
                    action: "sqs:SendMessage",
                    resource: QUEUE,
                    context: &[],
                }
            )
            .is_allowed()
        );
        assert!(Policy::parse_iam("inline", "{'Statement': []}").is_err());
    }

    #[test]
    fn across_accounts_both_policies_must_allow_within_one_either_does() {
        let identity = Policy::parse(
            "identity",
            r#"{"Statement":{"Effect":"Allow","Action":"sqs:SendMessage","Resource":"*"}}"#,
        )
        .unwrap();
        let empty = Policy::parse("queue policy", r#"{"Statement":[]}"#).unwrap();
        let request = Request {
            principal: Principal::Attached,
            action: "sqs:SendMessage",
            resource: QUEUE,
            context: &[("aws:SecureTransport", "true"), ("aws:PrincipalArn", ROLE)],
        };
        let same = authorize(
            std::slice::from_ref(&identity),
            std::slice::from_ref(&empty),
            ROLE,
            "123456789012",
            &request,
        );
        assert!(same.is_allowed(), "{same}");
        let other = authorize(
            std::slice::from_ref(&identity),
            &[empty],
            ROLE,
            "999999999999",
            &request,
        );
        assert_eq!(other, Decision::NotAllowed);
        let both = authorize(
            &[identity],
            &[tenant_queue_policy(ROLE)],
            ROLE,
            "999999999999",
            &request,
        );
        assert!(both.is_allowed(), "{both}");
    }

    #[test]
    fn glob_and_arn_like() {
        assert!(glob("karpenter-*", "karpenter-alpha"));
        assert!(glob("*", ""));
        assert!(glob("a?c*", "abcdef"));
        assert!(!glob("karpenter-*", "ir-ingest"));
        assert!(!glob("a*b", "acbx"));
        assert!(arn_like(
            "arn:aws:events:*:123456789012:rule/*",
            "arn:aws:events:us-east-1:123456789012:rule/x"
        ));
        assert!(!arn_like(
            "arn:aws:events:*:123456789012:rule/*",
            "arn:aws:events:us-east-1:999999999999:rule/x"
        ));
    }
}
