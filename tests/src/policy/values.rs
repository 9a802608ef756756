//! Reading a template value in every branch of its conditions: where a value depends on an
//! `Fn::If`, the checks look at each value it can take ([`branches`], [`alternatives`], [`items`],
//! [`list_branches`]); and IAM's action matching.

use serde_json::Value;

/// Every value `v` can take, one per branch of its `Fn::If`s; `None` where it is absent
/// (`AWS::NoValue`, or not set at all).
pub fn branches(v: &Value) -> Vec<Option<&Value>> {
    match v.get("Fn::If").and_then(Value::as_array) {
        Some(b) if b.len() == 3 => branches(&b[1]).into_iter().chain(branches(&b[2])).collect(),
        _ if v.is_null() || reference(v) == Some("AWS::NoValue") => vec![None],
        _ => vec![Some(v)],
    }
}

/// The values `v` takes where it is present.
pub fn alternatives(v: &Value) -> Vec<&Value> {
    branches(v).into_iter().flatten().collect()
}

/// The elements of a list (or a single value), in every branch.
pub fn items(v: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for alt in alternatives(v) {
        match alt {
            Value::Array(elements) => {
                for e in elements {
                    out.extend(alternatives(e));
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// Every list `v` can be, one per combination of its `Fn::If`s (a scalar is a list of one).
/// Unlike [`items`], which merges branches, this keeps "one principal in each branch" apart from
/// "two principals".
pub fn list_branches(v: &Value) -> Vec<Vec<&Value>> {
    let mut out = Vec::new();
    for alt in alternatives(v) {
        let Value::Array(elements) = alt else {
            out.push(vec![alt]);
            continue;
        };
        let mut lists: Vec<Vec<&Value>> = vec![Vec::new()];
        for e in elements {
            let choices = branches(e);
            lists = lists
                .iter()
                .flat_map(|list| {
                    choices.iter().map(move |choice| {
                        let mut list = list.clone();
                        list.extend(*choice);
                        list
                    })
                })
                .collect();
        }
        out.extend(lists);
    }
    out
}

/// A value as text: strings as they are, intrinsics as compact JSON.
pub(super) fn text(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
}

/// `{"Fn::GetAtt": [id, attribute]}` -> id.
pub(super) fn get_att<'a>(v: &'a Value, attribute: &str) -> Option<&'a str> {
    let args = v.get("Fn::GetAtt")?.as_array()?;
    (args.len() == 2 && args[1] == attribute).then(|| args[0].as_str())?
}

pub(super) fn reference(v: &Value) -> Option<&str> {
    v.get("Ref")?.as_str()
}

/// IAM action matching: case-insensitive, `*` any run of characters, `?` one character.
pub fn action_matches(pattern: &str, action: &str) -> bool {
    fn glob(p: &[u8], a: &[u8]) -> bool {
        match (p.first(), a.first()) {
            (None, None) => true,
            (Some(b'*'), _) => glob(&p[1..], a) || (!a.is_empty() && glob(p, &a[1..])),
            (Some(b'?'), Some(_)) => glob(&p[1..], &a[1..]),
            (Some(x), Some(y)) if x.eq_ignore_ascii_case(y) => glob(&p[1..], &a[1..]),
            _ => false,
        }
    }
    glob(pattern.as_bytes(), action.as_bytes())
}
