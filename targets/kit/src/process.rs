//! Running a Rust target as a real process (live mode).
//!
//! The harness starts a live target with a handful of `CHAOS_*` environment
//! variables (`docs/target-protocol.md` lists them); [`ProcessEnv`] reads them
//! into the same [`TargetEnv`] the simulator hands a target, with the real
//! network and the machine's clock, so a target's `serve` runs unchanged.

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::SystemClock;
use crate::disk::Disk;
use crate::net::TcpNetwork;
use crate::protocol::{LookupCapability, ProviderContract, ProviderProfile};
use crate::TargetEnv;

/// `host:port` the target must listen on (always on 127.0.0.1).
pub const LISTEN_ADDR: &str = "CHAOS_LISTEN_ADDR";
/// `http://host:port` of the provider.
pub const PROVIDER_URL: &str = "CHAOS_PROVIDER_URL";
/// `http://host:port` of chaos's scripted model, when the target is an
/// agent runtime whose model chaos plays (`[model]`).
pub const MODEL_URL: &str = "CHAOS_MODEL_URL";
/// `http://host:port` of the authority.
pub const AUTHORITY_URL: &str = "CHAOS_AUTHORITY_URL";
/// How long to wait for one upstream call, in milliseconds.
pub const UPSTREAM_TIMEOUT_MS: &str = "CHAOS_UPSTREAM_TIMEOUT_MS";
/// `keyed`, `lookup` or `blind`: the provider's idempotency contract.
pub const PROVIDER_PROFILE: &str = "CHAOS_PROVIDER_PROFILE";
/// How long the provider remembers keys, in milliseconds; absent when it
/// remembers nothing (`blind`) or forever.
pub const PROVIDER_RETENTION_MS: &str = "CHAOS_PROVIDER_RETENTION_MS";
/// `none`, `exact` or `lagging`: what the provider's `GET /effects?key=` can
/// tell. Absent: what the profile always offered (`exact`, `none` for blind).
pub const PROVIDER_LOOKUP: &str = "CHAOS_PROVIDER_LOOKUP";
/// With `lagging`: how long a committed effect stays invisible, in milliseconds.
pub const PROVIDER_LOOKUP_LAG_MS: &str = "CHAOS_PROVIDER_LOOKUP_LAG_MS";
/// `true` when the keyed provider saves a 5xx under the key and replays it.
pub const PROVIDER_SAVES_ERRORS: &str = "CHAOS_PROVIDER_SAVES_ERRORS";
/// The retention the target should keep for this run, in milliseconds, when
/// its target file declares one (live runs shorten it to seconds).
pub const RETENTION_MS: &str = "CHAOS_RETENTION_MS";
/// A directory for the target's durable state: empty when a trial starts,
/// kept across a crash and restart, removed when the trial ends.
pub const STATE_DIR: &str = "CHAOS_STATE_DIR";

/// What the harness told a live target, read from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessEnv {
    pub listen_addr: String,
    /// `host:port` of the provider.
    pub provider: String,
    /// `host:port` of the authority.
    pub authority: String,
    pub upstream_timeout: Duration,
    pub provider_contract: ProviderContract,
    pub retention: Option<Duration>,
    pub state_dir: Option<PathBuf>,
}

/// A `CHAOS_*` variable that is missing or malformed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvError {
    pub variable: &'static str,
    pub problem: String,
}

impl std::fmt::Display for EnvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "failed to read {}: {} (chaos sets it when it starts a live target; see docs/target-protocol.md)",
            self.variable, self.problem
        )
    }
}

impl std::error::Error for EnvError {}

impl ProcessEnv {
    /// Reads the process's own environment.
    pub fn from_env() -> Result<ProcessEnv, EnvError> {
        ProcessEnv::from_vars(|name| std::env::var(name).ok())
    }

    /// Reads the variables through `var`, so tests need not touch the real environment.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<ProcessEnv, EnvError> {
        let required = |name: &'static str| {
            var(name).ok_or(EnvError {
                variable: name,
                problem: "it is not set".into(),
            })
        };
        let millis = |name: &'static str| -> Result<Option<Duration>, EnvError> {
            var(name)
                .map(|text| {
                    text.trim()
                        .parse::<u64>()
                        .map(Duration::from_millis)
                        .map_err(|_| EnvError {
                            variable: name,
                            problem: format!("'{text}' is not a whole number of milliseconds"),
                        })
                })
                .transpose()
        };
        let profile_text = required(PROVIDER_PROFILE)?;
        let profile = ProviderProfile::parse(&profile_text).ok_or_else(|| EnvError {
            variable: PROVIDER_PROFILE,
            problem: format!("unknown profile '{profile_text}'. Choose from: keyed, lookup, blind"),
        })?;
        Ok(ProcessEnv {
            listen_addr: required(LISTEN_ADDR)?,
            provider: host_port(PROVIDER_URL, &required(PROVIDER_URL)?)?,
            authority: host_port(AUTHORITY_URL, &required(AUTHORITY_URL)?)?,
            upstream_timeout: millis(UPSTREAM_TIMEOUT_MS)?.unwrap_or(Duration::from_secs(1)),
            provider_contract: ProviderContract {
                profile,
                retention: millis(PROVIDER_RETENTION_MS)?,
                lookup: match var(PROVIDER_LOOKUP).as_deref() {
                    None => LookupCapability::default_for(profile),
                    Some("none") => LookupCapability::None,
                    Some("exact") => LookupCapability::Exact,
                    Some("lagging") => LookupCapability::Lagging(
                        millis(PROVIDER_LOOKUP_LAG_MS)?.unwrap_or_default(),
                    ),
                    Some(other) => {
                        return Err(EnvError {
                            variable: PROVIDER_LOOKUP,
                            problem: format!(
                                "unknown lookup '{other}'. Choose from: {}",
                                LookupCapability::NAMES.join(", ")
                            ),
                        })
                    }
                },
                saves_errors: var(PROVIDER_SAVES_ERRORS).as_deref() == Some("true"),
            },
            retention: millis(RETENTION_MS)?,
            state_dir: var(STATE_DIR).map(PathBuf::from),
        })
    }

    /// The environment a target's `serve` takes: the real network, the
    /// machine's clock, and `disk`.
    pub fn target_env(&self, disk: Arc<dyn Disk>) -> TargetEnv {
        TargetEnv::new(
            self.provider.clone(),
            self.authority.clone(),
            self.provider_contract,
            self.upstream_timeout,
            Arc::new(TcpNetwork),
            Arc::new(SystemClock),
            disk,
        )
    }

    /// Binds the address the harness chose.
    pub async fn listen(&self) -> io::Result<tokio::net::TcpListener> {
        tokio::net::TcpListener::bind(&self.listen_addr)
            .await
            .map_err(|error| {
                io::Error::new(
                    error.kind(),
                    format!("failed to listen on {}: {error}", self.listen_addr),
                )
            })
    }
}

/// `http://127.0.0.1:4000/` -> `127.0.0.1:4000`.
fn host_port(variable: &'static str, url: &str) -> Result<String, EnvError> {
    let rest = url.strip_prefix("http://").ok_or_else(|| EnvError {
        variable,
        problem: format!("'{url}' is not an http:// URL"),
    })?;
    let host_port = rest.trim_end_matches('/');
    if host_port.is_empty() || host_port.contains('/') {
        return Err(EnvError {
            variable,
            problem: format!("'{url}' should be http://host:port"),
        });
    }
    Ok(host_port.to_owned())
}

/// Completes when the process is asked to stop (SIGTERM or Ctrl-C), so a
/// server can finish cleanly. The harness's crashes are SIGKILLs, which no
/// process can observe: that is the point of them.
pub async fn shutdown_signal() {
    let Ok(mut terminate) =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = terminate.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// A `--name VALUE` flag a reference target binary takes, with its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flag<'a> {
    pub name: &'static str,
    pub values: &'a [&'a str],
}

/// Parses a reference target's flags (`--weak NAME` switches on a
/// deliberately weakened mode, `--key FROM` chooses where keys come from):
/// each at most once, each value one of its `values`. Returns the value
/// given for each flag's name.
pub fn flags(
    program: &str,
    mut args: impl Iterator<Item = String>,
    known: &[Flag<'_>],
) -> Result<BTreeMap<&'static str, String>, String> {
    let usage = || {
        let forms: Vec<String> = known
            .iter()
            .map(|flag| format!("[{} {}]", flag.name, flag.values.join("|")))
            .collect();
        format!("Usage: {program} {}", forms.join(" "))
    };
    let mut given = BTreeMap::new();
    while let Some(arg) = args.next() {
        let Some(flag) = known.iter().find(|flag| flag.name == arg) else {
            return Err(format!("unknown argument '{arg}'. {}", usage()));
        };
        let value = args
            .next()
            .ok_or_else(|| format!("{} needs a value. {}", flag.name, usage()))?;
        if !flag.values.contains(&value.as_str()) {
            return Err(format!(
                "unknown value '{value}' for {}. Choose from: {}",
                flag.name,
                flag.values.join(", ")
            ));
        }
        if given.insert(flag.name, value).is_some() {
            return Err(format!("{} is given twice. {}", flag.name, usage()));
        }
    }
    Ok(given)
}

/// The `main` of a Rust target binary: reads the `CHAOS_*` environment, starts
/// a runtime and runs `serve` to its end. Every failure is one line on stderr
/// (the harness quotes the tail of stderr when a target dies) and a non-zero exit.
pub fn run<F, Fut>(name: &str, serve: F) -> std::process::ExitCode
where
    F: FnOnce(ProcessEnv) -> Fut,
    Fut: Future<Output = Result<(), Box<dyn std::error::Error>>>,
{
    let env = match ProcessEnv::from_env() {
        Ok(env) => env,
        Err(error) => {
            eprintln!("{name}: {error}");
            return std::process::ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("{name}: failed to start the async runtime: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(env)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{name}: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_name_the_choices() {
        const KNOWN: [Flag; 2] = [
            Flag {
                name: "--weak",
                values: &["race"],
            },
            Flag {
                name: "--key",
                values: &["caller", "structure"],
            },
        ];
        let parse = |list: &[&str]| {
            flags(
                "t",
                list.iter()
                    .map(|arg| arg.to_string())
                    .collect::<Vec<_>>()
                    .into_iter(),
                &KNOWN,
            )
        };
        assert_eq!(parse(&[]), Ok(BTreeMap::new()));
        let given = parse(&["--key", "structure", "--weak", "race"]).unwrap();
        assert_eq!(given.get("--key").map(String::as_str), Some("structure"));
        assert_eq!(given.get("--weak").map(String::as_str), Some("race"));
        assert_eq!(
            parse(&["--weak", "rcae"]),
            Err("unknown value 'rcae' for --weak. Choose from: race".into())
        );
        assert_eq!(
            parse(&["--fast"]),
            Err(
                "unknown argument '--fast'. Usage: t [--weak race] [--key caller|structure]".into()
            )
        );
        assert!(parse(&["--key", "caller", "--key", "caller"])
            .unwrap_err()
            .contains("given twice"));
    }

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    const COMPLETE: &[(&str, &str)] = &[
        (LISTEN_ADDR, "127.0.0.1:4000"),
        (PROVIDER_URL, "http://127.0.0.1:4001"),
        (AUTHORITY_URL, "http://127.0.0.1:4002/"),
        (UPSTREAM_TIMEOUT_MS, "500"),
        (PROVIDER_PROFILE, "keyed"),
        (PROVIDER_RETENTION_MS, "1000"),
    ];

    #[test]
    fn the_harness_variables_become_a_target_env() {
        let env = ProcessEnv::from_vars(vars(COMPLETE)).unwrap();
        assert_eq!(env.provider, "127.0.0.1:4001");
        assert_eq!(env.authority, "127.0.0.1:4002");
        assert_eq!(env.upstream_timeout, Duration::from_millis(500));
        assert_eq!(env.provider_contract.profile, ProviderProfile::Keyed);
        assert_eq!(
            env.provider_contract.retention,
            Some(Duration::from_secs(1))
        );
        assert_eq!(env.retention, None);
    }

    #[test]
    fn a_bad_variable_is_named_with_the_fix() {
        let mut pairs = COMPLETE.to_vec();
        pairs.retain(|(name, _)| *name != PROVIDER_PROFILE);
        pairs.push((PROVIDER_PROFILE, "stripe"));
        let error = ProcessEnv::from_vars(vars(&pairs)).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("failed to read CHAOS_PROVIDER_PROFILE: unknown profile 'stripe'. Choose from: keyed, lookup, blind"),
            "{error}"
        );
        let missing = ProcessEnv::from_vars(vars(&COMPLETE[1..])).unwrap_err();
        assert_eq!(missing.variable, LISTEN_ADDR);
    }
}
