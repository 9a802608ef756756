//! Retiring an old set-up that a CloudFormation stack owns (Karpenter's getting-started stack):
//! the stack's own template, edited, for the operator to deploy. Deleting its resources by hand
//! would be undone by the stack's next update, and deleting the stack would take Karpenter's IAM
//! with it.
//!
//! The edit is the whole change the stack needs, and a valid template: at step 6 the rules go;
//! at step 7 the queue goes too, with what exists only for it (its queue policy, outputs naming
//! it), and whatever else names the queue's ARN names the router's queue instead. In the
//! getting-started template that is the controller's interruption policy, a `!Sub |` JSON string
//! with `"${KarpenterInterruptionQueue.Arn}"`: removed with the queue it would leave a dangling
//! reference; edited, it keeps Karpenter's grant (now on the router's queue) and stays attached to
//! the role eksctl attached it to by name. Any other reference to a removed resource is refused
//! with its place, rather than guessed at. The result is parsed again and checked to name no
//! removed resource.
//!
//! The text is edited as text (a block per resource), so everything else (comments, the order,
//! `!Sub |` blocks) stays as the stack's owner wrote it; a JSON template is edited as JSON.

use std::collections::BTreeSet;

use anyhow::{Result, bail};
use serde_json::Value;

use aws_model::template::Template;

/// The edited template and what changed.
#[derive(Debug, Clone)]
pub struct Edit {
    pub template: String,
    /// Logical ids taken out (resources and outputs).
    pub removed: Vec<String>,
    /// Resources that now name the router's queue where they named the old one.
    pub retargeted: Vec<String>,
}

impl Edit {
    pub fn summary(&self) -> String {
        let mut out = format!("removes {}", self.removed.join(", "));
        if !self.retargeted.is_empty() {
            out += &format!(
                "; {} now grant(s) the router's queue instead of the old one",
                self.retargeted.join(", ")
            );
        }
        out
    }
}

/// What to take out: rules (logical ids; those already gone are skipped), and with `queue` the old
/// queue's logical id and the router's queue name that replaces it.
#[derive(Debug, Clone)]
pub struct Retire<'a> {
    pub rules: &'a [String],
    pub queue: Option<(&'a str, &'a str)>,
}

/// `template` (as CloudFormation's GetTemplate returns it) with `retire` applied.
pub fn retire(template: &str, retire: &Retire<'_>) -> Result<Edit> {
    let parsed = Template::parse("the stack's template", template)?;
    let present: BTreeSet<&str> = parsed.resources().map(|(id, _)| id).collect();
    let mut removed: Vec<String> = retire
        .rules
        .iter()
        .filter(|r| present.contains(r.as_str()))
        .cloned()
        .collect();
    let mut retargeted = Vec::new();
    let mut outputs = Vec::new();
    if let Some((queue, _)) = retire.queue {
        if present.contains(queue) {
            removed.push(queue.to_owned());
        }
        // What exists only for the queue: its policies.
        for (id, body) in parsed.resources_of("AWS::SQS::QueuePolicy") {
            let queues = body["Properties"]["Queues"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if !queues.is_empty() && queues.iter().all(|q| q["Ref"] == queue) {
                removed.push(id.to_owned());
            }
        }
    }
    let gone: BTreeSet<&str> = removed.iter().map(String::as_str).collect();
    // Every remaining reference to something removed: retargeted (the queue's ARN), dropped (an
    // output), or refused.
    for (id, body) in parsed.resources().filter(|(id, _)| !gone.contains(id)) {
        for reference in references(body) {
            if !gone.contains(reference.target.as_str()) {
                continue;
            }
            let queue_arn = retire.queue.is_some_and(|(q, _)| q == reference.target)
                && reference.attribute.as_deref() == Some("Arn")
                && !reference.depends_on;
            if !queue_arn {
                bail!(
                    "{id} refers to {} ({}), which the edit removes: edit the template by hand",
                    reference.target,
                    reference.describe()
                );
            }
            if !retargeted.contains(&id.to_owned()) {
                retargeted.push(id.to_owned());
            }
        }
    }
    for (key, output) in parsed.doc["Outputs"].as_object().into_iter().flatten() {
        if references(output)
            .iter()
            .any(|r| gone.contains(r.target.as_str()))
        {
            outputs.push(key.clone());
        }
    }
    let new_arn = retire.queue.map(|(_, name)| {
        format!("arn:${{AWS::Partition}}:sqs:${{AWS::Region}}:${{AWS::AccountId}}:{name}")
    });
    let edited = if template.trim_start().starts_with('{') {
        edit_json(
            template,
            &gone,
            &outputs,
            retire.queue.map(|(q, _)| q),
            new_arn.as_deref(),
        )?
    } else {
        edit_yaml(
            template,
            &gone,
            &outputs,
            retire.queue.map(|(q, _)| q),
            new_arn.as_deref(),
        )
    };
    check(&edited, &gone, parsed.resources().count() - gone.len())?;
    removed.extend(outputs.iter().map(|o| format!("output {o}")));
    Ok(Edit {
        template: edited,
        removed,
        retargeted,
    })
}

/// One reference a resource makes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Reference {
    target: String,
    attribute: Option<String>,
    /// Through DependsOn.
    depends_on: bool,
    /// Inside an `Fn::Sub` string.
    in_sub: bool,
}

impl Reference {
    fn describe(&self) -> String {
        match (&self.attribute, self.depends_on, self.in_sub) {
            (_, true, _) => "DependsOn".to_owned(),
            (Some(a), _, true) => format!("${{{}.{a}}} in a Sub", self.target),
            (None, _, true) => format!("${{{}}} in a Sub", self.target),
            (Some(a), _, false) => format!("GetAtt {a}"),
            (None, _, false) => "Ref".to_owned(),
        }
    }
}

/// Every reference in `value` (a resource or an output, in the long form).
fn references(value: &Value) -> Vec<Reference> {
    let mut found = Vec::new();
    walk(value, &mut found);
    for target in strings(&value["DependsOn"]) {
        found.push(Reference {
            target: target.to_owned(),
            attribute: None,
            depends_on: true,
            in_sub: false,
        });
    }
    found
}

fn walk(value: &Value, found: &mut Vec<Reference>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(target)) = map.get("Ref") {
                found.push(Reference {
                    target: target.clone(),
                    attribute: None,
                    depends_on: false,
                    in_sub: false,
                });
            }
            if let Some(get_att) = map.get("Fn::GetAtt") {
                let (target, attribute) = match get_att {
                    Value::String(s) => s
                        .split_once('.')
                        .map(|(t, a)| (t.to_owned(), a.to_owned()))
                        .unwrap_or((s.clone(), String::new())),
                    Value::Array(parts) => (
                        parts[0].as_str().unwrap_or_default().to_owned(),
                        parts
                            .get(1)
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned(),
                    ),
                    _ => (String::new(), String::new()),
                };
                found.push(Reference {
                    target,
                    attribute: Some(attribute),
                    depends_on: false,
                    in_sub: false,
                });
            }
            if let Some(sub) = map.get("Fn::Sub") {
                let text = match sub {
                    Value::String(s) => s.as_str(),
                    Value::Array(parts) => parts[0].as_str().unwrap_or_default(),
                    _ => "",
                };
                found.extend(sub_references(text));
            }
            for (key, v) in map {
                if key != "DependsOn" {
                    walk(v, found);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| walk(v, found)),
        _ => {}
    }
}

/// `${X}` and `${X.Attr}` in a Sub string (`${!…}` is a literal).
fn sub_references(text: &str) -> Vec<Reference> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else { break };
        let name = &after[..end];
        if !name.starts_with('!') && !name.contains("::") {
            let (target, attribute) = match name.split_once('.') {
                Some((t, a)) => (t.to_owned(), Some(a.to_owned())),
                None => (name.to_owned(), None),
            };
            found.push(Reference {
                target,
                attribute,
                depends_on: false,
                in_sub: true,
            });
        }
        rest = &after[end + 1..];
    }
    found
}

fn strings(value: &Value) -> Vec<&str> {
    match value {
        Value::String(s) => vec![s.as_str()],
        Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// The YAML text without the blocks of `gone` (under Resources) and `outputs` (under Outputs),
/// with the old queue's ARN replaced by `new_arn` in what remains.
fn edit_yaml(
    template: &str,
    gone: &BTreeSet<&str>,
    outputs: &[String],
    queue: Option<&str>,
    new_arn: Option<&str>,
) -> String {
    let lines: Vec<&str> = template.lines().collect();
    let mut keep = vec![true; lines.len()];
    for (section, ids) in [
        ("Resources", gone.iter().copied().collect::<Vec<_>>()),
        ("Outputs", outputs.iter().map(String::as_str).collect()),
    ] {
        for (start, end) in blocks(&lines, section, &ids) {
            keep[start..end].iter_mut().for_each(|k| *k = false);
        }
    }
    let mut text: String = lines
        .iter()
        .zip(&keep)
        .filter(|(_, k)| **k)
        .map(|(l, _)| format!("{l}\n"))
        .collect();
    if let (Some(queue), Some(arn)) = (queue, new_arn) {
        text = text
            .replace(&format!("${{{queue}.Arn}}"), arn)
            .replace(&format!("!GetAtt {queue}.Arn"), &format!("!Sub \"{arn}\""))
            .replace(
                &format!("!GetAtt \"{queue}.Arn\""),
                &format!("!Sub \"{arn}\""),
            );
    }
    text
}

/// The line ranges of the blocks of `ids` directly under top-level `section`, each with the
/// comment lines right above it.
fn blocks(lines: &[&str], section: &str, ids: &[&str]) -> Vec<(usize, usize)> {
    let indent = |l: &str| l.len() - l.trim_start().len();
    let skip = |l: &str| l.trim().is_empty() || l.trim_start().starts_with('#');
    let Some(top) = lines
        .iter()
        .position(|l| l.trim_end() == format!("{section}:"))
    else {
        return Vec::new();
    };
    let end_of_section = lines[top + 1..]
        .iter()
        .position(|l| !skip(l) && indent(l) == 0)
        .map_or(lines.len(), |p| top + 1 + p);
    let Some(child) = lines[top + 1..end_of_section]
        .iter()
        .find(|l| !skip(l))
        .map(|l| indent(l))
    else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for id in ids {
        let header = |l: &&str| {
            indent(l) == child && {
                let t = l.trim();
                t == format!("{id}:")
                    || t.strip_prefix(&format!("{id}:"))
                        .is_some_and(|r| r.trim_start().starts_with('#'))
            }
        };
        let Some(at) = lines[top + 1..end_of_section]
            .iter()
            .position(header)
            .map(|p| top + 1 + p)
        else {
            continue;
        };
        let mut start = at;
        while start > top + 1
            && lines[start - 1].trim_start().starts_with('#')
            && indent(lines[start - 1]) == child
        {
            start -= 1;
        }
        let end = lines[at + 1..end_of_section]
            .iter()
            .position(|l| !skip(l) && indent(l) <= child)
            .map_or(end_of_section, |p| at + 1 + p);
        found.push((start, end));
    }
    found
}

/// The JSON template without `gone` and `outputs`, the old queue's ARN replaced by `new_arn`.
fn edit_json(
    template: &str,
    gone: &BTreeSet<&str>,
    outputs: &[String],
    queue: Option<&str>,
    new_arn: Option<&str>,
) -> Result<String> {
    let mut doc: Value = serde_json::from_str(template)?;
    if let Some(resources) = doc["Resources"].as_object_mut() {
        resources.retain(|id, _| !gone.contains(id.as_str()));
    }
    if let Some(out) = doc["Outputs"].as_object_mut() {
        out.retain(|key, _| !outputs.contains(key));
    }
    if let (Some(queue), Some(arn)) = (queue, new_arn) {
        retarget_json(&mut doc, queue, arn);
    }
    Ok(serde_json::to_string_pretty(&doc)? + "\n")
}

fn retarget_json(value: &mut Value, queue: &str, arn: &str) {
    match value {
        Value::Object(map) => {
            let is_queue_arn = match map.get("Fn::GetAtt") {
                Some(Value::String(s)) => s == &format!("{queue}.Arn"),
                Some(Value::Array(p)) => p.len() == 2 && p[0] == queue && p[1] == "Arn",
                _ => false,
            };
            if is_queue_arn && map.len() == 1 {
                *value = serde_json::json!({ "Fn::Sub": arn });
                return;
            }
            if let Some(Value::String(sub)) = map.get_mut("Fn::Sub") {
                *sub = sub.replace(&format!("${{{queue}.Arn}}"), arn);
            }
            map.values_mut().for_each(|v| retarget_json(v, queue, arn));
        }
        Value::Array(items) => items.iter_mut().for_each(|v| retarget_json(v, queue, arn)),
        Value::String(s) if s.contains(&format!("${{{queue}.Arn}}")) => {
            // Inside a Sub given as [text, variables].
            *s = s.replace(&format!("${{{queue}.Arn}}"), arn);
        }
        _ => {}
    }
}

/// The edited template parses, names none of `gone`, and kept `expected` resources.
fn check(edited: &str, gone: &BTreeSet<&str>, expected: usize) -> Result<()> {
    let parsed = Template::parse("the edited template", edited)?;
    let kept = parsed.resources().count();
    if kept != expected {
        bail!("the edit kept {kept} resources, not {expected}: edit the template by hand");
    }
    let mut all = references(&parsed.doc["Resources"]);
    all.extend(references(&parsed.doc["Outputs"]));
    if let Some(r) = all.iter().find(|r| gone.contains(r.target.as_str())) {
        bail!(
            "the edited template still refers to {} ({}): edit it by hand",
            r.target,
            r.describe()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests;
