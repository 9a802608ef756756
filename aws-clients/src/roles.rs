//! An IAM role's policies read from IAM ([`aws_model::roles::Role`] judges them).

use aws_call_error::call_error;
use aws_model::{arn::arn_name_after_slash, policy::Policy, resources::ReadError, roles::Role};

use crate::aws::Aws;

/// The role's identity policies, permission boundary and trust policy: GetRole,
/// ListRolePolicies, GetRolePolicy per inline policy, ListAttachedRolePolicies, and GetPolicy and
/// GetPolicyVersion per managed policy and the boundary. The error names the call that failed.
pub async fn load_role(aws: &Aws, arn: &str) -> Result<Role, ReadError> {
    let name = arn_name_after_slash(arn);
    let iam = &aws.iam;
    let role = iam
        .get_role()
        .role_name(name)
        .send()
        .await
        .map_err(|e| ReadError::call(format!("GetRole {name}"), call_error(e)))?;
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
        .map_err(|e| ReadError::call(format!("ListRolePolicies {name}"), call_error(e)))?;
    for policy in inline.policy_names() {
        let doc = iam
            .get_role_policy()
            .role_name(name)
            .policy_name(policy)
            .send()
            .await
            .map_err(|e| {
                ReadError::call(format!("GetRolePolicy {name}/{policy}"), call_error(e))
            })?;
        identity.push(
            Policy::parse_iam(format!("inline policy {policy}"), doc.policy_document())
                .map_err(ReadError::Unreadable)?,
        );
    }
    let attached = iam
        .list_attached_role_policies()
        .role_name(name)
        .send()
        .await
        .map_err(|e| ReadError::call(format!("ListAttachedRolePolicies {name}"), call_error(e)))?;
    for policy in attached.attached_policies() {
        if let Some(arn) = policy.policy_arn() {
            identity.push(managed_policy(aws, arn).await?);
        }
    }
    let boundary = match role
        .role()
        .and_then(|r| r.permissions_boundary())
        .and_then(|b| b.permissions_boundary_arn())
    {
        Some(arn) => Some(managed_policy(aws, arn).await?),
        None => None,
    };
    Ok(Role::new(arn.to_owned(), identity, boundary, trust))
}

/// A managed policy's default version.
async fn managed_policy(aws: &Aws, arn: &str) -> Result<Policy, ReadError> {
    let policy = aws
        .iam
        .get_policy()
        .policy_arn(arn)
        .send()
        .await
        .map_err(|e| ReadError::call(format!("GetPolicy {arn}"), call_error(e)))?;
    let version = policy
        .policy()
        .and_then(|p| p.default_version_id())
        .ok_or_else(|| ReadError::Unreadable(format!("{arn} has no default version")))?;
    let doc = aws
        .iam
        .get_policy_version()
        .policy_arn(arn)
        .version_id(version)
        .send()
        .await
        .map_err(|e| ReadError::call(format!("GetPolicyVersion {arn}"), call_error(e)))?;
    let text = doc
        .policy_version()
        .and_then(|v| v.document())
        .ok_or_else(|| ReadError::Unreadable(format!("{arn} {version} has no document")))?;
    Policy::parse_iam(
        format!("managed policy {}", arn_name_after_slash(arn)),
        text,
    )
    .map_err(ReadError::Unreadable)
}
