//! The router on a hub deployed from this release's templates into the world, the way verify's
//! tests deploy theirs: configured from the environment base.yaml gives its function, acting as
//! the role base.yaml makes, forwarding into the queue tenant.yaml makes, each send judged by that
//! queue's own policy. What the templates and the router must agree on is proven here in a
//! millisecond, on the one model both halves run on.

use std::sync::Arc;

use serde_json::json;

use super::{Msg, handed_back, invoke, spot, world::WorldAws};
use aws_model::stacks::{BASE_TEMPLATE, TENANT_TEMPLATE, tenant_parameters, tenant_stack_name};
use aws_world::World;
use router_core::{config::Config, event::Kinds, handler::Router};

const HUB: &str = super::world::HUB;
const REGION: &str = super::world::REGION;
const STACK: &str = "ir";
const NODE: &str = "i-0a000001";

/// base.yaml with its defaults, and alpha's tenant stack; the router as base.yaml runs it; one
/// node of alpha's.
fn deployed() -> (Arc<WorldAws>, Router<WorldAws>) {
    let world = World::new(HUB, REGION);
    let base = world
        .deploy(STACK, BASE_TEMPLATE, &[("CodeS3Bucket", "artefacts")])
        .expect("base.yaml deploys");
    world.put_role(
        "KarpenterController-alpha",
        Vec::new(),
        json!({"Version": "2012-10-17", "Statement": []}),
    );
    let tenant = tenant_parameters(
        &base.parameters,
        "alpha",
        "KarpenterController-alpha",
        Kinds::ALL,
    );
    let tenant: Vec<(&str, &str)> = tenant
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    world
        .deploy(&tenant_stack_name(STACK, "alpha"), TENANT_TEMPLATE, &tenant)
        .expect("tenant.yaml deploys");
    let name = base.outputs["FunctionName"].clone();
    let function = world.read(|_, site| site.functions[&name].clone());
    let config = Config::from_lookup(|var| function.environment.get(var).cloned())
        .expect("base.yaml configures the router validly");
    let role = function.role.expect("base.yaml gives the function a role");
    let aws = Arc::new(WorldAws::new(&world, &role, &[]));
    aws.node(HUB, REGION, NODE, "alpha");
    let router = Router::new(&config, aws.clone(), REGION, name);
    (aws, router)
}

/// The `reason` of each message in the dead-letter queue base.yaml made.
fn dead_letter_reasons(aws: &WorldAws) -> Vec<String> {
    let dlq = aws.world().read(|_, site| {
        let url = &site
            .functions
            .values()
            .next()
            .expect("the router")
            .environment["DEAD_LETTER_QUEUE_URL"];
        url.rsplit('/').next().unwrap_or_default().to_owned()
    });
    aws.held(HUB, REGION, &dlq)
        .into_iter()
        .filter_map(|m| m.attributes.into_iter().find(|(k, _)| k == "reason"))
        .map(|(_, v)| v)
        .collect()
}

fn warning(id: &str) -> Msg {
    Msg::new(id, spot(id, NODE, HUB, REGION))
}

#[tokio::test(start_paused = true)]
async fn a_spot_warning_reaches_the_queue_tenant_yaml_made_whose_policy_admits_the_router() {
    let (aws, router) = deployed();
    let answered = invoke(&router, &aws, &[warning("w1")]).await;
    assert!(handed_back(&answered).is_empty());
    assert_eq!(answered.metrics.forwarded.get("alpha"), Some(&1));
    let bodies = aws.bodies(HUB, REGION, "karpenter-alpha");
    assert_eq!(bodies.len(), 1);
    assert!(bodies[0].contains(NODE), "{}", bodies[0]);
    assert!(dead_letter_reasons(&aws).is_empty());
}

/// The tenant queue's policy edited to deny the router's role: SQS refuses the send, and the
/// record is handed back (the access-denied grace), not reported forwarded.
#[tokio::test(start_paused = true)]
async fn a_tenant_queue_whose_policy_denies_the_router_refuses_its_send() {
    let (aws, router) = deployed();
    let role = aws.world().caller().to_owned();
    aws.world().site(|site| {
        let queue = site
            .queues
            .get_mut("karpenter-alpha")
            .expect("tenant.yaml's");
        let arn = queue.attributes["QueueArn"].clone();
        let deny = json!({"Version": "2012-10-17", "Statement": [{
            "Effect": "Deny", "Principal": {"AWS": role}, "Action": "sqs:SendMessage",
            "Resource": arn}]});
        queue.attributes.insert("Policy".into(), deny.to_string());
    });
    let answered = invoke(&router, &aws, &[warning("w1")]).await;
    assert_eq!(handed_back(&answered), ["w1"]);
    assert_eq!(answered.metrics.forwarded.get("alpha"), None);
    assert!(aws.bodies(HUB, REGION, "karpenter-alpha").is_empty());
}

/// The queue deleted by hand while its tenant stack stands: the record tenant.yaml wrote is the
/// one the router reads, so the loss pages (dead-lettered `queue-missing`) rather than passing as
/// an offboarding.
#[tokio::test(start_paused = true)]
async fn a_queue_deleted_under_its_tenant_stack_is_dead_lettered_as_missing() {
    let (aws, router) = deployed();
    aws.world()
        .site(|site| site.queues.remove("karpenter-alpha"));
    let answered = invoke(&router, &aws, &[warning("w1")]).await;
    assert!(handed_back(&answered).is_empty());
    assert_eq!(dead_letter_reasons(&aws), ["queue-missing"]);
}
