//! `ingest-queue:key`, `dead-letter-queue:key`, `tenant:<cluster>:key`: a queue encrypted with a
//! KMS key (`KmsKey=Create`) can be used by everyone on the interruption's path. The key is
//! enabled and customer managed (never `aws/sqs`, whose policy admits no service principal, so
//! EventBridge cannot deliver to a queue under it), and its key policy, with each role's own
//! policies and permissions boundary, lets each principal do what SQS needs of it: EventBridge's
//! rules and a sender kms:GenerateDataKey and kms:Decrypt, a reader kms:Decrypt (SQS developer
//! guide, "Key management"), decided by [`aws_model::access`]. A queue under SSE-SQS has no such
//! check.

use aws_sdk_sqs::types::QueueAttributeName;

use super::{
    queues::{Queue, load_queue},
    report::Check,
    role::Role,
    stack::Base,
};
use crate::check::{self, Expect};
use aws_model::{
    access::{Identity, ResourcePolicy, authorize_role, authorize_service},
    aws::{Aws, arn_account, describe},
    policy::{Decision, Policy, Principal, Request},
};

/// What a producer needs of the key; a consumer needs only kms:Decrypt.
pub(crate) const PRODUCE: &[&str] = &["kms:GenerateDataKey", "kms:Decrypt"];
pub(crate) const CONSUME: &[&str] = &["kms:Decrypt"];

/// Who uses a queue's key, and for what.
pub(crate) enum KeyUser<'a> {
    /// EventBridge delivering for these rules (and writing their dead letters).
    Rules(&'a [String]),
    /// A role: `what` names it in messages ("the router role").
    Role {
        what: &'a str,
        identity: Identity<'a>,
        actions: &'a [&'a str],
    },
}

/// The key as KMS describes it.
pub(crate) struct Key {
    pub arn: String,
    pub aws_managed: bool,
    /// `None` when enabled, else its state.
    pub disabled: Option<String>,
    pub policy: Policy,
}

/// `alias/aws/sqs` as SQS accepts it in KmsMasterKeyId (the alias, or its ARN).
fn is_aws_managed_alias(key: &str) -> bool {
    key == "alias/aws/sqs" || key.ends_with(":alias/aws/sqs")
}

const AWS_MANAGED: &str = "its key policy cannot be changed and admits no service principal, so \
                           EventBridge cannot deliver to the queue";

/// The key check of `queue`, or `None` when the queue uses no KMS key (SSE-SQS).
pub(crate) async fn check(
    aws: &Aws,
    queue: &Queue,
    users: &[KeyUser<'_>],
    name: &str,
    redeploy: &str,
) -> Option<Check> {
    let key_id = queue.attribute(QueueAttributeName::KmsMasterKeyId)?;
    // By alias, SQS's way to name the AWS-managed key: nothing to look up.
    if is_aws_managed_alias(key_id) {
        return Some(check::evaluate(
            name,
            [aws_managed(&queue.name, key_id, redeploy)],
        ));
    }
    // Where: the key and its policy.
    let loaded = load_key(aws, key_id).await;
    let rows = match &loaded {
        Ok(key) => judge(key, queue, users, &aws.region, redeploy),
        Err(_) => vec![Expect::lookup(
            &loaded,
            "run verify with kms:DescribeKey and kms:GetKeyPolicy on the queue's key",
        )],
    };
    Some(check::evaluate(name, rows))
}

/// The row refusing the AWS-managed key.
fn aws_managed(queue: &str, key: &str, redeploy: &str) -> Expect {
    Expect::problem(
        format!("{queue} is encrypted with the AWS-managed key {key}: {AWS_MANAGED}"),
        format!("{redeploy} KMS_KEY=Create (a key the stack creates, with the policy it needs)"),
    )
}

async fn load_key(aws: &Aws, key_id: &str) -> Result<Key, String> {
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

/// The rows of a key check: the key itself, then each user and action.
pub(crate) fn judge(
    key: &Key,
    queue: &Queue,
    users: &[KeyUser<'_>],
    region: &str,
    redeploy: &str,
) -> Vec<Expect> {
    if key.aws_managed {
        return vec![aws_managed(&queue.name, &key.arn, redeploy)];
    }
    let mut rows = vec![match &key.disabled {
        Some(state) => Expect::problem(
            format!(
                "{}'s key {} is {state}: nobody can send to or receive from it",
                queue.name, key.arn
            ),
            format!("aws kms enable-key --region {region} --key-id {}", key.arn),
        ),
        None => Expect::found(format!(
            "{} encrypted with customer-managed key {} (enabled)",
            queue.name, key.arn
        )),
    }];
    let fix = format!(
        "{redeploy}: with KmsKey=Create the stack writes the key policy and the grants (README, \
         Locked-down accounts); a permissions boundary must allow kms:GenerateDataKey and \
         kms:Decrypt"
    );
    for user in users {
        match user {
            KeyUser::Rules(rules) => rows.extend(rules_rows(key, rules, &fix)),
            KeyUser::Role {
                what,
                identity,
                actions,
            } => rows.extend(role_rows(key, what, identity, actions, region, &fix)),
        }
    }
    rows
}

/// EventBridge, for each rule: kms:GenerateDataKey and kms:Decrypt (silent when allowed).
fn rules_rows(key: &Key, rules: &[String], fix: &str) -> Vec<Expect> {
    let account = arn_account(&key.arn).unwrap_or_default();
    let mut rows = Vec::new();
    for rule in rules {
        for action in PRODUCE {
            let context = [
                ("aws:SourceArn", rule.as_str()),
                ("aws:SourceAccount", account),
            ];
            let request = request(action, &key.arn, &context);
            let d = authorize_service(&key.policy, "events.amazonaws.com", &request);
            rows.push(Expect::quietly(d.is_allowed()).otherwise(
                format!(
                    "EventBridge may not {action} with {} for rule {rule}: {d}",
                    key.arn
                ),
                fix,
            ));
        }
    }
    rows
}

/// A role, for each of its actions, through SQS.
fn role_rows(
    key: &Key,
    what: &str,
    identity: &Identity<'_>,
    actions: &[&str],
    region: &str,
    fix: &str,
) -> Vec<Expect> {
    let account = arn_account(&key.arn).unwrap_or_default();
    let via_sqs = format!("sqs.{region}.amazonaws.com");
    let mut rows = Vec::new();
    for action in actions {
        let context = [
            ("kms:ViaService", via_sqs.as_str()),
            (
                "kms:CallerAccount",
                arn_account(identity.arn).unwrap_or_default(),
            ),
            ("aws:PrincipalArn", identity.arn),
        ];
        let request = request(action, &key.arn, &context);
        let d = authorize_role(
            identity,
            &key.policy,
            ResourcePolicy::Key,
            account,
            &request,
        );
        let why = match &d {
            Decision::NotAllowed => "neither the key policy naming it, nor the key policy's grant \
                                     to the account together with its own policies, allows it"
                .to_owned(),
            other => other.to_string(),
        };
        rows.push(
            Expect::that(
                d.is_allowed(),
                format!("{what} {} may {action} through SQS", identity.arn),
            )
            .otherwise(
                format!(
                    "{what} {} may not {action} with {}: {why}",
                    identity.arn, key.arn
                ),
                fix,
            ),
        );
    }
    rows
}

fn request<'a>(action: &'a str, key: &'a str, context: &'a [(&'a str, &'a str)]) -> Request<'a> {
    Request {
        principal: Principal::Attached,
        action,
        resource: key,
        context,
    }
}

/// The base stack's own queues: EventBridge's rules deliver to both, the router role receives
/// from the ingest queue and writes dead letters.
pub(super) async fn check_base(
    aws: &Aws,
    base: &Base,
    rule_arns: &[String],
    role: Option<&Role>,
    checks: &mut Vec<Check>,
) {
    let redeploy = format!(
        "update the base stack: make deploy-base STACK_NAME={}",
        base.name
    );
    let queues = [
        ("ingest-queue:key", base.output("IngestQueueArn"), CONSUME),
        (
            "dead-letter-queue:key",
            base.output("DeadLetterQueueArn"),
            PRODUCE,
        ),
    ];
    for (name, arn, actions) in queues {
        let Some(queue_name) = arn.map(aws_model::aws::arn_name) else {
            continue;
        };
        let Ok(queue) = load_queue(aws, queue_name).await else {
            // The queue checks report a missing queue.
            continue;
        };
        let mut users = vec![KeyUser::Rules(rule_arns)];
        if let Some(role) = role {
            users.push(KeyUser::Role {
                what: "the router role",
                identity: role.identity(),
                actions,
            });
        }
        if let Some(check) = check(aws, &queue, &users, name, &redeploy).await {
            checks.push(check);
        }
    }
}

#[cfg(test)]
mod tests;
