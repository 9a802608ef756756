//! IAM's condition operators against the request context the caller states (String*, Arn*,
//! Bool, `…IfExists`; a key not stated is absent), and the pattern matching that actions,
//! resources and ArnLike share ([`glob`]). A statement's condition block decides [`Match`]: yes,
//! no, or undetermined with the reason.

use serde_json::Value;

/// Whether a statement, or a condition of it, applies to a request: undetermined with the reason
/// where the evaluator cannot tell.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Match {
    Yes,
    No,
    Unknown(String),
}

/// All condition blocks must hold. A No anywhere decides; otherwise an Unknown is reported.
pub(super) fn conditions(block: &Value, context: &[(&str, &str)]) -> Match {
    let Some(block) = block.as_object() else {
        return Match::Yes;
    };
    let mut unknown = None;
    for (operator, keys) in block {
        let Some(keys) = keys.as_object() else {
            return Match::Unknown(format!("condition {operator} is not an object"));
        };
        for (key, expected) in keys {
            match condition(operator, key, &strings(expected), context) {
                Match::No => return Match::No,
                Match::Unknown(why) => unknown = Some(why),
                Match::Yes => {}
            }
        }
    }
    unknown.map_or(Match::Yes, Match::Unknown)
}

fn condition(operator: &str, key: &str, expected: &[String], context: &[(&str, &str)]) -> Match {
    let (operator, if_exists) = match operator.strip_suffix("IfExists") {
        Some(op) => (op, true),
        None => (operator, false),
    };
    let Some(actual) = context
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, v)| *v)
    else {
        // A key the request does not carry: "If the policy condition requires that the key is
        // not matched, such as StringNotLike or ArnNotLike, and the right key is not present, the
        // condition is true" (IAM condition operators reference); so is any ...IfExists. A
        // positive operator would be false, but the caller may simply not have stated the key,
        // so that is left undetermined rather than guessed.
        return if if_exists || operator.contains("Not") {
            Match::Yes
        } else {
            Match::Unknown(format!(
                "{operator} on {key}, which this check does not model"
            ))
        };
    };
    let any = |f: &dyn Fn(&str) -> bool| expected.iter().any(|e| f(e));
    let result = match operator {
        "StringEquals" => any(&|e| e == actual),
        "StringNotEquals" => !any(&|e| e == actual),
        "StringEqualsIgnoreCase" => any(&|e| e.eq_ignore_ascii_case(actual)),
        "StringNotEqualsIgnoreCase" => !any(&|e| e.eq_ignore_ascii_case(actual)),
        "StringLike" => any(&|e| glob(e, actual)),
        "StringNotLike" => !any(&|e| glob(e, actual)),
        "ArnEquals" | "ArnLike" => any(&|e| arn_like(e, actual)),
        "ArnNotEquals" | "ArnNotLike" => !any(&|e| arn_like(e, actual)),
        "Bool" => any(&|e| e.eq_ignore_ascii_case(actual)),
        other => return Match::Unknown(format!("condition operator {other} is not modelled")),
    };
    if result { Match::Yes } else { Match::No }
}

/// IAM's ArnLike: each of the six `:`-separated fields is matched on its own.
pub(super) fn arn_like(pattern: &str, arn: &str) -> bool {
    let p: Vec<&str> = pattern.splitn(6, ':').collect();
    let a: Vec<&str> = arn.splitn(6, ':').collect();
    p.len() == a.len() && p.iter().zip(&a).all(|(p, a)| glob(p, a))
}

/// One element of a pattern: a character, `?` (any one) or `*` (any run).
#[derive(Clone, Copy, PartialEq)]
enum Token {
    Char(char),
    One,
    Run,
}

/// A pattern's elements: `*` and `?` are wildcards, and IAM's special policy variables `${*}`,
/// `${?}` and `${$}` stand for the literal character (IAM user guide, "IAM policy elements:
/// Variables and tags", special characters).
fn tokens(pattern: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut rest = pattern;
    while let Some(c) = rest.chars().next() {
        if let Some(literal) = ["${*}", "${?}", "${$}"]
            .iter()
            .find(|v| rest.starts_with(**v))
        {
            out.push(Token::Char(literal.as_bytes()[2] as char));
            rest = &rest[literal.len()..];
            continue;
        }
        out.push(match c {
            '*' => Token::Run,
            '?' => Token::One,
            c => Token::Char(c),
        });
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// `*` matches any run of characters, `?` one character; `${*}`, `${?}` and `${$}` match
/// themselves as one character.
pub fn glob(pattern: &str, text: &str) -> bool {
    // Most patterns are literal (an action, an ARN): equality is the whole answer.
    if !pattern.contains(['*', '?', '$']) {
        return pattern == text;
    }
    let (p, t): (Vec<Token>, Vec<char>) = (tokens(pattern), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == Token::One || p[pi] == Token::Char(t[ti])) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == Token::Run {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == Token::Run)
}

/// A policy element that may be a string, a list, or a scalar.
pub fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::Null => vec![],
        Value::String(s) => vec![s.clone()],
        Value::Array(list) => list.iter().flat_map(strings).collect(),
        other => vec![other.to_string()],
    }
}
