//! `[provider]`: which API chaos's provider speaks to the target
//! ([`crate::provider_api`]); each API refuses what it cannot be combined
//! with.

use serde::Deserialize;
use toml::Spanned;

use crate::input::{Errors, FileError};
use crate::provider_api::{FileFacts, ProviderApi};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct ProviderFile {
    #[serde(default)]
    api: ProviderApi,
}

pub(super) fn validate(
    table: Option<Spanned<ProviderFile>>,
    effects_in_database: bool,
    errors: &Errors<'_>,
) -> Result<ProviderApi, FileError> {
    let Some(provider) = table else {
        return Ok(ProviderApi::default());
    };
    let span = provider.span();
    let api = provider.into_inner().api;
    api.validate(&FileFacts {
        effects_in_database,
    })
    .map_err(|message| errors.at(span, message))?;
    Ok(api)
}
