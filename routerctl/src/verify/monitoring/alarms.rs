//! `alarm:<name>`: each alarm of [`super::ALARMS`] found (by the name CloudFormation gives it, or
//! by what it watches), checked against its [`AlarmSpec`], and, where it is missing or watches
//! something else, the command that puts it back.

use serde_json::json;

use super::{AlarmSpec, Monitored, Watches};
use crate::{
    check::{self, Expect},
    cloud::{Alarm, Cloud},
    {deployment::Base, verify::report::Check},
};

impl AlarmSpec {
    /// Whether `alarm` watches what this spec says, for this function; what it watches otherwise.
    fn watched_by(&self, alarm: &Alarm, m: &Monitored<'_>) -> Result<(), String> {
        match self.watches {
            Watches::Count(metric) => {
                let watched = alarm.metric.as_ref();
                let found = (
                    watched.map_or("no namespace", |w| w.namespace.as_str()),
                    watched.map_or("no metric", |w| w.metric.as_str()),
                    watched
                        .and_then(|w| w.function.as_deref())
                        .unwrap_or("no function"),
                );
                if found == (m.namespace, metric, m.function) {
                    Ok(())
                } else {
                    Err(format!("{} {} of {}", found.0, found.1, found.2))
                }
            }
            Watches::DocumentsAgainstInvocations => {
                let stats: Vec<(&str, &str, &str, &str)> = alarm
                    .metrics
                    .iter()
                    .map(|w| {
                        (
                            w.namespace.as_str(),
                            w.metric.as_str(),
                            w.function.as_deref().unwrap_or_default(),
                            w.stat.as_deref().unwrap_or_default(),
                        )
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
}

/// base.yaml's RouterMetricsMissingAlarm expression: the share of invocations without a document.
pub const MISSING_EXPRESSION: &str =
    "IF(FILL(invocations, 0) > 0, 1 - FILL(documents, 0) / invocations, 0)";

pub(super) async fn check_alarm(
    aws: &impl Cloud,
    base: &Base,
    spec: &AlarmSpec,
    m: &Monitored<'_>,
) -> Check {
    let name = format!("alarm:{}", spec.logical);
    let stack_alarm = format!("{}-{}", base.name, spec.logical);
    let create = format!(
        "update the stack {} (its {}), or create it as base.yaml does: {}",
        base.name,
        spec.logical,
        spec.put_command(aws.region(), &stack_alarm, m)
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
                    .and_then(|a| Some((a.name.as_str(), spec.watched_by(a, m).err()?)))
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
    let alarm_name = alarm.name.as_str();

    // Expect → what was found → the fix.
    let notifies = match m.topic {
        None => Expect::quietly(false).otherwise(
            format!("{alarm_name} notifies no topic (the stack has none): it pages nobody"),
            create.clone(),
        ),
        Some(topic) => {
            let disabled = alarm.actions_enabled == Some(false);
            Expect::that(
                alarm.alarm_actions.iter().any(|a| a == topic) && !disabled,
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
                    aws.region()
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
    aws: &impl Cloud,
    stack_alarm: &str,
    spec: &AlarmSpec,
    m: &Monitored<'_>,
) -> Result<Vec<Alarm>, String> {
    let alarms = aws
        .alarms_named(stack_alarm)
        .await
        .map_err(|e| format!("DescribeAlarms: {e}"))?;
    let (true, Watches::Count(metric)) = (alarms.is_empty(), spec.watches) else {
        return Ok(alarms);
    };
    // Moto ignores the Dimensions filter; AWS needs it for a metric with dimensions.
    Ok(aws
        .alarms_for_metric(m.namespace, metric, m.function)
        .await
        .unwrap_or(alarms))
}
