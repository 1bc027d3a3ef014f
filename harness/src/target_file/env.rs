//! `[env]`: variables added to the `CHAOS_*` environment, each filled in
//! with the run's facts at every launch.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use toml::Spanned;

use super::{Retention, RESERVED_PREFIX};
use crate::braces::{self, Piece};
use crate::input::{Errors, FileError};

pub(super) fn validate(
    table: Option<Spanned<BTreeMap<String, Spanned<String>>>>,
    retention: Option<&Retention>,
    errors: &Errors<'_>,
) -> Result<BTreeMap<String, EnvValue>, FileError> {
    let Some(env) = table else {
        return Ok(BTreeMap::new());
    };
    let span = env.span();
    let env = env.into_inner();
    if let Some(reserved) = env.keys().find(|key| key.starts_with(RESERVED_PREFIX)) {
        return Err(errors.at(
            span,
            format!(
                "env.{reserved}: chaos sets the CHAOS_* variables itself (see docs/target-protocol.md); remove it"
            ),
        ));
    }
    let mut values = BTreeMap::new();
    for (name, value) in env {
        let span = value.span();
        let value = EnvValue::parse(value.get_ref())
            .map_err(|message| errors.at(span.clone(), format!("env.{name}: {message}")))?;
        if let Some(fact) = value.needs_retention() {
            let Some(retention) = retention else {
                return Err(errors.at(
                    span,
                    format!("env.{name}: {{{}}} is the period in [retention], and this file has none; add [retention] or remove the placeholder", fact.name()),
                ));
            };
            if fact == Fact::RetentionSeconds && retention.period.subsec_nanos() != 0 {
                return Err(errors.at(
                    span,
                    format!("env.{name}: {{retention.seconds}} needs a period of whole seconds, and [retention] period is {}; use {{retention.ms}}", humantime::format_duration(retention.period)),
                ));
            }
        }
        values.insert(name, value);
    }
    Ok(values)
}

/// A run fact an `[env]` value may use, as `{name}`: what a library reads
/// under its own name (a TTL in seconds, a data directory, a port), so its
/// target file needs no shell wrapper (issue 13). Each is also a `CHAOS_*`
/// variable, in the protocol's own unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fact {
    /// The target's retention for this run in whole seconds (the declared
    /// period, or the shortened one of a live clock jump); needs `[retention]`.
    RetentionSeconds,
    /// The same in milliseconds (`CHAOS_RETENTION_MS`).
    RetentionMs,
    /// The trial's durable directory (`CHAOS_STATE_DIR`).
    StateDir,
    /// Where to listen: `127.0.0.1:PORT` (`CHAOS_LISTEN_ADDR`), and its parts.
    ListenAddr,
    ListenHost,
    ListenPort,
    /// `http://127.0.0.1:PORT` of the provider and of the authority
    /// (`smtp://` for an SMTP provider).
    ProviderUrl,
    AuthorityUrl,
    /// `http://127.0.0.1:PORT` of chaos's scripted model (`CHAOS_MODEL_URL`),
    /// for a runtime's base URL setting under `[model]`.
    ModelUrl,
    /// The wire format chaos's model speaks (`[model] api`: `openai-chat`,
    /// `openai-responses` or `anthropic`), for a runtime that reads which
    /// SDK to use; empty without `[model]`.
    ModelApi,
    /// The provider's host and port apart: what an SMTP client is configured with.
    ProviderHost,
    ProviderPort,
    /// How long one upstream call may take (`CHAOS_UPSTREAM_TIMEOUT_MS`), in
    /// milliseconds and in seconds (a decimal, e.g. `0.5`).
    UpstreamTimeoutMs,
    UpstreamTimeoutSeconds,
}

impl Fact {
    pub const ALL: [Fact; 14] = [
        Fact::RetentionSeconds,
        Fact::RetentionMs,
        Fact::StateDir,
        Fact::ListenAddr,
        Fact::ListenHost,
        Fact::ListenPort,
        Fact::ProviderUrl,
        Fact::AuthorityUrl,
        Fact::ModelUrl,
        Fact::ModelApi,
        Fact::ProviderHost,
        Fact::ProviderPort,
        Fact::UpstreamTimeoutMs,
        Fact::UpstreamTimeoutSeconds,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Fact::RetentionSeconds => "retention.seconds",
            Fact::RetentionMs => "retention.ms",
            Fact::StateDir => "state_dir",
            Fact::ListenAddr => "listen.addr",
            Fact::ListenHost => "listen.host",
            Fact::ListenPort => "listen.port",
            Fact::ProviderUrl => "provider.url",
            Fact::AuthorityUrl => "authority.url",
            Fact::ModelUrl => "model.url",
            Fact::ModelApi => "model.api",
            Fact::ProviderHost => "provider.host",
            Fact::ProviderPort => "provider.port",
            Fact::UpstreamTimeoutMs => "upstream_timeout.ms",
            Fact::UpstreamTimeoutSeconds => "upstream_timeout.seconds",
        }
    }

    fn value(self, facts: &RunFacts<'_>) -> String {
        let (host, port) = facts
            .listen_addr
            .rsplit_once(':')
            .unwrap_or((facts.listen_addr, ""));
        let provider_addr = facts
            .provider_url
            .split_once("://")
            .map_or(facts.provider_url, |(_, addr)| addr);
        let (provider_host, provider_port) = provider_addr
            .rsplit_once(':')
            .unwrap_or((provider_addr, ""));
        match self {
            // Rounded up: the live periods are whole seconds, and a declared
            // one must be (checked when the file is read).
            Fact::RetentionSeconds => facts
                .retention
                .map(|period| period.as_millis().div_ceil(1000).to_string())
                .unwrap_or_default(),
            Fact::RetentionMs => facts
                .retention
                .map(|period| period.as_millis().to_string())
                .unwrap_or_default(),
            Fact::StateDir => facts.state_dir.display().to_string(),
            Fact::ListenAddr => facts.listen_addr.to_owned(),
            Fact::ListenHost => host.to_owned(),
            Fact::ListenPort => port.to_owned(),
            Fact::ProviderUrl => facts.provider_url.to_owned(),
            Fact::AuthorityUrl => facts.authority_url.to_owned(),
            Fact::ModelUrl => facts.model_url.to_owned(),
            Fact::ModelApi => facts.model_api.to_owned(),
            Fact::ProviderHost => provider_host.to_owned(),
            Fact::ProviderPort => provider_port.to_owned(),
            Fact::UpstreamTimeoutMs => facts.upstream_timeout.as_millis().to_string(),
            Fact::UpstreamTimeoutSeconds => {
                format!("{}", facts.upstream_timeout.as_secs_f64())
            }
        }
    }
}

/// The facts of one launch of the target, for its `[env]` values.
#[derive(Debug, Clone)]
pub(crate) struct RunFacts<'a> {
    pub listen_addr: &'a str,
    pub provider_url: &'a str,
    pub authority_url: &'a str,
    pub model_url: &'a str,
    pub model_api: &'a str,
    pub state_dir: &'a Path,
    /// The target's retention in force, when the file declares one.
    pub retention: Option<Duration>,
    pub upstream_timeout: Duration,
}

/// An `[env]` value: text with `{fact}` placeholders (`{{` and `}}` for a
/// literal brace), checked when the file is read and filled in at launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvValue(Vec<Piece<Fact>>);

impl EnvValue {
    /// Reads `text`; the error names the bad placeholder and the choices.
    fn parse(text: &str) -> Result<EnvValue, String> {
        let pieces = braces::parse(text, |name| {
            Fact::ALL
                .into_iter()
                .find(|fact| fact.name() == name)
                .ok_or_else(|| {
                    format!(
                        "unknown placeholder '{{{name}}}'. Choose from: {}",
                        Fact::ALL
                            .iter()
                            .map(|fact| format!("{{{}}}", fact.name()))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                })
        })?;
        Ok(EnvValue(pieces))
    }

    /// A value with no placeholders, as written.
    #[cfg(test)]
    pub(crate) fn literal(text: &str) -> EnvValue {
        EnvValue(vec![Piece::Text(text.to_owned())])
    }

    /// The first retention fact used, if any: those need `[retention]`.
    fn needs_retention(&self) -> Option<Fact> {
        self.0.iter().find_map(|piece| match piece {
            Piece::Placeholder(fact @ (Fact::RetentionSeconds | Fact::RetentionMs)) => Some(*fact),
            _ => None,
        })
    }

    /// The value's literal text, run by run (placeholders are chaos's own
    /// facts): what the user wrote and may be secret, masked in reports.
    pub(crate) fn literal_text(&self) -> impl Iterator<Item = &str> {
        self.0.iter().filter_map(|piece| match piece {
            Piece::Text(text) => Some(text.as_str()),
            Piece::Placeholder(_) => None,
        })
    }

    /// The value for one launch.
    pub(crate) fn expand(&self, facts: &RunFacts<'_>) -> String {
        self.0
            .iter()
            .map(|piece| match piece {
                Piece::Text(text) => text.clone(),
                Piece::Placeholder(fact) => fact.value(facts),
            })
            .collect()
    }
}
