//! Which clusters adopt knows of: those with running Karpenter nodes (by the tags Karpenter puts
//! on its instances), those an old set-up serves, those `--karpenter-role` names; and which
//! cluster a queue is named after, by the names the common set-ups give their queues.

use std::collections::BTreeMap;

use anyhow::Result;

use super::{Cluster, OldSetup, Tie};
use crate::cloud::{deliveries::Instances, moves::Moves};

/// Every cluster adopt knows of (by its nodes, its old set-ups, or `--karpenter-role`), with
/// the set-ups it reads and its controller role as far as they tell.
pub(super) fn clusters_of(
    nodes: BTreeMap<String, Vec<String>>,
    setups: &[OldSetup],
    karpenter_roles: &[(String, String)],
) -> BTreeMap<String, Cluster> {
    let mut clusters: BTreeMap<String, Cluster> = nodes
        .into_iter()
        .map(|(name, nodes)| {
            (
                name,
                Cluster {
                    nodes,
                    ..Default::default()
                },
            )
        })
        .collect();
    for (i, setup) in setups.iter().enumerate() {
        for (cluster, evidence) in &setup.clusters {
            let entry = clusters.entry(cluster.clone()).or_default();
            entry.setups.push(i);
            if let (None, Tie::ControllerRole(role)) = (&entry.controller, evidence) {
                entry.controller = Some(role.clone());
            }
        }
    }
    for (cluster, role) in karpenter_roles {
        clusters.entry(cluster.clone()).or_default().controller = Some(role.clone());
    }
    clusters
}

/// Clusters with running Karpenter nodes: instances with the managed tag, by their
/// `eks:eks-cluster-name` (or `kubernetes.io/cluster/<name>`) tag.
pub(super) async fn karpenter_nodes(
    site: &impl Moves,
    managed_tag: &str,
) -> Result<BTreeMap<String, Vec<String>>> {
    let mut nodes: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let instances = site
        .instances(Instances::Tagged {
            key: managed_tag,
            value: None,
            states: &["pending", "running"],
        })
        .await
        .map_err(|e| anyhow::anyhow!("DescribeInstances: {e}"))?;
    for instance in instances {
        let tags = &instance.tags;
        let cluster = tags
            .iter()
            .find(|(k, _)| k == "eks:eks-cluster-name")
            .map(|(_, v)| v.clone())
            .or_else(|| {
                tags.iter()
                    .find_map(|(k, _)| k.strip_prefix("kubernetes.io/cluster/"))
                    .map(str::to_owned)
            });
        if let Some(cluster) = cluster.filter(|_| !instance.id.is_empty()) {
            nodes.entry(cluster).or_default().push(instance.id);
        }
    }
    for ids in nodes.values_mut() {
        ids.sort();
    }
    Ok(nodes)
}

/// A known cluster a queue is named after: `<cluster>` (Karpenter's getting-started stack),
/// `Karpenter-<cluster>`, `KarpenterInterruptionQueue-<cluster>`, `<cluster>-karpenter`.
pub(super) fn named_after<'a>(
    queue: &str,
    clusters: impl Iterator<Item = &'a String>,
) -> Option<String> {
    let lower = queue.to_ascii_lowercase();
    clusters
        .filter(|c| {
            let c = c.to_ascii_lowercase();
            lower == c
                || lower
                    .strip_suffix(&c)
                    .is_some_and(|p| p.ends_with('-') && p.contains("karpenter"))
                || lower
                    .strip_prefix(&c)
                    .is_some_and(|s| s.starts_with('-') && s.contains("karpenter"))
        })
        .max_by_key(|c| c.len())
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_named_after_a_cluster() {
        let clusters = ["alpha".to_owned(), "prod-eu".to_owned(), "prod".to_owned()];
        let find = |q: &str| named_after(q, clusters.iter());
        assert_eq!(find("alpha").as_deref(), Some("alpha"));
        assert_eq!(find("Karpenter-prod-eu").as_deref(), Some("prod-eu"));
        assert_eq!(
            find("KarpenterInterruptionQueue-prod").as_deref(),
            Some("prod")
        );
        assert_eq!(find("prod-karpenter").as_deref(), Some("prod"));
        assert_eq!(
            find("orders-prod"),
            None,
            "a name alone is not a Karpenter queue"
        );
    }
}
