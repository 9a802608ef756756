//! Direct member rules (docs/many-accounts.md, "Member rules straight into the hub"): in the hub's
//! region a member's spoke stack with `HubDirectQueueArn` has its five rules write the hub's
//! direct queue themselves, as the member's `<SpokeRoleName>-direct-<region>` role. Played on the
//! emulator end to end: the member's default bus (EventBridge's cross-account target semantics,
//! `local_aws::eventbridge`), the hub's direct queue and its policy as deployed, the router
//! binary with the deployed function's environment under a Lambda Runtime API, and the member's
//! Karpenter queue. A forged send is refused where AWS would refuse it: another account's role by
//! the queue's policy (judged by aws-model, as moto evaluates none), and a served member's role
//! naming another member's instance by the router.

use std::time::Duration;

use anyhow::{Context, Result};
use aws_model::{
    access::{Identity, ResourcePolicy, authorize_role},
    policy::{Policy, Principal, Request},
};
use e2e_tests::{World, drain, organisation::event_in};
use lab::sandbox::{Sandbox, Spoke};
use local_aws::{
    esm::{EventSourceMapping, Stop},
    eventbridge::DefaultBus,
    moto::{ACCOUNT as HUB, REGION, karpenter_tags, launch},
};

use crate::cli::verifying::{
    assert_failures, queue_policy, regional::regional_hub, set_queue_policy, verify_member,
};

const MEMBER: &str = "111111111111";
const NEIGHBOUR: &str = "222222222222";
const UNSERVED: &str = "333333333333";

/// The hub (CentralBus, both members served), MEMBER's spoke writing the direct queue and
/// NEIGHBOUR's forwarding to the central bus, a node of each member's cluster.
struct Estate {
    world: World,
    hub: Sandbox,
    member: Spoke,
    neighbour: Spoke,
    direct_queue: String,
    member_node: String,
    neighbour_node: String,
}

impl Estate {
    async fn new() -> Result<Self> {
        let world = World::start().await?;
        let served = format!("{MEMBER},{NEIGHBOUR}");
        let hub = Sandbox::deploy_in(
            &world.moto,
            REGION,
            "ir",
            &[],
            &[
                ("CentralBus", "Enabled"),
                ("ServedAccounts", served.as_str()),
            ],
        )
        .await?;
        let direct_queue = hub.base.output("DirectQueueArn")?.to_owned();
        let member = hub
            .deploy_spoke_in(
                &world.moto,
                MEMBER,
                REGION,
                &[("HubDirectQueueArn", direct_queue.as_str())],
                &["prod"],
                &[],
            )
            .await?;
        let neighbour = hub
            .deploy_spoke_in(&world.moto, NEIGHBOUR, REGION, &[], &["web"], &[])
            .await?;
        let member_node = launch(&member.aws.ec2, &karpenter_tags("prod"), 1)
            .await?
            .pop()
            .context("no instance")?;
        let neighbour_node = launch(&neighbour.aws.ec2, &karpenter_tags("web"), 1)
            .await?
            .pop()
            .context("no instance")?;
        Ok(Self {
            world,
            hub,
            member,
            neighbour,
            direct_queue,
            member_node,
            neighbour_node,
        })
    }

    /// The direct queue's mapping, taken over from moto (the ingest queue's too, left idle).
    async fn direct_mapping(&self) -> Result<EventSourceMapping> {
        let all = EventSourceMapping::take_over_all(
            &self.hub.aws.lambda,
            &self.hub.aws.sqs,
            self.hub.function_name()?,
            Duration::from_secs(30),
        )
        .await?;
        assert_eq!(
            all.len(),
            2,
            "the ingest queue's mapping and the direct queue's"
        );
        all.into_iter()
            .find(|m| m.queue_arn == self.direct_queue)
            .context("no mapping of the direct queue")
    }

    /// The ids of the events in `spoke`'s `cluster` queue, read as its Karpenter reads them.
    async fn received(&self, spoke: &Spoke, cluster: &str) -> Result<Vec<String>> {
        let url =
            aws_clients::aws::queue_url(&spoke.aws.sqs, &format!("karpenter-{cluster}")).await?;
        Ok(drain(&spoke.aws.sqs, &url)
            .await?
            .iter()
            .map(|m| m.json()["id"].as_str().unwrap_or_default().to_owned())
            .collect())
    }

    /// The `reason` of each message in the hub's dead-letter queue.
    async fn dead_letter_reasons(&self) -> Result<Vec<String>> {
        let url = self.hub.queue_url("ir-dlq").await?;
        let mut reasons = Vec::new();
        for m in drain(&self.hub.aws.sqs, &url).await? {
            reasons.push(m.attributes.get("reason").cloned().unwrap_or_default());
        }
        Ok(reasons)
    }
}

#[tokio::test]
async fn a_members_rules_deliver_straight_into_the_hub_and_a_forged_send_is_refused() -> Result<()>
{
    let estate = Estate::new().await?;
    let env = estate.hub.function_environment().await?;
    let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert!(pairs.contains(&("DIRECT_QUEUE_ARN", estate.direct_queue.as_str())));
    let router = estate.world.start_router(&pairs).await?;
    // verify judges the member's direct path as it judges the forwarding one (before the
    // mappings are taken over from moto, which disables them there).
    let report = verify_member(&estate.hub.aws, "ir", MEMBER).await;
    assert_failures(&report, &[]);
    let mapping = estate.direct_mapping().await?;

    // The member's spot warning, through its own rule, as its direct role.
    let member_bus = DefaultBus::new(&estate.member.aws, Duration::ZERO)
        .await?
        .reaching(HUB, &estate.hub.aws);
    let warning = event_in(
        MEMBER,
        REGION,
        "spot-interruption-warning.json",
        &estate.member_node,
        "direct-1",
    );
    let delivered = member_bus.put(&warning).await?;
    assert_eq!(
        delivered,
        std::slice::from_ref(&estate.direct_queue),
        "one hop, straight into the hub"
    );
    assert!(member_bus.refusals().await.is_empty());
    let stop = Stop {
        handled: Some(1),
        idle: Duration::from_secs(20),
    };
    let drained = mapping
        .drain(&estate.world.sqs, &router, stop, |_| {})
        .await?;
    assert_eq!(drained.handled, 1);
    assert_eq!(estate.received(&estate.member, "prod").await?, ["direct-1"]);

    // The member's direct role may send to the direct queue, so its admin can put any body
    // there: naming the neighbour's node, the router refuses it (SenderId is the member's role).
    let direct_role = estate.member.stack.output("DirectRoleArn")?.to_owned();
    let forger = estate
        .member
        .aws
        .assume_role(&direct_role, "forger")
        .await?;
    let forged = event_in(
        NEIGHBOUR,
        REGION,
        "spot-interruption-warning.json",
        &estate.neighbour_node,
        "forged-1",
    );
    let url = estate.hub.queue_url("ir-direct").await?;
    forger
        .sqs
        .send_message()
        .queue_url(&url)
        .message_body(forged.to_string())
        .send()
        .await?;
    let drained = mapping
        .drain(&estate.world.sqs, &router, stop, |_| {})
        .await?;
    assert_eq!(drained.handled, 1);
    assert!(estate.received(&estate.neighbour, "web").await?.is_empty());
    assert_eq!(estate.dead_letter_reasons().await?, ["foreign-sender"]);

    // The neighbour's own events still come through the central bus and the ingest queue, which
    // the direct queue's check does not touch (accounts:: and adopt::member play that path).
    // Who SQS admits at all, by the direct queue's policy as deployed: the member's direct role;
    // not the same role name in an account the hub does not serve, nor another role of a served
    // account, nor the hub's own administrator.
    let policy = Policy::parse(
        "the direct queue's policy",
        &queue_policy(&estate.hub.aws, &url).await?.to_string(),
    )
    .map_err(anyhow::Error::msg)?;
    let may_send = Policy::parse(
        "identity",
        r#"{"Statement": [{"Effect": "Allow", "Action": "sqs:*", "Resource": "*"}]}"#,
    )
    .map_err(anyhow::Error::msg)?;
    let role_in = |account: &str, name: &str| format!("arn:aws:iam::{account}:role/{name}");
    let direct_name = "interruption-router-spoke-direct-us-east-1";
    for (who, allowed) in [
        (role_in(MEMBER, direct_name), true),
        (role_in(UNSERVED, direct_name), false),
        (role_in(MEMBER, "Admin"), false),
        (role_in(HUB, "Admin"), false),
    ] {
        let account = who.split(':').nth(4).unwrap_or_default().to_owned();
        let context = [
            ("aws:PrincipalArn", who.as_str()),
            ("aws:PrincipalAccount", account.as_str()),
            ("aws:SecureTransport", "true"),
        ];
        let decision = authorize_role(
            &Identity {
                arn: &who,
                policies: std::slice::from_ref(&may_send),
                boundary: None,
            },
            &policy,
            ResourcePolicy::Ordinary,
            HUB,
            &Request {
                principal: Principal::Attached,
                action: "sqs:SendMessage",
                resource: &estate.direct_queue,
                context: &context,
            },
        );
        assert_eq!(decision.is_allowed(), allowed, "{who}: {decision}");
    }

    Ok(())
}

/// verify fails, each with its fix, when the direct queue's policy no longer admits the member,
/// and when the member's execution role may no longer send there; and passes once each is put
/// back.
#[tokio::test]
async fn verify_fails_with_a_fix_when_the_queue_policy_or_the_execution_role_is_wrong() -> Result<()>
{
    let estate = Estate::new().await?;
    let verify = || async { verify_member(&estate.hub.aws, "ir", MEMBER).await };
    let rules = [
        "spoke:111111111111:rule:SpotInterruptionRule",
        "spoke:111111111111:rule:RebalanceRecommendationRule",
        "spoke:111111111111:rule:StateChangeRule",
        "spoke:111111111111:rule:ScheduledChangeRule",
        "spoke:111111111111:rule:CapacityReservationInterruptionRule",
    ];
    assert_failures(&verify().await, &[]);

    // The queue's policy as a hub serving only the neighbour renders it.
    let url = estate.hub.queue_url("ir-direct").await?;
    let deployed = queue_policy(&estate.hub.aws, &url).await?;
    let text = deployed.to_string();
    let narrowed = text
        .replace(&format!("\"{MEMBER}\","), "")
        .replace(&format!("\"arn:aws:iam::{MEMBER}:root\","), "");
    assert_ne!(narrowed, text, "the member is named in {text}");
    set_queue_policy(&estate.hub.aws, &url, &serde_json::from_str(&narrowed)?).await?;
    let report = verify().await;
    let failed: Vec<&str> = report.failures().iter().map(|c| c.name.as_str()).collect();
    assert_eq!(failed[0], "direct-queue:policy", "{}", report.render());
    assert_eq!(&failed[1..], rules, "{}", report.render());
    assert!(
        report.render().contains("the hub's direct queue refuses"),
        "{}",
        report.render()
    );
    set_queue_policy(&estate.hub.aws, &url, &deployed).await?;
    assert_failures(&verify().await, &[]);

    // The execution role's policy sends elsewhere.
    let role = aws_clients::aws::stack_resource(
        &estate.member.aws,
        "interruption-router-spoke",
        "DirectRole",
    )
    .await?;
    estate
        .member
        .aws
        .iam
        .put_role_policy()
        .role_name(&role)
        .policy_name("deliver-to-hub")
        .policy_document(
            serde_json::json!({"Version": "2012-10-17", "Statement": [{"Sid": "Elsewhere",
                "Effect": "Allow", "Action": "sqs:SendMessage",
                "Resource": format!("arn:aws:sqs:{REGION}:{HUB}:ir-ingest")}]})
            .to_string(),
        )
        .send()
        .await?;
    let report = verify().await;
    assert_failures(&report, &rules);
    assert!(
        report.render().contains("may not sqs:SendMessage"),
        "{}",
        report.render()
    );

    // The spoke role without iam:GetRole on the direct role (a spoke stack from before direct
    // rules creating it): the router could not check a direct record's sender.
    let mut policy = aws_model::documents::spoke_role_policy(MEMBER, REGION, "karpenter-")?;
    policy["Statement"]
        .as_array_mut()
        .context("statements")?
        .retain(|s| s["Sid"] != "ReadDirectRoleId");
    estate
        .member
        .aws
        .iam
        .put_role_policy()
        .role_name("interruption-router-spoke")
        .policy_name("interruption-router-spoke")
        .policy_document(policy.to_string())
        .send()
        .await?;
    let report = verify().await;
    let failed: Vec<&str> = report.failures().iter().map(|c| c.name.as_str()).collect();
    assert!(
        failed.contains(&"spoke:111111111111:role-reads-direct-role"),
        "{}",
        report.render()
    );
    Ok(())
}

/// The recommended topology, two regions at once: a hub in us-east-1 and one in us-west-2 (one
/// stack name, a `SpokeRoleName` each), and in each region the member's spoke writing its own
/// region's hub's direct queue, a cluster in each. Each region's warning reaches its own
/// region's cluster, through its own hub's router, both hubs working at once; verify passes
/// against each.
#[tokio::test]
async fn a_hub_per_region_each_fed_by_its_members_direct_rules_at_once() -> Result<()> {
    let world = World::start().await?;
    let mut sites = Vec::new();
    for (region, cluster) in [("us-east-1", "prod"), ("us-west-2", "web")] {
        let (hub, member, _) = regional_hub(&world, region, MEMBER, cluster, true).await?;
        let direct_queue = hub.base.output("DirectQueueArn")?.to_owned();
        assert!(direct_queue.starts_with(&format!("arn:aws:sqs:{region}:{HUB}:")));
        let node = launch(&member.aws.ec2, &karpenter_tags(cluster), 1)
            .await?
            .pop()
            .context("no instance")?;
        let report = verify_member(&hub.aws, "ir", MEMBER).await;
        assert_failures(&report, &[]);
        // The router as this hub's function runs, in its own region.
        let mut env = hub.function_environment().await?;
        env.push(("AWS_REGION".into(), region.into()));
        env.push(("AWS_DEFAULT_REGION".into(), region.into()));
        let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let router = world.start_router(&pairs).await?;
        let mapping = EventSourceMapping::take_over_all(
            &hub.aws.lambda,
            &hub.aws.sqs,
            hub.function_name()?,
            Duration::from_secs(30),
        )
        .await?
        .into_iter()
        .find(|m| m.queue_arn == direct_queue)
        .context("no mapping of the direct queue")?;
        let bus = DefaultBus::new(&member.aws, Duration::ZERO)
            .await?
            .reaching(HUB, &hub.aws);
        sites.push((region, cluster, hub, member, node, router, mapping, bus));
    }
    // Both regions' warnings at once.
    for (region, _, _, _, node, _, _, bus) in &sites {
        let warning = event_in(
            MEMBER,
            region,
            "spot-interruption-warning.json",
            node,
            &format!("warning-{region}"),
        );
        assert_eq!(bus.put(&warning).await?.len(), 1, "{region}");
    }
    let stop = Stop {
        handled: Some(1),
        idle: Duration::from_secs(20),
    };
    let drains = sites.iter().map(|(_, _, hub, _, _, router, mapping, _)| {
        mapping.drain(&hub.aws.sqs, router, stop, |_| {})
    });
    for drained in futures_util::future::join_all(drains).await {
        assert_eq!(drained?.handled, 1);
    }
    for (region, cluster, _, member, ..) in &sites {
        let url =
            aws_clients::aws::queue_url(&member.aws.sqs, &format!("karpenter-{cluster}")).await?;
        let ids: Vec<String> = drain(&member.aws.sqs, &url)
            .await?
            .iter()
            .map(|m| m.json()["id"].as_str().unwrap_or_default().to_owned())
            .collect();
        assert_eq!(ids, [format!("warning-{region}")], "{region}'s {cluster}");
    }
    Ok(())
}
