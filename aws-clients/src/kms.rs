//! A KMS key read from KMS ([`aws_model::kms::Key`]).

use aws_model::{kms::Key, policy::Policy};

use crate::aws::{Aws, describe};

/// DescribeKey and GetKeyPolicy (`default`) of `key_id` (an id, an ARN or an alias); the error
/// names the call that failed and what AWS said.
pub async fn load_key(aws: &Aws, key_id: &str) -> Result<Key, String> {
    let described = aws
        .kms
        .describe_key()
        .key_id(key_id)
        .send()
        .await
        .map_err(|e| format!("DescribeKey {key_id}: {}", describe(&e)))?;
    let metadata = described
        .key_metadata()
        .ok_or_else(|| format!("DescribeKey {key_id} returned no key"))?;
    let arn = metadata.arn().unwrap_or(key_id).to_owned();
    let policy = aws
        .kms
        .get_key_policy()
        .key_id(&arn)
        .policy_name("default")
        .send()
        .await
        .map_err(|e| format!("GetKeyPolicy {arn}: {}", describe(&e)))?;
    let policy = Policy::parse(
        format!("key policy of {arn}"),
        policy.policy().unwrap_or_default(),
    )?;
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
