//! CloudFormation templates as CloudFormation reads them: the YAML with its short-form tags
//! ([`Template::parse`]), the values a deployment gives every intrinsic function
//! ([`Template::resolve`] with a [`Stage`]), its conditions, and its `Rules` assertions
//! ([`Template::rules_failures`]).
//!
//! moto evaluates none of the `Rules`, skips resources (queue policies, alarms, FIS templates) and
//! stores some documents in its own shapes, so what a template *means* for a deployment (which
//! policy document a queue gets, whether CloudFormation refuses a parameter set) is computed here,
//! from the template itself, with the documented semantics of each function. The policy tests
//! evaluate these rendered documents, and the sandbox puts them where moto leaves them out.
//!
//! Physical names and ARNs are the [`Stage`]'s: given (read back from a deployment) or made up
//! the way CloudFormation makes them (`<stack>-<logical id>-<suffix>` unless the template names
//! the resource).
//!
//! [`replacements`] says what updating a stack from one template to another would replace or
//! delete, by the rule CloudFormation documents: a change to a property the resource type's
//! schema lists as `createOnlyProperties` replaces the resource. The schemas are AWS's own
//! resource provider schemas, as cfn-lint ships them ([`ResourceSchemas`]).
//!
//! Templates are parsed with `serde_norway`, the maintained fork of the archived `serde_yaml`: it
//! keeps CloudFormation's short-form tags (`!Sub`, `!GetAtt`, `!If`, …) as tagged values, which
//! [`Template::parse`] rewrites to the long form (`Fn::Sub`, …) so every reader sees one shape.

use std::collections::BTreeMap;

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Map, Value, json};

/// A template, with every intrinsic function in its long form (`{"Fn::Sub": …}`, `{"Ref": …}`).
#[derive(Debug, Clone)]
pub struct Template {
    pub name: String,
    pub doc: Value,
}

impl Template {
    pub fn parse(name: &str, yaml: &str) -> Result<Self> {
        let value: serde_norway::Value =
            serde_norway::from_str(yaml).with_context(|| format!("{name}: not YAML"))?;
        let doc = long_form(value).with_context(|| format!("{name}: not a template"))?;
        if !doc["Resources"].is_object() {
            bail!("{name}: no Resources");
        }
        Ok(Self {
            name: name.to_owned(),
            doc,
        })
    }

    /// Logical id and body of every resource.
    pub fn resources(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.doc["Resources"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(id, r)| (id.as_str(), r))
    }

    pub fn resources_of<'a>(&'a self, ty: &'a str) -> impl Iterator<Item = (&'a str, &'a Value)> {
        self.resources().filter(move |(_, r)| r["Type"] == ty)
    }

    pub fn is_a(&self, id: &str, ty: &str) -> bool {
        self.doc["Resources"][id]["Type"] == ty
    }

    pub fn resource_mut(&mut self, id: &str) -> &mut Value {
        let resource = &mut self.doc["Resources"][id];
        assert!(resource.is_object(), "{}: no resource {id}", self.name);
        resource
    }
}

/// YAML to JSON, with the short-form tags CloudFormation defines rewritten to the long form.
fn long_form(value: serde_norway::Value) -> Result<Value> {
    use serde_norway::Value as Y;
    Ok(match value {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => {
            if let Some(i) = n.as_i64() {
                json!(i)
            } else if let Some(u) = n.as_u64() {
                json!(u)
            } else {
                json!(n.as_f64())
            }
        }
        Y::String(s) => Value::String(s),
        Y::Sequence(items) => {
            Value::Array(items.into_iter().map(long_form).collect::<Result<_>>()?)
        }
        Y::Mapping(mapping) => {
            let mut object = Map::new();
            for (k, v) in mapping {
                let key = match k {
                    Y::String(s) => s,
                    Y::Number(n) => n.to_string(),
                    Y::Bool(b) => b.to_string(),
                    other => bail!("mapping key {other:?} is not a scalar"),
                };
                object.insert(key, long_form(v)?);
            }
            Value::Object(object)
        }
        Y::Tagged(tagged) => {
            let tag = tagged.tag.to_string();
            let tag = tag.trim_start_matches('!');
            let inner = long_form(tagged.value)?;
            let (name, arg) = match tag {
                "Ref" | "Condition" => (tag.to_owned(), inner),
                // `!GetAtt Res.Attr` is the only short form with a syntax of its own.
                "GetAtt" => match inner {
                    Value::String(s) => {
                        let (resource, attribute) = s
                            .split_once('.')
                            .with_context(|| format!("!GetAtt {s}: no attribute"))?;
                        ("Fn::GetAtt".into(), json!([resource, attribute]))
                    }
                    other => ("Fn::GetAtt".into(), other),
                },
                "Base64" | "Cidr" | "FindInMap" | "GetAZs" | "ImportValue" | "Join" | "Select"
                | "Split" | "Sub" | "Transform" | "And" | "Equals" | "If" | "Not" | "Or"
                | "ToJsonString" | "Length"
                // The Rules section's own functions.
                | "Contains" | "EachMemberEquals" | "EachMemberIn" | "RefAll" | "ValueOf"
                | "ValueOfAll" => (format!("Fn::{tag}"), inner),
                // A typo'd tag would otherwise become an opaque value every check ignores.
                other => bail!("unknown tag !{other}"),
            };
            json!({ name: arg })
        }
    })
}

/// What one deployment of a template gives its intrinsic functions.
#[derive(Debug, Clone)]
pub struct Stage {
    pub stack_name: String,
    pub account: String,
    pub region: String,
    /// Parameter values given; the rest take their `Default`.
    pub parameters: BTreeMap<String, String>,
    /// Exports of other stacks in the same account and region (`Fn::ImportValue`).
    pub exports: BTreeMap<String, String>,
    /// Known physical values, by logical id: `"Ref"` and attribute names (`"Arn"`, …). Anything
    /// not given is named as CloudFormation would name it.
    pub resources: BTreeMap<String, BTreeMap<String, String>>,
}

impl Stage {
    pub fn new(stack_name: &str, account: &str, region: &str) -> Self {
        Self {
            stack_name: stack_name.to_owned(),
            account: account.to_owned(),
            region: region.to_owned(),
            parameters: BTreeMap::new(),
            exports: BTreeMap::new(),
            resources: BTreeMap::new(),
        }
    }

    pub fn parameter(mut self, key: &str, value: &str) -> Self {
        self.parameters.insert(key.to_owned(), value.to_owned());
        self
    }

    pub fn export(mut self, name: &str, value: &str) -> Self {
        self.exports.insert(name.to_owned(), value.to_owned());
        self
    }

    pub fn partition(&self) -> &'static str {
        interruption_router::accounts::partition(&self.region)
    }
}

/// A template read for one [`Stage`]: its parameters and conditions decided.
pub struct Deployment<'a> {
    pub template: &'a Template,
    pub stage: &'a Stage,
    pub parameters: BTreeMap<String, String>,
    pub conditions: BTreeMap<String, bool>,
}

impl Template {
    /// The template as `stage` deploys it. Fails on a parameter without a value or an
    /// `AllowedValues`/`AllowedPattern` it breaks, as CloudFormation would.
    pub fn deploy<'a>(&'a self, stage: &'a Stage) -> Result<Deployment<'a>> {
        let mut parameters = BTreeMap::new();
        for (key, spec) in self.doc["Parameters"].as_object().into_iter().flatten() {
            let value = match stage.parameters.get(key) {
                Some(v) => v.clone(),
                None => match &spec["Default"] {
                    Value::Null => bail!("{}: parameter {key} has no value", self.name),
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                },
            };
            if let Some(allowed) = spec["AllowedValues"].as_array() {
                let ok = allowed
                    .iter()
                    .any(|a| a.as_str().map_or(a.to_string(), str::to_owned) == value);
                if !ok {
                    bail!("{}: {key}={value:?} is not one of {allowed:?}", self.name);
                }
            }
            parameters.insert(key.clone(), value);
        }
        for key in stage.parameters.keys() {
            if !parameters.contains_key(key) {
                bail!("{}: no parameter {key}", self.name);
            }
        }
        let mut deployment = Deployment {
            template: self,
            stage,
            parameters,
            conditions: BTreeMap::new(),
        };
        let names: Vec<String> = self.doc["Conditions"]
            .as_object()
            .map(|c| c.keys().cloned().collect())
            .unwrap_or_default();
        for name in names {
            let value = deployment.condition(&name, 0)?;
            deployment.conditions.insert(name, value);
        }
        Ok(deployment)
    }

    /// The `Rules` assertions CloudFormation would refuse `stage`'s parameters with: each
    /// failing assertion's rule name and description. Rule functions: `Fn::And`, `Fn::Or`,
    /// `Fn::Not`, `Fn::Equals`, `Fn::Contains`, `Fn::EachMemberEquals`, `Fn::EachMemberIn`, `Ref`.
    pub fn rules_failures(&self, stage: &Stage) -> Result<Vec<(String, String)>> {
        let deployment = self.deploy(stage)?;
        let mut failures = Vec::new();
        for (name, rule) in self.doc["Rules"].as_object().into_iter().flatten() {
            let applies = match &rule["RuleCondition"] {
                Value::Null => true,
                condition => deployment.rule_truth(condition)?,
            };
            if !applies {
                continue;
            }
            for assertion in rule["Assertions"].as_array().into_iter().flatten() {
                if !deployment.rule_truth(&assertion["Assert"])? {
                    let why = assertion["AssertDescription"].as_str().unwrap_or_default();
                    failures.push((name.clone(), why.to_owned()));
                }
            }
        }
        Ok(failures)
    }
}

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
                Value::String(self.reference(target)?)
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
            ("AWS::Events::Rule", "Ref") => named("Name")?,
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
                format!("arn:{p}:iam::{account}:role/{}", named("RoleName")?)
            }
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
            (_, "Ref") => format!("{}-{logical}-GENERATED", self.stage.stack_name),
            _ => return Err(unknown()),
        })
    }

    /// A condition by name; `depth` guards against cycles.
    fn condition(&self, name: &str, depth: usize) -> Result<bool> {
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
    fn rule_truth(&self, body: &Value) -> Result<bool> {
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

/// The `createOnlyProperties` of each resource type: AWS's resource provider schemas, as cfn-lint
/// ships them (`cfnlint/data/schemas`: `providers/<region>.json` maps a type to a schema file in
/// `resources/`).
pub struct ResourceSchemas {
    create_only: BTreeMap<String, Vec<Vec<String>>>,
}

impl ResourceSchemas {
    /// Reads the schemas of `region` from cfn-lint's data directory.
    pub fn load(schemas: &std::path::Path, region: &str) -> Result<Self> {
        let read = |path: std::path::PathBuf| -> Result<Value> {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
        };
        let providers = read(schemas.join("providers").join(format!("{region}.json")))?;
        let mut create_only = BTreeMap::new();
        for (ty, file) in providers.as_object().context("providers is a map")? {
            let Some(file) = file.as_str() else { continue };
            if !ty.starts_with("AWS::") {
                continue;
            }
            let schema = read(schemas.join("resources").join(format!("{file}.json")))?;
            let paths = schema["createOnlyProperties"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .filter_map(|p| p.strip_prefix("/properties/"))
                .map(|p| p.split('/').map(str::to_owned).collect())
                .collect();
            create_only.insert(ty.clone(), paths);
        }
        Ok(Self { create_only })
    }

    /// The properties of `ty` whose change replaces the resource (JSON pointer parts).
    pub fn create_only(&self, ty: &str) -> Option<&[Vec<String>]> {
        self.create_only.get(ty).map(Vec::as_slice)
    }
}

/// What updating a stack deployed as `old` to `new` would replace or delete, one line per
/// resource: a resource of `old` missing from `new` (or whose condition turns false) is
/// deleted, one whose type changed or whose create-only property changed is replaced. Resources
/// only `new` has are created, which loses nothing.
pub fn replacements(
    old: &Deployment<'_>,
    new: &Deployment<'_>,
    schemas: &ResourceSchemas,
) -> Result<Vec<String>> {
    let mut found = Vec::new();
    for (logical, resource) in old.template.resources() {
        let Some(before) = old.properties(logical)? else {
            continue;
        };
        let ty = resource["Type"].as_str().unwrap_or_default();
        let after = match new.template.doc["Resources"].get(logical) {
            None => None,
            Some(r) if r["Type"] != resource["Type"] => {
                found.push(format!(
                    "{logical} ({ty}) is replaced: its type becomes {}",
                    r["Type"]
                ));
                continue;
            }
            Some(_) => new.properties(logical)?,
        };
        let Some(after) = after else {
            found.push(format!("{logical} ({ty}) is deleted"));
            continue;
        };
        let paths = schemas
            .create_only(ty)
            .with_context(|| format!("no schema for {ty}"))?;
        for path in paths {
            let at = |v: &Value| {
                path.iter()
                    .try_fold(v, |v, key| v.get(key))
                    .cloned()
                    .unwrap_or(Value::Null)
            };
            let (was, becomes) = (at(&before), at(&after));
            if was != becomes {
                found.push(format!(
                    "{logical} ({ty}) is replaced: {} changes from {was} to {becomes}",
                    path.join("/")
                ));
            }
        }
    }
    Ok(found)
}

fn is_intrinsic(key: &str) -> bool {
    key == "Ref" || key == "Condition" || key.starts_with("Fn::")
}

/// A value as text: strings as they are, anything else as JSON.
fn text(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = r#"
Parameters:
  Prefix: { Type: String, Default: karpenter- }
  Mode: { Type: String, Default: Queue, AllowedValues: [Queue, Direct] }
  Accounts: { Type: String, Default: "" }
Conditions:
  QueueMode: !Equals [!Ref Mode, Queue]
  HasAccounts: !Not [!Equals [!Ref Accounts, ""]]
  Both: !And [!Condition QueueMode, !Condition HasAccounts]
Rules:
  AccountsNeedQueueMode:
    RuleCondition: !Not [!Equals [!Ref Accounts, ""]]
    Assertions:
      - Assert: !Equals [!Ref Mode, Queue]
        AssertDescription: accounts need Queue mode
  SmallNumbers:
    Assertions:
      - Assert: !Contains [["1", "2"], !Ref Mode]
        AssertDescription: never holds
Resources:
  Q:
    Type: AWS::SQS::Queue
    Condition: QueueMode
    Properties: { QueueName: !Sub "${AWS::StackName}-ingest" }
  R:
    Type: AWS::Events::Rule
    Properties: { EventBusName: hub, Name: fixed }
  Role:
    Type: AWS::IAM::Role
    Properties:
      Policies:
        - PolicyDocument:
            Statement:
              - Resource: !Sub "arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:${Prefix}*"
              - !If [HasAccounts, { Resource: !Split [",", !Sub "${Accounts},${AWS::AccountId}"] }, !Ref AWS::NoValue]
              - Resource: [!GetAtt Q.Arn, !GetAtt R.Arn, !Ref Role, !ImportValue base-Role]
Outputs:
  QueueUrl: { Condition: QueueMode, Value: !Ref Q, Export: { Name: !Sub "${AWS::StackName}-Url" } }
"#;

    #[test]
    fn intrinsics_resolve_as_cloudformation_does() {
        let t = Template::parse("t", T).unwrap();
        let stage = Stage::new("ir", "111111111111", "eu-west-1")
            .parameter("Accounts", "222222222222")
            .export("base-Role", "arn:aws:iam::111111111111:role/base");
        let d = t.deploy(&stage).unwrap();
        assert!(d.conditions["Both"]);
        let statements =
            d.property("Role", &["Policies"]).unwrap()[0]["PolicyDocument"]["Statement"].clone();
        assert_eq!(
            statements,
            json!([
                {"Resource": "arn:aws:sqs:eu-west-1:111111111111:karpenter-*"},
                {"Resource": ["222222222222", "111111111111"]},
                {"Resource": [
                    "arn:aws:sqs:eu-west-1:111111111111:ir-ingest",
                    "arn:aws:events:eu-west-1:111111111111:rule/hub/fixed",
                    "ir-Role-GENERATED",
                    "arn:aws:iam::111111111111:role/base"
                ]}
            ])
        );
        assert_eq!(
            d.exports().unwrap()["ir-Url"],
            "https://sqs.eu-west-1.amazonaws.com/111111111111/ir-ingest"
        );
        let direct = Stage::new("ir", "111111111111", "eu-west-1").parameter("Mode", "Direct");
        let d = t.deploy(&direct).unwrap();
        assert_eq!(d.properties("Q").unwrap(), None);
        assert!(d.exports().unwrap().is_empty());
        assert!(
            t.deploy(&Stage::new("ir", "1", "r").parameter("Mode", "Both"))
                .is_err()
        );
    }

    #[test]
    fn rules_refuse_what_their_assertions_refuse() {
        let t = Template::parse("t", T).unwrap();
        let failures = |stage: Stage| -> Vec<String> {
            t.rules_failures(&stage)
                .unwrap()
                .into_iter()
                .map(|(name, _)| name)
                .collect()
        };
        let base = || Stage::new("ir", "111111111111", "eu-west-1");
        assert_eq!(failures(base()), ["SmallNumbers"]);
        assert_eq!(
            failures(
                base()
                    .parameter("Accounts", "2")
                    .parameter("Mode", "Direct")
            ),
            ["AccountsNeedQueueMode", "SmallNumbers"]
        );
    }
}
