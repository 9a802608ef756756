//! spoke.yaml as a service-managed StackSet deploys it (docs/many-accounts.md): the same
//! parameters in every member account, nothing that must differ per account. Two member accounts
//! of the emulator get the stack from the two hub values alone, and each ends up with its own
//! spoke role, rules that match its own account's events, and the export its tenant stacks import.

use anyhow::{Context, Result};
use aws_model::{aws::Aws, stacks::SPOKE_TEMPLATE, template::Template};
use e2e_tests::World;
use local_aws::moto::{REGION, sdk_config_as};
use serde_json::Value;

const HUB_BUS: &str = "arn:aws:events:us-east-1:999999999999:event-bus/interruption-router-hub";
const ROUTER_ROLE: &str = "arn:aws:iam::999999999999:role/interruption-router-RouterRole-ABC";

#[tokio::test]
async fn the_spoke_takes_the_same_parameters_in_every_member_account() -> Result<()> {
    // What a StackSet must be given: the parameters without a default are the hub's two values.
    let template = Template::parse("spoke.yaml", SPOKE_TEMPLATE)?;
    let mut required: Vec<&str> = template.doc["Parameters"]
        .as_object()
        .context("Parameters")?
        .iter()
        .filter(|(_, p)| p.get("Default").is_none())
        .map(|(k, _)| k.as_str())
        .collect();
    required.sort();
    assert_eq!(required, ["HubEventBusArn", "RouterRoleArn"]);

    let world = World::start().await?;
    for account in ["111111111111", "222222222222"] {
        let member = Aws::new(
            &sdk_config_as(world.moto.endpoint(), account, REGION, "stacksets-exec").await?,
        )?;
        // StackSets name the stack StackSet-<set>-<id>.
        let name = format!("StackSet-interruption-router-spoke-{account}");
        let stack = aws_model::stacks::create(
            &member.cfn,
            &name,
            SPOKE_TEMPLATE,
            &[("HubEventBusArn", HUB_BUS), ("RouterRoleArn", ROUTER_ROLE)],
        )
        .await?;
        let spoke_role = format!("arn:aws:iam::{account}:role/interruption-router-spoke");
        assert_eq!(stack.output("SpokeRoleArn")?, spoke_role);
        let role = member
            .iam
            .get_role()
            .role_name("interruption-router-spoke")
            .send()
            .await?;
        assert_eq!(role.role().map(|r| r.arn()), Some(spoke_role.as_str()));
        // The export tenant stacks import, whatever the stack is called.
        let exports = member.cfn.list_exports().send().await?;
        let exported: Vec<(&str, &str)> = exports
            .exports()
            .iter()
            .filter_map(|e| Some((e.name()?, e.value()?)))
            .collect();
        assert!(
            exported.contains(&("interruption-router:RouterRoleArn", spoke_role.as_str())),
            "{account}: {exported:?}"
        );
        // Each rule matches this account's own events and forwards them to the hub's bus.
        let rules = member.events.list_rules().send().await?;
        assert_eq!(rules.rules().len(), 5, "{account}");
        for rule in rules.rules() {
            let pattern: Value = serde_json::from_str(rule.event_pattern().context("a pattern")?)?;
            assert_eq!(pattern["account"], serde_json::json!([account]), "{rule:?}");
            let targets = member
                .events
                .list_targets_by_rule()
                .rule(rule.name().context("a name")?)
                .send()
                .await?;
            assert_eq!(
                targets
                    .targets()
                    .iter()
                    .map(|t| t.arn())
                    .collect::<Vec<_>>(),
                [HUB_BUS]
            );
        }
    }
    Ok(())
}
