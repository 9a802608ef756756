//! Who may do what, as AWS would decide it, on the documents the templates actually create.
//!
//! moto evaluates no IAM or resource policy and reads no `Rules`, so none of this can be learnt
//! from a deployment in the emulator. Each template is rendered for a concrete deployment
//! (`aws_model::template`: parameters, conditions, intrinsic functions, exports between stacks of
//! one account and region), and the requests the router and others make are decided with the
//! project's IAM evaluator (`aws_model::policy`): an explicit Deny wins, one account needs one
//! Allow, two accounts need both (IAM policy evaluation logic). The router's own choice of
//! principal comes from its code (`Sender::for_scope`), not from a copy of the rule.

use anyhow::{Context, Result};
use aws_model::{
    patterns::{Matched, matches},
    policy::{Decision, Policy, Principal, Request, authorize, evaluate},
    stacks::{BASE_TEMPLATE, SPOKE_TEMPLATE, TENANT_TEMPLATE},
    template::{Deployment, Stage, Template},
};
use interruption_router::{accounts::Sender, config::DEFAULT_SPOKE_ROLE_NAME, event::Kind};
use routerctl::verify::{HUB_RULES, RULES};
use serde_json::{Value, json};

pub(super) const HUB: &str = "123456789012";
pub(super) const HOME: &str = "us-east-1";
const OTHER: &str = "eu-west-1";
pub(super) const MEMBER: &str = "111111111111";
const UNSERVED: &str = "999999999999";
const ORG: &str = "o-abcd123456";
pub(super) const BASE_STACK: &str = "interruption-router";
pub(super) const SPOKE_STACK: &str = "interruption-router-spoke";

pub(super) fn template(name: &str, text: &str) -> Template {
    Template::parse(name, text).unwrap()
}

/// The hub's base stack, serving `served` (CentralBus when it serves anyone).
pub(super) fn hub_stage(served: &str, organization: &str) -> Stage {
    let mut stage = Stage::new(BASE_STACK, HUB, HOME).parameter("CodeS3Bucket", "artifacts");
    if !served.is_empty() {
        stage = stage
            .parameter("CentralBus", "Enabled")
            .parameter("ServedAccounts", served)
            .parameter("OrganizationId", organization);
    }
    stage
}

pub(super) fn resolved(d: &Deployment<'_>, v: Value) -> String {
    d.resolve(&v).unwrap().unwrap().as_str().unwrap().to_owned()
}

/// A role's inline policies, as parsed documents.
pub(super) fn role_policies(d: &Deployment<'_>, role: &str) -> Vec<Policy> {
    d.property(role, &["Policies"])
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let name = p["PolicyName"].as_str().unwrap_or_default();
            Policy::parse(format!("{role} {name}"), &p["PolicyDocument"].to_string()).unwrap()
        })
        .collect()
}

pub(super) fn document(d: &Deployment<'_>, resource: &str, path: &[&str]) -> Policy {
    let doc = d.property(resource, path).unwrap();
    assert!(doc.is_object(), "{resource} {path:?}: {doc}");
    Policy::parse(resource, &doc.to_string()).unwrap()
}

/// What a tenant queue in (`account`, `region`) is made of, deployed next to the stack that
/// connects that region (the base stack in the hub's home region, the spoke stack everywhere
/// else) and importing what that stack exports for the region.
struct Placement {
    account: &'static str,
    region: &'static str,
    queue_arn: String,
    queue_policy: Policy,
    /// The spoke role there and its policies, when the placement has a spoke stack.
    spoke: Option<(String, Vec<Policy>, Policy)>,
}

fn place(account: &'static str, region: &'static str, hub: &Deployment<'_>) -> Placement {
    let (exports, spoke) = if (account, region) == (HUB, HOME) {
        (hub.exports().unwrap(), None)
    } else {
        let router_role = resolved(hub, json!({"Fn::GetAtt": ["RouterRole", "Arn"]}));
        let bus = hub.output("HubEventBusArn").unwrap().unwrap();
        // IAM is global: one region per account creates the role; its policies are the same.
        let stage = Stage::new(SPOKE_STACK, account, region)
            .parameter("HubEventBusArn", &bus)
            .parameter("RouterRoleArn", &router_role)
            .parameter("CreateSpokeRole", "true");
        let spoke_template = template("spoke.yaml", SPOKE_TEMPLATE);
        let d = spoke_template.deploy(&stage).unwrap();
        let role_arn = d.output("SpokeRoleArn").unwrap().unwrap();
        let role = (
            role_arn,
            role_policies(&d, "SpokeRole"),
            document(&d, "SpokeRole", &["AssumeRolePolicyDocument"]),
        );
        (d.exports().unwrap(), Some(role))
    };
    // As `make deploy-tenant` deploys it: no BaseStackName, so it imports the region's exports.
    let mut stage = Stage::new("alpha-tenant", account, region).parameter("ClusterName", "alpha");
    stage.exports = exports;
    let tenant = template("tenant.yaml", TENANT_TEMPLATE);
    let d = tenant.deploy(&stage).unwrap();
    Placement {
        account,
        region,
        queue_arn: resolved(&d, json!({"Fn::GetAtt": ["InterruptionQueue", "Arn"]})),
        queue_policy: document(&d, "InterruptionQueuePolicy", &["PolicyDocument"]),
        spoke,
    }
}

fn send(
    identity: &[Policy],
    queue_policy: &Policy,
    principal: &str,
    account: &str,
    queue: &str,
) -> Decision {
    let context = [
        ("aws:SecureTransport", "true"),
        ("aws:PrincipalArn", principal),
    ];
    authorize(
        identity,
        std::slice::from_ref(queue_policy),
        principal,
        account,
        &Request {
            principal: Principal::Attached,
            action: "sqs:SendMessage",
            resource: queue,
            context: &context,
        },
    )
}

/// One account in several regions, nothing else: the central bus, which its other regions' spoke
/// stacks forward to, and no ServedAccounts list (README: "One account, several regions").
fn own_account_stage() -> Stage {
    Stage::new(BASE_STACK, HUB, HOME)
        .parameter("CodeS3Bucket", "artifacts")
        .parameter("CentralBus", "Enabled")
}

#[test]
fn each_tenant_queue_admits_exactly_the_principal_the_router_sends_with() -> Result<()> {
    let everywhere = [(HUB, HOME), (HUB, OTHER), (MEMBER, HOME), (MEMBER, OTHER)];
    admits_exactly_the_routers_sender(&hub_stage(MEMBER, ""), &everywhere)?;
    // A single account's other region needs nothing more than its central bus.
    admits_exactly_the_routers_sender(&own_account_stage(), &[(HUB, HOME), (HUB, OTHER)])
}

fn admits_exactly_the_routers_sender(
    stage: &Stage,
    placements: &[(&'static str, &'static str)],
) -> Result<()> {
    let base = template("base.yaml", BASE_TEMPLATE);
    let hub = base.deploy(stage)?;
    let router_role = resolved(&hub, json!({"Fn::GetAtt": ["RouterRole", "Arn"]}));
    let router_identity = role_policies(&hub, "RouterRole");
    let admin = Policy::parse(
        "admin",
        r#"{"Statement":{"Effect":"Allow","Action":"*","Resource":"*"}}"#,
    )
    .map_err(anyhow::Error::msg)?;

    for &(account, region) in placements {
        let p = place(account, region, &hub);
        let here = format!("{} in {}", p.account, p.region);
        // The router's code decides who it is there.
        let sender = Sender::for_scope(HUB, HOME, account, region, DEFAULT_SPOKE_ROLE_NAME);
        let (principal, identity) = match (&sender, &p.spoke) {
            (Sender::Home, None) => (router_role.clone(), router_identity.clone()),
            (Sender::Spoke { role_arn, .. }, Some((arn, policies, trust))) => {
                assert_eq!(
                    role_arn, arn,
                    "{here}: the spoke role the router assumes exists"
                );
                // The router role may assume it: its own policy (aws:ResourceAccount) and the
                // spoke role's trust both allow, across accounts or within one.
                let context = [
                    ("aws:ResourceAccount", account),
                    ("aws:PrincipalArn", router_role.as_str()),
                ];
                let assume = authorize(
                    &router_identity,
                    std::slice::from_ref(trust),
                    &router_role,
                    account,
                    &Request {
                        principal: Principal::Attached,
                        action: "sts:AssumeRole",
                        resource: role_arn,
                        context: &context,
                    },
                );
                assert!(
                    assume.is_allowed(),
                    "{here}: router may assume {role_arn}: {assume}"
                );
                (role_arn.clone(), policies.clone())
            }
            (sender, spoke) => panic!(
                "{here}: the router is {sender} but the region's stack is {}",
                if spoke.is_some() {
                    "a spoke"
                } else {
                    "the base"
                }
            ),
        };
        let decision = send(
            &identity,
            &p.queue_policy,
            &principal,
            account,
            &p.queue_arn,
        );
        assert!(
            decision.is_allowed(),
            "{here}: {principal} may send: {decision}"
        );

        // And nobody else: the router's other identity, and an administrator of the account.
        let other = match sender {
            Sender::Home => format!("arn:aws:iam::{account}:role/{DEFAULT_SPOKE_ROLE_NAME}"),
            Sender::Spoke { .. } => router_role.clone(),
        };
        let administrator = format!("arn:aws:iam::{account}:role/admin");
        for intruder in [other.as_str(), administrator.as_str()] {
            let decision = send(
                std::slice::from_ref(&admin),
                &p.queue_policy,
                intruder,
                account,
                &p.queue_arn,
            );
            assert!(
                matches!(decision, Decision::Denied { .. }),
                "{here}: {intruder} must be refused: {decision}"
            );
        }
    }
    Ok(())
}

#[test]
fn the_ingest_queue_refuses_every_sender_but_the_stacks_rules() -> Result<()> {
    let base = template("base.yaml", BASE_TEMPLATE);
    for (stage, hub_bus) in [(hub_stage("", ""), false), (hub_stage(MEMBER, ""), true)] {
        let d = base.deploy(&stage)?;
        let queue = resolved(&d, json!({"Fn::GetAtt": ["IngestQueue", "Arn"]}));
        let policy = document(&d, "IngestQueuePolicy", &["PolicyDocument"]);
        assert_eq!(d.conditions["HasCentralBus"], hub_bus);

        // An administrator (or a CI role) whose identity policy allows sqs:SendMessage on "*",
        // and the router's own role: refused.
        let admin = Policy::parse(
            "admin",
            r#"{"Statement":{"Effect":"Allow","Action":"sqs:*","Resource":"*"}}"#,
        )
        .map_err(anyhow::Error::msg)?;
        let router_role = resolved(&d, json!({"Fn::GetAtt": ["RouterRole", "Arn"]}));
        for (who, identity) in [
            (format!("arn:aws:iam::{HUB}:role/admin"), vec![admin]),
            (router_role, role_policies(&d, "RouterRole")),
        ] {
            let decision = send(&identity, &policy, &who, HUB, &queue);
            assert!(
                matches!(decision, Decision::Denied { .. }),
                "{who} must be refused (central bus {hub_bus}): {decision}"
            );
        }

        // Each of the stack's rules, delivering as EventBridge does: allowed.
        let rules = RULES
            .iter()
            .chain(HUB_RULES.iter().filter(|_| hub_bus))
            .map(|(logical, _)| resolved(&d, json!({"Fn::GetAtt": [logical, "Arn"]})));
        let mut count = 0;
        for rule in rules {
            count += 1;
            let context = [
                ("aws:SourceArn", rule.as_str()),
                ("aws:SecureTransport", "true"),
            ];
            let request = Request {
                principal: Principal::Service("events.amazonaws.com"),
                action: "sqs:SendMessage",
                resource: &queue,
                context: &context,
            };
            let decision = evaluate(std::slice::from_ref(&policy), &request);
            assert!(decision.is_allowed(), "{rule}: {decision}");
        }
        assert_eq!(count, if hub_bus { 10 } else { 5 });

        // A rule of another account cannot use the service principal to write here.
        let foreign = format!("arn:aws:events:{HOME}:{UNSERVED}:rule/theirs");
        let context = [
            ("aws:SourceArn", foreign.as_str()),
            ("aws:SecureTransport", "true"),
        ];
        let decision = evaluate(
            std::slice::from_ref(&policy),
            &Request {
                principal: Principal::Service("events.amazonaws.com"),
                action: "sqs:SendMessage",
                resource: &queue,
                context: &context,
            },
        );
        assert!(!decision.is_allowed(), "{decision}");
    }
    Ok(())
}

#[test]
fn the_router_may_assume_the_spoke_role_only_in_accounts_it_serves() -> Result<()> {
    let base = template("base.yaml", BASE_TEMPLATE);
    let assume = |identity: &[Policy], account: &str, org: &str| {
        let role = format!("arn:aws:iam::{account}:role/{DEFAULT_SPOKE_ROLE_NAME}");
        let context = [("aws:ResourceAccount", account), ("aws:ResourceOrgID", org)];
        evaluate(
            identity,
            &Request {
                principal: Principal::Attached,
                action: "sts:AssumeRole",
                resource: &role,
                context: &context,
            },
        )
    };

    // A list of accounts: those and the hub's own (its other regions), no other.
    let listed_stage = hub_stage("111111111111,222222222222", "");
    let listed = base.deploy(&listed_stage)?;
    let identity = role_policies(&listed, "RouterRole");
    for account in [MEMBER, "222222222222", HUB] {
        let d = assume(&identity, account, ORG);
        assert!(d.is_allowed(), "{account}: {d}");
    }
    assert_eq!(assume(&identity, UNSERVED, ORG), Decision::NotAllowed);

    // An organisation: its accounts, whatever they are, and no account outside it.
    let org_stage = hub_stage("*", ORG);
    let org = base.deploy(&org_stage)?;
    let identity = role_policies(&org, "RouterRole");
    assert!(assume(&identity, UNSERVED, ORG).is_allowed());
    assert_eq!(
        assume(&identity, UNSERVED, "o-zzzz999999"),
        Decision::NotAllowed
    );

    // Serving this account only: no spoke role at all.
    let own_stage = hub_stage("", "");
    let own = base.deploy(&own_stage)?;
    let identity = role_policies(&own, "RouterRole");
    assert_eq!(assume(&identity, HUB, ORG), Decision::NotAllowed);

    // This account in several regions (a central bus, no list): its own spoke role, no other.
    let regions_stage = own_account_stage();
    let regions = base.deploy(&regions_stage)?;
    let identity = role_policies(&regions, "RouterRole");
    assert!(assume(&identity, HUB, "").is_allowed());
    assert_eq!(assume(&identity, MEMBER, ""), Decision::NotAllowed);
    // The central bus admits this account (its other regions' forwarding roles), no other.
    let bus = document(&regions, "HubEventBus", &["Policy"]);
    let bus_arn = regions.output("HubEventBusArn")?.context("the bus")?;
    let put = |account: &str| {
        let role = format!("arn:aws:iam::{account}:role/{DEFAULT_SPOKE_ROLE_NAME}-forward-{OTHER}");
        evaluate(
            std::slice::from_ref(&bus),
            &Request {
                principal: Principal::Aws(&role),
                action: "events:PutEvents",
                resource: &bus_arn,
                context: &[("aws:PrincipalArn", role.as_str())],
            },
        )
    };
    assert!(put(HUB).is_allowed(), "{}", put(HUB));
    assert_eq!(put(MEMBER), Decision::NotAllowed);
    Ok(())
}

#[test]
fn cloudformation_refuses_parameters_the_stacks_cannot_serve_safely() -> Result<()> {
    let base = template("base.yaml", BASE_TEMPLATE);
    let refused = |stage: Stage| -> Vec<String> {
        base.rules_failures(&stage)
            .unwrap()
            .into_iter()
            .map(|(rule, _)| rule)
            .collect()
    };
    let plain = || Stage::new(BASE_STACK, HUB, HOME).parameter("CodeS3Bucket", "artifacts");
    assert!(refused(plain()).is_empty());
    assert!(refused(hub_stage(MEMBER, "")).is_empty());
    assert!(refused(hub_stage("*", ORG)).is_empty());
    // One account in several regions: a central bus with no list.
    assert!(refused(own_account_stage()).is_empty());
    // "*" without an organisation, with or without the central bus: any account that trusts the
    // role name would do.
    assert_eq!(
        refused(plain().parameter("ServedAccounts", "*")),
        ["AnyAccountMeansTheOrganization"]
    );
    assert!(refused(hub_stage("*", "")).contains(&"AnyAccountMeansTheOrganization".to_owned()));
    // Lambda refuses BatchSize above 10 without a batching window at create time; the Rules say
    // so first.
    assert_eq!(
        refused(plain().parameter("MaximumBatchingWindowInSeconds", "0")),
        ["LargeBatchesNeedABatchingWindow"]
    );
    assert!(
        refused(
            plain()
                .parameter("MaximumBatchingWindowInSeconds", "0")
                .parameter("BatchSize", "10")
        )
        .is_empty()
    );
    Ok(())
}

/// A fixture event of `kind`, from `account`.
fn event_of(kind: Kind, account: &str) -> Result<Value> {
    let name = match kind {
        Kind::SpotInterruption => "spot-interruption-warning.json",
        Kind::RebalanceRecommendation => "rebalance-recommendation.json",
        Kind::StateChange => "state-change-stopping.json",
        Kind::ScheduledChange => "health-scheduled-change-bare-id.json",
        Kind::CapacityReservationInterruption => "capacity-reservation-interruption-warning.json",
    };
    let mut event = e2e_tests::fixture(name);
    event["account"] = json!(account);
    Ok(event)
}

#[test]
fn default_bus_rules_match_only_their_own_accounts_events() -> Result<()> {
    let base = template("base.yaml", BASE_TEMPLATE);
    let hub_stage = hub_stage(MEMBER, "");
    let hub = base.deploy(&hub_stage)?;
    let spoke = template("spoke.yaml", SPOKE_TEMPLATE);
    let member_stage = Stage::new(SPOKE_STACK, MEMBER, HOME)
        .parameter(
            "HubEventBusArn",
            "arn:aws:events:us-east-1:123456789012:event-bus/hub",
        )
        .parameter("RouterRoleArn", "arn:aws:iam::123456789012:role/router");
    let member = spoke.deploy(&member_stage)?;

    for (logical, kind) in RULES {
        let own = event_of(kind, HUB)?;
        let foreign = event_of(kind, MEMBER)?;
        let pattern = hub.property(logical, &["EventPattern"])?;
        assert!(matches(&pattern, &own).is_yes(), "{logical}: {pattern}");
        assert_eq!(
            matches(&pattern, &foreign),
            Matched::No,
            "base {logical} must not match account {MEMBER}'s events on the hub's default bus"
        );
        // The central bus's copy takes what the bus admits: the members' events.
        let pattern = hub.property(&format!("Hub{logical}"), &["EventPattern"])?;
        assert!(matches(&pattern, &foreign).is_yes(), "Hub{logical}");
        // A spoke forwards its own account's events, never what its default bus received from
        // others (which would reach the hub twice).
        let pattern = member.property(logical, &["EventPattern"])?;
        assert!(matches(&pattern, &foreign).is_yes(), "spoke {logical}");
        assert_eq!(matches(&pattern, &own), Matched::No, "spoke {logical}");
    }
    Ok(())
}

#[test]
fn rendered_stacks_import_what_the_other_stacks_export() -> Result<()> {
    // The tenant stack in the hub's home region imports the base stack's exports, and one in any
    // other region the spoke stack's: both render, and the queue is named with the prefix.
    let base = template("base.yaml", BASE_TEMPLATE);
    let stage = hub_stage(MEMBER, "");
    let hub = base.deploy(&stage)?;
    for (account, region) in [(HUB, HOME), (HUB, OTHER), (MEMBER, OTHER)] {
        let p = place(account, region, &hub);
        assert!(
            p.queue_arn
                .ends_with(&format!(":{account}:karpenter-alpha")),
            "{}",
            p.queue_arn
        );
        assert!(p.queue_arn.contains(region));
    }
    let missing = Stage::new("t", MEMBER, OTHER)
        .parameter("ClusterName", "alpha")
        .parameter("BaseStackName", "not-deployed");
    let tenant = template("tenant.yaml", TENANT_TEMPLATE);
    let error = tenant
        .deploy(&missing)?
        .properties("InterruptionQueue")
        .err()
        .context("an import of a stack that is not there fails")?;
    assert!(
        error.to_string().contains("not-deployed-QueuePrefix"),
        "{error}"
    );
    Ok(())
}

/// `action` on `queue` as `principal` (of the queue's account), holding `identity`, against the
/// queue's policy.
fn on_queue(
    identity: &[Policy],
    queue_policy: &Policy,
    principal: &str,
    action: &str,
    queue: &str,
) -> Decision {
    let context = [
        ("aws:SecureTransport", "true"),
        ("aws:PrincipalArn", principal),
    ];
    authorize(
        identity,
        std::slice::from_ref(queue_policy),
        principal,
        HUB,
        &Request {
            principal: Principal::Attached,
            action,
            resource: queue,
            context: &context,
        },
    )
}

fn everything() -> Policy {
    Policy::parse(
        "admin",
        r#"{"Statement":{"Effect":"Allow","Action":"*","Resource":"*"}}"#,
    )
    .unwrap()
}

/// The documented replay hands the DLQ's messages back to the function, so whoever may write it
/// could have a body of theirs routed: only the router role and the stack's rules may.
#[test]
fn the_dead_letter_queue_refuses_every_sender_but_the_router_and_the_stacks_rules() -> Result<()> {
    let base = template("base.yaml", BASE_TEMPLATE);
    for (stage, hub_bus) in [(hub_stage("", ""), false), (hub_stage(MEMBER, ""), true)] {
        let d = base.deploy(&stage)?;
        let queue = resolved(&d, json!({"Fn::GetAtt": ["DeadLetterQueue", "Arn"]}));
        let policy = document(&d, "DeadLetterQueuePolicy", &["PolicyDocument"]);
        let router_role = resolved(&d, json!({"Fn::GetAtt": ["RouterRole", "Arn"]}));

        // An administrator or CI role with sqs:SendMessage on "*": refused.
        let admin = format!("arn:aws:iam::{HUB}:role/admin");
        let decision = on_queue(&[everything()], &policy, &admin, "sqs:SendMessage", &queue);
        assert!(
            matches!(decision, Decision::Denied { .. }),
            "{admin} must be refused (central bus {hub_bus}): {decision}"
        );
        // The router's own dead letters.
        let decision = on_queue(
            &role_policies(&d, "RouterRole"),
            &policy,
            &router_role,
            "sqs:SendMessage",
            &queue,
        );
        assert!(decision.is_allowed(), "the router role: {decision}");
        // Each of the stack's rules' undeliverable events, as EventBridge sends them.
        let rules: Vec<String> = RULES
            .iter()
            .chain(HUB_RULES.iter().filter(|_| hub_bus))
            .map(|(logical, _)| resolved(&d, json!({"Fn::GetAtt": [logical, "Arn"]})))
            .collect();
        assert_eq!(rules.len(), if hub_bus { 10 } else { 5 });
        let foreign = format!("arn:aws:events:{HOME}:{UNSERVED}:rule/theirs");
        for (rule, admitted) in rules
            .iter()
            .map(|r| (r.as_str(), true))
            .chain([(foreign.as_str(), false)])
        {
            let context = [("aws:SourceArn", rule), ("aws:SecureTransport", "true")];
            let decision = evaluate(
                std::slice::from_ref(&policy),
                &Request {
                    principal: Principal::Service("events.amazonaws.com"),
                    action: "sqs:SendMessage",
                    resource: &queue,
                    context: &context,
                },
            );
            assert_eq!(decision.is_allowed(), admitted, "{rule}: {decision}");
        }
    }
    Ok(())
}

/// What takes a cluster's interruptions out of its queue (receive, delete, change visibility,
/// purge) is its Karpenter's controller role alone: an administrator or another workload whose
/// identity policy allows sqs:* is refused, so "the probe was taken" means Karpenter took it.
#[test]
fn each_tenant_queue_is_read_only_by_its_clusters_karpenter_role() -> Result<()> {
    const READS: [&str; 4] = [
        "sqs:ReceiveMessage",
        "sqs:DeleteMessage",
        "sqs:ChangeMessageVisibility",
        "sqs:PurgeQueue",
    ];
    let base = template("base.yaml", BASE_TEMPLATE);
    let hub_stage = hub_stage("", "");
    let hub = base.deploy(&hub_stage)?;
    let tenant = template("tenant.yaml", TENANT_TEMPLATE);
    let karpenter = format!("arn:aws:iam::{HUB}:role/alpha-karpenter");
    let under_path = format!("arn:aws:iam::{HUB}:role/eks/alpha-karpenter");
    let reader = format!("arn:aws:iam::{HUB}:role/platform/karpenter-reader");
    // (what the stack is given, the role that reads, whether the stack's grant is its policy)
    let cases = [
        (
            "KarpenterRoleName",
            "alpha-karpenter",
            karpenter.clone(),
            true,
        ),
        (
            "KarpenterRoleName",
            "alpha-karpenter",
            under_path.clone(),
            true,
        ),
        ("ReaderRoleArn", reader.as_str(), reader.clone(), false),
    ];
    for (parameter, value, role, granted) in cases {
        let mut stage = Stage::new("alpha-tenant", HUB, HOME)
            .parameter("ClusterName", "alpha")
            .parameter(parameter, value);
        stage.exports = hub.exports()?;
        let d = tenant.deploy(&stage)?;
        let queue = resolved(&d, json!({"Fn::GetAtt": ["InterruptionQueue", "Arn"]}));
        let policy = document(&d, "InterruptionQueuePolicy", &["PolicyDocument"]);
        let identity = if granted {
            vec![document(&d, "KarpenterQueueAccess", &["PolicyDocument"])]
        } else {
            vec![everything()]
        };
        for action in ["sqs:ReceiveMessage", "sqs:DeleteMessage"] {
            let decision = on_queue(&identity, &policy, &role, action, &queue);
            assert!(
                decision.is_allowed(),
                "{parameter}={value}: {role} {action}: {decision}"
            );
        }
        for intruder in [
            format!("arn:aws:iam::{HUB}:role/admin"),
            format!("arn:aws:iam::{HUB}:role/beta-karpenter"),
            format!("arn:aws:iam::{HUB}:role/xalpha-karpenter"),
            resolved(&hub, json!({"Fn::GetAtt": ["RouterRole", "Arn"]})),
        ] {
            for action in READS {
                let decision = on_queue(&[everything()], &policy, &intruder, action, &queue);
                assert!(
                    matches!(decision, Decision::Denied { .. }),
                    "{parameter}={value}: {intruder} {action} must be refused: {decision}"
                );
            }
        }
    }
    Ok(())
}

/// The hub bus takes events only from the forwarding roles spoke.yaml creates (in the served
/// accounts, or the organisation's), not from every principal there: an administrator or a
/// workload of a member account puts nothing on it.
#[test]
fn the_hub_bus_admits_only_the_spoke_stacks_forwarding_roles() -> Result<()> {
    let base = template("base.yaml", BASE_TEMPLATE);
    let spoke = template("spoke.yaml", SPOKE_TEMPLATE);
    for (served, org) in [(MEMBER, ""), ("*", ORG)] {
        let stage = hub_stage(served, org);
        let hub = base.deploy(&stage)?;
        let bus = document(&hub, "HubEventBus", &["Policy"]);
        let bus_arn = hub.output("HubEventBusArn")?.context("the bus")?;
        let router_role = resolved(&hub, json!({"Fn::GetAtt": ["RouterRole", "Arn"]}));
        let put = |principal: &str| {
            let mut context = vec![
                ("aws:PrincipalArn", principal),
                ("aws:PrincipalAccount", MEMBER),
            ];
            if !org.is_empty() {
                context.push(("aws:PrincipalOrgID", org));
            }
            evaluate(
                std::slice::from_ref(&bus),
                &Request {
                    principal: Principal::Aws(principal),
                    action: "events:PutEvents",
                    resource: &bus_arn,
                    context: &context,
                },
            )
        };
        // The forwarding role of a member's spoke stack, in each region and with a RolePath.
        for (region, path) in [(OTHER, ""), (HOME, "/platform/")] {
            let mut stage = Stage::new(SPOKE_STACK, MEMBER, region)
                .parameter("HubEventBusArn", &bus_arn)
                .parameter("RouterRoleArn", &router_role);
            if !path.is_empty() {
                stage = stage.parameter("RolePath", path);
            }
            let d = spoke.deploy(&stage)?;
            let forwarder = resolved(&d, json!({"Fn::GetAtt": ["ForwardToHubRole", "Arn"]}));
            let decision = put(&forwarder);
            assert!(
                decision.is_allowed(),
                "{forwarder} (served {served}): {decision}"
            );
        }
        for intruder in [
            format!("arn:aws:iam::{MEMBER}:role/admin"),
            format!("arn:aws:iam::{MEMBER}:user/ci"),
            format!("arn:aws:iam::{MEMBER}:role/{DEFAULT_SPOKE_ROLE_NAME}"),
        ] {
            let decision = put(&intruder);
            assert!(
                !decision.is_allowed(),
                "{intruder} (served {served}): {decision}"
            );
        }
    }
    Ok(())
}

/// What only an SCP can stop: a batch handed to the function directly is trusted as its invoker
/// is (simulate, adopt's probe and the DLQ replay go that way), so whoever may invoke it can have
/// any node drained. `policies/router-invoke-scp.json` leaves that to the operators' role alone,
/// whatever anyone's identity policy says; the event source mapping's invocations are Lambda's
/// own, which no SCP governs.
#[test]
fn the_invoke_scp_leaves_the_router_to_its_operators_alone() -> Result<()> {
    let scp = Policy::parse(
        "router-invoke-scp.json",
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../policies/router-invoke-scp.json"
        ))?,
    )
    .map_err(anyhow::Error::msg)?;
    let base = template("base.yaml", BASE_TEMPLATE);
    let stage = hub_stage("", "");
    let d = base.deploy(&stage)?;
    let function = resolved(&d, json!({"Fn::GetAtt": ["RouterFunction", "Arn"]}));
    let invoke = |principal: &str, action: &str| {
        evaluate(
            &[everything(), scp.clone()],
            &Request {
                principal: Principal::Attached,
                action,
                resource: &function,
                context: &[("aws:PrincipalArn", principal)],
            },
        )
    };
    for principal in [
        format!("arn:aws:iam::{HUB}:role/admin"),
        format!("arn:aws:iam::{HUB}:role/ci-deployer"),
        format!("arn:aws:iam::{HUB}:role/x-interruption-router-operator"),
        format!("arn:aws:iam::{HUB}:user/someone"),
    ] {
        for action in ["lambda:InvokeFunction", "lambda:InvokeAsync"] {
            let decision = invoke(&principal, action);
            assert!(
                matches!(decision, Decision::Denied { .. }),
                "{principal} {action}: {decision}"
            );
        }
    }
    for operator in [
        format!("arn:aws:iam::{HUB}:role/interruption-router-operator"),
        format!("arn:aws:iam::{HUB}:role/platform/interruption-router-operator"),
    ] {
        let decision = invoke(&operator, "lambda:InvokeFunction");
        assert!(decision.is_allowed(), "{operator}: {decision}");
    }
    // The SCP names the function base.yaml makes, and no other.
    assert!(
        function.contains(":function:interruption-router-RouterFunction-"),
        "{function}"
    );
    let other = format!("arn:aws:lambda:{HOME}:{HUB}:function:payments");
    let decision = evaluate(
        &[everything(), scp],
        &Request {
            principal: Principal::Attached,
            action: "lambda:InvokeFunction",
            resource: &other,
            context: &[(
                "aws:PrincipalArn",
                &format!("arn:aws:iam::{HUB}:role/admin"),
            )],
        },
    );
    assert!(decision.is_allowed(), "{decision}");
    Ok(())
}

/// The alarm topic base.yaml creates is encrypted with the stack's own key when it creates one
/// (KmsKey=Create), and that key lets CloudWatch's alarms of this account, and no other's,
/// publish to it: an alarm that cannot publish pages nobody.
#[test]
fn the_alarm_topic_is_encrypted_with_the_stacks_key_which_cloudwatch_may_publish_with() -> Result<()>
{
    let base = template("base.yaml", BASE_TEMPLATE);
    let stage = hub_stage("", "").parameter("KmsKey", "Create");
    let d = base.deploy(&stage)?;
    let key = resolved(&d, json!({"Fn::GetAtt": ["QueueKey", "Arn"]}));
    let topic = d.properties("AlarmTopic")?.context("the stack's topic")?;
    assert_eq!(topic["KmsMasterKeyId"], json!(key), "{topic}");
    let key_policy = document(&d, "QueueKey", &["KeyPolicy"]);
    for (account, admitted) in [(HUB, true), (UNSERVED, false)] {
        for action in ["kms:GenerateDataKey", "kms:Decrypt"] {
            let decision = evaluate(
                std::slice::from_ref(&key_policy),
                &Request {
                    principal: Principal::Service("cloudwatch.amazonaws.com"),
                    action,
                    resource: &key,
                    context: &[("aws:SourceAccount", account)],
                },
            );
            assert_eq!(
                decision.is_allowed(),
                admitted,
                "CloudWatch of {account} {action}: {decision}"
            );
        }
    }
    // Without a key of its own the topic stays as it was (a given key's policy is its owner's).
    for kms in [
        "",
        &format!("arn:aws:kms:{HOME}:{HUB}:key/1234abcd-12ab-34cd-56ef-1234567890ab"),
    ] {
        let stage = hub_stage("", "").parameter("KmsKey", kms);
        let d = base.deploy(&stage)?;
        let topic = d.properties("AlarmTopic")?.context("the stack's topic")?;
        assert!(
            topic.get("KmsMasterKeyId").is_none(),
            "KmsKey={kms}: {topic}"
        );
    }
    Ok(())
}
