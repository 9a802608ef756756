//! The model's answers to what simulate sends ([`Deliveries`]), what fis starts and reads
//! ([`Experiments`]) and what adopt changes ([`Moves`]): EC2's instances, SQS
//! (`aws-world/src/sqs/`), functions that answer as the test says ([`World::function`]), FIS
//! experiments that run at once, log groups, CloudFormation deploys through
//! `aws-world/src/deploy.rs`, EventBridge's rule changes read back at once and delivered by the
//! rule's old state for `RULE_CHANGE_DELAY` after (aws-world plays the delay, as the emulator's
//! stand-in does; adopt settles past it).

use std::{collections::BTreeMap, time::SystemTime};

use super::{ModelInstance, World, millis, not_found, uuid_like};
use crate::cloud::{
    CallError, Cloud,
    deliveries::{Deliveries, Entry, Instance, Instances, Invoked},
    experiments::{ExperimentState, ExperimentTemplate, Experiments, LogEvent, TemplateSummary},
    missing,
    moves::{DeployError, ListedRule, Moves, Received},
};

impl Deliveries for World {
    async fn instances(&self, which: Instances<'_>) -> Result<Vec<Instance>, CallError> {
        self.gate("DescribeInstances")?;
        let owner = self.account().to_owned();
        self.read(|_, site| {
            let pick = |(id, instance): (&String, &ModelInstance)| Instance {
                id: id.clone(),
                owner: owner.clone(),
                tags: instance.tags.clone(),
            };
            match which {
                // One unknown id fails the whole call.
                Instances::Ids(ids) => ids
                    .iter()
                    .map(|id| {
                        site.instances.get_key_value(id).map(pick).ok_or_else(|| {
                            CallError::new(
                                "InvalidInstanceID.NotFound",
                                format!("The instance ID '{id}' does not exist"),
                            )
                        })
                    })
                    .collect(),
                Instances::Tagged { key, value, states } => Ok(site
                    .instances
                    .iter()
                    .filter(|(_, ModelInstance { state, tags, .. })| {
                        states.contains(&state.as_str())
                            && tags
                                .iter()
                                .any(|(k, v)| k == key && value.is_none_or(|value| v == value))
                    })
                    .map(pick)
                    .collect()),
            }
        })
    }

    async fn send_batch(
        &self,
        url: &str,
        entries: &[(String, String)],
    ) -> Result<Vec<(String, Entry)>, CallError> {
        self.gate("SendMessageBatch")?;
        let mut answers = Vec::new();
        for (id, body) in entries {
            answers.push((id.clone(), Entry::Sent(self.sqs_send(url, body)?)));
        }
        Ok(answers)
    }

    async fn invoke(&self, function: &str, payload: String) -> Result<Invoked, CallError> {
        self.gate("InvokeFunction")?;
        let responder = self.responder(function);
        let responder =
            responder.ok_or_else(|| not_found(&format!("Function not found: {function}")))?;
        Ok(responder.answer(payload).await)
    }
}

impl Experiments for World {
    async fn experiment_templates(&self) -> Result<Vec<TemplateSummary>, CallError> {
        self.gate("ListExperimentTemplates")?;
        Ok(self.read(|_, site| {
            site.experiment_templates
                .iter()
                .map(|(id, (tags, _))| TemplateSummary {
                    id: id.clone(),
                    tags: tags.clone(),
                })
                .collect()
        }))
    }

    async fn experiment_template(&self, id: &str) -> Result<ExperimentTemplate, CallError> {
        self.gate("GetExperimentTemplate")?;
        self.read(|_, site| site.experiment_templates.get(id).map(|(_, t)| t.clone()))
            .ok_or_else(|| not_found(&format!("Experiment template {id}")))
    }

    /// The experiment runs at once: the running instances its targets select are interrupted
    /// (stopping), and it is completed.
    async fn start_experiment(&self, template_id: &str) -> Result<String, CallError> {
        self.gate("StartExperiment")?;
        let template = Experiments::experiment_template(self, template_id).await?;
        let now = millis(self.now());
        let id = format!("EXP{}", uuid_like(&format!("{template_id}{now}")));
        let experiment = ExperimentState {
            template_id: template_id.to_owned(),
            status: Some("completed".into()),
            reason: None,
            creation_ms: Some(now),
            start_ms: Some(now),
            end_ms: Some(now),
        };
        self.site(|site| {
            for ModelInstance { state, tags, .. } in site.instances.values_mut() {
                let selected = template.targets.iter().any(|t| {
                    t.resource_tags
                        .iter()
                        .all(|(k, v)| tags.iter().any(|(tk, tv)| tk == k && tv == v))
                });
                if selected && state == "running" {
                    *state = "stopping".into();
                }
            }
            site.experiments.insert(id.clone(), experiment);
        });
        Ok(id)
    }

    async fn experiment(&self, id: &str) -> Result<ExperimentState, CallError> {
        self.gate("GetExperiment")?;
        self.read(|_, site| site.experiments.get(id).cloned())
            .ok_or_else(|| not_found(&format!("Experiment {id}")))
    }

    async fn resolved_targets(&self, id: &str) -> Result<Vec<String>, CallError> {
        self.gate("ListExperimentResolvedTargets")?;
        let experiment = self.experiment(id).await?;
        let template = Experiments::experiment_template(self, &experiment.template_id).await?;
        let (account, region) = (self.account().to_owned(), self.region().to_owned());
        Ok(self.read(|_, site| {
            site.instances
                .iter()
                .filter(|(_, ModelInstance { state, tags, .. })| {
                    state == "stopping"
                        && template.targets.iter().any(|t| {
                            t.resource_tags
                                .iter()
                                .all(|(k, v)| tags.iter().any(|(tk, tv)| tk == k && tv == v))
                        })
                })
                .map(|(id, _)| format!("arn:aws:ec2:{region}:{account}:instance/{id}"))
                .collect()
        }))
    }

    async fn log_events(
        &self,
        group: &str,
        pattern: &str,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<LogEvent>, CallError> {
        self.gate("FilterLogEvents")?;
        self.logged(group, pattern, from_ms, to_ms)
    }
}

impl Moves for World {
    async fn create_stack(
        &self,
        name: &str,
        template: &str,
        parameters: &[(&str, &str)],
    ) -> Result<BTreeMap<String, String>, DeployError> {
        let call = || format!("CreateStack {name}");
        self.gate("CreateStack")
            .map_err(|e| DeployError::call(call(), e))?;
        if self.read(|_, site| site.stacks.contains_key(name)) {
            return Err(DeployError::call(
                call(),
                CallError::new(
                    "AlreadyExistsException",
                    format!("Stack [{name}] already exists"),
                ),
            ));
        }
        Ok(self.deploy(name, template, parameters)?.outputs)
    }

    /// The parameters not given keep the stack's (UsePreviousValue).
    async fn update_stack(
        &self,
        name: &str,
        template: &str,
        parameters: &[(&str, &str)],
    ) -> Result<(), DeployError> {
        let call = || format!("UpdateStack {name}");
        self.gate("UpdateStack")
            .map_err(|e| DeployError::call(call(), e))?;
        let mut kept = self
            .read(|_, site| site.stacks.get(name).map(|s| s.stack.parameters.clone()))
            .ok_or_else(|| {
                DeployError::call(
                    call(),
                    CallError::new(missing::STACK, format!("Stack [{name}] does not exist")),
                )
            })?;
        for (key, value) in parameters {
            kept.insert(key.to_string(), value.to_string());
        }
        let kept: Vec<(&str, &str)> = kept.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        self.deploy(name, template, &kept)?;
        Ok(())
    }

    async fn active_stacks(&self) -> Result<Vec<String>, CallError> {
        self.gate("ListStacks")?;
        Ok(self.read(|_, site| site.stacks.keys().cloned().collect()))
    }

    async fn listed_resources(&self, stack: &str) -> Result<Vec<(String, String)>, CallError> {
        self.gate("ListStackResources")?;
        Ok(self.stack_resources(stack).await?.into_iter().collect())
    }

    async fn template_body(&self, stack: &str) -> Result<String, CallError> {
        self.gate("GetTemplate")?;
        self.read(|_, site| site.stacks.get(stack).map(|s| s.template.clone()))
            .ok_or_else(|| {
                CallError::new(
                    missing::STACK,
                    format!("Stack with id {stack} does not exist"),
                )
            })
    }

    async fn default_bus_rules(&self) -> Result<Vec<ListedRule>, CallError> {
        self.gate("ListRules")?;
        Ok(self.read(|_, site| {
            site.rules
                .iter()
                .filter(|((bus, _), _)| bus == "default")
                .map(|((_, name), (rule, _))| ListedRule {
                    name: name.clone(),
                    arn: rule.arn.clone().unwrap_or_default(),
                    state: rule.state.clone(),
                    event_pattern: rule.event_pattern.clone(),
                })
                .collect()
        }))
    }

    async fn rule_tags(&self, arn: &str) -> Result<BTreeMap<String, String>, CallError> {
        self.gate("ListTagsForResource")?;
        Ok(self.read(|_, site| site.rule_tags.get(arn).cloned().unwrap_or_default()))
    }

    async fn enable_rule(&self, name: &str) -> Result<(), CallError> {
        self.gate("EnableRule")?;
        self.set_rule_state(name, "ENABLED")
    }

    async fn disable_rule(&self, name: &str) -> Result<(), CallError> {
        self.gate("DisableRule")?;
        self.set_rule_state(name, "DISABLED")
    }

    async fn remove_target(&self, rule: &str, id: &str) -> Result<(), CallError> {
        self.gate("RemoveTargets")?;
        let key = ("default".to_owned(), rule.to_owned());
        self.site(|site| {
            let (_, targets) = site
                .rules
                .get_mut(&key)
                .ok_or_else(|| not_found(&format!("Rule {rule}")))?;
            targets.retain(|t| t.id != id);
            Ok(())
        })
    }

    /// Refused while the rule still has targets, as EventBridge refuses it.
    async fn delete_rule(&self, name: &str) -> Result<(), CallError> {
        self.gate("DeleteRule")?;
        let key = ("default".to_owned(), name.to_owned());
        self.site(|site| match site.rules.get(&key) {
            Some((_, targets)) if !targets.is_empty() => Err(CallError::new(
                "ValidationException",
                "Rule can't be deleted since it has targets.",
            )),
            Some(_) => {
                site.rules.remove(&key);
                site.rule_lag.remove(&key);
                Ok(())
            }
            None => Ok(()),
        })
    }

    async fn every_queue(&self) -> Result<Vec<String>, CallError> {
        self.queue_urls("").await
    }

    async fn send_message(&self, url: &str, body: &str) -> Result<(), CallError> {
        self.gate("SendMessage")?;
        self.sqs_send(url, body).map(|_| ())
    }

    async fn receive(&self, url: &str, hide_secs: i32) -> Result<Vec<Received>, CallError> {
        self.gate("ReceiveMessage")?;
        self.sqs_receive(url, hide_secs)
    }

    async fn release(&self, url: &str, handles: &[String]) -> Result<(), CallError> {
        self.gate("ChangeMessageVisibility")?;
        self.sqs_release(url, handles)
    }

    async fn delete_message(&self, url: &str, handle: &str) -> Result<(), CallError> {
        self.gate("DeleteMessage")?;
        self.sqs_delete(url, handle)
    }

    async fn delete_queue(&self, url: &str) -> Result<(), CallError> {
        self.gate("DeleteQueue")?;
        let name = url.rsplit('/').next().unwrap_or_default().to_owned();
        self.site(|site| site.queues.remove(&name));
        Ok(())
    }

    async fn tag_queue(&self, url: &str, key: &str, value: &str) -> Result<(), CallError> {
        self.gate("TagQueue")?;
        self.with_queue(url, |_| ())?;
        let name = url.rsplit('/').next().unwrap_or_default().to_owned();
        self.site(|site| {
            if let Some(queue) = site.queues.get_mut(&name) {
                queue.tags.insert(key.to_owned(), value.to_owned());
            }
        });
        Ok(())
    }

    async fn untag_queue(&self, url: &str, key: &str) -> Result<(), CallError> {
        self.gate("UntagQueue")?;
        self.with_queue(url, |_| ())?;
        let name = url.rsplit('/').next().unwrap_or_default().to_owned();
        self.site(|site| {
            if let Some(queue) = site.queues.get_mut(&name) {
                queue.tags.remove(key);
            }
        });
        Ok(())
    }

    async fn role_names(&self) -> Result<Vec<String>, CallError> {
        self.gate("ListRoles")?;
        let prefix = format!("arn:aws:iam::{}:role/", self.account());
        Ok(self
            .lock()
            .roles
            .keys()
            .filter(|arn| arn.starts_with(&prefix))
            .map(|arn| aws_model::arn::arn_name_after_slash(arn).to_owned())
            .collect())
    }

    /// SQS publishes a datapoint for every minute of an active queue, zero included; the model's
    /// CloudWatch has a minute `metric_lag` ([`METRIC_LAG`]) after it ends.
    async fn queue_metric(
        &self,
        queue: &str,
        metric: &str,
        from: SystemTime,
        to: SystemTime,
    ) -> Result<Vec<(u64, f64)>, CallError> {
        self.gate("GetMetricStatistics")?;
        let lag = self.lock().metric_lag.as_secs();
        let published = (millis(self.now()) as u64 / 1000).saturating_sub(lag);
        let (from, to) = (millis(from) as u64 / 1000, millis(to) as u64 / 1000);
        let first = from.div_ceil(60) * 60;
        Ok(self.read(|_, site| {
            let Some(q) = site.queues.get(queue) else {
                return Vec::new();
            };
            (first..to)
                .step_by(60)
                .filter(|minute| minute + 60 <= published)
                .map(|minute| {
                    let (received, deleted) = q.counted.get(&minute).copied().unwrap_or_default();
                    let sum = match metric {
                        "NumberOfMessagesReceived" => received,
                        "NumberOfMessagesDeleted" => deleted,
                        _ => 0.0,
                    };
                    (minute, sum)
                })
                .collect()
        }))
    }
}
