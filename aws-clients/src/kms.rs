//! A KMS key read from KMS ([`aws_model::kms::Key`]).

use aws_call_error::call_error;
use aws_model::{kms::Key, policy::Policy, resources::ReadError};

use crate::aws::Aws;

/// DescribeKey and GetKeyPolicy (`default`) of `key_id` (an id, an ARN or an alias); the error
/// names the call that failed and what AWS said.
pub async fn load_key(aws: &Aws, key_id: &str) -> Result<Key, ReadError> {
    let described = aws
        .kms
        .describe_key()
        .key_id(key_id)
        .send()
        .await
        .map_err(|e| ReadError::call(format!("DescribeKey {key_id}"), call_error(e)))?;
    let metadata = described
        .key_metadata()
        .ok_or_else(|| ReadError::Unreadable(format!("DescribeKey {key_id} returned no key")))?;
    let arn = metadata.arn().unwrap_or(key_id).to_owned();
    let policy = aws
        .kms
        .get_key_policy()
        .key_id(&arn)
        .policy_name("default")
        .send()
        .await
        .map_err(|e| ReadError::call(format!("GetKeyPolicy {arn}"), call_error(e)))?;
    let policy = Policy::parse(
        format!("key policy of {arn}"),
        policy.policy().unwrap_or_default(),
    )
    .map_err(ReadError::Unreadable)?;
    Ok(Key {
        aws_managed: metadata.key_manager().map(|m| m.as_str()) == Some("AWS"),
        disabled: (!metadata.enabled()).then(|| {
            metadata
                .key_state()
                .map_or("disabled", |s| s.as_str())
                .to_owned()
        }),
        arn,
        policy,
    })
}
