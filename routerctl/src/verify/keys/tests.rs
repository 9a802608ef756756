//! The key check's verdicts on the key policies the stacks render, and on each way one breaks.

use std::collections::HashMap;

use aws_model::{
    policy::Policy,
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
    verdict_of(key, users, Owner::Stack)
}

fn verdict_of(key: &Key, users: &[KeyUser<'_>], owner: Owner<'_>) -> Check {
    let rows = judge(
        key,
        &queue("karpenter-alpha"),
        users,
        REGION,
        REDEPLOY,
        owner,
    );
    check::evaluate("tenant:alpha:key", rows)
}

/// An organisation's key as KMS makes it by default: the account's IAM decides who uses it.
fn default_key_policy() -> Policy {
    Policy::parse(
        "key policy",
        &json!({"Statement": [{"Sid": "Enable IAM User Permissions", "Effect": "Allow",
            "Principal": {"AWS": format!("arn:aws:iam::{ACCOUNT}:root")},
            "Action": "kms:*", "Resource": "*"}]})
        .to_string(),
    )
    .unwrap()
}

/// `policy` with `statements` added, as the key's owner pastes them.
fn with(policy: &Policy, statements: &[Value]) -> Policy {
    let mut all = policy.statements().to_vec();
    all.extend_from_slice(statements);
    Policy::parse("key policy", &json!({"Statement": all}).to_string()).unwrap()
}

/// The statement a fix says to add (the JSON after "key policy of …: ").
fn pasted(check: &Check) -> Vec<Value> {
    check
        .fix
        .as_deref()
        .unwrap_or_default()
        .split("edit its policy): ")
        .skip(1)
        .map(|rest| {
            let end = rest.find("; ").unwrap_or(rest.len());
            serde_json::from_str(&rest[..end]).unwrap_or_else(|e| panic!("{e}: {rest}"))
        })
        .collect()
}

/// An organisation's own key (KmsKey=<key ARN>) with KMS's default policy: EventBridge and the
/// router are refused (a service principal and a role the account's IAM grants nothing), each
/// with the exact statement to add, and with those pasted it passes; Karpenter is served by the
/// stack's grant through IAM.
#[test]
fn a_given_key_fails_each_missing_permission_with_the_statement_to_add() {
    let statements = aws_model::documents::key_statements(
        aws_model::documents::KeyedStack::Tenant,
        ACCOUNT,
        REGION,
        ROUTER,
    )
    .unwrap();
    let mut stage = tenant_stage();
    stage.parameters.insert("KmsKey".into(), KEY.to_owned());
    let grant = [rendered(
        "tenant.yaml",
        TENANT_TEMPLATE,
        &stage,
        "KarpenterQueueAccess",
        &["PolicyDocument"],
    )];
    let owner = Owner::Given(&statements);
    let check = verdict_of(&key(default_key_policy()), &users(&grant), owner);
    let refused = format!("{ROUTER} may not kms:GenerateDataKey");
    assert_fails(&check, &refused, "add this statement to the key policy of");
    assert!(
        !check.detail.contains("Karpenter's controller role"),
        "{check:?}"
    );
    let added = pasted(&check);
    assert_eq!(added.len(), 1, "{check:?}");
    assert_eq!(added[0]["Principal"]["AWS"], ROUTER);
    let fixed = verdict_of(
        &key(with(&default_key_policy(), &added)),
        &users(&grant),
        owner,
    );
    assert!(fixed.passed, "{fixed:?}");

    // The base queues' key: EventBridge's rules need their statement, or deliveries fail.
    let base = aws_model::documents::key_statements(
        aws_model::documents::KeyedStack::Base,
        ACCOUNT,
        REGION,
        "",
    )
    .unwrap();
    let rules = vec![format!(
        "arn:aws:events:{REGION}:{ACCOUNT}:rule/interruption-router-Spot-X"
    )];
    let owner = Owner::Given(&base);
    let check = verdict_of(&key(default_key_policy()), &[KeyUser::Rules(&rules)], owner);
    assert_fails(
        &check,
        "their deliveries to karpenter-alpha fail",
        "events.amazonaws.com",
    );
    let added = pasted(&check);
    let fixed = verdict_of(
        &key(with(&default_key_policy(), &added)),
        &[KeyUser::Rules(&rules)],
        owner,
    );
    assert!(fixed.passed, "{fixed:?}");
}

/// A key of another account: its policy cannot be read from here; refused before any look.
#[test]
fn a_key_of_another_account_is_refused_with_its_fix() {
    let row = foreign(
        &queue("karpenter-alpha"),
        "arn:aws:kms:us-east-1:999999999999:key/k",
        REDEPLOY,
    )
    .expect("refused");
    let check = check::evaluate("tenant:alpha:key", [row]);
    assert_fails(
        &check,
        "a key of account 999999999999, not the queue's account 123456789012",
        "KMS_KEY=<a customer-managed key of account 123456789012",
    );
    assert!(foreign(&queue("q"), KEY, REDEPLOY).is_none());
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

/// A key policy admitting EventBridge only for requests naming the rule (`aws:SourceArn`): SQS's
/// call to KMS is not documented to carry it, so deliveries may fail silently; verify says so
/// apart from a missing statement, and the statement conditioned on the account passes.
#[test]
fn an_eventbridge_statement_that_needs_the_rules_arn_fails_on_its_own() {
    let rule = format!("arn:aws:events:{REGION}:{ACCOUNT}:rule/interruption-router-Spot-X");
    let statement = |condition: Value| {
        json!({"Sid": "EventBridge", "Effect": "Allow",
            "Principal": {"Service": "events.amazonaws.com"},
            "Action": ["kms:GenerateDataKey", "kms:Decrypt"], "Resource": "*",
            "Condition": condition})
    };
    let rules = vec![rule.clone()];
    let by_rule = with(
        &default_key_policy(),
        &[statement(json!({"ArnEquals": {"aws:SourceArn": rule}}))],
    );
    let check = verdict(&key(by_rule), &[KeyUser::Rules(&rules)]);
    assert_fails(
        &check,
        "only when the request names the rule",
        "KmsKey=Create",
    );
    assert!(!check.detail.contains("EventBridge may not"), "{check:?}");

    let by_account = with(
        &default_key_policy(),
        &[statement(
            json!({"StringEquals": {"aws:SourceAccount": ACCOUNT}}),
        )],
    );
    let check = verdict(&key(by_account), &[KeyUser::Rules(&rules)]);
    assert!(check.passed, "{check:?}");
}

/// A hub with the central bus: its direct queue's senders are the served accounts' direct roles,
/// with the policy spoke.yaml gives them. The stack's own key admits them through SQS; without
/// its statement for them each is refused, and an organisation's key gets that statement to add.
#[test]
fn a_hubs_direct_queue_key_serves_the_served_accounts_direct_roles() {
    let direct = format!("arn:aws:sqs:{REGION}:{ACCOUNT}:ir-direct");
    let served = "111111111111,222222222222";
    let base = crate::fixtures::base(
        &[("DirectQueueArn", &direct)],
        &[("CentralBus", "Enabled"), ("ServedAccounts", served)],
    );
    let members = direct_roles(&base, REGION, Some(&direct));
    assert_eq!(members.len(), 2);
    let users = senders(&members);
    let stage = Stage::new("ir", ACCOUNT, REGION)
        .parameter("CodeS3Bucket", "artifacts")
        .parameter("KmsKey", "Create")
        .parameter("CentralBus", "Enabled")
        .parameter("ServedAccounts", served);
    let own = rendered(
        "base.yaml",
        BASE_TEMPLATE,
        &stage,
        "QueueKey",
        &["KeyPolicy"],
    );
    let check = verdict(&key(own.clone()), &users);
    assert!(check.passed, "{check:?}");
    let refused = verdict(
        &key(without(&own, "MemberDirectRolesUseItThroughSqs")),
        &users,
    );
    assert_fails(
        &refused,
        "111111111111's direct role arn:aws:iam::111111111111:role/interruption-router-spoke-direct-us-east-1 may not kms:GenerateDataKey",
        REDEPLOY,
    );

    // An organisation's key with KMS's default policy: the statement to add, which then serves.
    let statements =
        aws_model::documents::base_key_statements(ACCOUNT, REGION, &base.parameters).unwrap();
    let owner = Owner::Given(&statements);
    let check = verdict_of(&key(default_key_policy()), &users, owner);
    let added = pasted(&check);
    assert!(
        added
            .iter()
            .any(|s| s["Sid"] == "MemberDirectRolesUseItThroughSqs"),
        "{check:?}"
    );
    let fixed = verdict_of(&key(with(&default_key_policy(), &added)), &users, owner);
    assert!(fixed.passed, "{fixed:?}");
}

/// The served accounts' direct roles carry the hub's SpokeRoleName and SpokeRolePath when it
/// has them (spoke.yaml names them so), the defaults when they are empty.
#[test]
fn direct_roles_are_named_as_the_hub_names_its_spoke_roles() {
    let direct = format!("arn:aws:sqs:{REGION}:{ACCOUNT}:ir-direct");
    let arns = |parameters: &[(&str, &str)]| -> Vec<String> {
        let mut all = vec![
            ("CentralBus", "Enabled"),
            ("ServedAccounts", "111111111111"),
        ];
        all.extend_from_slice(parameters);
        let base = crate::fixtures::base(&[("DirectQueueArn", &direct)], &all);
        direct_roles(&base, REGION, Some(&direct))
            .into_iter()
            .map(|(_, arn, _)| arn)
            .collect()
    };
    assert_eq!(
        arns(&[
            ("SpokeRoleName", "platform-spoke"),
            ("SpokeRolePath", "/platform/")
        ]),
        ["arn:aws:iam::111111111111:role/platform/platform-spoke-direct-us-east-1"]
    );
    assert_eq!(
        arns(&[("SpokeRoleName", ""), ("SpokeRolePath", "")]),
        ["arn:aws:iam::111111111111:role/interruption-router-spoke-direct-us-east-1"]
    );
}

/// A role no statement names, and no statement lets alone: the fix is the account-root
/// statement that grants every action the role needs (the Action a string or a list), not one
/// that grants less.
#[test]
fn a_roles_fix_is_the_root_statement_that_grants_all_it_needs() {
    let root = format!("arn:aws:iam::{ACCOUNT}:root");
    let statements = [
        json!({"Sid": "Less", "Effect": "Allow", "Principal": {"AWS": root},
            "Action": "kms:Encrypt", "Resource": "*"}),
        json!({"Sid": "Listed", "Effect": "Allow", "Principal": {"AWS": root},
            "Action": ["kms:GenerateDataKey", "kms:Decrypt"], "Resource": "*"}),
        json!({"Sid": "One", "Effect": "Allow", "Principal": {"AWS": root},
            "Action": "kms:Decrypt", "Resource": "*"}),
    ];
    let role = |actions| KeyUser::Role {
        what: "the router role",
        identity: Identity {
            arn: ROUTER,
            policies: &[],
            boundary: None,
        },
        actions,
    };
    let key = key(default_key_policy());
    let fix = statement_fix(&key, &role(PRODUCE), &statements, REGION);
    assert!(fix.contains("\"Sid\":\"Listed\""), "{fix}");
    let fix = statement_fix(&key, &role(CONSUME), &statements[2..], REGION);
    assert!(fix.contains("\"Sid\":\"One\""), "{fix}");
    let none = statement_fix(&key, &role(PRODUCE), &statements[..1], REGION);
    assert!(none.contains("what the stacks' own keys grant"), "{none}");
}

/// Rules refused alike share one row, each rule named once.
#[test]
fn rules_refused_alike_are_named_once_in_one_row() {
    let rules = ["Spot", "Health"]
        .map(|r| format!("arn:aws:events:{REGION}:{ACCOUNT}:rule/ir-{r}-X"))
        .to_vec();
    let check = verdict(&key(default_key_policy()), &[KeyUser::Rules(&rules)]);
    assert_fails(
        &check,
        "EventBridge may not kms:GenerateDataKey and kms:Decrypt",
        REDEPLOY,
    );
    assert!(
        check.detail.contains("for rules ir-Spot-X, ir-Health-X:"),
        "{check:?}"
    );
    assert_eq!(check.detail.matches("ir-Spot-X").count(), 1, "{check:?}");
}
