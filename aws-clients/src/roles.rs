//! An IAM role's policies read from IAM ([`aws_model::roles::Role`] judges them).

use aws_model::{arn::arn_name_after_slash, policy::Policy, roles::Role};

use crate::aws::{Aws, describe};

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
    Ok(Role::new(arn.to_owned(), identity, boundary, trust))
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
