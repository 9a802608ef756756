//! `direct-queue`, `direct-queue:policy`, `event-source-mapping:direct` (CentralBus=Enabled): the
//! queue member accounts' rules write themselves in the hub's region exists, is encrypted,
//! redrives to the DLQ and is read by a mapping with ReportBatchItemFailures; and its policy
//! admits the served accounts' direct roles (`<SpokeRoleName>-direct-<region>`) and no other
//! principal, this account's included. Whether a member's rules reach it is judged per member
//! (`verify --account`, its rules).

use crate::deployment::{Base, Queue, load_queue};
use aws_model::{
    arn::arn_name,
    policy::{Decision, Policy, Principal, Request, evaluate},
};
use router_core::config::{DEFAULT_SPOKE_ROLE_NAME, DIRECT_ROLE_SUFFIX};

use super::{
    queues::{check_event_source_mapping, check_read_queue},
    report::{Check, fail},
};
use crate::{
    check::{self, Expect},
    cloud::Cloud,
};

pub(super) async fn check(
    aws: &impl Cloud,
    base: &Base,
    function_timeout: Option<i32>,
    checks: &mut Vec<Check>,
) {
    let Some(arn) = base.output("DirectQueueArn") else {
        return;
    };
    match load_queue(aws, arn_name(arn)).await {
        Ok(queue) => {
            let dlq = base.output("DeadLetterQueueArn");
            checks.push(check_read_queue(
                "direct-queue",
                &queue,
                function_timeout,
                dlq,
            ));
            checks.push(judge_policy(base, &queue));
            checks.push(
                check_event_source_mapping(aws, base, &queue, "event-source-mapping:direct").await,
            );
        }
        Err(problem) => checks.push(fail(
            "direct-queue",
            problem,
            format!(
                "the stack's DirectQueue was deleted outside CloudFormation: delete and re-deploy \
                 the stack {}, or re-create the queue as base.yaml defines it",
                base.name
            ),
        )),
    }
}

/// The policy check's name, which its early failures share.
const POLICY: &str = "direct-queue:policy";

/// `direct-queue:policy`, judged on the policy SQS holds.
pub(super) fn judge_policy(base: &Base, queue: &Queue) -> Check {
    let fix = format!(
        "update the base stack {} with this release's base.yaml (DirectQueuePolicy comes from \
         ServedAccounts or OrganizationId, SpokeRoleName and SpokeRolePath)",
        base.name
    );
    let policy = match read_policy(queue, &fix) {
        Ok(policy) => policy,
        Err(failed) => return failed,
    };
    let judged = DirectPolicy {
        base,
        queue,
        policy,
        org: base.parameter("OrganizationId").filter(|o| !o.is_empty()),
        direct: direct_role(base, queue),
        fix,
    };
    let served: Vec<&str> = base
        .parameter("ServedAccounts")
        .unwrap_or_default()
        .split(',')
        .filter(|a| a.len() == 12)
        .collect();
    // Expect → what was found → the fix.
    let mut rows = Vec::new();
    for account in &served {
        rows.extend(judged.served_account(account));
    }
    // An organisation (ServedAccounts=*): any of its accounts' direct roles, this one standing
    // for them all.
    if let Some(org) = judged.org {
        rows.push(judged.organisation(org));
    }
    rows.push(judged.denies_others());
    check::evaluate(POLICY, rows)
}

/// The queue's policy, or the failure when it has none or one that does not parse.
fn read_policy(queue: &Queue, fix: &str) -> Result<Policy, Check> {
    match queue.attribute("Policy") {
        None => Err(fail(
            POLICY,
            format!(
                "{} has no policy: no member account's rule can deliver to it",
                queue.name
            ),
            fix,
        )),
        Some(text) => Policy::parse(format!("policy of {}", queue.name), text)
            .map_err(|e| fail(POLICY, e, fix)),
    }
}

/// The direct role's path and name (`<SpokeRolePath><SpokeRoleName>-direct-<region>`), as the
/// base stack names it in the queue's region.
fn direct_role(base: &Base, queue: &Queue) -> String {
    let region = queue.arn.split(':').nth(3).unwrap_or_default();
    let name = base
        .parameter("SpokeRoleName")
        .filter(|n| !n.is_empty())
        .unwrap_or(DEFAULT_SPOKE_ROLE_NAME);
    let path = base
        .parameter("SpokeRolePath")
        .filter(|p| !p.is_empty())
        .unwrap_or("/");
    format!("{path}{name}{DIRECT_ROLE_SUFFIX}-{region}")
}

/// The direct queue's policy as read, with what the base stack meant it to admit.
struct DirectPolicy<'a> {
    base: &'a Base,
    queue: &'a Queue,
    policy: Policy,
    /// The organisation the base stack serves (OrganizationId), if any.
    org: Option<&'a str>,
    /// The direct role's path and name ([`direct_role`]).
    direct: String,
    fix: String,
}

impl DirectPolicy<'_> {
    /// The ARN of `account`'s role at `role` (its path and name).
    fn role(&self, account: &str, role: &str) -> String {
        format!("arn:{}:iam::{account}:role{role}", self.base.partition)
    }

    /// Whether `principal` may send to the queue over TLS (from within the organisation, if
    /// the stack serves one).
    fn decide(&self, principal: &str) -> Decision {
        let account = principal.split(':').nth(4).unwrap_or_default();
        let mut context = vec![
            ("aws:PrincipalArn", principal),
            ("aws:PrincipalAccount", account),
            ("aws:SecureTransport", "true"),
        ];
        context.extend(self.org.map(|o| ("aws:PrincipalOrgID", o)));
        evaluate(
            std::slice::from_ref(&self.policy),
            &Request {
                principal: Principal::Aws(principal),
                action: "sqs:SendMessage",
                resource: &self.queue.arn,
                context: &context,
            },
        )
    }

    /// A served account's direct role must be admitted, and its other roles not.
    fn served_account(&self, account: &str) -> [Expect; 2] {
        let member = self.role(account, &self.direct);
        let decision = self.decide(&member);
        let admitted = Expect::that(
            decision.is_allowed(),
            format!("{account}'s direct role may send"),
        )
        .otherwise(
            format!(
                "it does not admit {member} ({decision}): that account's direct rules fail, and \
                 its events are lost unless its spoke forwards to the bus"
            ),
            self.fix.clone(),
        );
        let other = self.role(account, "/Admin");
        let decision = self.decide(&other);
        let others_refused = Expect::quietly(!decision.is_allowed()).otherwise(
            format!(
                "it admits {other} ({decision}): any role of a served account may post made-up \
                 interruptions (the router refuses those naming other accounts, not its own)"
            ),
            self.fix.clone(),
        );
        [admitted, others_refused]
    }

    /// The organisation's accounts' direct roles must be admitted.
    fn organisation(&self, org: &str) -> Expect {
        let member = self.role("000000000000", &self.direct);
        let decision = self.decide(&member);
        Expect::that(
            decision.is_allowed(),
            format!("{org}'s accounts' direct roles may send"),
        )
        .otherwise(
            format!(
                "it does not admit the direct roles of {org}'s accounts ({decision}): their \
                 direct rules fail"
            ),
            self.fix.clone(),
        )
    }

    /// Every other sender, this account's own principals included, must be denied outright.
    fn denies_others(&self) -> Expect {
        let own = self.role(&self.base.account, "/Admin");
        let decision = self.decide(&own);
        Expect::that(
            matches!(decision, Decision::Denied { .. }),
            "denies every other sender",
        )
        .otherwise(
            format!(
                "it does not deny {own} ({decision}): a principal of account {} whose identity \
                 policy allows sqs:SendMessage can post a made-up interruption",
                self.base.account
            ),
            self.fix.clone(),
        )
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use aws_model::documents::{BaseQueue, BaseSite, base_queue_policy};
    use serde_json::Value;

    use super::*;
    use crate::fixtures::{HUB, base};

    const ARN: &str = "arn:aws:sqs:us-east-1:123456789012:ir-direct";
    const SERVED: &str = "111111111111,222222222222";

    /// The direct queue's policy as base.yaml renders it for a hub serving `served`.
    fn rendered(served: &str) -> Value {
        rendered_with(&[("ServedAccounts", served)])
    }

    /// The same for a hub deployed with `parameters` (and the central bus).
    fn rendered_with(parameters: &[(&str, &str)]) -> Value {
        let mut parameters: BTreeMap<String, String> = parameters
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        parameters.insert("CentralBus".into(), "Enabled".into());
        parameters.insert("CodeS3Bucket".into(), "artifacts".into());
        let arns = BTreeMap::from([("DirectQueue".to_owned(), ARN.to_owned())]);
        let site = BaseSite {
            stack: "ir",
            account: HUB,
            region: "us-east-1",
            parameters: &parameters,
            arns: &arns,
        };
        base_queue_policy(&site, BaseQueue::Direct).expect("the direct queue's policy")
    }

    fn queue(policy: Option<&Value>) -> Queue {
        Queue {
            name: "ir-direct".into(),
            arn: ARN.into(),
            url: "https://sqs.us-east-1.amazonaws.com/123456789012/ir-direct".into(),
            attributes: policy
                .map(|p| HashMap::from([("Policy".to_owned(), p.to_string())]))
                .unwrap_or_default(),
        }
    }

    /// (failing, the rendered report) of the check on `policy` for a hub serving SERVED.
    fn judged(policy: Option<&Value>) -> (bool, String) {
        judged_as(policy, &[("ServedAccounts", SERVED)])
    }

    /// The same, the hub deployed with `parameters` (and the central bus).
    fn judged_as(policy: Option<&Value>, parameters: &[(&str, &str)]) -> (bool, String) {
        let parameters = [&[("CentralBus", "Enabled")], parameters].concat();
        let base = base(&[("DirectQueueArn", ARN)], &parameters);
        let check = judge_policy(&base, &queue(policy));
        (!check.passed, format!("{check:?}"))
    }

    #[test]
    fn the_policy_base_yaml_renders_passes() {
        let (failed, text) = judged(Some(&rendered(SERVED)));
        assert!(!failed, "{text}");
    }

    #[test]
    fn a_served_account_the_policy_leaves_out_fails() {
        let (failed, text) = judged(Some(&rendered("111111111111")));
        assert!(failed, "{text}");
        assert!(
            text.contains("does not admit arn:aws:iam::222222222222:role/interruption-router-spoke-direct-us-east-1"),
            "{text}"
        );
    }

    /// Unpinned, the Allow alone is still held by the Deny; with the Deny widened to every role
    /// as well, any role of a served account may send.
    #[test]
    fn an_allow_not_pinned_to_the_direct_role_fails_once_the_deny_does_not_hold_it() {
        let mut policy = rendered(SERVED);
        policy["Statement"][0]["Condition"]
            .as_object_mut()
            .unwrap()
            .remove("ArnLike");
        assert!(
            !judged(Some(&policy)).0,
            "the Deny still refuses other roles"
        );
        policy["Statement"][1]["Condition"]["ArnNotLike"]["aws:PrincipalArn"] =
            Value::from("arn:aws:iam::*:role/*");
        let (failed, text) = judged(Some(&policy));
        assert!(failed, "{text}");
        assert!(
            text.contains("admits arn:aws:iam::111111111111:role/Admin"),
            "{text}"
        );
    }

    #[test]
    fn no_deny_of_other_senders_fails() {
        let mut policy = rendered(SERVED);
        policy["Statement"]
            .as_array_mut()
            .unwrap()
            .retain(|s| s["Sid"] != "DenySendersOtherThanDirectRoles");
        let (failed, text) = judged(Some(&policy));
        assert!(failed, "{text}");
        assert!(
            text.contains("does not deny arn:aws:iam::123456789012:role/Admin"),
            "{text}"
        );
    }

    #[test]
    fn no_policy_fails() {
        let (failed, text) = judged(None);
        assert!(failed, "{text}");
        assert!(text.contains("has no policy"), "{text}");
    }

    /// The policy names the role by the hub's SpokeRoleName and SpokeRolePath; judged as a hub
    /// with other ones, it fails; empty parameters are the defaults.
    #[test]
    fn the_direct_role_is_the_one_the_hubs_spoke_role_name_and_path_make() {
        let named = [
            ("ServedAccounts", SERVED),
            ("SpokeRoleName", "platform-spoke"),
            ("SpokeRolePath", "/platform/"),
        ];
        let policy = rendered_with(&named);
        let (failed, text) = judged_as(Some(&policy), &named);
        assert!(!failed, "{text}");
        let (failed, text) = judged(Some(&policy));
        assert!(failed, "{text}");
        assert!(text.contains("does not admit"), "{text}");
        let defaults = [
            ("ServedAccounts", SERVED),
            ("SpokeRoleName", ""),
            ("SpokeRolePath", ""),
        ];
        let (failed, text) = judged_as(Some(&rendered(SERVED)), &defaults);
        assert!(!failed, "{text}");
    }

    /// An organisation's hub: its accounts' direct roles may send (by aws:PrincipalOrgID); a
    /// policy that names accounts instead does not admit them.
    #[test]
    fn an_organisations_hub_admits_its_accounts_direct_roles() {
        let org = [("ServedAccounts", "*"), ("OrganizationId", "o-abcdefghij")];
        let (failed, text) = judged_as(Some(&rendered_with(&org)), &org);
        assert!(!failed, "{text}");
        assert!(
            text.contains("o-abcdefghij's accounts' direct roles may send"),
            "{text}"
        );
        let (failed, text) = judged_as(Some(&rendered(SERVED)), &org);
        assert!(failed, "{text}");
        assert!(
            text.contains("does not admit the direct roles of o-abcdefghij"),
            "{text}"
        );
    }
}
