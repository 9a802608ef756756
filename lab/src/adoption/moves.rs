//! One move of the scene: [`Estate::advance`] takes a cluster one step further, by adopt's
//! `--apply` or, where adopt hands the step to the operator, by what the operator does (the
//! helm upgrade, the getting-started stack's update with `--stack-template`, Terraform's apply,
//! a purge); a [`Move`] says which. [`Estate::advance_together`] makes one move for each of
//! several clusters at once, as an operator adopting them in several terminals would: their
//! waits, adopt's settles and its deploys overlap instead of following one another. Where every
//! one of them waits, it sleeps until the first wait ends, as the plan names it.

use std::{
    collections::BTreeMap,
    time::{Duration, SystemTime},
};

use anyhow::{Context, Result, bail};
use futures_util::future::try_join_all;

use local_aws::moto::{ACCOUNT, REGION};

use super::{Estate, Move, STACK};
use crate::old_setups::Flavour;
use routerctl::adopt::{self, Outcome as Adopted, steps::State};

/// How long a waiting step is left before the next look where the plan names no end to its wait
/// (CloudWatch's minutes arriving). Each look is a whole plan (a second of emulator calls):
/// looking every second only took CPU from the tests running beside this one.
const LOOK_AGAIN_AFTER: Duration = Duration::from_secs(5);

/// What adopt's plan hands a cluster next.
enum Next {
    /// The helm command the plan prints (step 3), pointing Karpenter at this queue; `--apply`
    /// then starts the check.
    Helm(String),
    /// A step that waits on time: look again when it ends (`until`, the account's clock), or
    /// after [`LOOK_AGAIN_AFTER`] where the plan cannot say.
    Wait {
        step: u8,
        why: String,
        until: Option<SystemTime>,
    },
    /// Step 7 waits for the old queue to be empty: the operator purges it.
    Purge,
    /// The tool that made the set-up retires step 6 (its rules) or 7 (its queue).
    Retire(u8),
    /// `adopt --apply`.
    Apply,
}

impl Next {
    /// How long from now a wait lasts; none for a move.
    fn waits_for(&self) -> Option<Duration> {
        let Next::Wait { until, .. } = self else {
            return None;
        };
        // The plan read the account's clock, which for the SDK is this machine's.
        Some(until.map_or(LOOK_AGAIN_AFTER, |at| {
            at.duration_since(SystemTime::now()).unwrap_or_default()
        }))
    }
}

impl Estate {
    /// One move further for `cluster`: what the operator does where adopt's plan hands them the
    /// next step, else adopt's `--apply`.
    pub async fn advance(&mut self, cluster: &str) -> Result<Move> {
        Ok(self.advance_together(&[cluster]).await?.remove(0))
    }

    /// One move further for each of `clusters` at once; the moves, in the order given. The
    /// helm upgrades come first (each waits for its old leader to stop), then every other move
    /// side by side. A wait beside another cluster's move is only reported; where all of them
    /// wait, this sleeps until the first wait ends.
    pub async fn advance_together(&mut self, clusters: &[&str]) -> Result<Vec<Move>> {
        let nexts = try_join_all(clusters.iter().map(|c| self.next(c))).await?;
        let waits: Option<Vec<Duration>> = nexts.iter().map(Next::waits_for).collect();
        if let Some(first) = waits.and_then(|w| w.into_iter().min()) {
            tokio::time::sleep(first).await;
        }
        let helms: BTreeMap<&str, &str> = clusters
            .iter()
            .zip(&nexts)
            .filter_map(|(cluster, next)| match next {
                Next::Helm(queue) => Some((*cluster, queue.as_str())),
                _ => None,
            })
            .collect();
        let mut upgrades = Vec::new();
        for (name, c) in self.clusters.iter_mut() {
            if let Some(queue) = helms.get(name.as_str()) {
                let karpenter = c.karpenter.as_mut();
                upgrades.push(
                    karpenter
                        .with_context(|| format!("{name}: no Karpenter"))?
                        .point_at(queue),
                );
            }
        }
        try_join_all(upgrades).await?;
        let this = &*self;
        try_join_all(
            clusters
                .iter()
                .zip(nexts)
                .map(|(cluster, next)| async move {
                    match next {
                        Next::Helm(queue) => Ok(Move::Operator {
                            step: 3,
                            did: format!("helm upgrade … --set settings.interruptionQueue={queue}"),
                        }),
                        next => this.act(cluster, next).await,
                    }
                }),
        )
        .await
    }

    /// What the plan hands `cluster` next.
    async fn next(&self, cluster: &str) -> Result<Next> {
        let plan = self.adopt(&adopt::Options::plan_of(STACK, cluster)).await?;
        let at = plan
            .cluster(cluster)
            .context("cluster left out of the plan")?;
        let flavour = self.clusters[cluster].flavour;
        let queue = Self::tenant_queue(cluster);
        let Some(next) = at.next() else {
            return Ok(Next::Apply);
        };
        let reading = self.clusters[cluster]
            .karpenter
            .as_ref()
            .and_then(|k| k.reading().map(str::to_owned));
        Ok(match (next.number, &next.state) {
            (3, State::Todo) if reading.as_deref() != Some(queue.as_str()) => Next::Helm(queue),
            (1 | 4, State::Waiting { until }) => Next::Wait {
                step: next.number,
                why: next.detail.clone(),
                until: *until,
            },
            (7, State::Waiting { .. }) => Next::Purge,
            (6 | 7, State::Todo) if flavour != Some(Flavour::ByHand) => Next::Retire(next.number),
            _ => Next::Apply,
        })
    }

    /// Makes `next` (anything but a helm upgrade) for `cluster`.
    async fn act(&self, cluster: &str, next: Next) -> Result<Move> {
        match next {
            Next::Helm(_) => bail!("{cluster}: a helm upgrade needs the estate to itself"),
            // Reported only: `advance_together` slept, if every cluster waits.
            Next::Wait { step, why, .. } => Ok(Move::Waited { step, why }),
            Next::Purge => {
                let old = self.clusters[cluster].old_queue.clone().unwrap_or_default();
                let url = self.site_queue_url(&old).await?;
                self.site.sqs.purge_queue().queue_url(&url).send().await?;
                Ok(Move::Operator {
                    step: 7,
                    did: format!("aws sqs purge-queue --queue-url {url}"),
                })
            }
            Next::Retire(step) => {
                let did = self.retire_with_its_tool(cluster, step).await?;
                Ok(Move::Operator { step, did })
            }
            Next::Apply => self.apply_move(cluster).await,
        }
    }

    /// adopt's `--apply` for `cluster`.
    async fn apply_move(&self, cluster: &str) -> Result<Move> {
        // By hand: the operator says so, and adopt deletes what carries no tool's mark.
        let options = match self.clusters[cluster].flavour {
            Some(Flavour::ByHand) => self.apply(cluster).delete_hand_made(),
            _ => self.apply(cluster),
        };
        let report = self.adopt(&options).await?;
        match &report.outcome {
            Adopted::Finished => Ok(Move::Finished),
            Adopted::Applied { step, did } => {
                if matches!(step, 1 | 2) {
                    // moto skips parts of the tenant stack; put them back as AWS would have them.
                    let role = self.clusters[cluster].role.clone();
                    self.complete_tenant(cluster, role.as_deref()).await?;
                }
                Ok(Move::Applied {
                    step: *step,
                    did: did.clone(),
                })
            }
            // The plan above saw the step ready; by the apply's own look it waits on time (a
            // round's CloudWatch minute not published yet): look again, as an operator would.
            Adopted::Refused { step, why }
                if why.starts_with(&format!("step {step} is waiting")) =>
            {
                tokio::time::sleep(LOOK_AGAIN_AFTER).await;
                Ok(Move::Waited {
                    step: *step,
                    why: why.clone(),
                })
            }
            Adopted::Refused { why, .. } => bail!("{cluster} is stuck: {why}"),
            other => bail!("adopt --apply did not apply: {other:?}"),
        }
    }

    /// What the tool that made `cluster`'s old set-up does once it no longer declares the rules
    /// (step 6) or the queue (step 7): the getting-started stack updated with adopt's edit of its
    /// template; Terraform's apply deleting what its configuration dropped.
    async fn retire_with_its_tool(&self, cluster: &str, step: u8) -> Result<String> {
        match self.clusters[cluster].flavour {
            Some(Flavour::GettingStarted) => {
                let report = self
                    .adopt(&adopt::Options::stack_template(STACK, cluster))
                    .await?;
                let command = report.command_for(cluster);
                let Adopted::Template { stack, edit, .. } = report.outcome else {
                    bail!("--stack-template printed no template: {}", report.render());
                };
                aws_clients::stacks::update(&self.site.cfn, &stack, &edit.template, &[]).await?;
                Ok(format!(
                    "{} --stack-template > {stack}.yaml ({}); aws cloudformation deploy \
                     --stack-name {stack} --template-file {stack}.yaml",
                    command,
                    edit.summary()
                ))
            }
            _ => {
                let plan = self.adopt(&adopt::Options::plan_of(STACK, cluster)).await?;
                let tool = plan
                    .cluster(cluster)
                    .context("no plan")?
                    .step(step)
                    .detail
                    .clone();
                if step == 6 {
                    let rules = self
                        .site
                        .events
                        .list_rules()
                        .name_prefix("Karpenter")
                        .send()
                        .await?;
                    // Both Terraform modules tag their rules ClusterName.
                    for rule in rules.rules().iter().filter_map(|r| r.name()) {
                        if !self.rule_tagged_for(rule, cluster).await? {
                            continue;
                        }
                        crate::sandbox::delete_rule(&self.site.events, rule).await?;
                    }
                    Ok(format!("terraform apply without the rules ({tool})"))
                } else {
                    let old = self.clusters[cluster].old_queue.clone().unwrap_or_default();
                    let url = self.site_queue_url(&old).await?;
                    self.site.sqs.delete_queue().queue_url(&url).send().await?;
                    Ok(format!("terraform apply without the queue {old}"))
                }
            }
        }
    }

    async fn rule_tagged_for(&self, rule: &str, cluster: &str) -> Result<bool> {
        let (account, region) = match &self.scene.member {
            Some(m) => (m.account.as_str(), m.region.as_str()),
            None => (ACCOUNT, REGION),
        };
        let arn = format!("arn:aws:events:{region}:{account}:rule/{rule}");
        let tags = match self
            .site
            .events
            .list_tags_for_resource()
            .resource_arn(arn)
            .send()
            .await
        {
            Ok(tags) => tags,
            // Deleted since the listing, by another cluster's adopt walking beside this one.
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_resource_not_found_exception()) =>
            {
                return Ok(false);
            }
            Err(e) => return Err(e.into()),
        };
        Ok(tags
            .tags()
            .iter()
            .any(|t| t.key() == "ClusterName" && t.value() == cluster))
    }
}
