//! `dashboard`, `alarm:<name>` and `function:metrics`: whether anyone would notice the router
//! failing. The stack's dashboard charts the router's metrics; each alarm of [`ALARMS`] exists and
//! watches what base.yaml has it watch, for this function, in the namespace the function writes to
//! (METRICS_NAMESPACE); and the router's metric documents really reach its log group, which is
//! where CloudWatch turns them into metrics (Lambda's log-level filter drops a line it reads as
//! below the function's log level).
//!
//! An alarm is described once, as an [`AlarmSpec`]; one piece of code finds it, checks it, and
//! says how to put it back (and the sandbox creates it from the same spec, where moto skips the
//! template's alarms).

use crate::deployment::Base;
use std::time::{Duration, SystemTime};

use router_core::config::{Config, DEFAULT_METRICS_NAMESPACE};

use super::report::{Check, fail, pass};
use crate::{
    check::{self, Expect},
    cloud::{Cloud, missing},
};

mod alarms;

pub use alarms::MISSING_EXPRESSION;
use alarms::check_alarm;

/// What an alarm of base.yaml watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watches {
    /// One router metric: its Sum over a minute is at least 1.
    Count(&'static str),
    /// The router's metric documents (SampleCount of `Received`) against Lambda's own count of
    /// invocations, over five minutes: more than half missing.
    DocumentsAgainstInvocations,
}

/// One alarm of base.yaml.
#[derive(Debug, Clone, Copy)]
pub struct AlarmSpec {
    /// Its logical id (CloudFormation names it `<stack>-<logical id>-<suffix>`).
    pub logical: &'static str,
    pub watches: Watches,
    /// What goes unnoticed without it.
    pub unnoticed: &'static str,
    /// Only a router that assumes spoke roles has it (and emits its metric): one serving other
    /// accounts, or with a central bus (its own account's other regions).
    pub serving_others_only: bool,
}

pub const LATE_FORWARDS_METRIC: &str = "LateForwards";
pub const LATE_FORWARDS_ALARM: &str = "LateForwardsAlarm";

/// The alarms on the router's own metrics.
pub const ALARMS: [AlarmSpec; 4] = [
    AlarmSpec {
        logical: LATE_FORWARDS_ALARM,
        watches: Watches::Count(LATE_FORWARDS_METRIC),
        unnoticed: "events forwarded too late for Karpenter to drain in time go unnoticed",
        serving_others_only: false,
    },
    AlarmSpec {
        logical: "AccessDeniedAlarm",
        watches: Watches::Count("AccessDenied"),
        unnoticed: "a cluster queue that refuses the router goes unnoticed until someone reads the DLQ",
        serving_others_only: false,
    },
    AlarmSpec {
        logical: "AccountUnreachableAlarm",
        watches: Watches::Count("AccountUnreachable"),
        unnoticed: "a member account whose spoke role cannot be assumed goes unnoticed",
        serving_others_only: true,
    },
    AlarmSpec {
        logical: "RouterMetricsMissingAlarm",
        watches: Watches::DocumentsAgainstInvocations,
        unnoticed: "metric documents lost (filtered out of the logs, or never written) leave every \
                    router metric, the dashboard and the alarms on them silent while the router fails",
        serving_others_only: false,
    },
];

/// Where the router's metrics are, and who is told when an alarm fires.
pub struct Monitored<'a> {
    pub namespace: &'a str,
    pub function: &'a str,
    pub topic: Option<&'a str>,
}

pub(super) async fn check(
    aws: &impl Cloud,
    base: &Base,
    config: Option<&Config>,
    checks: &mut Vec<Check>,
) {
    let namespace = config.map_or(DEFAULT_METRICS_NAMESPACE, |c| c.metrics_namespace.as_str());
    checks.push(check_dashboard(aws, base, namespace).await);
    let serves_others = base.assumes_spoke_roles();
    let Some(function) = base.output("FunctionName") else {
        checks.push(fail(
            "alarms",
            "the stack has no FunctionName output, so the alarms' dimension is unknown",
            "update the stack with this project's cloudformation/base.yaml",
        ));
        return;
    };
    let monitored = Monitored {
        namespace,
        function,
        topic: base.alarm_topic(),
    };
    for spec in ALARMS
        .iter()
        .filter(|s| serves_others || !s.serving_others_only)
    {
        checks.push(check_alarm(aws, base, spec, &monitored).await);
    }
    checks.push(check_metric_documents(aws, base).await);
}

async fn check_dashboard(aws: &impl Cloud, base: &Base, namespace: &str) -> Check {
    const NAME: &str = "dashboard";
    let restore = format!(
        "update the stack {} with this project's cloudformation/base.yaml (RouterDashboard); a \
         dashboard deleted by hand comes back only by deleting and re-deploying the stack, or with \
         aws cloudwatch put-dashboard --dashboard-name {} --dashboard-body <RouterDashboard's body>",
        base.name, base.name
    );
    // Where: the stack's dashboard.
    let looked = match base.output("DashboardName") {
        None => Err("the stack has no DashboardName output".to_owned()),
        Some(name) => dashboard_body(aws, name).await.map(|body| (name, body)),
    };
    let (name, body) = match &looked {
        Ok(found) => found,
        Err(_) => return check::evaluate(NAME, [Expect::lookup(&looked, restore)]),
    };
    let function = base.output("FunctionName").unwrap_or_default();

    // Expect → what was found → the fix.
    check::evaluate(
        NAME,
        [
            Expect::found(format!("{name} exists")),
            Expect::that(
                body.contains(namespace) && body.contains(function),
                format!("charts {namespace} metrics of {function}"),
            )
            .otherwise(
                format!(
                    "its widgets do not chart the router's metrics ({namespace}, FunctionName \
                     {function}): it was edited, or the function or METRICS_NAMESPACE changed \
                     outside the stack"
                ),
                restore.clone(),
            ),
        ],
    )
}

/// The body of the dashboard `name`; a problem text when it cannot be read (a deleted one says so).
async fn dashboard_body(aws: &impl Cloud, name: &str) -> Result<String, String> {
    aws.dashboard(name).await.map_err(|e| {
        if e.code == missing::RESOURCE {
            format!("dashboard {name} does not exist (deleted outside CloudFormation)")
        } else {
            format!("GetDashboard {name}: {e}")
        }
    })
}

/// How far back `function:metrics` compares invocations with metric documents.
const METRICS_WINDOW: Duration = Duration::from_secs(3600);

/// `function:metrics`: when Lambda counted invocations in the last hour, the function's log group
/// holds metric documents from that hour. Without them every router metric is silent: Lambda's
/// log-level filter drops documents without a `level` it keeps (a router build older than this
/// project's fix, at LogLevel WARN or above), or the function cannot write its logs.
async fn check_metric_documents(aws: &impl Cloud, base: &Base) -> Check {
    const NAME: &str = "function:metrics";
    let (Some(function), Some(group)) = (
        base.output("FunctionName"),
        base.resources.get("RouterLogGroup"),
    ) else {
        return fail(
            NAME,
            "the stack has no FunctionName output or RouterLogGroup",
            "update the stack with this project's cloudformation/base.yaml",
        );
    };
    // A minute past now too: a datapoint stamped as this runs is not left out.
    let now = aws.now() + Duration::from_secs(60);
    let since = now - METRICS_WINDOW;
    // Where: Lambda's count of invocations, then the documents in the log group.
    let invocations = count_invocations(aws, function, since, now).await;
    let invoked = match &invocations {
        Ok(count) => *count,
        Err(_) => {
            return check::evaluate(
                NAME,
                [Expect::lookup(
                    &invocations,
                    "run verify with cloudwatch:GetMetricStatistics",
                )],
            );
        }
    };
    if invoked < 1.0 {
        return pass(
            NAME,
            "no invocations in the last hour: no metric documents expected",
        );
    }
    // Every document names its directive list; a quoted term matches it in AWS and in moto.
    let documents = aws
        .log_matches(group, "\"CloudWatchMetrics\"", since, now)
        .await
        .map_err(|e| format!("FilterLogEvents {group}: {e}"));
    let found = documents.as_ref().is_ok_and(|found| *found);
    let level = base.parameter("LogLevel").unwrap_or("INFO");

    // Expect → what was found → the fix.
    check::evaluate(
        NAME,
        [
            Expect::lookup(&documents, "run verify with logs:FilterLogEvents"),
            Expect::that(
                found,
                format!(
                    "{invoked:.0} invocations in the last hour, and metric documents in {group}"
                ),
            )
            .otherwise(
                format!(
                    "Lambda counted {invoked:.0} invocations of {function} in the last hour but \
                     {group} holds no metric document from it: every router metric, the dashboard \
                     and the alarms on them are blind. At LogLevel={level}, Lambda's log filter \
                     drops a document without a level it keeps (router builds before the fix), or \
                     the function cannot write its logs"
                ),
                format!(
                    "deploy the current router build (make package, then make deploy-base), which \
                     writes each document at a level Lambda keeps; until then set LogLevel=INFO: \
                     make deploy-base ... LOG_LEVEL=INFO (stack {})",
                    base.name
                ),
            ),
        ],
    )
}

/// Lambda's count of the function's invocations between `since` and `now`.
async fn count_invocations(
    aws: &impl Cloud,
    function: &str,
    since: SystemTime,
    now: SystemTime,
) -> Result<f64, String> {
    aws.metric_sum("AWS/Lambda", "Invocations", function, since, now)
        .await
        .map_err(|e| format!("GetMetricStatistics AWS/Lambda Invocations: {e}"))
}
