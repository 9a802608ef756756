//! Security checks over the CloudFormation templates, each returning the violations it found.
//!
//! moto creates queues, roles and functions but ignores queue policies and never evaluates IAM,
//! and cfn-lint/checkov know nothing of this system's guarantees (the router may send only to
//! `<QueuePrefix>*`, only the router may write a tenant queue, …). These checks read the
//! templates and state those guarantees directly; `tests/tests/policy.rs` shows each one failing
//! on a deliberately broken copy.
//!
//! Templates are parsed by [`Template::parse`] (`aws-model/src/template.rs`, which says why it uses
//! `serde_norway`): CloudFormation's short-form tags (`!Sub`, `!GetAtt`, `!If`, …) are rewritten
//! to the long form (`Fn::Sub`, …) so a check sees one shape whichever form the template uses.
//!
//! Where a value depends on a condition (`Fn::If`), a check looks at every branch: a template
//! passes only if it is safe whatever its parameters are.

use std::{collections::BTreeSet, fmt};

use serde_json::{Map, Value, json};

pub use aws_model::template::Template;

/// Every value `v` can take, one per branch of its `Fn::If`s; `None` where it is absent
/// (`AWS::NoValue`, or not set at all).
pub fn branches(v: &Value) -> Vec<Option<&Value>> {
    match v.get("Fn::If").and_then(Value::as_array) {
        Some(b) if b.len() == 3 => branches(&b[1]).into_iter().chain(branches(&b[2])).collect(),
        _ if v.is_null() || reference(v) == Some("AWS::NoValue") => vec![None],
        _ => vec![Some(v)],
    }
}

/// The values `v` takes where it is present.
pub fn alternatives(v: &Value) -> Vec<&Value> {
    branches(v).into_iter().flatten().collect()
}

/// The elements of a list (or a single value), in every branch.
pub fn items(v: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for alt in alternatives(v) {
        match alt {
            Value::Array(elements) => {
                for e in elements {
                    out.extend(alternatives(e));
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// Every list `v` can be, one per combination of its `Fn::If`s (a scalar is a list of one).
/// Unlike [`items`], which merges branches, this keeps "one principal in each branch" apart from
/// "two principals".
pub fn list_branches(v: &Value) -> Vec<Vec<&Value>> {
    let mut out = Vec::new();
    for alt in alternatives(v) {
        let Value::Array(elements) = alt else {
            out.push(vec![alt]);
            continue;
        };
        let mut lists: Vec<Vec<&Value>> = vec![Vec::new()];
        for e in elements {
            let choices = branches(e);
            lists = lists
                .iter()
                .flat_map(|list| {
                    choices.iter().map(move |choice| {
                        let mut list = list.clone();
                        list.extend(*choice);
                        list
                    })
                })
                .collect();
        }
        out.extend(lists);
    }
    out
}

/// A value as text: strings as they are, intrinsics as compact JSON.
fn text(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
}

/// `{"Fn::GetAtt": [id, attribute]}` -> id.
fn get_att<'a>(v: &'a Value, attribute: &str) -> Option<&'a str> {
    let args = v.get("Fn::GetAtt")?.as_array()?;
    (args.len() == 2 && args[1] == attribute).then(|| args[0].as_str())?
}

fn reference(v: &Value) -> Option<&str> {
    v.get("Ref")?.as_str()
}

/// IAM action matching: case-insensitive, `*` any run of characters, `?` one character.
pub fn action_matches(pattern: &str, action: &str) -> bool {
    fn glob(p: &[u8], a: &[u8]) -> bool {
        match (p.first(), a.first()) {
            (None, None) => true,
            (Some(b'*'), _) => glob(&p[1..], a) || (!a.is_empty() && glob(p, &a[1..])),
            (Some(b'?'), Some(_)) => glob(&p[1..], &a[1..]),
            (Some(x), Some(y)) if x.eq_ignore_ascii_case(y) => glob(&p[1..], &a[1..]),
            _ => false,
        }
    }
    glob(pattern.as_bytes(), action.as_bytes())
}

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

/// A check's finding: which guarantee, where, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Violation {
    pub check: Check,
    pub template: String,
    pub at: String,
    pub problem: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}] {}: {}: {}",
            self.check.name(),
            self.template,
            self.at,
            self.problem
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Check {
    NoWildcardActions,
    RouterSendsOnlyToPrefixAndDlq,
    RouterReadsOnlyIngestQueue,
    TenantQueueWritableOnlyByRouter,
    QueuesEncrypted,
    QueuePoliciesRequireTls,
    ServicePrincipalsPinnedToSource,
    IngestVisibilityTimeout,
    ReportBatchItemFailures,
    NoUnscopedWildcardPrincipals,
    RouterHasNeededPermissions,
    RouterAssumesOnlySpokeRoles,
    SpokeRoleTrustsOnlyRouter,
    SpokeRoleExactPermissions,
}

impl Check {
    pub const ALL: [Check; 14] = [
        Check::NoWildcardActions,
        Check::RouterSendsOnlyToPrefixAndDlq,
        Check::RouterReadsOnlyIngestQueue,
        Check::TenantQueueWritableOnlyByRouter,
        Check::QueuesEncrypted,
        Check::QueuePoliciesRequireTls,
        Check::ServicePrincipalsPinnedToSource,
        Check::IngestVisibilityTimeout,
        Check::ReportBatchItemFailures,
        Check::NoUnscopedWildcardPrincipals,
        Check::RouterHasNeededPermissions,
        Check::RouterAssumesOnlySpokeRoles,
        Check::SpokeRoleTrustsOnlyRouter,
        Check::SpokeRoleExactPermissions,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Check::NoWildcardActions => "no-wildcard-actions",
            Check::RouterSendsOnlyToPrefixAndDlq => "router-sends-only-to-prefix-and-dlq",
            Check::RouterReadsOnlyIngestQueue => "router-reads-only-ingest-queue",
            Check::TenantQueueWritableOnlyByRouter => "tenant-queue-writable-only-by-router",
            Check::QueuesEncrypted => "queues-encrypted",
            Check::QueuePoliciesRequireTls => "queue-policies-require-tls",
            Check::ServicePrincipalsPinnedToSource => "service-principals-pinned-to-source",
            Check::IngestVisibilityTimeout => "ingest-visibility-timeout",
            Check::ReportBatchItemFailures => "report-batch-item-failures",
            Check::NoUnscopedWildcardPrincipals => "no-unscoped-wildcard-principals",
            Check::RouterHasNeededPermissions => "router-has-needed-permissions",
            Check::RouterAssumesOnlySpokeRoles => "router-assumes-only-spoke-roles",
            Check::SpokeRoleTrustsOnlyRouter => "spoke-role-trusts-only-router",
            Check::SpokeRoleExactPermissions => "spoke-role-exact-permissions",
        }
    }

    pub fn run(self, t: &Template) -> Vec<Violation> {
        let found = match self {
            Check::NoWildcardActions => no_wildcard_actions(t),
            Check::RouterSendsOnlyToPrefixAndDlq => router_sends_only_to_prefix_and_dlq(t),
            Check::RouterReadsOnlyIngestQueue => router_reads_only_ingest_queue(t),
            Check::TenantQueueWritableOnlyByRouter => tenant_queue_writable_only_by_router(t),
            Check::QueuesEncrypted => queues_encrypted(t),
            Check::QueuePoliciesRequireTls => queue_policies_require_tls(t),
            Check::ServicePrincipalsPinnedToSource => service_principals_pinned_to_source(t),
            Check::IngestVisibilityTimeout => ingest_visibility_timeout(t),
            Check::ReportBatchItemFailures => report_batch_item_failures(t),
            Check::NoUnscopedWildcardPrincipals => no_unscoped_wildcard_principals(t),
            Check::RouterHasNeededPermissions => router_has_needed_permissions(t),
            Check::RouterAssumesOnlySpokeRoles => router_assumes_only_spoke_roles(t),
            Check::SpokeRoleTrustsOnlyRouter => spoke_role_trusts_only_router(t),
            Check::SpokeRoleExactPermissions => spoke_role_exact_permissions(t),
        };
        // A finding repeated in several branches of an Fn::If is reported once.
        let found: BTreeSet<(String, String)> = found.into_iter().collect();
        found
            .into_iter()
            .map(|(at, problem)| Violation {
                check: self,
                template: t.name.clone(),
                at,
                problem,
            })
            .collect()
    }
}

/// Every check's violations.
pub fn evaluate(t: &Template) -> Vec<Violation> {
    Check::ALL.into_iter().flat_map(|c| c.run(t)).collect()
}

type Found = Vec<(String, String)>;

/// An Allow with a wildcard action grants whatever the service adds later; NotAction is the
/// same grant written inside out. Deny statements may use wildcards (the TLS denies do).
fn no_wildcard_actions(t: &Template) -> Found {
    let mut found = Found::new();
    for s in statements(t).iter().filter(|s| s.is_allow()) {
        if s.body.get("NotAction").is_some() {
            found.push((s.label(), "Allow with NotAction".into()));
        }
        for action in s.actions() {
            if action.contains(['*', '?']) {
                found.push((s.label(), format!("Allow of wildcard action {action:?}")));
            }
        }
    }
    found
}

/// IAM actions that send to a queue (SendMessageBatch is authorised as SendMessage).
const SEND_ACTIONS: [&str; 2] = ["sqs:SendMessage", "sqs:GetQueueUrl"];
/// IAM actions that read or change a queue's messages or settings.
const QUEUE_READ_ACTIONS: [&str; 9] = [
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibility",
    "sqs:PurgeQueue",
    "sqs:GetQueueAttributes",
    "sqs:SetQueueAttributes",
    "sqs:ListDeadLetterSourceQueues",
    "sqs:StartMessageMoveTask",
    "sqs:DeleteQueue",
];
/// The only cluster-queue resource the router may send to: this account and region (anywhere else
/// it writes as that account's spoke role), the prefix.
const PREFIX_QUEUES: &str =
    "arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:${QueuePrefix}*";

/// The router's identity statements that allow something: inline, or attached from elsewhere.
fn router_allows(t: &Template) -> Vec<(String, Statement)> {
    let roles = execution_roles(t);
    statements(t)
        .into_iter()
        .filter(|s| s.kind == PolicyKind::Identity && s.is_allow())
        .flat_map(|s| {
            roles
                .iter()
                .filter(|r| s.subjects.contains(r))
                .map(|r| (r.clone(), s.clone()))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The router can send to `<QueuePrefix>*` in this account and region and to its DLQ, nothing
/// else; and `QueuePrefix` cannot be empty (that would be every queue).
fn router_sends_only_to_prefix_and_dlq(t: &Template) -> Found {
    let mut found = Found::new();
    let dlqs = dead_letter_queues(t);
    let mut uses_prefix = false;
    for (role, s) in router_allows(t) {
        if !SEND_ACTIONS.iter().any(|a| s.covers(a)) {
            continue;
        }
        if s.body.get("NotResource").is_some() {
            found.push((s.label(), format!("{role} sends with NotResource")));
        }
        for r in s.resources() {
            if r.get("Fn::Sub").and_then(Value::as_str) == Some(PREFIX_QUEUES) {
                uses_prefix = true;
            } else if !get_att(r, "Arn").is_some_and(|q| dlqs.iter().any(|d| d == q)) {
                found.push((
                    s.label(),
                    format!(
                        "{role} may send to {}, outside <QueuePrefix>* and the DLQ",
                        text(r)
                    ),
                ));
            }
        }
    }
    if uses_prefix {
        let p = &t.doc["Parameters"]["QueuePrefix"];
        if p["MinLength"].as_u64().unwrap_or(0) < 1 {
            found.push((
                "Parameters.QueuePrefix".into(),
                "no MinLength >= 1: an empty prefix lets the router send to every queue".into(),
            ));
        }
    }
    found
}

/// The router reads (receives, deletes, …) only the queue its event source mapping consumes. On
/// the cluster queues it may read their settings only (GetQueueAttributes: a tenant queue from
/// before the tenant tag is known by its policy), never their messages.
fn router_reads_only_ingest_queue(t: &Template) -> Found {
    let mut found = Found::new();
    let ingest = ingest_queues(t);
    for (role, s) in router_allows(t) {
        let reads: Vec<&str> = QUEUE_READ_ACTIONS
            .into_iter()
            .filter(|a| s.covers(a))
            .collect();
        if reads.is_empty() {
            continue;
        }
        if s.body.get("NotResource").is_some() {
            found.push((s.label(), format!("{role} reads queues with NotResource")));
        }
        for r in s.resources() {
            let settings_of_cluster_queues = r.get("Fn::Sub").and_then(Value::as_str)
                == Some(PREFIX_QUEUES)
                && reads == ["sqs:GetQueueAttributes"];
            if settings_of_cluster_queues {
                continue;
            }
            if !get_att(r, "Arn").is_some_and(|q| ingest.iter().any(|i| i == q)) {
                found.push((
                    s.label(),
                    format!("{role} may {reads:?} on {}, not the ingest queue", text(r)),
                ));
            }
        }
    }
    found
}

/// A reference to the router's role: the export of the stack that connects the region (by the
/// router's name, or by the stack's), the tenant's explicit parameter, or (in the base template)
/// the role itself.
fn is_router_role(t: &Template, v: &Value) -> bool {
    let roles = execution_roles(t);
    let alternatives = alternatives(v);
    !alternatives.is_empty()
        && alternatives.into_iter().all(|alt| {
            let import = alt
                .get("Fn::ImportValue")
                .and_then(|i| i.get("Fn::Sub"))
                .and_then(Value::as_str);
            matches!(
                import,
                Some("${BaseStackName}-RouterRoleArn" | "${RouterName}:RouterRoleArn")
            ) || reference(alt) == Some("RouterRoleArn")
                || get_att(alt, "Arn").is_some_and(|r| roles.iter().any(|x| x == r))
        })
}

/// A queue policy granting an AWS principal anything grants it to the router's role alone, and
/// denies SendMessage to every other principal (an identity policy elsewhere in the account
/// cannot then write fake interruptions).
fn tenant_queue_writable_only_by_router(t: &Template) -> Found {
    let mut found = Found::new();
    let all = statements(t);
    let queue_policies: BTreeSet<&str> = all
        .iter()
        .filter(|s| s.kind == PolicyKind::Resource && t.is_a(&s.holder, "AWS::SQS::QueuePolicy"))
        .map(|s| s.holder.as_str())
        .collect();
    for policy in queue_policies {
        let of_policy: Vec<&Statement> = all.iter().filter(|s| s.holder == policy).collect();
        let mut grants_aws = false;
        for s in of_policy.iter().filter(|s| s.is_allow()) {
            if s.body.get("NotPrincipal").is_some() {
                found.push((s.label(), "Allow with NotPrincipal".into()));
            }
            for set in s.principal_sets() {
                let aws: Vec<&Principal> = set
                    .iter()
                    .filter(|p| !matches!(p, Principal::Service(_)))
                    .collect();
                if aws.is_empty() {
                    continue;
                }
                grants_aws = true;
                if aws.len() > 1 {
                    found.push((
                        s.label(),
                        format!(
                            "Allow to {} principals; only the router role may send",
                            aws.len()
                        ),
                    ));
                }
                for p in aws {
                    match p {
                        Principal::Aws(v) if is_router_role(t, v) => {}
                        other => found.push((
                            s.label(),
                            format!("Allow to {other:?}, which is not the router role"),
                        )),
                    }
                }
            }
        }
        if !grants_aws {
            continue;
        }
        let denies_others = of_policy.iter().any(|s| {
            s.is_deny()
                && s.principals() == [Principal::Any]
                && s.covers("sqs:SendMessage")
                && [
                    "ArnNotEquals",
                    "ArnNotLike",
                    "StringNotEquals",
                    "StringNotLike",
                ]
                .iter()
                .any(|op| {
                    s.condition("aws:PrincipalArn").iter().any(|(o, v)| {
                        o == op
                            && list_branches(v)
                                .iter()
                                .all(|l| l.len() == 1 && is_router_role(t, l[0]))
                    })
                })
        });
        if !denies_others {
            found.push((
                policy.to_owned(),
                "no Deny of sqs:SendMessage for principals other than the router role".into(),
            ));
        }
    }
    found
}

fn is_true(v: &Value) -> bool {
    v == &json!(true) || v == &json!("true")
}

/// Encryption at rest: SSE-SQS or a KMS key on every queue, whatever the parameters. Both
/// chosen by one `Fn::If` on the same condition (`KmsKey`) are judged branch by branch.
fn queues_encrypted(t: &Template) -> Found {
    let mut found = Found::new();
    let condition = |v: &Value| v.get("Fn::If").and_then(|b| b.get(0)).cloned();
    for (id, q) in t.resources_of("AWS::SQS::Queue") {
        let props = &q["Properties"];
        let (sse, kms) = (&props["SqsManagedSseEnabled"], &props["KmsMasterKeyId"]);
        let (sse_branches, kms_branches) = (branches(sse), branches(kms));
        let encrypted = if condition(sse).is_some()
            && condition(sse) == condition(kms)
            && sse_branches.len() == kms_branches.len()
        {
            sse_branches
                .iter()
                .zip(&kms_branches)
                .all(|(s, k)| s.is_some_and(is_true) || k.is_some())
        } else {
            sse_branches.into_iter().all(|b| b.is_some_and(is_true))
                || kms_branches.into_iter().all(|b| b.is_some())
        };
        if !encrypted {
            found.push((
                id.to_owned(),
                "neither SqsManagedSseEnabled: true nor a KmsMasterKeyId".into(),
            ));
        }
    }
    found
}

/// Every queue is covered by a queue policy, and every queue policy denies all SQS actions to
/// everyone over plain HTTP.
fn queue_policies_require_tls(t: &Template) -> Found {
    let mut found = Found::new();
    let all = statements(t);
    let tls_deny_covers = |s: &Statement, queue: &str| {
        s.is_deny()
            && s.principals() == [Principal::Any]
            && s.actions().iter().any(|a| a == "sqs:*" || a == "*")
            && s.condition("aws:SecureTransport").iter().any(|(op, v)| {
                op == "Bool"
                    && list_branches(v)
                        .iter()
                        .all(|l| *l == [&json!("false")] || *l == [&json!(false)])
            })
            && s.resources()
                .iter()
                .any(|r| get_att(r, "Arn") == Some(queue) || *r == "*")
    };
    for (id, p) in t.resources_of("AWS::SQS::QueuePolicy") {
        for queue in items(&p["Properties"]["Queues"]) {
            let queue = reference(queue).map_or_else(|| text(queue), str::to_owned);
            if !all
                .iter()
                .any(|s| s.holder == id && tls_deny_covers(s, &queue))
            {
                found.push((
                    id.to_owned(),
                    format!("no Deny of sqs:* on {queue} when aws:SecureTransport is false"),
                ));
            }
        }
    }
    for (queue, _) in t.resources_of("AWS::SQS::Queue") {
        let covered = t.resources_of("AWS::SQS::QueuePolicy").any(|(_, p)| {
            items(&p["Properties"]["Queues"])
                .iter()
                .any(|q| reference(q) == Some(queue))
        });
        if !covered {
            found.push((
                queue.to_owned(),
                "no queue policy, so nothing refuses plain-HTTP access".into(),
            ));
        }
    }
    found
}

/// The one service principal allowed without aws:SourceArn, and why.
pub const SOURCE_ARN_EXCEPTION: (&str, &str) = (
    "lambda.amazonaws.com",
    "the trust policy of a Lambda function's own execution role: Lambda documents no \
     aws:SourceArn or aws:SourceAccount for assuming it, and iam:PassRole already keeps the \
     role to functions of this account",
);

/// An Allow to an AWS service names the resource acting for it (`aws:SourceArn`): otherwise any
/// rule, experiment or function of any account could use the service to act here (the confused
/// deputy). `aws:SourceAccount` alone is not enough.
fn service_principals_pinned_to_source(t: &Template) -> Found {
    let mut found = Found::new();
    let execution_roles = execution_roles(t);
    for s in statements(t).iter().filter(|s| s.is_allow()) {
        for p in s.principals() {
            let Principal::Service(service) = p else {
                continue;
            };
            let excepted = s.kind == PolicyKind::Trust
                && service == SOURCE_ARN_EXCEPTION.0
                && execution_roles.contains(&s.holder)
                && s.actions() == ["sts:AssumeRole"];
            if excepted {
                continue;
            }
            let pinned = s.condition("aws:SourceArn").iter().any(|(op, values)| {
                ["ArnEquals", "ArnLike", "StringEquals", "StringLike"].contains(&op.as_str())
                    && list_branches(values)
                        .iter()
                        .all(|l| !l.is_empty() && l.iter().all(|v| *v != "*"))
            });
            if !pinned {
                found.push((
                    s.label(),
                    format!("Allow to {service} without an aws:SourceArn condition"),
                ));
            }
        }
    }
    found
}

fn literal_u64(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| v.as_str()?.parse().ok())
}

/// Lambda requires an SQS source's visibility timeout to be at least 6x the function timeout;
/// below it a slow batch reappears in the queue while still being processed.
fn ingest_visibility_timeout(t: &Template) -> Found {
    let mut found = Found::new();
    for (id, m) in t.resources_of("AWS::Lambda::EventSourceMapping") {
        let props = &m["Properties"];
        let Some(queue) =
            get_att(&props["EventSourceArn"], "Arn").filter(|q| t.is_a(q, "AWS::SQS::Queue"))
        else {
            found.push((id.into(), "source is not a queue of this template".into()));
            continue;
        };
        let function = reference(&props["FunctionName"])
            .or_else(|| get_att(&props["FunctionName"], "Arn"))
            .filter(|f| t.is_a(f, "AWS::Lambda::Function"));
        let Some(function) = function else {
            found.push((id.into(), "function is not one of this template".into()));
            continue;
        };
        // The AWS defaults when the property is absent: 30 s visibility, 3 s timeout.
        let visibility = &t.doc["Resources"][queue]["Properties"]["VisibilityTimeout"];
        let timeout = &t.doc["Resources"][function]["Properties"]["Timeout"];
        let visibility = if visibility.is_null() {
            Some(30)
        } else {
            literal_u64(visibility)
        };
        let timeout = if timeout.is_null() {
            Some(3)
        } else {
            literal_u64(timeout)
        };
        match (visibility, timeout) {
            (Some(v), Some(f)) if v >= 6 * f => {}
            (Some(v), Some(f)) => found.push((
                queue.into(),
                format!("VisibilityTimeout {v} < 6 x {function} Timeout {f}"),
            )),
            _ => found.push((
                queue.into(),
                format!("VisibilityTimeout or {function} Timeout is not a literal: cannot verify"),
            )),
        }
    }
    found
}

/// Without ReportBatchItemFailures one failed record makes Lambda redeliver the whole batch,
/// and the records already forwarded arrive twice.
fn report_batch_item_failures(t: &Template) -> Found {
    let mut found = Found::new();
    for (id, m) in t.resources_of("AWS::Lambda::EventSourceMapping") {
        let always = branches(&m["Properties"]["FunctionResponseTypes"])
            .into_iter()
            .all(|b| {
                b.is_some_and(|types| items(types).contains(&&json!("ReportBatchItemFailures")))
            });
        if !always {
            found.push((
                id.into(),
                "FunctionResponseTypes lacks ReportBatchItemFailures".into(),
            ));
        }
    }
    found
}

/// Condition keys that narrow a `"*"` principal to known callers.
const PRINCIPAL_KEYS: [&str; 4] = [
    "aws:PrincipalOrgID",
    "aws:PrincipalOrgPaths",
    "aws:PrincipalAccount",
    "aws:PrincipalArn",
];
/// Condition operators that only admit the values they list.
const ADMITTING_OPERATORS: [&str; 6] = [
    "StringEquals",
    "StringLike",
    "ArnEquals",
    "ArnLike",
    "ForAnyValue:StringEquals",
    "ForAnyValue:StringLike",
];

/// An Allow to `"*"` (or with NotPrincipal) is an Allow to every AWS account unless a condition
/// on the caller's organisation, account or ARN narrows it, in every branch of its conditions.
/// The hub bus's `"*"` with `aws:PrincipalOrgID` passes; the TLS denies, being denies, are not
/// grants.
fn no_unscoped_wildcard_principals(t: &Template) -> Found {
    let mut found = Found::new();
    for s in statements(t).iter().filter(|s| s.is_allow()) {
        if s.body.get("NotPrincipal").is_some() {
            found.push((
                s.label(),
                "Allow with NotPrincipal: every principal but those named".into(),
            ));
        }
        if !s.principals().contains(&Principal::Any) {
            continue;
        }
        let narrows = |conditions: &Value| {
            conditions
                .as_object()
                .into_iter()
                .flatten()
                .any(|(op, tests)| {
                    ADMITTING_OPERATORS.contains(&op.as_str())
                        && tests
                            .as_object()
                            .into_iter()
                            .flatten()
                            .any(|(key, values)| {
                                PRINCIPAL_KEYS.iter().any(|k| k.eq_ignore_ascii_case(key))
                                    && list_branches(values).iter().all(|l| {
                                        !l.is_empty() && l.iter().all(|v| *v != "*" && *v != "")
                                    })
                            })
                })
        };
        let scoped = branches(&s.body["Condition"])
            .into_iter()
            .all(|c| c.is_some_and(narrows));
        if !scoped {
            found.push((
                s.label(),
                format!(
                    "Allow to \"*\" without a condition on {} in every branch: any AWS account \
                     may do it",
                    PRINCIPAL_KEYS.join(" / ")
                ),
            ));
        }
    }
    found
}

/// Whether some Allow of the router covers `action` on a resource `fits` accepts.
fn router_may(t: &Template, action: &str, fits: impl Fn(&Value) -> bool) -> bool {
    router_allows(t).iter().any(|(_, s)| {
        s.covers(action)
            && s.body.get("NotResource").is_none()
            && s.resources().into_iter().any(&fits)
    })
}

/// The router can do what its code does: look instances up both ways (DescribeInstances and the
/// Tagging API's GetResources, neither of which takes a resource narrower than "*": anything else
/// is an AccessDenied at the first lookup), and shorten a handed-back record's visibility on the
/// ingest queue (ChangeMessageVisibility), without which every retry waits the full visibility
/// timeout and a short outage dead-letters by redrive.
fn router_has_needed_permissions(t: &Template) -> Found {
    let mut found = Found::new();
    let roles = execution_roles(t);
    if roles.is_empty() {
        return found;
    }
    for action in ["ec2:DescribeInstances", "tag:GetResources"] {
        if !router_may(t, action, |r| *r == "*") {
            found.push((
                roles.join(", "),
                format!("no Allow of {action} on \"*\" (it has no resource-level permissions)"),
            ));
        }
    }
    for queue in ingest_queues(t) {
        if !router_may(t, "sqs:ChangeMessageVisibility", |r| {
            get_att(r, "Arn") == Some(queue.as_str())
        }) {
            found.push((
                queue.clone(),
                "the router may not sqs:ChangeMessageVisibility on it: handed-back records wait \
                 the whole visibility timeout"
                    .into(),
            ));
        }
    }
    found
}

/// The only roles the router may assume: the spoke role's name in any account.
const SPOKE_ROLES: &str = "arn:${AWS::Partition}:iam::*:role/${SpokeRoleName}";

/// Whether a parameter's AllowedPattern admits only names: `^[class]{m,n}$` or `^[class]+$`
/// with m >= 1 and no `*` or `?` (IAM wildcards) and no escape in the class. Anything else
/// cannot be shown to exclude a wildcard.
pub fn pattern_admits_only_names(pattern: &str) -> bool {
    let Some(body) = pattern.strip_prefix("^[").and_then(|p| p.strip_suffix('$')) else {
        return false;
    };
    let Some((class, quantifier)) = body.split_once(']') else {
        return false;
    };
    let min = if quantifier == "+" {
        Some(1)
    } else {
        quantifier
            .strip_prefix('{')
            .and_then(|q| q.strip_suffix('}'))
            .and_then(|q| q.split(',').next())
            .and_then(|m| m.parse::<u32>().ok())
    };
    !class.is_empty() && !class.contains(['*', '?', '\\', '[', '^']) && min.is_some_and(|m| m >= 1)
}

/// sts:AssumeRole is granted on `arn:…:iam::*:role/${SpokeRoleName}` alone, and SpokeRoleName
/// cannot be a wildcard (a "*" would be every role, in every account, that trusts the router).
fn router_assumes_only_spoke_roles(t: &Template) -> Found {
    let mut found = Found::new();
    let mut uses_spoke_name = false;
    for (role, s) in router_allows(t) {
        if !s.covers("sts:AssumeRole") {
            continue;
        }
        if s.body.get("NotResource").is_some() {
            found.push((s.label(), format!("{role} assumes roles with NotResource")));
        }
        for r in s.resources() {
            if r.get("Fn::Sub").and_then(Value::as_str) == Some(SPOKE_ROLES) {
                uses_spoke_name = true;
            } else {
                found.push((
                    s.label(),
                    format!("{role} may assume {}, not only {SPOKE_ROLES}", text(r)),
                ));
            }
        }
    }
    if uses_spoke_name {
        let pattern = t.doc["Parameters"]["SpokeRoleName"]["AllowedPattern"]
            .as_str()
            .unwrap_or_default();
        if !pattern_admits_only_names(pattern) {
            found.push((
                "Parameters.SpokeRoleName".into(),
                format!("AllowedPattern {pattern:?} may admit a wildcard role name"),
            ));
        }
    }
    found
}

/// A role AWS principals may assume (spoke.yaml's spoke role) trusts the hub router's role alone
/// (the `RouterRoleArn` parameter, which must be a role ARN: a pattern starting `^arn:` cannot
/// match "*"), for sts:AssumeRole alone.
fn spoke_role_trusts_only_router(t: &Template) -> Found {
    let mut found = Found::new();
    let roles = assumable_roles(t);
    let mut names_parameter = false;
    for s in statements(t)
        .iter()
        .filter(|s| s.kind == PolicyKind::Trust && roles.contains(&s.holder))
    {
        if s.body.get("NotPrincipal").is_some() {
            found.push((s.label(), "trust with NotPrincipal".into()));
        }
        if !s.is_allow() {
            continue;
        }
        for set in s.principal_sets() {
            for p in set {
                match p {
                    Principal::Aws(v)
                        if alternatives(&v)
                            .iter()
                            .all(|a| reference(a) == Some("RouterRoleArn")) =>
                    {
                        names_parameter = true;
                    }
                    other => found.push((
                        s.label(),
                        format!("{} trusts {other:?}, not only the router role", s.holder),
                    )),
                }
            }
        }
        for action in s.actions() {
            if action != "sts:AssumeRole" {
                found.push((
                    s.label(),
                    format!("trust allows {action}; only sts:AssumeRole"),
                ));
            }
        }
    }
    if names_parameter {
        let pattern = t.doc["Parameters"]["RouterRoleArn"]["AllowedPattern"]
            .as_str()
            .unwrap_or_default();
        if !pattern.starts_with("^arn:") {
            found.push((
                "Parameters.RouterRoleArn".into(),
                format!(
                    "AllowedPattern {pattern:?} does not hold it to an ARN: \"*\" would trust \
                     everyone"
                ),
            ));
        }
    }
    found
}

/// The spoke role's actions on `"*"` (they have no resource-level permissions).
const SPOKE_LOOKUPS: [&str; 2] = ["ec2:DescribeInstances", "tag:GetResources"];
/// The spoke role's queue actions, on `SPOKE_QUEUES` only: sending, and telling a tenant queue
/// from a look-alike (its tag, or its policy).
const SPOKE_SENDS: [&str; 4] = [
    "sqs:SendMessage",
    "sqs:GetQueueUrl",
    "sqs:ListQueueTags",
    "sqs:GetQueueAttributes",
];
/// This account's cluster queues, in every region (the role is global).
const SPOKE_QUEUES: &str = "arn:${AWS::Partition}:sqs:*:${AWS::AccountId}:${QueuePrefix}*";

/// The spoke role may do exactly what the router does in a member account: the two lookups on
/// "*", SendMessage, GetQueueUrl, ListQueueTags and GetQueueAttributes on `<QueuePrefix>*` queues of this account (QueuePrefix not
/// empty), nothing else, and no managed policies beside the inline one.
fn spoke_role_exact_permissions(t: &Template) -> Found {
    let mut found = Found::new();
    let roles = assumable_roles(t);
    let exact: Vec<&str> = SPOKE_LOOKUPS.iter().chain(&SPOKE_SENDS).copied().collect();
    let mut uses_prefix = false;
    for role in &roles {
        let managed = &t.doc["Resources"][role]["Properties"]["ManagedPolicyArns"];
        if !items(managed).is_empty() {
            found.push((
                role.clone(),
                "ManagedPolicyArns: permissions beyond the spoke's own".into(),
            ));
        }
        let allows: Vec<Statement> = statements(t)
            .into_iter()
            .filter(|s| s.kind == PolicyKind::Identity && s.is_allow() && s.subjects.contains(role))
            .collect();
        for s in &allows {
            if s.body.get("NotAction").is_some() || s.body.get("NotResource").is_some() {
                found.push((s.label(), "Allow with NotAction or NotResource".into()));
            }
            for action in s.actions() {
                if !exact.iter().any(|a| a.eq_ignore_ascii_case(&action)) {
                    found.push((
                        s.label(),
                        format!("{role} may {action}; only {}", exact.join(", ")),
                    ));
                }
            }
            if SPOKE_SENDS.iter().any(|a| s.covers(a)) {
                for r in s.resources() {
                    if r.get("Fn::Sub").and_then(Value::as_str) == Some(SPOKE_QUEUES) {
                        uses_prefix = true;
                    } else {
                        found.push((
                            s.label(),
                            format!("{role} may send to {}, not only {SPOKE_QUEUES}", text(r)),
                        ));
                    }
                }
            }
        }
        for action in &exact {
            let fits = |r: &Value| {
                if SPOKE_SENDS.contains(action) {
                    r.get("Fn::Sub").and_then(Value::as_str) == Some(SPOKE_QUEUES)
                } else {
                    *r == "*"
                }
            };
            let allowed = allows.iter().any(|s| {
                s.covers(action)
                    && s.body.get("NotResource").is_none()
                    && s.resources().into_iter().any(fits)
            });
            if !allowed {
                found.push((
                    role.clone(),
                    format!("{role} lacks {action}: the router cannot do it in this account"),
                ));
            }
        }
    }
    if uses_prefix
        && t.doc["Parameters"]["QueuePrefix"]["MinLength"]
            .as_u64()
            .unwrap_or(0)
            < 1
    {
        found.push((
            "Parameters.QueuePrefix".into(),
            "no MinLength >= 1: an empty prefix lets the spoke role send to every queue".into(),
        ));
    }
    found
}
