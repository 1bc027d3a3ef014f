//! `[effects]`: effects that are rows in the target's own PostgreSQL
//! database rather than requests to the provider (docs/target-protocol.md
//! §1.1).

use serde::Deserialize;
use toml::Spanned;

use crate::input::{Errors, FileError};

/// The query that lists an operation's effects in the target's PostgreSQL
/// database, one row per effect, its first column the effect's reference as
/// the target reports it (its receipt); `$1` is the operation's subject (the
/// workload's subject field, e.g. the invoice).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectsQuery {
    pub database: String,
    pub query: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct EffectsFile {
    database: String,
    query: String,
}

pub(super) fn validate(
    table: Option<Spanned<EffectsFile>>,
    errors: &Errors<'_>,
) -> Result<Option<EffectsQuery>, FileError> {
    let Some(effects) = table else {
        return Ok(None);
    };
    let span = effects.span();
    let effects = effects.into_inner();
    if !effects.database.starts_with("postgres://")
        && !effects.database.starts_with("postgresql://")
    {
        return Err(errors.at(
            span,
            format!(
                "effects.database '{}' is not a PostgreSQL connection string; write postgresql://user@host:port/database",
                effects.database
            ),
        ));
    }
    // The subject is bound as a parameter, never spliced into the text.
    let placeholders = (1..=9)
        .filter(|n| effects.query.contains(&format!("${n}")))
        .collect::<Vec<_>>();
    if placeholders != [1] {
        return Err(errors.at(
            span,
            "effects.query must use exactly one placeholder, $1, for the operation's subject, e.g. SELECT id::text FROM reminders WHERE invoice = $1".into(),
        ));
    }
    Ok(Some(EffectsQuery {
        database: effects.database,
        query: effects.query,
    }))
}
