//! `[status]`: how a bare HTTP status is read when the answer's body names
//! no outcome (docs/target-protocol.md §3).

use std::collections::BTreeMap;

use chaos_kit::protocol::Outcome;
use toml::Spanned;

use crate::input::{Errors, FileError};

pub(super) fn validate(
    table: Option<Spanned<BTreeMap<String, Outcome>>>,
    errors: &Errors<'_>,
) -> Result<BTreeMap<u16, Outcome>, FileError> {
    let mut status = BTreeMap::new();
    let Some(overrides) = table else {
        return Ok(status);
    };
    let span = overrides.span();
    for (code, outcome) in overrides.into_inner() {
        let parsed = code
            .parse::<u16>()
            .ok()
            .filter(|code| (100..=599).contains(code));
        let Some(parsed) = parsed else {
            return Err(errors.at(
                span,
                format!("status '{code}' is not an HTTP status; use a number from 100 to 599, e.g. 417 = \"conflict\""),
            ));
        };
        status.insert(parsed, outcome);
    }
    Ok(status)
}
