//! EventBridge event patterns, matched as EventBridge matches them (EventBridge user guide,
//! "Event patterns"): every field the pattern names must be in the event; a list of values
//! matches when the event's value (or any element of an event's list) equals one of them or
//! passes one of the content filters in it; a nested object matches the nested event object.
//!
//! The content filters read here are `prefix`, `suffix`, `anything-but` (a value, a list, or a
//! `prefix`), `exists` and `equals-ignore-case`. Any other filter makes the answer
//! [`Matched::Unknown`] rather than a guess: `adopt` reports such a rule instead of deciding what
//! it selects. moto implements patterns too, but a test of what AWS delivers should not rest on
//! the emulator's reading.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Matched {
    Yes,
    No,
    /// The pattern uses a filter this module does not read.
    Unknown(String),
}

impl Matched {
    pub fn is_yes(&self) -> bool {
        *self == Matched::Yes
    }
}

/// Whether `event` matches `pattern`.
pub fn matches(pattern: &Value, event: &Value) -> Matched {
    let Some(fields) = pattern.as_object() else {
        return Matched::Unknown(format!("pattern is not an object: {pattern}"));
    };
    let mut unknown = None;
    for (key, expected) in fields {
        let actual = event.get(key);
        let result = match expected {
            Value::Object(_) => match actual {
                Some(nested @ Value::Object(_)) => matches(expected, nested),
                _ => Matched::No,
            },
            Value::Array(allowed) => field_matches(allowed, actual),
            other => Matched::Unknown(format!("{key}: {other} is neither a list nor an object")),
        };
        match result {
            Matched::No => return Matched::No,
            Matched::Unknown(why) => unknown = Some(why),
            Matched::Yes => {}
        }
    }
    unknown.map_or(Matched::Yes, Matched::Unknown)
}

/// One field: any allowed entry matches the value (or any element of a list value).
fn field_matches(allowed: &[Value], actual: Option<&Value>) -> Matched {
    let values: Vec<&Value> = match actual {
        Some(Value::Array(items)) => items.iter().collect(),
        Some(v) => vec![v],
        None => vec![],
    };
    let mut unknown = None;
    for entry in allowed {
        let result = match entry {
            Value::Object(filter) => filter_matches(filter, actual, &values),
            literal => {
                if values.contains(&literal) {
                    Matched::Yes
                } else {
                    Matched::No
                }
            }
        };
        match result {
            Matched::Yes => return Matched::Yes,
            Matched::Unknown(why) => unknown = Some(why),
            Matched::No => {}
        }
    }
    unknown.map_or(Matched::No, Matched::Unknown)
}

fn filter_matches(
    filter: &serde_json::Map<String, Value>,
    actual: Option<&Value>,
    values: &[&Value],
) -> Matched {
    let Some((name, arg)) = filter.iter().next().filter(|_| filter.len() == 1) else {
        return Matched::Unknown(format!("filter {filter:?}"));
    };
    let strings = || values.iter().filter_map(|v| v.as_str());
    let yes = |b: bool| if b { Matched::Yes } else { Matched::No };
    match (name.as_str(), arg) {
        ("exists", Value::Bool(wanted)) => yes(actual.is_some() == *wanted),
        ("prefix", Value::String(p)) => yes(strings().any(|s| s.starts_with(p.as_str()))),
        ("suffix", Value::String(p)) => yes(strings().any(|s| s.ends_with(p.as_str()))),
        ("equals-ignore-case", Value::String(p)) => {
            yes(strings().any(|s| s.eq_ignore_ascii_case(p)))
        }
        ("anything-but", Value::Object(inner)) => match inner.get("prefix") {
            Some(Value::String(p)) if inner.len() == 1 => {
                yes(!values.is_empty() && strings().all(|s| !s.starts_with(p.as_str())))
            }
            _ => Matched::Unknown(format!("anything-but {inner:?}")),
        },
        ("anything-but", excluded) => {
            let excluded: Vec<&Value> = match excluded {
                Value::Array(list) => list.iter().collect(),
                one => vec![one],
            };
            yes(!values.is_empty() && values.iter().all(|v| !excluded.contains(v)))
        }
        (other, _) => Matched::Unknown(format!("the {other} filter")),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn event() -> Value {
        json!({"account": "111111111111", "source": "aws.ec2",
               "detail-type": "EC2 Instance State-change Notification",
               "resources": ["arn:aws:ec2:us-east-1:111111111111:instance/i-1"],
               "detail": {"instance-id": "i-1", "state": "stopping"}})
    }

    #[test]
    fn fields_lists_and_nesting() {
        let p = json!({"source": ["aws.ec2"], "detail": {"state": ["stopping", "terminated"]}});
        assert!(matches(&p, &event()).is_yes());
        let other_account = json!({"account": ["222222222222"], "source": ["aws.ec2"]});
        assert_eq!(matches(&other_account, &event()), Matched::No);
        let missing = json!({"detail": {"service": ["EC2"]}});
        assert_eq!(matches(&missing, &event()), Matched::No);
        // A list in the event matches when any element does.
        let resources = json!({"resources": [{"prefix": "arn:aws:ec2:us-east-1:111111111111:"}]});
        assert!(matches(&resources, &event()).is_yes());
    }

    #[test]
    fn content_filters() {
        assert!(matches(&json!({"source": [{"prefix": "aws."}]}), &event()).is_yes());
        assert!(
            matches(
                &json!({"detail": {"state": [{"anything-but": ["running", "pending"]}]}}),
                &event()
            )
            .is_yes()
        );
        assert_eq!(
            matches(
                &json!({"detail": {"state": [{"anything-but": "stopping"}]}}),
                &event()
            ),
            Matched::No
        );
        assert!(
            matches(
                &json!({"detail": {"instance-id": [{"exists": true}]}}),
                &event()
            )
            .is_yes()
        );
        assert_eq!(
            matches(&json!({"detail": {"error": [{"exists": true}]}}), &event()),
            Matched::No
        );
        assert!(matches!(
            matches(
                &json!({"detail": {"state": [{"wildcard": "stop*"}]}}),
                &event()
            ),
            Matched::Unknown(_)
        ));
    }
}
