//! Locked-down settings (key, boundary, role path, alarm topic) through the deploy targets, and
//! what a tenant inherits from the base stack.

use super::*;

/// Locked-down accounts: KMS_KEY, PERMISSIONS_BOUNDARY and ROLE_PATH reach the stacks that take
/// them, only when set; a re-run without them keeps what the stack has.
#[test]
fn locked_down_settings_reach_the_stacks_only_when_set() {
    let cli = Cli::new("locked-down");
    let arm = zip_with_binary_for(&cli.dir, 183);
    let zip = format!("ZIP={}", arm.display());
    let boundary = "PERMISSIONS_BOUNDARY=platform/boundary";
    let base = [
        "deploy-base",
        "BUCKET=artifacts",
        "REGION=eu-west-1",
        zip.as_str(),
    ];
    let locked = [
        base.as_slice(),
        &[
            "KMS_KEY=Create",
            boundary,
            "ROLE_PATH=/platform/",
            "SPOKE_ROLE_PATH=/platform/spokes/",
        ],
    ]
    .concat();
    let (ok, out) = cli.make(&locked);
    assert!(ok, "{out}");
    let (_, args) = cli.deploys().pop().unwrap();
    for pair in [
        "KmsKey=Create",
        "PermissionsBoundary=platform/boundary",
        "RolePath=/platform/",
        "SpokeRolePath=/platform/spokes/",
    ] {
        assert!(has(&args, pair), "{pair}: {args:?}");
    }
    let (ok, out) = cli.make(&base);
    assert!(ok, "{out}");
    let (_, args) = cli.deploys().pop().unwrap();
    let named = |args: &[String], key: &str| args.iter().any(|a| a.starts_with(&format!("{key}=")));
    for key in ["KmsKey", "PermissionsBoundary", "RolePath", "SpokeRolePath"] {
        assert!(!named(&args, key), "a re-run passes no {key}: {args:?}");
    }
    let kept = cli.parameters("interruption-router");
    assert_eq!(kept["KmsKey"], "Create");
    assert_eq!(kept["RolePath"], "/platform/");

    // The spoke stack takes the boundary and the path, not KMS_KEY=Create (it has no queue; keys
    // the tenant stacks create name the spoke role themselves).
    let (ok, out) = cli.make(&[
        "deploy-spoke",
        "REGION=eu-west-1",
        "HUB_BUS=arn:aws:events:us-east-1:123456789012:event-bus/interruption-router-hub",
        "ROUTER_ROLE=arn:aws:iam::123456789012:role/interruption-router-RouterRole-X",
        "KMS_KEY=Create",
        boundary,
        "ROLE_PATH=/platform/",
        "SPOKE_ROLE_PATH=/platform/spokes/",
    ]);
    assert!(ok, "{out}");
    let (_, args) = cli.deploys().pop().unwrap();
    assert!(has(&args, "RolePath=/platform/"), "{args:?}");
    assert!(has(&args, "SpokeRolePath=/platform/spokes/"), "{args:?}");
    assert!(
        named(&args, "PermissionsBoundary") && !named(&args, "KmsKey"),
        "{args:?}"
    );
    // The organisation's keys its tenant queues use: the spoke role is granted them.
    let keys =
        "arn:aws:kms:eu-west-1:111111111111:key/k1,arn:aws:kms:us-east-1:111111111111:key/k2";
    let (ok, out) = cli.make(&[
        "deploy-spoke",
        "REGION=eu-west-1",
        "HUB_BUS=arn:aws:events:us-east-1:123456789012:event-bus/interruption-router-hub",
        "ROUTER_ROLE=arn:aws:iam::123456789012:role/interruption-router-RouterRole-X",
        &format!("KMS_KEY={keys}"),
    ]);
    assert!(ok, "{out}");
    let (_, args) = cli.deploys().pop().unwrap();
    assert!(has(&args, &format!("KmsKey={keys}")), "{args:?}");

    // A tenant stack takes the key; it creates no role.
    let (ok, out) = cli.make(&[
        "deploy-tenant",
        "CLUSTER=alpha",
        "REGION=eu-west-1",
        "KARPENTER_ROLE=none",
        "KMS_KEY=Create",
        boundary,
    ]);
    assert!(ok, "{out}");
    let (_, args) = cli.deploys().pop().unwrap();
    assert!(has(&args, "KmsKey=Create"), "{args:?}");
    assert!(!named(&args, "PermissionsBoundary"), "{args:?}");
}

/// A first `make deploy-tenant` takes from the base stack what `routerctl adopt` takes
/// ([`aws_model::stacks::TENANT_INHERITS`]): the key setting, the alarm topic and the RouterName,
/// unless given; a re-run passes none of them (the stack keeps its own).
#[test]
fn a_tenant_takes_the_base_stacks_key_topic_and_router_name_as_adopt_does() {
    use aws_model::stacks::{TENANT_INHERITS, tenant_parameters};
    use interruption_router::event::Kinds;

    let makefile = std::fs::read_to_string(repo().join("Makefile")).unwrap();
    let listed: Vec<&str> = makefile
        .lines()
        .find_map(|l| l.strip_prefix("TENANT_INHERITS := "))
        .expect("the Makefile's TENANT_INHERITS")
        .split_whitespace()
        .collect();
    assert_eq!(listed, TENANT_INHERITS);

    let cli = Cli::new("tenant-inherits");
    let arm = zip_with_binary_for(&cli.dir, 183);
    let zip = format!("ZIP={}", arm.display());
    let topic = "arn:aws:sns:eu-west-1:123456789012:platform-alarms";
    let (ok, out) = cli.make(&[
        "deploy-base",
        "BUCKET=artifacts",
        "REGION=eu-west-1",
        zip.as_str(),
        "KMS_KEY=Create",
        &format!("ALARM_TOPIC={topic}"),
        "PARAMS=RouterName=ir-two",
    ]);
    assert!(ok, "{out}");
    let base = cli.parameters("interruption-router");

    cli.role("alpha-karpenter");
    let (ok, out) = cli.make(&[
        "deploy-tenant",
        "CLUSTER=alpha",
        "REGION=eu-west-1",
        "KARPENTER_ROLE=alpha-karpenter",
    ]);
    assert!(ok, "{out}");
    let (_, args) = cli.deploys().pop().unwrap();
    let made = overrides(&args);
    let adopt: BTreeMap<String, String> =
        tenant_parameters(&base, "alpha", "alpha-karpenter", Kinds::ALL)
            .into_iter()
            .collect();
    assert_eq!(made, adopt, "make deploy-tenant and routerctl adopt differ");
    assert_eq!(made["KmsKey"], "Create");
    assert_eq!(made["AlarmTopicArn"], topic);
    assert_eq!(made["RouterName"], "ir-two");

    // A cluster name as long as EKS allows: its queue is named as the router derives it.
    let long = "a-cluster-name-as-long-as-eks-allows-".repeat(3)[..100].to_owned();
    let (ok, out) = cli.make(&[
        "deploy-tenant",
        &format!("CLUSTER={long}"),
        "REGION=eu-west-1",
        "KARPENTER_ROLE=none",
    ]);
    assert!(ok, "{out}");
    let (stack, args) = cli.deploys().pop().unwrap();
    assert_eq!(stack.len(), "interruption-router-tenant-".len() + 100);
    let made = overrides(&args);
    let adopt: BTreeMap<String, String> = tenant_parameters(&base, &long, "", Kinds::ALL)
        .into_iter()
        .collect();
    assert_eq!(made, adopt, "make deploy-tenant and routerctl adopt differ");
    let router = interruption_router::config::QueueNameTemplate::parse("karpenter-{cluster}")
        .unwrap()
        .queue_name(&long)
        .unwrap();
    assert_eq!(made["QueueName"], router);
    assert_eq!(router.len(), 80);
    assert!(
        helm_snippet(&out).contains(&format!("settings.interruptionQueue={router}")),
        "{out}"
    );

    // A cluster's choice of event kinds (adopt deploys the old rules' choice): the same
    // EventKinds from both.
    let kinds: Kinds = [
        interruption_router::event::Kind::SpotInterruption,
        interruption_router::event::Kind::StateChange,
    ]
    .into_iter()
    .collect();
    let (ok, out) = cli.make(&[
        "deploy-tenant",
        "CLUSTER=gamma",
        "REGION=eu-west-1",
        "KARPENTER_ROLE=none",
        &format!("EVENT_KINDS={}", aws_model::stacks::event_kinds(kinds)),
    ]);
    assert!(ok, "{out}");
    let (_, args) = cli.deploys().pop().unwrap();
    let made = overrides(&args);
    let adopt: BTreeMap<String, String> = tenant_parameters(&base, "gamma", "", kinds)
        .into_iter()
        .collect();
    assert_eq!(made, adopt, "make deploy-tenant and routerctl adopt differ");
    assert_eq!(made["EventKinds"], "spot-interruption,state-change");

    // Given, it wins; a re-run inherits nothing.
    let cli_given = Cli::new("tenant-inherits-given");
    let (ok, out) = cli_given.make(&[
        "deploy-tenant",
        "CLUSTER=beta",
        "REGION=eu-west-1",
        "KARPENTER_ROLE=none",
        "ALARM_TOPIC=arn:aws:sns:eu-west-1:123456789012:team-beta",
    ]);
    assert!(ok, "{out}");
    let (_, args) = cli_given.deploys().pop().unwrap();
    assert!(
        has(
            &args,
            "AlarmTopicArn=arn:aws:sns:eu-west-1:123456789012:team-beta"
        ),
        "{args:?}"
    );
    let (ok, out) = cli.make(&["deploy-tenant", "CLUSTER=alpha", "REGION=eu-west-1"]);
    assert!(ok, "{out}");
    let (_, args) = cli.deploys().pop().unwrap();
    for key in TENANT_INHERITS {
        assert!(
            !args.iter().any(|a| a.starts_with(&format!("{key}="))),
            "a re-run passes no {key}: {args:?}"
        );
    }
}
