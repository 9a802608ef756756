//! Durations as FIS writes them (ISO 8601, `PT2M`) and as the command's flags take them (`90s`).

use std::time::Duration;

/// `PT2M`, `PT90S`, `PT1H30M`: the ISO 8601 durations FIS parameters use.
pub fn iso8601_duration(text: &str) -> Option<Duration> {
    let mut rest = text.strip_prefix("PT")?;
    let mut total = 0u64;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit())?;
        let n: u64 = rest[..digits].parse().ok()?;
        let unit = rest[digits..].chars().next()?;
        total += n * match unit {
            'H' => 3600,
            'M' => 60,
            'S' => 1,
            _ => return None,
        };
        rest = &rest[digits + 1..];
    }
    Some(Duration::from_secs(total))
}

/// `90s`, `3m`, `1h`, `0s`: durations on the command line.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, unit) = text.split_at(
        text.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len()),
    );
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?}: expected a number and a unit, e.g. 90s, 3m, 1h"))?;
    let seconds = match unit {
        "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => return Err(format!("{text:?}: the unit must be s, m or h")),
    };
    Ok(Duration::from_secs(seconds))
}
