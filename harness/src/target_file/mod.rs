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
//! grant = ["psql", "...", "-v", "token={token}", "-v", "tenant={tenant}", "-v", "scope={scope}", "-f", "grant.sql"]
//! revoke = ["psql", "...", "-v", "token={token}", "-v", "active={active}", "-f", "revoke.sql"]
//! [provider]                          # optional: the API chaos's provider speaks
//! api = "smtp"                        # "chaos" (default: HTTP, docs/target-protocol.md §4), "stripe" or "smtp"
//!
//! [mcp]                               # optional: the target is an MCP server (see `mcp.rs`)
//! transport = "streamable-http"
//! [broker]                            # optional: the target consumes a queue (docs/brokers.md)
//! kind = "rabbitmq"
//! queue = "charges"
//! [model]                             # optional: the target is an agent runtime; chaos plays its model
//! api = "openai-chat"                 # (docs/runtimes.md)
//! ```
//!
//! Config only: this folder imports nothing of the run. The file is read in
//! two passes, as nextest reads its config: serde checks the shape (unknown
//! keys, types), then each table is validated by its own file, in the order
//! the tables depend on each other (`[retention]` before the `[env]` values
//! that use it, `[status]` before the `[response]` that carries it,
//! `[effects]` before the `[provider]` that may refuse it).

mod agent;
mod authority;
mod broker;
mod effects;
mod env;
mod mcp;
mod model;
mod provider;
mod request;
mod response;
mod retention;
mod status;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chaos_kit::protocol::Outcome;
use chaos_kit::target::{AfterRetention, TargetInfo};
use serde::Deserialize;
use toml::Spanned;

use crate::callers::CallerDriver;
use crate::input::{self, Errors, FileError};
use crate::plan::AgentBudget;
use crate::provider_api::ProviderApi;
use crate::way_in::{Mapping, Protocol, WayIn};

pub(crate) use authority::AuthorityCommands;
pub(crate) use effects::EffectsQuery;
pub use env::EnvValue;
pub(crate) use env::RunFacts;
pub(crate) use retention::Retention;

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
    pub(crate) authority: Option<AuthorityCommands>,
    /// The API the harness's provider speaks to this target.
    pub provider_api: ProviderApi,
    /// `[request]`, `[response]` and `[status]`: how a tool call is put to
    /// the target and its answer read (chaos's protocol when the file has
    /// no `[request]` or `[response]`).
    pub(crate) way_in: WayIn,
    /// `[agent]`: the live agent's retry budget against this target.
    pub agent: AgentBudget,
    /// Who makes the calls: chaos's own agent, or (`[model]`) a runtime
    /// whose model chaos plays.
    pub(crate) caller: CallerDriver,
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

    /// The `[response]` mapping, when the file reads answers its own way.
    pub(crate) fn reads_its_own_outcomes(&self) -> bool {
        self.way_in.reads_its_own_outcomes()
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
    retention: Option<retention::RetentionFile>,
    #[serde(default)]
    effects: Option<Spanned<effects::EffectsFile>>,
    #[serde(default)]
    authority: Option<Spanned<authority::AuthorityFile>>,
    #[serde(default)]
    provider: Option<Spanned<provider::ProviderFile>>,
    #[serde(default)]
    request: Option<Spanned<request::RequestFile>>,
    #[serde(default)]
    response: Option<Spanned<response::ResponseFile>>,
    #[serde(default)]
    agent: Option<Spanned<agent::AgentFile>>,
    #[serde(default)]
    mcp: Option<Spanned<mcp::McpFile>>,
    broker: Option<Spanned<broker::BrokerFile>>,
    #[serde(default)]
    model: Option<Spanned<model::ModelFile>>,
}

fn default_ready_timeout() -> Duration {
    Duration::from_secs(10)
}

/// The variables chaos sets itself; a target file may not override them.
pub(super) const RESERVED_PREFIX: &str = "CHAOS_";

impl File {
    fn validate(self, path: &Path, text: &str) -> Result<TargetFile, TargetFileError> {
        let errors = Errors { path, text };
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

        let retention = self.retention.map(retention::RetentionFile::validate);
        let env = env::validate(self.env, retention.as_ref(), &errors)?;
        let status = status::validate(self.status, &errors)?;
        let effects = effects::validate(self.effects, &errors)?;
        let authority = authority::validate(self.authority, &errors)?;
        let provider_api = provider::validate(self.provider, effects.is_some(), &errors)?;
        let request = request::validate(self.request, &errors)?;
        let response = response::validate(self.response, &status, &errors)?;
        let mcp = mcp::validate(
            self.mcp,
            response.clone(),
            request.is_some(),
            !status.is_empty(),
            &errors,
        )?;
        let broker_span = self.broker.as_ref().map(Spanned::span);
        let broker = broker::validate(self.broker, &name, &errors)?;
        let way_in = match (mcp, broker, request, response) {
            (Some(_), Some(_), _, _) => {
                return Err(error_at(
                    broker_span.unwrap_or_default(),
                    "[broker] and [mcp] both say how calls reach the target; keep [broker] for a consumer on a queue, or [mcp] for an MCP server".into(),
                ))
            }
            (Some(mcp), None, _, _) => WayIn::Mcp(mcp),
            (None, Some(broker), None, None) => WayIn::Broker(broker),
            (None, Some(_), _, _) => {
                return Err(error_at(
                    broker_span.unwrap_or_default(),
                    "[broker] and [request]/[response] both say how calls reach the target; keep [broker] for a consumer on a queue, or the others for an HTTP service".into(),
                ))
            }
            (None, None, None, None) => WayIn::Protocol(Protocol::with_status(status.clone())),
            (None, None, request, response) => WayIn::Mapped(Mapping {
                request: request.unwrap_or_default(),
                response: response.unwrap_or_else(|| {
                    crate::way_in::mapped::ResponseMapping::with_status(status.clone())
                }),
            }),
        };
        let agent = agent::validate(self.agent, &errors)?;
        let model_span = self.model.as_ref().map(Spanned::span);
        let caller = model::validate(self.model, &errors)?;
        if let (Some(span), false) = (model_span, matches!(way_in, WayIn::Protocol(_))) {
            return Err(error_at(
                span,
                "[model] makes the target an agent runtime that makes its own tool calls, and this file also says how chaos sends them ([request], [response], [mcp] or [broker]); keep [model] for a runtime, or the others for a service".into(),
            ));
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
            retention,
            effects,
            authority,
            provider_api,
            way_in,
            agent,
            caller,
        })
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
pub(super) fn expand_profile(args: Vec<String>) -> Vec<String> {
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
    use crate::way_in::mapped::{BodyFormat, Place};

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
        assert_eq!(
            file.way_in,
            WayIn::Protocol(Protocol::with_status(BTreeMap::from([(
                417,
                Outcome::Conflict
            )])))
        );
        assert_eq!(file.agent, AgentBudget::default());
    }

    #[test]
    fn request_and_response_tables_are_read() {
        let file = parse(&format!(
            "name = \"a\"\n{MINIMAL}[request]\nmethod = \"PUT\"\npath = \"/v1/invoices/{{invoice}}/reminders\"\noperation-id = {{ body = \"idempotency_key\" }}\ntoken = {{ header = \"X-Api-Key\", value = \"{{token}}\" }}\nbody = \"form\"\n[request.fields]\nto = \"{{recipient}}\"\n[response]\noutcome = \"/status\"\nreceipt = \"/data/id\"\nreplayed-header = \"X-Replayed\"\n[response.outcomes]\nsent = \"applied\"\n"
        ))
        .unwrap();
        let WayIn::Mapped(file) = file.way_in else {
            panic!(
                "[request] and [response] are the mapped way in: {:?}",
                file.way_in
            );
        };
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
        let tools = parse(&format!(
            "name = \"a\"\n{MINIMAL}[request.tools]\nsend_reminder = \"remind_customer\"\n"
        ))
        .unwrap();
        assert_eq!(
            tools.way_in.tool_names(),
            &std::collections::BTreeMap::from([(
                "send_reminder".to_owned(),
                "remind_customer".to_owned()
            )])
        );
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
            (
                "[request.tools]\nsend_reminder = \"remind customer\"\n",
                "request.tools: 'remind customer' is not a tool name",
            ),
            (
                "[request.tools]\nsend_reminder = 7\n",
                "invalid type: integer `7`, expected a string",
            ),
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
    fn an_mcp_table_is_the_mcp_way_in() {
        let file = parse(&format!(
            "name = \"a\"\n{MINIMAL}[mcp]\ntransport = \"streamable-http\"\nidentity = {{ meta = \"io.example/key\" }}\n[mcp.tools.charge_card]\nname = \"create_charge\"\narguments = {{ amount = \"{{amount_cents}}\" }}\n[response]\noutcome = \"/status\"\n[response.outcomes]\nsucceeded = \"applied\"\n"
        ))
        .unwrap();
        let WayIn::Mcp(mcp) = &file.way_in else {
            panic!("[mcp] is the MCP way in: {:?}", file.way_in);
        };
        assert_eq!(mcp.path, "/mcp");
        assert_eq!(
            mcp.identity,
            crate::way_in::mcp::IdentityPlace::Meta("io.example/key".into())
        );
        assert_eq!(mcp.tools["charge_card"].name, "create_charge");
        assert_eq!(mcp.response.outcome.as_deref(), Some("/status"));
        assert!(file.reads_its_own_outcomes());
        // The authority grants the renamed tool by the server's name.
        assert_eq!(
            file.way_in.tool_names(),
            &std::collections::BTreeMap::from([(
                "charge_card".to_owned(),
                "create_charge".to_owned()
            )])
        );
        assert!(!file.way_in.stdio() && file.way_in.listens());
        let stdio = parse(&format!(
            "name = \"a\"\n{MINIMAL}[mcp]\ntransport = \"stdio\"\n"
        ))
        .unwrap();
        assert!(stdio.way_in.stdio() && !stdio.way_in.listens());
    }

    #[test]
    fn a_model_table_makes_the_target_a_runtime_whose_model_chaos_plays() {
        let file = parse(&format!(
            "name = \"a\"\n{MINIMAL}[model]\napi = \"anthropic\"\nrun-timeout = \"20s\"\n[model.tools]\ncharge_card = \"pay_invoice\"\n"
        ))
        .unwrap();
        let crate::callers::CallerDriver::Model(model) = &file.caller else {
            panic!("[model] selects the model driver: {:?}", file.caller);
        };
        assert_eq!(model.api.name(), "anthropic");
        assert_eq!(model.entry, "/runs");
        assert_eq!(model.run_timeout, Duration::from_secs(20));
        assert_eq!(model.retries, 2);
        assert_eq!(model.tools["charge_card"], "pay_invoice");
        // Without it, chaos's own agent makes the calls.
        let plain = parse(&format!("name = \"a\"\n{MINIMAL}")).unwrap();
        assert_eq!(plain.caller, crate::callers::CallerDriver::default());
    }

    #[test]
    fn model_errors_name_the_line_and_the_fix() {
        for (table, says) in [
            ("[model]\n", "missing field `api`"),
            (
                "[model]\napi = \"gemini\"\n",
                "Choose from: \"openai-chat\", \"openai-responses\", \"anthropic\"",
            ),
            (
                "[model]\napi = \"openai-chat\"\nentry = \"runs\"\n",
                "must be a path starting with '/'",
            ),
            (
                "[model]\napi = \"openai-chat\"\nrun-timeout = \"1h\"\n",
                "at most 5m",
            ),
            (
                "[model]\napi = \"openai-chat\"\nretries = 50\n",
                "write at most 10",
            ),
            (
                "[model]\napi = \"openai-chat\"\n[model.tools]\ncharge_card = \"pay invoice\"\n",
                "1 to 64 letters",
            ),
            (
                "[model]\napi = \"openai-chat\"\nmodel = \"gpt\"\n",
                "unknown field `model`",
            ),
            (
                "[model]\napi = \"openai-chat\"\n[request]\npath = \"/x\"\n",
                "keep [model] for a runtime",
            ),
        ] {
            let error = parse(&format!("name = \"a\"\n{MINIMAL}{table}"))
                .unwrap_err()
                .to_string();
            assert!(error.contains(says), "{table}: {error}");
        }
    }

    #[test]
    fn mcp_errors_name_the_line_and_the_fix() {
        for (table, says) in [
            ("[mcp]\n", "missing field `transport`"),
            ("[mcp]\ntransport = \"sse\"\n", "expected `streamable-http` or `stdio`"),
            (
                "[mcp]\ntransport = \"stdio\"\npath = \"/mcp\"\n",
                "mcp.path '/mcp' is where a Streamable HTTP server answers, and a stdio server has none: remove it",
            ),
            ("[mcp]\ntransport = \"streamable-http\"\npath = \"mcp\"\n", "must start with '/'"),
            (
                "[mcp]\ntransport = \"stdio\"\nsessions = \"per-attempt\"\n",
                "a stdio server has one: its pipes",
            ),
            (
                "[mcp]\ntransport = \"streamable-http\"\nsessions = \"pooled\"\n",
                "expected `shared` or `per-attempt`",
            ),
            (
                "[mcp]\ntransport = \"streamable-http\"\nidentity = \"header\"\n",
                "is not a place; identity = \"nowhere\"",
            ),
            (
                "[mcp]\ntransport = \"streamable-http\"\nidentity = { meta = \"k\", argument = \"k\" }\n",
                "names one place",
            ),
            (
                "[mcp]\ntransport = \"streamable-http\"\nidentity = { param = \"arguments\" }\n",
                "one of tools/call's own params",
            ),
            (
                "[mcp]\ntransport = \"streamable-http\"\nidentity = { argument = \"key\" }\n[mcp.tools.t]\narguments = { key = \"{invoice}\" }\n",
                "leave it out of the template",
            ),
            (
                "[mcp]\ntransport = \"streamable-http\"\n[mcp.tools.t]\narguments = { a = \"{invoice\" }\n",
                "mcp.tools.t.arguments.a: '{' opens a placeholder that never closes",
            ),
            (
                "[mcp]\ntransport = \"streamable-http\"\n[request]\npath = \"/x\"\n",
                "remove [request]",
            ),
            (
                "[mcp]\ntransport = \"streamable-http\"\n[status]\n409 = \"pending\"\n",
                "remove [status]",
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
            model_url: "http://127.0.0.1:41875",
            model_api: "openai-chat",
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
