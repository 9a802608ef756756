//! An IAM role's policies read once from IAM: its inline and managed identity policies, capped by
//! its permissions boundary, and its trust policy. `routerctl verify` judges the router, spoke and
//! Karpenter roles with them; the Karpenter stand-in (`local-aws`) decides with them whether its
//! role may decrypt its queue.

use crate::{
    access::Identity,
    aws::{Aws, arn_name_after_slash, describe},
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
    /// A role with these policies, as [`load_role`] reads one from IAM: for judging what a
    /// template's role may do without asking IAM.
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

/// The role's identity policies, permission boundary and trust policy. Errors carry their own fix.
pub async fn load_role(aws: &Aws, arn: &str) -> Result<Role, (String, String)> {
    const READ: &str = "run verify with a principal allowed iam:GetRole, iam:ListRolePolicies, \
                        iam:GetRolePolicy, iam:ListAttachedRolePolicies, iam:GetPolicy and \
                        iam:GetPolicyVersion";
    const PARSE: &str = "IAM returned a policy document verify cannot read: check it with aws iam \
                         get-role-policy / get-policy-version";
    let read = |e: String| (e, READ.to_owned());
    let parse = |e: String| (e, PARSE.to_owned());
    let name = arn_name_after_slash(arn);
    let iam = &aws.iam;
    let role = iam
        .get_role()
        .role_name(name)
        .send()
        .await
        .map_err(|e| read(format!("GetRole {name}: {}", describe(&e))))?;
    let trust = match role.role().and_then(|r| r.assume_role_policy_document()) {
        Some(doc) => Policy::parse_iam(format!("trust policy of {name}"), doc),
        None => Err(format!("GetRole {name} returned no trust policy")),
    };
    let mut identity = Vec::new();
    let inline = iam
        .list_role_policies()
        .role_name(name)
        .send()
        .await
        .map_err(|e| read(format!("ListRolePolicies {name}: {}", describe(&e))))?;
    for policy in inline.policy_names() {
        let doc = iam
            .get_role_policy()
            .role_name(name)
            .policy_name(policy)
            .send()
            .await
            .map_err(|e| read(format!("GetRolePolicy {name}/{policy}: {}", describe(&e))))?;
        identity.push(
            Policy::parse_iam(format!("inline policy {policy}"), doc.policy_document())
                .map_err(parse)?,
        );
    }
    let attached = iam
        .list_attached_role_policies()
        .role_name(name)
        .send()
        .await
        .map_err(|e| read(format!("ListAttachedRolePolicies {name}: {}", describe(&e))))?;
    let managed_error = |(e, api): (String, bool)| if api { read(e) } else { parse(e) };
    for policy in attached.attached_policies() {
        if let Some(arn) = policy.policy_arn() {
            identity.push(managed_policy(aws, arn).await.map_err(managed_error)?);
        }
    }
    let boundary = match role
        .role()
        .and_then(|r| r.permissions_boundary())
        .and_then(|b| b.permissions_boundary_arn())
    {
        Some(arn) => Some(managed_policy(aws, arn).await.map_err(managed_error)?),
        None => None,
    };
    Ok(Role {
        arn: arn.to_owned(),
        identity,
        boundary,
        trust,
    })
}

/// A managed policy's default version; the flag says whether an API call (not parsing) failed.
async fn managed_policy(aws: &Aws, arn: &str) -> Result<Policy, (String, bool)> {
    let policy = aws
        .iam
        .get_policy()
        .policy_arn(arn)
        .send()
        .await
        .map_err(|e| (format!("GetPolicy {arn}: {}", describe(&e)), true))?;
    let version = policy
        .policy()
        .and_then(|p| p.default_version_id())
        .ok_or_else(|| (format!("{arn} has no default version"), false))?;
    let doc = aws
        .iam
        .get_policy_version()
        .policy_arn(arn)
        .version_id(version)
        .send()
        .await
        .map_err(|e| (format!("GetPolicyVersion {arn}: {}", describe(&e)), true))?;
    let text = doc
        .policy_version()
        .and_then(|v| v.document())
        .ok_or_else(|| (format!("{arn} {version} has no document"), false))?;
    Policy::parse_iam(
        format!("managed policy {}", arn_name_after_slash(arn)),
        text,
    )
    .map_err(|e| (e, false))
}
