//! `routerctl adopt` against clusters that run other tools' interruption set-ups, while
//! interruptions keep coming, with AWS's hazards in ([`lab::adoption::Estate`]): the
//! default bus applies rule changes seconds late, SQS's deletion metrics arrive minutes late and
//! per minute, each Karpenter long-polls 20 s on its leader and hands over on a settings change.
//!
//! The verdict is per event: the queue its cluster's Karpenter was pointed at when it was sent
//! must have received it, once. Each test plays one way the switch goes wrong in production: a
//! rollback followed at once by its helm command, EKS Blueprints' queue that carries the router's
//! name, a member account's cluster. A GitOps revert, a helm command run in another cluster's
//! kube-context and a busy account's old queue are played on the model of AWS, in virtual time
//! (`routerctl/src/adopt/on_the_model/`; docs/testing.md, "Moved onto the model").
//!
//! * [`walk`]: every kind of set-up moved through one round side by side, one rolled back, the
//!   others walked to the end;
//! * [`rollback`]: a rollback whose helm command runs the moment it is printed;
//! * [`expired`]: what SQS deleted after its retention does not hide a fresh message;
//! * [`locked_down`]: the tenant queue adopt deploys in a locked-down account;
//! * [`kinds`]: an adopted EKS Blueprints cluster keeps its choice of event kinds;
//! * [`member`]: a member account's cluster in another region than the hub, and the members adopt
//!   refuses;
//! * [`not_ours`]: EKS Blueprints' look-alike queue, shared and unclaimed set-ups.

use std::time::Duration;

use anyhow::{Context, Result};
use aws_clients::aws::Aws;
use aws_sdk_eventbridge::types::RuleState;
use lab::{
    adoption::{Estate, Move, STACK, Scene, tenant_stack},
    old_setups::Flavour,
};
use routerctl::{
    adopt::{self, Outcome, steps::State},
    verify,
};
use serde_json::json;

mod expired;
mod kinds;
mod locked_down;
mod member;
mod not_ours;
mod walk;

/// How long after its minute ends an SQS datapoint reaches the emulator's CloudWatch here: 30 s,
/// not the demo's 150 s (`aws_model::timing::SQS_METRIC_LAG`; AWS gives no figure). adopt waits
/// for every minute it needs however late it comes, so a shorter lag changes none of its
/// decisions, only how long these walks poll through minutes CloudWatch does not have yet (each
/// still does); what 150 s, and minutes that never come, do to the decisions is played on the
/// model in virtual time (`adopt::on_the_model::busy`). At 150 s the demo's walk took 394 s
/// alone, at 30 s 294 s.
const METRIC_DELAY: Duration = Duration::from_secs(30);

/// The demo's scene, with SQS's datapoints [`METRIC_DELAY`] late.
fn demo() -> Scene {
    Scene {
        metric_delay: METRIC_DELAY,
        ..Scene::demo()
    }
}

/// A scene of these clusters, as [`demo`]'s otherwise.
fn scene(clusters: &[(&str, Option<Flavour>)]) -> Scene {
    Scene {
        clusters: clusters.iter().map(|(c, f)| (c.to_string(), *f)).collect(),
        ..demo()
    }
}

/// Advances `cluster` until `until` says stop (or it finishes); the moves made.
async fn walk(
    estate: &mut Estate,
    cluster: &str,
    until: impl Fn(&Move) -> bool,
) -> Result<Vec<Move>> {
    let mut moves = Vec::new();
    for _ in 0..600 {
        let made = estate.advance(cluster).await?;
        let stop = until(&made) || made == Move::Finished;
        moves.push(made);
        if stop {
            return Ok(moves);
        }
    }
    anyhow::bail!("{cluster} did not get there in 600 moves: {moves:?}")
}

/// A cluster to walk and where its walk stops.
type Walk<'a> = (&'a str, &'a dyn Fn(&Move) -> bool);

/// Advances several clusters side by side, a move each at once ([`Estate::advance_together`]),
/// each until its own `until` says stop (or it finishes), so that their rounds of evidence and
/// adopt's waits overlap as they would when an operator adopts several clusters at once; the
/// moves made, per cluster, in the order given.
async fn walk_together(estate: &mut Estate, clusters: &[Walk<'_>]) -> Result<Vec<Vec<Move>>> {
    let mut moves = vec![Vec::new(); clusters.len()];
    let mut done = vec![false; clusters.len()];
    for _ in 0..600 {
        let walking: Vec<usize> = (0..clusters.len()).filter(|i| !done[*i]).collect();
        let names: Vec<&str> = walking.iter().map(|i| clusters[*i].0).collect();
        let made = estate.advance_together(&names).await?;
        for (i, made) in walking.into_iter().zip(made) {
            done[i] = clusters[i].1(&made) || made == Move::Finished;
            moves[i].push(made);
        }
        if done.iter().all(|d| *d) {
            return Ok(moves);
        }
    }
    anyhow::bail!("not every cluster got there in 600 rounds of moves: {moves:?}")
}

/// The probe each round sent (from the moves that started rounds).
fn probes(moves: &[Move]) -> Vec<String> {
    moves
        .iter()
        .filter_map(|m| match m {
            Move::Applied { step: 3, did } => did.split_whitespace().nth(2).map(str::to_owned),
            _ => None,
        })
        .collect()
}

async fn rule_states(aws: &Aws, prefix: &str) -> Result<Vec<RuleState>> {
    let rules = aws.events.list_rules().name_prefix(prefix).send().await?;
    Ok(rules
        .rules()
        .iter()
        .filter_map(|r| r.state().cloned())
        .collect())
}

/// A Karpenter controller role for `cluster` (its `eks:DescribeCluster` grant names it) that may
/// read `queues` (names; `*` as IAM reads it), in the emulator's account and region.
async fn controller_role(aws: &Aws, role: &str, cluster: &str, queues: &[&str]) -> Result<()> {
    lab::sandbox::create_karpenter_role(&aws.iam, role).await?;
    let arns: Vec<String> = queues
        .iter()
        .map(|q| format!("arn:aws:sqs:us-east-1:123456789012:{q}"))
        .collect();
    aws.iam
        .put_role_policy()
        .role_name(role)
        .policy_name("controller")
        .policy_document(
            json!({"Version": "2012-10-17", "Statement": [
                {"Effect": "Allow", "Action": ["sqs:ReceiveMessage", "sqs:DeleteMessage",
                    "sqs:GetQueueUrl"], "Resource": arns},
                {"Effect": "Allow", "Action": "eks:DescribeCluster",
                 "Resource": format!("arn:aws:eks:us-east-1:123456789012:cluster/{cluster}")}]})
            .to_string(),
        )
        .send()
        .await?;
    Ok(())
}

/// `routerctl verify --cluster <cluster>` against the scene's base stack.
async fn verify_cluster(aws: &Aws, cluster: &str) -> verify::Report {
    verify::run(
        aws,
        &verify::Options {
            stack: STACK.into(),
            clusters: vec![cluster.into()],
            ..verify::Options::default()
        },
    )
    .await
}
