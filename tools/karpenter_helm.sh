#!/usr/bin/env bash
# Prints the command that points cluster CLUSTER's Karpenter at QUEUE (for `make deploy-tenant`;
# routerctl adopt prints the same text, from routerctl/src/adopt/helm.rs, and a test keeps the two
# equal). routerctl never edits a cluster: run it yourself, against the cluster.
#
# What the printed command guarantees: it runs in the cluster's own kube-context (named, never
# the current one); it keeps the chart version and namespace the release runs (from `helm list`,
# which every Helm 3 has: `helm get metadata` exists only from Helm 3.13, and `--version ""`
# would take the newest chart, across majors, without its CRDs); it stops at the first failing
# step (set -euo pipefail) and when Argo CD or Flux owns the release.
#
# usage: karpenter_helm.sh QUEUE CLUSTER REGION ACCOUNT
set -euo pipefail
queue=${1:?usage: karpenter_helm.sh QUEUE CLUSTER REGION ACCOUNT}
cluster=${2:?usage: karpenter_helm.sh QUEUE CLUSTER REGION ACCOUNT}
region=${3:?usage: karpenter_helm.sh QUEUE CLUSTER REGION ACCOUNT}
account=${4:?usage: karpenter_helm.sh QUEUE CLUSTER REGION ACCOUNT}
for value in "$queue" "$cluster" "$region" "$account"; do
  [[ $value =~ ^[A-Za-z0-9_-]+$ ]] || { echo "error: unexpected characters in '$value'" >&2; exit 2; }
done
sed -e "s/@QUEUE@/$queue/g" -e "s/@CLUSTER@/$cluster/g" -e "s/@REGION@/$region/g" -e "s/@ACCOUNT@/$account/g" <<'SNIPPET'
# Points Karpenter of cluster @CLUSTER@ at @QUEUE@, keeping its chart version and namespace.
# If Argo CD, Flux or Terraform (helm_release, EKS Blueprints) manages Karpenter, do not run this:
# set settings.interruptionQueue=@QUEUE@ in the values they apply (in Git), or they put the old value back.
set -euo pipefail
command -v jq >/dev/null || { echo "error: needs jq" >&2; exit 1; }
context="${KUBE_CONTEXT:-arn:aws:eks:@REGION@:@ACCOUNT@:cluster/@CLUSTER@}"
releases=$(helm list --kube-context "$context" --all-namespaces --filter '^karpenter$' --output json)
if [ "$(jq length <<<"$releases")" != 1 ]; then
  echo "error: no single Helm release named karpenter in kube-context $context. Argo CD renders the chart without one: set settings.interruptionQueue=@QUEUE@ in the Application's Helm values in Git. Otherwise set KUBE_CONTEXT to cluster @CLUSTER@'s context." >&2
  exit 1
fi
namespace=$(jq -r '.[0].namespace' <<<"$releases")
chart=$(jq -r '.[0].chart' <<<"$releases")
version=${chart#karpenter-}
if [ -z "$version" ] || [ "$version" = "$chart" ]; then
  echo "error: release karpenter runs chart '$chart', not karpenter-<version>: the version to keep is unknown, nothing changed" >&2
  exit 1
fi
if helm get manifest karpenter --kube-context "$context" --namespace "$namespace" | grep -q 'helm.toolkit.fluxcd.io/'; then
  echo "error: Flux manages release karpenter: set settings.interruptionQueue=@QUEUE@ in its HelmRelease's spec.values in Git; a helm upgrade would be reverted" >&2
  exit 1
fi
helm upgrade karpenter oci://public.ecr.aws/karpenter/karpenter --kube-context "$context" --namespace "$namespace" --version "$version" --reuse-values --set settings.interruptionQueue=@QUEUE@
SNIPPET
