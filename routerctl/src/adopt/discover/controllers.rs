//! Karpenter's controller roles: roles whose name mentions Karpenter, and those the operator
//! names, read fully (identity policies and boundary, as verify reads a role), with the clusters
//! their `eks:DescribeCluster` grants name (`cluster/<name>`, as Karpenter's controller policy has
//! it). A role that may read an old queue and names one cluster ties that queue to the cluster.

use crate::deployment::Role;
use std::collections::BTreeSet;

use anyhow::Result;

use crate::cloud::{ReadError, missing, moves::Moves};

/// A role that looks like Karpenter's controller, and the clusters it may describe.
pub(crate) struct Controller {
    pub role: Role,
    pub clusters: Vec<String>,
}

/// Roles whose name mentions Karpenter, plus those named with `--karpenter-role`: read fully
/// (identity policies), with the clusters their eks:DescribeCluster grants name.
pub(super) async fn controller_roles(
    site: &impl Moves,
    partition: &str,
    account: &str,
    given: &[(String, String)],
) -> Result<Vec<Controller>> {
    let mut names: BTreeSet<String> = given.iter().map(|(_, r)| r.clone()).collect();
    names.extend(
        site.role_names()
            .await
            .map_err(|e| anyhow::anyhow!("ListRoles: {e}"))?
            .into_iter()
            .filter(|n| n.to_ascii_lowercase().contains("karpenter")),
    );
    let mut controllers = Vec::new();
    for name in names {
        let arn = format!("arn:{partition}:iam::{account}:role/{name}");
        let role = match site.role(&arn).await {
            Ok(role) => role,
            // A role the operator names that the account does not have: the tenant stack could
            // not attach its grant to it (it would end in ROLLBACK_COMPLETE). Refused before
            // anything is made.
            Err(ReadError::Call { call, error })
                if call.starts_with("GetRole") && error.code == missing::ROLE =>
            {
                if let Some((cluster, _)) = given.iter().find(|(_, r)| *r == name) {
                    anyhow::bail!(
                        "--karpenter-role {cluster}={name}: account {account} has no such role \
                         ({call}: {error}); nothing was changed. Karpenter's getting-started guide names the \
                         controller role {cluster}-karpenter (eksctl, Pod Identity); read yours \
                         from the cluster: aws eks list-pod-identity-associations --cluster-name \
                         {cluster} --namespace kube-system --service-account karpenter"
                    );
                }
                continue;
            }
            Err(_) => continue,
        };
        let clusters = role
            .allowed_resources("eks:DescribeCluster")
            .iter()
            .filter_map(|r| r.rsplit_once(":cluster/").map(|(_, c)| c.to_owned()))
            .filter(|c| !c.contains('*') && !c.is_empty())
            .collect();
        controllers.push(Controller { role, clusters });
    }
    Ok(controllers)
}
