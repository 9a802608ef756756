//! A hub per region (docs/many-accounts.md, "A hub per region"): base.yaml under one stack name in
//! us-east-1 and in us-west-2, each serving a member through its central bus with a spoke role of
//! its own (`SpokeRoleName` per region), and the member's spoke stack in each region pointed at
//! that region's hub. verify passes against each hub for the member; each hub's router assumes
//! its own region's role, which only that hub's router role may assume.

use anyhow::Result;
use e2e_tests::World;
use lab::sandbox::{Sandbox, Spoke};

use super::{assert_failures, verify_member};

const MEMBER: &str = "111111111111";

#[tokio::test]
async fn a_hub_per_region_under_one_stack_name_serves_each_regions_spoke_and_verifies() -> Result<()>
{
    let world = World::start().await?;
    let mut hubs = Vec::new();
    for (region, cluster) in [("us-east-1", "prod"), ("us-west-2", "web")] {
        let (hub, spoke, role) = regional_hub(&world, region, MEMBER, cluster, false).await?;
        hubs.push((region, hub, spoke, role));
    }
    let routers: Vec<&str> = hubs
        .iter()
        .map(|(_, hub, ..)| hub.router_role_arn())
        .collect::<Result<_>>()?;
    assert_ne!(routers[0], routers[1], "a router role per hub");
    for (region, hub, spoke, role) in &hubs {
        // One stack name in both regions: the dashboard's name carries the region (dashboards
        // are global to an account; moto would not refuse the clash).
        assert_eq!(hub.base.output("DashboardName")?, format!("ir-{region}"));
        let environment = hub.function_environment().await?;
        assert!(
            environment.contains(&("SPOKE_ROLE_NAME".to_owned(), role.clone())),
            "{environment:?}"
        );
        assert_eq!(
            spoke.role_arn()?,
            format!("arn:aws:iam::{MEMBER}:role/{role}")
        );
        let report = verify_member(&hub.aws, "ir", MEMBER).await;
        assert_failures(&report, &[]);
        assert!(
            report
                .render()
                .starts_with(&format!("verify ir in {region}, member account {MEMBER}")),
            "{}",
            report.render()
        );
        // The region's spoke role trusts its own hub's router, not the other's.
        let trust = spoke
            .aws
            .iam
            .get_role()
            .role_name(role)
            .send()
            .await?
            .role()
            .and_then(|r| r.assume_role_policy_document())
            .map(urlencoding_free)
            .unwrap_or_default();
        let own = hub.router_role_arn()?;
        let other = routers.iter().find(|r| **r != own).unwrap();
        assert!(trust.contains(own) && !trust.contains(*other), "{trust}");
    }
    Ok(())
}

/// IAM returns a role's trust policy URL-encoded; the ARNs in it read the same once `%3A` and
/// `%2F` are decoded.
fn urlencoding_free(document: &str) -> String {
    document.replace("%3A", ":").replace("%2F", "/")
}

/// A region's hub of the recommended topology: base.yaml as `ir` in `region`, its central bus
/// serving `member` through that region's own spoke role (`SpokeRoleName`
/// `interruption-router-spoke-<region>`: IAM is global, and each role trusts one router role),
/// and `member`'s spoke stack there pointed at it, with `cluster`'s tenant; with `direct`, the
/// spoke's rules write the hub's direct queue (`HubDirectQueueArn`). The spoke role's name too.
pub(crate) async fn regional_hub(
    world: &World,
    region: &str,
    member: &str,
    cluster: &str,
    direct: bool,
) -> Result<(Sandbox, Spoke, String)> {
    let role = format!("interruption-router-spoke-{region}");
    let hub = Sandbox::deploy_in(
        &world.moto,
        region,
        "ir",
        &[],
        &[
            ("CentralBus", "Enabled"),
            ("ServedAccounts", member),
            ("SpokeRoleName", role.as_str()),
        ],
    )
    .await?;
    let direct_queue = hub.base.output("DirectQueueArn")?.to_owned();
    let mut parameters = vec![("SpokeRoleName", role.as_str())];
    if direct {
        parameters.push(("HubDirectQueueArn", direct_queue.as_str()));
    }
    let spoke = hub
        .deploy_spoke_in(&world.moto, member, region, &parameters, &[cluster], &[])
        .await?;
    Ok((hub, spoke, role))
}
