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

use std::time::{Duration, SystemTime};

use aws_sdk_cloudwatch::{
    error::ProvideErrorMetadata,
    primitives::DateTime,
    types::{
        ComparisonOperator, Dimension, Metric, MetricAlarm, MetricDataQuery, MetricStat, Statistic,
    },
};
use interruption_router::config::{Config, DEFAULT_METRICS_NAMESPACE};
use serde_json::json;

use super::{
    report::{Check, fail, pass},
    stack::Base,
};
use crate::check::{self, Expect};
use aws_model::aws::{Aws, describe};

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
    aws: &Aws,
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

async fn check_dashboard(aws: &Aws, base: &Base, namespace: &str) -> Check {
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
async fn dashboard_body(aws: &Aws, name: &str) -> Result<String, String> {
    match aws
        .cloudwatch
        .get_dashboard()
        .dashboard_name(name)
        .send()
        .await
    {
        Ok(d) => Ok(d.dashboard_body().unwrap_or_default().to_owned()),
        Err(e) => Err(
            if e.as_service_error().is_some_and(|s| {
                s.is_dashboard_not_found_error() || s.code() == Some("ResourceNotFound")
            }) {
                format!("dashboard {name} does not exist (deleted outside CloudFormation)")
            } else {
                format!("GetDashboard {name}: {}", describe(&e))
            },
        ),
    }
}

/// The dimension value of `name` on a metric's dimensions, if it has one.
fn dimension<'a>(dimensions: &'a [Dimension], name: &str) -> Option<&'a str> {
    dimensions
        .iter()
        .find(|d| d.name() == Some(name))
        .and_then(Dimension::value)
}

impl AlarmSpec {
    /// Whether `alarm` watches what this spec says, for this function; what it watches otherwise.
    fn watched_by(&self, alarm: &MetricAlarm, m: &Monitored<'_>) -> Result<(), String> {
        match self.watches {
            Watches::Count(metric) => {
                let found = (
                    alarm.namespace().unwrap_or("no namespace"),
                    alarm.metric_name().unwrap_or("no metric"),
                    dimension(alarm.dimensions(), "FunctionName").unwrap_or("no function"),
                );
                if found == (m.namespace, metric, m.function) {
                    Ok(())
                } else {
                    Err(format!("{} {} of {}", found.0, found.1, found.2))
                }
            }
            Watches::DocumentsAgainstInvocations => {
                let stats: Vec<(&str, &str, &str, &str)> = alarm
                    .metrics()
                    .iter()
                    .filter_map(|q| q.metric_stat())
                    .filter_map(|s| {
                        let metric = s.metric()?;
                        Some((
                            metric.namespace().unwrap_or_default(),
                            metric.metric_name().unwrap_or_default(),
                            dimension(metric.dimensions(), "FunctionName").unwrap_or_default(),
                            s.stat().unwrap_or_default(),
                        ))
                    })
                    .collect();
                let invocations = ("AWS/Lambda", "Invocations", m.function, "Sum");
                let documents = (m.namespace, "Received", m.function, "SampleCount");
                if stats.contains(&invocations) && stats.contains(&documents) {
                    Ok(())
                } else {
                    Err(format!("{stats:?}"))
                }
            }
        }
    }

    fn describes(&self, m: &Monitored<'_>) -> String {
        match self.watches {
            Watches::Count(metric) => format!("{} {metric} of {}", m.namespace, m.function),
            Watches::DocumentsAgainstInvocations => format!(
                "{}'s metric documents ({} Received, SampleCount) against its AWS/Lambda Invocations",
                m.function, m.namespace
            ),
        }
    }

    /// The alarm as base.yaml defines it, as an `aws cloudwatch put-metric-alarm` command.
    pub fn put_command(&self, region: &str, alarm: &str, m: &Monitored<'_>) -> String {
        let actions = m
            .topic
            .map(|t| format!(" --alarm-actions {t} --ok-actions {t}"))
            .unwrap_or_default();
        let watched = match self.watches {
            Watches::Count(metric) => format!(
                "--namespace {} --metric-name {metric} --dimensions Name=FunctionName,Value={} \
                 --statistic Sum --period 60 --threshold 1 --comparison-operator \
                 GreaterThanOrEqualToThreshold",
                m.namespace, m.function
            ),
            Watches::DocumentsAgainstInvocations => {
                let stat = |id: &str, ns: &str, metric: &str, stat: &str| {
                    json!({"Id": id, "ReturnData": false, "MetricStat": {"Period": 300, "Stat": stat,
                        "Metric": {"Namespace": ns, "MetricName": metric,
                                   "Dimensions": [{"Name": "FunctionName", "Value": m.function}]}}})
                };
                let metrics = json!([
                    stat("invocations", "AWS/Lambda", "Invocations", "Sum"),
                    stat("documents", m.namespace, "Received", "SampleCount"),
                    {"Id": "missing", "ReturnData": true, "Expression": MISSING_EXPRESSION},
                ]);
                format!(
                    "--metrics '{metrics}' --threshold 0.5 --comparison-operator \
                     GreaterThanThreshold"
                )
            }
        };
        format!(
            "aws cloudwatch put-metric-alarm --region {region} --alarm-name {alarm} {watched} \
             --evaluation-periods 1 --treat-missing-data notBreaching{actions}"
        )
    }

    /// Creates the alarm as base.yaml does (the sandbox's stand-in for CloudFormation, which
    /// moto does not run for alarms).
    pub async fn put(
        &self,
        cloudwatch: &aws_sdk_cloudwatch::Client,
        alarm: &str,
        m: &Monitored<'_>,
    ) -> anyhow::Result<()> {
        let function = Dimension::builder()
            .name("FunctionName")
            .value(m.function)
            .build();
        let request = cloudwatch
            .put_metric_alarm()
            .alarm_name(alarm)
            .evaluation_periods(1)
            .treat_missing_data("notBreaching")
            .set_alarm_actions(m.topic.map(|t| vec![t.to_owned()]))
            .set_ok_actions(m.topic.map(|t| vec![t.to_owned()]));
        let request = match self.watches {
            Watches::Count(metric) => request
                .namespace(m.namespace)
                .metric_name(metric)
                .dimensions(function)
                .statistic(Statistic::Sum)
                .period(60)
                .threshold(1.0)
                .comparison_operator(ComparisonOperator::GreaterThanOrEqualToThreshold),
            Watches::DocumentsAgainstInvocations => {
                let stat = |id: &str, ns: &str, metric: &str, stat: &str| {
                    MetricDataQuery::builder()
                        .id(id)
                        .return_data(false)
                        .metric_stat(
                            MetricStat::builder()
                                .metric(
                                    Metric::builder()
                                        .namespace(ns)
                                        .metric_name(metric)
                                        .dimensions(function.clone())
                                        .build(),
                                )
                                .period(300)
                                .stat(stat)
                                .build(),
                        )
                        .build()
                };
                request
                    .metrics(stat("invocations", "AWS/Lambda", "Invocations", "Sum"))
                    .metrics(stat("documents", m.namespace, "Received", "SampleCount"))
                    .metrics(
                        MetricDataQuery::builder()
                            .id("missing")
                            .return_data(true)
                            .expression(MISSING_EXPRESSION)
                            .build(),
                    )
                    .threshold(0.5)
                    .comparison_operator(ComparisonOperator::GreaterThanThreshold)
            }
        };
        request
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("PutMetricAlarm {alarm}: {}", describe(&e)))?;
        Ok(())
    }
}

/// base.yaml's RouterMetricsMissingAlarm expression: the share of invocations without a document.
const MISSING_EXPRESSION: &str =
    "IF(FILL(invocations, 0) > 0, 1 - FILL(documents, 0) / invocations, 0)";

async fn check_alarm(aws: &Aws, base: &Base, spec: &AlarmSpec, m: &Monitored<'_>) -> Check {
    let name = format!("alarm:{}", spec.logical);
    let stack_alarm = format!("{}-{}", base.name, spec.logical);
    let create = format!(
        "update the stack {} (its {}), or create it as base.yaml does: {}",
        base.name,
        spec.logical,
        spec.put_command(&aws.region, &stack_alarm, m)
    );
    // Where: the stack's alarm (or one made by hand on the same metric), then the one watching
    // what the spec says.
    let described = find_alarms(aws, &stack_alarm, spec, m).await;
    let watching = described.as_ref().map_err(Clone::clone).and_then(|alarms| {
        alarms
            .iter()
            .find(|a| spec.watched_by(a, m).is_ok())
            .ok_or_else(|| {
                let elsewhere = alarms
                    .first()
                    .and_then(|a| Some((a.alarm_name()?, spec.watched_by(a, m).err()?)))
                    .map(|(alarm, what)| format!(" (the stack's {alarm} watches {what})"))
                    .unwrap_or_default();
                format!(
                    "no alarm watches {}: {}{elsewhere}",
                    spec.describes(m),
                    spec.unnoticed
                )
            })
    });
    let alarm = match &watching {
        Ok(alarm) => alarm,
        Err(_) => {
            return check::evaluate(
                name,
                [
                    Expect::lookup(&described, "run verify with cloudwatch:DescribeAlarms"),
                    Expect::lookup(&watching, create),
                ],
            );
        }
    };
    let alarm_name = alarm.alarm_name().unwrap_or_default();

    // Expect → what was found → the fix.
    let notifies = match m.topic {
        None => Expect::quietly(false).otherwise(
            format!("{alarm_name} notifies no topic (the stack has none): it pages nobody"),
            create.clone(),
        ),
        Some(topic) => {
            let disabled = alarm.actions_enabled() == Some(false);
            Expect::that(
                alarm.alarm_actions().iter().any(|a| a == topic) && !disabled,
                format!("notifies {topic}"),
            )
            .otherwise(
                format!(
                    "{alarm_name} does not notify the stack's AlarmTopicArn {topic}{}: it pages \
                     nobody",
                    if disabled {
                        " (its actions are disabled)"
                    } else {
                        ""
                    }
                ),
                format!(
                    "aws cloudwatch enable-alarm-actions --region {} --alarm-names \
                     {alarm_name}; or {create}",
                    aws.region
                ),
            )
        }
    };
    check::evaluate(
        name,
        [
            Expect::found(format!("{alarm_name} watches {}", spec.describes(m))),
            notifies,
        ],
    )
}

/// The alarms named after the stack's `stack_alarm`; when there is none, those on the spec's
/// metric of the function (an alarm made by hand counts too).
async fn find_alarms(
    aws: &Aws,
    stack_alarm: &str,
    spec: &AlarmSpec,
    m: &Monitored<'_>,
) -> Result<Vec<MetricAlarm>, String> {
    let alarms = aws
        .cloudwatch
        .describe_alarms()
        .alarm_name_prefix(stack_alarm)
        .send()
        .await
        .map_err(|e| format!("DescribeAlarms: {}", describe(&e)))?
        .metric_alarms()
        .to_vec();
    let (true, Watches::Count(metric)) = (alarms.is_empty(), spec.watches) else {
        return Ok(alarms);
    };
    // Moto ignores the Dimensions filter; AWS needs it for a metric with dimensions.
    let for_metric = aws
        .cloudwatch
        .describe_alarms_for_metric()
        .namespace(m.namespace)
        .metric_name(metric)
        .dimensions(
            Dimension::builder()
                .name("FunctionName")
                .value(m.function)
                .build(),
        )
        .send()
        .await;
    Ok(match for_metric {
        Ok(out) => out.metric_alarms().to_vec(),
        Err(_) => alarms,
    })
}

/// How far back `function:metrics` compares invocations with metric documents.
const METRICS_WINDOW: Duration = Duration::from_secs(3600);

/// `function:metrics`: when Lambda counted invocations in the last hour, the function's log group
/// holds metric documents from that hour. Without them every router metric is silent: Lambda's
/// log-level filter drops documents without a `level` it keeps (a router build older than this
/// project's fix, at LogLevel WARN or above), or the function cannot write its logs.
async fn check_metric_documents(aws: &Aws, base: &Base) -> Check {
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
    let now = SystemTime::now() + Duration::from_secs(60);
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
    let millis = |t: SystemTime| {
        t.duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as i64
    };
    // Every document names its directive list; a quoted term matches it in AWS and in moto.
    let documents = aws
        .logs
        .filter_log_events()
        .log_group_name(group)
        .start_time(millis(since))
        .end_time(millis(now))
        .filter_pattern("\"CloudWatchMetrics\"")
        .limit(1)
        .send()
        .await
        .map_err(|e| format!("FilterLogEvents {group}: {}", describe(&e)));
    let found = documents.as_ref().is_ok_and(|out| !out.events().is_empty());
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
    aws: &Aws,
    function: &str,
    since: SystemTime,
    now: SystemTime,
) -> Result<f64, String> {
    let out = aws
        .cloudwatch
        .get_metric_statistics()
        .namespace("AWS/Lambda")
        .metric_name("Invocations")
        .dimensions(
            Dimension::builder()
                .name("FunctionName")
                .value(function)
                .build(),
        )
        .start_time(DateTime::from(since))
        .end_time(DateTime::from(now))
        .period(METRICS_WINDOW.as_secs() as i32)
        .statistics(Statistic::Sum)
        .send()
        .await
        .map_err(|e| {
            format!(
                "GetMetricStatistics AWS/Lambda Invocations: {}",
                describe(&e)
            )
        })?;
    Ok(out.datapoints().iter().filter_map(|d| d.sum()).sum())
}
