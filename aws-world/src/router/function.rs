//! The router function of a world's base stack, run as the router itself: this release's handler
//! (router-core's `Router`), configured from the environment the stack gives the function, acting
//! as the role the stack gives it, through [`WorldAws`]. So a test of the operator's half (adopt's
//! probe, simulate's deliveries, insights' records) meets the router's own decisions, not a
//! stand-in's. What the router prints (its EMF documents and interruption records) goes to the
//! function's log group, as Lambda sends it.

use std::{
    sync::Arc,
    time::{Duration, UNIX_EPOCH},
};

use serde_json::{json, value::RawValue};

use super::WorldAws;
use crate::{Invoked, World};
use router_core::{
    aws::Aws,
    config::Config,
    handler::{Invocation, Router},
};

/// Lambda's default timeout, when the function names none.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3);

/// Makes function `name` of this view's account and region (a base stack's) answer each
/// invocation as the router does: one execution environment, built now from the function's
/// environment and role, kept for every invocation (its caches warm). Panics if the function or
/// its configuration is not what base.yaml makes: a test's set-up is wrong, not the router.
pub fn run_router(world: &World, name: &str) {
    let function = world
        .read(|_, site| site.functions.get(name).cloned())
        .unwrap_or_else(|| panic!("no function {name}"));
    let config = Config::from_lookup(|var| function.environment.get(var).cloned())
        .unwrap_or_else(|e| panic!("function {name} is not configured as the router: {e}"));
    let role = function
        .role
        .clone()
        .unwrap_or_else(|| panic!("function {name} has no role"));
    let aws = Arc::new(WorldAws::new(world, &role, &[]));
    let router = Arc::new(Router::new(
        &config,
        aws.clone(),
        world.region(),
        name.to_owned(),
    ));
    let arn = format!(
        "arn:aws:lambda:{}:{}:function:{name}",
        world.region(),
        world.account()
    );
    let timeout = function
        .timeout
        .map_or(DEFAULT_TIMEOUT, |t| Duration::from_secs(t.max(1) as u64));
    let log_group = function.log_group.clone();
    let view = world.clone();
    world.function_async(name, move |payload| {
        let (router, aws, arn) = (router.clone(), aws.clone(), arn.clone());
        let (world, log_group) = (view.clone(), log_group.clone());
        Box::pin(async move {
            let Ok(payload) = RawValue::from_string(payload) else {
                return Invoked {
                    function_error: Some("Unhandled".into()),
                    payload: json!({"errorType": "Runtime.InvalidPayload"})
                        .to_string()
                        .into_bytes(),
                };
            };
            let now_ms = aws
                .now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_millis() as u64;
            let invocation = Invocation {
                request_id: "world",
                function_arn: &arn,
                deadline_ms: now_ms + timeout.as_millis() as u64,
            };
            let answered = router.invoke(&payload, invocation).await;
            // What Lambda sends to the function's log group: its EMF documents and records.
            if let Some(group) = &log_group {
                for line in router.printed(&answered) {
                    world.log(group, &line);
                }
            }
            match answered.response {
                Ok(answer) => Invoked {
                    function_error: None,
                    payload: answer.to_string().into_bytes(),
                },
                Err(error) => Invoked {
                    function_error: Some("Unhandled".into()),
                    payload: json!({"errorType": error.error_type(),
                                    "errorMessage": error.to_string()})
                    .to_string()
                    .into_bytes(),
                },
            }
        })
    });
}
