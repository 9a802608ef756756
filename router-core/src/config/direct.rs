//! `DIRECT_QUEUE_ARN`: the hub's direct queue, which member accounts' rules write themselves
//! ([`crate::direct`]).

use super::ConfigError;
use crate::accounts::is_account_id;

/// What a member account's direct role adds to the spoke role's name, before the hub's region:
/// `<SPOKE_ROLE_NAME>-direct-<region>` at the spoke role's path (spoke.yaml names it so;
/// base.yaml's direct queue policy admits it by that ARN).
pub const DIRECT_ROLE_SUFFIX: &str = "-direct";

/// The direct queue's ARN, if set: `arn:<partition>:sqs:<region>:<account>:<name>`.
pub(super) fn direct_queue_arn(value: Option<String>) -> Result<Option<String>, ConfigError> {
    let Some(value) = value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let parts: Vec<&str> = value.split(':').collect();
    let ok = matches!(
        parts.as_slice(),
        ["arn", partition, "sqs", region, account, name]
            if partition.starts_with("aws") && !region.is_empty() && is_account_id(account)
                && !name.is_empty()
    );
    if ok {
        return Ok(Some(value));
    }
    Err(ConfigError {
        var: "DIRECT_QUEUE_ARN",
        value,
        problem: "it is not an SQS queue ARN".into(),
        fix: "set it to the base stack's direct queue (its DirectQueueArn output; base.yaml sets \
              it with CentralBus=Enabled), or unset it if no member rule delivers directly"
            .into(),
    })
}
