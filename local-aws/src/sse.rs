//! SQS server-side encryption as a caller meets it, where moto lets every caller through: a queue
//! under a KMS key (`KmsMasterKeyId`) is read only by a caller KMS lets decrypt with it. SQS calls
//! KMS with the caller's own credentials (SQS developer guide, "Key management"), so a receive
//! fails with `KmsDisabled` when the key is not enabled, `KmsNotFound` when it does not exist, and
//! `KmsAccessDenied` when the key policy, with the caller's policies and permissions boundary,
//! does not allow `kms:Decrypt` through SQS. The decision is [`aws_model::access`]'s, the one
//! `routerctl verify` judges a key by.
//!
//! A queue under SSE-SQS, or the AWS-managed `alias/aws/sqs` (whose policy admits every principal
//! of the account that may use SQS), needs nothing of the caller.

use aws_sdk_sqs::types::QueueAttributeName;

use aws_clients::{aws::Aws, kms::load_key, roles::load_role};
use aws_model::{access::role_through_sqs, resources::ReadError};

/// Why SQS refuses `role`'s receive from the queue at `url` (SQS's error code first), or `None`
/// when it would decrypt. `role` is the caller's ARN.
pub async fn receive_refused(aws: &Aws, url: &str, role: &str) -> Option<String> {
    let attributes = match aws
        .sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::KmsMasterKeyId)
        .send()
        .await
    {
        Ok(out) => out,
        // The receive itself says what is wrong with the queue.
        Err(_) => return None,
    };
    let key = attributes
        .attributes()
        .and_then(|a| a.get(&QueueAttributeName::KmsMasterKeyId))
        .filter(|k| !k.is_empty())?;
    if key == "alias/aws/sqs" || key.ends_with(":alias/aws/sqs") {
        return None;
    }
    // A key DescribeKey cannot find is SQS's KmsNotFound; a key policy that cannot be read
    // decides nothing, so the receive is refused rather than let through.
    let key = match load_key(aws, key).await {
        Ok(key) => key,
        Err(ReadError::Call { call, error }) if call.starts_with("DescribeKey") => {
            return Some(format!("KmsNotFound: {call}: {error}"));
        }
        Err(e) => return Some(format!("KmsAccessDenied: {e}")),
    };
    if let Some(state) = &key.disabled {
        return Some(format!("KmsDisabled: {} is {state}", key.arn));
    }
    let role = match load_role(aws, role).await {
        Ok(role) => role,
        Err(e) => return Some(format!("KmsAccessDenied: {e}")),
    };
    let decision = role_through_sqs(
        &role.identity(),
        &key.arn,
        &key.policy,
        "kms:Decrypt",
        &aws.region,
    );
    (!decision.is_allowed()).then(|| {
        format!(
            "KmsAccessDenied: {} may not kms:Decrypt with {}: {decision}",
            role.arn, key.arn
        )
    })
}
