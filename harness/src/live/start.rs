//! Bringing a target up: its build, its command and `CHAOS_*` environment for
//! one trial, its start and readiness probe, and the checks that it listens
//! where it was told and nowhere else.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use std::sync::Arc;

use chaos_kit::http::Client;
use chaos_kit::net::TcpNetwork;
use chaos_kit::process as env_vars;
use chaos_kit::protocol::LookupCapability;

use crate::plan::Trial;
use crate::target_file::{RunFacts, TargetFile};
use crate::way_in::Ready;

use super::error::{Error, Result};
use super::launch::{describe_exit, Launch, TargetProcess};
use super::net::{exposed_listeners, held_by_group, taken};
use super::schedule::LiveTime;
use super::slot::TrialDir;

/// How often, and how patiently, readiness is probed.
const PROBE_EVERY: Duration = Duration::from_millis(10);
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// Runs a target file's `build` command.
pub(super) fn build(target: &TargetFile, cancel: &AtomicBool) -> Result<()> {
    let Some(command) = &target.build else {
        return Ok(());
    };
    let dir = TrialDir::create().map_err(Error::BuildDir)?;
    let launch = Launch {
        command: command.clone(),
        workdir: target.workdir.clone(),
        env: Vec::new(),
        stdout: dir.path.join("build.out"),
        stderr: dir.path.join("build.err"),
        stdio: false,
    };
    // A closed stderr is no reason to stop the build (issue 15).
    let _ = writeln!(
        std::io::stderr(),
        "chaos: building target '{}': {}",
        target.name,
        launch.display()
    );
    let mut process = TargetProcess::spawn(&launch).map_err(|error| Error::BuildNotStarted {
        target: target.name.clone(),
        source: error,
    })?;
    loop {
        if let Some(status) = process.exited() {
            return if status.success() {
                Ok(())
            } else {
                Err(Error::BuildFailed {
                    target: target.name.clone(),
                    command: launch.display(),
                    status: describe_exit(status),
                    stderr: process.stderr_tail(),
                }
                .into())
            };
        }
        if cancel.load(Ordering::Relaxed) {
            return Err(Error::BuildCancelled.into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Where the harness's servers of one trial listen, as the target is told.
pub(super) struct Addrs {
    pub target: String,
    pub provider: String,
    pub authority: String,
    /// Where chaos's scripted model listens (served only under `[model]`).
    pub model: String,
}

/// The target's command and its `CHAOS_*` environment for this trial.
pub(super) fn launch(
    target: &TargetFile,
    trial: &Trial<'_>,
    time: &LiveTime,
    process_dir: &Path,
    addrs: &Addrs,
) -> Launch {
    let state = process_dir.join("state");
    let _ = std::fs::create_dir_all(&state);
    let provider_url = format!("{}://{}", target.provider_api.scheme(), addrs.provider);
    let authority_url = format!("http://{}", addrs.authority);
    let model_url = format!("http://{}", addrs.model);
    let provider = &trial.scenario.provider;
    let mut env: Vec<(String, String)> = vec![
        (env_vars::LISTEN_ADDR.into(), addrs.target.clone()),
        (env_vars::PROVIDER_URL.into(), provider_url.clone()),
        (env_vars::AUTHORITY_URL.into(), authority_url.clone()),
        (env_vars::MODEL_URL.into(), model_url.clone()),
        (
            env_vars::UPSTREAM_TIMEOUT_MS.into(),
            trial.timing.upstream_timeout.as_millis().to_string(),
        ),
        (
            env_vars::PROVIDER_PROFILE.into(),
            provider.profile.as_str().into(),
        ),
        (env_vars::STATE_DIR.into(), state.display().to_string()),
    ];
    if let Some(retention) = time.provider_retention {
        env.push((
            env_vars::PROVIDER_RETENTION_MS.into(),
            retention.as_millis().to_string(),
        ));
    }
    env.push((
        env_vars::PROVIDER_LOOKUP.into(),
        provider.lookup.as_str().into(),
    ));
    if let LookupCapability::Lagging(lag) = provider.lookup {
        env.push((
            env_vars::PROVIDER_LOOKUP_LAG_MS.into(),
            lag.as_millis().to_string(),
        ));
    }
    if provider.saves_errors || target.provider_api.saves_errors() {
        env.push((env_vars::PROVIDER_SAVES_ERRORS.into(), "true".into()));
    }
    if let Some(retention) = time.target_retention {
        env.push((
            env_vars::RETENTION_MS.into(),
            retention.as_millis().to_string(),
        ));
    }
    env.extend(target.way_in.env());
    let facts = RunFacts {
        listen_addr: &addrs.target,
        provider_url: &provider_url,
        authority_url: &authority_url,
        model_url: &model_url,
        model_api: target.caller.model_api(),
        state_dir: &state,
        retention: time.target_retention,
        upstream_timeout: trial.timing.upstream_timeout,
    };
    env.extend(
        target
            .env
            .iter()
            .map(|(name, value)| (name.clone(), value.expand(&facts))),
    );
    Launch {
        command: target.command.clone(),
        workdir: target.workdir.clone(),
        env,
        stdout: process_dir.join("stdout.log"),
        stderr: process_dir.join("stderr.log"),
        stdio: target.way_in.stdio(),
    }
}

/// Starts the target and waits until its way in says it is ready (`GET
/// /healthz` answers 200, or an MCP server completed its handshake); `None`
/// when cancelled meanwhile.
pub(super) async fn start(
    launch: &Launch,
    addr: &str,
    target: &TargetFile,
    cancel: &AtomicBool,
) -> Result<Option<TargetProcess>> {
    target
        .way_in
        .prepare()
        .await
        .map_err(|why| Error::NotPrepared {
            target: target.name.clone(),
            why,
        })?;
    let mut process = TargetProcess::spawn(launch)?;
    if launch.stdio {
        process
            .bridge(addr, &launch.stdout)
            .map_err(|source| Error::Bridge {
                target: target.name.clone(),
                addr: addr.to_owned(),
                source,
            })?;
    }
    let deadline = Instant::now() + target.ready_timeout;
    let probe = Client::new(Arc::new(TcpNetwork));
    loop {
        if cancel.load(Ordering::Relaxed) {
            return Ok(None);
        }
        if let Some(status) = process.exited() {
            return Err(Error::ExitedBeforeReady {
                target: target.name.clone(),
                command: launch.display(),
                status: describe_exit(status),
                stderr: process.stderr_tail(),
            }
            .into());
        }
        let last = match target.way_in.ready(&probe, addr, PROBE_TIMEOUT, true).await {
            Ready::Yes if !target.way_in.listens() => return Ok(Some(process)),
            Ready::Yes => {
                let taken = port_of(addr).and_then(|port| held_by_group(port, process.group()));
                if taken == Some(false) {
                    return Err(Error::PortTaken {
                        target: target.name.clone(),
                        addr: addr.to_owned(),
                        stderr: process.stderr_tail(),
                    }
                    .into());
                }
                return Ok(Some(process));
            }
            Ready::Refused(why) => {
                return Err(Error::Untestable {
                    target: target.name.clone(),
                    why,
                }
                .into())
            }
            Ready::NotYet(last) => last,
        };
        if Instant::now() >= deadline {
            return Err(Error::NeverReady {
                target: target.name.clone(),
                command: launch.display(),
                readiness: target.way_in.readiness(addr),
                timeout: target.ready_timeout,
                last,
                stderr: process.stderr_tail(),
            }
            .into());
        }
        tokio::time::sleep(PROBE_EVERY).await;
    }
}

/// The port of a `host:port` address chaos made.
fn port_of(addr: &str) -> Option<u16> {
    addr.rsplit(':').next()?.parse().ok()
}

/// How many times a start that lost its port is tried again on another.
pub(super) const PORT_RETRIES: u32 = 2;

/// Whether a start failed because the port chaos told the target to listen
/// on was not free for it: another program answered `/healthz` there, or
/// the target exited and the port cannot be bound now (another program's
/// listener or connection holds it), or the stdio bridge found it in use.
/// A target that exits for a port of its own choosing leaves chaos's port
/// free, and is not one.
pub(super) fn lost_its_port(error: &Error, addr: &str) -> bool {
    match error {
        Error::PortTaken { .. } => true,
        Error::ExitedBeforeReady { .. } => port_of(addr).is_some_and(taken),
        Error::Bridge { source, .. } => source.kind() == std::io::ErrorKind::AddrInUse,
        _ => false,
    }
}

/// One readiness probe of a kept process.
pub(super) async fn healthy(target: &TargetFile, addr: &str) -> bool {
    let probe = Client::new(Arc::new(TcpNetwork));
    target
        .way_in
        .ready(&probe, addr, PROBE_TIMEOUT, false)
        .await
        == Ready::Yes
}

/// Refuses a target that listens on its port beyond 127.0.0.1.
pub(super) fn exposure(target: &TargetFile, target_addr: &str) -> Result<()> {
    let Some(port) = port_of(target_addr) else {
        return Ok(());
    };
    let exposed = exposed_listeners(port);
    if exposed.is_empty() {
        return Ok(());
    }
    Err(Error::Exposed {
        target: target.name.clone(),
        port,
        exposed,
        addr: target_addr.to_owned(),
    }
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Timing;
    use crate::scenario::Scenario;

    fn env_of(target: &str, scenario: &str) -> Vec<(String, String)> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let target = TargetFile::parse(
            Path::new("t/target.toml"),
            &format!("name = \"t\"\n{target}"),
        )
        .unwrap();
        let scenario = Scenario::load(&root.join(scenario)).unwrap();
        let trial = Trial::new(&scenario, 1, Timing::live());
        let time = super::super::schedule::live_time(
            &scenario,
            target.retention,
            target.way_in.duplicate_window(),
        )
        .unwrap();
        let dir = std::env::temp_dir().join(format!("chaos-start-test-{}", std::process::id()));
        let addrs = Addrs {
            target: "127.0.0.1:1".into(),
            provider: "127.0.0.1:2".into(),
            authority: "127.0.0.1:3".into(),
            model: "127.0.0.1:4".into(),
        };
        let env = launch(&target, &trial, &time, &dir, &addrs).env;
        let _ = std::fs::remove_dir_all(&dir);
        env
    }

    fn value<'a>(env: &'a [(String, String)], name: &str) -> Option<&'a str> {
        env.iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    #[test]
    fn the_target_is_told_the_harness_in_its_api_scheme() {
        let env = env_of("command = [\"x\"]", "scenarios/lost-response-keyed.toml");
        assert_eq!(value(&env, "CHAOS_LISTEN_ADDR"), Some("127.0.0.1:1"));
        assert_eq!(
            value(&env, "CHAOS_PROVIDER_URL"),
            Some("http://127.0.0.1:2")
        );
        assert_eq!(
            value(&env, "CHAOS_AUTHORITY_URL"),
            Some("http://127.0.0.1:3")
        );
        assert_eq!(value(&env, "CHAOS_PROVIDER_SAVES_ERRORS"), None);

        let smtp = env_of(
            "command = [\"x\"]\n[provider]\napi = \"smtp\"\n[env]\nSMTP = \"{provider.host}:{provider.port}\"",
            "scenarios/lost-response-keyed.toml",
        );
        assert_eq!(
            value(&smtp, "CHAOS_PROVIDER_URL"),
            Some("smtp://127.0.0.1:2")
        );
        assert_eq!(value(&smtp, "SMTP"), Some("127.0.0.1:2"));

        let stripe = env_of(
            "command = [\"x\"]\n[provider]\napi = \"stripe\"",
            "scenarios/lost-response-keyed.toml",
        );
        assert_eq!(value(&stripe, "CHAOS_PROVIDER_SAVES_ERRORS"), Some("true"));
    }
}
