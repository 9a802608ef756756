//! Updating deployed stacks to these templates: from the last release's templates nothing is
//! replaced or deleted (the create-only properties of AWS's schemas), and a deployed base and
//! tenant stack update in place through moto keeping their messages, an untagged tenant queue
//! still written. `update_scenarios` is shared with `locked_down::updates`.

use std::{collections::BTreeSet, time::Duration};

use anyhow::{Context, Result};
use aws_clients::stacks::Stack;
use aws_model::{
    events::Origin,
    stacks::{self, BASE_TEMPLATE, TENANT_TEMPLATE},
    template::{ResourceSchemas, Stage, Template, replacements},
};
use aws_sdk_sqs::types::QueueAttributeName;
use e2e_tests::{World, karpenter_tags};
use local_aws::moto::{ACCOUNT, REGION};

use super::{
    BASE, Clients, KARPENTER_ROLE, assert_no_inline_policy, attached_policy, deploy_base,
    expected_patterns, rules,
};

/// The stage of each deployment the update tests start from.
pub(crate) fn update_scenarios() -> Vec<(&'static str, &'static str, Stage)> {
    use aws_model::template::Stage;
    let base = || Stage::new(BASE, ACCOUNT, REGION).parameter("CodeS3Bucket", "artifacts");
    let tenant = |cluster: &str| {
        Stage::new(&stacks::tenant_stack_name(BASE, cluster), ACCOUNT, REGION)
            .parameter("ClusterName", cluster)
            .export(
                &format!("{BASE}-RouterRoleArn"),
                "arn:aws:iam::123456789012:role/router",
            )
            .export(&format!("{BASE}-QueuePrefix"), "karpenter-")
            // What the base stack exports now, for tenant stacks that name no stack.
            .export(
                "interruption-router:RouterRoleArn",
                "arn:aws:iam::123456789012:role/router",
            )
            .export("interruption-router:QueuePrefix", "karpenter-")
            // Its alarm topic (given, or the one it created), which tenant alarms notify.
            .export(
                "interruption-router:AlarmTopicArn",
                "arn:aws:sns:us-east-1:123456789012:ir-AlarmTopic-X",
            )
    };
    vec![
        ("base.yaml", "Queue mode", base()),
        (
            "base.yaml",
            "hub of two accounts",
            base()
                .parameter("CentralBus", "Enabled")
                .parameter("ServedAccounts", "111111111111,222222222222"),
        ),
        (
            "base.yaml",
            "hub of an organisation",
            base()
                .parameter("CentralBus", "Enabled")
                .parameter("ServedAccounts", "*")
                .parameter("OrganizationId", "o-abcd123456"),
        ),
        ("tenant.yaml", "importing", tenant("alpha")),
        (
            "tenant.yaml",
            "with Karpenter's role",
            tenant("beta").parameter("KarpenterRoleName", KARPENTER_ROLE),
        ),
        (
            "spoke.yaml",
            "creating the spoke role",
            Stage::new("interruption-router-spoke", "111111111111", REGION)
                .parameter(
                    "HubEventBusArn",
                    "arn:aws:events:us-east-1:123456789012:event-bus/ir-hub",
                )
                .parameter("RouterRoleArn", "arn:aws:iam::123456789012:role/router"),
        ),
    ]
}

#[test]
fn updating_deployed_stacks_to_these_templates_replaces_and_deletes_nothing() -> Result<()> {
    // CloudFormation replaces a resource when a property its type's schema lists as create-only
    // changes (a replaced queue loses its messages, a replaced role its ARN in every policy that
    // names it); moto applies updates its own way, so this reads AWS's schemas.
    let schemas = ResourceSchemas::load(&e2e_tests::cfn_schemas()?, REGION)?;
    let current = |name: &str| match name {
        "base.yaml" => BASE_TEMPLATE,
        "tenant.yaml" => TENANT_TEMPLATE,
        _ => stacks::SPOKE_TEMPLATE,
    };
    for (name, scenario, stage) in update_scenarios() {
        let old = Template::parse(name, &e2e_tests::previous_template(name))?;
        let new = Template::parse(name, current(name))?;
        let before = old.deploy(&stage)?;
        // An update keeps every parameter the stack was deployed with (`aws cloudformation
        // deploy` passes UsePreviousValue for those it is not given), defaults included; only a
        // parameter new to the template takes its new default.
        let kept = stage.updating(&before, &new);
        let after = new.deploy(&kept)?;
        let replaced = e2e_tests::losing_state(replacements(&before, &after, &schemas)?);
        // One deletion is the point of the update: Karpenter's grant moves from an inline policy
        // (which shares 10,240 characters per role with the controller's own, and which tools
        // that own a role's inline policies delete) to a managed policy attached to the role.
        // CloudFormation creates the new resource in the update and deletes the old one in the
        // cleanup that follows, so the role never lacks the grant.
        let granted =
            name == "tenant.yaml" && before.properties("KarpenterQueueAccessPolicy")?.is_some();
        let expected: Vec<String> = if granted {
            vec!["KarpenterQueueAccessPolicy (AWS::IAM::Policy) is deleted".to_owned()]
        } else {
            Vec::new()
        };
        assert_eq!(
            replaced,
            expected,
            "{name} ({scenario}): the update would lose state:\n{}",
            replaced.join("\n")
        );
        if granted {
            let old_grant = before
                .properties("KarpenterQueueAccessPolicy")?
                .context("the inline grant")?;
            let new_grant = after
                .properties("KarpenterQueueAccess")?
                .context("the managed grant")?;
            assert_eq!(new_grant["Roles"], old_grant["Roles"], "{scenario}");
            assert_eq!(
                new_grant["PolicyDocument"]["Statement"], old_grant["PolicyDocument"]["Statement"],
                "{scenario}"
            );
        }
    }
    // The analysis does see a replacement: renaming a queue replaces it.
    let old = Template::parse("tenant.yaml", TENANT_TEMPLATE)?;
    let renamed = Template::parse(
        "tenant.yaml",
        &TENANT_TEMPLATE.replace(
            "\"${Prefix}${ClusterName}\"",
            "\"${Prefix}${ClusterName}-v2\"",
        ),
    )?;
    let stage = update_scenarios().remove(4).2;
    let replaced = replacements(&old.deploy(&stage)?, &renamed.deploy(&stage)?, &schemas)?;
    // The queue, the tenant record named after it, and Karpenter's grant, whose path names the
    // queue (a new policy for the new queue, never a new version of the old one's).
    assert_eq!(replaced.len(), 3, "{replaced:?}");
    assert!(replaced[0].starts_with("InterruptionQueue (AWS::SQS::Queue) is replaced: QueueName"));
    assert!(replaced[1].starts_with("TenantRecord (AWS::SSM::Parameter) is replaced: Name"));
    assert!(
        replaced[2].starts_with("KarpenterQueueAccess (AWS::IAM::ManagedPolicy) is replaced: Path")
    );
    Ok(())
}

#[tokio::test]
async fn a_deployed_base_and_tenant_stack_update_in_place_and_keep_their_messages() -> Result<()> {
    let world = World::start().await?;
    let aws = Clients::of(&world).await;
    let base = deploy_base(&world, &aws, &e2e_tests::previous_template("base.yaml")).await?;
    lab::sandbox::create_karpenter_role(&aws.iam, KARPENTER_ROLE).await?;
    let tenant = aws_clients::stacks::create(
        &aws.cfn,
        &stacks::tenant_stack_name(BASE, "alpha"),
        &e2e_tests::previous_template("tenant.yaml"),
        &[
            ("ClusterName", "alpha"),
            ("KarpenterRoleName", KARPENTER_ROLE),
        ],
    )
    .await?;
    // What is in flight when the update runs: an event waiting in the ingest queue, and one in
    // the cluster's queue that Karpenter has not read yet.
    let ingest = world.queue_url(&format!("{BASE}-ingest")).await?;
    let alpha = world.queue_url("karpenter-alpha").await?;
    for url in [&ingest, &alpha] {
        world
            .sqs
            .send_message()
            .queue_url(url)
            .message_body("in flight")
            .send()
            .await?;
    }
    let physical = async |stack: &str| aws_clients::aws::stack_resources(&aws.cfn, stack).await;
    let (base_before, tenant_before) = (physical(&base.name).await?, physical(&tenant.name).await?);

    aws_clients::stacks::update(&aws.cfn, &base.name, BASE_TEMPLATE, &[]).await?;
    let in_flight = world.drain(&alpha).await?;
    assert_eq!(in_flight.len(), 1, "karpenter-alpha kept its message");
    routed_by_the_updated_base_into_an_untagged_tenant_queue(&world, &aws, &base, &alpha).await?;
    aws_clients::stacks::update(&aws.cfn, &tenant.name, TENANT_TEMPLATE, &[]).await?;
    // Karpenter's grant moved from an inline policy to a managed one attached to its role.
    attached_policy(&aws, KARPENTER_ROLE, "KarpenterQueueAccess").await?;
    assert_no_inline_policy(&aws, KARPENTER_ROLE).await?;

    let (base_after, tenant_after) = (physical(&base.name).await?, physical(&tenant.name).await?);
    // Queues, roles, the function, its log group and the event source mapping stay what they
    // were. (moto deletes and re-creates a rule whose pattern changes, which AWS updates in
    // place; the schema test above covers rules as AWS treats them.)
    for logical in [
        "IngestQueue",
        "DeadLetterQueue",
        "RouterRole",
        "RouterFunction",
        "IngestEventSourceMapping",
    ] {
        assert_eq!(
            base_before.get(logical),
            base_after.get(logical),
            "{logical}"
        );
        assert!(base_after.contains_key(logical), "{logical}");
    }
    // moto forgets the log group's physical id on any update of it (it implements no log group
    // update) but keeps the group: ask CloudWatch Logs.
    let logs = aws_clients::aws::Aws::new(&world.moto.sdk_config().await)?.logs;
    let group = &base_before["RouterLogGroup"];
    let groups = logs
        .describe_log_groups()
        .log_group_name_prefix(group)
        .send()
        .await?;
    assert_eq!(groups.log_groups().len(), 1, "{group} still exists");
    assert_eq!(
        tenant_before.get("InterruptionQueue"),
        tenant_after.get("InterruptionQueue")
    );
    let received = world.drain(&ingest).await?;
    assert_eq!(received.len(), 1, "the ingest queue kept its message");
    // The updated deployment is the new one: the default-bus rules match this account only.
    let patterns: BTreeSet<String> = rules(&aws)
        .await?
        .into_values()
        .map(|(pattern, _)| pattern.to_string())
        .collect();
    assert_eq!(patterns, expected_patterns());
    Ok(())
}

/// Upgrading only the base stack silences no tenant queue made before the tenant tag: the router
/// knows it by its policy (it admits the router alone), and writes it.
async fn routed_by_the_updated_base_into_an_untagged_tenant_queue(
    world: &World,
    aws: &Clients,
    base: &Stack,
    queue_url: &str,
) -> Result<()> {
    let tags = world
        .sqs
        .list_queue_tags()
        .queue_url(queue_url)
        .send()
        .await?;
    assert!(
        tags.tags().is_none_or(|t| t.is_empty()),
        "the old tenant stack tagged nothing: {tags:?}"
    );
    // moto skips AWS::SQS::QueuePolicy: the policy the old tenant stack gave the queue.
    let arn = world.queue_arn(queue_url).await?;
    let router_role = base.output("RouterRoleArn")?;
    world
        .sqs
        .set_queue_attributes()
        .queue_url(queue_url)
        .attributes(
            QueueAttributeName::Policy,
            aws_model::documents::tenant_queue_policy(&arn, router_role)?.to_string(),
        )
        .send()
        .await?;
    let config = aws
        .lambda
        .get_function_configuration()
        .function_name(base.output("FunctionName")?)
        .send()
        .await?;
    let env: Vec<(String, String)> = config
        .environment()
        .and_then(|e| e.variables())
        .context("no environment")?
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert!(
        env.iter()
            .any(|(k, v)| k == "ROUTER_ROLE_ARN" && v == router_role)
    );
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let router = world.start_router(&env).await?;
    let node = world.launch(&karpenter_tags("alpha")).await?;
    let origin = Origin {
        account: ACCOUNT.into(),
        region: REGION.into(),
    };
    let body = origin.spot_warning(&node, "after-the-base-update").body();
    let answer = router
        .invoke(
            e2e_tests::sqs_event(&[body]).to_string(),
            Duration::from_secs(30),
        )
        .await;
    assert!(
        e2e_tests::batch_item_failures(&answer).is_empty(),
        "{answer:?}"
    );
    let forwarded: u64 = router
        .emf_documents()
        .iter()
        .filter_map(|d| d["Forwarded"].as_u64())
        .sum();
    assert_eq!(forwarded, 1, "{:?}", router.emf_documents());
    let received = world.drain(queue_url).await?;
    assert_eq!(
        received.len(),
        1,
        "the router wrote the untagged tenant queue"
    );
    router.stop().await;
    Ok(())
}
