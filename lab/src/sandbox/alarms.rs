//! base.yaml's alarms on the router's metrics, created from routerctl's own [`AlarmSpec`]s: the
//! sandbox's stand-in for CloudFormation, which moto does not run for alarms.

use aws_clients::aws::describe;
use aws_sdk_cloudwatch::types::{
    ComparisonOperator, Dimension, Metric, MetricDataQuery, MetricStat, Statistic,
};
use routerctl::verify::{AlarmSpec, MISSING_EXPRESSION, Monitored, Watches};

/// Creates the alarm `spec` describes, named `alarm`, as base.yaml does.
pub(super) async fn put(
    spec: &AlarmSpec,
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
    let request = match spec.watches {
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
