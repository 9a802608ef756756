//! The key check's verdicts on the key policies the stacks render, and on each way one breaks.

use std::collections::HashMap;

use aws_model::{
    stacks::{BASE_TEMPLATE, TENANT_TEMPLATE},
    template::{Stage, Template},
};
use serde_json::{Value, json};

use super::*;

const ACCOUNT: &str = "123456789012";
const REGION: &str = "us-east-1";
const ROUTER: &str = "arn:aws:iam::123456789012:role/interruption-router-RouterRole-X";
const KARPENTER: &str = "arn:aws:iam::123456789012:role/KarpenterControllerRole-alpha";
const REDEPLOY: &str = "update the tenant stack: make deploy-tenant CLUSTER=alpha";

fn rendered(template: &str, text: &str, stage: &Stage, resource: &str, path: &[&str]) -> Policy {
    let t = Template::parse(template, text).unwrap();
    let d = t.deploy(stage).unwrap();
    Policy::parse(resource, &d.property(resource, path).unwrap().to_string()).unwrap()
}

fn tenant_stage() -> Stage {
    Stage::new("alpha-tenant", ACCOUNT, REGION)
        .parameter("ClusterName", "alpha")
        .parameter("KmsKey", "Create")
        .parameter("KarpenterRoleName", "KarpenterControllerRole-alpha")
        .export("interruption-router:RouterRoleArn", ROUTER)
        .export("interruption-router:QueuePrefix", "karpenter-")
}

/// The tenant key's ARN as the rendered template names it (Karpenter's grant names it too).
const KEY: &str = "arn:aws:kms:us-east-1:123456789012:key/alpha-tenant-QueueKey-KEYID";

fn key(policy: Policy) -> Key {
    Key {
        arn: KEY.into(),
        aws_managed: false,
        disabled: None,
        policy,
    }
}

fn queue(name: &str) -> Queue {
    Queue {
        name: name.into(),
        arn: format!("arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"),
        url: format!("https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{name}"),
        attributes: HashMap::new(),
    }
}

fn without(policy: &Policy, sid: &str) -> Policy {
    let statements: Vec<Value> = policy
        .statements()
        .iter()
        .filter(|s| s["Sid"] != sid)
        .cloned()
        .collect();
    Policy::parse("key policy", &json!({"Statement": statements}).to_string()).unwrap()
}

/// The router (named by the key policy, no policy of its own needed) and Karpenter with `grant`.
fn users(grant: &[Policy]) -> Vec<KeyUser<'_>> {
    vec![
        KeyUser::Role {
            what: "the router role",
            identity: Identity {
                arn: ROUTER,
                policies: &[],
                boundary: None,
            },
            actions: PRODUCE,
        },
        KeyUser::Role {
            what: "Karpenter's controller role",
            identity: Identity {
                arn: KARPENTER,
                policies: grant,
                boundary: None,
            },
            actions: CONSUME,
        },
    ]
}

/// The check failed, naming `problem`, with a fix that says `fix`.
fn assert_fails(check: &Check, problem: &str, fix: &str) {
    assert!(!check.passed && check.detail.contains(problem), "{check:?}");
    let given = check.fix.as_deref().unwrap_or_default();
    assert!(given.contains(fix), "{check:?}");
}

fn verdict(key: &Key, users: &[KeyUser<'_>]) -> Check {
    let rows = judge(key, &queue("karpenter-alpha"), users, REGION, REDEPLOY);
    check::evaluate("tenant:alpha:key", rows)
}

#[test]
fn the_tenant_key_the_stack_writes_serves_the_router_and_karpenter() {
    let policy = rendered(
        "tenant.yaml",
        TENANT_TEMPLATE,
        &tenant_stage(),
        "QueueKey",
        &["KeyPolicy"],
    );
    let grant = [rendered(
        "tenant.yaml",
        TENANT_TEMPLATE,
        &tenant_stage(),
        "KarpenterQueueAccess",
        &["PolicyDocument"],
    )];
    let grant = grant.as_slice();
    let check = verdict(&key(policy.clone()), &users(grant));
    assert!(check.passed, "{check:?}");

    // The key without the statement naming the sender: the router cannot write.
    let check = verdict(
        &key(without(&policy, "RouterSendsThroughSqs")),
        &users(grant),
    );
    let refused = format!("{ROUTER} may not kms:GenerateDataKey");
    assert_fails(&check, &refused, "KmsKey=Create");

    // Karpenter without its own grant: the key only delegates kms:Decrypt to IAM.
    let refused = format!("{KARPENTER} may not kms:Decrypt");
    assert_fails(
        &verdict(&key(policy), &users(&[])),
        &refused,
        "KmsKey=Create",
    );
}

#[test]
fn the_base_key_must_admit_every_rule() {
    let stage = Stage::new("interruption-router", ACCOUNT, REGION)
        .parameter("CodeS3Bucket", "artifacts")
        .parameter("KmsKey", "Create");
    let policy = rendered(
        "base.yaml",
        BASE_TEMPLATE,
        &stage,
        "QueueKey",
        &["KeyPolicy"],
    );
    let rules = vec![format!(
        "arn:aws:events:{REGION}:{ACCOUNT}:rule/interruption-router-Spot-X"
    )];
    let check = verdict(&key(policy.clone()), &[KeyUser::Rules(&rules)]);
    assert!(check.passed, "{check:?}");
    let broken = without(&policy, "EventBridgeRulesOfThisAccountDeliver");
    let check = verdict(&key(broken), &[KeyUser::Rules(&rules)]);
    assert_fails(
        &check,
        "EventBridge may not kms:GenerateDataKey",
        "KmsKey=Create",
    );
}

#[test]
fn the_aws_managed_key_and_a_disabled_key_fail_with_their_fix() {
    let policy = Policy::parse("key policy", r#"{"Statement":[]}"#).unwrap();
    let mut managed = key(policy.clone());
    managed.aws_managed = true;
    assert_fails(&verdict(&managed, &[]), "AWS-managed", "KMS_KEY=Create");
    assert!(is_aws_managed_alias("alias/aws/sqs"));
    assert!(is_aws_managed_alias(
        "arn:aws:kms:us-east-1:123456789012:alias/aws/sqs"
    ));
    assert!(!is_aws_managed_alias(
        "arn:aws:kms:us-east-1:123456789012:key/k"
    ));

    let mut disabled = key(policy);
    disabled.disabled = Some("PendingDeletion".into());
    assert_fails(
        &verdict(&disabled, &[]),
        "PendingDeletion",
        "aws kms enable-key",
    );
}
