//! `[authority]`: a service that keeps its callers in its own store is told
//! each grant and revocation by commands the user writes
//! (docs/target-protocol.md §5.1); `live::authority` runs them.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::expand_profile;
use crate::input::{Errors, FileError};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct AuthorityFile {
    #[serde(default)]
    grant: Option<Vec<String>>,
    revoke: Vec<String>,
    #[serde(default = "default_authority_timeout", with = "humantime_serde")]
    timeout: Duration,
}

fn default_authority_timeout() -> Duration {
    Duration::from_secs(10)
}

pub(super) fn validate(
    table: Option<Spanned<AuthorityFile>>,
    errors: &Errors<'_>,
) -> Result<Option<AuthorityCommands>, FileError> {
    let Some(authority) = table else {
        return Ok(None);
    };
    let span = authority.span();
    let authority = authority.into_inner();
    let commands = AuthorityCommands::new(
        authority.grant.map(expand_profile),
        expand_profile(authority.revoke),
        authority.timeout,
    )
    .map_err(|why| errors.at(span, why))?;
    Ok(Some(commands))
}

/// The placeholders a command may use, each filled in per caller.
pub(crate) const PLACEHOLDERS: [&str; 7] = [
    "token", "actor", "tenant", "scope", "active", "tool", "grant",
];

/// `[authority]`, validated: the commands as templates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorityCommands {
    /// Run for every caller before the agent's first call; optional, for a
    /// store the target seeds itself.
    pub grant: Option<Vec<String>>,
    pub revoke: Vec<String>,
    pub timeout: Duration,
}

impl AuthorityCommands {
    /// Checks the commands' placeholders; the error names the bad one and
    /// the choices.
    pub(crate) fn new(
        grant: Option<Vec<String>>,
        revoke: Vec<String>,
        timeout: Duration,
    ) -> Result<AuthorityCommands, String> {
        for (what, command) in [("grant", grant.as_ref()), ("revoke", Some(&revoke))] {
            let Some(command) = command else { continue };
            if command.first().is_none_or(String::is_empty) {
                return Err(format!(
                    "authority.{what} must name a program, e.g. {what} = [\"psql\", \"postgresql://postgres@127.0.0.1:5432/test\", \"-v\", \"token={{token}}\", \"-f\", \"{what}.sql\"]"
                ));
            }
            for arg in command {
                check_placeholders(arg).map_err(|why| format!("authority.{what}: {why}"))?;
            }
        }
        if timeout.is_zero() {
            return Err("authority.timeout must be longer than 0s".into());
        }
        Ok(AuthorityCommands {
            grant,
            revoke,
            timeout,
        })
    }
}

/// A `{word}` of lowercase letters and `_` is a placeholder and must be
/// known; any other brace is text (JSON in a SQL statement stays as written).
fn check_placeholders(arg: &str) -> Result<(), String> {
    let mut rest = arg;
    while let Some(open) = rest.find('{') {
        let tail = &rest[open + 1..];
        let Some(close) = tail.find('}') else {
            break;
        };
        let name = &tail[..close];
        let is_word = !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
        if is_word && !PLACEHOLDERS.contains(&name) {
            return Err(format!(
                "unknown placeholder '{{{name}}}' in \"{arg}\". Choose from: {}",
                PLACEHOLDERS
                    .iter()
                    .map(|name| format!("{{{name}}}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        rest = &tail[close + 1..];
    }
    Ok(())
}
