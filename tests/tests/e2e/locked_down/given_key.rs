//! An organisation's own KMS keys (`KmsKey=<key ARN>`), deployed into moto: one for the base
//! stack's queues, another (a data class of its own) for a tenant queue. The stacks put every
//! queue under its key and never touch a key's policy. With KMS's default policies `routerctl
//! verify` fails each key check with the exact statement to add; with those pasted it passes, the
//! router delivers an interruption through the encrypted queues, and Karpenter reads it as its
//! controller role, which the stand-in decides as KMS would ([`local_aws::sse`]). A Karpenter
//! role without its grant, a disabled key, a key policy that would drop EventBridge's deliveries
//! and a key of another account each fail on their own. One key for all (the tenant inheriting
//! the base stack's, as `make deploy-tenant` does) needs only EventBridge's statement.
//!
//! moto neither evaluates key policies nor refuses a disabled key: what the key lets each
//! principal do is decided by [`aws_model::access`], the same evaluator verify uses.

use aws_clients::events::PutEvents as _;
use std::time::Duration;

use anyhow::{Context, Result};
use aws_clients::aws::Aws;
use aws_model::{
    events::Origin,
    stacks::{self, TENANT_TEMPLATE},
};
use e2e_tests::{World, karpenter_tags};
use lab::sandbox::{Sandbox, karpenter_role_name};
use local_aws::{
    esm::{EventSourceMapping, Stop},
    karpenter::{Behaviour, Karpenter},
    moto::{ACCOUNT, REGION},
};
use routerctl::verify;
use serde_json::{Value, json};

const STACK: &str = "ir";
const CLUSTER: &str = "alpha";
const KEY_CHECKS: [&str; 3] = [
    "ingest-queue:key",
    "dead-letter-queue:key",
    "tenant:alpha:key",
];

async fn report(sandbox: &Sandbox) -> verify::Report {
    let options = verify::Options {
        stack: STACK.into(),
        ..verify::Options::default()
    };
    Box::pin(verify::run(&sandbox.aws, &options)).await
}

fn key_check<'a>(report: &'a verify::Report, name: &str) -> &'a verify::Check {
    report
        .check(name)
        .unwrap_or_else(|| panic!("no {name}: {}", report.render()))
}

/// The statements the failed key checks' fixes say to add, per key ("… the key policy of <key
/// ARN> (…): <statement>"), each once.
fn statements_to_add(report: &verify::Report) -> Vec<(String, Value)> {
    let mut all: Vec<(String, Value)> = Vec::new();
    for name in KEY_CHECKS {
        let fix = key_check(report, name).fix.clone().unwrap_or_default();
        let Some((_, rest)) = fix.split_once("key policy of ") else {
            continue;
        };
        let key = rest
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_owned();
        for rest in fix.split("edit its policy): ").skip(1) {
            let end = rest.find("; ").unwrap_or(rest.len());
            let statement: Value =
                serde_json::from_str(&rest[..end]).unwrap_or_else(|e| panic!("{e}: {rest}"));
            let entry = (key.clone(), statement);
            if !all.contains(&entry) {
                all.push(entry);
            }
        }
    }
    all
}

/// Pastes `statements` into their keys' policies, as the keys' owner would.
async fn paste(aws: &Aws, statements: Vec<(String, Value)>) -> Result<()> {
    for (key, statement) in statements {
        let mut policy = key_policy(aws, &key).await?;
        policy["Statement"]
            .as_array_mut()
            .context("no statements")?
            .push(statement);
        put_key_policy(aws, &key, &policy).await?;
    }
    Ok(())
}

/// A customer-managed key as its owner creates it (KMS's default policy); its ARN and id.
async fn create_key(aws: &Aws, description: &str) -> Result<(String, String)> {
    let created = aws.kms.create_key().description(description).send().await?;
    let key = created
        .key_metadata()
        .and_then(|m| m.arn())
        .context("no key ARN")?
        .to_owned();
    let id = key.rsplit('/').next().unwrap_or(&key).to_owned();
    Ok((key, id))
}

async fn key_policy(aws: &Aws, key: &str) -> Result<Value> {
    let key = key.rsplit('/').next().unwrap_or(key);
    let policy = aws
        .kms
        .get_key_policy()
        .key_id(key)
        .policy_name("default")
        .send()
        .await?;
    Ok(serde_json::from_str(policy.policy().unwrap_or_default())?)
}

async fn put_key_policy(aws: &Aws, key: &str, policy: &Value) -> Result<()> {
    let key = key.rsplit('/').next().unwrap_or(key);
    aws.kms
        .put_key_policy()
        .key_id(key)
        .policy_name("default")
        .policy(policy.to_string())
        .send()
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn existing_keys_serve_both_stacks_once_their_owner_adds_what_verify_prints() -> Result<()> {
    let world = World::start().await?;
    let aws = Aws::new(&world.moto.sdk_config().await)?;
    // The security team's keys, with the policy KMS gives a key by default.
    let (key, key_id) = create_key(&aws, "platform: event buffers").await?;
    let (tenant_key, tenant_key_id) = create_key(&aws, "platform: cluster queues").await?;
    let untouched = key_policy(&aws, &key_id).await?;

    let sandbox = Sandbox::deploy_with(&world.moto, STACK, &[], &[("KmsKey", &key)]).await?;
    let karpenter_role = karpenter_role_name(CLUSTER);
    lab::sandbox::create_karpenter_role(&aws.iam, &karpenter_role).await?;
    aws_clients::stacks::create(
        &aws.cfn,
        &stacks::tenant_stack_name(STACK, CLUSTER),
        TENANT_TEMPLATE,
        &[
            ("ClusterName", CLUSTER),
            ("KarpenterRoleName", &karpenter_role),
            ("KmsKey", &tenant_key),
        ],
    )
    .await?;
    sandbox
        .complete_tenant(CLUSTER, Some(&karpenter_role))
        .await?;
    let queue = format!("karpenter-{CLUSTER}");
    for (q, its_key) in [
        (format!("{STACK}-ingest"), &key),
        (format!("{STACK}-dlq"), &key),
        (queue.clone(), &tenant_key),
    ] {
        assert_eq!(
            &super::deployed::kms_key_of(&aws, &q).await?,
            its_key,
            "{q} is under its key"
        );
    }
    for k in [&key, &tenant_key] {
        assert_eq!(
            key_policy(&aws, k).await?,
            untouched,
            "the stacks never edit the organisation's key policies"
        );
    }

    // Default policies let the account's IAM decide: EventBridge (a service) and the router's
    // sender (named by the statement a tenant key needs) are refused, each with its statement;
    // Karpenter's role is served by the tenant stack's grant.
    let before = report(&sandbox).await;
    for name in KEY_CHECKS {
        let check = key_check(&before, name);
        assert!(!check.passed, "{name}: {}", before.render());
        assert!(
            check
                .fix
                .as_deref()
                .is_some_and(|f| f.contains("add this statement to the key policy of")),
            "{name}: {}",
            before.render()
        );
    }
    assert!(
        key_check(&before, "ingest-queue:key")
            .detail
            .contains("EventBridge may not kms:GenerateDataKey and kms:Decrypt"),
        "{}",
        before.render()
    );
    let router_role = sandbox.router_role_arn()?.to_owned();
    let tenant_check = key_check(&before, "tenant:alpha:key");
    assert!(
        tenant_check
            .detail
            .contains(&format!("{router_role} may not kms:GenerateDataKey"))
            && !tenant_check.detail.contains(
                "Karpenter's controller role arn:aws:iam::123456789012:role/alpha-karpenter may not"
            ),
        "{}",
        before.render()
    );

    // Their owner pastes them; every key check passes.
    let added = statements_to_add(&before);
    let placed: Vec<(&str, &str)> = added
        .iter()
        .map(|(k, s)| (k.as_str(), s["Sid"].as_str().unwrap_or_default()))
        .collect();
    assert_eq!(
        placed,
        [
            (key.as_str(), "EventBridgeRulesOfThisAccountDeliver"),
            (tenant_key.as_str(), "RouterSendsThroughSqs")
        ],
        "{}",
        before.render()
    );
    paste(&aws, added).await?;
    let after = report(&sandbox).await;
    for name in KEY_CHECKS {
        let check = key_check(&after, name);
        assert!(check.passed, "{name}: {}", after.render());
        assert!(
            check.detail.contains("customer-managed key"),
            "{}",
            after.render()
        );
    }

    // An interruption through EventBridge, the encrypted ingest queue, the router and the
    // encrypted tenant queue, read by Karpenter as its controller role.
    let instance = world.launch(&karpenter_tags(CLUSTER)).await?;
    let function = sandbox.function_name()?.to_owned();
    let (router, timeout) = world
        .start_deployed_router(&sandbox.aws.lambda, &function)
        .await?;
    let esm =
        EventSourceMapping::take_over(&sandbox.aws.lambda, &world.sqs, &function, timeout).await?;
    let origin = Origin {
        account: ACCOUNT.into(),
        region: REGION.into(),
    };
    let warning = origin.spot_warning(&instance, "spot-under-the-given-key");
    let put = aws
        .events
        .put_events()
        .entries(warning.put_events_entry())
        .send()
        .await?;
    assert_eq!(put.failed_entry_count(), 0, "{put:?}");
    let idle = Stop {
        handled: None,
        idle: Duration::from_secs(3),
    };
    esm.drain(&world.sqs, &router, idle, |_| {}).await?;

    let karpenter_arn = format!("arn:aws:iam::{ACCOUNT}:role/{karpenter_role}");
    let fast = Behaviour {
        receive_wait: Duration::from_secs(1),
        ..Behaviour::default()
    };
    // Another role, whatever its own policies allow (another cluster's Karpenter, an
    // administrator's), takes nothing: the queue's policy admits Karpenter's role alone as a
    // reader (DenyReadersOtherThanKarpenter), and the interruption stays for it.
    let stranger = format!("arn:aws:iam::{ACCOUNT}:role/another-cluster-karpenter");
    let mut other = Karpenter::start_as(&aws, &queue, fast, &stranger).await?;
    other.stop().await?;
    assert!(other.reads().is_empty(), "{:?}", other.reads());
    assert!(
        other
            .refusals()
            .iter()
            .any(|r| r.starts_with("AccessDenied") && r.contains("explicit deny")),
        "{:?}",
        other.refusals()
    );
    let mut karpenter = Karpenter::start_as(&aws, &queue, fast, &karpenter_arn).await?;
    karpenter.stop().await?;
    // EventBridge gives the event its own id: Karpenter knows it by its instance.
    let read: Vec<Vec<String>> = karpenter.reads().into_iter().map(|r| r.instances).collect();
    assert_eq!(read, [[instance.clone()]], "{:?}", karpenter.refusals());
    assert!(
        karpenter.refusals().is_empty(),
        "{:?}",
        karpenter.refusals()
    );

    // Karpenter's role without the tenant stack's grant: the key leaves it to IAM, which now
    // allows nothing; the receive is refused and the message stays for when it is fixed.
    let attached = aws
        .iam
        .list_attached_role_policies()
        .role_name(&karpenter_role)
        .send()
        .await?;
    let grants: Vec<String> = attached
        .attached_policies()
        .iter()
        .filter_map(|p| p.policy_arn().map(str::to_owned))
        .collect();
    assert!(
        !grants.is_empty(),
        "the tenant stack granted Karpenter's role"
    );
    for grant in &grants {
        aws.iam
            .detach_role_policy()
            .role_name(&karpenter_role)
            .policy_arn(grant)
            .send()
            .await?;
    }
    let second = origin.spot_warning(&instance, "spot-read-once-granted");
    aws.events
        .put_events()
        .entries(second.put_events_entry())
        .send()
        .await?;
    esm.drain(&world.sqs, &router, idle, |_| {}).await?;
    let mut refused = Karpenter::start_as(&aws, &queue, fast, &karpenter_arn).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    refused.stop().await?;
    assert!(refused.reads().is_empty(), "{:?}", refused.reads());
    let refusals = refused.refusals();
    assert!(
        refusals
            .first()
            .is_some_and(|r| r.starts_with("KmsAccessDenied") && r.contains("kms:Decrypt")),
        "{refusals:?}"
    );
    let failed = report(&sandbox).await;
    let tenant = key_check(&failed, "tenant:alpha:key");
    assert!(
        !tenant.passed
            && tenant
                .detail
                .contains(&format!("{karpenter_arn} may not kms:Decrypt")),
        "{}",
        failed.render()
    );
    for grant in &grants {
        aws.iam
            .attach_role_policy()
            .role_name(&karpenter_role)
            .policy_arn(grant)
            .send()
            .await?;
    }
    let mut granted = Karpenter::start_as(&aws, &queue, fast, &karpenter_arn).await?;
    granted.stop().await?;
    let read: Vec<Vec<String>> = granted.reads().into_iter().map(|r| r.instances).collect();
    assert_eq!(read, [[instance.clone()]], "{:?}", granted.refusals());

    // Disabled keys: verify names their state and the command; Karpenter's receive is refused.
    for id in [&key_id, &tenant_key_id] {
        aws.kms.disable_key().key_id(id).send().await?;
    }
    let disabled = report(&sandbox).await;
    for name in KEY_CHECKS {
        let check = key_check(&disabled, name);
        assert!(
            !check.passed && check.detail.contains("is Disabled"),
            "{name}: {}",
            disabled.render()
        );
        assert!(
            check
                .fix
                .as_deref()
                .is_some_and(|f| f.contains("aws kms enable-key")),
            "{}",
            disabled.render()
        );
    }
    let mut stopped = Karpenter::start_as(&aws, &queue, fast, &karpenter_arn).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    stopped.stop().await?;
    assert!(
        stopped
            .refusals()
            .first()
            .is_some_and(|r| r.starts_with("KmsDisabled")),
        "{:?}",
        stopped.refusals()
    );
    router.stop().await;
    Ok(())
}

/// A key policy that admits EventBridge only for requests naming the rule: SQS's call to KMS is
/// not documented to carry the rule's ARN, so deliveries may fail silently; verify fails it on its
/// own. And a tenant queue under another account's key fails with the account named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_that_would_drop_deliveries_and_a_key_of_another_account_fail_on_their_own()
-> Result<()> {
    let world = World::start().await?;
    let aws = Aws::new(&world.moto.sdk_config().await)?;
    let (key, _) = create_key(&aws, "platform: queues").await?;
    let sandbox = Sandbox::deploy_with(&world.moto, STACK, &[CLUSTER], &[("KmsKey", &key)]).await?;
    sandbox
        .complete_tenant(CLUSTER, Some(&karpenter_role_name(CLUSTER)))
        .await?;
    // One key for all: the tenant inherits it, and the router role's grant on it (base.yaml's,
    // through IAM) serves the tenant queue too; only EventBridge needs a statement.
    let mut statements = statements_to_add(&report(&sandbox).await);
    assert_eq!(statements.len(), 1, "{statements:?}");
    // The rule's ARN instead of the account: what a key owner might write from memory.
    statements[0].1["Condition"] = json!({"ArnLike": {"aws:SourceArn":
        format!("arn:aws:events:{REGION}:{ACCOUNT}:rule/*")}});
    paste(&aws, statements).await?;
    let report = report(&sandbox).await;
    for name in ["ingest-queue:key", "dead-letter-queue:key"] {
        let check = key_check(&report, name);
        assert!(
            !check.passed
                && check
                    .detail
                    .contains("only when the request names the rule"),
            "{name}: {}",
            report.render()
        );
    }
    assert!(
        key_check(&report, "tenant:alpha:key").passed,
        "{}",
        report.render()
    );

    // The tenant's queue of a second cluster under another account's key (the key ARN the
    // security team gave for the wrong account).
    let foreign = "arn:aws:kms:us-east-1:999999999999:key/1234abcd-12ab-34cd-56ef-1234567890ab";
    lab::sandbox::create_karpenter_role(&aws.iam, &karpenter_role_name("beta")).await?;
    aws_clients::stacks::create(
        &aws.cfn,
        &stacks::tenant_stack_name(STACK, "beta"),
        TENANT_TEMPLATE,
        &[
            ("ClusterName", "beta"),
            ("KarpenterRoleName", &karpenter_role_name("beta")),
            ("KmsKey", foreign),
        ],
    )
    .await?;
    sandbox
        .complete_tenant("beta", Some(&karpenter_role_name("beta")))
        .await?;
    let report = Box::pin(verify::run(
        &sandbox.aws,
        &verify::Options {
            stack: STACK.into(),
            ..verify::Options::default()
        },
    ))
    .await;
    let check = key_check(&report, "tenant:beta:key");
    assert!(
        !check.passed
            && check
                .detail
                .contains("a key of account 999999999999, not the queue's account"),
        "{}",
        report.render()
    );
    Ok(())
}
