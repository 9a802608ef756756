//! What the template's policies say, and of whom: every statement of every policy (identity,
//! trust, resource) as a [`Statement`] with its holder and subjects, and the roles and queues the
//! checks ask about (the functions' execution roles, the assumable roles, the ingest and
//! dead-letter queues).

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use aws_model::template::Template;

use super::values::{action_matches, alternatives, get_att, items, list_branches, reference, text};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyKind {
    /// What a role may do (inline role policies, `AWS::IAM::Policy`, managed policies).
    Identity,
    /// Who may assume a role.
    Trust,
    /// Who may act on a resource (queue policies, Lambda permissions).
    Resource,
}

/// One statement of a policy in the template, in every branch of its conditions.
#[derive(Debug, Clone)]
pub struct Statement {
    /// The resource that holds the policy.
    pub holder: String,
    pub kind: PolicyKind,
    /// Identity policies: the roles (logical ids, or the text of a reference to one outside the
    /// template) it applies to. Queue policies: the queues.
    pub subjects: Vec<String>,
    pub body: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Principal {
    Any,
    Service(String),
    Aws(Value),
    Other(Value),
}

impl Statement {
    pub fn label(&self) -> String {
        match self.body["Sid"].as_str() {
            Some(sid) => format!("{} statement {sid}", self.holder),
            None => format!("{} statement {}", self.holder, self.body),
        }
    }

    pub fn is_allow(&self) -> bool {
        self.body["Effect"] == "Allow"
    }

    pub fn is_deny(&self) -> bool {
        self.body["Effect"] == "Deny"
    }

    pub fn actions(&self) -> Vec<String> {
        items(&self.body["Action"]).into_iter().map(text).collect()
    }

    /// Whether the statement covers `action`. NotAction covers everything it does not name.
    pub fn covers(&self, action: &str) -> bool {
        if self.body.get("NotAction").is_some() {
            return !items(&self.body["NotAction"])
                .into_iter()
                .any(|p| action_matches(&text(p), action));
        }
        self.actions().iter().any(|p| action_matches(p, action))
    }

    pub fn resources(&self) -> Vec<&Value> {
        items(&self.body["Resource"])
    }

    /// The principals of the statement, one set per branch of its conditions.
    pub fn principal_sets(&self) -> Vec<Vec<Principal>> {
        let mut out = Vec::new();
        for p in alternatives(&self.body["Principal"]) {
            let Value::Object(map) = p else {
                out.push(vec![principal("AWS", p)]);
                continue;
            };
            let mut sets: Vec<Vec<Principal>> = vec![Vec::new()];
            for (kind, values) in map {
                let lists = list_branches(values);
                sets = sets
                    .iter()
                    .flat_map(|set| {
                        lists.iter().map(move |list| {
                            let mut set = set.clone();
                            set.extend(list.iter().map(|v| principal(kind, v)));
                            set
                        })
                    })
                    .collect();
            }
            out.extend(sets);
        }
        out
    }

    /// Every principal the statement names in any branch.
    pub fn principals(&self) -> Vec<Principal> {
        self.principal_sets().into_iter().flatten().collect()
    }

    /// The values a condition key is tested against, with their operator, as written (they may
    /// hold an `Fn::If`); keys are case-insensitive, as in IAM.
    pub fn condition(&self, key: &str) -> Vec<(String, &Value)> {
        let mut out = Vec::new();
        for conditions in alternatives(&self.body["Condition"]) {
            for (operator, tests) in conditions.as_object().into_iter().flatten() {
                for (k, v) in tests.as_object().into_iter().flatten() {
                    if k.eq_ignore_ascii_case(key) {
                        out.push((operator.clone(), v));
                    }
                }
            }
        }
        out
    }
}

fn principal(kind: &str, v: &Value) -> Principal {
    match (kind, v) {
        (_, Value::String(s)) if s == "*" => Principal::Any,
        ("Service", Value::String(s)) => Principal::Service(s.clone()),
        ("AWS", v) => Principal::Aws(v.clone()),
        (_, v) => Principal::Other(v.clone()),
    }
}

/// Every policy statement in the template.
pub fn statements(t: &Template) -> Vec<Statement> {
    let mut out = Vec::new();
    let mut push = |holder: &str, kind, subjects: Vec<String>, document: &Value| {
        for doc in alternatives(document) {
            for body in items(&doc["Statement"]) {
                out.push(Statement {
                    holder: holder.to_owned(),
                    kind,
                    subjects: subjects.clone(),
                    body: body.clone(),
                });
            }
        }
    };
    let named = |v: &Value| reference(v).map_or_else(|| text(v), str::to_owned);
    for (id, r) in t.resources() {
        let props = &r["Properties"];
        match r["Type"].as_str().unwrap_or_default() {
            "AWS::IAM::Role" => {
                push(
                    id,
                    PolicyKind::Trust,
                    vec![id.into()],
                    &props["AssumeRolePolicyDocument"],
                );
                for policy in items(&props["Policies"]) {
                    push(
                        id,
                        PolicyKind::Identity,
                        vec![id.into()],
                        &policy["PolicyDocument"],
                    );
                }
            }
            "AWS::IAM::Policy" | "AWS::IAM::ManagedPolicy" => {
                let roles = items(&props["Roles"]).into_iter().map(named).collect();
                push(id, PolicyKind::Identity, roles, &props["PolicyDocument"]);
            }
            // A key policy is the key's resource policy.
            "AWS::KMS::Key" => push(
                id,
                PolicyKind::Resource,
                vec![id.into()],
                &props["KeyPolicy"],
            ),
            "AWS::SQS::QueuePolicy" => {
                let queues = items(&props["Queues"]).into_iter().map(named).collect();
                push(id, PolicyKind::Resource, queues, &props["PolicyDocument"]);
            }
            // A permission is one resource-policy statement; written as one so the principal
            // checks treat it like any other.
            "AWS::Lambda::Permission" => {
                let principal = text(&props["Principal"]);
                let principal = if principal.ends_with(".amazonaws.com") {
                    json!({ "Service": principal })
                } else {
                    json!({ "AWS": props["Principal"] })
                };
                let mut condition = Map::new();
                if !props["SourceArn"].is_null() {
                    condition.insert(
                        "ArnLike".into(),
                        json!({ "aws:SourceArn": props["SourceArn"] }),
                    );
                }
                if !props["SourceAccount"].is_null() {
                    condition.insert(
                        "StringEquals".into(),
                        json!({ "aws:SourceAccount": props["SourceAccount"] }),
                    );
                }
                let body = json!({
                    "Sid": id,
                    "Effect": "Allow",
                    "Principal": principal,
                    "Action": props["Action"],
                    "Resource": props["FunctionName"],
                    "Condition": condition,
                });
                push(
                    id,
                    PolicyKind::Resource,
                    vec![named(&props["FunctionName"])],
                    &json!({ "Statement": [body] }),
                );
            }
            // An event bus's own policy (who may put events on it).
            "AWS::Events::EventBus" => {
                push(id, PolicyKind::Resource, vec![id.into()], &props["Policy"]);
            }
            // One statement per resource: `Statement`, or the older Principal/Action/Condition
            // properties (an account id, or "*" for every account).
            "AWS::Events::EventBusPolicy" => {
                let bus = vec![named(&props["EventBusName"])];
                let statement = if props.get("Statement").is_some() {
                    props["Statement"].clone()
                } else {
                    let mut legacy = Map::new();
                    legacy.insert("Sid".into(), props["StatementId"].clone());
                    legacy.insert("Effect".into(), json!("Allow"));
                    legacy.insert("Principal".into(), json!({ "AWS": props["Principal"] }));
                    legacy.insert("Action".into(), props["Action"].clone());
                    if !props["Condition"].is_null() {
                        legacy.insert("Condition".into(), props["Condition"].clone());
                    }
                    Value::Object(legacy)
                };
                push(
                    id,
                    PolicyKind::Resource,
                    bus,
                    &json!({ "Statement": [statement] }),
                );
            }
            // Any other resource with a policy document (bucket, topic, key policies): its
            // statements are still held to the wildcard and service-principal checks.
            _ => {
                for key in ["PolicyDocument", "KeyPolicy"] {
                    if props.get(key).is_some() {
                        push(id, PolicyKind::Resource, vec![], &props[key]);
                    }
                }
            }
        }
    }
    out
}

/// The roles Lambda functions of the template run as (logical ids).
pub fn execution_roles(t: &Template) -> Vec<String> {
    let mut roles = BTreeSet::new();
    for (_, f) in t.resources_of("AWS::Lambda::Function") {
        for role in alternatives(&f["Properties"]["Role"]) {
            if let Some(id) = get_att(role, "Arn").filter(|id| t.is_a(id, "AWS::IAM::Role")) {
                roles.insert(id.to_owned());
            }
        }
    }
    roles.into_iter().collect()
}

/// Roles that AWS principals (not services) may assume (logical ids): in these templates only
/// spoke.yaml's spoke role, which the hub's router assumes.
pub fn assumable_roles(t: &Template) -> Vec<String> {
    let mut roles = BTreeSet::new();
    for s in statements(t) {
        let by_principal = s
            .principals()
            .iter()
            .any(|p| !matches!(p, Principal::Service(_)))
            || s.body.get("NotPrincipal").is_some();
        if s.kind == PolicyKind::Trust && s.is_allow() && by_principal {
            roles.insert(s.holder);
        }
    }
    roles.into_iter().collect()
}

/// The queues an event source mapping of the template reads (logical ids).
pub fn ingest_queues(t: &Template) -> Vec<String> {
    let mut queues = BTreeSet::new();
    for (_, m) in t.resources_of("AWS::Lambda::EventSourceMapping") {
        for source in alternatives(&m["Properties"]["EventSourceArn"]) {
            if let Some(id) = get_att(source, "Arn").filter(|id| t.is_a(id, "AWS::SQS::Queue")) {
                queues.insert(id.to_owned());
            }
        }
    }
    queues.into_iter().collect()
}

/// The queues member accounts' rules write themselves, which the functions route only as their
/// sender's account's events (`DIRECT_QUEUE_ARN`).
pub fn direct_queues(t: &Template) -> Vec<String> {
    let mut queues = BTreeSet::new();
    for (_, f) in t.resources_of("AWS::Lambda::Function") {
        let arn = &f["Properties"]["Environment"]["Variables"]["DIRECT_QUEUE_ARN"];
        for v in alternatives(arn) {
            if let Some(id) = get_att(v, "Arn").filter(|id| t.is_a(id, "AWS::SQS::Queue")) {
                queues.insert(id.to_owned());
            }
        }
    }
    queues.into_iter().collect()
}

/// The queues the functions send their permanent failures to (`DEAD_LETTER_QUEUE_URL`).
pub fn dead_letter_queues(t: &Template) -> Vec<String> {
    let mut queues = BTreeSet::new();
    for (_, f) in t.resources_of("AWS::Lambda::Function") {
        let url = &f["Properties"]["Environment"]["Variables"]["DEAD_LETTER_QUEUE_URL"];
        for v in alternatives(url) {
            if let Some(id) = reference(v).filter(|id| t.is_a(id, "AWS::SQS::Queue")) {
                queues.insert(id.to_owned());
            }
        }
    }
    queues.into_iter().collect()
}
