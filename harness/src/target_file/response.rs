//! `[response]`: how a service's answers are read into outcomes
//! (docs/target-protocol.md §1.2), with `[status]` overrides.

use std::collections::BTreeMap;

use chaos_kit::protocol::Outcome;
use serde::Deserialize;
use toml::Spanned;

use super::request::header_name;
use crate::input::{Errors, FileError};
use crate::way_in::mapped::ResponseMapping;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct ResponseFile {
    #[serde(default)]
    outcome: Option<String>,
    #[serde(default)]
    receipt: Option<String>,
    #[serde(default)]
    replayed_header: Option<String>,
    #[serde(default)]
    outcomes: Option<BTreeMap<String, Outcome>>,
}

fn pointer(what: &str, text: &str) -> Result<String, String> {
    if text.starts_with('/') {
        Ok(text.to_owned())
    } else {
        Err(format!(
            "{what} '{text}' is not a JSON pointer (RFC 6901); start it with '/', e.g. \"/status\" or \"/data/id\""
        ))
    }
}

impl ResponseFile {
    fn validate(self, status: BTreeMap<u16, Outcome>) -> Result<ResponseMapping, String> {
        let outcome = match self.outcome {
            Some(outcome) => Some(pointer("response.outcome", &outcome)?),
            None => None,
        };
        let outcomes = self.outcomes.unwrap_or_default();
        if !outcomes.is_empty() && outcome.is_none() {
            return Err("[response.outcomes] names values, but response.outcome does not say where they are; add e.g. outcome = \"/status\"".into());
        }
        let receipt = match self.receipt {
            Some(receipt) => Some(pointer("response.receipt", &receipt)?),
            None => None,
        };
        let replayed_header = match self.replayed_header {
            Some(header) => header_name("response.replayed-header", &header)?,
            None => ResponseMapping::default().replayed_header,
        };
        Ok(ResponseMapping {
            status,
            outcome,
            outcomes,
            receipt,
            replayed_header,
        })
    }
}

pub(super) fn validate(
    table: Option<Spanned<ResponseFile>>,
    status: &BTreeMap<u16, Outcome>,
    errors: &Errors<'_>,
) -> Result<Option<ResponseMapping>, FileError> {
    let Some(response) = table else {
        return Ok(None);
    };
    let span = response.span();
    let response = response.into_inner().validate(status.clone());
    response
        .map(Some)
        .map_err(|message| errors.at(span, message))
}
