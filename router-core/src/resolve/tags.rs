//! Tag rules: which cluster an instance's tags name. Pure, and the whole routing policy.
//!
//! Karpenter tags every instance it launches with its cluster (`eks:eks-cluster-name`,
//! `kubernetes.io/cluster/<name>`) and its node pool (`karpenter.sh/nodepool`). [`TagRules::owner`]
//! turns an instance's tags into an [`Owner`], whichever lookup path read them.

use std::{collections::HashSet, sync::Arc};

use crate::event::IgnoreReason;

/// One tag key that can name an instance's cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterTagKey {
    /// The tag's value is the cluster name (`eks:eks-cluster-name`, `aws:eks:cluster-name`).
    Value(String),
    /// The rest of the key is the cluster name and the value is `owned` or `shared`
    /// (`kubernetes.io/cluster/*`).
    Prefix(String),
}

/// How tags map to an owner: cluster tag keys in priority order, and the tag that marks an
/// instance as Karpenter-managed (`None`: any instance with a cluster tag is routed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagRules {
    pub cluster_keys: Vec<ClusterTagKey>,
    pub managed_key: Option<String>,
}

/// Who an instance belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    Cluster(Arc<str>),
    /// Not routed: unknown, unmanaged, or without a usable cluster tag.
    NotOurs(IgnoreReason),
}

impl TagRules {
    /// The owner an instance's tags name. The first cluster key (in configured order) that names
    /// exactly one cluster wins. Under a prefix key, `owned` beats `shared`; if several clusters
    /// still tie, that key is skipped rather than guessing, because a wrong guess would hand one
    /// tenant another tenant's instance.
    pub fn owner<'t>(&self, tags: &[(&'t str, &'t str)]) -> Owner {
        if let Some(managed) = &self.managed_key
            && !tags.iter().any(|(k, _)| k == managed)
        {
            return Owner::NotOurs(IgnoreReason::UnmanagedInstance);
        }
        for rule in &self.cluster_keys {
            let found = match rule {
                ClusterTagKey::Value(key) => tags
                    .iter()
                    .find(|(k, v)| k == key && !v.trim().is_empty())
                    .map(|(_, v)| v.trim()),
                ClusterTagKey::Prefix(prefix) => {
                    let named = |wanted: &str| -> HashSet<&'t str> {
                        tags.iter()
                            .filter(|(_, v)| *v == wanted)
                            .filter_map(|(k, _)| k.strip_prefix(prefix.as_str()))
                            .filter(|name| !name.is_empty())
                            .collect()
                    };
                    let owned = named("owned");
                    let candidates = if owned.is_empty() {
                        named("shared")
                    } else {
                        owned
                    };
                    match candidates.len() {
                        1 => candidates.into_iter().next(),
                        _ => None,
                    }
                }
            };
            if let Some(cluster) = found {
                return Owner::Cluster(Arc::from(cluster));
            }
        }
        Owner::NotOurs(IgnoreReason::NoClusterTag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> TagRules {
        crate::config::Config::from_lookup(|_| None).unwrap().tags
    }

    fn cluster(name: &str) -> Owner {
        Owner::Cluster(Arc::from(name))
    }

    #[test]
    fn karpenter_launch_tags_name_the_cluster() {
        let tags = [
            ("eks:eks-cluster-name", "alpha"),
            ("kubernetes.io/cluster/alpha", "owned"),
            ("karpenter.sh/nodepool", "default"),
            ("Name", "alpha-node"),
        ];
        assert_eq!(defaults().owner(&tags), cluster("alpha"));
    }

    #[test]
    fn unmanaged_and_untagged_instances_are_not_ours() {
        // A managed node group instance: cluster tag, no nodepool tag.
        let mng = [
            ("eks:eks-cluster-name", "alpha"),
            ("eks:nodegroup-name", "system"),
        ];
        assert_eq!(
            defaults().owner(&mng),
            Owner::NotOurs(IgnoreReason::UnmanagedInstance)
        );
        assert_eq!(
            defaults().owner(&[]),
            Owner::NotOurs(IgnoreReason::UnmanagedInstance)
        );
        let no_cluster = [("karpenter.sh/nodepool", "default")];
        assert_eq!(
            defaults().owner(&no_cluster),
            Owner::NotOurs(IgnoreReason::NoClusterTag)
        );
    }

    #[test]
    fn empty_managed_key_routes_any_cluster_tagged_instance() {
        let rules = TagRules {
            managed_key: None,
            ..defaults()
        };
        assert_eq!(
            rules.owner(&[("eks:eks-cluster-name", "alpha")]),
            cluster("alpha")
        );
        assert_eq!(rules.owner(&[]), Owner::NotOurs(IgnoreReason::NoClusterTag));
    }

    #[test]
    fn keys_are_tried_in_configured_order() {
        let tags = [
            ("karpenter.sh/nodepool", "p"),
            ("aws:eks:cluster-name", "third"),
            ("kubernetes.io/cluster/second", "owned"),
        ];
        assert_eq!(defaults().owner(&tags), cluster("second"));
        let reversed = TagRules {
            cluster_keys: defaults().cluster_keys.into_iter().rev().collect(),
            ..defaults()
        };
        assert_eq!(reversed.owner(&tags), cluster("third"));
    }

    #[test]
    fn prefix_keys_need_owned_or_shared_and_never_guess() {
        let rules = defaults();
        let with = |extra: &[(&'static str, &'static str)]| {
            let mut tags = vec![("karpenter.sh/nodepool", "p")];
            tags.extend_from_slice(extra);
            rules.owner(&tags)
        };
        assert_eq!(with(&[("kubernetes.io/cluster/a", "shared")]), cluster("a"));
        assert_eq!(
            with(&[("kubernetes.io/cluster/a", "yes")]),
            Owner::NotOurs(IgnoreReason::NoClusterTag)
        );
        assert_eq!(
            with(&[("kubernetes.io/cluster/", "owned")]),
            Owner::NotOurs(IgnoreReason::NoClusterTag)
        );
        assert_eq!(
            with(&[
                ("kubernetes.io/cluster/a", "shared"),
                ("kubernetes.io/cluster/b", "owned")
            ]),
            cluster("b")
        );
        // Two owners under one key: skip it, fall through to the next key.
        let tie = [
            ("kubernetes.io/cluster/a", "owned"),
            ("kubernetes.io/cluster/b", "owned"),
        ];
        assert_eq!(with(&tie), Owner::NotOurs(IgnoreReason::NoClusterTag));
        assert_eq!(
            with(&[tie[0], tie[1], ("aws:eks:cluster-name", "c")]),
            cluster("c")
        );
    }

    #[test]
    fn blank_cluster_values_do_not_count() {
        let tags = [
            ("karpenter.sh/nodepool", "p"),
            ("eks:eks-cluster-name", " "),
            ("aws:eks:cluster-name", "real"),
        ];
        assert_eq!(defaults().owner(&tags), cluster("real"));
    }
}
