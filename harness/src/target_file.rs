//! Target files: how to run a live target. Strict TOML in, a validated
//! [`TargetFile`] out, with the same errors as scenarios (file, line, the
//! valid choices).
//!
//! ```toml
//! name = "postgres-ledger"            # optional: defaults to the directory's name
//! summary = "the ledger on PostgreSQL"
//! build = ["cargo", "build", "--quiet", "--workspace", "--bins", "--profile", "{cargo-profile}"]
//! command = ["../../target/{profile}/postgres-ledger"]  # {profile}: chaos's own, debug or release
//! workdir = "."                       # optional: relative to this file
//! ready-timeout = "10s"               # optional: GET /healthz must answer 200 by then
//! fresh-process = false               # optional: true starts the target anew for every trial
//! parallel = 1                        # optional: how many trials may run at once, each on its own process
//!
//! [env]                               # optional: added to the CHAOS_* variables
//! DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/test"
//! IDEMPOTENCY_TTL_SECONDS = "{retention.seconds}"   # run facts: see [`Fact`]
//!
//! [status]                            # optional: overrides of the status mapping
//! 417 = "conflict"
//!
//! [retention]                         # optional: omit to promise to remember forever
//! period = "7days"                    # required in [retention]
//! after = "new-operation"             # optional, the default; or "refuse", or "reconcile"
//! shorten = true                      # optional, default true: it reads CHAOS_RETENTION_MS
//!
//! [effects]                           # optional: effects are rows in the target's database
//! database = "postgresql://postgres@127.0.0.1:5432/test"
//! query = "SELECT id::text FROM reminders WHERE invoice = $1"
//!
//! [authority]                         # optional: the target keeps its callers in its own store
//! grant = ["psql", "...", "-qc", "INSERT INTO api_keys VALUES ('{token}', '{tenant}', '{scope}')"]
//! revoke = ["psql", "...", "-qc", "UPDATE api_keys SET active = {active} WHERE token = '{token}'"]
//! [provider]                          # optional: the API chaos's provider speaks
//! api = "smtp"                        # "chaos" (default: HTTP, docs/target-protocol.md §4), "stripe" or "smtp"
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chaos_kit::protocol::Outcome;
use chaos_kit::target::{AfterRetention, TargetInfo};
use serde::Deserialize;
use toml::Spanned;

use crate::braces::{self, Piece};
use crate::input::{self, FileError};
use crate::roles::mapping::{
    BodyFormat, Mapping, Place, RequestMapping, ResponseMapping, Template, TokenPlace,
};

/// The file name of a directory's main target file; variants (weakened modes)
/// sit beside it as `<variant>.target.toml`.
pub(crate) const FILE_NAME: &str = "target.toml";
const VARIANT_SUFFIX: &str = ".target.toml";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetFile {
    pub name: String,
    pub summary: String,
    /// The file this was read from.
    pub path: PathBuf,
    /// Run once, in `workdir`, before the target is first started.
    pub build: Option<Vec<String>>,
    pub command: Vec<String>,
    /// Where the commands run: the file's directory unless it says otherwise.
    pub workdir: PathBuf,
    pub ready_timeout: Duration,
    /// Start the target anew for every trial. Otherwise one process serves
    /// the trials whose environment it was started with (fresh keys,
    /// subjects and tokens already keep trials apart), and a scenario that
    /// crashes the target gets a process of its own.
    pub fresh_process: bool,
    /// How many trials may run at once, each on a process of its own.
    pub parallel: usize,
    /// Added to the `CHAOS_*` variables, each filled in with the run's facts
    /// at every launch.
    pub env: BTreeMap<String, EnvValue>,
    /// Status overrides for answers whose body names no outcome.
    pub status: BTreeMap<u16, Outcome>,
    pub(crate) retention: Option<Retention>,
    /// Where the effects are, when they are rows in the target's own
    /// database rather than requests to the provider.
    pub effects: Option<EffectsQuery>,
    /// How grants and revocations reach a target that keeps its own callers.
    pub(crate) authority: Option<crate::live::authority::AuthorityCommands>,
    /// The API the harness's provider speaks to this target.
    pub provider_api: ProviderApi,
    /// `[request]`: how a tool call is put to the target (today's protocol
    /// when the file has none).
    pub request: RequestMapping,
    /// `[response]` and `[status]`: how its answers are read.
    pub response: ResponseMapping,
    /// `[agent]`: the live agent's retry budget against this target.
    pub agent: AgentBudget,
}

/// `[provider] api`: what the target's side-effect service looks like to it.
/// A service that sends mail points its SMTP client at chaos instead of
/// being rewritten to POST effects.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProviderApi {
    /// chaos's own HTTP provider: `POST /effects/{tool}`.
    #[default]
    Chaos,
    /// A mail server on 127.0.0.1: an effect is a message accepted after
    /// `DATA` (`live/smtp.rs`).
    Smtp,
    /// The subset of Stripe's v1 API a payments service uses for one-off
    /// charges, with Stripe's idempotency contract (`roles::stripe`).
    Stripe,
}

impl ProviderApi {
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderApi::Chaos => "chaos",
            ProviderApi::Smtp => "smtp",
            ProviderApi::Stripe => "stripe",
        }
    }
}

/// `[effects]`: the query that lists an operation's effects in the
/// target's PostgreSQL database, one row per effect, its first column the
/// effect's reference as the target reports it (its receipt); `$1` is the
/// operation's subject (the workload's subject field, e.g. the invoice).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectsQuery {
    pub database: String,
    pub query: String,
}

/// What the target promises to remember, and what it does after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Retention {
    pub period: Duration,
    pub after: AfterRetention,
    /// Whether the target takes a shorter period from `CHAOS_RETENTION_MS`, so
    /// a live run can wait it out in seconds.
    pub shorten: bool,
}

impl TargetFile {
    /// Reads, parses and validates the target file at `path`.
    pub fn load(path: &Path) -> Result<TargetFile, TargetFileError> {
        TargetFile::parse(path, &input::read(path, "target file")?)
    }

    pub fn parse(path: &Path, text: &str) -> Result<TargetFile, TargetFileError> {
        let file: File = input::parse(path, text)?;
        file.validate(path, text)
    }

    /// What the checker and the report know about this target. `retention` is
    /// the period in force for a run (live runs may shorten it).
    pub fn info_with_retention(&self, retention: Option<Duration>) -> TargetInfo {
        TargetInfo {
            name: self.name.clone(),
            summary: self.summary.clone(),
            retention,
            after_retention: self
                .retention
                .map_or(AfterRetention::NewOperation, |retention| retention.after),
        }
    }

    pub fn info(&self) -> TargetInfo {
        self.info_with_retention(self.retention.map(|retention| retention.period))
    }

    /// How the agent speaks to this target.
    pub(crate) fn mapping(&self) -> Mapping {
        Mapping {
            request: self.request.clone(),
            response: self.response.clone(),
        }
    }
}

/// Every target file under `dir`: `dir/*/target.toml` and `dir/*/*.target.toml`,
/// sorted by path. Unreadable directories are skipped; files that do not parse
/// are returned as errors for the caller to show.
pub(crate) fn discover(dir: &Path) -> Vec<Result<TargetFile, TargetFileError>> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.is_dir())
        .filter_map(|sub| std::fs::read_dir(sub).ok())
        .flat_map(|files| files.filter_map(|entry| entry.ok().map(|entry| entry.path())))
        .filter(|path| {
            path.file_name()
                .map(|name| name.to_string_lossy())
                .is_some_and(|name| name == FILE_NAME || name.ends_with(VARIANT_SUFFIX))
        })
        .collect();
    // A directory's main file first, then its variants.
    paths.sort_by_key(|path| {
        let variant = path.file_name().is_some_and(|name| name != FILE_NAME);
        (path.parent().map(Path::to_path_buf), variant, path.clone())
    });
    paths.iter().map(|path| TargetFile::load(path)).collect()
}

/// A target file that could not be used, with where and why.
pub(crate) type TargetFileError = FileError;

// ---- the file format -------------------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct File {
    #[serde(default)]
    name: Option<Spanned<String>>,
    #[serde(default)]
    summary: String,
    #[serde(default)]
    build: Option<Spanned<Vec<String>>>,
    command: Spanned<Vec<String>>,
    #[serde(default)]
    workdir: Option<PathBuf>,
    #[serde(default = "default_ready_timeout", with = "humantime_serde")]
    ready_timeout: Duration,
    #[serde(default)]
    fresh_process: bool,
    #[serde(default)]
    parallel: Option<Spanned<i64>>,
    #[serde(default)]
    env: Option<Spanned<BTreeMap<String, Spanned<String>>>>,
    #[serde(default)]
    status: Option<Spanned<BTreeMap<String, Outcome>>>,
    #[serde(default)]
    retention: Option<RetentionFile>,
    #[serde(default)]
    effects: Option<Spanned<EffectsFile>>,
    #[serde(default)]
    authority: Option<Spanned<AuthorityFile>>,
    #[serde(default)]
    provider: Option<Spanned<ProviderFile>>,
    #[serde(default)]
    request: Option<Spanned<RequestFile>>,
    #[serde(default)]
    response: Option<Spanned<ResponseFile>>,
    #[serde(default)]
    agent: Option<Spanned<AgentFile>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct AuthorityFile {
    #[serde(default)]
    grant: Option<Vec<String>>,
    revoke: Vec<String>,
    #[serde(default = "default_authority_timeout", with = "humantime_serde")]
    timeout: Duration,
}

fn default_authority_timeout() -> Duration {
    Duration::from_secs(10)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct ProviderFile {
    #[serde(default)]
    api: ProviderApi,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct EffectsFile {
    database: String,
    query: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RetentionFile {
    #[serde(with = "humantime_serde")]
    period: Duration,
    /// What a key past `period` is: a new operation unless the file says
    /// otherwise, the policy of most idempotency layers (a record that has
    /// expired is simply gone).
    #[serde(default)]
    after: AfterRetention,
    #[serde(default = "default_shorten")]
    shorten: bool,
}

fn default_ready_timeout() -> Duration {
    Duration::from_secs(10)
}

fn default_shorten() -> bool {
    true
}

/// The variables chaos sets itself; a target file may not override them.
const RESERVED_PREFIX: &str = "CHAOS_";

impl File {
    fn validate(self, path: &Path, text: &str) -> Result<TargetFile, TargetFileError> {
        let errors = input::Errors { path, text };
        let error_at = |span, message| errors.at(span, message);
        let error = |message| errors.whole(message);

        let directory = path.parent().unwrap_or(Path::new("."));
        let name = match self.name {
            Some(name) => {
                let span = name.span();
                let name = name.into_inner();
                if name.is_empty() || !name.bytes().all(is_name_byte) {
                    return Err(error_at(
                        span,
                        format!(
                            "name '{name}' must be a non-empty name of letters, digits, '_' or '-'"
                        ),
                    ));
                }
                name
            }
            None => {
                let name = std::fs::canonicalize(directory)
                    .ok()
                    .and_then(|dir| {
                        dir.file_name()
                            .map(|name| name.to_string_lossy().into_owned())
                    })
                    .unwrap_or_default();
                if name.is_empty() || !name.bytes().all(is_name_byte) {
                    return Err(error(format!(
                        "this file's directory gives no usable target name ('{name}'); add name = \"...\""
                    )));
                }
                name
            }
        };

        let command_span = self.command.span();
        let command = expand_profile(self.command.into_inner());
        if command.is_empty() || command[0].is_empty() {
            return Err(error_at(
                command_span,
                "command must name a program, e.g. command = [\"python3\", \"server.py\"]".into(),
            ));
        }
        let build = match self.build {
            Some(build) => {
                let span = build.span();
                let build = build.into_inner();
                if build.is_empty() || build[0].is_empty() {
                    return Err(error_at(
                        span,
                        "build must name a program, or be left out".into(),
                    ));
                }
                Some(expand_profile(build))
            }
            None => None,
        };
        if self.ready_timeout.is_zero() {
            return Err(error(
                "ready-timeout must be longer than 0s: the target needs time to start".into(),
            ));
        }

        // Each parallel trial has a process, two harness servers and a
        // runtime of its own; past a few dozen the machine, not the target,
        // decides the races.
        const MOST_PARALLEL: i64 = 32;
        let parallel = match self.parallel {
            Some(parallel) => {
                let span = parallel.span();
                let parallel = parallel.into_inner();
                if !(1..=MOST_PARALLEL).contains(&parallel) {
                    return Err(error_at(
                        span,
                        format!("parallel = {parallel}: how many trials run at once must be between 1 and {MOST_PARALLEL}, e.g. parallel = 4"),
                    ));
                }
                parallel as usize
            }
            None => 1,
        };

        let env = match self.env {
            Some(env) => {
                let span = env.span();
                let env = env.into_inner();
                if let Some(reserved) = env.keys().find(|key| key.starts_with(RESERVED_PREFIX)) {
                    return Err(error_at(
                        span,
                        format!(
                            "env.{reserved}: chaos sets the CHAOS_* variables itself (see docs/target-protocol.md); remove it"
                        ),
                    ));
                }
                let mut values = BTreeMap::new();
                for (name, value) in env {
                    let span = value.span();
                    let value = EnvValue::parse(value.get_ref()).map_err(|message| {
                        error_at(span.clone(), format!("env.{name}: {message}"))
                    })?;
                    if let Some(fact) = value.needs_retention() {
                        let Some(retention) = &self.retention else {
                            return Err(error_at(
                                span,
                                format!("env.{name}: {{{}}} is the period in [retention], and this file has none; add [retention] or remove the placeholder", fact.name()),
                            ));
                        };
                        if fact == Fact::RetentionSeconds && retention.period.subsec_nanos() != 0 {
                            return Err(error_at(
                                span,
                                format!("env.{name}: {{retention.seconds}} needs a period of whole seconds, and [retention] period is {}; use {{retention.ms}}", humantime::format_duration(retention.period)),
                            ));
                        }
                    }
                    values.insert(name, value);
                }
                values
            }
            None => BTreeMap::new(),
        };

        let mut status = BTreeMap::new();
        if let Some(overrides) = self.status {
            let span = overrides.span();
            for (code, outcome) in overrides.into_inner() {
                let parsed = code
                    .parse::<u16>()
                    .ok()
                    .filter(|code| (100..=599).contains(code));
                let Some(parsed) = parsed else {
                    return Err(error_at(
                        span,
                        format!("status '{code}' is not an HTTP status; use a number from 100 to 599, e.g. 417 = \"conflict\""),
                    ));
                };
                status.insert(parsed, outcome);
            }
        }

        let workdir = match self.workdir {
            Some(workdir) if workdir.is_absolute() => workdir,
            Some(workdir) => directory.join(workdir),
            None => directory.to_owned(),
        };
        let workdir = if workdir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            workdir
        };

        let effects = match self.effects {
            Some(effects) => {
                let span = effects.span();
                let effects = effects.into_inner();
                if !effects.database.starts_with("postgres://")
                    && !effects.database.starts_with("postgresql://")
                {
                    return Err(error_at(
                        span,
                        format!(
                            "effects.database '{}' is not a PostgreSQL connection string; write postgresql://user@host:port/database",
                            effects.database
                        ),
                    ));
                }
                let placeholders = (1..=9)
                    .filter(|n| effects.query.contains(&format!("${n}")))
                    .collect::<Vec<_>>();
                if placeholders != [1] {
                    return Err(error_at(
                        span,
                        "effects.query must use exactly one placeholder, $1, for the operation's subject, e.g. SELECT id::text FROM reminders WHERE invoice = $1".into(),
                    ));
                }
                Some(EffectsQuery {
                    database: effects.database,
                    query: effects.query,
                })
            }
            None => None,
        };

        let authority = match self.authority {
            Some(authority) => {
                let span = authority.span();
                let authority = authority.into_inner();
                let commands = crate::live::authority::AuthorityCommands::new(
                    authority.grant.map(expand_profile),
                    expand_profile(authority.revoke),
                    authority.timeout,
                )
                .map_err(|why| error_at(span, why))?;
                Some(commands)
            }
            None => None,
        };
        let provider_api = match self.provider {
            Some(provider) => {
                let span = provider.span();
                let api = provider.into_inner().api;
                if api == ProviderApi::Smtp && effects.is_some() {
                    // A mail server counts messages; rows in the target's
                    // database are another boundary, counted by [effects].
                    return Err(error_at(
                        span,
                        "[provider] api = \"smtp\" counts the messages a mail server accepts, and [effects] counts rows in the target's database; keep one of the two".into(),
                    ));
                }
                api
            }
            None => ProviderApi::Chaos,
        };
        let request = match self.request {
            Some(request) => {
                let span = request.span();
                request
                    .into_inner()
                    .validate()
                    .map_err(|message| error_at(span, message))?
            }
            None => RequestMapping::default(),
        };
        let response = match self.response {
            Some(response) => {
                let span = response.span();
                response
                    .into_inner()
                    .validate(status.clone())
                    .map_err(|message| error_at(span, message))?
            }
            None => ResponseMapping::with_status(status.clone()),
        };
        let agent = match self.agent {
            Some(agent) => {
                let span = agent.span();
                agent
                    .into_inner()
                    .validate()
                    .map_err(|message| error_at(span, message))?
            }
            None => AgentBudget::default(),
        };

        Ok(TargetFile {
            name,
            summary: self.summary.trim().to_owned(),
            path: path.to_owned(),
            build,
            command,
            workdir,
            ready_timeout: self.ready_timeout,
            fresh_process: self.fresh_process,
            parallel,
            env,
            status,
            retention: self.retention.map(|retention| Retention {
                period: retention.period,
                after: retention.after,
                shorten: retention.shorten,
            }),
            effects,
            authority,
            provider_api,
            request,
            response,
            agent,
        })
    }
}

// ---- [request], [response], [agent] -----------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RequestFile {
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    operation_id: Option<PlaceFile>,
    #[serde(default)]
    token: Option<TokenFile>,
    #[serde(default)]
    body: Option<BodyFile>,
    #[serde(default)]
    fields: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct PlaceFile {
    #[serde(default)]
    header: Option<String>,
    #[serde(default)]
    body: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct TokenFile {
    #[serde(default)]
    header: Option<String>,
    #[serde(default)]
    value: Option<String>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum BodyFile {
    Json,
    Form,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct ResponseFile {
    #[serde(default)]
    outcome: Option<String>,
    #[serde(default)]
    receipt: Option<String>,
    #[serde(default)]
    replayed_header: Option<String>,
    #[serde(default)]
    outcomes: Option<BTreeMap<String, Outcome>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct AgentFile {
    #[serde(default, with = "humantime_serde")]
    retry_for: Option<Duration>,
    #[serde(default)]
    backoff: Option<String>,
    #[serde(default, with = "humantime_serde")]
    timeout: Option<Duration>,
}

/// The methods a tool call may be sent with.
const METHODS: [&str; 5] = ["POST", "PUT", "PATCH", "DELETE", "GET"];

/// Whether `name` is an HTTP header name (RFC 9110 token characters).
fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte))
}

fn header_name(what: &str, name: &str) -> Result<String, String> {
    if is_header_name(name) {
        Ok(name.to_owned())
    } else {
        Err(format!(
            "{what} '{name}' is not an HTTP header name; use letters, digits and '-', e.g. \"Idempotency-Key\""
        ))
    }
}

fn template(what: &str, text: &str) -> Result<Template, String> {
    Template::parse(text).map_err(|why| format!("{what}: {why}"))
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

impl RequestFile {
    fn validate(self) -> Result<RequestMapping, String> {
        let default = RequestMapping::default();
        let method = match self.method {
            Some(method) if METHODS.contains(&method.as_str()) => method,
            Some(method) => {
                return Err(format!(
                    "request.method '{method}' is not one chaos sends. Choose from: {}",
                    METHODS.join(", ")
                ))
            }
            None => default.method,
        };
        let path = match self.path {
            Some(path) if path.starts_with('/') => template("request.path", &path)?,
            Some(path) => {
                return Err(format!(
                    "request.path '{path}' must start with '/', e.g. \"/v1/invoices/{{invoice}}/reminders\""
                ))
            }
            None => default.path,
        };
        let operation_id = match self.operation_id {
            Some(PlaceFile {
                header: Some(header),
                body: None,
            }) => Place::Header(header_name("request.operation-id header", &header)?),
            Some(PlaceFile {
                header: None,
                body: Some(field),
            }) if !field.is_empty() => Place::Body(field),
            Some(_) => {
                return Err("request.operation-id names one place: { header = \"Idempotency-Key\" } or { body = \"idempotency_key\" } (a top-level field of the body)".into())
            }
            None => default.operation_id,
        };
        let token = match self.token {
            Some(token) => TokenPlace {
                header: match token.header {
                    Some(header) => header_name("request.token header", &header)?,
                    None => TokenPlace::default().header,
                },
                value: match token.value {
                    Some(value) => template("request.token value", &value)?,
                    None => TokenPlace::default().value,
                },
            },
            None => default.token,
        };
        if !token.value.placeholders().any(|name| name == "token") {
            return Err("request.token value must carry the caller's token: put {token} in it, e.g. value = \"Bearer {token}\"".into());
        }
        let body = match self.body {
            Some(BodyFile::Json) | None => BodyFormat::Json,
            Some(BodyFile::Form) => BodyFormat::Form,
        };
        let fields = match self.fields {
            Some(fields) => {
                let mut templates = BTreeMap::new();
                for (name, text) in fields {
                    if let Place::Body(field) = &operation_id {
                        if *field == name {
                            return Err(format!("request.fields.{name}: the operation id goes in this field (request.operation-id); leave it out of the template"));
                        }
                    }
                    let value = template(&format!("request.fields.{name}"), &text)?;
                    templates.insert(name, value);
                }
                Some(templates)
            }
            None => None,
        };
        Ok(RequestMapping {
            method,
            path,
            operation_id,
            token,
            body,
            fields,
        })
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

/// `[agent]`: how long, and how patiently, the live agent retries a call
/// whose answer is not final. Left out, the transport's defaults.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AgentBudget {
    /// How long a worker keeps retrying past the call's `attempts`.
    pub retry_for: Option<Duration>,
    /// The pause between attempts, drawn from this range.
    pub backoff: Option<(Duration, Duration)>,
    /// How long the agent waits for one attempt's answer.
    pub timeout: Option<Duration>,
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

// ---- [env] values and the run's facts -------------------------------------

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
    /// The provider's host and port apart: what an SMTP client is configured with.
    ProviderHost,
    ProviderPort,
    /// How long one upstream call may take (`CHAOS_UPSTREAM_TIMEOUT_MS`), in
    /// milliseconds and in seconds (a decimal, e.g. `0.5`).
    UpstreamTimeoutMs,
    UpstreamTimeoutSeconds,
}

impl Fact {
    pub const ALL: [Fact; 12] = [
        Fact::RetentionSeconds,
        Fact::RetentionMs,
        Fact::StateDir,
        Fact::ListenAddr,
        Fact::ListenHost,
        Fact::ListenPort,
        Fact::ProviderUrl,
        Fact::AuthorityUrl,
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

fn is_name_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-'
}

/// The profile chaos itself was built with, as cargo's output folder names
/// it (`{profile}` in a target file) and as `cargo build --profile` takes it
/// (`{cargo-profile}`): the targets chaos builds and starts are built alike,
/// so `cargo run --release -- run ... --target postgres-ledger` no longer
/// starts with a full debug build of the workspace (issue 15).
pub(crate) const PROFILE: (&str, &str) = if cfg!(debug_assertions) {
    ("debug", "dev")
} else {
    ("release", "release")
};

/// `args` with `{profile}` and `{cargo-profile}` replaced by [`PROFILE`].
fn expand_profile(args: Vec<String>) -> Vec<String> {
    args.into_iter()
        .map(|arg| {
            arg.replace("{profile}", PROFILE.0)
                .replace("{cargo-profile}", PROFILE.1)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // guards: target files ran target/debug/* behind a debug build whatever
    // profile chaos was built with (issue 15)
    #[test]
    fn target_files_build_and_run_the_profile_chaos_was_built_with() {
        let file = TargetFile::parse(
            Path::new("targets/x/target.toml"),
            "name = \"x\"\nbuild = [\"cargo\", \"build\", \"--profile\", \"{cargo-profile}\"]\ncommand = [\"../../target/{profile}/x\"]\n",
        )
        .unwrap();
        assert_eq!(file.build.unwrap()[3], PROFILE.1);
        assert_eq!(file.command[0], format!("../../target/{}/x", PROFILE.0));
        // The tests run in the dev profile.
        assert_eq!(PROFILE, ("debug", "dev"));

        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../targets");
        for found in discover(&root) {
            let file = found.unwrap();
            let text = std::fs::read_to_string(&file.path).unwrap();
            assert!(
                !text.contains("target/debug") && !text.contains("target/release"),
                "{} names a profile's folder; write target/{{profile}}",
                file.path.display()
            );
        }
    }

    const MINIMAL: &str = r#"
command = ["python3", "server.py"]
"#;

    fn parse(text: &str) -> Result<TargetFile, TargetFileError> {
        TargetFile::parse(Path::new("targets/example/target.toml"), text)
    }

    #[test]
    fn a_minimal_target_file_gets_defaults() {
        let file = TargetFile::parse(
            Path::new("x/target.toml"),
            &format!("name = \"py\"\n{MINIMAL}"),
        )
        .unwrap();
        assert_eq!(file.name, "py");
        assert_eq!(file.workdir, Path::new("x"));
        assert_eq!(file.ready_timeout, Duration::from_secs(10));
        assert!(file.retention.is_none() && file.status.is_empty());
        assert!(!file.fresh_process);
        assert_eq!(file.parallel, 1);
    }

    #[test]
    fn a_retention_without_a_policy_is_a_new_operation_past_it_and_shortened() {
        let file = parse(&format!(
            "{MINIMAL}name = \"x\"\n[retention]\nperiod = \"24h\"\n"
        ))
        .unwrap();
        let retention = file.retention.unwrap();
        assert_eq!(retention.after, AfterRetention::NewOperation);
        assert!(retention.shorten);
        let message = parse(&format!(
            "{MINIMAL}name = \"x\"\n[retention]\nafter = \"refuse\"\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(message.contains("period"), "{message}");
    }

    #[test]
    fn parallel_is_a_small_positive_count_and_says_where_it_is_wrong() {
        let file = parse(&format!(
            "{MINIMAL}parallel = 4\nfresh-process = true\nname = \"x\"\n"
        ))
        .unwrap();
        assert_eq!(file.parallel, 4);
        assert!(file.fresh_process);
        for bad in ["0", "-1", "33"] {
            let message = parse(&format!("{MINIMAL}parallel = {bad}\nname = \"x\"\n"))
                .unwrap_err()
                .to_string();
            assert!(message.contains(":3:"), "{message}");
            assert!(message.contains("between 1 and 32"), "{message}");
        }
    }

    #[test]
    fn an_unknown_key_names_file_line_and_choices() {
        let message = parse(&format!("name = \"a\"\n{MINIMAL}commnd = []\n"))
            .unwrap_err()
            .to_string();
        assert!(
            message.starts_with("targets/example/target.toml:4:"),
            "{message}"
        );
        assert!(message.contains("unknown field `commnd`"), "{message}");
        assert!(message.contains("ready-timeout"), "{message}");
    }

    #[test]
    fn status_overrides_are_checked() {
        let file = parse(&format!(
            "name = \"a\"\n{MINIMAL}[status]\n417 = \"conflict\"\n"
        ))
        .unwrap();
        assert_eq!(file.status.get(&417), Some(&Outcome::Conflict));
        let message = parse(&format!(
            "name = \"a\"\n{MINIMAL}[status]\n417 = \"conflcit\"\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(
            message.contains("conflcit") && message.contains("conflict"),
            "{message}"
        );
        let message = parse(&format!(
            "name = \"a\"\n{MINIMAL}[status]\nteapot = \"conflict\"\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(
            message.starts_with("targets/example/target.toml:4:"),
            "{message}"
        );
        assert!(message.contains("100 to 599"), "{message}");
    }

    #[test]
    fn retention_needs_a_known_policy() {
        let file = parse(&format!(
            "name = \"a\"\n{MINIMAL}[retention]\nperiod = \"7days\"\nafter = \"new-operation\"\n"
        ))
        .unwrap();
        let retention = file.retention.unwrap();
        assert_eq!(retention.period, Duration::from_secs(7 * 86_400));
        assert!(retention.shorten);
        let message = parse(&format!(
            "name = \"a\"\n{MINIMAL}[retention]\nperiod = \"7days\"\nafter = \"forget\"\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(
            message.contains("forget") && message.contains("new-operation"),
            "{message}"
        );
    }

    #[test]
    fn chaos_variables_are_reserved_and_commands_needed() {
        let message = parse(&format!(
            "name = \"a\"\n{MINIMAL}[env]\nCHAOS_LISTEN_ADDR = \"0.0.0.0:80\"\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(message.contains("env.CHAOS_LISTEN_ADDR"), "{message}");
        let message = parse("name = \"a\"\ncommand = []\n")
            .unwrap_err()
            .to_string();
        assert!(
            message.starts_with("targets/example/target.toml:2:"),
            "{message}"
        );
        let message = parse("name = \"a\"\n").unwrap_err().to_string();
        assert!(message.contains("missing field `command`"), "{message}");
    }

    #[test]
    fn an_effects_query_is_read_with_its_database() {
        let file = parse(&format!(
            "name = \"a\"\n{MINIMAL}[effects]\ndatabase = \"postgresql://u@h:5432/d\"\nquery = \"SELECT 1 WHERE x = $1\"\n"
        ))
        .unwrap();
        let effects = file.effects.unwrap();
        assert_eq!(effects.database, "postgresql://u@h:5432/d");
        assert!(effects.query.contains("$1"));
    }

    #[test]
    fn an_effects_database_must_be_postgresql() {
        let message = parse(&format!(
            "name = \"a\"\n{MINIMAL}[effects]\ndatabase = \"mysql://h/d\"\nquery = \"SELECT 1 WHERE x = $1\"\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(
            message.contains("not a PostgreSQL connection string"),
            "{message}"
        );
        assert!(
            message.contains("postgresql://user@host:port/database"),
            "{message}"
        );
    }

    #[test]
    fn an_effects_query_takes_exactly_the_subject() {
        for query in ["SELECT 1", "SELECT 1 WHERE a = $1 AND b = $2"] {
            let message = parse(&format!(
                "name = \"a\"\n{MINIMAL}[effects]\ndatabase = \"postgres://h/d\"\nquery = \"{query}\"\n"
            ))
            .unwrap_err()
            .to_string();
            assert!(
                message.contains("exactly one placeholder, $1"),
                "{query}: {message}"
            );
        }
    }

    #[test]
    fn without_request_response_or_agent_tables_the_protocol_and_live_budget_hold() {
        let file = parse(&format!(
            "name = \"a\"\n{MINIMAL}[status]\n417 = \"conflict\"\n"
        ))
        .unwrap();
        assert_eq!(file.request, RequestMapping::default());
        assert_eq!(
            file.response,
            ResponseMapping::with_status(BTreeMap::from([(417, Outcome::Conflict)]))
        );
        assert_eq!(file.agent, AgentBudget::default());
    }

    #[test]
    fn request_and_response_tables_are_read() {
        let file = parse(&format!(
            "name = \"a\"\n{MINIMAL}[request]\nmethod = \"PUT\"\npath = \"/v1/invoices/{{invoice}}/reminders\"\noperation-id = {{ body = \"idempotency_key\" }}\ntoken = {{ header = \"X-Api-Key\", value = \"{{token}}\" }}\nbody = \"form\"\n[request.fields]\nto = \"{{recipient}}\"\n[response]\noutcome = \"/status\"\nreceipt = \"/data/id\"\nreplayed-header = \"X-Replayed\"\n[response.outcomes]\nsent = \"applied\"\n"
        ))
        .unwrap();
        assert_eq!(file.request.method, "PUT");
        assert_eq!(
            file.request.operation_id,
            Place::Body("idempotency_key".into())
        );
        assert_eq!(file.request.token.header, "X-Api-Key");
        assert_eq!(file.request.body, BodyFormat::Form);
        assert_eq!(
            file.request.path.placeholders().collect::<Vec<_>>(),
            ["invoice"]
        );
        assert_eq!(file.response.outcome.as_deref(), Some("/status"));
        assert_eq!(file.response.receipt.as_deref(), Some("/data/id"));
        assert_eq!(file.response.replayed_header, "X-Replayed");
        assert_eq!(file.response.outcomes["sent"], Outcome::Applied);
    }

    #[test]
    fn mapping_errors_name_the_line_and_the_fix() {
        for (table, says) in [
            (
                "[request]\nmethod = \"FETCH\"\n",
                "Choose from: POST, PUT, PATCH, DELETE, GET",
            ),
            ("[request]\npath = \"v1/x\"\n", "must start with '/'"),
            ("[request]\npath = \"/v1/{invoice\"\n", "never closes"),
            ("[request]\noperation-id = {}\n", "names one place"),
            (
                "[request]\noperation-id = { header = \"X Key\" }\n",
                "not an HTTP header name",
            ),
            (
                "[request]\ntoken = { value = \"Bearer\" }\n",
                "put {token} in it",
            ),
            (
                "[request]\noperation-id = { body = \"k\" }\n[request.fields]\nk = \"{invoice}\"\n",
                "leave it out of the template",
            ),
            ("[request]\nbody = \"xml\"\n", "expected `json` or `form`"),
            ("[request]\nverb = \"POST\"\n", "unknown field `verb`"),
            (
                "[response]\noutcome = \"status\"\n",
                "is not a JSON pointer",
            ),
            (
                "[response]\nreceipt = \"id\"\n",
                "response.receipt 'id' is not a JSON pointer",
            ),
            (
                "[response.outcomes]\nsent = \"applied\"\n",
                "does not say where they are",
            ),
            (
                "[response]\noutcome = \"/s\"\n[response.outcomes]\nsent = \"aplied\"\n",
                "unknown variant `aplied`",
            ),
            (
                "[agent]\nretry-for = \"0s\"\n",
                "longer than 0s and at most 10m",
            ),
            (
                "[agent]\nretry-for = \"1h\"\n",
                "longer than 0s and at most 10m",
            ),
            ("[agent]\ntimeout = \"2min\"\n", "at most 1m"),
            (
                "[agent]\nbackoff = \"60ms..20ms\"\n",
                "the shorter pause comes first",
            ),
            (
                "[agent]\nbackoff = \"fast\"\n",
                "write a range like \"20ms..60ms\"",
            ),
        ] {
            let message = parse(&format!("name = \"a\"\n{MINIMAL}{table}"))
                .unwrap_err()
                .to_string();
            assert!(
                message.starts_with("targets/example/target.toml:"),
                "{table}: {message}"
            );
            assert!(message.contains(says), "{table}: {message}");
        }
    }

    #[test]
    fn the_agent_budget_is_read() {
        let file = parse(&format!(
            "name = \"a\"\n{MINIMAL}[agent]\nretry-for = \"10s\"\nbackoff = \"100ms..1s\"\ntimeout = \"4s\"\n"
        ))
        .unwrap();
        assert_eq!(file.agent.retry_for, Some(Duration::from_secs(10)));
        assert_eq!(
            file.agent.backoff,
            Some((Duration::from_millis(100), Duration::from_secs(1)))
        );
        assert_eq!(file.agent.timeout, Some(Duration::from_secs(4)));
        let one = parse(&format!(
            "name = \"a\"\n{MINIMAL}[agent]\nbackoff = \"50ms\"\n"
        ))
        .unwrap();
        assert_eq!(
            one.agent.backoff,
            Some((Duration::from_millis(50), Duration::from_millis(50)))
        );
        let timing = crate::plan::Timing::live_with(&file.agent);
        assert_eq!(timing.retry_for, Some(Duration::from_secs(10)));
        assert_eq!(timing.agent_timeout, Duration::from_secs(4));
        assert_eq!(timing.backoff_max, Duration::from_secs(1));
        assert_eq!(
            crate::plan::Timing::live_with(&AgentBudget::default()),
            crate::plan::Timing::live()
        );
    }

    #[test]
    fn a_provider_api_is_chaos_unless_the_file_says_stripe() {
        assert_eq!(
            parse(&format!("name = \"a\"\n{MINIMAL}"))
                .unwrap()
                .provider_api,
            ProviderApi::Chaos
        );
        let file = parse(&format!(
            "name = \"a\"\n{MINIMAL}[provider]\napi = \"stripe\"\n"
        ))
        .unwrap();
        assert_eq!(file.provider_api, ProviderApi::Stripe);
        let message = parse(&format!(
            "name = \"a\"\n{MINIMAL}[provider]\napi = \"paypal\"\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(
            message.starts_with("targets/example/target.toml:5:"),
            "{message}"
        );
        assert!(
            message.contains("paypal")
                && message.contains("`chaos`")
                && message.contains("`stripe`"),
            "{message}"
        );
    }

    fn facts(state: &Path) -> RunFacts<'_> {
        RunFacts {
            listen_addr: "127.0.0.1:41873",
            provider_url: "http://127.0.0.1:41869",
            authority_url: "http://127.0.0.1:41871",
            state_dir: state,
            retention: Some(Duration::from_secs(3)),
            upstream_timeout: Duration::from_millis(500),
        }
    }

    // guards: a library reading its TTL in seconds, or its data directory
    // under its own name, needed a `bash -c` wrapper (issue 13, item 5)
    #[test]
    fn env_values_take_the_run_facts() {
        let file = parse(&format!(
            "name = \"a\"\n{MINIMAL}[env]\nTTL = \"{{retention.seconds}}\"\nTTL_MS = \"{{retention.ms}}\"\nDB = \"{{state_dir}}/outbox.db\"\nBIND = \"--host={{listen.host}} --port={{listen.port}}\"\nADDR = \"{{listen.addr}}\"\nUP = \"{{provider.url}} {{authority.url}}\"\nTIMEOUT = \"{{upstream_timeout.seconds}}s {{upstream_timeout.ms}}ms\"\nJSON = \"{{{{\\\"a\\\": 1}}}}\"\n[retention]\nperiod = \"24h\"\nafter = \"new-operation\"\n"
        ))
        .unwrap();
        let state = Path::new("/tmp/trial/state");
        let facts = facts(state);
        let value = |name: &str| file.env[name].expand(&facts);
        assert_eq!(value("TTL"), "3");
        assert_eq!(value("TTL_MS"), "3000");
        assert_eq!(value("DB"), "/tmp/trial/state/outbox.db");
        assert_eq!(value("BIND"), "--host=127.0.0.1 --port=41873");
        assert_eq!(value("ADDR"), "127.0.0.1:41873");
        assert_eq!(value("UP"), "http://127.0.0.1:41869 http://127.0.0.1:41871");
        assert_eq!(value("TIMEOUT"), "0.5s 500ms");
        assert_eq!(value("JSON"), "{\"a\": 1}");
    }

    // guards: a mail-sending service had no way to point its SMTP client at
    // chaos (issue 13, item 3)
    #[test]
    fn a_provider_api_is_chaos_unless_the_file_says_smtp() {
        assert_eq!(
            parse(&format!("name = \"a\"\n{MINIMAL}"))
                .unwrap()
                .provider_api,
            ProviderApi::Chaos
        );
        let file = parse(&format!(
            "name = \"a\"\n{MINIMAL}[provider]\napi = \"smtp\"\n[env]\nSMTP = \"{{provider.host}}:{{provider.port}}\"\n"
        ))
        .unwrap();
        assert_eq!(file.provider_api, ProviderApi::Smtp);
        let facts = RunFacts {
            provider_url: "smtp://127.0.0.1:2525",
            ..facts(Path::new("/s"))
        };
        assert_eq!(file.env["SMTP"].expand(&facts), "127.0.0.1:2525");
        let message = parse(&format!(
            "name = \"a\"\n{MINIMAL}[provider]\napi = \"imap\"\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(
            message.starts_with("targets/example/target.toml:5:"),
            "{message}"
        );
        assert!(
            message.contains("imap") && message.contains("chaos") && message.contains("smtp"),
            "{message}"
        );
        let message = parse(&format!(
            "name = \"a\"\n{MINIMAL}[provider]\nkind = \"smtp\"\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(message.contains("unknown field `kind`"), "{message}");
    }

    #[test]
    fn an_smtp_provider_and_rows_in_the_database_are_refused_together() {
        let message = parse(&format!(
            "name = \"a\"\n{MINIMAL}[provider]\napi = \"smtp\"\n[effects]\ndatabase = \"postgres://h/d\"\nquery = \"SELECT 1 WHERE x = $1\"\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(message.contains("keep one of the two"), "{message}");
    }

    #[test]
    fn an_unknown_placeholder_names_file_line_and_choices() {
        let message = parse(&format!(
            "name = \"a\"\n{MINIMAL}[env]\nOK = \"1\"\nTTL = \"{{retention.secs}}\"\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(
            message.starts_with("targets/example/target.toml:6:"),
            "{message}"
        );
        assert!(message.contains("env.TTL"), "{message}");
        assert!(
            message.contains("unknown placeholder '{retention.secs}'. Choose from: {retention.seconds}, {retention.ms}, {state_dir}"),
            "{message}"
        );
        for (bad, says) in [("{state_dir", "never closes"), ("a}b", "lone '}'")] {
            let message = parse(&format!("name = \"a\"\n{MINIMAL}[env]\nX = \"{bad}\"\n"))
                .unwrap_err()
                .to_string();
            assert!(message.contains(says), "{bad}: {message}");
        }
    }

    #[test]
    fn retention_placeholders_need_a_declared_retention() {
        let message = parse(&format!(
            "name = \"a\"\n{MINIMAL}[env]\nTTL = \"{{retention.seconds}}\"\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(message.contains("this file has none"), "{message}");
        let message = parse(&format!(
            "name = \"a\"\n{MINIMAL}[env]\nTTL = \"{{retention.seconds}}\"\n[retention]\nperiod = \"1500ms\"\nafter = \"refuse\"\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(message.contains("whole seconds"), "{message}");
        // Milliseconds take any period.
        parse(&format!(
            "name = \"a\"\n{MINIMAL}[env]\nTTL = \"{{retention.ms}}\"\n[retention]\nperiod = \"1500ms\"\nafter = \"refuse\"\n"
        ))
        .unwrap();
    }

    #[test]
    fn env_values_without_placeholders_are_kept_as_written() {
        let file = parse(&format!(
            "name = \"a\"\n{MINIMAL}[env]\nURL = \"postgresql://postgres@127.0.0.1:5432/test\"\nEMPTY = \"\"\n"
        ))
        .unwrap();
        let facts = facts(Path::new("/s"));
        assert_eq!(
            file.env["URL"].expand(&facts),
            "postgresql://postgres@127.0.0.1:5432/test"
        );
        assert_eq!(
            file.env["URL"],
            EnvValue::literal("postgresql://postgres@127.0.0.1:5432/test")
        );
        assert_eq!(file.env["EMPTY"].expand(&facts), "");
    }
}
