//! The layers pass each call to the model, which decides it: what the model refuses reaches the
//! router refused, what it stores is an arrival, and a lost answer loses only the answer.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use router_core::{
    aws::{Aws, CallError, Identity, SendEntry, Session},
    event::InstanceId,
    scope::Scope,
};

use super::{EnvAws, Injected, World, queue_name};
use crate::{
    ingest::Ingest,
    organisation::{Cluster, Instance, Organisation},
    quotas::Quotas,
};

const HUB: &str = "111111111111";
const MEMBER: &str = "222222222222";
const REGION: &str = "us-east-1";

/// A hub and one member account, a cluster in each, a node of the member's.
fn world() -> Arc<World> {
    let clusters = [(HUB, "home"), (MEMBER, "away")]
        .map(|(account, name)| Cluster {
            account: account.into(),
            region: REGION.into(),
            name: name.into(),
        })
        .to_vec();
    let node = InstanceId::parse("i-0123456789abcdef0").expect("an id");
    let instances = BTreeMap::from([(
        node,
        Instance {
            account: MEMBER.into(),
            region: REGION.into(),
            cluster: Some(1),
        },
    )]);
    let org = Arc::new(Organisation::of(HUB, REGION, clusters, instances));
    let ingest = Arc::new(Ingest::new(Duration::from_secs(180), 20));
    Arc::new(World::new(org, Quotas::defaults(18_750.0), ingest, 1))
}

fn env(world: &Arc<World>) -> EnvAws {
    EnvAws {
        env: 0,
        world: world.clone(),
    }
}

/// The member's spoke role's session, as the router takes it.
async fn member_session(aws: &EnvAws) -> Result<Session, CallError> {
    let role = format!(
        "arn:aws:iam::{MEMBER}:role/{}",
        router_core::config::DEFAULT_SPOKE_ROLE_NAME
    );
    let credentials = aws.assume_role(&role).await?;
    Ok(Session {
        scope: Scope::new(MEMBER, REGION),
        identity: Identity::Assumed {
            role_arn: role.into(),
            credentials,
        },
    })
}

fn entry(body: &str) -> SendEntry<'_> {
    SendEntry {
        id: "0",
        body,
        attributes: &[],
    }
}

#[tokio::test(start_paused = true)]
async fn the_model_decides_who_may_assume_a_spoke_role() {
    let world = world();
    let aws = env(&world);
    assert!(member_session(&aws).await.is_ok());
    world.model().forbid_role(&format!(
        "arn:aws:iam::{MEMBER}:role/{}",
        router_core::config::DEFAULT_SPOKE_ROLE_NAME
    ));
    let refused = member_session(&aws).await.expect_err("no role to assume");
    assert_eq!(refused.code, "AccessDenied", "{refused:?}");
    assert_eq!(world.counts().by_action["AssumeRole"], 2);
}

#[tokio::test(start_paused = true)]
async fn a_send_the_model_stores_is_an_arrival_and_one_it_refuses_is_not() {
    let world = world();
    let aws = env(&world);
    let at = member_session(&aws).await.expect("a session");
    let url = aws
        .get_queue_url(&at, &queue_name("away"))
        .await
        .expect("the tenant queue");
    aws.send_message_batch(&at, &url, &[entry("first")])
        .await
        .expect("stored");
    assert_eq!(
        world.model().bodies(MEMBER, REGION, "karpenter-away"),
        ["first"]
    );
    world.set_queue(1, false);
    let gone = aws
        .send_message_batch(&at, &url, &[entry("second")])
        .await
        .expect_err("the queue is gone");
    assert_eq!(gone.code, "QueueDoesNotExist", "{gone:?}");
    let arrivals: Vec<(String, usize)> = world
        .arrivals()
        .into_iter()
        .map(|a| (a.body, a.cluster))
        .collect();
    assert_eq!(arrivals, [("first".to_owned(), 1)]);
    // The home account's session may not act in the member's account: the model says so.
    let home = Session {
        scope: Scope::new(MEMBER, REGION),
        identity: Identity::Home,
    };
    let refused = aws
        .get_parameter(&home, "x")
        .await
        .expect_err("not at home");
    assert_eq!(refused.code, "AccessDenied", "{refused:?}");
}

#[tokio::test(start_paused = true)]
async fn a_lost_answer_loses_the_answer_not_the_messages() {
    let world = world();
    world.inject(Injected {
        lost_answers: [1].into(),
        ..Injected::default()
    });
    let aws = env(&world);
    let at = member_session(&aws).await.expect("a session");
    let url = super::url(MEMBER, REGION, &queue_name("away"));
    let lost = aws
        .send_message_batch(&at, &url, &[entry("kept")])
        .await
        .expect_err("the answer is lost");
    assert_eq!(lost.code, CallError::TIMEOUT);
    assert_eq!(
        world.model().bodies(MEMBER, REGION, "karpenter-away"),
        ["kept"]
    );
    assert_eq!(world.arrivals().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn the_model_answers_a_nodes_tags_and_the_layer_counts_the_lookup() {
    let world = world();
    let aws = env(&world);
    let at = member_session(&aws).await.expect("a session");
    let node = InstanceId::parse("i-0123456789abcdef0").expect("an id");
    let unknown = InstanceId::parse("i-0fffffffffffffff0").expect("an id");
    let ids = [node.clone(), unknown];
    let page = aws
        .describe_instances(
            &at,
            router_core::aws::DescribeInstances {
                filter: router_core::aws::InstanceFilter::Ids(&ids),
                next_token: None,
            },
        )
        .await
        .expect("an answer");
    assert_eq!(page.instances.len(), 1);
    assert_eq!(page.instances[0].id, node);
    assert!(
        page.instances[0]
            .tags
            .contains(&("eks:eks-cluster-name".to_owned(), "away".to_owned()))
    );
    let counts = world.counts();
    assert_eq!((counts.ids_looked_up, counts.node_ids_looked_up), (2, 1));
}
