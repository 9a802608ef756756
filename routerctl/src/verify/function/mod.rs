//! `function`, `function:environment`, `router-role`, `router-role:assume-spoke-roles`: the router
//! function is Active and runs as the stack's role, its environment passes the router's own
//! [`Config::from_lookup`] and agrees with the stack, and the role may do what the router does
//! (resolve instances both ways, read tenant records, dead-letter, consume the ingest queue and
//! hand records back, assume the served accounts' spoke roles) and may not feed the ingest queue.

mod router_role;

use crate::deployment::{Base, Role};
use router_core::config::Config;

use super::report::{Check, fail};
use crate::{
    check::{self, Expect},
    cloud::{self, Cloud, role_fix},
};
use aws_model::arn::arn_name;

use self::router_role::{check_assume_spoke_roles, check_router_role};
/// The function as Lambda describes it, or why it could not be read.
pub(super) type Function = Result<cloud::Function, String>;

pub(super) async fn load(aws: &impl Cloud, base: &Base) -> Function {
    match base.output("FunctionName") {
        Some(name) => aws
            .function(name)
            .await
            .map_err(|e| format!("function {name}: {e}")),
        None => Err("the stack has no FunctionName output".to_owned()),
    }
}

/// The function and its environment; the router's configuration when its environment is valid.
pub(super) fn check(base: &Base, function: &Function, checks: &mut Vec<Check>) -> Option<Config> {
    let dlq_arn = base.output("DeadLetterQueueArn");
    match function {
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
    }
}

/// The router role's permissions; the role, read once, for the tenant checks.
pub(super) async fn check_role(
    aws: &impl Cloud,
    base: &Base,
    config: Option<&Config>,
    checks: &mut Vec<Check>,
) -> Option<Role> {
    let Some(arn) = base.output("RouterRoleArn") else {
        checks.push(fail(
            "router-role",
            "the stack has no RouterRoleArn output",
            "update the stack with this project's cloudformation/base.yaml",
        ));
        return None;
    };
    match aws.role(arn).await {
        Ok(role) => {
            let ingest = base.output("IngestQueueArn");
            checks.push(check_router_role(
                &role,
                base,
                aws.region(),
                base.output("DeadLetterQueueArn"),
                ingest,
            ));
            if let Some(check) = config.and_then(|c| check_assume_spoke_roles(&role, c, base)) {
                checks.push(check);
            }
            Some(role)
        }
        Err(e) => {
            checks.push(fail("router-role", e.to_string(), role_fix(&e)));
            None
        }
    }
}

fn check_function(function: &cloud::Function, base: &Base) -> Check {
    let name = function.name.as_str();
    let state = function.state.as_deref();
    let update = function.last_update_status.as_deref();
    let (role, expected) = (function.role.as_deref(), base.output("RouterRoleArn"));
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
                    reason(function.state_reason.as_deref())
                ),
                "see the reason above; re-deploy the base stack once it is fixed",
            ),
            Expect::quietly(update != Some("Failed")).otherwise(
                format!(
                    "its last update {}: {}",
                    update.unwrap_or_default(),
                    reason(function.last_update_status_reason.as_deref())
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
    function: &cloud::Function,
    base: &Base,
    dlq_arn: Option<&str>,
) -> (Check, Option<Config>) {
    let vars = &function.environment;
    let name = function.name.as_str();
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
