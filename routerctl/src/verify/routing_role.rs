//! What the router does with the role it routes a site's events with, and what it must never do
//! with it: the router role in the hub's own account, the spoke role in each member account. At
//! every site the router looks instances up with it, and may do nothing else with it beyond its
//! cluster queues, so `router-role` and `spoke:<account>:role-permissions` judge a role against
//! the same [`Scope`]; the router role adds what only the hub does (its ingest queue and DLQ).
//! What the role may do to each cluster's queue and tenant record is judged per cluster, by the
//! tenant checks (`tenant:<cluster>:router-role`, `:spoke-role`), so a role that reaches some
//! clusters and not others names the ones it misses, once.

use crate::deployment::Role;
use aws_model::arn::arn_name;

use crate::check::Expect;

/// One action the router needs, on what, shown how in a report, granted by which of the
/// template's statements.
pub(crate) struct Need {
    pub action: &'static str,
    pub resource: String,
    pub shown: String,
    pub statement: &'static str,
}

/// What a routing role needs, and probes of what it must not be able to do.
pub(crate) struct Scope {
    pub needs: Vec<Need>,
    pub never: Vec<(&'static str, String)>,
}

/// The template statements that grant the lookups: base.yaml has one per lookup path, spoke.yaml
/// one for both.
pub(crate) type Lookups = [&'static str; 2];
pub(crate) const BASE_LOOKUPS: Lookups = ["ResolveInstanceTags", "ResolveInstanceTagsByArn"];
pub(crate) const SPOKE_LOOKUPS: Lookups = ["ResolveInstanceTags", "ResolveInstanceTags"];

/// A name no cluster queue or record has: what the probes ask about.
const PROBE: &str = "routerctl-verify-probe";

impl Scope {
    /// Routing at a site (`account`, `region`, queues named `<queue_prefix>…`): both lookup paths;
    /// and probes of what it must not do to a cluster queue, a tenant record or anything else.
    pub fn routing(
        partition: &str,
        account: &str,
        region: &str,
        queue_prefix: &str,
        lookups: Lookups,
    ) -> Self {
        let queue = |name: &str| format!("arn:{partition}:sqs:{region}:{account}:{name}");
        let cluster_queue = queue(&format!("{queue_prefix}{PROBE}"));
        // Its tenant record (router-core/src/tenancy.rs): whether a missing queue was onboarded.
        let record = format!(
            "arn:{partition}:ssm:{region}:{account}:parameter/interruption-router/tenant-queues/{queue_prefix}{PROBE}"
        );
        let lookup = |action, statement| Need {
            action,
            resource: "*".to_owned(),
            shown: "*".to_owned(),
            statement,
        };
        let needs = vec![
            lookup("ec2:DescribeInstances", lookups[0]),
            lookup("tag:GetResources", lookups[1]),
        ];
        let never = vec![
            ("sqs:ReceiveMessage", cluster_queue.clone()),
            ("sqs:DeleteMessage", cluster_queue.clone()),
            ("sqs:PurgeQueue", cluster_queue.clone()),
            ("sqs:SetQueueAttributes", cluster_queue.clone()),
            ("sqs:SendMessage", queue(PROBE)),
            (
                "ssm:GetParameter",
                format!("arn:{partition}:ssm:{region}:{account}:parameter/{PROBE}"),
            ),
            ("ssm:PutParameter", record),
            ("ec2:TerminateInstances", "*".to_owned()),
            ("ec2:RunInstances", "*".to_owned()),
            ("ec2:CreateTags", "*".to_owned()),
            ("tag:TagResources", "*".to_owned()),
            ("iam:PassRole", "*".to_owned()),
            ("sts:AssumeRole", "*".to_owned()),
            ("s3:GetObject", "*".to_owned()),
        ];
        Self { needs, never }
    }

    /// A need of the site's own on `resource` (an ARN), shown by its name.
    pub fn need(&mut self, action: &'static str, resource: &str, statement: &'static str) {
        self.needs.push(Need {
            action,
            resource: resource.to_owned(),
            shown: arn_name(resource).to_owned(),
            statement,
        });
    }

    /// The rows judging `role`: it may every need (else `fix` of the statements that would grant
    /// the missing ones), and none of the probes (else `broader`).
    pub fn judge(
        &self,
        role: &Role,
        fix: impl Fn(&[&str]) -> String,
        broader: &str,
    ) -> [Expect; 2] {
        let name = role.name();
        let mut missing = Vec::new();
        let mut statements: Vec<&str> = Vec::new();
        for need in &self.needs {
            let d = role.may(need.action, &need.resource);
            if !d.is_allowed() {
                missing.push(format!("{} on {} ({d})", need.action, need.shown));
                if !statements.contains(&need.statement) {
                    statements.push(need.statement);
                }
            }
        }
        let extra: Vec<String> = self
            .never
            .iter()
            .filter_map(|(action, resource)| {
                let d = role.may(action, resource);
                d.is_allowed().then(|| {
                    let on = match resource.as_str() {
                        "*" => String::new(),
                        arn => format!(" on {}", arn_name(arn)),
                    };
                    format!("{action}{on} ({d})")
                })
            })
            .collect();
        [
            Expect::that(missing.is_empty(), format!("{name} may {}", self.may())).otherwise(
                format!("{name} may not {}", missing.join(", ")),
                fix(&statements),
            ),
            Expect::that(extra.is_empty(), "nothing broader").otherwise(
                format!(
                    "{name} may also {}: more than the router needs",
                    extra.join(", ")
                ),
                broader.to_owned(),
            ),
        ]
    }

    /// The needs as a report phrase, grouped by what they are on: `a and b; c, d and e on f`.
    pub fn may(&self) -> String {
        let mut shown: Vec<&str> = self.needs.iter().map(|n| n.shown.as_str()).collect();
        shown.dedup();
        shown
            .iter()
            .map(|on| {
                let actions: Vec<&str> = self
                    .needs
                    .iter()
                    .filter(|n| n.shown == *on)
                    .map(|n| n.action)
                    .collect();
                let list = match actions.split_last() {
                    Some((last, [])) => (*last).to_owned(),
                    Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
                    None => String::new(),
                };
                match *on {
                    "*" => list,
                    on => format!("{list} on {on}"),
                }
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_names_every_action_it_needs_grouped_by_resource() {
        let mut scope = Scope::routing("aws", "123456789012", "us-east-1", "kq-", BASE_LOOKUPS);
        scope.need(
            "sqs:SendMessage",
            "arn:aws:sqs:us-east-1:123456789012:ir-dlq",
            "SendToDeadLetterQueue",
        );
        scope.need(
            "sqs:ReceiveMessage",
            "arn:aws:sqs:us-east-1:123456789012:ir-ingest",
            "ConsumeIngestQueue",
        );
        scope.need(
            "sqs:DeleteMessage",
            "arn:aws:sqs:us-east-1:123456789012:ir-ingest",
            "ConsumeIngestQueue",
        );
        assert_eq!(
            scope.may(),
            "ec2:DescribeInstances and tag:GetResources; sqs:SendMessage on ir-dlq; \
             sqs:ReceiveMessage and sqs:DeleteMessage on ir-ingest"
        );
        let statements: Vec<&str> = scope.needs.iter().map(|n| n.statement).collect();
        assert_eq!(
            statements,
            [
                "ResolveInstanceTags",
                "ResolveInstanceTagsByArn",
                "SendToDeadLetterQueue",
                "ConsumeIngestQueue",
                "ConsumeIngestQueue"
            ]
        );
        // The probes of what a routing role must not do include a cluster queue's reads.
        assert!(
            scope
                .never
                .iter()
                .any(|(a, r)| *a == "sqs:ReceiveMessage"
                    && r.ends_with(":kq-routerctl-verify-probe"))
        );
    }
}
