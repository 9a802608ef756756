//! `function`, `function:environment`, `function:invoke-permission`,
//! `function:on-failure-destination`, `router-role`, `router-role:assume-spoke-roles`: the router
//! function is Active and runs as the stack's role, its environment passes the router's own
//! [`Config::from_lookup`] and agrees with the stack, Direct mode's invoke permissions and
//! on-failure destination are in place, and the role may do what the router does (resolve
//! instances both ways, dead-letter, consume the ingest queue and hand records back, assume the
//! served accounts' spoke roles) and may not feed the ingest queue.

mod router_role;
#[cfg(test)]
mod tests;

use aws_sdk_lambda::operation::get_function_configuration::GetFunctionConfigurationOutput;
use interruption_router::config::Config;

use super::{
    report::{Check, Findings, Mode, fail, pass},
    role::{Role, load_role},
    stack::Base,
};
use aws_model::{
    aws::{Aws, arn_name, arn_name_after_slash, describe},
    policy::{Policy, Principal, Request, evaluate, glob, strings},
};

use self::router_role::{check_assume_spoke_roles, check_router_role};
/// The function as Lambda describes it, or why it could not be read.
pub(super) type Function = Result<GetFunctionConfigurationOutput, String>;

pub(super) async fn load(aws: &Aws, base: &Base) -> Function {
    match base.output("FunctionName") {
        Some(name) => aws
            .lambda
            .get_function_configuration()
            .function_name(name)
            .send()
            .await
            .map_err(|e| format!("function {name}: {}", describe(&e))),
        None => Err("the stack has no FunctionName output".to_owned()),
    }
}

/// The function, its environment and (Direct mode) how rules reach it; the router's configuration
/// when its environment is valid.
pub(super) async fn check(
    aws: &Aws,
    base: &Base,
    function: &Function,
    rule_arns: &[String],
    checks: &mut Vec<Check>,
) -> Option<Config> {
    let dlq_arn = base.output("DeadLetterQueueArn");
    let config = match function {
        Ok(f) => {
            checks.push(check_function(f, base));
            let (check, config) = check_environment(f, base, dlq_arn);
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
    let function_arn = function.as_ref().ok().and_then(|f| f.function_arn());
    if let (Mode::Direct, Some(arn)) = (base.mode, function_arn) {
        checks.push(check_invoke_permission(aws, arn, rule_arns, base).await);
        checks.push(check_on_failure_destination(aws, arn, dlq_arn, &aws.region).await);
    }
    config
}

/// The router role's permissions; the role, read once, for the tenant checks.
pub(super) async fn check_role(
    aws: &Aws,
    base: &Base,
    config: Option<&Config>,
    checks: &mut Vec<Check>,
) -> Option<Role> {
    let role = match base.output("RouterRoleArn") {
        Some(arn) => load_role(aws, arn).await,
        None => Err((
            "the stack has no RouterRoleArn output".to_owned(),
            "update the stack with this project's cloudformation/base.yaml".to_owned(),
        )),
    };
    match role {
        Ok(role) => {
            let ingest = base
                .output("IngestQueueArn")
                .filter(|_| base.mode == Mode::Queue);
            checks.push(check_router_role(
                &role,
                base.output("DeadLetterQueueArn"),
                ingest,
            ));
            if let Some(check) = config.and_then(|c| check_assume_spoke_roles(&role, c, base)) {
                checks.push(check);
            }
            Some(role)
        }
        Err((problem, fix)) => {
            checks.push(fail("router-role", problem, fix));
            None
        }
    }
}

fn check_function(function: &GetFunctionConfigurationOutput, base: &Base) -> Check {
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
    function: &GetFunctionConfigurationOutput,
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
    let mut f = Findings::default();
    if refused.is_empty() {
        f.ok(format!(
            "EventBridge may invoke it from the {} rules",
            rules.len()
        ));
    } else {
        f.problem(
            format!("EventBridge may not invoke it from {}", refused.join(", ")),
            fix,
        );
    }
    // A function policy cannot Deny (AddPermission only grants), so the function's trust boundary
    // is its policy's grants plus the account's identity policies: report any grant that is not
    // one of the rules. Whatever reaches the function is routed as an interruption.
    let others = other_invokers(&policy, rules);
    if others.is_empty() {
        f.ok("no other principal may invoke it through its policy");
    } else {
        for (sid, who) in others {
            f.problem(
                format!(
                    "statement {sid} lets {who} invoke it: anything it sends is routed as an \
                     interruption, and a made-up one drains a healthy node"
                ),
                format!(
                    "aws lambda remove-permission --region {} --function-name {function_arn} \
                     --statement-id {sid}",
                    aws.region
                ),
            );
        }
    }
    f.into_check(NAME)
}

/// The grants of a function policy that let someone other than EventBridge, acting for one of
/// `rules`, invoke the function: (statement id, who).
fn other_invokers(policy: &Policy, rules: &[String]) -> Vec<(String, String)> {
    let mut others = Vec::new();
    for (n, statement) in policy.statements().iter().enumerate() {
        if statement["Effect"] != "Allow" {
            continue;
        }
        let invokes = strings(&statement["Action"])
            .iter()
            .any(|a| glob(&a.to_ascii_lowercase(), "lambda:invokefunction"));
        if !invokes {
            continue;
        }
        let sid = statement["Sid"]
            .as_str()
            .map_or_else(|| format!("#{}", n + 1), str::to_owned);
        let principal = &statement["Principal"];
        let services = strings(&principal["Service"]);
        let only_events = principal.is_object()
            && principal.as_object().is_some_and(|p| p.len() == 1)
            && services.iter().all(|s| s == "events.amazonaws.com")
            && !services.is_empty();
        // The rule it is pinned to, under any ARN operator and either key casing.
        let sources: Vec<String> = statement["Condition"]
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(op, _)| op.starts_with("Arn") || op.starts_with("StringEquals"))
            .flat_map(|(_, keys)| keys.as_object().into_iter().flatten())
            .filter(|(key, _)| key.eq_ignore_ascii_case("aws:SourceArn"))
            .flat_map(|(_, values)| strings(values))
            .collect();
        let pinned = !sources.is_empty() && sources.iter().all(|s| rules.contains(s));
        if !(only_events && pinned) {
            let who = if only_events {
                format!("EventBridge acting for {sources:?} (not one of the stack's rules)")
            } else {
                principal.to_string()
            };
            others.push((sid, who));
        }
    }
    others
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
        (Some(d), Some(q)) if d == q => pass(NAME, "failed asynchronous invocations go to the DLQ"),
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
