//! The event stream: every kind of event each old set-up covers, for those clusters' nodes,
//! published through the default bus as AWS runs it while adopt works, and each [`Published`]
//! event remembered for the verdict.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::Result;
use interruption_router::event::Kind;

use aws_model::events::Origin;
use local_aws::eventbridge::DefaultBus;

/// One event of the stream.
#[derive(Debug, Clone)]
pub struct Published {
    pub id: String,
    pub kind: Kind,
    pub clusters: Vec<String>,
    /// When the default bus had delivered it.
    pub at: Instant,
}

/// A cluster the stream sends events about: its nodes, and the kinds its set-up covers.
pub(super) struct Fed {
    pub(super) cluster: String,
    pub(super) nodes: Vec<String>,
    pub(super) kinds: Vec<Kind>,
}

/// Publishes one event every `every` until `stop`, from the clusters' account and region
/// (`origin`): each cluster in turn, each of its kinds in turn, alternating nodes; every 7th a
/// Health event naming a node of every cluster.
pub(super) async fn stream(
    bus: DefaultBus,
    origin: Origin,
    fed: Vec<Fed>,
    every: Duration,
    stop: Arc<AtomicBool>,
) -> Result<Vec<Published>> {
    let mut published = Vec::new();
    let mut n = 0usize;
    while !stop.load(Ordering::SeqCst) {
        let one = &fed[n % fed.len()];
        let round = n / fed.len();
        let node = &one.nodes[round % one.nodes.len()];
        let kind = one.kinds[round % one.kinds.len()];
        let health_for_all = n % 7 == 6;
        let id = match health_for_all {
            true => format!("adopt-{n}-scheduled-change-all"),
            false => format!("adopt-{n}-{}", kind.label()),
        };
        let (event, clusters) = if health_for_all {
            let all: Vec<String> = fed.iter().map(|f| f.nodes[0].clone()).collect();
            (
                origin.scheduled_change(&all, &id),
                fed.iter().map(|f| f.cluster.clone()).collect(),
            )
        } else {
            let event = match kind {
                Kind::SpotInterruption => origin.spot_warning(node, &id),
                Kind::RebalanceRecommendation => origin.rebalance(node, &id),
                Kind::StateChange if n.is_multiple_of(2) => {
                    origin.state_change(node, "stopping", &id)
                }
                Kind::StateChange => origin.state_change(node, "terminated", &id),
                Kind::ScheduledChange => origin.scheduled_change(std::slice::from_ref(node), &id),
                Kind::CapacityReservationInterruption => origin.capacity_reservation(node, &id),
            };
            (event, vec![one.cluster.clone()])
        };
        bus.put(&event.event).await?;
        published.push(Published {
            id,
            kind: event.kind,
            clusters,
            at: Instant::now(),
        });
        n += 1;
        tokio::time::sleep(every).await;
    }
    Ok(published)
}
