//! `routerctl verify`: checks a live deployment of the base stack (and its tenant queues) against
//! what the router needs to deliver every interruption, and says how to fix each failure.
//!
//! Everything is read from AWS, not from the template: drift (a rule disabled by hand, a queue
//! re-created unencrypted, an event source mapping edited) is what this exists to catch. Expected
//! rule patterns come from the router's own [`Kind`] list, and the function's environment is
//! validated with the router's own [`Config::from_lookup`], so verify and the router cannot
//! disagree. Permissions are evaluated with [`crate::policy`] (queue policies, the function policy,
//! the role's inline and managed policies and its permission boundary); SCPs are not.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_eventbridge::types::RuleState;
use aws_sdk_lambda::types::FunctionResponseType;
use aws_sdk_sqs::types::QueueAttributeName;
use interruption_router::{
    config::{Config, QueueNameTemplate},
    event::Kind,
};
use serde_json::{Value, json};

use crate::{
    aws::{Aws, arn_name, describe},
    policy::{Decision, Policy, Principal, Request, evaluate},
};

/// The base stack's rules, by logical id, and the kind each must pass.
pub const RULES: [(&str, Kind); 5] = [
    ("SpotInterruptionRule", Kind::SpotInterruption),
    ("RebalanceRecommendationRule", Kind::RebalanceRecommendation),
    ("StateChangeRule", Kind::StateChange),
    ("ScheduledChangeRule", Kind::ScheduledChange),
    (
        "CapacityReservationInterruptionRule",
        Kind::CapacityReservationInterruption,
    ),
];

#[derive(Debug, Clone)]
pub struct Options {
    pub stack: String,
    /// Clusters whose queues to check; empty checks every queue named by the router's template.
    pub clusters: Vec<String>,
}

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
        let mut out = format!("verify {} in {}{mode}\n", self.stack, self.region);
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
struct Findings {
    ok: Vec<String>,
    problems: Vec<String>,
    fixes: Vec<String>,
}

impl Findings {
    fn ok(&mut self, what: impl Into<String>) {
        self.ok.push(what.into());
    }

    fn problem(&mut self, problem: impl Into<String>, fix: impl Into<String>) {
        self.problems.push(problem.into());
        let fix = fix.into();
        if !self.fixes.contains(&fix) {
            self.fixes.push(fix);
        }
    }

    fn into_check(self, name: impl Into<String>) -> Check {
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

fn fail(name: &str, problem: impl Into<String>, fix: impl Into<String>) -> Check {
    let mut f = Findings::default();
    f.problem(problem, fix);
    f.into_check(name)
}

/// The base stack as CloudFormation describes it.
struct Base {
    name: String,
    mode: Mode,
    account: String,
    partition: String,
    outputs: BTreeMap<String, String>,
    resources: BTreeMap<String, String>,
}

impl Base {
    fn output(&self, key: &str) -> Option<&str> {
        self.outputs.get(key).map(String::as_str)
    }
}

/// A queue as SQS describes it.
struct Queue {
    name: String,
    arn: String,
    url: String,
    attributes: HashMap<String, String>,
}

impl Queue {
    fn attribute(&self, name: QueueAttributeName) -> Option<&str> {
        self.attributes.get(name.as_str()).map(String::as_str)
    }
}

/// The router role's policies, read once.
struct Role {
    arn: String,
    identity: Vec<Policy>,
    boundary: Option<Policy>,
}

impl Role {
    /// The identity policies' decision, capped by the permission boundary.
    fn may(&self, action: &str, resource: &str) -> Decision {
        let request = Request {
            principal: Principal::Attached,
            action,
            resource,
            context: &[],
        };
        let decision = evaluate(&self.identity, &request);
        match (&self.boundary, decision.is_allowed()) {
            (Some(boundary), true) => match evaluate(std::slice::from_ref(boundary), &request) {
                Decision::Allowed { .. } => decision,
                capped => capped,
            },
            _ => decision,
        }
    }
}

/// Runs every check. AWS errors (a missing resource, a denied read) become failed checks with
/// their fix, so there is no error to return.
pub async fn run(aws: &Aws, options: &Options) -> Report {
    let mut report = Report {
        stack: options.stack.clone(),
        region: aws.region.clone(),
        mode: None,
        checks: Vec::new(),
    };
    let base = match load_stack(aws, &options.stack).await {
        Ok((base, check)) => {
            report.checks.push(check);
            base
        }
        Err(check) => {
            report.checks.push(check);
            return report;
        }
    };
    report.mode = Some(base.mode);
    let region = &aws.region;
    let checks = &mut report.checks;

    let function = match base.output("FunctionName") {
        Some(name) => aws
            .lambda
            .get_function_configuration()
            .function_name(name)
            .send()
            .await
            .map_err(|e| format!("function {name}: {}", describe(&e))),
        None => Err("the stack has no FunctionName output".to_owned()),
    };
    let function_arn = function
        .as_ref()
        .ok()
        .and_then(|f| f.function_arn())
        .map(str::to_owned);
    let dlq_arn = base.output("DeadLetterQueueArn").map(str::to_owned);
    let ingest_arn = base.output("IngestQueueArn").map(str::to_owned);

    // Rules first: the queue and function policies are checked against their ARNs.
    let target = match base.mode {
        Mode::Queue => ingest_arn.clone(),
        Mode::Direct => function_arn.clone(),
    };
    let mut rule_arns = Vec::new();
    for (logical, kind) in RULES {
        let (check, arn) = check_rule(
            aws,
            &base,
            logical,
            kind,
            target.as_deref(),
            dlq_arn.as_deref(),
        )
        .await;
        checks.push(check);
        rule_arns.extend(arn);
    }

    let timeout = function.as_ref().ok().and_then(|f| f.timeout());
    if base.mode == Mode::Queue {
        match ingest_arn.as_deref() {
            Some(arn) => match load_queue(aws, arn_name(arn)).await {
                Ok(queue) => {
                    checks.push(check_ingest_queue(&queue, timeout, dlq_arn.as_deref()));
                    checks.push(events_may_send(
                        "ingest-queue:policy",
                        "AllowTheseRulesOnly",
                        &queue,
                        &rule_arns,
                        &base,
                        region,
                    ));
                    checks.push(check_event_source_mapping(aws, &base, &queue).await);
                }
                Err(problem) => {
                    let fix = format!(
                        "the stack's IngestQueue was deleted outside CloudFormation: delete and \
                         re-deploy the stack {}, or re-create the queue as base.yaml defines it",
                        base.name
                    );
                    checks.push(fail("ingest-queue", problem, fix));
                }
            },
            None => checks.push(fail(
                "ingest-queue",
                "the stack is in Queue mode but has no IngestQueueArn output",
                "update the stack with this project's cloudformation/base.yaml",
            )),
        }
    }
    match dlq_arn.as_deref() {
        Some(arn) => match load_queue(aws, arn_name(arn)).await {
            Ok(queue) => {
                let mut f = Findings::default();
                encryption(&queue, &mut f, region);
                checks.push(f.into_check("dead-letter-queue"));
                checks.push(events_may_send(
                    "dead-letter-queue:policy",
                    "AllowDeadLettersFromTheseRules",
                    &queue,
                    &rule_arns,
                    &base,
                    region,
                ));
            }
            Err(problem) => checks.push(fail(
                "dead-letter-queue",
                problem,
                "re-create it as base.yaml defines it, or delete and re-deploy the stack",
            )),
        },
        None => checks.push(fail(
            "dead-letter-queue",
            "the stack has no DeadLetterQueueArn output",
            "update the stack with this project's cloudformation/base.yaml",
        )),
    }

    let config = match &function {
        Ok(f) => {
            checks.push(check_function(f, &base));
            let (check, config) = check_environment(f, &base, dlq_arn.as_deref());
            checks.push(check);
            config
        }
        Err(problem) => {
            checks.push(fail(
                "function",
                problem.clone(),
                format!(
                    "re-deploy the base stack {} (make deploy-base), or check --stack and --region",
                    base.name
                ),
            ));
            None
        }
    };
    if let (Mode::Direct, Some(arn)) = (base.mode, function_arn.as_deref()) {
        checks.push(check_invoke_permission(aws, arn, &rule_arns, &base).await);
        checks.push(check_on_failure_destination(aws, arn, dlq_arn.as_deref(), region).await);
    }

    let role_arn = base.output("RouterRoleArn").map(str::to_owned);
    let role = match role_arn.as_deref() {
        Some(arn) => load_role(aws, arn).await,
        None => Err((
            "the stack has no RouterRoleArn output".to_owned(),
            "update the stack with this project's cloudformation/base.yaml".to_owned(),
        )),
    };
    match &role {
        Ok(role) => checks.push(check_role(
            role,
            dlq_arn.as_deref(),
            ingest_arn.as_deref().filter(|_| base.mode == Mode::Queue),
        )),
        Err((problem, fix)) => checks.push(fail("router-role", problem.clone(), fix.clone())),
    }

    // Tenants: queues are named by the function's template; if the environment is broken, by the
    // stack's QueuePrefix, so one mistake is reported once.
    let template = config.map(|c| c.queue_names).or_else(|| {
        QueueNameTemplate::parse(&format!("{}{{cluster}}", base.output("QueuePrefix")?)).ok()
    });
    let Some(template) = template else {
        checks.push(fail(
            "tenants",
            "no queue naming: the function environment is invalid and the stack has no QueuePrefix output",
            "fix function:environment first",
        ));
        return report;
    };
    let own: Vec<&str> = [ingest_arn.as_deref(), dlq_arn.as_deref()]
        .into_iter()
        .flatten()
        .map(arn_name)
        .collect();
    let clusters = if options.clusters.is_empty() {
        match discover_clusters(aws, &template, &own).await {
            Ok(found) if found.is_empty() => {
                checks.push(fail(
                    "tenants",
                    format!(
                        "no queue named {}… in {region}: the router has nowhere to deliver",
                        template.prefix()
                    ),
                    format!(
                        "deploy cloudformation/tenant.yaml per cluster (make deploy-tenant \
                         CLUSTER=<name> REGION={region} STACK_NAME={}), or name clusters with --cluster",
                        base.name
                    ),
                ));
                return report;
            }
            Ok(found) => found,
            Err(problem) => {
                checks.push(fail("tenants", problem, "name the clusters with --cluster"));
                return report;
            }
        }
    } else {
        options.clusters.clone()
    };
    for cluster in &clusters {
        check_tenant(
            aws,
            &base,
            &template,
            cluster,
            role_arn.as_deref(),
            role.as_ref().ok(),
            checks,
        )
        .await;
    }
    report
}

async fn load_stack(aws: &Aws, name: &str) -> Result<(Base, Check), Check> {
    let not_found_fix = format!(
        "deploy it (make deploy-base BUCKET=… REGION={} STACK_NAME={name}), or pass the base \
         stack's name with --stack (aws cloudformation list-stacks --region {})",
        aws.region, aws.region
    );
    let described = aws
        .cfn
        .describe_stacks()
        .stack_name(name)
        .send()
        .await
        .map_err(|e| fail("stack", format!("{name}: {}", describe(&e)), &not_found_fix))?;
    let Some(stack) = described.stacks().first() else {
        return Err(fail(
            "stack",
            format!("{name} does not exist"),
            not_found_fix,
        ));
    };
    let mut f = Findings::default();
    let status = stack
        .stack_status()
        .map(|s| s.as_str())
        .unwrap_or("unknown");
    let outputs: BTreeMap<String, String> = stack
        .outputs()
        .iter()
        .filter_map(|o| Some((o.output_key()?.to_owned(), o.output_value()?.to_owned())))
        .collect();
    let parameters: BTreeMap<&str, &str> = stack
        .parameters()
        .iter()
        .filter_map(|p| Some((p.parameter_key()?, p.parameter_value()?)))
        .collect();
    let mode = match parameters.get("IngestMode").copied() {
        Some("Direct") => Mode::Direct,
        _ => Mode::Queue,
    };
    match status {
        "CREATE_COMPLETE" | "UPDATE_COMPLETE" | "IMPORT_COMPLETE" => {
            f.ok(format!("{name}: {status}, IngestMode={mode:?}"))
        }
        "UPDATE_ROLLBACK_COMPLETE" => f.ok(format!(
            "{name}: UPDATE_ROLLBACK_COMPLETE (the last update failed; the previous version runs), IngestMode={mode:?}"
        )),
        s if s.ends_with("_IN_PROGRESS") => f.problem(
            format!("{name} is {s}"),
            "wait for the operation to finish and run verify again",
        ),
        s => f.problem(
            format!("{name} is {s}"),
            format!(
                "see why: aws cloudformation describe-stack-events --stack-name {name} --region {}",
                aws.region
            ),
        ),
    }
    for key in [
        "RouterRoleArn",
        "FunctionName",
        "DeadLetterQueueArn",
        "QueuePrefix",
    ] {
        if !outputs.contains_key(key) {
            f.problem(
                format!("output {key} is missing"),
                "update the stack with this project's cloudformation/base.yaml",
            );
        }
    }
    let resources = aws
        .cfn
        .describe_stack_resources()
        .stack_name(name)
        .send()
        .await
        .map_err(|e| {
            fail(
                "stack",
                format!("DescribeStackResources {name}: {}", describe(&e)),
                "check your cloudformation:DescribeStackResources permission",
            )
        })?
        .stack_resources()
        .iter()
        .filter_map(|r| {
            Some((
                r.logical_resource_id()?.to_owned(),
                r.physical_resource_id()?.to_owned(),
            ))
        })
        .collect();
    let stack_id = stack.stack_id().unwrap_or_default();
    let base = Base {
        name: name.to_owned(),
        mode,
        account: crate::aws::arn_account(stack_id)
            .unwrap_or_default()
            .to_owned(),
        partition: stack_id.split(':').nth(1).unwrap_or("aws").to_owned(),
        outputs,
        resources,
    };
    Ok((base, f.into_check("stack")))
}

/// Arrays in an event pattern are sets: order does not matter.
fn normalized(value: &Value) -> Value {
    match value {
        Value::Array(items) => {
            let mut items: Vec<Value> = items.iter().map(normalized).collect();
            items.sort_by_key(|v| v.to_string());
            Value::Array(items)
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), normalized(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

async fn check_rule(
    aws: &Aws,
    base: &Base,
    logical: &str,
    kind: Kind,
    target: Option<&str>,
    dlq: Option<&str>,
) -> (Check, Option<String>) {
    let check_name = format!("rule:{logical}");
    let region = &aws.region;
    let Some(name) = base.resources.get(logical) else {
        return (
            fail(
                &check_name,
                format!("the stack has no {logical}"),
                "update the stack with this project's cloudformation/base.yaml",
            ),
            None,
        );
    };
    let rule = match aws.events.describe_rule().name(name).send().await {
        Ok(rule) => rule,
        Err(e) => {
            let problem = if e
                .as_service_error()
                .is_some_and(|s| s.is_resource_not_found_exception())
            {
                format!("rule {name} does not exist (deleted outside CloudFormation)")
            } else {
                format!("DescribeRule {name}: {}", describe(&e))
            };
            return (
                fail(
                    &check_name,
                    problem,
                    format!(
                        "CloudFormation does not re-create deleted resources on its own: re-create \
                         the rule as base.yaml defines it, or delete and re-deploy the stack {}",
                        base.name
                    ),
                ),
                None,
            );
        }
    };
    let arn = rule.arn().map(str::to_owned).unwrap_or_else(|| {
        format!(
            "arn:{}:events:{region}:{}:rule/{name}",
            base.partition, base.account
        )
    });
    let mut f = Findings::default();
    match rule.state() {
        Some(RuleState::Enabled) => f.ok(format!("{name} ENABLED")),
        state => f.problem(
            format!(
                "{name} is {}: its events never reach the router",
                state.map_or("in no state", |s| s.as_str())
            ),
            format!("aws events enable-rule --name {name} --region {region}"),
        ),
    }
    if let Some(bus) = rule.event_bus_name().filter(|b| *b != "default") {
        f.problem(
            format!("{name} is on event bus {bus}; EC2 and Health send to the default bus"),
            "re-create the rule on the default event bus, as base.yaml does",
        );
    }
    let expected = kind.event_pattern();
    let found: Option<Value> = rule
        .event_pattern()
        .and_then(|p| serde_json::from_str(p).ok());
    if found.as_ref().map(normalized) == Some(normalized(&expected)) {
        f.ok("pattern as the router expects");
    } else {
        f.problem(
            format!(
                "pattern {} differs from what the router handles: {expected}",
                rule.event_pattern().unwrap_or("(none)")
            ),
            format!(
                "aws events put-rule --name {name} --region {region} --state ENABLED --event-pattern '{expected}'"
            ),
        );
    }

    match aws.events.list_targets_by_rule().rule(name).send().await {
        Ok(out) => {
            let (what, target_id) = match base.mode {
                Mode::Queue => ("the ingest queue", "ingest"),
                Mode::Direct => ("the router function", "router"),
            };
            match (
                target,
                out.targets().iter().find(|t| Some(t.arn()) == target),
            ) {
                (None, _) => f.problem(
                    format!("cannot tell whether it targets {what}: its ARN is unknown"),
                    "fix the ingest-queue or function check first",
                ),
                (Some(target), None) => {
                    let found: Vec<&str> = out.targets().iter().map(|t| t.arn()).collect();
                    f.problem(
                        format!("does not target {what} {target} (targets: {found:?})"),
                        put_targets(name, target_id, target, dlq, region),
                    )
                }
                (Some(_), Some(t)) => match t.dead_letter_config().and_then(|d| d.arn()) {
                    Some(arn) if Some(arn) == dlq => f.ok(format!("→ {what}, DLQ set")),
                    other => f.problem(
                        format!(
                            "its target has dead-letter queue {other:?}, not the stack's DLQ: \
                                 deliveries EventBridge gives up on are lost"
                        ),
                        put_targets(name, target_id, t.arn(), dlq, region),
                    ),
                },
            }
        }
        Err(e) => f.problem(
            format!("ListTargetsByRule {name}: {}", describe(&e)),
            "run verify with events:ListTargetsByRule",
        ),
    }
    (f.into_check(check_name), Some(arn))
}

fn put_targets(rule: &str, id: &str, arn: &str, dlq: Option<&str>, region: &str) -> String {
    format!(
        "aws events put-targets --rule {rule} --region {region} --targets \
         'Id={id},Arn={arn},DeadLetterConfig={{Arn={}}},RetryPolicy={{MaximumRetryAttempts=185,MaximumEventAgeInSeconds=3600}}'",
        dlq.unwrap_or("<DeadLetterQueueArn output>")
    )
}

async fn load_queue(aws: &Aws, name: &str) -> Result<Queue, String> {
    let url = match aws.sqs.get_queue_url().queue_name(name).send().await {
        Ok(out) => out.queue_url().unwrap_or_default().to_owned(),
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_queue_does_not_exist()) =>
        {
            return Err(format!("queue {name} does not exist in {}", aws.region));
        }
        Err(e) => return Err(format!("GetQueueUrl {name}: {}", describe(&e))),
    };
    let attributes: HashMap<String, String> = aws
        .sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::All)
        .send()
        .await
        .map_err(|e| format!("GetQueueAttributes {name}: {}", describe(&e)))?
        .attributes()
        .map(|a| {
            a.iter()
                .map(|(k, v)| (k.as_str().to_owned(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    let arn = attributes
        .get(QueueAttributeName::QueueArn.as_str())
        .cloned()
        .unwrap_or_default();
    Ok(Queue {
        name: name.to_owned(),
        arn,
        url,
        attributes,
    })
}

fn encryption(queue: &Queue, f: &mut Findings, region: &str) {
    let sse = queue.attribute(QueueAttributeName::SqsManagedSseEnabled) == Some("true");
    let kms = queue
        .attribute(QueueAttributeName::KmsMasterKeyId)
        .filter(|k| !k.is_empty());
    match (sse, kms) {
        (_, Some(key)) if key != "alias/aws/sqs" => f.ok(format!(
            "{} encrypted with KMS key {key} (the router role needs kms:GenerateDataKey and \
             kms:Decrypt on it; verify does not read key policies)",
            queue.name
        )),
        (_, Some(key)) => f.ok(format!("{} encrypted with KMS key {key}", queue.name)),
        (true, None) => f.ok(format!("{} encrypted (SSE-SQS)", queue.name)),
        (false, None) => f.problem(
            format!("{} is not encrypted at rest", queue.name),
            format!(
                "aws sqs set-queue-attributes --region {region} --queue-url {} --attributes SqsManagedSseEnabled=true",
                queue.url
            ),
        ),
    }
}

fn check_ingest_queue(queue: &Queue, function_timeout: Option<i32>, dlq: Option<&str>) -> Check {
    let mut f = Findings::default();
    let region = queue.arn.split(':').nth(3).unwrap_or_default().to_owned();
    encryption(queue, &mut f, &region);
    let visibility: Option<i32> = queue
        .attribute(QueueAttributeName::VisibilityTimeout)
        .and_then(|v| v.parse().ok());
    if let (Some(visibility), Some(timeout)) = (visibility, function_timeout) {
        if visibility >= 6 * timeout {
            f.ok(format!(
                "visibility {visibility} s ≥ 6 × function timeout {timeout} s"
            ));
        } else {
            f.problem(
                format!(
                    "visibility timeout {visibility} s is under 6 × the function timeout \
                     {timeout} s: records reappear while the router still works on them"
                ),
                format!(
                    "aws sqs set-queue-attributes --region {region} --queue-url {} --attributes VisibilityTimeout={}",
                    queue.url,
                    6 * timeout
                ),
            );
        }
    }
    let redrive: Option<Value> = queue
        .attribute(QueueAttributeName::RedrivePolicy)
        .and_then(|r| serde_json::from_str(r).ok());
    let target = redrive
        .as_ref()
        .and_then(|r| r["deadLetterTargetArn"].as_str());
    match (target, dlq) {
        (Some(t), Some(d)) if t == d => f.ok("redrives to the DLQ"),
        (found, _) => f.problem(
            format!(
                "redrive target is {found:?}, not the stack's DLQ: records that keep failing are \
                 dropped after the retention period"
            ),
            format!(
                "aws sqs set-queue-attributes --region {region} --queue-url {} --attributes \
                 '{{\"RedrivePolicy\":\"{{\\\"deadLetterTargetArn\\\":\\\"{}\\\",\\\"maxReceiveCount\\\":5}}\"}}'",
                queue.url,
                dlq.unwrap_or("<DeadLetterQueueArn>")
            ),
        ),
    }
    f.into_check("ingest-queue")
}

/// EventBridge may deliver from each of the stack's rules, and from no other rule.
fn events_may_send(
    name: &str,
    sid: &str,
    queue: &Queue,
    rules: &[String],
    base: &Base,
    region: &str,
) -> Check {
    let mut f = Findings::default();
    let fix = set_policy_command(
        region,
        &queue.url,
        &events_queue_policy(&queue.arn, rules, sid),
    );
    let Some(text) = queue.attribute(QueueAttributeName::Policy) else {
        f.problem(
            format!(
                "{} has no queue policy: EventBridge cannot deliver to it",
                queue.name
            ),
            fix,
        );
        return f.into_check(name);
    };
    let policy = match Policy::parse("queue policy", text) {
        Ok(p) => p,
        Err(e) => {
            f.problem(e, fix);
            return f.into_check(name);
        }
    };
    let decide = |source: &str, account: &str| {
        let context = [
            ("aws:SourceArn", source),
            ("aws:SourceAccount", account),
            ("aws:SecureTransport", "true"),
        ];
        evaluate(
            std::slice::from_ref(&policy),
            &Request {
                principal: Principal::Service("events.amazonaws.com"),
                action: "sqs:SendMessage",
                resource: &queue.arn,
                context: &context,
            },
        )
    };
    let refused: Vec<String> = rules
        .iter()
        .filter_map(|rule| {
            let d = decide(rule, &base.account);
            (!d.is_allowed()).then(|| format!("{} ({d})", arn_name_after_slash(rule)))
        })
        .collect();
    if refused.is_empty() {
        f.ok(format!(
            "EventBridge may deliver from the {} rules",
            rules.len()
        ));
    } else {
        f.problem(
            format!("EventBridge may not deliver from {}", refused.join(", ")),
            fix.clone(),
        );
    }
    let stranger = format!(
        "arn:{}:events:{region}:111111111111:rule/not-ours",
        base.partition
    );
    if decide(&stranger, "111111111111").is_allowed() {
        f.problem(
            "it lets any EventBridge rule send (no aws:SourceArn condition): anyone can inject \
             interruptions",
            fix,
        );
    } else {
        f.ok("no other rule may");
    }
    f.into_check(name)
}

fn arn_name_after_slash(arn: &str) -> &str {
    arn.rsplit('/').next().unwrap_or(arn)
}

async fn check_event_source_mapping(aws: &Aws, base: &Base, ingest: &Queue) -> Check {
    const NAME: &str = "event-source-mapping";
    let region = &aws.region;
    let function = base.output("FunctionName").unwrap_or_default();
    let mappings = match aws
        .lambda
        .list_event_source_mappings()
        .function_name(function)
        .send()
        .await
    {
        Ok(out) => out,
        Err(e) => {
            return fail(
                NAME,
                format!("ListEventSourceMappings {function}: {}", describe(&e)),
                "run verify with lambda:ListEventSourceMappings",
            );
        }
    };
    let Some(mapping) = mappings
        .event_source_mappings()
        .iter()
        .find(|m| m.event_source_arn() == Some(ingest.arn.as_str()))
    else {
        return fail(
            NAME,
            format!(
                "no event source mapping from {} to {function}: nothing reads the ingest queue",
                ingest.name
            ),
            format!(
                "aws lambda create-event-source-mapping --region {region} --function-name {function} \
                 --event-source-arn {} --batch-size 100 --maximum-batching-window-in-seconds 1 \
                 --function-response-types ReportBatchItemFailures",
                ingest.arn
            ),
        );
    };
    let uuid = mapping.uuid().unwrap_or_default();
    let mut f = Findings::default();
    match mapping.state() {
        Some("Enabled") => f.ok(format!("{uuid} Enabled")),
        state => f.problem(
            format!(
                "mapping {uuid} is {}: the ingest queue is not read",
                state.unwrap_or("in no state")
            ),
            format!(
                "aws lambda update-event-source-mapping --region {region} --uuid {uuid} --enabled"
            ),
        ),
    }
    if mapping
        .function_response_types()
        .contains(&FunctionResponseType::ReportBatchItemFailures)
    {
        f.ok("ReportBatchItemFailures");
    } else {
        f.problem(
            format!(
                "mapping {uuid} lacks ReportBatchItemFailures: Lambda ignores the router's \
                 batchItemFailures and deletes records it could not forward"
            ),
            format!(
                "aws lambda update-event-source-mapping --region {region} --uuid {uuid} \
                 --function-response-types ReportBatchItemFailures"
            ),
        );
    }
    f.into_check(NAME)
}

fn check_function(
    function: &aws_sdk_lambda::operation::get_function_configuration::GetFunctionConfigurationOutput,
    base: &Base,
) -> Check {
    let mut f = Findings::default();
    let name = function.function_name().unwrap_or_default();
    match function.state().map(|s| s.as_str()) {
        Some("Active") | None => f.ok(format!("{name} Active")),
        Some(state) => f.problem(
            format!(
                "{name} is {state}: {}",
                function.state_reason().unwrap_or("no reason given")
            ),
            "see the reason above; re-deploy the base stack once it is fixed",
        ),
    }
    if let Some(status) = function
        .last_update_status()
        .map(|s| s.as_str())
        .filter(|s| *s == "Failed")
    {
        f.problem(
            format!(
                "its last update {status}: {}",
                function
                    .last_update_status_reason()
                    .unwrap_or("no reason given")
            ),
            "fix the reason above and update the stack again",
        );
    }
    match (function.role(), base.output("RouterRoleArn")) {
        (Some(role), Some(expected)) if role == expected => f.ok("runs as the router role"),
        (role, expected) => f.problem(
            format!("runs as {role:?}, not the stack's RouterRoleArn {expected:?}"),
            "update the stack so the function uses RouterRole again",
        ),
    }
    f.into_check("function")
}

/// Validates the environment with the router's own parser, and against the stack.
fn check_environment(
    function: &aws_sdk_lambda::operation::get_function_configuration::GetFunctionConfigurationOutput,
    base: &Base,
    dlq_arn: Option<&str>,
) -> (Check, Option<Config>) {
    let vars = function
        .environment()
        .and_then(|e| e.variables())
        .cloned()
        .unwrap_or_default();
    let name = function.function_name().unwrap_or_default();
    let update = "update the stack's parameters (make deploy-base …), or fix the variable in the \
                  function's configuration";
    let config = match Config::from_lookup(|k| vars.get(k).cloned()) {
        Ok(config) => config,
        Err(e) => {
            // The error already says which variable, what is wrong and how to fix it.
            let check = fail(
                "function:environment",
                format!("{name}: {}={:?}: {}", e.var, e.value, e.problem),
                format!("{}; {update}", e.fix),
            );
            return (check, None);
        }
    };
    let mut f = Findings::default();
    f.ok("valid for the router");
    if let Some(prefix) = base.output("QueuePrefix") {
        if config.queue_names.prefix() == prefix {
            f.ok(format!("queues {prefix}<cluster>"));
        } else {
            f.problem(
                format!(
                    "QUEUE_NAME_TEMPLATE sends to {}<cluster> but the role may only send to the \
                     stack's QueuePrefix {prefix}*",
                    config.queue_names.prefix()
                ),
                update,
            );
        }
    }
    match (&config.dead_letter_queue_url, dlq_arn) {
        (Some(url), Some(arn)) if url.rsplit('/').next() == Some(arn_name(arn)) => {
            f.ok("dead-letters to the stack's DLQ")
        }
        (found, Some(arn)) => f.problem(
            format!(
                "DEAD_LETTER_QUEUE_URL is {found:?}, not the stack's DLQ {}: permanent failures \
                 {}",
                arn_name(arn),
                if found.is_some() {
                    "go elsewhere"
                } else {
                    "are retried until the ingest queue's redrive drops them there without a reason"
                }
            ),
            update,
        ),
        _ => {}
    }
    (f.into_check("function:environment"), Some(config))
}

async fn check_invoke_permission(
    aws: &Aws,
    function_arn: &str,
    rules: &[String],
    base: &Base,
) -> Check {
    const NAME: &str = "function:invoke-permission";
    let fix = "re-deploy the base stack in Direct mode (its <Rule>Permission resources), or aws \
               lambda add-permission --principal events.amazonaws.com --action lambda:InvokeFunction \
               --source-arn <rule ARN> --source-account <account> per rule";
    let policy = match aws
        .lambda
        .get_policy()
        .function_name(function_arn)
        .send()
        .await
    {
        Ok(out) => out.policy().unwrap_or_default().to_owned(),
        Err(e) => return fail(NAME, format!("no function policy: {}", describe(&e)), fix),
    };
    let policy = match Policy::parse("function policy", &policy) {
        Ok(p) => p,
        Err(e) => return fail(NAME, e, fix),
    };
    let refused: Vec<String> = rules
        .iter()
        .filter_map(|rule| {
            let context = [
                ("aws:SourceArn", rule.as_str()),
                ("aws:SourceAccount", base.account.as_str()),
            ];
            let d = evaluate(
                std::slice::from_ref(&policy),
                &Request {
                    principal: Principal::Service("events.amazonaws.com"),
                    action: "lambda:InvokeFunction",
                    resource: function_arn,
                    context: &context,
                },
            );
            (!d.is_allowed()).then(|| format!("{} ({d})", arn_name_after_slash(rule)))
        })
        .collect();
    if refused.is_empty() {
        let mut f = Findings::default();
        f.ok(format!(
            "EventBridge may invoke it from the {} rules",
            rules.len()
        ));
        f.into_check(NAME)
    } else {
        fail(
            NAME,
            format!("EventBridge may not invoke it from {}", refused.join(", ")),
            fix,
        )
    }
}

async fn check_on_failure_destination(
    aws: &Aws,
    function_arn: &str,
    dlq: Option<&str>,
    region: &str,
) -> Check {
    const NAME: &str = "function:on-failure-destination";
    let fix = format!(
        "aws lambda put-function-event-invoke-config --region {region} --function-name {function_arn} \
         --qualifier '$LATEST' --maximum-retry-attempts 2 --destination-config \
         'OnFailure={{Destination={}}}'",
        dlq.unwrap_or("<DeadLetterQueueArn>")
    );
    let found = aws
        .lambda
        .get_function_event_invoke_config()
        .function_name(function_arn)
        .qualifier("$LATEST")
        .send()
        .await;
    let destination = match &found {
        Ok(config) => config
            .destination_config()
            .and_then(|d| d.on_failure())
            .and_then(|o| o.destination()),
        Err(_) => None,
    };
    match (destination, dlq) {
        (Some(d), Some(q)) if d == q => {
            let mut f = Findings::default();
            f.ok("failed asynchronous invocations go to the DLQ");
            f.into_check(NAME)
        }
        (found, _) => fail(
            NAME,
            format!(
                "on-failure destination is {found:?}, not the stack's DLQ: an event the router \
                 fails after Lambda's retries is dropped"
            ),
            fix,
        ),
    }
}

/// The role's identity policies and permission boundary. Errors carry their own fix.
async fn load_role(aws: &Aws, arn: &str) -> Result<Role, (String, String)> {
    const READ: &str = "run verify with a principal allowed iam:GetRole, iam:ListRolePolicies, \
                        iam:GetRolePolicy, iam:ListAttachedRolePolicies, iam:GetPolicy and \
                        iam:GetPolicyVersion";
    const PARSE: &str = "IAM returned a policy document verify cannot read: check it with aws iam \
                         get-role-policy / get-policy-version";
    let read = |e: String| (e, READ.to_owned());
    let parse = |e: String| (e, PARSE.to_owned());
    let name = arn.rsplit('/').next().unwrap_or(arn);
    let iam = &aws.iam;
    let role = iam
        .get_role()
        .role_name(name)
        .send()
        .await
        .map_err(|e| read(format!("GetRole {name}: {}", describe(&e))))?;
    let mut identity = Vec::new();
    let inline = iam
        .list_role_policies()
        .role_name(name)
        .send()
        .await
        .map_err(|e| read(format!("ListRolePolicies {name}: {}", describe(&e))))?;
    for policy in inline.policy_names() {
        let doc = iam
            .get_role_policy()
            .role_name(name)
            .policy_name(policy)
            .send()
            .await
            .map_err(|e| read(format!("GetRolePolicy {name}/{policy}: {}", describe(&e))))?;
        identity.push(
            Policy::parse_iam(format!("inline policy {policy}"), doc.policy_document())
                .map_err(parse)?,
        );
    }
    let attached = iam
        .list_attached_role_policies()
        .role_name(name)
        .send()
        .await
        .map_err(|e| read(format!("ListAttachedRolePolicies {name}: {}", describe(&e))))?;
    for policy in attached.attached_policies() {
        if let Some(arn) = policy.policy_arn() {
            identity.push(
                managed_policy(aws, arn).await.map_err(
                    |(e, api)| {
                        if api { read(e) } else { parse(e) }
                    },
                )?,
            );
        }
    }
    let boundary = match role
        .role()
        .and_then(|r| r.permissions_boundary())
        .and_then(|b| b.permissions_boundary_arn())
    {
        Some(arn) => {
            Some(managed_policy(aws, arn).await.map_err(
                |(e, api)| {
                    if api { read(e) } else { parse(e) }
                },
            )?)
        }
        None => None,
    };
    Ok(Role {
        arn: arn.to_owned(),
        identity,
        boundary,
    })
}

/// A managed policy's default version; the flag says whether an API call (not parsing) failed.
async fn managed_policy(aws: &Aws, arn: &str) -> Result<Policy, (String, bool)> {
    let policy = aws
        .iam
        .get_policy()
        .policy_arn(arn)
        .send()
        .await
        .map_err(|e| (format!("GetPolicy {arn}: {}", describe(&e)), true))?;
    let version = policy
        .policy()
        .and_then(|p| p.default_version_id())
        .ok_or_else(|| (format!("{arn} has no default version"), false))?;
    let doc = aws
        .iam
        .get_policy_version()
        .policy_arn(arn)
        .version_id(version)
        .send()
        .await
        .map_err(|e| (format!("GetPolicyVersion {arn}: {}", describe(&e)), true))?;
    let text = doc
        .policy_version()
        .and_then(|v| v.document())
        .ok_or_else(|| (format!("{arn} {version} has no document"), false))?;
    Policy::parse_iam(
        format!("managed policy {}", arn_name_after_slash(arn)),
        text,
    )
    .map_err(|e| (e, false))
}

fn check_role(role: &Role, dlq: Option<&str>, ingest: Option<&str>) -> Check {
    let mut f = Findings::default();
    let name = arn_name_after_slash(&role.arn);
    let fix = format!(
        "restore base.yaml's inline policy interruption-router on role {name} (update the stack; \
         if the policy was edited by hand, put the template's document back with aws iam put-role-policy)"
    );
    let mut need = vec![("ec2:DescribeInstances", "*".to_owned())];
    if let Some(dlq) = dlq {
        need.push(("sqs:SendMessage", dlq.to_owned()));
    }
    if let Some(ingest) = ingest {
        for action in [
            "sqs:ReceiveMessage",
            "sqs:DeleteMessage",
            "sqs:GetQueueAttributes",
            "sqs:ChangeMessageVisibility",
        ] {
            need.push((action, ingest.to_owned()));
        }
    }
    let missing: Vec<String> = need
        .iter()
        .filter_map(|(action, resource)| {
            let d = role.may(action, resource);
            (!d.is_allowed()).then(|| format!("{action} on {} ({d})", arn_name(resource)))
        })
        .collect();
    if missing.is_empty() {
        f.ok(format!(
            "{name} may resolve instances, dead-letter{}",
            if ingest.is_some() {
                " and consume the ingest queue"
            } else {
                ""
            }
        ));
    } else {
        f.problem(
            format!("{name} may not {}", missing.join(", ")),
            fix.clone(),
        );
    }
    if let Some(ingest) = ingest {
        if role.may("sqs:SendMessage", ingest).is_allowed() {
            f.problem(
                format!(
                    "{name} may send to the ingest queue: an instance tagged with its name as a \
                     cluster would make the router feed itself"
                ),
                fix,
            );
        } else {
            f.ok("may not send to the ingest queue");
        }
    }
    f.into_check("router-role")
}

/// Clusters whose queues exist under the router's naming, leaving out the stack's own queues.
async fn discover_clusters(
    aws: &Aws,
    template: &QueueNameTemplate,
    own: &[&str],
) -> Result<Vec<String>, String> {
    let mut clusters = Vec::new();
    let mut pages = aws
        .sqs
        .list_queues()
        .queue_name_prefix(template.prefix())
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| format!("ListQueues: {}", describe(&e)))?;
        for url in page.queue_urls() {
            let name = url.rsplit('/').next().unwrap_or_default();
            if own.contains(&name) {
                continue;
            }
            if let Some(cluster) = cluster_of(template, name) {
                clusters.push(cluster);
            }
        }
    }
    clusters.sort();
    Ok(clusters)
}

/// The cluster a queue name belongs to under `template`, if any.
pub fn cluster_of(template: &QueueNameTemplate, queue: &str) -> Option<String> {
    let probe = template.queue_name("x")?;
    let suffix = &probe[template.prefix().len() + 1..];
    let cluster = queue
        .strip_prefix(template.prefix())?
        .strip_suffix(suffix)?;
    (template.queue_name(cluster).as_deref() == Some(queue)).then(|| cluster.to_owned())
}

async fn check_tenant(
    aws: &Aws,
    base: &Base,
    template: &QueueNameTemplate,
    cluster: &str,
    role_arn: Option<&str>,
    role: Option<&Role>,
    checks: &mut Vec<Check>,
) {
    let region = &aws.region;
    let prefix = format!("tenant:{cluster}");
    let Some(name) = template.queue_name(cluster) else {
        checks.push(fail(
            &format!("{prefix}:queue"),
            format!(
                "\"{cluster}\" cannot form an SQS queue name after {}",
                template.prefix()
            ),
            "cluster names used as queue names must be 1-80 letters, digits, '-' or '_' in total",
        ));
        return;
    };
    let deploy = format!(
        "deploy the tenant stack: make deploy-tenant CLUSTER={cluster} REGION={region} STACK_NAME={}",
        base.name
    );
    let arn = format!(
        "arn:{}:sqs:{region}:{}:{name}",
        base.partition, base.account
    );
    match load_queue(aws, &name).await {
        Err(problem) => checks.push(fail(
            &format!("{prefix}:queue"),
            format!("{problem}: the router dead-letters every event for {cluster}"),
            format!("{deploy} (its QueuePrefix must equal the base stack's)"),
        )),
        Ok(queue) => {
            let mut f = Findings::default();
            f.ok(format!("{} exists", queue.name));
            checks.push(f.into_check(format!("{prefix}:queue")));
            let mut f = Findings::default();
            encryption(&queue, &mut f, region);
            checks.push(f.into_check(format!("{prefix}:encryption")));
            if let Some(role_arn) = role_arn {
                checks.push(check_tenant_policy(
                    &queue, role_arn, base, region, &prefix, &deploy,
                ));
            }
        }
    }
    if let Some(role) = role {
        let d = role.may("sqs:SendMessage", &arn);
        let check = if d.is_allowed() {
            let mut f = Findings::default();
            f.ok(format!(
                "{} may send to {name} ({d})",
                arn_name_after_slash(&role.arn)
            ));
            f.into_check(format!("{prefix}:router-role"))
        } else {
            fail(
                &format!("{prefix}:router-role"),
                format!(
                    "{} may not sqs:SendMessage to {name}: {d}",
                    arn_name_after_slash(&role.arn)
                ),
                format!(
                    "the role may send to <QueuePrefix>* only: give the tenant stack the base \
                     stack's QueuePrefix ({}), or restore the role's SendToClusterQueues statement",
                    base.output("QueuePrefix")
                        .unwrap_or("see its QueuePrefix output")
                ),
            )
        };
        checks.push(check);
    }
}

/// The tenant queue's policy lets the router send, and denies every other sender.
fn check_tenant_policy(
    queue: &Queue,
    role_arn: &str,
    base: &Base,
    region: &str,
    prefix: &str,
    deploy: &str,
) -> Check {
    let name = format!("{prefix}:queue-policy");
    let restore = format!(
        "{deploy}; or restore the policy now: {}",
        set_policy_command(
            region,
            &queue.url,
            &tenant_queue_policy(&queue.arn, role_arn)
        )
    );
    let deploy = restore.as_str();
    let Some(text) = queue.attribute(QueueAttributeName::Policy) else {
        return fail(
            &name,
            format!(
                "{} has no queue policy: it does not grant the router, and any principal in the \
                 account with sqs:SendMessage can write a fake interruption",
                queue.name
            ),
            deploy,
        );
    };
    let policy = match Policy::parse("queue policy", text) {
        Ok(p) => p,
        Err(e) => return fail(&name, e, deploy),
    };
    let decide = |principal: &str| {
        let context = [
            ("aws:PrincipalArn", principal),
            ("aws:SecureTransport", "true"),
        ];
        evaluate(
            std::slice::from_ref(&policy),
            &Request {
                principal: Principal::Aws(principal),
                action: "sqs:SendMessage",
                resource: &queue.arn,
                context: &context,
            },
        )
    };
    let mut f = Findings::default();
    match decide(role_arn) {
        d @ Decision::Allowed { .. } => f.ok(format!("router {d}")),
        d => f.problem(
            format!(
                "the router role {role_arn} is {d} (a principal shown as AROA… is a deleted role)"
            ),
            format!(
                "the policy must name the router role: set the tenant stack's BaseStackName to {} \
                 (or RouterRoleArn to {role_arn}) and update it; {deploy}",
                base.name
            ),
        ),
    }
    let other = format!(
        "arn:{}:iam::{}:role/routerctl-verify-probe",
        base.partition, base.account
    );
    match decide(&other) {
        Decision::Denied { .. } => f.ok("other senders denied"),
        d => f.problem(
            format!(
                "other principals in the account are not denied ({d}): anyone with \
                 sqs:SendMessage can write a fake interruption and drain a node"
            ),
            deploy,
        ),
    }
    f.into_check(name)
}

/// base.yaml's IngestQueuePolicy / DeadLetterQueuePolicy for these ARNs.
pub fn events_queue_policy(queue_arn: &str, rule_arns: &[String], sid: &str) -> Value {
    json!({"Version": "2012-10-17", "Statement": [
        {"Sid": sid, "Effect": "Allow", "Principal": {"Service": "events.amazonaws.com"},
         "Action": "sqs:SendMessage", "Resource": queue_arn,
         "Condition": {"ArnEquals": {"aws:SourceArn": rule_arns}}},
        {"Sid": "DenyInsecureTransport", "Effect": "Deny", "Principal": "*", "Action": "sqs:*",
         "Resource": queue_arn, "Condition": {"Bool": {"aws:SecureTransport": "false"}}}]})
}

/// tenant.yaml's InterruptionQueuePolicy for these ARNs.
pub fn tenant_queue_policy(queue_arn: &str, router_role_arn: &str) -> Value {
    json!({"Version": "2012-10-17", "Statement": [
        {"Sid": "AllowRouterToSend", "Effect": "Allow", "Principal": {"AWS": router_role_arn},
         "Action": "sqs:SendMessage", "Resource": queue_arn},
        {"Sid": "DenySendersOtherThanRouter", "Effect": "Deny", "Principal": "*",
         "Action": "sqs:SendMessage", "Resource": queue_arn,
         "Condition": {"ArnNotEquals": {"aws:PrincipalArn": router_role_arn}}},
        {"Sid": "DenyInsecureTransport", "Effect": "Deny", "Principal": "*", "Action": "sqs:*",
         "Resource": queue_arn, "Condition": {"Bool": {"aws:SecureTransport": "false"}}}]})
}

/// A ready-to-paste command that sets `policy` on a queue.
fn set_policy_command(region: &str, url: &str, policy: &Value) -> String {
    let attributes = json!({"Policy": policy.to_string()}).to_string();
    format!(
        "aws sqs set-queue-attributes --region {region} --queue-url {url} --attributes '{attributes}'"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_compare_as_eventbridge_reads_them() {
        // Order inside a list does not matter to EventBridge.
        let shuffled = json!({"detail-type": ["EC2 Instance State-change Notification"],
            "source": ["aws.ec2"], "detail": {"state": ["terminated", "stopping", "shutting-down", "stopped"]}});
        assert_eq!(
            normalized(&shuffled),
            normalized(&Kind::StateChange.event_pattern())
        );
        let narrower = json!({"source": ["aws.ec2"], "detail-type": ["EC2 Instance State-change Notification"],
            "detail": {"state": ["terminated"]}});
        assert_ne!(
            normalized(&narrower),
            normalized(&Kind::StateChange.event_pattern())
        );
    }

    #[test]
    fn every_rule_pattern_is_in_the_compiled_in_template() {
        // base.yaml writes each pattern in flow style; the router's kinds must all appear there.
        for (logical, kind) in RULES {
            let section = crate::stacks::BASE_TEMPLATE
                .split(&format!("  {logical}:\n"))
                .nth(1)
                .unwrap_or_else(|| panic!("{logical} not in base.yaml"));
            assert!(
                section.contains(&format!("detail-type: [{}]", kind.detail_type())),
                "{logical}"
            );
            assert!(
                section.contains(&format!("source: [{}]", kind.source())),
                "{logical}"
            );
        }
    }

    #[test]
    fn tenant_queue_names_map_back_to_clusters() {
        let t = QueueNameTemplate::parse("karpenter-{cluster}").unwrap();
        assert_eq!(cluster_of(&t, "karpenter-alpha").as_deref(), Some("alpha"));
        assert_eq!(cluster_of(&t, "other-alpha"), None);
        assert_eq!(cluster_of(&t, "karpenter-"), None);
        let t = QueueNameTemplate::parse("{cluster}_interruptions").unwrap();
        assert_eq!(
            cluster_of(&t, "beta_interruptions").as_deref(),
            Some("beta")
        );
        assert_eq!(cluster_of(&t, "beta_other"), None);
    }

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
