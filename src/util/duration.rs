//! Durations as kruntimes' flags and Runtime Pod templates spell them: kubectl-style `30s`,
//! `2m`, `1h30m`, or plain seconds. Owns the parsing and its error message, nothing else.

use std::time::Duration;

/// Parses a kubectl-style duration: `30s`, `2m`, `1h30m`, or plain seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    if let Ok(secs) = s.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    let parsed: jiff::SignedDuration = s
        .parse()
        .map_err(|_| format!("{s:?} is not a duration; use a value such as 30s, 2m or 1h"))?;
    parsed
        .try_into()
        .map_err(|_| format!("{s:?} is negative; use a positive duration such as 30s"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_accept_kubectl_forms_and_refuse_nonsense() {
        assert_eq!(parse_duration("60s"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert!(
            parse_duration("soon")
                .unwrap_err()
                .contains("\"soon\" is not a duration")
        );
    }
}
