//! What a role may do once AWS has combined every policy that bears on the request: its identity
//! policies within its permissions boundary, and the resource's policy, which for a KMS key is
//! the primary authority. The statements themselves are judged by [`crate::policy`].
//!
//! As AWS documents it:
//!
//! * Permissions boundary (IAM user guide, "Permissions boundaries for IAM entities"): a role may
//!   do what both its identity policies and its boundary allow; an explicit Deny in any of them
//!   wins. A resource policy that grants the role's ARN directly is limited by the boundary's
//!   implicit deny as well.
//! * KMS key policy (KMS developer guide, "Key policies", "Default key policy"): no principal may
//!   use a key unless its key policy allows it. The policy either names the principal (enough on
//!   its own within the key's account) or allows the account (`arn:…:root`, or the account id),
//!   which lets the account's IAM policies grant it: then the principal's identity policy must
//!   allow it too. An identity policy alone never is enough. Across accounts both must allow.
//! * Any other resource policy (SQS queues): within one account either the identity policies or
//!   a grant naming the principal suffices (IAM policy evaluation logic).

use crate::policy::{Decision, Policy, Principal, Request, evaluate, first_refusal};

/// A role as IAM sees it when it makes a request.
#[derive(Debug, Clone, Copy)]
pub struct Identity<'a> {
    pub arn: &'a str,
    pub policies: &'a [Policy],
    /// The managed policy set as its permissions boundary, if any.
    pub boundary: Option<&'a Policy>,
}

impl Identity<'_> {
    /// The identity policies' decision, capped by the boundary.
    pub fn decide(&self, request: &Request<'_>) -> Decision {
        let request = Request {
            principal: Principal::Attached,
            ..*request
        };
        self.within_boundary(evaluate(self.policies, &request), &request)
    }

    /// `granted` (an Allow from any policy) as the boundary leaves it: an explicit Deny or an
    /// implicit deny of the boundary wins.
    fn within_boundary(&self, granted: Decision, request: &Request<'_>) -> Decision {
        let Some(boundary) = self.boundary else {
            return granted;
        };
        let request = Request {
            principal: Principal::Attached,
            ..*request
        };
        match (evaluate(std::slice::from_ref(boundary), &request), granted) {
            (_, granted @ (Decision::Denied { .. } | Decision::Undetermined { .. })) => granted,
            (Decision::Allowed { .. }, granted) => granted,
            (Decision::NotAllowed, Decision::Allowed { by }) => Decision::Denied {
                by: format!(
                    "the permissions boundary {} (it does not allow {}; {by} does)",
                    boundary.source, request.action
                ),
            },
            (capped, _) => capped,
        }
    }
}

/// What kind of resource policy the request meets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourcePolicy {
    /// A queue's (or any resource's but a key's): within one account, one Allow suffices.
    Ordinary,
    /// A KMS key's: nothing is allowed unless the key policy allows it.
    Key,
}

/// AWS's answer for `identity`'s `request` on a resource in `resource_account` whose policy is
/// `resource` (see the module documentation).
pub fn authorize_role(
    identity: &Identity<'_>,
    resource: &Policy,
    kind: ResourcePolicy,
    resource_account: &str,
    request: &Request<'_>,
) -> Decision {
    let own = identity.decide(request);
    let resource = std::slice::from_ref(resource);
    // Any statement that applies to the role, by its ARN or through its account.
    let applying = evaluate(
        resource,
        &Request {
            principal: Principal::Aws(identity.arn),
            ..*request
        },
    );
    if let Some(refusal) = first_refusal([&own, &applying]) {
        return refusal;
    }
    let direct = evaluate(
        resource,
        &Request {
            principal: Principal::Named(identity.arn),
            ..*request
        },
    );
    let principal_account = crate::arn::arn_account(identity.arn).unwrap_or_default();
    let same_account = principal_account == resource_account;
    match (kind, same_account) {
        // A grant naming the role, capped by its boundary; or the account's grant, which its own
        // policies must then use.
        (_, true) if direct.is_allowed() => identity.within_boundary(direct, request),
        (ResourcePolicy::Ordinary, true) if own.is_allowed() => own,
        (ResourcePolicy::Key, true) if applying.is_allowed() && own.is_allowed() => own,
        (_, false) if applying.is_allowed() && own.is_allowed() => own,
        _ => Decision::NotAllowed,
    }
}

/// KMS's answer for a service principal (`events.amazonaws.com`) using a key: its key policy
/// alone decides.
pub fn authorize_service(key_policy: &Policy, service: &str, request: &Request<'_>) -> Decision {
    evaluate(
        std::slice::from_ref(key_policy),
        &Request {
            principal: Principal::Service(service),
            ..*request
        },
    )
}

/// KMS's answer when SQS uses the queue key `key` (its ARN and policy) for `identity`'s send
/// (`kms:GenerateDataKey`, `kms:Decrypt`) or receive (`kms:Decrypt`) in `region`: SQS calls KMS
/// with the caller's own credentials, so the request carries `kms:ViaService`
/// `sqs.<region>.amazonaws.com` and the caller's account (SQS developer guide, "Key management").
/// What `routerctl verify` judges a role's use of a key by, and what the Karpenter stand-in
/// receives by.
pub fn role_through_sqs(
    identity: &Identity<'_>,
    key: &str,
    key_policy: &Policy,
    action: &str,
    region: &str,
) -> Decision {
    let via_sqs = format!("sqs.{region}.amazonaws.com");
    let caller_account = crate::arn::arn_account(identity.arn).unwrap_or_default();
    let context = [
        ("kms:ViaService", via_sqs.as_str()),
        ("kms:CallerAccount", caller_account),
        ("aws:PrincipalArn", identity.arn),
    ];
    let request = Request {
        principal: Principal::Attached,
        action,
        resource: key,
        context: &context,
    };
    let key_account = crate::arn::arn_account(key).unwrap_or_default();
    authorize_role(
        identity,
        key_policy,
        ResourcePolicy::Key,
        key_account,
        &request,
    )
}

/// KMS's answer when SQS uses the queue key `key` for EventBridge delivering an event of a rule of
/// `account`. The request carries `aws:SourceAccount`; whether it carries the rule's
/// `aws:SourceArn` no AWS document says, so a key policy must not depend on it: `source_arn` is
/// `Some` only to tell such a policy apart ([`EventBridgeUse`]).
pub fn eventbridge_through_sqs(
    key: &str,
    key_policy: &Policy,
    account: &str,
    source_arn: Option<&str>,
    action: &str,
) -> Decision {
    let mut context = vec![("aws:SourceAccount", account)];
    context.extend(source_arn.map(|arn| ("aws:SourceArn", arn)));
    authorize_service(
        key_policy,
        "events.amazonaws.com",
        &Request {
            principal: Principal::Attached,
            action,
            resource: key,
            context: &context,
        },
    )
}

/// How a key policy treats EventBridge's deliveries for one rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventBridgeUse {
    /// Allowed whether or not SQS's call to KMS names the rule.
    Allowed,
    /// Allowed only when the call carries the rule's `aws:SourceArn`: deliveries may fail with
    /// nothing but the rule's own metrics saying so.
    OnlyWithSourceArn,
    /// Refused (the decision says by what).
    Refused(Decision),
}

/// [`EventBridgeUse`] of `action` for `rule` (an ARN of `account`).
pub fn eventbridge_use(
    key: &str,
    key_policy: &Policy,
    account: &str,
    rule: &str,
    action: &str,
) -> EventBridgeUse {
    let without = eventbridge_through_sqs(key, key_policy, account, None, action);
    if without.is_allowed() {
        return EventBridgeUse::Allowed;
    }
    let with = eventbridge_through_sqs(key, key_policy, account, Some(rule), action);
    if with.is_allowed() {
        EventBridgeUse::OnlyWithSourceArn
    } else {
        EventBridgeUse::Refused(with)
    }
}

#[cfg(test)]
mod tests;
