//! `alarm-topic` (and `spoke:<account>:alarm-topic`): whether an alarm reaches a person. Every
//! alarm of the router's stacks notifies one SNS topic: the stack's `AlarmTopicArn` parameter, or
//! the topic the stack creates when given none (its `AlarmTopicArn` output). SNS delivers only to
//! confirmed subscriptions ("PendingConfirmation" until the endpoint confirms), so a topic without
//! one pages nobody, and neither does a stack with no topic at all (templates before 0.2.0).

use crate::cloud::Cloud;

use super::report::Check;
use crate::check::{self, Expect};

/// SubscriptionArn of a subscription SNS has not had confirmed yet.
const PENDING: &str = "PendingConfirmation";

/// Where the topic is, and how the operator puts one in place.
pub(super) struct Site<'a> {
    /// The check's name.
    pub name: String,
    /// The topic the stack's alarms notify, if it has one.
    pub topic: Option<&'a str>,
    pub region: &'a str,
    /// What gives the stack a topic (a stack update, or its parameter).
    pub deploy: String,
}

/// The topic's subscriptions (their ARNs, or `PendingConfirmation`), all pages.
async fn subscriptions(aws: &impl Cloud, topic: &str) -> Result<Vec<String>, String> {
    aws.subscriptions(topic)
        .await
        .map_err(|e| format!("ListSubscriptionsByTopic {topic}: {e}"))
}

pub(super) async fn check(aws: &impl Cloud, site: &Site<'_>) -> Check {
    let listed = match site.topic {
        Some(topic) => subscriptions(aws, topic).await.map(Some),
        None => Ok(None),
    };
    judge(site, &listed)
}

/// The check over what was read: `None` for a stack without a topic.
fn judge(site: &Site<'_>, listed: &Result<Option<Vec<String>>, String>) -> Check {
    let Site {
        name,
        topic,
        region,
        deploy,
    } = site;
    let lookup = Expect::lookup(
        listed,
        "run verify with sns:ListSubscriptionsByTopic on the alarm topic",
    );
    let (Some(topic), Ok(Some(arns))) = (topic, listed) else {
        return check::evaluate(
            name,
            [
                lookup,
                Expect::quietly(false).otherwise(
                    "the stack's alarms notify no topic: they page nobody",
                    deploy.clone(),
                ),
            ],
        );
    };
    let confirmed = arns.iter().filter(|a| *a != PENDING).count();
    let pending = arns.len() - confirmed;
    let waiting = if pending > 0 {
        format!(" ({pending} waiting for confirmation: SNS delivers nothing to those)")
    } else {
        String::new()
    };
    check::evaluate(
        name,
        [
            lookup,
            Expect::that(
                confirmed > 0,
                format!("{topic}: {confirmed} confirmed subscription(s){waiting}"),
            )
            .otherwise(
                format!(
                    "{topic}, which every alarm notifies, has no confirmed subscription{waiting}: \
                     the alarms page nobody"
                ),
                format!(
                    "subscribe the on-call: aws sns subscribe --region {region} --topic-arn \
                     {topic} --protocol email --notification-endpoint <address>, and confirm from \
                     the email (or your paging tool's endpoint: --protocol https \
                     --notification-endpoint <url>)"
                ),
            ),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(topic: Option<&str>) -> Site<'_> {
        Site {
            name: "alarm-topic".into(),
            topic,
            region: "eu-west-1",
            deploy: "make deploy-base …".into(),
        }
    }

    const TOPIC: &str = "arn:aws:sns:eu-west-1:123456789012:ir-AlarmTopic-X";

    #[test]
    fn a_confirmed_subscription_passes_and_pending_ones_are_said() {
        let listed = Ok(Some(vec![format!("{TOPIC}:1c2b"), PENDING.to_owned()]));
        let check = judge(&site(Some(TOPIC)), &listed);
        assert!(check.passed, "{check:?}");
        assert!(
            check
                .detail
                .contains("1 confirmed subscription(s) (1 waiting")
        );
        // Every subscription confirmed: nothing is said to be waiting.
        let confirmed = Ok(Some(vec![format!("{TOPIC}:1c2b"), format!("{TOPIC}:9d8e")]));
        let check = judge(&site(Some(TOPIC)), &confirmed);
        assert!(check.passed, "{check:?}");
        assert!(
            check.detail.ends_with("2 confirmed subscription(s)"),
            "{check:?}"
        );
    }

    #[test]
    fn a_topic_with_only_pending_or_no_subscriptions_fails_with_the_subscribe_command() {
        for arns in [vec![], vec![PENDING.to_owned()]] {
            let check = judge(&site(Some(TOPIC)), &Ok(Some(arns)));
            assert!(!check.passed, "{check:?}");
            assert!(check.detail.contains("the alarms page nobody"), "{check:?}");
            let fix = check.fix.unwrap();
            assert!(
                fix.contains(&format!(
                    "aws sns subscribe --region eu-west-1 --topic-arn {TOPIC}"
                )),
                "{fix}"
            );
        }
    }

    #[test]
    fn a_stack_without_a_topic_fails_with_its_deploy_and_a_failed_read_says_what_it_needs() {
        let check = judge(&site(None), &Ok(None));
        assert!(!check.passed);
        assert_eq!(check.fix.as_deref(), Some("make deploy-base …"));
        let denied = judge(&site(Some(TOPIC)), &Err("AccessDenied".into()));
        assert!(!denied.passed);
        assert!(
            denied
                .fix
                .as_deref()
                .unwrap()
                .contains("sns:ListSubscriptionsByTopic"),
            "{denied:?}"
        );
    }
}
