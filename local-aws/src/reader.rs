//! A receive as SQS judges its caller, where moto lets every caller through: first the queue's
//! policy, whose explicit Deny refuses the caller whatever its own policies allow (tenant.yaml's
//! `DenyReadersOtherThanKarpenter`: only the cluster's Karpenter role reads its queue), then the
//! queue's key ([`crate::sse`]). SQS answers a refused receive `AccessDenied` (SQS API reference,
//! "Common Errors"). The decision is [`aws_model::policy`]'s, the one the template tests make.

use aws_sdk_sqs::types::QueueAttributeName;

use aws_clients::aws::Aws;
use aws_model::policy::{Decision, Policy, Principal, Request, evaluate};

/// Why SQS refuses `role`'s receive from the queue at `url` (SQS's error code first), or `None`
/// when it would answer. `role` is the caller's ARN.
pub async fn receive_refused(aws: &Aws, url: &str, role: &str) -> Option<String> {
    if let Some(denied) = denied_by_queue_policy(aws, url, role).await {
        return Some(denied);
    }
    crate::sse::receive_refused(aws, url, role).await
}

async fn denied_by_queue_policy(aws: &Aws, url: &str, role: &str) -> Option<String> {
    let attributes = aws
        .sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::Policy)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        // The receive itself says what is wrong with the queue.
        .ok()?;
    let attribute =
        |name: QueueAttributeName| attributes.attributes().and_then(|a| a.get(&name)).cloned();
    let text = attribute(QueueAttributeName::Policy)?;
    let arn = attribute(QueueAttributeName::QueueArn).unwrap_or_default();
    let policy = Policy::parse("queue policy", &text).ok()?;
    let context = [("aws:PrincipalArn", role), ("aws:SecureTransport", "true")];
    let decision = evaluate(
        std::slice::from_ref(&policy),
        &Request {
            principal: Principal::Aws(role),
            action: "sqs:ReceiveMessage",
            resource: &arn,
            context: &context,
        },
    );
    matches!(decision, Decision::Denied { .. }).then(|| {
        format!(
            "AccessDenied: User: {role} is not authorized to perform: sqs:receivemessage on \
             resource: {arn} with an explicit deny in a resource-based policy ({decision})"
        )
    })
}
