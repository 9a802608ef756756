//! Tenant queue names and policies, on recorded inputs.

use router_core::config::QueueNameTemplate;

use super::{Sender, check_tenant_policy, cluster_of};
use crate::deployment::Queue;
use aws_model::documents::tenant_queue_policy;

#[test]
fn tenant_queue_names_map_back_to_clusters() {
    let t = QueueNameTemplate::parse("karpenter-{cluster}").unwrap();
    assert_eq!(cluster_of(&t, "karpenter-alpha").as_deref(), Some("alpha"));
    assert_eq!(cluster_of(&t, "other-alpha"), None);
    assert_eq!(cluster_of(&t, "karpenter-"), None);
    let t = QueueNameTemplate::parse("{cluster}_interruptions").unwrap();
    assert_eq!(
        cluster_of(&t, "beta_interruptions").as_deref(),
        Some("beta")
    );
    assert_eq!(cluster_of(&t, "beta_other"), None);
}

#[test]
fn the_tenant_queue_policy_admits_its_sender_alone() {
    let arn = "arn:aws:sqs:us-east-1:123456789012:karpenter-alpha";
    let router = "arn:aws:iam::123456789012:role/ir-RouterRole";
    let queue = |policy: Option<String>| Queue {
        name: "karpenter-alpha".into(),
        arn: arn.into(),
        url: "https://sqs.us-east-1.amazonaws.com/123456789012/karpenter-alpha".into(),
        attributes: policy.into_iter().map(|p| ("Policy".into(), p)).collect(),
    };
    let sender = Sender {
        label: "router",
        role_arn: router,
        account: "123456789012",
        partition: "aws",
        wrong_role_fix: "name the router role".into(),
    };
    let judged = |policy: Option<String>| {
        check_tenant_policy(
            &queue(policy),
            &sender,
            "us-east-1",
            "t:queue-policy",
            "deploy",
        )
    };
    let good = judged(Some(tenant_queue_policy(arn, router).unwrap().to_string()));
    assert!(good.passed, "{good:?}");
    assert!(good.detail.starts_with("router allowed"), "{}", good.detail);
    assert!(
        good.detail.ends_with("; other senders denied"),
        "{}",
        good.detail
    );

    let other = "arn:aws:iam::123456789012:role/someone-else";
    let wrong = judged(Some(tenant_queue_policy(arn, other).unwrap().to_string()));
    assert!(!wrong.passed);
    assert!(
        wrong
            .detail
            .starts_with(&format!("the router role {router} is ")),
        "{}",
        wrong.detail
    );
    assert!(
        wrong
            .fix
            .as_deref()
            .unwrap()
            .starts_with("name the router role; deploy; or restore"),
        "{:?}",
        wrong.fix
    );

    let none = judged(None);
    assert!(
        none.detail
            .starts_with("karpenter-alpha has no queue policy: it does not grant the router"),
        "{}",
        none.detail
    );
}
