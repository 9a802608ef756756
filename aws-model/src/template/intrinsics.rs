//! What a deployment gives every intrinsic function (`Ref`, `Fn::GetAtt`, `Fn::Sub`, `Fn::If`, …)
//! and every condition, with the semantics CloudFormation documents for each.

use std::collections::BTreeMap;

use super::Deployment;
use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Map, Value, json};

impl Deployment<'_> {
    /// A resource's `Properties` with every intrinsic resolved (`None` if its condition is false).
    pub fn properties(&self, logical: &str) -> Result<Option<Value>> {
        let resource = &self.template.doc["Resources"][logical];
        if resource.is_null() {
            bail!("{}: no resource {logical}", self.template.name);
        }
        if let Some(condition) = resource["Condition"].as_str()
            && !self.conditions[condition]
        {
            return Ok(None);
        }
        Ok(Some(
            self.resolve(&resource["Properties"])?
                .unwrap_or_else(|| json!({})),
        ))
    }

    /// One property of a resource, resolved; `Null` where the resource or property is absent.
    pub fn property(&self, logical: &str, path: &[&str]) -> Result<Value> {
        let Some(mut value) = self.properties(logical)? else {
            return Ok(Value::Null);
        };
        for key in path {
            value = value.get(*key).cloned().unwrap_or(Value::Null);
        }
        Ok(value)
    }

    /// An output's value (`None` when its condition is false).
    pub fn output(&self, key: &str) -> Result<Option<String>> {
        let output = &self.template.doc["Outputs"][key];
        if output.is_null() {
            bail!("{}: no output {key}", self.template.name);
        }
        if let Some(condition) = output["Condition"].as_str()
            && !self.conditions[condition]
        {
            return Ok(None);
        }
        Ok(self.resolve(&output["Value"])?.map(|v| text(&v)))
    }

    /// The exports this deployment makes: export name → value.
    pub fn exports(&self) -> Result<BTreeMap<String, String>> {
        let mut exports = BTreeMap::new();
        for (key, output) in self.template.doc["Outputs"]
            .as_object()
            .into_iter()
            .flatten()
        {
            if output["Export"].is_null() {
                continue;
            }
            let (Some(name), Some(value)) =
                (self.resolve(&output["Export"]["Name"])?, self.output(key)?)
            else {
                continue;
            };
            exports.insert(text(&name), value);
        }
        Ok(exports)
    }

    /// Resolves every intrinsic function in `value`; `None` for `AWS::NoValue`.
    pub fn resolve(&self, value: &Value) -> Result<Option<Value>> {
        match value {
            Value::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    out.extend(self.resolve(item)?);
                }
                Ok(Some(Value::Array(out)))
            }
            Value::Object(map) if map.len() == 1 && is_intrinsic(map.keys().next().unwrap()) => {
                let (name, arg) = map.iter().next().unwrap();
                self.intrinsic(name, arg)
            }
            Value::Object(map) => {
                let mut out = Map::new();
                for (k, v) in map {
                    if let Some(v) = self.resolve(v)? {
                        out.insert(k.clone(), v);
                    }
                }
                Ok(Some(Value::Object(out)))
            }
            other => Ok(Some(other.clone())),
        }
    }

    fn intrinsic(&self, name: &str, arg: &Value) -> Result<Option<Value>> {
        let string = |v: &Value| -> Result<String> {
            match self.resolve(v)? {
                Some(Value::String(s)) => Ok(s),
                Some(other) => Ok(other.to_string()),
                None => bail!("{name}: an argument is AWS::NoValue"),
            }
        };
        let args = |n: usize| -> Result<&Vec<Value>> {
            arg.as_array()
                .filter(|a| a.len() == n)
                .ok_or_else(|| anyhow!("{name} takes {n} arguments: {arg}"))
        };
        Ok(Some(match name {
            "Ref" => {
                let target = arg.as_str().context("Ref takes a name")?;
                if target == "AWS::NoValue" {
                    return Ok(None);
                }
                let value = self.reference(target)?;
                // A list parameter's Ref is its list (CloudFormation User Guide, Parameters:
                // CommaDelimitedList), what Fn::Join and the rule functions take.
                let ty = self.template.doc["Parameters"][target]["Type"].as_str();
                match ty {
                    Some(ty) if ty == "CommaDelimitedList" || ty.starts_with("List<") => {
                        Value::Array(value.split(',').map(|v| Value::from(v.trim())).collect())
                    }
                    _ => Value::String(value),
                }
            }
            "Fn::GetAtt" => {
                let (logical, attribute) = match arg {
                    Value::Array(a) if a.len() == 2 => (
                        a[0].as_str().context("GetAtt resource")?.to_owned(),
                        string(&a[1])?,
                    ),
                    Value::String(s) => {
                        let (r, a) = s.split_once('.').context("GetAtt Res.Attr")?;
                        (r.to_owned(), a.to_owned())
                    }
                    other => bail!("Fn::GetAtt {other}"),
                };
                Value::String(self.attribute(&logical, &attribute)?)
            }
            "Fn::Sub" => {
                let (text, vars) = match arg {
                    Value::String(s) => (s.clone(), Map::new()),
                    Value::Array(a) if a.len() == 2 => (
                        a[0].as_str().context("Sub text")?.to_owned(),
                        a[1].as_object().cloned().unwrap_or_default(),
                    ),
                    other => bail!("Fn::Sub {other}"),
                };
                let mut values = BTreeMap::new();
                for (k, v) in &vars {
                    values.insert(k.clone(), string(v)?);
                }
                Value::String(self.substitute(&text, &values)?)
            }
            "Fn::If" => {
                let a = args(3)?;
                let condition = a[0].as_str().context("If condition name")?;
                let chosen = if *self
                    .conditions
                    .get(condition)
                    .with_context(|| format!("no condition {condition}"))?
                {
                    &a[1]
                } else {
                    &a[2]
                };
                return self.resolve(chosen);
            }
            "Fn::Split" => {
                let a = args(2)?;
                let separator = string(&a[0])?;
                Value::Array(
                    string(&a[1])?
                        .split(separator.as_str())
                        .map(|s| Value::String(s.to_owned()))
                        .collect(),
                )
            }
            "Fn::Join" => {
                let a = args(2)?;
                let separator = string(&a[0])?;
                let Some(Value::Array(items)) = self.resolve(&a[1])? else {
                    bail!("Fn::Join takes a list");
                };
                Value::String(items.iter().map(text).collect::<Vec<_>>().join(&separator))
            }
            "Fn::Select" => {
                let a = args(2)?;
                let index: usize = string(&a[0])?.parse().context("Select index")?;
                let Some(Value::Array(items)) = self.resolve(&a[1])? else {
                    bail!("Fn::Select takes a list");
                };
                items
                    .get(index)
                    .cloned()
                    .with_context(|| format!("Fn::Select {index} out of range"))?
            }
            "Fn::ImportValue" => {
                let export = string(arg)?;
                Value::String(
                    self.stage.exports.get(&export).cloned().with_context(|| {
                        format!("no export {export} in this account and region")
                    })?,
                )
            }
            "Fn::FindInMap" => {
                let a = args(3)?;
                let (map, top, second) = (string(&a[0])?, string(&a[1])?, string(&a[2])?);
                self.template.doc["Mappings"][&map][&top][&second].clone()
            }
            "Fn::Equals" | "Fn::And" | "Fn::Or" | "Fn::Not" | "Condition" => {
                Value::Bool(self.truth(&json!({ name: arg }), 0)?)
            }
            other => bail!("{}: {other} is not supported here", self.template.name),
        }))
    }

    fn substitute(&self, text: &str, values: &BTreeMap<String, String>) -> Result<String> {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let end = after.find('}').context("Fn::Sub: unclosed ${")?;
            let name = &after[..end];
            if let Some(literal) = name.strip_prefix('!') {
                out.push_str("${");
                out.push_str(literal);
                out.push('}');
            } else if let Some(v) = values.get(name) {
                out.push_str(v);
            } else if let Some((resource, attribute)) = name.split_once('.')
                && !resource.starts_with("AWS::")
            {
                out.push_str(&self.attribute(resource, attribute)?);
            } else {
                out.push_str(&self.reference(name)?);
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    fn reference(&self, target: &str) -> Result<String> {
        let stage = self.stage;
        Ok(match target {
            "AWS::AccountId" => stage.account.clone(),
            "AWS::Region" => stage.region.clone(),
            "AWS::Partition" => stage.partition().to_owned(),
            "AWS::StackName" => stage.stack_name.clone(),
            "AWS::URLSuffix" => "amazonaws.com".to_owned(),
            "AWS::StackId" => format!(
                "arn:{}:cloudformation:{}:{}:stack/{}/00000000-0000-0000-0000-000000000000",
                stage.partition(),
                stage.region,
                stage.account,
                stage.stack_name
            ),
            _ if self.parameters.contains_key(target) => self.parameters[target].clone(),
            _ => self.attribute(target, "Ref")?,
        })
    }

    /// A resource's `Ref` or attribute: the stage's, or what CloudFormation would make it.
    fn attribute(&self, logical: &str, attribute: &str) -> Result<String> {
        if let Some(known) = self
            .stage
            .resources
            .get(logical)
            .and_then(|r| r.get(attribute))
        {
            return Ok(known.clone());
        }
        let resource = &self.template.doc["Resources"][logical];
        let ty = resource["Type"]
            .as_str()
            .with_context(|| format!("{}: no resource {logical}", self.template.name))?;
        let properties = &resource["Properties"];
        let named = |key: &str| -> Result<String> {
            match self.resolve(&properties[key])? {
                Some(Value::String(s)) => Ok(s),
                _ => Ok(format!("{}-{logical}-GENERATED", self.stage.stack_name)),
            }
        };
        let (p, region, account) = (
            self.stage.partition(),
            &self.stage.region,
            &self.stage.account,
        );
        let unknown = || {
            anyhow!(
                "{}: {ty} has no attribute {attribute} here",
                self.template.name
            )
        };
        Ok(match (ty, attribute) {
            ("AWS::SQS::Queue", "Ref") => format!(
                "https://sqs.{region}.amazonaws.com/{account}/{}",
                named("QueueName")?
            ),
            ("AWS::SQS::Queue", "Arn") => {
                format!("arn:{p}:sqs:{region}:{account}:{}", named("QueueName")?)
            }
            ("AWS::SQS::Queue", "QueueName") => named("QueueName")?,
            // A rule on a custom bus: `<bus>|<rule>`, as CloudFormation names it.
            ("AWS::Events::Rule", "Ref") => match self.resolve(&properties["EventBusName"])? {
                Some(Value::String(b)) if b != "default" => {
                    let bus = b.rsplit('/').next().unwrap_or(&b).to_owned();
                    format!("{bus}|{}", named("Name")?)
                }
                _ => named("Name")?,
            },
            ("AWS::Events::Rule", "Arn") => {
                // A rule on a custom bus has the bus in its ARN.
                let bus = match self.resolve(&properties["EventBusName"])? {
                    Some(Value::String(b)) if b != "default" => format!("{b}/"),
                    _ => String::new(),
                };
                format!(
                    "arn:{p}:events:{region}:{account}:rule/{bus}{}",
                    named("Name")?
                )
            }
            ("AWS::Events::EventBus", "Ref" | "Name") => named("Name")?,
            ("AWS::Events::EventBus", "Arn") => {
                format!(
                    "arn:{p}:events:{region}:{account}:event-bus/{}",
                    named("Name")?
                )
            }
            ("AWS::IAM::Role", "Ref" | "RoleName") => named("RoleName")?,
            ("AWS::IAM::Role", "Arn") => {
                // A role's path is part of its ARN: arn:<partition>:iam::<account>:role/<path>/<name>.
                let path = match self.resolve(&properties["Path"])? {
                    Some(Value::String(path)) => path,
                    _ => "/".to_owned(),
                };
                format!("arn:{p}:iam::{account}:role{path}{}", named("RoleName")?)
            }
            ("AWS::KMS::Key", "Ref" | "KeyId") => {
                format!("{}-{logical}-KEYID", self.stage.stack_name)
            }
            ("AWS::KMS::Key", "Arn") => format!(
                "arn:{p}:kms:{region}:{account}:key/{}-{logical}-KEYID",
                self.stage.stack_name
            ),
            ("AWS::Lambda::Function", "Ref") => named("FunctionName")?,
            ("AWS::Lambda::Function", "Arn") => format!(
                "arn:{p}:lambda:{region}:{account}:function:{}",
                named("FunctionName")?
            ),
            ("AWS::Logs::LogGroup", "Ref") => named("LogGroupName")?,
            ("AWS::Logs::LogGroup", "Arn") => format!(
                "arn:{p}:logs:{region}:{account}:log-group:{}:*",
                named("LogGroupName")?
            ),
            ("AWS::CloudWatch::Dashboard", "Ref") => named("DashboardName")?,
            ("AWS::CloudWatch::Alarm", "Ref") => named("AlarmName")?,
            ("AWS::SSM::Parameter", "Ref" | "Name") => named("Name")?,
            // A topic's Ref is its ARN.
            ("AWS::SNS::Topic", "Ref" | "TopicArn") => {
                format!("arn:{p}:sns:{region}:{account}:{}", named("TopicName")?)
            }
            ("AWS::SNS::Topic", "TopicName") => named("TopicName")?,
            (_, "Ref") => format!("{}-{logical}-GENERATED", self.stage.stack_name),
            _ => return Err(unknown()),
        })
    }

    /// A condition by name; `depth` guards against cycles.
    pub(super) fn condition(&self, name: &str, depth: usize) -> Result<bool> {
        if let Some(known) = self.conditions.get(name) {
            return Ok(*known);
        }
        let body = &self.template.doc["Conditions"][name];
        if body.is_null() {
            bail!("{}: no condition {name}", self.template.name);
        }
        self.truth(body, depth + 1)
    }

    /// A condition function's value.
    fn truth(&self, body: &Value, depth: usize) -> Result<bool> {
        if depth > 32 {
            bail!(
                "{}: conditions nest too deep (a cycle?)",
                self.template.name
            );
        }
        let (name, arg) = body
            .as_object()
            .filter(|m| m.len() == 1)
            .and_then(|m| m.iter().next())
            .with_context(|| format!("not a condition: {body}"))?;
        let list = || {
            arg.as_array()
                .with_context(|| format!("{name} takes a list"))
        };
        Ok(match name.as_str() {
            "Condition" => self.condition(arg.as_str().context("Condition name")?, depth)?,
            "Fn::Equals" => {
                let a = list()?;
                a.len() == 2 && self.scalar(&a[0])? == self.scalar(&a[1])?
            }
            "Fn::And" => {
                let mut all = true;
                for c in list()? {
                    all &= self.truth(c, depth + 1)?;
                }
                all
            }
            "Fn::Or" => {
                let mut any = false;
                for c in list()? {
                    any |= self.truth(c, depth + 1)?;
                }
                any
            }
            "Fn::Not" => !self.truth(list()?.first().context("Fn::Not")?, depth + 1)?,
            other => bail!("{other} is not a condition function"),
        })
    }

    /// A rule function's value (the `Rules` section's own set).
    pub(super) fn rule_truth(&self, body: &Value) -> Result<bool> {
        let (name, arg) = body
            .as_object()
            .filter(|m| m.len() == 1)
            .and_then(|m| m.iter().next())
            .with_context(|| format!("not a rule function: {body}"))?;
        let list = || {
            arg.as_array()
                .with_context(|| format!("{name} takes a list"))
        };
        let strings = |v: &Value| -> Result<Vec<String>> {
            match self.resolve(v)? {
                Some(Value::Array(items)) => Ok(items.iter().map(text).collect()),
                Some(other) => Ok(vec![text(&other)]),
                None => Ok(vec![]),
            }
        };
        Ok(match name.as_str() {
            "Fn::And" => {
                let mut all = true;
                for c in list()? {
                    all &= self.rule_truth(c)?;
                }
                all
            }
            "Fn::Or" => {
                let mut any = false;
                for c in list()? {
                    any |= self.rule_truth(c)?;
                }
                any
            }
            "Fn::Not" => !self.rule_truth(list()?.first().context("Fn::Not")?)?,
            "Fn::Equals" => {
                let a = list()?;
                a.len() == 2 && self.scalar(&a[0])? == self.scalar(&a[1])?
            }
            "Fn::Contains" => {
                let a = list()?;
                strings(&a[0])?.contains(&self.scalar(&a[1])?)
            }
            "Fn::EachMemberEquals" => {
                let a = list()?;
                let value = self.scalar(&a[1])?;
                strings(&a[0])?.iter().all(|m| *m == value)
            }
            "Fn::EachMemberIn" => {
                let a = list()?;
                let allowed = strings(&a[1])?;
                strings(&a[0])?.iter().all(|m| allowed.contains(m))
            }
            other => bail!("{other} is not a rule function this reads"),
        })
    }

    fn scalar(&self, v: &Value) -> Result<String> {
        Ok(self.resolve(v)?.map(|v| text(&v)).unwrap_or_default())
    }
}

fn is_intrinsic(key: &str) -> bool {
    key == "Ref" || key == "Condition" || key.starts_with("Fn::")
}

/// A value as text: strings as they are, anything else as JSON.
pub(super) fn text(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
}
