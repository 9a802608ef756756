#!/usr/bin/env python3
"""What one router costs a month beside N clusters' own queues and rules: BENCHMARKS.md's cost
table, printed as Markdown (`python3 tools/cost.py`). A docs test holds BENCHMARKS.md to this
output, so the table changes only with the model below.

Everything the figures rest on is a named constant here: AWS's list prices (with the date and
where they were read), the month's traffic, and what the router does per event (from
BENCHMARKS.md's own measurements). Free tiers are left out: they are per account and would make
the smaller estates look free.
"""

import math

# --- Prices: US East (N. Virginia) list prices, read 2026-12-04. AWS's pricing
# pages could not be fetched here; these are as published summaries of them give them, which
# agree with each other (SQS: factualminds.com 2026-06-13, cloudburn.io 2026-03-14; EventBridge:
# cloudburn.io 2026-03-13, factualminds.com 2026-06; Lambda: cloudchipr.com and AWS's Lambda
# pricing page as quoted by them). Check them against aws.amazon.com/<service>/pricing.
SQS_PER_REQUEST = 0.40 / 1e6  # standard queue, first 100 billion requests a month
EVENTBRIDGE_CROSS_ACCOUNT_PER_EVENT = 1.00 / 1e6  # an event sent to another account's bus
EVENTBRIDGE_AWS_SERVICE_EVENT = 0.0  # AWS service events on the default bus, and their rules
LAMBDA_PER_REQUEST = 0.20 / 1e6
LAMBDA_ARM_PER_GB_SECOND = 0.0000133334  # arm64, the first 7.5 billion GB-s a month
PRICES_READ = "2026-12-04"

# --- The estate: 10 clusters to an account (as BENCHMARKS' simulated organisation), or one, in one
# region; the base stack in one of the accounts and a spoke stack in each of the others.
CLUSTERS_PER_ACCOUNT = 10
MONTH_S = 30 * 24 * 3600

# --- A quiet month, per cluster: 50 nodes living a day on average (1,500 launches), each with
# four state changes (pending, running, shutting-down, terminated); 5 % of them warned before a
# spot reclaim, with a rebalance recommendation first; one scheduled change.
QUIET_NODE_LAUNCHES = 1_500
STATE_CHANGES_PER_NODE = 4
QUIET_WARNED = 75
QUIET_CLUSTER_EVENTS = QUIET_NODE_LAUNCHES * STATE_CHANGES_PER_NODE + 2 * QUIET_WARNED + 1
# Per account, state changes of instances no cluster owns (Karpenter's state-change rule matches
# every instance of the account): the simulated organisation's 20 a second over 100 accounts.
UNOWNED_PER_ACCOUNT_S = 0.2

# --- The organisation storm (BENCHMARKS.md, "Organisation storm (simulated)"): 20 nodes of every
# cluster reclaimed, four events each; the stormy month has one every day.
STORM_EVENTS_PER_CLUSTER = 20 * 4
STORMS_PER_MONTH = 30

# --- Karpenter, in either setup: it long-polls its queue (20 s) on its leader, receives up to 10
# messages a call and deletes each message it receives.
KARPENTER_POLLS = MONTH_S / 20
RECEIVE_MAX = 10

# --- The router (base.yaml's defaults and BENCHMARKS.md's measurements).
MEMORY_GB = 128 / 1024  # MemorySize
BATCH_SIZE = 100  # BatchSize (with its batching window, MaximumBatchingWindowInSeconds 1)
POLLERS = 5  # an SQS event source mapping long-polls with five pollers from the start (20 s each)
# Duration of an invocation: a floor for the round trip of its sends (20 ms, a guess for AWS:
# the emulator's SendMessageBatch took 4 ms on loopback), plus per record what BENCHMARKS' warm
# storm row measured (48 ms for a batch of 100 on the emulator).
INVOCATION_FLOOR_S = 0.020
PER_RECORD_S = 0.00048
# SQS calls to a cluster's queue per owned event: one SendMessageBatch per event at quiet rates;
# 0.1 in a storm (BENCHMARKS' warm storm: a batch per queue per invocation).
QUIET_SENDS_PER_EVENT = 1.0
STORM_SENDS_PER_EVENT = 0.1
# GetQueueUrl and ListQueueTags, once per cluster per CacheTtlSeconds, per execution environment.
CACHE_TTL_S = 3600
LOOKUPS_PER_CLUSTER = 2 * MONTH_S / CACHE_TTL_S * POLLERS


def long_polls_receives(quiet, storm, pollers=1):
    """ReceiveMessage calls of `pollers` long-polling readers (20 s, up to 10 messages a call) of a
    queue taking `quiet` messages a month spread evenly and `storm` in bursts: at these rates each
    quiet message wakes a waiting poll and is received alone; a poll that meets no message in its
    20 s returns empty (the chance of that is e^(-20 s * rate)); a burst is received 10 at a time."""
    rate = quiet / MONTH_S / pollers
    empty = pollers * KARPENTER_POLLS * math.exp(-20 * rate)
    return quiet + empty + storm / RECEIVE_MAX


def month(clusters, per_account, stormy):
    accounts = math.ceil(clusters / per_account)
    own_quiet = clusters * QUIET_CLUSTER_EVENTS
    own_storm = clusters * STORM_EVENTS_PER_CLUSTER * STORMS_PER_MONTH if stormy else 0
    unowned = accounts * UNOWNED_PER_ACCOUNT_S * MONTH_S
    quiet_events = own_quiet + unowned
    events = quiet_events + own_storm
    members_share = (accounts - 1) / accounts

    # Each cluster's own queue and rules: every event of its account reaches each of its
    # account's queues (EventBridge's SendMessage), and each Karpenter receives and deletes it.
    queue_quiet, queue_storm = quiet_events / accounts, own_storm / accounts
    native_sqs = clusters * (
        2 * (queue_quiet + queue_storm) + long_polls_receives(queue_quiet, queue_storm)
    )
    native = {"sqs": native_sqs * SQS_PER_REQUEST, "events": 0.0, "lambda": 0.0}

    # The router: every event into the ingest queue (members' through the hub bus), read by the
    # mapping in batches, looked up (EC2 calls are free), and its cluster's events alone sent on.
    quiet_batch = min(BATCH_SIZE, max(1.0, quiet_events / MONTH_S / POLLERS))
    invocations = quiet_events / quiet_batch + own_storm / BATCH_SIZE
    calls_per_invocation = (
        quiet_events / quiet_batch * math.ceil(quiet_batch / RECEIVE_MAX)
        + own_storm / BATCH_SIZE * math.ceil(BATCH_SIZE / RECEIVE_MAX)
    )  # a receive and a DeleteMessageBatch per 10 records of each batch
    idle = POLLERS * KARPENTER_POLLS * math.exp(-20 * quiet_events / MONTH_S / POLLERS)
    duration = invocations * INVOCATION_FLOOR_S + events * PER_RECORD_S
    ingest = events + 2 * calls_per_invocation + idle
    owned_quiet, owned_storm = own_quiet / clusters, own_storm / clusters
    cluster_queues = (
        own_quiet * QUIET_SENDS_PER_EVENT
        + own_storm * STORM_SENDS_PER_EVENT
        + clusters * LOOKUPS_PER_CLUSTER
        + (own_quiet + own_storm)  # Karpenter's deletes
        + clusters * long_polls_receives(owned_quiet, owned_storm)
    )
    router = {
        "sqs": (ingest + cluster_queues) * SQS_PER_REQUEST,
        "events": events * members_share * EVENTBRIDGE_CROSS_ACCOUNT_PER_EVENT
        + events * (1 - members_share) * EVENTBRIDGE_AWS_SERVICE_EVENT,
        "lambda": invocations * LAMBDA_PER_REQUEST
        + duration * MEMORY_GB * LAMBDA_ARM_PER_GB_SECOND,
    }
    return events, router, native


def dollars(x):
    return f"${x:,.2f}" if x < 100 else f"${x:,.0f}"


# The estates: (clusters, clusters to an account).
ESTATES = [(10, CLUSTERS_PER_ACCOUNT), (100, CLUSTERS_PER_ACCOUNT), (1000, CLUSTERS_PER_ACCOUNT),
           (100, 1)]


def table():
    lines = [
        "| clusters (accounts) | month | events | router: SQS | router: EventBridge | router: Lambda | router, all | each cluster's own queue and rules |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for clusters, per_account in ESTATES:
        accounts = math.ceil(clusters / per_account)
        for stormy in (False, True):
            events, router, native = month(clusters, per_account, stormy)
            lines.append(
                f"| {clusters:,} ({accounts}) | {'a storm a day' if stormy else 'quiet'} "
                f"| {events / 1e6:,.1f} M | {dollars(router['sqs'])} | {dollars(router['events'])} "
                f"| {dollars(router['lambda'])} | **{dollars(sum(router.values()))}** "
                f"| {dollars(sum(native.values()))} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
