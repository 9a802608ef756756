//! Every principal on an interruption's path, locked down: with `KmsKey=Create` and a
//! permissions boundary each can still do its part, decided as KMS and IAM decide
//! (`aws_model::access`) on the rendered key, role and queue policies: EventBridge delivering
//! into the ingest queue and the DLQ, the router role receiving from the ingest queue (the event
//! source mapping reads as the function's role) and writing dead letters and tenant queues, the
//! spoke role writing a member account's tenant queue, Karpenter's controller role reading its
//! queue. And each is refused when the statement it needs is missing from the key policy, its
//! own policy or its boundary.
//!
//! The boundary is what a platform team would write for these roles: exactly what the stacks
//! grant (each role's own Allow statements), plus the two KMS actions a key policy grants the
//! router's sender by name, which a boundary caps too.

use anyhow::Result;
use aws_model::{
    access::{Identity, ResourcePolicy, authorize_role, authorize_service},
    policy::{Decision, Policy, Request, strings},
    stacks::{BASE_TEMPLATE, SPOKE_TEMPLATE, TENANT_TEMPLATE},
    template::{Deployment, Stage},
};
use interruption_router::{accounts::Sender, config::Config};
use serde_json::{Value, json};

use super::super::permissions::{
    BASE_STACK, HOME, HUB, MEMBER, SPOKE_STACK, document, hub_stage, resolved, role_policies,
    template,
};

const HUB_BOUNDARY: &str = "arn:aws:iam::123456789012:policy/platform/boundary";
const MEMBER_BOUNDARY: &str = "arn:aws:iam::111111111111:policy/platform/boundary";
const EVENTS: &str = "events.amazonaws.com";
const CLUSTER: &str = "alpha";
/// The member accounts keep their roles under a path, the spoke role included.
const SPOKE_ROLE_PATH: &str = "/platform/spokes/";

/// A tenant queue with its own key, where the router sends as `sender`.
struct TenantQueue {
    account: &'static str,
    queue: String,
    queue_policy: Policy,
    key: Policy,
    key_arn: String,
    /// Karpenter's grant (KarpenterQueueAccess).
    karpenter: Policy,
}

/// The stacks rendered for a hub serving one member account, locked down.
struct Rendered {
    router_arn: String,
    router_policies: Vec<Policy>,
    spoke_arn: String,
    spoke_policies: Vec<Policy>,
    /// The router's configuration as the hub stack sets its environment.
    router_config: Config,
    base_key: Policy,
    base_key_arn: String,
    ingest: String,
    dlq: String,
    /// The ingest queue's and the DLQ's policies (which rules may send).
    ingest_policy: Policy,
    dlq_policy: Policy,
    rules: Vec<String>,
    hub_tenant: TenantQueue,
    member_tenant: TenantQueue,
}

fn arn_of(d: &Deployment<'_>, logical: &str) -> String {
    resolved(d, json!({"Fn::GetAtt": [logical, "Arn"]}))
}

fn tenant(
    account: &'static str,
    exports: std::collections::BTreeMap<String, String>,
) -> TenantQueue {
    let mut stage = Stage::new("alpha-tenant", account, HOME)
        .parameter("ClusterName", CLUSTER)
        .parameter("KmsKey", "Create")
        .parameter("KarpenterRoleName", "KarpenterControllerRole-alpha");
    stage.exports = exports;
    let t = template("tenant.yaml", TENANT_TEMPLATE);
    let d = t.deploy(&stage).unwrap();
    let key_arn = arn_of(&d, "QueueKey");
    assert_eq!(
        d.property("InterruptionQueue", &["KmsMasterKeyId"])
            .unwrap(),
        json!(key_arn),
        "the tenant queue is encrypted with the stack's key"
    );
    TenantQueue {
        account,
        queue: arn_of(&d, "InterruptionQueue"),
        queue_policy: document(&d, "InterruptionQueuePolicy", &["PolicyDocument"]),
        key: document(&d, "QueueKey", &["KeyPolicy"]),
        key_arn,
        karpenter: document(&d, "KarpenterQueueAccess", &["PolicyDocument"]),
    }
}

fn render() -> Rendered {
    let base = template("base.yaml", BASE_TEMPLATE);
    let stage = hub_stage(MEMBER, "")
        .parameter("KmsKey", "Create")
        .parameter("PermissionsBoundary", "platform/boundary")
        .parameter("RolePath", "/platform/")
        .parameter("SpokeRolePath", SPOKE_ROLE_PATH);
    let hub = base.deploy(&stage).unwrap();
    let environment = hub
        .property("RouterFunction", &["Environment", "Variables"])
        .unwrap();
    let router_config = Config::from_lookup(|var| {
        environment
            .get(var)
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
    })
    .unwrap();
    assert_eq!(
        hub.property("RouterRole", &["PermissionsBoundary"])
            .unwrap(),
        json!(HUB_BOUNDARY)
    );
    let base_key_arn = arn_of(&hub, "QueueKey");
    for queue in ["IngestQueue", "DeadLetterQueue"] {
        assert_eq!(
            hub.property(queue, &["KmsMasterKeyId"]).unwrap(),
            json!(base_key_arn),
            "{queue} is encrypted with the stack's key"
        );
        assert_eq!(
            hub.property(queue, &["SqsManagedSseEnabled"]).unwrap(),
            json!(false)
        );
    }
    let mut rules = Vec::new();
    for (id, _) in base.resources_of("AWS::Events::Rule") {
        if hub.properties(id).unwrap().is_some() {
            rules.push(arn_of(&hub, id));
        }
    }
    assert_eq!(rules.len(), 10, "five rules on each bus");
    let router_arn = arn_of(&hub, "RouterRole");
    assert!(router_arn.contains(":role/platform/"), "{router_arn}");

    let spoke_template = template("spoke.yaml", SPOKE_TEMPLATE);
    let spoke_stage = Stage::new(SPOKE_STACK, MEMBER, HOME)
        .parameter(
            "HubEventBusArn",
            &hub.output("HubEventBusArn").unwrap().unwrap(),
        )
        .parameter("RouterRoleArn", &router_arn)
        .parameter("PermissionsBoundary", "platform/boundary")
        .parameter("RolePath", "/platform/")
        .parameter("SpokeRolePath", SPOKE_ROLE_PATH);
    let spoke = spoke_template.deploy(&spoke_stage).unwrap();
    assert_eq!(
        spoke.property("SpokeRole", &["Path"]).unwrap(),
        json!(SPOKE_ROLE_PATH)
    );
    for role in ["SpokeRole", "ForwardToHubRole"] {
        assert_eq!(
            spoke.property(role, &["PermissionsBoundary"]).unwrap(),
            json!(MEMBER_BOUNDARY)
        );
    }
    Rendered {
        spoke_arn: spoke.output("SpokeRoleArn").unwrap().unwrap(),
        spoke_policies: role_policies(&spoke, "SpokeRole"),
        router_config,
        router_policies: role_policies(&hub, "RouterRole"),
        base_key: document(&hub, "QueueKey", &["KeyPolicy"]),
        base_key_arn,
        ingest: arn_of(&hub, "IngestQueue"),
        dlq: arn_of(&hub, "DeadLetterQueue"),
        ingest_policy: document(&hub, "IngestQueuePolicy", &["PolicyDocument"]),
        dlq_policy: document(&hub, "DeadLetterQueuePolicy", &["PolicyDocument"]),
        rules,
        hub_tenant: tenant(HUB, hub.exports().unwrap()),
        member_tenant: tenant(MEMBER, spoke.exports().unwrap()),
        router_arn,
    }
}

/// A policy with `keep` deciding which statements stay.
fn filtered(policy: &Policy, keep: impl Fn(&Value) -> Value) -> Policy {
    let statements: Vec<Value> = policy
        .statements()
        .iter()
        .map(keep)
        .filter(|s| !s.is_null())
        .collect();
    let doc = json!({"Version": "2012-10-17", "Statement": statements});
    Policy::parse(policy.source.clone(), &doc.to_string()).unwrap()
}

/// `policy` without its statement `sid`.
fn without_statement(policy: &Policy, sid: &str) -> Policy {
    let before = policy.statements().len();
    let p = filtered(policy, |s| {
        if s["Sid"] == sid {
            Value::Null
        } else {
            s.clone()
        }
    });
    assert_eq!(
        p.statements().len() + 1,
        before,
        "{} has a statement {sid}",
        policy.source
    );
    p
}

/// `policy` with `action` left out of every statement.
fn without_action(policy: &Policy, action: &str) -> Policy {
    filtered(policy, |s| {
        let mut s = s.clone();
        let actions: Vec<String> = strings(&s["Action"])
            .into_iter()
            .filter(|a| !a.eq_ignore_ascii_case(action))
            .collect();
        if actions.is_empty() {
            return Value::Null;
        }
        s["Action"] = json!(actions);
        s
    })
}

/// The boundary of a role: its own Allow statements, and the KMS actions a key policy may grant
/// it by name.
fn boundary_for(own: &[Policy], account: &str) -> Policy {
    let mut statements: Vec<Value> = own
        .iter()
        .flat_map(|p| p.statements())
        .filter(|s| s["Effect"] == "Allow")
        .map(|s| json!({"Effect": "Allow", "Action": s["Action"], "Resource": s["Resource"]}))
        .collect();
    statements.push(json!({"Sid": "QueueKeysThroughSqs", "Effect": "Allow",
        "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
        "Resource": format!("arn:aws:kms:*:{account}:key/*")}));
    let doc = json!({"Version": "2012-10-17", "Statement": statements});
    Policy::parse("boundary", &doc.to_string()).unwrap()
}

/// What SQS tells KMS when `principal` in `account` sends or receives (SQS calls KMS on its
/// caller's behalf, so kms:ViaService names SQS in the queue's region).
fn via_sqs<'a>(account: &'a str, principal: &'a str) -> [(&'a str, &'a str); 4] {
    [
        ("kms:ViaService", "sqs.us-east-1.amazonaws.com"),
        ("kms:CallerAccount", account),
        ("aws:PrincipalArn", principal),
        ("aws:SecureTransport", "true"),
    ]
}

fn request<'a>(
    action: &'a str,
    resource: &'a str,
    context: &'a [(&'a str, &'a str)],
) -> Request<'a> {
    Request {
        principal: aws_model::policy::Principal::Attached,
        action,
        resource,
        context,
    }
}

fn use_key(
    role: &Identity<'_>,
    key: &Policy,
    account: &str,
    action: &str,
    key_arn: &str,
) -> Decision {
    let context = via_sqs(account, role.arn);
    authorize_role(
        role,
        key,
        ResourcePolicy::Key,
        account,
        &request(action, key_arn, &context),
    )
}

/// An action, its resource and the condition keys its request carries.
type Operation<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)]);

const PRODUCE: [&str; 2] = ["kms:GenerateDataKey", "kms:Decrypt"];

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

#[test]
fn cloudformation_refuses_the_aws_managed_key_and_keys_it_did_not_create() -> Result<()> {
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
        (existing, Some("KmsKeyIsCreatedByTheStack")),
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
    Ok(())
}
