//! Where a member account's spoke stack rules deliver: to the hub's central bus, as the spoke
//! stack's forwarding role, which EventBridge may assume for that rule and which may
//! events:PutEvents on the bus; or, in the hub's region with `HubDirectQueueArn`, straight into
//! the hub's direct queue as the member's direct role, which EventBridge may assume for that
//! rule, which may sqs:SendMessage there, which the queue's policy admits, and which is the role
//! the router routes direct deliveries of this account from (any other is dead-lettered
//! `foreign-sender`).

use crate::deployment::Role;
use std::collections::HashMap;

use crate::{
    check::Expect,
    cloud::{Cloud, Target},
};
use aws_model::{
    access::{ResourcePolicy, authorize_role},
    policy::{Decision, Policy, Principal, Request, evaluate},
};

/// The hub's bus a member's rules forward to, and what the fixes name.
pub(crate) struct HubBus<'a> {
    /// The bus's ARN; `None` when the base stack has no central bus.
    pub bus: Option<&'a str>,
    /// The spoke stack's ForwardToHubRole, when it has one.
    pub forward_role: Option<String>,
    pub account: &'a str,
    pub region: &'a str,
    pub spoke_stack: &'a str,
    /// The check that reports a missing central bus.
    pub bus_check: String,
    /// The hub's direct queue, when it has one.
    pub direct: Option<DirectQueue<'a>>,
}

/// The hub's direct queue, as a member's direct rules must reach it.
pub(crate) struct DirectQueue<'a> {
    pub arn: &'a str,
    /// Its policy as SQS holds it (an error text if it could not be read).
    pub policy: Result<Policy, String>,
    /// The role the router routes this account's direct deliveries from.
    pub role_arn: String,
    pub base_stack: &'a str,
}

impl HubBus<'_> {
    /// The rows for a rule's targets (`rule`, named `name`): one on the hub bus, with a role
    /// EventBridge may assume for this rule and that may put events there; and that role.
    pub(super) async fn judge(
        &self,
        aws: &impl Cloud,
        name: &str,
        rule: &str,
        targets: &[Target],
        roles: &mut HashMap<String, Result<Role, String>>,
    ) -> (Vec<Expect>, Option<String>) {
        // Where: the role the rule's hub target sends as, read once for all the rules.
        let hub = [self.direct.as_ref().map(|d| d.arn), self.bus];
        let role_arn = hub
            .into_iter()
            .flatten()
            .find_map(|arn| targets.iter().find(|t| t.arn() == arn))
            .and_then(Target::role_arn);
        if let Some(role_arn) = role_arn
            && !roles.contains_key(role_arn)
        {
            let loaded = aws.role(role_arn).await.map_err(|e| e.to_string());
            roles.insert(role_arn.to_owned(), loaded);
        }
        self.judged(name, rule, targets, roles)
    }

    /// [`HubBus::judge`] on the roles as read: the rows, and the forwarding role.
    pub(super) fn judged(
        &self,
        name: &str,
        rule: &str,
        targets: &[Target],
        roles: &HashMap<String, Result<Role, String>>,
    ) -> (Vec<Expect>, Option<String>) {
        let Some(bus) = self.bus else {
            return (
                vec![
                    Expect::problem(
                        "cannot tell whether it targets the hub: the base stack has no central bus",
                        format!("see {}", self.bus_check),
                    )
                    .ending(),
                ],
                None,
            );
        };
        if let Some(direct) = &self.direct
            && let Some(target) = targets.iter().find(|t| t.arn() == direct.arn)
        {
            return (self.judge_direct(direct, rule, target, roles), None);
        }
        let put_targets = format!(
            "aws events put-targets --rule {name} --region {} --targets \
             'Id=hub,Arn={bus},RoleArn={}' (in account {})",
            self.region,
            self.forward_role
                .as_deref()
                .unwrap_or("<the spoke stack's ForwardToHubRole ARN>"),
            self.account
        );
        let Some(target) = targets.iter().find(|t| t.arn() == bus) else {
            let found: Vec<&str> = targets.iter().map(|t| t.arn()).collect();
            return (
                vec![
                    Expect::problem(
                        format!("does not target the hub bus {bus} (targets: {found:?})"),
                        put_targets,
                    )
                    .ending(),
                ],
                None,
            );
        };
        let Some(role_arn) = target.role_arn() else {
            return (
                vec![
                    Expect::problem(
                        "its hub target has no role: EventBridge needs one to put events on \
                         another account's bus",
                        put_targets,
                    )
                    .ending(),
                ],
                None,
            );
        };
        // Expect → what was found → the fix.
        let restore = format!(
            "update the spoke stack {} in account {} (ForwardToHubRole: trust OnlyTheseRules, \
             policy forward-to-hub)",
            self.spoke_stack, self.account
        );
        let rows = match roles.get(role_arn).unwrap_or(&Err(NOT_READ.to_owned())) {
            Err(problem) => vec![Expect::problem(
                format!("its target's role: {problem}"),
                format!("{restore}, or {put_targets}"),
            )],
            Ok(role) => {
                let may_put = role.may("events:PutEvents", bus);
                let trusted = trusted_for_rule(role, role_arn, rule, self.account);
                vec![
                    Expect::that(
                        may_put.is_allowed(),
                        format!("→ hub bus as {}", role.name()),
                    )
                    .otherwise(
                        format!(
                            "its target's role {} may not events:PutEvents on {bus} ({may_put})",
                            role.name(),
                        ),
                        restore.clone(),
                    ),
                    trust_row(role, &trusted, restore),
                ]
            }
        };
        (rows, Some(role_arn.to_owned()))
    }
}

impl HubBus<'_> {
    /// The rows for a rule writing the hub's direct queue through `target`.
    fn judge_direct(
        &self,
        direct: &DirectQueue<'_>,
        rule: &str,
        target: &Target,
        roles: &HashMap<String, Result<Role, String>>,
    ) -> Vec<Expect> {
        let restore = format!(
            "update the spoke stack {} in account {} with this release's spoke.yaml and \
             HubDirectQueueArn={} (DirectRole: trust OnlyTheseRules, policy deliver-to-hub)",
            self.spoke_stack, self.account, direct.arn
        );
        let Some(role_arn) = target.role_arn() else {
            return vec![
                Expect::problem(
                    "its direct target has no role: EventBridge sends to another account's \
                     queue only as an execution role",
                    restore,
                )
                .ending(),
            ];
        };
        if role_arn != direct.role_arn {
            return vec![
                Expect::problem(
                    format!(
                        "its direct target sends as {role_arn}, and the router routes this \
                         account's direct deliveries only from {}: every one would be \
                         dead-lettered foreign-sender",
                        direct.role_arn
                    ),
                    restore,
                )
                .ending(),
            ];
        }
        let unread = Err(NOT_READ.to_owned());
        let role = match roles.get(role_arn).unwrap_or(&unread) {
            Err(problem) => {
                return vec![Expect::problem(
                    format!("its target's role: {problem}"),
                    restore,
                )];
            }
            Ok(role) => role,
        };
        let may_send = role.may("sqs:SendMessage", direct.arn);
        let trusted = trusted_for_rule(role, role_arn, rule, self.account);
        let admitted = match &direct.policy {
            Err(e) => Decision::Undetermined { why: e.clone() },
            Ok(policy) => {
                let hub_account = aws_model::arn::arn_account(direct.arn).unwrap_or_default();
                let context = [
                    ("aws:PrincipalArn", role_arn),
                    ("aws:PrincipalAccount", self.account),
                    ("aws:SecureTransport", "true"),
                ];
                authorize_role(
                    &role.identity(),
                    policy,
                    ResourcePolicy::Ordinary,
                    hub_account,
                    &Request {
                        principal: Principal::Attached,
                        action: "sqs:SendMessage",
                        resource: direct.arn,
                        context: &context,
                    },
                )
            }
        };
        vec![
            Expect::that(
                may_send.is_allowed(),
                format!("→ the hub's direct queue as {}", role.name()),
            )
            .otherwise(
                format!(
                    "its target's role {} may not sqs:SendMessage on {} ({may_send})",
                    role.name(),
                    direct.arn
                ),
                restore.clone(),
            ),
            trust_row(role, &trusted, restore),
            Expect::quietly(admitted.is_allowed()).otherwise(
                format!(
                    "the hub's direct queue refuses {} ({admitted})",
                    role.name()
                ),
                format!(
                    "update the base stack {} so that its ServedAccounts lists {} (or \
                     OrganizationId names its organisation): DirectQueuePolicy admits those \
                     accounts' direct roles",
                    direct.base_stack, self.account
                ),
            ),
        ]
    }
}

/// What a role [`HubBus::judge`] did not read is said to be.
const NOT_READ: &str = "not read";

/// The row of a rule target's role that EventBridge must be able to assume for the rule.
fn trust_row(role: &Role, trusted: &Decision, restore: String) -> Expect {
    Expect::quietly(trusted.is_allowed()).otherwise(
        format!(
            "EventBridge may not assume {} for this rule ({trusted})",
            role.name()
        ),
        restore,
    )
}

/// What the trust policy of the role at `role_arn` decides for EventBridge assuming it for the
/// rule `rule_arn`.
fn trusted_for_rule(role: &Role, role_arn: &str, rule_arn: &str, account: &str) -> Decision {
    let trust = match &role.trust {
        Ok(trust) => trust,
        Err(e) => return Decision::Undetermined { why: e.clone() },
    };
    let context = [("aws:SourceArn", rule_arn), ("aws:SourceAccount", account)];
    evaluate(
        std::slice::from_ref(trust),
        &Request {
            principal: Principal::Service("events.amazonaws.com"),
            action: "sts:AssumeRole",
            resource: role_arn,
            context: &context,
        },
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use aws_model::{
        documents::{BaseQueue, BaseSite, base_queue_policy},
        stacks::SPOKE_TEMPLATE,
        template::{Stage, Template},
    };
    use serde_json::Value;

    use super::*;
    use crate::check;

    const MEMBER: &str = "111111111111";
    const HUB: &str = "123456789012";
    const REGION: &str = "us-east-1";
    const BUS: &str = "arn:aws:events:us-east-1:123456789012:event-bus/ir-hub";
    const QUEUE: &str = "arn:aws:sqs:us-east-1:123456789012:ir-direct";
    const RULE: &str =
        "arn:aws:events:us-east-1:111111111111:rule/interruption-router-spot-interruption";
    const FORWARD: &str = "arn:aws:iam::111111111111:role/spoke-ForwardToHubRole-X";
    const DIRECT: &str =
        "arn:aws:iam::111111111111:role/interruption-router-spoke-direct-us-east-1";

    /// spoke.yaml deployed in MEMBER with `HubDirectQueueArn`: `role`'s `path` there.
    fn spoke(role: &str, path: &[&str]) -> Policy {
        let template = Template::parse("spoke.yaml", SPOKE_TEMPLATE).unwrap();
        let stage = Stage::new("interruption-router-spoke", MEMBER, REGION)
            .parameter("HubEventBusArn", BUS)
            .parameter(
                "RouterRoleArn",
                "arn:aws:iam::123456789012:role/ir-RouterRole-X",
            )
            .parameter("HubDirectQueueArn", QUEUE);
        let deployed = template.deploy(&stage).unwrap();
        // An inline policy's document: the first of the role's Policies.
        let document: Value = match path {
            ["Policies", ..] => {
                deployed.property(role, &["Policies"]).unwrap()[0]["PolicyDocument"].clone()
            }
            _ => deployed.property(role, path).unwrap(),
        };
        Policy::parse(format!("{role} {path:?}"), &document.to_string()).unwrap()
    }

    /// The template's `role` as IAM would hold it, at `arn`.
    fn role(logical: &str, arn: &str) -> Role {
        Role::new(
            arn,
            vec![spoke(logical, &["Policies", "0", "PolicyDocument"])],
            None,
            Ok(spoke(logical, &["AssumeRolePolicyDocument"])),
        )
    }

    /// The hub's direct queue's policy as base.yaml renders it for a hub serving `served`.
    fn queue_policy(served: &str) -> Policy {
        let parameters = BTreeMap::from([
            ("CentralBus".to_owned(), "Enabled".to_owned()),
            ("ServedAccounts".to_owned(), served.to_owned()),
            ("CodeS3Bucket".to_owned(), "artifacts".to_owned()),
        ]);
        let arns = BTreeMap::from([("DirectQueue".to_owned(), QUEUE.to_owned())]);
        let site = BaseSite {
            stack: "ir",
            account: HUB,
            region: REGION,
            parameters: &parameters,
            arns: &arns,
        };
        let policy = base_queue_policy(&site, BaseQueue::Direct).unwrap();
        Policy::parse("the direct queue's policy", &policy.to_string()).unwrap()
    }

    fn hub(bus: Option<&'static str>, policy: Result<Policy, String>) -> HubBus<'static> {
        HubBus {
            bus,
            forward_role: Some(FORWARD.to_owned()),
            account: MEMBER,
            region: REGION,
            spoke_stack: "interruption-router-spoke",
            bus_check: "spoke:111111111111:hub-bus-policy".into(),
            direct: Some(DirectQueue {
                arn: QUEUE,
                policy,
                role_arn: DIRECT.to_owned(),
                base_stack: "ir",
            }),
        }
    }

    /// A role at `arn` that may `action` on `resource` and nothing else, trusted as `trust`.
    fn allowed_only(
        arn: &str,
        action: &str,
        resource: &str,
        trust: Result<Policy, String>,
    ) -> Role {
        let document = serde_json::json!({"Statement": [
            {"Effect": "Allow", "Action": action, "Resource": resource}]});
        let policy = Policy::parse("elsewhere", &document.to_string()).unwrap();
        Role::new(arn, vec![policy], None, trust)
    }

    fn target(arn: &str, role: Option<&str>) -> Target {
        Target {
            id: "hub".into(),
            arn: arn.into(),
            role_arn: role.map(str::to_owned),
            dead_letter_arn: None,
        }
    }

    /// The check of one rule whose target is `target`, with these roles read.
    fn judged(
        hub: &HubBus<'_>,
        target: Target,
        roles: Vec<Role>,
    ) -> (check::Check, Option<String>) {
        let roles: HashMap<String, Result<Role, String>> =
            roles.into_iter().map(|r| (r.arn.clone(), Ok(r))).collect();
        let (rows, forwarder) = hub.judged("spot", RULE, &[target], &roles);
        (check::evaluate("rule", rows), forwarder)
    }

    fn assert_fails(check: &check::Check, problem: &str) {
        assert!(
            !check.passed && check.detail.contains(problem),
            "{problem}: {check:?}"
        );
        assert!(
            check.fix.as_deref().is_some_and(|f| !f.is_empty()),
            "{check:?}"
        );
    }

    #[test]
    fn a_rule_forwarding_to_the_hub_bus_as_the_spoke_stacks_role_passes() {
        let hub = hub(Some(BUS), Ok(queue_policy(MEMBER)));
        let forward = role("ForwardToHubRole", FORWARD);
        let (check, forwarder) = judged(&hub, target(BUS, Some(FORWARD)), vec![forward]);
        assert!(check.passed, "{check:?}");
        assert_eq!(forwarder.as_deref(), Some(FORWARD));
    }

    #[test]
    fn a_rule_writing_the_direct_queue_as_the_direct_role_passes() {
        let hub = hub(Some(BUS), Ok(queue_policy(MEMBER)));
        let direct = role("DirectRole", DIRECT);
        let (check, forwarder) = judged(&hub, target(QUEUE, Some(DIRECT)), vec![direct]);
        assert!(check.passed, "{check:?}");
        assert_eq!(
            check.detail,
            "→ the hub's direct queue as interruption-router-spoke-direct-us-east-1"
        );
        assert_eq!(
            forwarder, None,
            "the bus policy's check has no role to judge"
        );
    }

    #[test]
    fn each_way_a_forwarding_rule_breaks_fails_with_its_fix() {
        let forward = role("ForwardToHubRole", FORWARD);
        let hub_with_bus = hub(Some(BUS), Ok(queue_policy(MEMBER)));
        let (check, _) = judged(
            &hub(None, Ok(queue_policy(MEMBER))),
            target(BUS, None),
            vec![],
        );
        assert_fails(&check, "the base stack has no central bus");
        let other = "arn:aws:events:us-east-1:999999999999:event-bus/other";
        let (check, _) = judged(&hub_with_bus, target(other, Some(FORWARD)), vec![]);
        assert_fails(&check, "does not target the hub bus");
        let (check, _) = judged(&hub_with_bus, target(BUS, None), vec![]);
        assert_fails(&check, "its hub target has no role");
        // A role that may put events elsewhere only, or that no rule may use.
        let elsewhere = allowed_only(
            FORWARD,
            "events:PutEvents",
            "arn:aws:events:us-east-1:123456789012:event-bus/other",
            forward.trust.clone(),
        );
        let roles = HashMap::from([(FORWARD.to_owned(), Ok(elsewhere))]);
        let (rows, _) = hub_with_bus.judged("spot", RULE, &[target(BUS, Some(FORWARD))], &roles);
        assert_fails(&check::evaluate("rule", rows), "may not events:PutEvents");
        let untrusted = Role::new(
            FORWARD,
            vec![spoke(
                "ForwardToHubRole",
                &["Policies", "0", "PolicyDocument"],
            )],
            None,
            Ok(Policy::parse("nobody", r#"{"Statement": []}"#).unwrap()),
        );
        let roles = HashMap::from([(FORWARD.to_owned(), Ok(untrusted))]);
        let (rows, _) = hub_with_bus.judged("spot", RULE, &[target(BUS, Some(FORWARD))], &roles);
        assert_fails(&check::evaluate("rule", rows), "EventBridge may not assume");
    }

    #[test]
    fn each_way_a_direct_rule_breaks_fails_with_its_fix() {
        let direct = role("DirectRole", DIRECT);
        let admitted = hub(Some(BUS), Ok(queue_policy(MEMBER)));
        // No role, or another role than the one the router checks senders against.
        let (check, _) = judged(&admitted, target(QUEUE, None), vec![]);
        assert_fails(&check, "its direct target has no role");
        let (check, _) = judged(&admitted, target(QUEUE, Some(FORWARD)), vec![]);
        assert_fails(&check, "dead-lettered foreign-sender");
        // A hub serving other accounts only: its queue's policy refuses the role.
        let refused = hub(Some(BUS), Ok(queue_policy("222222222222")));
        let (check, _) = judged(&refused, target(QUEUE, Some(DIRECT)), vec![direct]);
        assert_fails(&check, "the hub's direct queue refuses");
        // A role that may send elsewhere only.
        let elsewhere = allowed_only(
            DIRECT,
            "sqs:SendMessage",
            "arn:aws:sqs:us-east-1:123456789012:ir-ingest",
            role("DirectRole", DIRECT).trust,
        );
        let roles = HashMap::from([(DIRECT.to_owned(), Ok(elsewhere))]);
        let (rows, _) = admitted.judged("spot", RULE, &[target(QUEUE, Some(DIRECT))], &roles);
        assert_fails(&check::evaluate("rule", rows), "may not sqs:SendMessage");
        // A role that could not be read.
        let roles = HashMap::from([(DIRECT.to_owned(), Err("NoSuchEntity".to_owned()))]);
        let (rows, _) = admitted.judged("spot", RULE, &[target(QUEUE, Some(DIRECT))], &roles);
        assert_fails(&check::evaluate("rule", rows), "NoSuchEntity");
    }
}
