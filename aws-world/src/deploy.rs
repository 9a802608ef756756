//! CloudFormation's part of the model: a stack deployed from a template makes its resources as
//! the template says for that deployment, evaluated by [`aws_model::template`] (parameters and
//! their defaults, conditions, `Rules`, intrinsics, imports of the site's exports), and named as
//! CloudFormation names them, physical ids included: a rule on a custom bus is `<bus>|<rule>`.
//!
//! Each resource type the project's templates use becomes what its service would hold, with the
//! defaults that service applies (a queue without a key is SSE-SQS, as SQS makes new queues; a
//! function is Active; a mapping is Enabled; a query definition is saved). Types nothing reads
//! here (log groups) are kept as physical ids only.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use router_core::aws::{CallError, missing};
use serde_json::{Value, json};

use super::{ModelKey, ModelQueue, ModelRole, ModelStack, World};
use aws_model::resources::{Alarm, DeployError, Function, Mapping, Rule, Stack, Target, Watched};
use aws_model::{
    arn::arn_name,
    template::{Deployment, Stage, Template},
};

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn opt(value: &Value) -> Option<String> {
    (!value.is_null()).then(|| text(value))
}

/// The name an ARN or a name stands for (`…:event-bus/<name>`, `…:function:<name>`).
fn last_name(value: &str) -> String {
    value.rsplit(['/', ':']).next().unwrap_or(value).to_owned()
}

fn function_dimension(dimensions: &Value) -> Option<String> {
    dimensions
        .as_array()?
        .iter()
        .find(|d| d["Name"] == "FunctionName")
        .map(|d| text(&d["Value"]))
}

impl World {
    /// Deploys (creates, or updates in place) stack `name` from `template` with `parameters`
    /// (the others take their defaults) in this view's account and region, as CloudFormation
    /// would. As CloudFormation answers: a template it cannot read, or a parameter set its
    /// `Rules` reject, is refused by the call (`ValidationError`); a resource that cannot be made
    /// fails the deployment, which rolls back (the model keeps no rolled-back stack).
    pub fn deploy(
        &self,
        name: &str,
        template: &str,
        parameters: &[(&str, &str)],
    ) -> Result<Stack, DeployError> {
        let updating = self.site(|site| site.stacks.contains_key(name));
        let call = if updating {
            "UpdateStack"
        } else {
            "CreateStack"
        };
        let refused = |message: String| {
            DeployError::call(
                format!("{call} {name}"),
                CallError::new(missing::STACK, message),
            )
        };
        let text = template;
        let template =
            Template::parse_shared(name, template).map_err(|e| refused(format!("{e:#}")))?;
        let mut stage = Stage::new(name, &self.account, &self.region);
        for (key, value) in parameters {
            stage = stage.parameter(key, value);
        }
        stage.exports = self.site(|site| site.exports.clone());
        let failures = template
            .rules_failures(&stage)
            .map_err(|e| refused(format!("{e:#}")))?;
        if let Some((rule, why)) = failures.first() {
            return Err(refused(format!(
                "CloudFormation refuses the parameters: {rule}: {why}"
            )));
        }
        self.make_stack(name, text, &template, &stage)
            .map_err(|e| DeployError::Failed {
                stack: name.to_owned(),
                status: if updating {
                    "UPDATE_ROLLBACK_COMPLETE"
                } else {
                    "ROLLBACK_COMPLETE"
                }
                .to_owned(),
                reasons: vec![format!("{e:#}")],
            })
    }

    /// Makes the stack's resources, outputs and exports, and records it.
    fn make_stack(
        &self,
        name: &str,
        text: &str,
        template: &Template,
        stage: &Stage,
    ) -> Result<Stack> {
        let deployment = template.deploy(stage)?;
        let mut resources = BTreeMap::new();
        // Queues first, then what names them (policies attach to queues made here).
        let mut ids: Vec<(&str, &str)> = template
            .resources()
            .map(|(logical, body)| (logical, body["Type"].as_str().unwrap_or_default()))
            .collect();
        ids.sort_by_key(|(_, ty)| !matches!(*ty, "AWS::SQS::Queue" | "AWS::IAM::Role"));
        for (logical, ty) in ids {
            let Some(properties) = deployment.properties(logical)? else {
                continue;
            };
            let physical = self.make(&deployment, logical, ty, &properties)?;
            resources.insert(logical.to_owned(), physical);
        }
        let mut outputs = BTreeMap::new();
        for key in template.doc["Outputs"]
            .as_object()
            .map(|o| o.keys().cloned().collect::<Vec<_>>())
            .unwrap_or_default()
        {
            if let Some(value) = deployment.output(&key)? {
                outputs.insert(key, value);
            }
        }
        let exports = deployment.exports()?;
        let stack = Stack {
            id: format!(
                "arn:{}:cloudformation:{}:{}:stack/{name}/{}",
                stage.partition(),
                self.region,
                self.account,
                super::uuid_like(name)
            ),
            name: name.to_owned(),
            status: "CREATE_COMPLETE".to_owned(),
            outputs,
            parameters: deployment.parameters.clone(),
        };
        self.site(|site| {
            site.exports.extend(exports);
            site.stacks.insert(
                name.to_owned(),
                ModelStack {
                    stack: stack.clone(),
                    template: text.to_owned(),
                    resources,
                },
            );
        });
        Ok(stack)
    }

    /// Makes one resource; its physical id.
    fn make(
        &self,
        deployment: &Deployment<'_>,
        logical: &str,
        ty: &str,
        p: &Value,
    ) -> Result<String> {
        let get = |attribute: &str| -> Result<String> {
            let value = deployment
                .resolve(&json!({"Fn::GetAtt": [logical, attribute]}))?
                .with_context(|| format!("{logical}.{attribute}"))?;
            Ok(text(&value))
        };
        let reference = text(
            &deployment
                .resolve(&json!({"Ref": logical}))?
                .with_context(|| format!("Ref {logical}"))?,
        );
        let (account, region) = (self.account.clone(), self.region.clone());
        match ty {
            "AWS::SQS::Queue" => {
                let arn = get("Arn")?;
                let created = self
                    .clock()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_secs()
                    .to_string();
                let mut attributes = BTreeMap::from([
                    ("QueueArn".to_owned(), arn.clone()),
                    ("CreatedTimestamp".to_owned(), created),
                    (
                        "VisibilityTimeout".to_owned(),
                        opt(&p["VisibilityTimeout"]).unwrap_or_else(|| "30".into()),
                    ),
                    (
                        "MessageRetentionPeriod".to_owned(),
                        opt(&p["MessageRetentionPeriod"]).unwrap_or_else(|| "345600".into()),
                    ),
                ]);
                let key = opt(&p["KmsMasterKeyId"]);
                // SQS encrypts a new queue with SSE-SQS unless it is given a key or told not to.
                let sse = key.is_none() && p["SqsManagedSseEnabled"] != json!(false);
                attributes.insert("SqsManagedSseEnabled".into(), sse.to_string());
                if let Some(key) = key {
                    attributes.insert("KmsMasterKeyId".into(), key);
                }
                if !p["RedrivePolicy"].is_null() {
                    attributes.insert("RedrivePolicy".into(), p["RedrivePolicy"].to_string());
                }
                let tags = p["Tags"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|t| (text(&t["Key"]), text(&t["Value"])))
                    .collect();
                self.site(|site| {
                    let queue = site.queues.entry(arn_name(&arn).to_owned()).or_default();
                    let policy = queue.attributes.remove("Policy");
                    // An update keeps the queue (and when it was made).
                    if let Some(created) = queue.attributes.remove("CreatedTimestamp") {
                        attributes.insert("CreatedTimestamp".into(), created);
                    }
                    *queue = ModelQueue {
                        url: reference.clone(),
                        attributes: attributes.into_iter().collect(),
                        tags,
                        messages: std::mem::take(&mut queue.messages),
                        counted: std::mem::take(&mut queue.counted),
                    };
                    if let Some(policy) = policy {
                        queue.attributes.insert("Policy".into(), policy);
                    }
                });
            }
            "AWS::SQS::QueuePolicy" => {
                let document = p["PolicyDocument"].to_string();
                for url in p["Queues"].as_array().into_iter().flatten() {
                    let url = text(url);
                    let name = url.rsplit('/').next().unwrap_or_default().to_owned();
                    self.site(|site| {
                        if let Some(queue) = site.queues.get_mut(&name) {
                            queue.attributes.insert("Policy".into(), document.clone());
                        }
                    });
                }
            }
            "AWS::Events::EventBus" => {
                let policy = opt(&p["Policy"]).filter(|_| p["Policy"].is_object());
                self.site(|site| site.buses.insert(reference.clone(), policy));
            }
            "AWS::Events::Rule" => {
                let bus = opt(&p["EventBusName"])
                    .map(|b| last_name(&b))
                    .unwrap_or_else(|| "default".into());
                // The rule's own name: its physical id is `<bus>|<name>` on a custom bus.
                let name = reference.rsplit('|').next().unwrap_or_default().to_owned();
                let rule = Rule {
                    arn: Some(get("Arn")?),
                    state: Some(opt(&p["State"]).unwrap_or_else(|| "ENABLED".into())),
                    event_pattern: (!p["EventPattern"].is_null())
                        .then(|| p["EventPattern"].to_string()),
                    event_bus_name: Some(bus.clone()),
                };
                let targets = p["Targets"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|t| Target {
                        id: text(&t["Id"]),
                        arn: text(&t["Arn"]),
                        role_arn: opt(&t["RoleArn"]),
                        dead_letter_arn: opt(&t["DeadLetterConfig"]["Arn"]),
                    })
                    .collect();
                self.site(|site| site.rules.insert((bus, name), (rule, targets)));
            }
            "AWS::IAM::Role" => {
                let arn = get("Arn")?;
                let role = ModelRole {
                    id: super::role_id(&arn),
                    arn: arn.clone(),
                    inline: p["Policies"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|pol| (text(&pol["PolicyName"]), pol["PolicyDocument"].clone()))
                        .collect(),
                    managed: p["ManagedPolicyArns"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(text)
                        .collect(),
                    boundary: opt(&p["PermissionsBoundary"]),
                    trust: p["AssumeRolePolicyDocument"].clone(),
                };
                self.edit(|state, _, _| state.roles.insert(arn, role));
            }
            "AWS::IAM::ManagedPolicy" => {
                let arn = format!("arn:aws:iam::{account}:policy/{reference}");
                let roles: Vec<String> = p["Roles"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(text)
                    .collect();
                let document = p["PolicyDocument"].clone();
                self.edit(|state, _, _| {
                    state.policies.insert(arn.clone(), document);
                    for role in state.roles.values_mut() {
                        if aws_model::arn::arn_account(&role.arn) == Some(account.as_str())
                            && roles.iter().any(|r| role.arn.ends_with(&format!("/{r}")))
                            && !role.managed.contains(&arn)
                        {
                            role.managed.push(arn.clone());
                        }
                    }
                });
                return Ok(arn);
            }
            "AWS::KMS::Key" => {
                let key = ModelKey {
                    arn: get("Arn")?,
                    policy: p["KeyPolicy"].clone(),
                    enabled: p["Enabled"] != json!(false),
                    aws_managed: false,
                };
                self.edit(|state, _, _| state.keys.insert(key.arn.clone(), key));
            }
            "AWS::Lambda::Function" => {
                let function = Function {
                    name: reference.clone(),
                    state: Some("Active".into()),
                    state_reason: None,
                    last_update_status: Some("Successful".into()),
                    last_update_status_reason: None,
                    role: opt(&p["Role"]),
                    timeout: Some(p["Timeout"].as_i64().unwrap_or(3) as i32),
                    environment: p["Environment"]["Variables"]
                        .as_object()
                        .into_iter()
                        .flatten()
                        .map(|(k, v)| (k.clone(), text(v)))
                        .collect(),
                    // Lambda's default group when the function names none.
                    log_group: Some(
                        opt(&p["LoggingConfig"]["LogGroup"])
                            .unwrap_or_else(|| format!("/aws/lambda/{reference}")),
                    ),
                };
                self.site(|site| site.functions.insert(reference.clone(), function));
            }
            "AWS::Lambda::EventSourceMapping" => {
                let uuid = super::uuid_like(&format!("{account}{region}{logical}"));
                let mapping = Mapping {
                    uuid: uuid.clone(),
                    event_source_arn: opt(&p["EventSourceArn"]),
                    state: Some(if p["Enabled"] == json!(false) {
                        "Disabled".into()
                    } else {
                        "Enabled".into()
                    }),
                    function_response_types: p["FunctionResponseTypes"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(text)
                        .collect(),
                };
                let function = last_name(&text(&p["FunctionName"]));
                self.site(|site| site.mappings.entry(function).or_default().push(mapping));
                return Ok(uuid);
            }
            "AWS::CloudWatch::Alarm" => {
                let name = opt(&p["AlarmName"]).unwrap_or_else(|| {
                    format!("{}-{logical}-{}", deployment.stage.stack_name, "GENERATED")
                });
                let metric = opt(&p["MetricName"]).map(|metric| Watched {
                    namespace: text(&p["Namespace"]),
                    metric,
                    function: function_dimension(&p["Dimensions"]),
                    stat: None,
                });
                let metrics = p["Metrics"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|q| q["MetricStat"].is_object())
                    .map(|q| {
                        let m = &q["MetricStat"]["Metric"];
                        Watched {
                            namespace: text(&m["Namespace"]),
                            metric: text(&m["MetricName"]),
                            function: function_dimension(&m["Dimensions"]),
                            stat: opt(&q["MetricStat"]["Stat"]),
                        }
                    })
                    .collect();
                let alarm = Alarm {
                    name: name.clone(),
                    metric,
                    metrics,
                    actions_enabled: Some(p["ActionsEnabled"] != json!(false)),
                    alarm_actions: p["AlarmActions"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(text)
                        .collect(),
                    // A new alarm has seen no datapoint yet.
                    state: Some("INSUFFICIENT_DATA".into()),
                };
                self.site(|site| {
                    site.alarms.retain(|a| a.name != name);
                    site.alarms.push(alarm);
                });
                return Ok(name);
            }
            "AWS::CloudWatch::Dashboard" => {
                let body = text(&p["DashboardBody"]);
                self.site(|site| site.dashboards.insert(reference.clone(), body));
            }
            "AWS::SSM::Parameter" => {
                let value = text(&p["Value"]);
                self.site(|site| site.parameters.insert(reference.clone(), value));
            }
            // Its Ref is its QueryDefinitionId.
            "AWS::Logs::QueryDefinition" => {
                let definition = super::ModelQueryDefinition {
                    name: text(&p["Name"]),
                    query: text(&p["QueryString"]),
                    log_groups: p["LogGroupNames"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(text)
                        .collect(),
                };
                self.site(|site| site.query_definitions.insert(reference.clone(), definition));
            }
            "AWS::SNS::Topic" => {
                self.site(|site| {
                    site.subscriptions.entry(reference.clone()).or_default();
                });
            }
            _ => {}
        }
        Ok(reference)
    }
}
