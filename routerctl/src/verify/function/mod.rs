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
    report::{Check, Mode, fail},
    role::{Role, load_role},
    stack::Base,
};
use crate::check::{self, Expect};
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
    let name = function.function_name().unwrap_or_default();
    let state = function.state().map(|s| s.as_str());
    let update = function.last_update_status().map(|s| s.as_str());
    let (role, expected) = (function.role(), base.output("RouterRoleArn"));
    let reason = |reason: Option<&str>| reason.unwrap_or("no reason given").to_owned();

    // Expect → what was found → the fix.
    check::evaluate(
        "function",
        [
            Expect::that(
                matches!(state, Some("Active") | None),
                format!("{name} Active"),
            )
            .otherwise(
                format!(
                    "{name} is {}: {}",
                    state.unwrap_or_default(),
                    reason(function.state_reason())
                ),
                "see the reason above; re-deploy the base stack once it is fixed",
            ),
            Expect::quietly(update != Some("Failed")).otherwise(
                format!(
                    "its last update {}: {}",
                    update.unwrap_or_default(),
                    reason(function.last_update_status_reason())
                ),
                "fix the reason above and update the stack again",
            ),
            Expect::that(
                role.is_some() && role == expected,
                "runs as the router role",
            )
            .otherwise(
                format!("runs as {role:?}, not the stack's RouterRoleArn {expected:?}"),
                "update the stack so the function uses RouterRole again",
            ),
        ],
    )
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
    let sends_to = config.queue_names.prefix();
    let dead_letters = config.dead_letter_queue_url.as_deref();

    // Expect → what was found → the fix.
    let mut rows = vec![Expect::found("valid for the router")];
    if let Some(prefix) = base.output("QueuePrefix") {
        rows.push(
            Expect::that(sends_to == prefix, format!("queues {prefix}<cluster>")).otherwise(
                format!(
                    "QUEUE_NAME_TEMPLATE sends to {sends_to}<cluster> but the role may only send \
                     to the stack's QueuePrefix {prefix}*"
                ),
                update,
            ),
        );
    }
    if let Some(arn) = dlq_arn {
        let to_dlq = dead_letters.is_some_and(|url| url.rsplit('/').next() == Some(arn_name(arn)));
        rows.push(
            Expect::that(to_dlq, "dead-letters to the stack's DLQ").otherwise(
                format!(
                    "DEAD_LETTER_QUEUE_URL is {dead_letters:?}, not the stack's DLQ {}: permanent \
                     failures {}",
                    arn_name(arn),
                    if dead_letters.is_some() {
                        "go elsewhere"
                    } else {
                        "are retried until the ingest queue's redrive drops them there without a \
                         reason"
                    }
                ),
                update,
            ),
        );
    }
    (check::evaluate("function:environment", rows), Some(config))
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
    // Where: the function's policy.
    let policy = aws
        .lambda
        .get_policy()
        .function_name(function_arn)
        .send()
        .await
        .map_err(|e| format!("no function policy: {}", describe(&e)))
        .and_then(|out| Policy::parse("function policy", out.policy().unwrap_or_default()));
    let policy = match &policy {
        Ok(policy) => policy,
        Err(_) => return check::evaluate(NAME, [Expect::lookup(&policy, fix)]),
    };
    let refused: Vec<String> = rules
        .iter()
        .filter_map(|rule| {
            let context = [
                ("aws:SourceArn", rule.as_str()),
                ("aws:SourceAccount", base.account.as_str()),
            ];
            let d = evaluate(
                std::slice::from_ref(policy),
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
    // A function policy cannot Deny (AddPermission only grants), so the function's trust boundary
    // is its policy's grants plus the account's identity policies: report any grant that is not
    // one of the rules. Whatever reaches the function is routed as an interruption.
    let others = other_invokers(policy, rules);

    // Expect → what was found → the fix.
    let mut rows = vec![
        Expect::that(
            refused.is_empty(),
            format!("EventBridge may invoke it from the {} rules", rules.len()),
        )
        .otherwise(
            format!("EventBridge may not invoke it from {}", refused.join(", ")),
            fix,
        ),
    ];
    if others.is_empty() {
        rows.push(Expect::found(
            "no other principal may invoke it through its policy",
        ));
    }
    rows.extend(others.into_iter().map(|(sid, who)| {
        Expect::problem(
            format!(
                "statement {sid} lets {who} invoke it: anything it sends is routed as an \
                 interruption, and a made-up one drains a healthy node"
            ),
            format!(
                "aws lambda remove-permission --region {} --function-name {function_arn} \
                 --statement-id {sid}",
                aws.region
            ),
        )
    }));
    check::evaluate(NAME, rows)
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
    // Where: the function's asynchronous invocation configuration (none: no destination).
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

    // Expect → what was found → the fix.
    check::evaluate(
        NAME,
        [Expect::that(
            destination.is_some() && destination == dlq,
            "failed asynchronous invocations go to the DLQ",
        )
        .otherwise(
            format!(
                "on-failure destination is {destination:?}, not the stack's DLQ: an event the \
                 router fails after Lambda's retries is dropped"
            ),
            fix,
        )],
    )
}
