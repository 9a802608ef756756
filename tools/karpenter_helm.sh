#!/usr/bin/env bash
# Prints the helm command that points an installed Karpenter at QUEUE, keeping the chart version
# and namespace it was installed with: a bare `helm upgrade` takes the latest chart, possibly a new
# major version whose CRDs helm does not upgrade (Karpenter's upgrade guide), and the namespace is
# wherever the cluster's operators put it. routerctl never edits a cluster; run this against it.
#
# usage: karpenter_helm.sh QUEUE [RELEASE]   (RELEASE defaults to karpenter)
set -euo pipefail
queue=${1:?usage: karpenter_helm.sh QUEUE [RELEASE]}
release=${2:-karpenter}
cat <<EOF
Point Karpenter at ${queue} (with kubectl and helm on the cluster; keeps its chart version and namespace):
  NS=\$(helm list --all-namespaces --filter '^${release}\$' --output json | jq -r '.[0].namespace')
  VERSION=\$(helm get metadata ${release} --namespace "\$NS" --output json | jq -r .version)
  helm upgrade ${release} oci://public.ecr.aws/karpenter/karpenter --namespace "\$NS" --version "\$VERSION" \\
    --reuse-values --set settings.interruptionQueue=${queue}
EOF
