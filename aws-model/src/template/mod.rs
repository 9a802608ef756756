//! CloudFormation templates as CloudFormation reads them: the YAML with its short-form tags
//! ([`Template::parse`]), the values a deployment gives every intrinsic function
//! (`Template::resolve` with a [`Stage`]), its conditions, and its `Rules` assertions
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

mod intrinsics;
mod replacements;
#[cfg(test)]
mod tests;

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, LazyLock, Mutex},
};

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value, json};

pub use self::replacements::{ResourceSchemas, replacements};
/// A template, with every intrinsic function in its long form (`{"Fn::Sub": …}`, `{"Ref": …}`).
#[derive(Debug, Clone)]
pub struct Template {
    pub name: String,
    pub doc: Value,
}

impl Template {
    /// [`Template::parse`], once per process for each name and text: the model deploys the same
    /// few templates in every test, and parsing them again each time was a third of the time of
    /// routerctl's unit tests (9.4 s against 5.8 s).
    pub fn parse_shared(name: &str, yaml: &str) -> Result<Arc<Self>> {
        type Parsed = HashMap<(String, String), Arc<Template>>;
        static PARSED: LazyLock<Mutex<Parsed>> = LazyLock::new(Mutex::default);
        let key = (name.to_owned(), yaml.to_owned());
        if let Some(known) = PARSED.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return Ok(known.clone());
        }
        let parsed = Arc::new(Self::parse(name, yaml)?);
        (PARSED.lock().unwrap_or_else(|e| e.into_inner())).insert(key, parsed.clone());
        Ok(parsed)
    }

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
        router_core::accounts::partition(&self.region)
    }

    /// This stage as an update of the stack `before` to template `new` gives it: `aws
    /// cloudformation deploy` keeps every parameter the stack was deployed with (UsePreviousValue
    /// for those not given, defaults included) that `new` still declares; a parameter new to
    /// the template takes its default.
    pub fn updating(&self, before: &Deployment<'_>, new: &Template) -> Stage {
        let mut kept = self.clone();
        for (key, value) in &before.parameters {
            if new.doc["Parameters"].get(key).is_some() {
                kept.parameters.entry(key.clone()).or_insert(value.clone());
            }
        }
        kept
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
            // CloudFormation matches the whole value (the pattern is anchored).
            if let Some(pattern) = spec["AllowedPattern"].as_str() {
                let matches = matches_whole(pattern, &value)
                    .with_context(|| format!("{}: {key}'s AllowedPattern", self.name))?;
                if !matches {
                    let why = spec["ConstraintDescription"].as_str().unwrap_or(pattern);
                    bail!(
                        "{}: {key}={value:?} does not match its pattern: {why}",
                        self.name
                    );
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

/// Whether `pattern` (a parameter's AllowedPattern, which CloudFormation anchors) matches all of
/// `value`. Each pattern is compiled once per process: a model walk deploys the same templates
/// thousands of times, and compiling them again led a profile of routerctl's unit tests.
fn matches_whole(pattern: &str, value: &str) -> Result<bool> {
    static COMPILED: Mutex<BTreeMap<String, regex_lite::Regex>> = Mutex::new(BTreeMap::new());
    let mut compiled = COMPILED.lock().unwrap_or_else(|e| e.into_inner());
    if !compiled.contains_key(pattern) {
        let anchored = regex_lite::Regex::new(&format!("^(?:{pattern})$"))?;
        compiled.insert(pattern.to_owned(), anchored);
    }
    Ok(compiled[pattern].is_match(value))
}
