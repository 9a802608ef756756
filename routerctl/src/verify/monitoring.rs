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
    report::{Check, Findings, fail, pass},
    stack::Base,
};
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
    /// Only a router serving other accounts has it (and emits its metric).
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
    let serves_others = base
        .parameter("ServedAccounts")
        .is_some_and(|s| !s.is_empty());
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
        topic: base.parameter("AlarmTopicArn").filter(|t| !t.is_empty()),
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
    let Some(name) = base.output("DashboardName") else {
        return fail(NAME, "the stack has no DashboardName output", restore);
    };
    let dashboard = match aws
        .cloudwatch
        .get_dashboard()
        .dashboard_name(name)
        .send()
        .await
    {
        Ok(d) => d,
        Err(e) => {
            let problem = if e.as_service_error().is_some_and(|s| {
                s.is_dashboard_not_found_error() || s.code() == Some("ResourceNotFound")
            }) {
                format!("dashboard {name} does not exist (deleted outside CloudFormation)")
            } else {
                format!("GetDashboard {name}: {}", describe(&e))
            };
            return fail(NAME, problem, restore);
        }
    };
    let mut f = Findings::default();
    f.ok(format!("{name} exists"));
    let body = dashboard.dashboard_body().unwrap_or_default();
    let function = base.output("FunctionName").unwrap_or_default();
    if body.contains(namespace) && body.contains(function) {
        f.ok(format!("charts {namespace} metrics of {function}"));
    } else {
        f.problem(
            format!(
                "its widgets do not chart the router's metrics ({namespace}, FunctionName \
                 {function}): it was edited, or the function or METRICS_NAMESPACE changed outside \
                 the stack"
            ),
            restore,
        );
    }
    f.into_check(NAME)
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
    let mut alarms = match aws
        .cloudwatch
        .describe_alarms()
        .alarm_name_prefix(&stack_alarm)
        .send()
        .await
    {
        Ok(out) => out.metric_alarms().to_vec(),
        Err(e) => {
            return fail(
                &name,
                format!("DescribeAlarms: {}", describe(&e)),
                "run verify with cloudwatch:DescribeAlarms",
            );
        }
    };
    // An alarm made by hand on the same metric counts too.
    if let (true, Watches::Count(metric)) = (alarms.is_empty(), spec.watches) {
        // Moto ignores the Dimensions filter; AWS needs it for a metric with dimensions.
        if let Ok(out) = aws
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
            .await
        {
            alarms = out.metric_alarms().to_vec();
        }
    }
    let watching: Vec<&MetricAlarm> = alarms
        .iter()
        .filter(|a| spec.watched_by(a, m).is_ok())
        .collect();
    let Some(alarm) = watching.first() else {
        let elsewhere = alarms
            .first()
            .and_then(|a| Some((a.alarm_name()?, spec.watched_by(a, m).err()?)))
            .map(|(alarm, what)| format!(" (the stack's {alarm} watches {what})"))
            .unwrap_or_default();
        return fail(
            &name,
            format!(
                "no alarm watches {}: {}{elsewhere}",
                spec.describes(m),
                spec.unnoticed
            ),
            create,
        );
    };
    let alarm_name = alarm.alarm_name().unwrap_or_default();
    let mut f = Findings::default();
    f.ok(format!("{alarm_name} watches {}", spec.describes(m)));
    match m.topic {
        Some(topic) => {
            let notifies = alarm.alarm_actions().iter().any(|a| a == topic);
            if notifies && alarm.actions_enabled() != Some(false) {
                f.ok(format!("notifies {topic}"));
            } else {
                f.problem(
                    format!(
                        "{alarm_name} does not notify the stack's AlarmTopicArn {topic}{}: it pages \
                         nobody",
                        if alarm.actions_enabled() == Some(false) {
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
                );
            }
        }
        None => f.ok("no actions (the stack has no AlarmTopicArn)"),
    }
    f.into_check(name)
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
    let invocations = aws
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
        .await;
    let invocations: f64 = match invocations {
        Ok(out) => out.datapoints().iter().filter_map(|d| d.sum()).sum(),
        Err(e) => {
            return fail(
                NAME,
                format!(
                    "GetMetricStatistics AWS/Lambda Invocations: {}",
                    describe(&e)
                ),
                "run verify with cloudwatch:GetMetricStatistics",
            );
        }
    };
    if invocations < 1.0 {
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
        .await;
    match documents {
        Ok(out) if !out.events().is_empty() => pass(
            NAME,
            format!(
                "{invocations:.0} invocations in the last hour, and metric documents in {group}"
            ),
        ),
        Ok(_) => {
            let level = base.parameter("LogLevel").unwrap_or("INFO");
            fail(
                NAME,
                format!(
                    "Lambda counted {invocations:.0} invocations of {function} in the last hour but \
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
            )
        }
        Err(e) => fail(
            NAME,
            format!("FilterLogEvents {group}: {}", describe(&e)),
            "run verify with logs:FilterLogEvents",
        ),
    }
}
