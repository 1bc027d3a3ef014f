//! `[model]`: the target is an agent runtime and chaos plays its model
//! (docs/runtimes.md). Selects the `model` driver of the caller.
//!
//! ```toml
//! [model]
//! api = "openai-responses"     # "openai-chat", "openai-responses" or "anthropic"
//! entry = "/runs"              # optional, the default: POST here starts (or retries) a run
//! run-timeout = "60s"          # optional: how long one run may take
//! retries = 2                  # optional: how often the user retries a run that failed
//! [model.tools]                # optional: the runtime's names for the scenario's tools
//! charge_card = "pay_invoice"
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::callers::model::wire::Api;
use crate::callers::model::Model;
use crate::callers::CallerDriver;
use crate::input::{Errors, FileError};

/// Past this a run is hung, not slow: a trial must end in minutes.
const LONGEST_RUN: Duration = Duration::from_secs(300);
const MOST_RETRIES: u32 = 10;

pub(super) fn validate(
    table: Option<Spanned<ModelFile>>,
    errors: &Errors<'_>,
) -> Result<CallerDriver, FileError> {
    let Some(model) = table else {
        return Ok(CallerDriver::default());
    };
    let span = model.span();
    model
        .into_inner()
        .validate()
        .map(CallerDriver::Model)
        .map_err(|message| errors.at(span, message))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct ModelFile {
    api: String,
    #[serde(default)]
    entry: Option<String>,
    #[serde(default, with = "humantime_serde")]
    run_timeout: Option<Duration>,
    #[serde(default)]
    retries: Option<u32>,
    #[serde(default)]
    tools: BTreeMap<String, String>,
}

impl ModelFile {
    fn validate(self) -> Result<Model, String> {
        let api = Api::parse(&self.api).ok_or_else(|| {
            format!(
                "model.api = \"{}\" is not a wire format chaos's model speaks. Choose from: {}",
                self.api,
                Api::ALL
                    .iter()
                    .map(|api| format!("\"{}\"", api.name()))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
        let entry = self.entry.unwrap_or_else(|| "/runs".into());
        if !entry.starts_with('/') || entry.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!(
                "model.entry = {entry:?} must be a path starting with '/', with no spaces, e.g. entry = \"/runs\""
            ));
        }
        let run_timeout = self.run_timeout.unwrap_or(Duration::from_secs(60));
        if run_timeout.is_zero() || run_timeout > LONGEST_RUN {
            return Err(format!(
                "model.run-timeout = \"{}\" must be longer than 0s and at most 5m, e.g. run-timeout = \"60s\"",
                humantime::format_duration(run_timeout)
            ));
        }
        let retries = self.retries.unwrap_or(2);
        if retries > MOST_RETRIES {
            return Err(format!(
                "model.retries = {retries} is more than {MOST_RETRIES}: a user who retries a run that often is a loop; write at most {MOST_RETRIES}"
            ));
        }
        if let Some((tool, name)) = self.tools.iter().find(|(_, name)| !valid_tool_name(name)) {
            return Err(format!(
                "model.tools.{tool} = {name:?}: a tool name is 1 to 64 letters, digits, '_' or '-', as the model APIs require"
            ));
        }
        Ok(Model {
            api,
            entry,
            run_timeout,
            retries,
            tools: self.tools,
        })
    }
}

/// What OpenAI and Anthropic accept as a function or tool name.
fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-')
}
