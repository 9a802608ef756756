//! The roles on the path, each within a boundary of exactly what the stacks grant: the router
//! role, the router's sender into tenant queues (the spoke role, under its path, in a member
//! account), Karpenter's controller role reading its queue.

use super::*;

#[test]
fn the_router_role_works_within_a_boundary_of_exactly_what_the_stacks_grant() -> Result<()> {
    let r = render();
    let boundary = boundary_for(&r.router_policies, HUB);
    let router = Identity {
        arn: &r.router_arn,
        policies: &r.router_policies,
        boundary: Some(&boundary),
    };
    let tenant_queue = format!("arn:aws:sqs:us-east-1:{HUB}:karpenter-{CLUSTER}");
    // The spoke role under its path, as the router assumes it (its SPOKE_ROLE_PATH and _NAME).
    let member_spoke =
        match Sender::for_scope(HUB, HOME, MEMBER, HOME, &r.router_config.spoke_role()) {
            Sender::Spoke { role_arn, .. } => role_arn,
            Sender::Home => unreachable!("a member account is never home"),
        };
    assert_eq!(member_spoke, r.spoke_arn);
    assert!(
        member_spoke.contains(":role/platform/spokes/"),
        "{member_spoke}"
    );
    let log_group =
        format!("arn:aws:logs:us-east-1:{HUB}:log-group:/aws/lambda/{BASE_STACK}-router:*");
    let assume = [("aws:ResourceAccount", MEMBER)];
    let operations: Vec<Operation<'_>> = vec![
        ("ec2:DescribeInstances", "*", &[]),
        ("tag:GetResources", "*", &[]),
        ("sqs:SendMessage", &tenant_queue, &[]),
        ("sqs:ListQueueTags", &tenant_queue, &[]),
        ("sqs:ReceiveMessage", &r.ingest, &[]),
        ("sqs:DeleteMessage", &r.ingest, &[]),
        ("sqs:ChangeMessageVisibility", &r.ingest, &[]),
        ("sqs:SendMessage", &r.dlq, &[]),
        ("sts:AssumeRole", &member_spoke, &assume),
        ("logs:PutLogEvents", &log_group, &[]),
    ];
    for (action, resource, context) in &operations {
        let decision = router.decide(&request(action, resource, context));
        assert!(decision.is_allowed(), "{action} on {resource}: {decision}");
        // The boundary caps it: without the action there, the role's own Allow is not enough.
        let narrower = without_action(&boundary, action);
        let capped = Identity {
            boundary: Some(&narrower),
            ..router
        };
        let decision = capped.decide(&request(action, resource, context));
        assert!(
            matches!(decision, Decision::Denied { .. }),
            "{action} on {resource} without it in the boundary: {decision}"
        );
    }
    // The ingest queue's key: kms:Decrypt to receive; the DLQ's: both to send.
    for action in PRODUCE {
        let decision = use_key(&router, &r.base_key, HUB, action, &r.base_key_arn);
        assert!(
            decision.is_allowed(),
            "{action} on the base key: {decision}"
        );
    }
    let decrypt = "kms:Decrypt";
    let no_grant = [without_statement(
        &r.router_policies[0],
        "UseQueueKeyThroughSqs",
    )];
    let role_without = Identity {
        policies: &no_grant,
        ..router
    };
    assert_eq!(
        use_key(&role_without, &r.base_key, HUB, decrypt, &r.base_key_arn),
        Decision::NotAllowed,
        "the key policy delegates to IAM: the role's own grant is needed"
    );
    let key_without = without_statement(&r.base_key, "AccountRolesUseItThroughSqs");
    assert_eq!(
        use_key(&router, &key_without, HUB, decrypt, &r.base_key_arn),
        Decision::NotAllowed,
        "the role's grant alone is not enough: the key policy is the primary authority"
    );
    let narrower = without_action(&boundary, decrypt);
    let capped = Identity {
        boundary: Some(&narrower),
        ..router
    };
    assert!(matches!(
        use_key(&capped, &r.base_key, HUB, decrypt, &r.base_key_arn),
        Decision::Denied { .. }
    ));
    // Only through SQS: a direct kms:Decrypt call carries no kms:ViaService.
    let direct = [("kms:CallerAccount", HUB), ("kms:ViaService", "")];
    let decision = authorize_role(
        &router,
        &r.base_key,
        ResourcePolicy::Key,
        HUB,
        &request(decrypt, &r.base_key_arn, &direct),
    );
    assert!(!decision.is_allowed(), "{decision}");
    Ok(())
}

#[test]
fn the_router_and_the_spoke_role_write_tenant_queues_under_their_keys() -> Result<()> {
    let r = render();
    let admin_policy = Policy::parse(
        "admin",
        r#"{"Statement":{"Effect":"Allow","Action":"*","Resource":"*"}}"#,
    )
    .map_err(anyhow::Error::msg)?;
    for (queue, policies) in [
        (&r.hub_tenant, &r.router_policies),
        (&r.member_tenant, &r.spoke_policies),
    ] {
        // Who the router is there, by its own code.
        let spoke_role = r.router_config.spoke_role();
        let sender = Sender::for_scope(HUB, HOME, queue.account, HOME, &spoke_role);
        let arn = match &sender {
            Sender::Home => r.router_arn.clone(),
            Sender::Spoke { role_arn, .. } => {
                assert_eq!(role_arn, &r.spoke_arn);
                role_arn.clone()
            }
        };
        let boundary = boundary_for(policies, queue.account);
        let role = Identity {
            arn: &arn,
            policies,
            boundary: Some(&boundary),
        };
        let here = format!("{sender} in {}", queue.account);
        let context = via_sqs(queue.account, &arn);
        let send = request("sqs:SendMessage", &queue.queue, &context);
        let decision = authorize_role(
            &role,
            &queue.queue_policy,
            ResourcePolicy::Ordinary,
            queue.account,
            &send,
        );
        assert!(decision.is_allowed(), "{here}: send: {decision}");
        for action in PRODUCE {
            let decision = use_key(&role, &queue.key, queue.account, action, &queue.key_arn);
            assert!(decision.is_allowed(), "{here}: {action}: {decision}");
        }
        // Refused: the key without the statement naming the sender; a boundary without
        // kms:GenerateDataKey (it caps a grant naming the role too).
        let generate = "kms:GenerateDataKey";
        let key_without = without_statement(&queue.key, "RouterSendsThroughSqs");
        assert_eq!(
            use_key(&role, &key_without, queue.account, generate, &queue.key_arn),
            Decision::NotAllowed,
            "{here}"
        );
        let narrower = without_action(&boundary, generate);
        let capped = Identity {
            boundary: Some(&narrower),
            ..role
        };
        assert!(matches!(
            use_key(&capped, &queue.key, queue.account, generate, &queue.key_arn),
            Decision::Denied { .. }
        ));
        // Nobody else of the account can encrypt with it, whatever their IAM policies say.
        let admin_arn = format!("arn:aws:iam::{}:role/admin", queue.account);
        let admin = Identity {
            arn: &admin_arn,
            policies: std::slice::from_ref(&admin_policy),
            boundary: None,
        };
        assert_eq!(
            use_key(&admin, &queue.key, queue.account, generate, &queue.key_arn),
            Decision::NotAllowed,
            "{here}: an administrator"
        );
    }
    Ok(())
}

#[test]
fn karpenter_decrypts_its_queue_through_the_stacks_grant_only() -> Result<()> {
    let r = render();
    for queue in [&r.hub_tenant, &r.member_tenant] {
        let arn = format!(
            "arn:aws:iam::{}:role/KarpenterControllerRole-{CLUSTER}",
            queue.account
        );
        let grant = [queue.karpenter.clone()];
        let karpenter = Identity {
            arn: &arn,
            policies: &grant,
            boundary: None,
        };
        let receive = request("sqs:ReceiveMessage", &queue.queue, &[]);
        assert!(karpenter.decide(&receive).is_allowed());
        let decrypt = "kms:Decrypt";
        let decision = use_key(
            &karpenter,
            &queue.key,
            queue.account,
            decrypt,
            &queue.key_arn,
        );
        assert!(decision.is_allowed(), "{decision}");
        // A reader only.
        assert_eq!(
            use_key(
                &karpenter,
                &queue.key,
                queue.account,
                "kms:GenerateDataKey",
                &queue.key_arn
            ),
            Decision::NotAllowed
        );
        let no_grant = [without_statement(
            &queue.karpenter,
            "DecryptInterruptionQueue",
        )];
        let without = Identity {
            policies: &no_grant,
            ..karpenter
        };
        assert_eq!(
            use_key(&without, &queue.key, queue.account, decrypt, &queue.key_arn),
            Decision::NotAllowed
        );
        let key_without = without_statement(&queue.key, "AccountRolesDecryptThroughSqs");
        assert_eq!(
            use_key(
                &karpenter,
                &key_without,
                queue.account,
                decrypt,
                &queue.key_arn
            ),
            Decision::NotAllowed
        );
    }
    Ok(())
}

/// A member account's tenant queues under the organisation's own keys (spoke.yaml's `KmsKey`):
/// the spoke role may use exactly the keys given, through SQS only, where their policies leave
/// the account's roles to IAM (KMS's default key policy); no key without the parameter.
#[test]
fn the_spoke_role_uses_exactly_the_member_accounts_keys_it_is_given() -> Result<()> {
    let keys = [
        format!("arn:aws:kms:us-east-1:{MEMBER}:key/1234abcd-0000-0000-0000-000000000001"),
        format!("arn:aws:kms:eu-west-1:{MEMBER}:key/1234abcd-0000-0000-0000-000000000002"),
    ];
    let other = format!("arn:aws:kms:us-east-1:{MEMBER}:key/1234abcd-0000-0000-0000-000000000003");
    let default_policy = Policy::parse(
        "default key policy",
        &json!({"Statement": [{"Effect": "Allow",
            "Principal": {"AWS": format!("arn:aws:iam::{MEMBER}:root")},
            "Action": "kms:*", "Resource": "*"}]})
        .to_string(),
    )
    .unwrap();
    let spoke_template = template("spoke.yaml", SPOKE_TEMPLATE);
    let stage = |key: &str| {
        Stage::new(SPOKE_STACK, MEMBER, HOME)
            .parameter(
                "HubEventBusArn",
                &format!("arn:aws:events:{HOME}:{HUB}:event-bus/{BASE_STACK}-hub"),
            )
            .parameter("RouterRoleArn", &format!("arn:aws:iam::{HUB}:role/router"))
            .parameter("KmsKey", key)
    };
    let given_stage = stage(&keys.join(","));
    let given = spoke_template.deploy(&given_stage).unwrap();
    let policies = role_policies(&given, "SpokeRole");
    let arn = format!("arn:aws:iam::{MEMBER}:role/interruption-router-spoke");
    let spoke = Identity {
        arn: &arn,
        policies: &policies,
        boundary: None,
    };
    for key in &keys {
        for action in PRODUCE {
            let decision = use_key(&spoke, &default_policy, MEMBER, action, key);
            assert!(decision.is_allowed(), "{key} {action}: {decision}");
        }
        // Only through SQS.
        let direct = request("kms:Decrypt", key, &[]);
        assert!(!spoke.decide(&direct).is_allowed());
    }
    assert_eq!(
        use_key(
            &spoke,
            &default_policy,
            MEMBER,
            "kms:GenerateDataKey",
            &other
        ),
        Decision::NotAllowed
    );
    let none_stage = stage("");
    let none = spoke_template.deploy(&none_stage).unwrap();
    let policies = role_policies(&none, "SpokeRole");
    let without = Identity {
        policies: &policies,
        ..spoke
    };
    assert_eq!(
        use_key(
            &without,
            &default_policy,
            MEMBER,
            "kms:GenerateDataKey",
            &keys[0]
        ),
        Decision::NotAllowed
    );
    // Key ARNs only, comma-separated without spaces (the list becomes the statement's resources).
    for refused in ["alias/platform", &format!("{}, {}", keys[0], keys[1])] {
        assert!(spoke_template.deploy(&stage(refused)).is_err(), "{refused}");
    }
    Ok(())
}
