//! `routerctl verify` against the deployed stacks: a clean deployment passes, and each deliberate
//! breakage is caught by name with its fix ([`breakages`]); a member account through its spoke
//! stack ([`member`]); a tenant queue made by hand to the tenant contract ([`hand_made`]). This
//! file holds the helpers that break a deployment and read the report.

use anyhow::{Context, Result};
use aws_clients::aws::Aws;
use aws_sdk_sqs::types::QueueAttributeName;
use routerctl::verify;
use serde_json::Value;

use crate::cli::Estate;

mod breakages;
mod hand_made;
mod member;
pub(crate) mod regional;

/// Runs verify and asserts that exactly `failing` checks fail, each with a fix.
async fn verify_fails(
    estate: &Estate,
    clusters: &[&str],
    failing: &[&str],
) -> Result<verify::Report> {
    let options = verify::Options {
        stack: estate.sandbox.stack().to_owned(),
        clusters: clusters.iter().map(|c| c.to_string()).collect(),
        ..verify::Options::default()
    };
    // Boxed: verify's future is large, and the tests await it many times.
    let report = Box::pin(verify::run(estate.aws(), &options)).await;
    assert_failures(&report, failing);
    Ok(report)
}

/// Asserts that exactly `failing` checks of `report` fail, in that order, each with a fix.
/// verify of the base stack `stack` with the member account `account` (`--account`), its spoke
/// stack at the default name.
pub(crate) async fn verify_member(aws: &Aws, stack: &str, account: &str) -> verify::Report {
    verify::run(
        aws,
        &verify::Options {
            stack: stack.into(),
            account: Some(account.into()),
            ..verify::Options::default()
        },
    )
    .await
}

pub(crate) fn assert_failures(report: &verify::Report, failing: &[&str]) {
    let failed: Vec<&str> = report.failures().iter().map(|c| c.name.as_str()).collect();
    assert_eq!(failed, failing, "{}", report.render());
    for check in report.failures() {
        assert!(
            check.fix.as_deref().is_some_and(|f| !f.is_empty()),
            "{} has no fix",
            check.name
        );
    }
}

/// Deletes the sandbox's alarm whose name starts with `prefix` (`<stack>-<logical id>`).
async fn delete_alarm(aws: &Aws, prefix: &str) -> Result<()> {
    let alarms = aws
        .cloudwatch
        .describe_alarms()
        .alarm_name_prefix(prefix)
        .send()
        .await?;
    let alarm = alarms.metric_alarms()[0].alarm_name().unwrap().to_owned();
    aws.cloudwatch
        .delete_alarms()
        .alarm_names(&alarm)
        .send()
        .await?;
    Ok(())
}

/// Asserts that check `name`'s fix says `text`.
fn assert_fix(report: &verify::Report, name: &str, text: &str) {
    let fix = report.check(name).and_then(|c| c.fix.as_deref());
    assert!(
        fix.is_some_and(|f| f.contains(text)),
        "{name}'s fix should say {text:?}:\n{}",
        report.render()
    );
}

/// Asserts that `report`'s check `name` exists and its detail says `text`.
fn assert_detail(report: &verify::Report, name: &str, text: &str) {
    let check = report.check(name);
    assert!(
        check.is_some_and(|c| c.detail.contains(text)),
        "{name} should say {text:?}:\n{}",
        report.render()
    );
}

pub(crate) async fn queue_policy(aws: &Aws, url: &str) -> Result<Value> {
    let out = aws
        .sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::Policy)
        .send()
        .await?;
    let text = out
        .attributes()
        .and_then(|a| a.get(&QueueAttributeName::Policy))
        .context("no policy")?;
    Ok(serde_json::from_str(text)?)
}

pub(crate) async fn set_queue_policy(aws: &Aws, url: &str, policy: &Value) -> Result<()> {
    set_attribute(aws, url, QueueAttributeName::Policy, &policy.to_string()).await
}

/// Sets one attribute. moto drops a queue's Policy on any SetQueueAttributes that does not carry
/// one (AWS keeps it), so the current policy is sent along.
async fn set_attribute(aws: &Aws, url: &str, name: QueueAttributeName, value: &str) -> Result<()> {
    let mut request = aws.sqs.set_queue_attributes().queue_url(url);
    if name != QueueAttributeName::Policy {
        request = request.attributes(
            QueueAttributeName::Policy,
            queue_policy(aws, url).await?.to_string(),
        );
    }
    request.attributes(name, value).send().await?;
    Ok(())
}

async fn put_role_policy(aws: &Aws, role: &str, document: &str) -> Result<()> {
    aws.iam
        .put_role_policy()
        .role_name(role)
        .policy_name("interruption-router")
        .policy_document(document)
        .send()
        .await?;
    Ok(())
}
