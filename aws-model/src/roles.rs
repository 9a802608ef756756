//! An IAM role's policies read once from IAM: its inline and managed identity policies, capped by
//! its permissions boundary, and its trust policy. `routerctl verify` judges the router, spoke and
//! Karpenter roles with them; the Karpenter stand-in (`local-aws`) decides with them whether its
//! role may decrypt its queue.

use crate::{
    access::Identity,
    arn::arn_name_after_slash,
    policy::{Decision, Policy, Principal, Request, evaluate, glob, strings},
};

pub struct Role {
    pub arn: String,
    identity: Vec<Policy>,
    boundary: Option<Policy>,
    /// Who may assume it; an error text if IAM's document could not be read.
    pub trust: Result<Policy, String>,
}

impl Role {
    /// A role with these policies, as `aws_clients::roles::load_role` reads one from IAM: for
    /// judging what a template's role may do without asking IAM.
    pub fn new(
        arn: impl Into<String>,
        identity: Vec<Policy>,
        boundary: Option<Policy>,
        trust: Result<Policy, String>,
    ) -> Self {
        Self {
            arn: arn.into(),
            identity,
            boundary,
            trust,
        }
    }

    /// The role's name (the last part of its ARN).
    pub fn name(&self) -> &str {
        arn_name_after_slash(&self.arn)
    }

    /// The resources the role's identity policies Allow `action` on, as written (patterns
    /// included): what `adopt` reads a Karpenter controller role's cluster from (its
    /// eks:DescribeCluster grant on `cluster/<name>`).
    pub fn allowed_resources(&self, action: &str) -> Vec<String> {
        let action = action.to_ascii_lowercase();
        self.identity
            .iter()
            .flat_map(|p| p.statements())
            .filter(|s| s["Effect"] == "Allow")
            .filter(|s| {
                strings(&s["Action"])
                    .iter()
                    .any(|a| glob(&a.to_ascii_lowercase(), &action))
            })
            .flat_map(|s| strings(&s["Resource"]))
            .collect()
    }

    /// The role as IAM sees it making a request: what [`crate::access`] combines with a
    /// resource's (or a key's) policy.
    pub fn identity(&self) -> Identity<'_> {
        Identity {
            arn: &self.arn,
            policies: &self.identity,
            boundary: self.boundary.as_ref(),
        }
    }

    /// The identity policies' decision, capped by the permission boundary.
    pub fn may(&self, action: &str, resource: &str) -> Decision {
        self.may_with(action, resource, &[])
    }

    /// As [`Role::may`], for a request carrying these condition keys.
    pub fn may_with(&self, action: &str, resource: &str, context: &[(&str, &str)]) -> Decision {
        let request = Request {
            principal: Principal::Attached,
            action,
            resource,
            context,
        };
        let decision = evaluate(&self.identity, &request);
        match (&self.boundary, decision.is_allowed()) {
            (Some(boundary), true) => match evaluate(std::slice::from_ref(boundary), &request) {
                Decision::Allowed { .. } => decision,
                capped => capped,
            },
            _ => decision,
        }
    }
}
