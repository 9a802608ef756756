//! `dashboard`, `alarm:LateForwardsAlarm`: the stack's CloudWatch dashboard exists and charts the
//! router's metrics, and an alarm watches the router's `LateForwards` metric (events forwarded
//! more than two minutes after they happened: a spot warning Karpenter got too late), in the
//! namespace the function writes to (METRICS_NAMESPACE).

use aws_sdk_cloudwatch::{
    error::ProvideErrorMetadata,
    types::{Dimension, MetricAlarm},
};
use interruption_router::config::{Config, DEFAULT_METRICS_NAMESPACE};

use super::{
    report::{Check, Findings, fail},
    stack::Base,
};
use crate::aws::{Aws, describe};

/// The metric the late-forwards alarm watches, and its logical id in base.yaml.
pub const LATE_FORWARDS_METRIC: &str = "LateForwards";
pub const LATE_FORWARDS_ALARM: &str = "LateForwardsAlarm";

pub(super) async fn check(
    aws: &Aws,
    base: &Base,
    config: Option<&Config>,
    checks: &mut Vec<Check>,
) {
    let namespace = config.map_or(DEFAULT_METRICS_NAMESPACE, |c| c.metrics_namespace.as_str());
    checks.push(check_dashboard(aws, base, namespace).await);
    checks.push(check_late_forwards_alarm(aws, base, namespace).await);
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

/// The dimension value of `name` on an alarm, if it has one.
fn dimension<'a>(alarm: &'a MetricAlarm, name: &str) -> Option<&'a str> {
    alarm
        .dimensions()
        .iter()
        .find(|d| d.name() == Some(name))
        .and_then(Dimension::value)
}

async fn check_late_forwards_alarm(aws: &Aws, base: &Base, namespace: &str) -> Check {
    let name = format!("alarm:{LATE_FORWARDS_ALARM}");
    let Some(function) = base.output("FunctionName") else {
        return fail(
            &name,
            "the stack has no FunctionName output, so the alarm's dimension is unknown",
            "update the stack with this project's cloudformation/base.yaml",
        );
    };
    let topic = base.parameter("AlarmTopicArn").filter(|t| !t.is_empty());
    let create = format!(
        "update the stack {stack} (its {LATE_FORWARDS_ALARM}), or create it as base.yaml does: \
         {}",
        put_metric_alarm_command(
            &aws.region,
            &format!("{}-{LATE_FORWARDS_ALARM}", base.name),
            namespace,
            function,
            topic,
        ),
        stack = base.name
    );
    // Moto ignores the Dimensions filter; AWS needs it for a metric with dimensions. Both answer
    // the alarms on the metric; the FunctionName dimension is checked here.
    let found = aws
        .cloudwatch
        .describe_alarms_for_metric()
        .namespace(namespace)
        .metric_name(LATE_FORWARDS_METRIC)
        .dimensions(
            Dimension::builder()
                .name("FunctionName")
                .value(function)
                .build(),
        )
        .send()
        .await;
    let alarms = match found {
        Ok(out) => out.metric_alarms().to_vec(),
        Err(e) => {
            return fail(
                &name,
                format!("DescribeAlarmsForMetric: {}", describe(&e)),
                "run verify with cloudwatch:DescribeAlarms",
            );
        }
    };
    let stack_prefix = format!("{}-", base.name);
    let mut ours: Vec<&MetricAlarm> = alarms
        .iter()
        .filter(|a| dimension(a, "FunctionName") == Some(function))
        .collect();
    // The stack's own alarm first, when several watch the metric.
    ours.sort_by_key(|a| !a.alarm_name().is_some_and(|n| n.starts_with(&stack_prefix)));
    let Some(alarm) = ours.first() else {
        return fail(
            &name,
            missing_alarm(aws, base, namespace, function).await,
            create,
        );
    };
    let alarm_name = alarm.alarm_name().unwrap_or_default();
    let mut f = Findings::default();
    f.ok(format!(
        "{alarm_name} watches {namespace} {LATE_FORWARDS_METRIC} of {function}"
    ));
    match topic {
        Some(topic) => {
            let notifies = alarm.alarm_actions().iter().any(|a| a == topic);
            if notifies && alarm.actions_enabled() != Some(false) {
                f.ok(format!("notifies {topic}"));
            } else {
                f.problem(
                    format!(
                        "{alarm_name} does not notify the stack's AlarmTopicArn {topic}{}: late \
                         forwards page nobody",
                        if alarm.actions_enabled() == Some(false) {
                            " (its actions are disabled)"
                        } else {
                            ""
                        }
                    ),
                    format!(
                        "aws cloudwatch enable-alarm-actions --region {} --alarm-names {alarm_name}; \
                         or {create}",
                        aws.region
                    ),
                );
            }
        }
        None => f.ok("no actions (the stack has no AlarmTopicArn)"),
    }
    f.into_check(name)
}

/// Why no alarm watches the metric: the stack's alarm may watch another namespace or function.
async fn missing_alarm(aws: &Aws, base: &Base, namespace: &str, function: &str) -> String {
    let missing = format!(
        "no alarm watches {namespace} {LATE_FORWARDS_METRIC} for {function}: events forwarded too \
         late for Karpenter to drain in time go unnoticed"
    );
    let Ok(out) = aws
        .cloudwatch
        .describe_alarms()
        .alarm_name_prefix(format!("{}-{LATE_FORWARDS_ALARM}", base.name))
        .send()
        .await
    else {
        return missing;
    };
    match out.metric_alarms().first() {
        Some(a) => format!(
            "{missing} (the stack's {} watches {} {} of {})",
            a.alarm_name().unwrap_or_default(),
            a.namespace().unwrap_or("no namespace"),
            a.metric_name().unwrap_or("no metric"),
            dimension(a, "FunctionName").unwrap_or("no function"),
        ),
        None => missing,
    }
}

/// base.yaml's LateForwardsAlarm as a command (and what the sandbox creates through the API).
fn put_metric_alarm_command(
    region: &str,
    alarm: &str,
    namespace: &str,
    function: &str,
    topic: Option<&str>,
) -> String {
    let actions = topic
        .map(|t| format!(" --alarm-actions {t} --ok-actions {t}"))
        .unwrap_or_default();
    format!(
        "aws cloudwatch put-metric-alarm --region {region} --alarm-name {alarm} --namespace \
         {namespace} --metric-name {LATE_FORWARDS_METRIC} --dimensions Name=FunctionName,Value={function} \
         --statistic Sum --period 60 --evaluation-periods 1 --threshold 1 --comparison-operator \
         GreaterThanOrEqualToThreshold --treat-missing-data notBreaching{actions}"
    )
}
