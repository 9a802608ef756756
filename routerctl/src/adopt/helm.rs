//! The helm command adopt prints (and `make deploy-tenant`, through `tools/karpenter_helm.sh`,
//! which prints the same text): it points one cluster's Karpenter at a queue and can never upgrade
//! Karpenter by accident.
//!
//! * It runs in the cluster's own kube-context, named (`--kube-context`), never the current one: a
//!   helm command run in another cluster's context points that cluster's Karpenter at this queue.
//! * It keeps the chart version the release runs, read from `helm list` (every Helm 3 has it;
//!   `helm get metadata` exists only from 3.13), and stops when it cannot tell: `helm upgrade
//!   --version ""` takes the newest chart, across majors, without their CRDs.
//! * `set -euo pipefail`: any failing step stops it before the upgrade.
//! * When a GitOps tool owns the release it stops and says where the value goes instead: Argo CD
//!   renders the chart without a Helm release, so none is found; Flux's helm-controller labels
//!   what it renders (`helm.toolkit.fluxcd.io/*`). Terraform's helm_release leaves no mark: the
//!   header says so, and adopt's evidence sees Karpenter go back to the old queue.

/// Where Karpenter runs and which queue it should read.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub cluster: &'a str,
    pub account: &'a str,
    pub region: &'a str,
    pub queue: &'a str,
}

impl Target<'_> {
    /// The kube-context `aws eks update-kubeconfig` names the cluster's.
    pub fn context(&self) -> String {
        format!(
            "arn:{}:eks:{}:{}:cluster/{}",
            router_core::accounts::partition(self.region),
            self.region,
            self.account,
            self.cluster
        )
    }
}

/// The bash snippet, one command per line.
pub fn snippet(target: &Target<'_>) -> String {
    let Target { cluster, queue, .. } = *target;
    let context = target.context();
    let value = format!("settings.interruptionQueue={queue}");
    format!(
        r#"# Points Karpenter of cluster {cluster} at {queue}, keeping its chart version and namespace.
# If Argo CD, Flux or Terraform (helm_release, EKS Blueprints) manages Karpenter, do not run this:
# set {value} in the values they apply (in Git), or they put the old value back.
set -euo pipefail
command -v jq >/dev/null || {{ echo "error: needs jq" >&2; exit 1; }}
context="${{KUBE_CONTEXT:-{context}}}"
releases=$(helm list --kube-context "$context" --all-namespaces --filter '^karpenter$' --output json)
if [ "$(jq length <<<"$releases")" != 1 ]; then
  echo "error: no single Helm release named karpenter in kube-context $context. Argo CD renders the chart without one: set {value} in the Application's Helm values in Git. Otherwise set KUBE_CONTEXT to cluster {cluster}'s context." >&2
  exit 1
fi
namespace=$(jq -r '.[0].namespace' <<<"$releases")
chart=$(jq -r '.[0].chart' <<<"$releases")
version=${{chart#karpenter-}}
if [ -z "$version" ] || [ "$version" = "$chart" ]; then
  echo "error: release karpenter runs chart '$chart', not karpenter-<version>: the version to keep is unknown, nothing changed" >&2
  exit 1
fi
if helm get manifest karpenter --kube-context "$context" --namespace "$namespace" | grep -q 'helm.toolkit.fluxcd.io/'; then
  echo "error: Flux manages release karpenter: set {value} in its HelmRelease's spec.values in Git; a helm upgrade would be reverted" >&2
  exit 1
fi
helm upgrade karpenter oci://public.ecr.aws/karpenter/karpenter --kube-context "$context" --namespace "$namespace" --version "$version" --reuse-values --set {value}
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_snippet_names_the_context_the_queue_and_fails_closed() {
        let text = snippet(&Target {
            cluster: "alpha",
            account: "111111111111",
            region: "eu-west-1",
            queue: "karpenter-alpha",
        });
        assert!(text.contains("set -euo pipefail"), "{text}");
        assert!(
            text.contains("KUBE_CONTEXT:-arn:aws:eks:eu-west-1:111111111111:cluster/alpha"),
            "{text}"
        );
        assert!(text.contains("--version \"$version\""), "{text}");
        assert!(
            text.contains("--set settings.interruptionQueue=karpenter-alpha"),
            "{text}"
        );
        assert!(!text.contains("get metadata"), "needs Helm 3.13: {text}");
    }

    #[test]
    fn the_kube_context_is_in_the_regions_partition() {
        let target = |region| Target {
            cluster: "alpha",
            account: "111111111111",
            region,
            queue: "karpenter-alpha",
        };
        assert_eq!(
            target("cn-north-1").context(),
            "arn:aws-cn:eks:cn-north-1:111111111111:cluster/alpha"
        );
        assert_eq!(
            target("us-gov-west-1").context(),
            "arn:aws-us-gov:eks:us-gov-west-1:111111111111:cluster/alpha"
        );
        assert!(snippet(&target("cn-north-1")).contains("arn:aws-cn:eks:cn-north-1"));
    }
}
