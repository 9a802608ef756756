//! Upgrading a deployment of the previous release (its templates as `releases/<version>/` keeps
//! them) to this one: as AWS would apply the update (the create-only properties of AWS's resource
//! schemas: nothing replaced), and in moto with events flowing through EventBridge, the ingest
//! queue and the router binary the whole time (nothing lost, nothing misrouted, no queue
//! replaced, the release's own code taken).
//!
//! The router binary is this build's throughout: the previous release's binary is not built
//! here. What changes under the events is the stacks: the base stack's function, role, queues,
//! rules and event source mapping, the tenant stacks' queues, a member account's spoke stack.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use anyhow::{Context, Result};
use aws_clients::aws::Aws;
use aws_model::{
    events::Origin,
    stacks::{self, BASE_TEMPLATE, SPOKE_TEMPLATE, TENANT_TEMPLATE},
    template::{ResourceSchemas, Template, replacements},
};
use aws_sdk_sqs::types::QueueAttributeName;
use e2e_tests::{World, karpenter_tags};
use interruption_router::VERSION;
use local_aws::{
    esm::{EventSourceMapping, Stop},
    eventbridge::DefaultBus,
    moto::{ACCOUNT, REGION, sdk_config_as},
};
use routerctl::verify;

use super::{previous_release, released_template};
use crate::stacks::update_scenarios;

const BASE: &str = "ir";
const CLUSTERS: [&str; 2] = ["alpha", "beta"];
const KARPENTER_ROLE: &str = "karpenter-controller-beta";
const MEMBER: &str = "111111111111";

fn current(name: &str) -> &'static str {
    match name {
        "base.yaml" => BASE_TEMPLATE,
        "tenant.yaml" => TENANT_TEMPLATE,
        _ => SPOKE_TEMPLATE,
    }
}

#[test]
fn the_previous_releases_stacks_update_to_these_templates_replacing_and_deleting_nothing()
-> Result<()> {
    let previous = previous_release();
    let schemas = ResourceSchemas::load(&e2e_tests::cfn_schemas()?, REGION)?;
    for (name, scenario, stage) in update_scenarios() {
        let old = Template::parse(name, &released_template(&previous, name))?;
        let new = Template::parse(name, current(name))?;
        let before = old.deploy(&stage)?;
        // `aws cloudformation deploy` keeps every parameter it is not given; a parameter new to
        // the template takes its default.
        let kept = stage.updating(&before, &new);
        let after = new.deploy(&kept)?;
        assert_eq!(
            e2e_tests::losing_state(replacements(&before, &after, &schemas)?),
            Vec::<String>::new(),
            "{name} ({scenario}) from {previous}"
        );
    }
    Ok(())
}

/// Every queue's identity: a replaced queue has a new ARN or creation time (moto keeps a
/// re-created queue's name and URL).
async fn queue_identities(aws: &Aws, names: &[String]) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for name in names {
        let url = aws
            .sqs
            .get_queue_url()
            .queue_name(name)
            .send()
            .await?
            .queue_url()
            .context("no url")?
            .to_owned();
        let attributes = aws
            .sqs
            .get_queue_attributes()
            .queue_url(&url)
            .attribute_names(QueueAttributeName::QueueArn)
            .attribute_names(QueueAttributeName::CreatedTimestamp)
            .send()
            .await?;
        let a = attributes.attributes().context("attributes")?;
        out.insert(
            name.clone(),
            format!(
                "{url} {} {}",
                a[&QueueAttributeName::QueueArn],
                a[&QueueAttributeName::CreatedTimestamp]
            ),
        );
    }
    Ok(out)
}

fn version_check(report: &verify::Report) -> verify::Check {
    report.check("version").expect("a version check").clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_previous_release_upgrades_in_place_while_events_flow_losing_and_replacing_nothing()
-> Result<()> {
    let previous = previous_release();
    let world = World::start().await?;
    let aws = Aws::new(&world.moto.sdk_config().await)?;
    // The previous release's code key (its CodeS3Key default) and this release's.
    for key in [
        "bootstrap.zip".to_owned(),
        stacks::release_code_key("arm64"),
    ] {
        world
            .moto
            .put_object("artifacts", &key, b"the router runs as a local process")
            .await?;
    }

    // The previous release deployed: the base stack, two tenants (beta granting Karpenter's
    // role), and a member account's spoke stack. Every parameter is given, defaults included,
    // as `aws cloudformation deploy` gives them: moto counts a parameter first given on update
    // as changed, and re-creates every resource that reads it (which AWS does not).
    let old_base = released_template(&previous, "base.yaml");
    let mut parameters = defaults(&old_base)?;
    parameters.insert("CodeS3Bucket".into(), "artifacts".into());
    let parameters: Vec<(&str, &str)> = parameters
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let base = aws_clients::stacks::create(&aws.cfn, BASE, &old_base, &parameters).await?;
    lab::sandbox::create_karpenter_role(&aws.iam, KARPENTER_ROLE).await?;
    let mut tenants = Vec::new();
    for cluster in CLUSTERS {
        let mut parameters = vec![("ClusterName", cluster)];
        if cluster == "beta" {
            parameters.push(("KarpenterRoleName", KARPENTER_ROLE));
        }
        let name = stacks::tenant_stack_name(BASE, cluster);
        aws_clients::stacks::create(
            &aws.cfn,
            &name,
            &released_template(&previous, "tenant.yaml"),
            &parameters,
        )
        .await?;
        tenants.push(name);
    }
    let member = Aws::new(
        &sdk_config_as(world.moto.endpoint(), MEMBER, REGION, "platform-deployer").await?,
    )?;
    let spoke_parameters = [
        (
            "HubEventBusArn",
            "arn:aws:events:us-east-1:123456789012:event-bus/ir-hub",
        ),
        ("RouterRoleArn", base.output("RouterRoleArn")?),
    ];
    aws_clients::stacks::create(
        &member.cfn,
        "interruption-router-spoke",
        &released_template(&previous, "spoke.yaml"),
        &spoke_parameters,
    )
    .await?;

    let before = verify::run(&aws, &verify_options()).await;
    let unversioned = version_check(&before);
    assert!(!unversioned.passed);
    assert!(
        unversioned.detail.starts_with("ir has no Version output"),
        "{unversioned:?}"
    );

    // What must survive: every queue, the stacks' resources, a message Karpenter has not read.
    let queues: Vec<String> = [format!("{BASE}-ingest"), format!("{BASE}-dlq")]
        .into_iter()
        .chain(CLUSTERS.map(|c| format!("karpenter-{c}")))
        .collect();
    let queues_before = queue_identities(&aws, &queues).await?;
    for cluster in CLUSTERS {
        let url = world.queue_url(&format!("karpenter-{cluster}")).await?;
        world
            .sqs
            .send_message()
            .queue_url(url)
            .message_body(r#"{"unread":"before the upgrade"}"#)
            .send()
            .await?;
    }
    let physical =
        async |aws: &Aws, stack: &str| aws_clients::aws::stack_resources(&aws.cfn, stack).await;
    let mut resources_before = BTreeMap::new();
    for stack in [BASE.to_owned()].iter().chain(&tenants) {
        resources_before.insert(stack.clone(), physical(&aws, stack).await?);
    }
    let spoke_before = physical(&member, "interruption-router-spoke").await?;

    let mut nodes: Vec<(String, &str)> = Vec::new();
    for cluster in CLUSTERS {
        for _ in 0..2 {
            nodes.push((world.launch(&karpenter_tags(cluster)).await?, cluster));
        }
    }
    let function = base.output("FunctionName")?.to_owned();
    let mut router = world.start_deployed_router(&aws.lambda, &function).await?.0;
    let esm =
        EventSourceMapping::take_over(&aws.lambda, &world.sqs, &function, Duration::from_secs(30))
            .await?;

    // Events flow: a spot warning per node every round, through the default bus as AWS runs it
    // from the rules the stacks have at that moment (local_aws::eventbridge: moto's own PutEvents
    // also delivers to disabled rules), each marked with its round so its copy in a cluster
    // queue says which event it is. Each stack's update waits for two more rounds, so events are
    // sent between every two updates as well as during them.
    let bus = DefaultBus::new(&aws, Duration::ZERO).await?;
    let updated = Arc::new(AtomicBool::new(false));
    let base_updated = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicUsize::new(0));
    let stopped = Arc::new(AtomicBool::new(false));
    let publisher = {
        let (nodes, updated, rounds) = (nodes.clone(), updated.clone(), rounds.clone());
        let stopped = stopped.clone();
        tokio::spawn(async move {
            let published = async {
                let origin = Origin {
                    account: ACCOUNT.into(),
                    region: REGION.into(),
                };
                let mut sent: BTreeMap<String, String> = BTreeMap::new();
                let mut after_update = 0;
                for round in 0.. {
                    if updated.load(Ordering::SeqCst) {
                        after_update += 1;
                    }
                    if after_update > 3 {
                        break;
                    }
                    for (node, cluster) in &nodes {
                        let mut event = origin.spot_warning(node, &format!("r{round}"));
                        let mark = format!("round {round} {node}");
                        event.event["detail"]["upgrade-probe"] = mark.clone().into();
                        sent.insert(mark, cluster.to_string());
                        bus.put(&event.event).await?;
                    }
                    rounds.store(round + 1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                anyhow::Ok(sent)
            };
            let result = published.await;
            // The updates wait for rounds that will not come.
            stopped.store(true, Ordering::SeqCst);
            result
        })
    };

    // The update, as the CHANGELOG says: the member's spoke first (its forwarding role takes the
    // name the new hub bus policy admits), then the base stack with CodeS3Key empty (the
    // release's zip), then the tenants.
    let updater = {
        let (cfn, member_cfn, tenants) = (aws.cfn.clone(), member.cfn.clone(), tenants.clone());
        let (updated, base_updated, rounds, stopped) = (
            updated.clone(),
            base_updated.clone(),
            rounds.clone(),
            stopped.clone(),
        );
        let router_role = base.output("RouterRoleArn")?.to_owned();
        tokio::spawn(async move {
            let after_two_more_rounds = async |step: usize| {
                while rounds.load(Ordering::SeqCst) < 2 * step {
                    anyhow::ensure!(!stopped.load(Ordering::SeqCst), "events stopped flowing");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                anyhow::Ok(())
            };
            let update = async {
                after_two_more_rounds(1).await?;
                aws_clients::stacks::update(
                    &member_cfn,
                    "interruption-router-spoke",
                    SPOKE_TEMPLATE,
                    &[("RouterRoleArn", router_role.as_str())],
                )
                .await?;
                println!("upgrade: the member's spoke stack updated");
                after_two_more_rounds(2).await?;
                aws_clients::stacks::update(&cfn, BASE, BASE_TEMPLATE, &[("CodeS3Key", "")])
                    .await?;
                base_updated.store(true, Ordering::SeqCst);
                println!("upgrade: {BASE} updated");
                for (n, tenant) in tenants.iter().enumerate() {
                    after_two_more_rounds(3 + n).await?;
                    aws_clients::stacks::update(&cfn, tenant, TENANT_TEMPLATE, &[]).await?;
                    println!("upgrade: {tenant} updated");
                }
                anyhow::Ok(())
            };
            let result = update.await;
            // Events stop flowing either way; a failed update fails the test below.
            updated.store(true, Ordering::SeqCst);
            result
        })
    };

    // Lambda's poller, all along; once the base stack is updated, new execution environments
    // with the function's new configuration take over (as after any code update).
    let mut handled = 0;
    let mut swapped = false;
    for _ in 0..2_000 {
        let drained = esm
            .drain(
                &world.sqs,
                &router,
                Stop {
                    handled: Some(8),
                    idle: Duration::from_secs(2),
                },
                |_| {},
            )
            .await?;
        handled += drained.handled;
        if !swapped && base_updated.load(Ordering::SeqCst) {
            let fresh = world.start_deployed_router(&aws.lambda, &function).await?.0;
            std::mem::replace(&mut router, fresh).stop().await;
            swapped = true;
        }
        if publisher.is_finished()
            && drained.records == 0
            && in_queue(&world, &esm.queue_url).await? == 0
        {
            break;
        }
    }
    let sent = publisher.await??;
    updater.await??;
    router.stop().await;
    assert!(
        swapped,
        "the router was restarted after the base stack's update"
    );

    // Every event reached its own cluster's queue, and no other.
    let mut reached: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut unread = 0;
    for cluster in CLUSTERS {
        let url = world.queue_url(&format!("karpenter-{cluster}")).await?;
        for message in world.drain(&url).await? {
            let body = message.json();
            if body["unread"] == "before the upgrade" {
                unread += 1;
                continue;
            }
            let mark = body["detail"]["upgrade-probe"]
                .as_str()
                .context("an event of this test")?;
            reached
                .entry(mark.to_owned())
                .or_default()
                .insert(cluster.to_owned());
        }
    }
    let lost: Vec<&String> = sent.keys().filter(|m| !reached.contains_key(*m)).collect();
    let misrouted: Vec<(&String, &BTreeSet<String>)> = reached
        .iter()
        .filter(|(mark, clusters)| {
            sent.get(*mark)
                .is_none_or(|c| clusters.len() != 1 || !clusters.contains(c))
        })
        .collect();
    println!(
        "upgrade {previous} -> {VERSION}: {} events sent while the stacks updated, {} reached their cluster, {handled} records handled",
        sent.len(),
        reached.len()
    );
    assert!(
        sent.len() >= 10 * nodes.len(),
        "events flowed: {}",
        sent.len()
    );
    assert_eq!(lost, Vec::<&String>::new(), "lost");
    assert_eq!(misrouted, Vec::new(), "misrouted");
    assert_eq!(
        unread,
        CLUSTERS.len(),
        "the unread messages stayed in their queues"
    );
    let dlq = world.queue_url(&format!("{BASE}-dlq")).await?;
    assert_eq!(world.drain(&dlq).await?, []);

    // Nothing replaced: the queues, the base and tenant stacks' resources, the spoke's roles.
    assert_eq!(queue_identities(&aws, &queues).await?, queues_before);
    for (stack, resources) in &resources_before {
        let after = physical(&aws, stack).await?;
        for (logical, id) in resources {
            // moto forgets a log group's physical id on any update (it implements none); the
            // stacks test asks CloudWatch Logs that the group is still there.
            if logical == "RouterLogGroup" {
                continue;
            }
            // Dashboards are global to the account: 0.2.0 names base.yaml's <stack>-<region>,
            // which replaces it (its body is the template's: nothing is lost).
            if logical == "RouterDashboard" {
                continue;
            }
            // Karpenter's grant takes the path that names its queue and key: a new policy,
            // attached before the old one goes (e2e_tests::losing_state). The events say
            // Karpenter's role kept its grant.
            if logical == "KarpenterQueueAccess" {
                continue;
            }
            assert_eq!(after.get(logical), Some(id), "{stack} {logical}");
        }
    }
    // The spoke role is the same; the forwarding role is replaced by one of the name the hub bus
    // admits (it holds no state: e2e_tests::losing_state), and the spoke's events kept flowing.
    let spoke_after = physical(&member, "interruption-router-spoke").await?;
    assert_eq!(spoke_after.get("SpokeRole"), spoke_before.get("SpokeRole"));
    assert_eq!(
        spoke_after.get("ForwardToHubRole").map(String::as_str),
        Some("interruption-router-spoke-forward-us-east-1")
    );

    // The upgraded deployment says which release it is, and runs the release's zip.
    let described = aws.cfn.describe_stacks().stack_name(BASE).send().await?;
    let outputs: BTreeMap<&str, &str> = described.stacks()[0]
        .outputs()
        .iter()
        .filter_map(|o| Some((o.output_key()?, o.output_value()?)))
        .collect();
    assert_eq!(outputs.get("Version"), Some(&VERSION));
    let deployed = aws
        .lambda
        .get_function()
        .function_name(&function)
        .send()
        .await?;
    assert_eq!(
        deployed
            .tags()
            .and_then(|t| t.get("interruption-router:version"))
            .map(String::as_str),
        Some(VERSION)
    );
    let location = deployed
        .code()
        .and_then(|c| c.location())
        .unwrap_or_default();
    assert!(
        location.ends_with(&stacks::release_code_key("arm64")),
        "the function runs the release's zip: {location}"
    );
    let after = verify::run(&aws, &verify_options()).await;
    let versioned = version_check(&after);
    assert!(versioned.passed, "{versioned:?}");
    assert_eq!(
        versioned.detail,
        format!("release {VERSION}, routerctl's own (the release's zip)")
    );
    Ok(())
}

/// A template's parameter defaults.
fn defaults(template: &str) -> Result<BTreeMap<String, String>> {
    let doc = Template::parse("template", template)?.doc;
    Ok(doc["Parameters"]
        .as_object()
        .context("Parameters")?
        .iter()
        .filter_map(|(k, p)| {
            let default = match &p["Default"] {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Number(n) => n.to_string(),
                _ => return None,
            };
            Some((k.clone(), default))
        })
        .collect())
}

fn verify_options() -> verify::Options {
    verify::Options {
        stack: BASE.into(),
        clusters: CLUSTERS.map(str::to_owned).to_vec(),
        ..verify::Options::default()
    }
}

/// Records in the ingest queue, visible or not (a record handed back is invisible for a while).
async fn in_queue(world: &World, url: &str) -> Result<u64> {
    let out = world
        .sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await?;
    let a = out.attributes().context("attributes")?;
    let count = |k: &QueueAttributeName| {
        a.get(k)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or_default()
    };
    Ok(count(&QueueAttributeName::ApproximateNumberOfMessages)
        + count(&QueueAttributeName::ApproximateNumberOfMessagesNotVisible))
}
