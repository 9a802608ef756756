//! `routerctl simulate`: synthetic interruption events for a cluster's running instances, delivered
//! where the base stack's rules would deliver them (the ingest queue), or handed to the router
//! function as the SQS batch its event source mapping would have read from there (the ingest
//! queue admits only the stack's rules in AWS).
//!
//! Not through EventBridge: AWS refuses PutEvents entries with an `aws.*` source, so a synthetic
//! spot warning can only enter the pipeline after the rules. The events are in the exact shapes EC2
//! and AWS Health send ([`aws_model::events`]), for real instances of the cluster, so the router
//! resolves and forwards them into the cluster's Karpenter queue. Karpenter acts on them: a
//! simulated spot warning drains and replaces a real node.

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use router_core::event::ACTIONABLE_STATES;

use crate::cloud::deliveries::{Deliveries, Instance, Instances};
use aws_model::events::{Origin, Synthetic};

mod deliver;
#[cfg(test)]
mod on_the_model;
mod site;

use deliver::{check_queue, invoke, send_to_queue};

pub use site::{Site, load_site, site};

/// What to send, per selected instance (`health` sends one event naming all of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SimKind {
    /// EC2 Spot Instance Interruption Warning.
    Spot,
    /// EC2 Instance Rebalance Recommendation.
    Rebalance,
    /// EC2 Instance State-change Notification (see --state).
    State,
    /// One AWS Health EC2 scheduled change (instance retirement) naming every selected instance.
    Health,
    /// EC2 Capacity Reservation Instance Interruption Warning.
    Capacity,
    /// What a FIS spot experiment makes EC2 send: rebalance, warning, stopping, terminated.
    Fis,
}

#[derive(Debug, Clone)]
pub struct Options {
    pub cluster: String,
    pub kind: SimKind,
    /// How many running instances to pick (ignored when `instances` is given).
    pub count: usize,
    /// Explicit instances; each must carry the cluster tag.
    pub instances: Vec<String>,
    /// An SQS queue URL (the ingest queue), or a function name or ARN.
    pub to: String,
    /// The state of `state` events; one Karpenter acts on.
    pub state: String,
    /// The tag whose value names the cluster; a key ending in `*` is the
    /// `kubernetes.io/cluster/<name>` form.
    pub cluster_tag: String,
    /// Only instances with this tag key are picked (the router's MANAGED_TAG_KEY: it forwards
    /// nothing about other instances); empty picks any instance of the cluster.
    pub managed_tag: String,
}

impl Options {
    pub fn new(cluster: &str, kind: SimKind, to: &str) -> Self {
        Self {
            cluster: cluster.to_owned(),
            kind,
            count: 1,
            instances: Vec::new(),
            to: to.to_owned(),
            state: "terminated".to_owned(),
            cluster_tag: "eks:eks-cluster-name".to_owned(),
            managed_tag: router_core::config::DEFAULT_MANAGED_TAG_KEY.to_owned(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    Queue(String),
    Function(String),
}

impl Destination {
    /// A URL is a queue; anything else is a function name or ARN.
    pub fn parse(to: &str) -> Self {
        if to.starts_with("https://") || to.starts_with("http://") {
            Destination::Queue(to.to_owned())
        } else {
            Destination::Function(to.to_owned())
        }
    }
}

impl std::fmt::Display for Destination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Destination::Queue(url) => write!(f, "queue {url}"),
            Destination::Function(name) => write!(f, "function {name} (as an SQS batch)"),
        }
    }
}

/// One event and what the destination answered.
#[derive(Debug, Clone)]
pub struct Sent {
    pub event: Synthetic,
    /// The SQS message id, or what the router answered for an invoke; the error otherwise.
    pub result: Result<String, String>,
}

#[derive(Debug, Clone)]
pub struct Report {
    pub cluster: String,
    pub account: String,
    pub region: String,
    pub destination: Destination,
    pub instances: Vec<String>,
    pub sent: Vec<Sent>,
}

impl Report {
    pub fn failed(&self) -> usize {
        self.sent.iter().filter(|s| s.result.is_err()).count()
    }

    pub fn event_ids(&self) -> Vec<&str> {
        self.sent.iter().map(|s| s.event.id.as_str()).collect()
    }

    pub fn render(&self) -> String {
        let mut out = format!(
            "Sent {} of {} events for cluster {} (account {}, {}) to {}\n",
            self.sent.len() - self.failed(),
            self.sent.len(),
            self.cluster,
            self.account,
            self.region,
            self.destination
        );
        let width = self
            .sent
            .iter()
            .map(|s| s.event.id.len())
            .max()
            .unwrap_or(8)
            .max(8);
        let kind_width = self
            .sent
            .iter()
            .map(|s| s.event.kind.label().len())
            .max()
            .unwrap_or(4);
        let instances_width = self
            .sent
            .iter()
            .map(|s| s.event.instances.join(",").len())
            .max()
            .unwrap_or(9)
            .max(9);
        out += &format!(
            "  {:<width$}  {:<kind_width$}  {:<instances_width$}  result\n",
            "event id", "kind", "instances"
        );
        for s in &self.sent {
            let result = match &s.result {
                Ok(r) => r.clone(),
                Err(e) => format!("FAILED: {e}"),
            };
            out += &format!(
                "  {:<width$}  {:<kind_width$}  {:<instances_width$}  {result}\n",
                s.event.id,
                s.event.kind.label(),
                s.event.instances.join(",")
            );
        }
        if self.failed() == 0 {
            out += &format!(
                "The router logs each delivery with its event id; Karpenter of {} acts on them.\n",
                self.cluster
            );
        }
        out
    }
}

/// Selects the instances, builds the events and sends them.
pub async fn run(aws: &impl Deliveries, options: &Options) -> Result<Report> {
    run_from(aws, aws, options).await
}

/// Like [`run`], for a cluster in another account or region than the router: its instances are
/// picked with `cluster_site`'s clients (acting in the cluster's account and region), and the
/// events, stamped with that account and region, are sent with `aws`'s (the hub's).
pub async fn run_from(
    aws: &impl Deliveries,
    cluster_site: &impl Deliveries,
    options: &Options,
) -> Result<Report> {
    if options.kind == SimKind::State && !ACTIONABLE_STATES.contains(&options.state.as_str()) {
        bail!(
            "--state {}: the rules and the router only pass {}; other states never reach Karpenter",
            options.state,
            ACTIONABLE_STATES.join(", ")
        );
    }
    let destination = Destination::parse(&options.to);
    // Checked before choosing instances, so a wrong --to costs nothing.
    if let Destination::Queue(url) = &destination {
        check_queue(aws, url).await?;
    }
    let (account, instances) = select(cluster_site, options).await?;
    let origin = Origin {
        account: account.clone(),
        region: cluster_site.region().to_owned(),
    };
    let events = build(&origin, options, &instances);
    let sent = match &destination {
        Destination::Queue(url) => send_to_queue(aws, url, events).await,
        Destination::Function(name) => invoke(aws, name, events).await?,
    };
    Ok(Report {
        cluster: options.cluster.clone(),
        account,
        region: cluster_site.region().to_owned(),
        destination,
        instances,
        sent,
    })
}

/// The events for `instances`, with ids that say where they came from and are unique per run.
pub fn build(origin: &Origin, options: &Options, instances: &[String]) -> Vec<Synthetic> {
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    let id = |n: usize, what: &str| format!("routerctl-{stamp}-{n}-{what}");
    let mut events = Vec::new();
    for (n, instance) in instances.iter().enumerate() {
        match options.kind {
            SimKind::Spot => events.push(origin.spot_warning(instance, &id(n, "spot"))),
            SimKind::Rebalance => events.push(origin.rebalance(instance, &id(n, "rebalance"))),
            SimKind::State => {
                events.push(origin.state_change(instance, &options.state, &id(n, &options.state)))
            }
            SimKind::Capacity => {
                events.push(origin.capacity_reservation(instance, &id(n, "capacity")))
            }
            SimKind::Fis => events.extend(origin.spot_experiment(instance, &id(n, "fis"))),
            // One event names them all, as AWS Health does for a retirement batch.
            SimKind::Health => {}
        }
    }
    if options.kind == SimKind::Health {
        events.push(origin.scheduled_change(instances, &id(0, "health")));
    }
    events
}

/// The account (the instances' owner: no STS call needed) and the chosen instances.
async fn select(aws: &impl Deliveries, options: &Options) -> Result<(String, Vec<String>)> {
    let (key, value) = match options.cluster_tag.strip_suffix('*') {
        Some(prefix) => (format!("{prefix}{}", options.cluster), None),
        None => (options.cluster_tag.clone(), Some(options.cluster.as_str())),
    };
    let label = match options.cluster_tag.ends_with('*') {
        true => format!("tag key {key}"),
        false => format!("{key}={}", options.cluster),
    };

    let which = if options.instances.is_empty() {
        Instances::Tagged {
            key: &key,
            value,
            states: &["running"],
        }
    } else {
        Instances::Ids(&options.instances)
    };
    let mut found: Vec<Instance> = aws.instances(which).await.map_err(|e| {
        anyhow::anyhow!(
            "DescribeInstances in {}: {e}{}",
            aws.region(),
            if options.instances.is_empty() {
                ""
            } else {
                " (check the --instance ids and --region)"
            }
        )
    })?;

    let managed = |f: &Instance| {
        options.managed_tag.is_empty() || f.tags.iter().any(|(k, _)| *k == options.managed_tag)
    };
    let unmanaged = format!(
        "the router forwards events only for instances tagged {} (its MANAGED_TAG_KEY, which \
         Karpenter sets); pass --managed-tag '' if the router runs with MANAGED_TAG_KEY empty",
        options.managed_tag
    );
    let chosen = if options.instances.is_empty() {
        found.sort_by(|a, b| a.id.cmp(&b.id));
        if found.is_empty() {
            bail!(
                "no running instances tagged {label} in {}: check the cluster name (the tag's \
                 value, normally the EKS cluster name), the region, and --cluster-tag; or name \
                 instances with --instance",
                aws.region()
            );
        }
        let all = found.len();
        found.retain(managed);
        if found.is_empty() {
            bail!(
                "{all} running instances are tagged {label}, but none is Karpenter's: {unmanaged}"
            );
        }
        if found.len() < options.count {
            bail!(
                "--count {}: only {} running Karpenter instances are tagged {label} in {}; lower --count",
                options.count,
                found.len(),
                aws.region()
            );
        }
        found.truncate(options.count);
        found
    } else {
        for f in &found {
            let (id, tags) = (&f.id, &f.tags);
            let tagged = tags.iter().any(|(k, v)| {
                *k == key && (options.cluster_tag.ends_with('*') || *v == options.cluster)
            });
            if !tagged {
                let has = tags
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map_or("no such tag".to_owned(), |(k, v)| format!("{k}={v}"));
                bail!(
                    "{id} is not tagged {label} (it has {has}): simulate sends events only for \
                     the cluster's own instances, which the router must deliver to {}",
                    options.cluster
                );
            }
            if !managed(f) {
                bail!("{} has no {} tag: {unmanaged}", f.id, options.managed_tag);
            }
        }
        found
    };
    let account = chosen
        .iter()
        .map(|f| f.owner.clone())
        .find(|o| !o.is_empty())
        .context("DescribeInstances returned no OwnerId: cannot tell the account")?;
    Ok((account, chosen.into_iter().map(|f| f.id).collect()))
}

#[cfg(test)]
mod tests {
    use router_core::event::{Classified, classify};

    use super::*;

    #[test]
    fn destinations() {
        assert_eq!(
            Destination::parse("https://sqs.us-east-1.amazonaws.com/1/ir-ingest"),
            Destination::Queue("https://sqs.us-east-1.amazonaws.com/1/ir-ingest".into())
        );
        assert_eq!(
            Destination::parse("arn:aws:lambda:us-east-1:1:function:ir"),
            Destination::Function("arn:aws:lambda:us-east-1:1:function:ir".into())
        );
    }

    #[test]
    fn each_kind_builds_events_the_router_routes_to_the_chosen_instances() {
        let origin = Origin {
            account: "123456789012".into(),
            region: "us-east-1".into(),
        };
        let instances = vec![
            "i-0123456789abcdef0".to_owned(),
            "i-0123456789abcdef1".to_owned(),
        ];
        let expect = [
            (SimKind::Spot, 2),
            (SimKind::Rebalance, 2),
            (SimKind::State, 2),
            (SimKind::Capacity, 2),
            (SimKind::Health, 1),
            (SimKind::Fis, 8),
        ];
        for (kind, count) in expect {
            let options = Options::new("alpha", kind, "https://q");
            let events = build(&origin, &options, &instances);
            assert_eq!(events.len(), count, "{kind:?}");
            let mut ids: Vec<&str> = events.iter().map(|e| e.id.as_str()).collect();
            ids.sort_unstable();
            ids.dedup();
            assert_eq!(ids.len(), count, "ids are unique: {kind:?}");
            for e in &events {
                let Classified::Route(i) = classify(&e.body()).unwrap() else {
                    panic!("{kind:?}: the router would not route {}", e.body());
                };
                assert!(
                    i.instances
                        .iter()
                        .all(|i| instances.contains(&i.as_str().to_owned()))
                );
            }
        }
    }
}
