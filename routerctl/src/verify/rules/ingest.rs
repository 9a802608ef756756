//! Where the base stack's rules deliver: to the ingest queue, with the stack's DLQ as their
//! dead-letter queue (so what EventBridge gives up on is kept).

use super::bus_arg;
use crate::{check::Expect, cloud::Target};

/// Where a base stack rule must deliver: to the ingest queue, with the stack's DLQ as its
/// dead-letter queue.
pub(super) struct Delivery<'a> {
    pub rule: &'a str,
    pub bus: Option<&'a str>,
    /// The target's ARN, when known.
    pub target: Option<&'a str>,
    pub dlq: Option<&'a str>,
    pub region: &'a str,
}

impl Delivery<'_> {
    /// The row for the rule's targets: the one it must have, and its dead-letter queue.
    pub fn judge(&self, targets: &[Target]) -> Expect {
        let (what, target_id) = ("the ingest queue", "ingest");
        let Some(target) = self.target else {
            return Expect::problem(
                format!("cannot tell whether it targets {what}: its ARN is unknown"),
                "fix the ingest-queue check first",
            );
        };
        let put =
            |arn: &str| put_targets(self.rule, self.bus, target_id, arn, self.dlq, self.region);
        let Some(found) = targets.iter().find(|t| t.arn() == target) else {
            let found: Vec<&str> = targets.iter().map(|t| t.arn()).collect();
            return Expect::problem(
                format!("does not target {what} {target} (targets: {found:?})"),
                put(target),
            );
        };
        let dead_letters = found.dead_letter_arn.as_deref();
        Expect::that(
            dead_letters.is_some() && dead_letters == self.dlq,
            format!("→ {what}, DLQ set"),
        )
        .otherwise(
            format!(
                "its target has dead-letter queue {dead_letters:?}, not the stack's DLQ: \
                 deliveries EventBridge gives up on are lost"
            ),
            put(found.arn()),
        )
    }
}

fn put_targets(
    rule: &str,
    bus: Option<&str>,
    id: &str,
    arn: &str,
    dlq: Option<&str>,
    region: &str,
) -> String {
    format!(
        "aws events put-targets --rule {rule} --region {region}{} --targets \
         'Id={id},Arn={arn},DeadLetterConfig={{Arn={}}},RetryPolicy={{MaximumRetryAttempts=185,MaximumEventAgeInSeconds=3600}}'",
        bus_arg(bus),
        dlq.unwrap_or("<DeadLetterQueueArn output>")
    )
}
