//! The parts of an ARN the tooling reads: its account, and the name at its end.

/// The last `:`-separated field of an ARN (a queue's name, for an SQS ARN).
pub fn arn_name(arn: &str) -> &str {
    arn.rsplit(':').next().unwrap_or(arn)
}

/// The last `/`-separated part of an ARN (a role's or a rule's name).
pub fn arn_name_after_slash(arn: &str) -> &str {
    arn.rsplit('/').next().unwrap_or(arn)
}

/// The account field of an ARN, if it has one.
pub fn arn_account(arn: &str) -> Option<&str> {
    arn.split(':').nth(4).filter(|a| !a.is_empty())
}
