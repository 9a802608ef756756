//! The tenant contract (docs/operating.md, "The tenant contract"): a tenant queue made with plain
//! SDK calls exactly as that section says, as a team that makes its queues with Terraform, CDK or
//! Crossplane makes it, with no tenant.yaml: the router binary delivers to it, `routerctl verify`
//! passes, and with each piece of the contract taken away in turn verify names that piece, and
//! passes again once it is put back.

use std::time::Duration;

use anyhow::{Context, Result};
use aws_clients::aws::Aws;
use aws_sdk_sqs::types::QueueAttributeName;
use e2e_tests::karpenter_tags;
use local_aws::{
    esm::Stop,
    moto::{ACCOUNT, REGION},
};
use routerctl::{
    simulate::{self, SimKind},
    verify,
};
use serde_json::{Value, json};

use super::{assert_failures, set_attribute, set_queue_policy};
use crate::cli::Estate;

/// The cluster whose queue is made by hand (the estate's alpha and beta have tenant stacks).
const CLUSTER: &str = "gamma";
/// Its Karpenter controller role, made and granted by the team's own tool.
const KARPENTER_ROLE: &str = "gamma-karpenter";
const QUEUE: &str = "karpenter-gamma";

/// The queue's policy, as the section gives it: the router's sender alone may send, Karpenter's
/// role alone may read, nothing over plain HTTP.
fn contract_policy(queue_arn: &str, sender: &str) -> Value {
    json!({"Version": "2012-10-17", "Statement": [
        {"Sid": "AllowRouterToSend", "Effect": "Allow", "Principal": {"AWS": sender},
         "Action": "sqs:SendMessage", "Resource": queue_arn},
        {"Sid": "DenySendersOtherThanRouter", "Effect": "Deny", "Principal": "*",
         "Action": "sqs:SendMessage", "Resource": queue_arn,
         "Condition": {"ArnNotEquals": {"aws:PrincipalArn": sender}}},
        {"Sid": "DenyReadersOtherThanKarpenter", "Effect": "Deny", "Principal": "*",
         "Action": ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility",
                    "sqs:PurgeQueue"],
         "Resource": queue_arn,
         "Condition": {"ArnNotLike": {"aws:PrincipalArn": [
             format!("arn:aws:iam::{ACCOUNT}:role/{KARPENTER_ROLE}"),
             format!("arn:aws:iam::{ACCOUNT}:role/*/{KARPENTER_ROLE}")]}}},
        {"Sid": "DenyInsecureTransport", "Effect": "Deny", "Principal": "*",
         "Action": "sqs:*", "Resource": queue_arn,
         "Condition": {"Bool": {"aws:SecureTransport": "false"}}}]})
}

/// The queue, its tags and policy, and its tenant record, with SDK calls; Karpenter's role and
/// its grant too. The queue's URL.
async fn make_tenant(aws: &Aws, sender: &str) -> Result<String> {
    let arn = format!("arn:aws:sqs:{REGION}:{ACCOUNT}:{QUEUE}");
    lab::sandbox::create_karpenter_role(&aws.iam, KARPENTER_ROLE).await?;
    // What tenant.yaml's managed policy grants, here as the team's tool writes it.
    let grant = json!({"Version": "2012-10-17", "Statement": [{
        "Sid": "ConsumeInterruptionQueue", "Effect": "Allow",
        "Action": ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueUrl",
                   "sqs:GetQueueAttributes"],
        "Resource": arn}]});
    put_karpenter_grant(aws, &grant).await?;
    let url = aws
        .sqs
        .create_queue()
        .queue_name(QUEUE)
        .attributes(QueueAttributeName::SqsManagedSseEnabled, "true")
        .attributes(QueueAttributeName::MessageRetentionPeriod, "300")
        .attributes(
            QueueAttributeName::Policy,
            contract_policy(&arn, sender).to_string(),
        )
        .tags(interruption_router::tenancy::TENANT_TAG, CLUSTER)
        .tags(
            interruption_router::tenancy::KINDS_TAG,
            "spot-interruption rebalance-recommendation state-change \
             capacity-reservation-interruption scheduled-change",
        )
        .send()
        .await?
        .queue_url()
        .context("no queue URL")?
        .to_owned();
    put_record(aws).await?;
    Ok(url)
}

async fn put_karpenter_grant(aws: &Aws, grant: &Value) -> Result<()> {
    aws.iam
        .put_role_policy()
        .role_name(KARPENTER_ROLE)
        .policy_name("interruption-queue")
        .policy_document(grant.to_string())
        .send()
        .await?;
    Ok(())
}

/// The tenant record: a String parameter named after the queue, valued the cluster.
async fn put_record(aws: &Aws) -> Result<()> {
    aws.ssm
        .put_parameter()
        .name(interruption_router::tenancy::record_name(QUEUE))
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .value(CLUSTER)
        .overwrite(true)
        .send()
        .await?;
    Ok(())
}

/// verify of the base stack and gamma alone, Karpenter's role named as no tenant stack names it.
async fn verify_gamma(estate: &Estate) -> verify::Report {
    let options = verify::Options {
        stack: estate.sandbox.stack().to_owned(),
        clusters: vec![CLUSTER.to_owned()],
        karpenter_roles: vec![(CLUSTER.to_owned(), KARPENTER_ROLE.to_owned())],
        ..verify::Options::default()
    };
    Box::pin(verify::run(estate.aws(), &options)).await
}

/// verify fails exactly `check`, whose finding says `says`.
async fn names(estate: &Estate, check: &str, says: &str) -> verify::Report {
    let report = verify_gamma(estate).await;
    assert_failures(&report, &[check]);
    let found = report.check(check).expect("the failed check");
    assert!(
        found.detail.contains(says),
        "{check} should say {says:?}:\n{}",
        report.render()
    );
    report
}

#[tokio::test]
async fn a_tenant_queue_made_by_hand_to_the_contract_is_delivered_to_and_verified() -> Result<()> {
    let estate = Estate::deploy().await?;
    let aws = estate.aws();
    let sender = estate.sandbox.router_role_arn()?.to_owned();
    let url = make_tenant(aws, &sender).await?;
    estate.world.launch(&karpenter_tags(CLUSTER)).await?;

    // verify passes every check of gamma's queue.
    let report = verify_gamma(&estate).await;
    assert_failures(&report, &[]);
    for check in [
        "queue",
        "record",
        "encryption",
        "queue-policy",
        "karpenter-role",
        "read",
        "router-role",
    ] {
        assert!(
            report.check(&format!("tenant:gamma:{check}")).is_some(),
            "tenant:gamma:{check} not checked:\n{}",
            report.render()
        );
    }
    let queue_check = &report.check("tenant:gamma:queue").unwrap().detail;
    assert!(
        queue_check.contains("tagged interruption-router:tenant=gamma"),
        "{queue_check}"
    );

    // Each piece taken away, verify names it; put back, verify passes.
    let arn = format!("arn:aws:sqs:{REGION}:{ACCOUNT}:{QUEUE}");
    let policy = contract_policy(&arn, &sender);
    let without = |sid: &str| {
        let mut p = policy.clone();
        p["Statement"]
            .as_array_mut()
            .unwrap()
            .retain(|s| s["Sid"] != sid);
        p
    };

    // The tenant tag: its kinds tag is then not read (the policy still admits the router alone,
    // so the router writes it every kind).
    aws.sqs
        .untag_queue()
        .queue_url(&url)
        .tag_keys(interruption_router::tenancy::TENANT_TAG)
        .send()
        .await?;
    names(&estate, "tenant:gamma:queue", "interruption-router:tenant").await;
    aws.sqs
        .tag_queue()
        .queue_url(&url)
        .tags(interruption_router::tenancy::TENANT_TAG, CLUSTER)
        .send()
        .await?;

    // The kinds tag is the one optional piece: without it the cluster takes every kind.
    aws.sqs
        .untag_queue()
        .queue_url(&url)
        .tag_keys(interruption_router::tenancy::KINDS_TAG)
        .send()
        .await?;
    let report = verify_gamma(&estate).await;
    assert_failures(&report, &[]);
    let detail = &report.check("tenant:gamma:queue").unwrap().detail;
    assert!(detail.contains("takes every event kind"), "{detail}");

    // The tenant record.
    aws.ssm
        .delete_parameter()
        .name(interruption_router::tenancy::record_name(QUEUE))
        .send()
        .await?;
    names(
        &estate,
        "tenant:gamma:record",
        "/interruption-router/tenant-queues/karpenter-gamma",
    )
    .await;
    put_record(aws).await?;

    // Encryption at rest.
    set_attribute(aws, &url, QueueAttributeName::SqsManagedSseEnabled, "false").await?;
    names(&estate, "tenant:gamma:encryption", "not encrypted").await;
    set_attribute(aws, &url, QueueAttributeName::SqsManagedSseEnabled, "true").await?;

    // The policy, one statement at a time, then none.
    for (sid, says) in [
        ("AllowRouterToSend", "the router role"),
        (
            "DenySendersOtherThanRouter",
            "other principals in the account are not denied",
        ),
        (
            "DenyReadersOtherThanKarpenter",
            "not denied sqs:ReceiveMessage",
        ),
    ] {
        set_queue_policy(aws, &url, &without(sid)).await?;
        let report = names(&estate, "tenant:gamma:queue-policy", says).await;
        // The fix puts the whole policy back: the statement named, Karpenter's role the reader.
        let fix = report
            .check("tenant:gamma:queue-policy")
            .unwrap()
            .fix
            .clone();
        let fix = fix.unwrap_or_default();
        assert!(
            fix.contains(sid) && fix.contains(KARPENTER_ROLE),
            "{sid}: {fix}"
        );
    }
    aws.sqs
        .set_queue_attributes()
        .queue_url(&url)
        .attributes(QueueAttributeName::Policy, "")
        .send()
        .await?;
    names(&estate, "tenant:gamma:queue-policy", "has no queue policy").await;
    set_queue_policy(aws, &url, &policy).await?;

    // Karpenter's grant.
    aws.iam
        .delete_role_policy()
        .role_name(KARPENTER_ROLE)
        .policy_name("interruption-queue")
        .send()
        .await?;
    names(&estate, "tenant:gamma:karpenter-role", KARPENTER_ROLE).await;
    put_karpenter_grant(
        aws,
        &json!({"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow",
            "Action": ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueUrl",
                       "sqs:GetQueueAttributes"],
            "Resource": arn}]}),
    )
    .await?;

    // All back: verify passes again.
    assert_failures(&verify_gamma(&estate).await, &[]);

    // The router writes it: a spot warning of gamma's node reaches it, and only it. Last, as the
    // mapping taken over from moto stays disabled, which verify would flag.
    let esm = estate.take_over_mapping().await?;
    let ingest = estate.sandbox.ingest_queue_url().await?;
    let sent = simulate::run(
        aws,
        &simulate::Options::new(CLUSTER, SimKind::Spot, &ingest),
    )
    .await?;
    assert_eq!(sent.failed(), 0, "{}", sent.render());
    let router = estate.start_router().await?;
    let drained = esm
        .drain(
            &aws.sqs,
            &router,
            Stop {
                handled: Some(1),
                idle: Duration::from_secs(20),
            },
            |_| {},
        )
        .await?;
    assert_eq!(drained.handled, 1, "{drained:?}");
    assert_eq!(estate.ids_in(QUEUE).await?, sent.event_ids());
    assert_eq!(
        estate.ids_in("karpenter-alpha").await?,
        Vec::<String>::new()
    );
    let dlq = estate.sandbox.queue_url("ir-dlq").await?;
    assert_eq!(estate.world.depth(&dlq).await?, 0, "nothing dead-lettered");
    router.stop().await;

    Ok(())
}
