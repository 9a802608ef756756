//! EventBridge delivering into the encrypted ingest queue and DLQ (the key pinned to the account,
//! the queue policies to the stack's rules), and the keys CloudFormation refuses.

use super::*;

#[test]
fn eventbridge_delivers_every_rule_into_the_encrypted_ingest_queue_and_dlq() -> Result<()> {
    let r = render();
    let deliver = |key: &Policy, rule: &str, account: &str, action: &str| {
        let context = [("aws:SourceArn", rule), ("aws:SourceAccount", account)];
        authorize_service(key, EVENTS, &request(action, &r.base_key_arn, &context))
    };
    for rule in &r.rules {
        for action in PRODUCE {
            let decision = deliver(&r.base_key, rule, HUB, action);
            assert!(decision.is_allowed(), "{rule} {action}: {decision}");
        }
    }
    // Another account's rule, and the key without EventBridge's statement.
    let theirs = "arn:aws:events:us-east-1:999999999999:rule/theirs";
    assert_eq!(
        deliver(&r.base_key, theirs, "999999999999", "kms:GenerateDataKey"),
        Decision::NotAllowed
    );
    let missing = without_statement(&r.base_key, "EventBridgeRulesOfThisAccountDeliver");
    assert_eq!(
        deliver(&missing, &r.rules[0], HUB, "kms:GenerateDataKey"),
        Decision::NotAllowed
    );
    // SQS's call to KMS may not carry the rule's ARN (no AWS document says it does): the key
    // must not depend on it, or every delivery would fail and nothing would say so.
    for action in PRODUCE {
        let context = [("aws:SourceAccount", HUB)];
        let decision = authorize_service(
            &r.base_key,
            EVENTS,
            &request(action, &r.base_key_arn, &context),
        );
        assert!(
            decision.is_allowed(),
            "{action} without aws:SourceArn: {decision}"
        );
    }
    // The key names this account's rules; which of them may send is the queue policies' say,
    // and SQS asks KMS only for a send they admit: each of the stack's rules, and no other
    // rule of the account (another team's rule on the default bus here).
    let send = |policy: &Policy, queue: &str, rule: &str| {
        let context = [
            ("aws:SourceArn", rule),
            ("aws:SourceAccount", HUB),
            ("aws:SecureTransport", "true"),
        ];
        authorize_service(policy, EVENTS, &request("sqs:SendMessage", queue, &context))
    };
    for rule in &r.rules {
        for (policy, queue) in [(&r.ingest_policy, &r.ingest), (&r.dlq_policy, &r.dlq)] {
            let decision = send(policy, queue, rule);
            assert!(decision.is_allowed(), "{rule} into {queue}: {decision}");
        }
    }
    let neighbour = format!("arn:aws:events:us-east-1:{HUB}:rule/another-teams-rule");
    assert!(deliver(&r.base_key, &neighbour, HUB, "kms:GenerateDataKey").is_allowed());
    for (policy, queue) in [(&r.ingest_policy, &r.ingest), (&r.dlq_policy, &r.dlq)] {
        assert!(
            !send(policy, queue, &neighbour).is_allowed(),
            "{neighbour} may send into {queue}"
        );
    }
    Ok(())
}

/// The AWS-managed key is refused by the Rules (its own reason); an organisation's key by its ARN
/// is taken; anything else (an alias, a key id alone) by the parameter's pattern.
#[test]
fn cloudformation_refuses_the_aws_managed_key_and_takes_a_key_by_its_arn() -> Result<()> {
    let base = template("base.yaml", BASE_TEMPLATE);
    let tenant = template("tenant.yaml", TENANT_TEMPLATE);
    let base_stage = |key: &str| hub_stage("", "").parameter("KmsKey", key);
    let tenant_stage = |key: &str| {
        Stage::new("alpha-tenant", HUB, HOME)
            .parameter("ClusterName", CLUSTER)
            .parameter("KmsKey", key)
            .export(
                "interruption-router:RouterRoleArn",
                "arn:aws:iam::123456789012:role/r",
            )
            .export("interruption-router:QueuePrefix", "karpenter-")
    };
    let existing = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab";
    for (key, refused_by) in [
        ("", None),
        ("Create", None),
        ("alias/aws/sqs", Some("KmsKeyIsNotTheAwsManagedKey")),
        ("aws/sqs", Some("KmsKeyIsNotTheAwsManagedKey")),
        (existing, None),
    ] {
        for (name, failures) in [
            ("base.yaml", base.rules_failures(&base_stage(key))?),
            ("tenant.yaml", tenant.rules_failures(&tenant_stage(key))?),
        ] {
            let rules: Vec<&str> = failures.iter().map(|(rule, _)| rule.as_str()).collect();
            assert_eq!(
                rules,
                refused_by.into_iter().collect::<Vec<_>>(),
                "{name} KmsKey={key}"
            );
            for (_, why) in &failures {
                assert!(why.contains("KmsKey") && why.contains("Create"), "{why}");
            }
        }
    }
    for key in [
        "alias/platform-queues",
        "1234abcd-12ab-34cd-56ef-1234567890ab",
        "arn:aws:kms:us-east-1:123456789012:alias/platform-queues",
    ] {
        for (name, refused) in [
            ("base.yaml", base.rules_failures(&base_stage(key))),
            ("tenant.yaml", tenant.rules_failures(&tenant_stage(key))),
        ] {
            let why = refused.err().map(|e| e.to_string()).unwrap_or_default();
            assert!(
                why.contains("a customer-managed key's ARN"),
                "{name} KmsKey={key}: {why}"
            );
        }
    }
    Ok(())
}
