//! spoke.yaml as a service-managed StackSet deploys it (docs/many-accounts.md): the same
//! parameters in every member account, nothing that must differ per account. Two member accounts
//! of the emulator get the stack from the two hub values alone, and each ends up with its own
//! spoke role, rules that match its own account's events, and the export its tenant stacks import.

use anyhow::{Context, Result};
use aws_clients::aws::Aws;
use aws_model::{stacks::SPOKE_TEMPLATE, template::Template};
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
        let stack = aws_clients::stacks::create(
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

/// The shell block of docs/many-accounts.md that puts the spoke over an OU.
fn documented_stack_set_block() -> String {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/many-accounts.md"
    ))
    .expect("docs/many-accounts.md");
    let section = &doc[doc
        .find("## An organisation in one command")
        .expect("the StackSet section")..];
    let start = section.find("```sh\n").expect("its shell block") + "```sh\n".len();
    let end = start + section[start..].find("```").expect("the block's end");
    section[start..end].to_owned()
}

/// The `aws` CLI the tests run: the project's (`.venv/bin`, as `make` puts it first), else PATH's.
fn aws_cli_path() -> String {
    let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/../.venv/bin");
    format!("{venv}:{}", std::env::var("PATH").unwrap_or_default())
}

/// The template where the block's TEMPLATE URL says (`aws s3 sync` of the release put it there).
async fn place_the_template(moto: &local_aws::moto::MotoServer, script: &str) -> Result<()> {
    let template = script
        .lines()
        .find_map(|l| l.strip_prefix("TEMPLATE="))
        .context("the block sets TEMPLATE")?;
    let url = template.split_whitespace().next().unwrap_or_default();
    let rest = url.strip_prefix("https://").context("an https URL")?;
    let (host, key) = rest.split_once('/').context("a key")?;
    let bucket = host.split('.').next().unwrap_or_default();
    moto.put_object(bucket, key, SPOKE_TEMPLATE.as_bytes())
        .await
}

/// Runs `script` with bash and the AWS CLI against `moto`.
fn run_against_the_emulator(
    moto: &local_aws::moto::MotoServer,
    script: &str,
) -> Result<std::process::Output> {
    Ok(std::process::Command::new("bash")
        .args(["-euo", "pipefail", "-c", script])
        .envs(moto.env())
        .env("PATH", aws_cli_path())
        .output()?)
}

/// The documented commands, pasted as they are, against an emulator whose StackSets run one
/// operation at a time for a while, refusing a second (OperationInProgressException) unless
/// managed execution queues it, as CloudFormation does (`moto_fixes/`): they run in order, the
/// role's region first, each waited for, none refused. The same two create-stack-instances back
/// to back on a stack set without managed execution, as these docs gave them before, are refused.
#[tokio::test]
async fn the_documented_stack_set_commands_run_in_order_as_pasted() -> Result<()> {
    let world = World::start().await?;
    let block = documented_stack_set_block();
    place_the_template(&world.moto, &block).await?;
    let ran = run_against_the_emulator(&world.moto, &block)?;
    assert!(
        ran.status.success(),
        "{}{}",
        String::from_utf8_lossy(&ran.stdout),
        String::from_utf8_lossy(&ran.stderr)
    );
    let cfn = aws_sdk_cloudformation::Client::from_conf(
        aws_sdk_cloudformation::config::Builder::from(&world.moto.sdk_config().await)
            .region(aws_config::Region::new("eu-west-1"))
            .build(),
    );
    let operations = cfn
        .list_stack_set_operations()
        .stack_set_name("interruption-router-spoke")
        .send()
        .await?;
    let statuses: Vec<&str> = operations
        .summaries()
        .iter()
        .filter_map(|o| o.status().map(|s| s.as_str()))
        .collect();
    assert_eq!(statuses, ["SUCCEEDED", "SUCCEEDED"]);

    // The hazard the waits are for: the two operations back to back, no managed execution. The
    // first runs for minutes, as CloudFormation's do, so the second meets it running however
    // slowly the loaded machine starts the CLI (3 s was outlasted once in make test).
    world
        .moto
        .set_stack_set_operation_time(std::time::Duration::from_secs(600))
        .await?;
    let back_to_back = block
        .replace(" --managed-execution Active=true", "")
        .replace("interruption-router-spoke", "back-to-back")
        .replace("wait_for \"$op\"", "");
    let refused = run_against_the_emulator(&world.moto, &back_to_back)?;
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("OperationInProgressException"), "{said}");
    Ok(())
}
