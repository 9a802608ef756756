//! Logging: what the router writes to stdout, shaped for Lambda's log-level filter.
//!
//! The base stack sets `LoggingConfig.LogFormat: JSON` and `ApplicationLogLevel`, so Lambda sets
//! `AWS_LAMBDA_LOG_FORMAT=JSON` and `AWS_LAMBDA_LOG_LEVEL=<level>` and drops every application
//! line below that level before it reaches CloudWatch Logs. Lambda reads a line's level from its
//! JSON `"level"` (TRACE, DEBUG, INFO, WARN, ERROR, FATAL); a line without a valid one, or without
//! a valid RFC 3339 `"timestamp"`, counts as INFO (AWS Lambda developer guide, "Log-level
//! filtering"). Two things follow:
//!
//! * log lines carry `timestamp` as well as `level`. lambda_runtime's default subscriber writes
//!   JSON without a time, so at WARN Lambda would read even the router's warnings as INFO and
//!   drop them;
//! * the EMF metric documents are data, not messages, but Lambda filters them like any other line.
//!   Each carries the filter's own level (INFO when the filter is more verbose), the lowest level
//!   the filter keeps, so no `ApplicationLogLevel` drops the metrics the alarms and the dashboard
//!   read. The router's own verbosity is still the log level: at WARN its per-event lines go.

use tracing::level_filters::LevelFilter;

/// Lambda's application log levels, least severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
    Fatal,
}

impl Level {
    pub const ALL: [Level; 6] = [
        Level::Trace,
        Level::Debug,
        Level::Info,
        Level::Warn,
        Level::Error,
        Level::Fatal,
    ];

    /// A level as Lambda accepts it: any case.
    pub fn parse(s: &str) -> Option<Level> {
        Level::ALL
            .into_iter()
            .find(|l| l.as_str().eq_ignore_ascii_case(s.trim()))
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Level::Trace => "TRACE",
            Level::Debug => "DEBUG",
            Level::Info => "INFO",
            Level::Warn => "WARN",
            Level::Error => "ERROR",
            Level::Fatal => "FATAL",
        }
    }

    /// What `tracing` should emit when Lambda keeps this level and above. tracing has no FATAL:
    /// the router writes nothing at that level, so it writes no log line at all.
    pub fn tracing_filter(self) -> LevelFilter {
        match self {
            Level::Trace => LevelFilter::TRACE,
            Level::Debug => LevelFilter::DEBUG,
            Level::Info => LevelFilter::INFO,
            Level::Warn => LevelFilter::WARN,
            Level::Error => LevelFilter::ERROR,
            Level::Fatal => LevelFilter::OFF,
        }
    }
}

/// How the router logs, from Lambda's variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSettings {
    /// `AWS_LAMBDA_LOG_FORMAT=JSON`: one JSON object per line (else tracing's text format).
    pub json: bool,
    /// `AWS_LAMBDA_LOG_LEVEL`: the level Lambda's filter keeps and above. `None` when Lambda
    /// filters nothing (text format, or run outside Lambda); `RUST_LOG` then decides.
    pub lambda_level: Option<Level>,
}

impl LogSettings {
    pub fn from_env() -> Self {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Self {
        let json = get("AWS_LAMBDA_LOG_FORMAT").is_some_and(|f| f.eq_ignore_ascii_case("json"));
        // Lambda only filters JSON; an unknown value is treated as its default, INFO.
        let lambda_level = json.then(|| {
            get("AWS_LAMBDA_LOG_LEVEL")
                .and_then(|l| Level::parse(&l))
                .unwrap_or(Level::Info)
        });
        Self { json, lambda_level }
    }

    /// The level the EMF documents carry: the lowest one Lambda's filter keeps.
    pub fn metrics_level(&self) -> Level {
        self.lambda_level.unwrap_or(Level::Info).max(Level::Info)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(vars: &[(&str, &str)]) -> LogSettings {
        LogSettings::from_lookup(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn metrics_carry_the_lowest_level_lambdas_filter_keeps() {
        for (level, metrics) in [
            ("TRACE", Level::Info),
            ("DEBUG", Level::Info),
            ("INFO", Level::Info),
            ("WARN", Level::Warn),
            ("error", Level::Error),
            ("FATAL", Level::Fatal),
        ] {
            let s = settings(&[
                ("AWS_LAMBDA_LOG_FORMAT", "JSON"),
                ("AWS_LAMBDA_LOG_LEVEL", level),
            ]);
            assert_eq!(s.metrics_level(), metrics, "{level}");
        }
    }

    #[test]
    fn lambda_filters_only_json_and_defaults_to_info() {
        assert_eq!(settings(&[]).lambda_level, None);
        assert_eq!(
            settings(&[("AWS_LAMBDA_LOG_LEVEL", "WARN")]).lambda_level,
            None,
            "a text-format function is not filtered"
        );
        assert_eq!(
            settings(&[("AWS_LAMBDA_LOG_FORMAT", "json")]).lambda_level,
            Some(Level::Info)
        );
        assert_eq!(Level::Fatal.tracing_filter(), LevelFilter::OFF);
    }
}
