"""The SQS queue name of a cluster's tenant queue, as the router derives it
(interruption_router::config::QueueNameTemplate::queue_name): <prefix><cluster> when that fits
SQS's 80 characters; else the cluster name cut to fit, "-" and the first 8 hex digits of the
SHA-256 of the whole cluster name. `make deploy-tenant` passes it as tenant.yaml's QueueName when
the plain name is too long. Usage: queue_name.py <prefix> <cluster>."""

import hashlib
import re
import sys

MAX_QUEUE_NAME = 80
MAX_CLUSTER_NAME = 100


def queue_name(prefix: str, cluster: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,%d}" % MAX_CLUSTER_NAME, cluster):
        raise ValueError(
            f"{cluster!r} is not an EKS cluster name (1-{MAX_CLUSTER_NAME} letters, digits, '-' or '_')"
        )
    room = MAX_QUEUE_NAME - len(prefix)
    if len(cluster) <= room:
        return prefix + cluster
    kept = room - 9
    if kept < 1:
        raise ValueError(f"the queue prefix {prefix!r} leaves no room for a long cluster name")
    return f"{prefix}{cluster[:kept]}-{hashlib.sha256(cluster.encode()).hexdigest()[:8]}"


if __name__ == "__main__":
    try:
        print(queue_name(sys.argv[1], sys.argv[2]))
    except (IndexError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
