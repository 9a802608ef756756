//! Lambda's application log-level filter, as the Lambda developer guide ("Log-level filtering")
//! states it, applied to what the local function prints: what the tests read is what CloudWatch
//! Logs would receive, not everything the process wrote.
//!
//! With the JSON log format and an application log level, Lambda keeps a line when its level is at
//! least that level. A line's level is its JSON `"level"` (TRACE, DEBUG, INFO, WARN, ERROR, FATAL;
//! the guide's own example is lower case), but a line whose `"level"` is missing or invalid counts
//! as INFO, and so does a line without a valid RFC 3339 `"timestamp"`. A line that is not a JSON
//! object has no level either: the guide does not say, and it is read as INFO here, like a
//! missing level. The default application log level with the JSON format is INFO.

use router_core::{event::is_rfc3339, logging::Level};
use serde_json::Value;

/// The level Lambda gives a line.
pub fn level_of(line: &str) -> Level {
    let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(line) else {
        return Level::Info;
    };
    let timestamped = fields
        .get("timestamp")
        .and_then(Value::as_str)
        .is_some_and(is_rfc3339);
    let level = fields
        .get("level")
        .and_then(Value::as_str)
        .and_then(Level::parse);
    match level {
        Some(level) if timestamped => level,
        _ => Level::Info,
    }
}

/// Whether Lambda sends the line to CloudWatch Logs when the application log level is `threshold`.
pub fn kept(line: &str, threshold: Level) -> bool {
    level_of(line) >= threshold
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_counts_as_info_unless_it_has_a_valid_level_and_timestamp() {
        let at = r#""timestamp":"2026-11-23T15:57:00.123456Z""#;
        assert_eq!(
            level_of(&format!(r#"{{"level":"WARN",{at}}}"#)),
            Level::Warn
        );
        assert_eq!(
            level_of(&format!(r#"{{"level":"debug",{at}}}"#)),
            Level::Debug
        );
        // No timestamp (lambda_runtime's default subscriber), a bad one, no level, a bad level,
        // not JSON: all INFO.
        assert_eq!(level_of(r#"{"level":"WARN","fields":{}}"#), Level::Info);
        assert_eq!(
            level_of(r#"{"level":"ERROR","timestamp":"yesterday"}"#),
            Level::Info
        );
        assert_eq!(level_of(&format!(r#"{{"_aws":{{}},{at}}}"#)), Level::Info);
        assert_eq!(
            level_of(&format!(r#"{{"level":"NOTICE",{at}}}"#)),
            Level::Info
        );
        assert_eq!(level_of("plain text"), Level::Info);
    }

    #[test]
    fn lines_below_the_level_are_dropped() {
        let warn = r#"{"level":"WARN","timestamp":"2026-11-23T15:57:00Z"}"#;
        let untagged = r#"{"_aws":{"CloudWatchMetrics":[]}}"#;
        assert!(kept(warn, Level::Warn));
        assert!(!kept(warn, Level::Error));
        assert!(kept(untagged, Level::Info));
        assert!(
            !kept(untagged, Level::Warn),
            "an EMF document without a level is dropped at WARN"
        );
    }
}
