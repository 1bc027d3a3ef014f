//! `[agent]`: the live agent's retry budget against this target
//! (docs/target-protocol.md §1.3).

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::input::{Errors, FileError};
use crate::plan::AgentBudget;

pub(super) fn validate(
    table: Option<Spanned<AgentFile>>,
    errors: &Errors<'_>,
) -> Result<AgentBudget, FileError> {
    let Some(agent) = table else {
        return Ok(AgentBudget::default());
    };
    let span = agent.span();
    let agent = agent.into_inner().validate();
    agent.map_err(|message| errors.at(span, message))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct AgentFile {
    #[serde(default, with = "humantime_serde")]
    retry_for: Option<Duration>,
    #[serde(default)]
    backoff: Option<String>,
    #[serde(default, with = "humantime_serde")]
    timeout: Option<Duration>,
}

/// Past these the target is hung, not slow: a trial must end in minutes.
const LONGEST_RETRY_FOR: Duration = Duration::from_secs(600);
const LONGEST_TIMEOUT: Duration = Duration::from_secs(60);

impl AgentFile {
    fn validate(self) -> Result<AgentBudget, String> {
        let retry_for = match self.retry_for {
            Some(retry_for) if retry_for.is_zero() || retry_for > LONGEST_RETRY_FOR => {
                return Err(format!(
                    "agent.retry-for = \"{}\" must be longer than 0s and at most 10m, e.g. retry-for = \"10s\"",
                    humantime::format_duration(retry_for)
                ))
            }
            other => other,
        };
        let timeout = match self.timeout {
            Some(timeout) if timeout.is_zero() || timeout > LONGEST_TIMEOUT => {
                return Err(format!(
                    "agent.timeout = \"{}\" must be longer than 0s and at most 1m, e.g. timeout = \"5s\"",
                    humantime::format_duration(timeout)
                ))
            }
            other => other,
        };
        let backoff = match self.backoff {
            Some(text) => Some(backoff_range(&text)?),
            None => None,
        };
        Ok(AgentBudget {
            retry_for,
            backoff,
            timeout,
        })
    }
}

/// `"20ms..60ms"` (drawn uniformly from the range) or `"50ms"` (always).
fn backoff_range(text: &str) -> Result<(Duration, Duration), String> {
    let wrong = |why: String| {
        format!("agent.backoff = \"{text}\": {why}; write a range like \"20ms..60ms\", or one pause like \"50ms\"")
    };
    let (low, high) = text.split_once("..").unwrap_or((text, text));
    let parse = |part: &str| {
        humantime::parse_duration(part.trim())
            .map_err(|error| wrong(format!("'{}' is not a duration ({error})", part.trim())))
    };
    let (low, high) = (parse(low)?, parse(high)?);
    if low > high {
        return Err(wrong("the shorter pause comes first".into()));
    }
    if high > LONGEST_TIMEOUT {
        return Err(wrong("a pause longer than 1m is a hung agent".into()));
    }
    Ok((low, high))
}
