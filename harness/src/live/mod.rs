//! Stage 3, live: one trial against a target running as a real process.
//!
//! The same roles as in the simulator ([`crate::roles`]), on the real network:
//! the provider and the authority are HTTP servers on 127.0.0.1 on ports the
//! OS picks, the agent talks to the target's port, and the target is a process
//! started from its target file with the `CHAOS_*` environment
//! (`docs/target-protocol.md`), in a process group of its own.
//!
//! The driver loop mirrors the simulator's: where `sim` calls `sim.crash` and
//! `sim.bounce`, this one SIGKILLs the target's process group when the nemesis
//! asks (the provider has committed and holds its answer), waits
//! `restart-after`, starts the same command on the same state directory, and
//! waits for it to be ready again. Clock jumps become waits
//! ([`schedule`]). The output is the same [`RunOutput`], judged by the same
//! checkers; a trial that could not run at all is an honest `unknown`.

mod net;
pub mod process;
pub mod schedule;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chaos_kit::http::{self, CallFailure, Request};
use chaos_kit::net::TcpNetwork;
use chaos_kit::process as env_vars;
use chaos_kit::target::TargetInfo;
use tokio::sync::watch;

use crate::check::{self, Check, Liveness, Status, Verdict};
use crate::fault::Fault;
use crate::history::{AttemptEnd, History, RunOutput};
use crate::plan::{Timing, Trial};
use crate::roles::agent::{self, AgentEnv, Script, StatusMapping};
use crate::roles::clock::{HarnessClock, RealTimeline, Timeline};
use crate::roles::Cast;
use crate::scenario::Scenario;
use crate::target_file::TargetFile;
use net::{bind_loopback, exposed_listeners, reserve_port, GatedNetwork, LOOPBACK};
use process::{describe_exit, Launch, TargetProcess};

pub use process::end_all as end_all_targets;

/// How often the driver looks at the nemesis, the target and the cancel flag.
const POLL: Duration = Duration::from_millis(2);
/// How often, and how patiently, readiness is probed.
const PROBE_EVERY: Duration = Duration::from_millis(10);
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// What became of one live trial.
#[derive(Debug)]
pub enum LiveRun {
    /// The trial ran (perhaps cut short: then `output.error` says why).
    /// `info` carries the retention in force for this run.
    Ran { output: RunOutput, info: TargetInfo },
    /// The trial could not run: this scenario cannot be done live, or the
    /// target never became ready. Every seed of the cell would say the same.
    NotRun { reason: String },
    /// Ctrl-C: the target was ended and nothing is judged.
    Cancelled,
}

/// Runs a target file's `build` command, once, before its first trial.
pub fn build(target: &TargetFile, cancel: &AtomicBool) -> Result<(), String> {
    let Some(command) = &target.build else {
        return Ok(());
    };
    let dir = TrialDir::create().map_err(|error| format!("failed to prepare a build: {error}"))?;
    let launch = Launch {
        command: command.clone(),
        workdir: target.workdir.clone(),
        env: Vec::new(),
        stdout: dir.path.join("build.out"),
        stderr: dir.path.join("build.err"),
    };
    eprintln!(
        "chaos: building target '{}': {}",
        target.name,
        launch.display()
    );
    let mut process = TargetProcess::spawn(&launch)
        .map_err(|error| format!("failed to build target '{}': {error}", target.name))?;
    loop {
        if let Some(status) = process.exited() {
            return if status.success() {
                Ok(())
            } else {
                Err(format!(
                    "failed to build target '{}': `{}` ended with {}; the last lines of its stderr:\n{}",
                    target.name,
                    launch.display(),
                    describe_exit(status),
                    process.stderr_tail()
                ))
            };
        }
        if cancel.load(Ordering::Relaxed) {
            return Err("cancelled".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One live trial, judged.
pub struct Judged<'a> {
    pub trial: Trial<'a>,
    pub verdict: Verdict,
    /// What the run produced, when it ran.
    pub run: Option<RunOutput>,
    /// The trial could not run at all (the target never got ready, the
    /// scenario cannot be done live): every seed of the cell would say the
    /// same, so the run moves on to the next cell.
    pub cell_blocked: bool,
}

/// Plans, runs and judges one live trial of `scenario` against `target` with
/// fresh identities. `None` when cancelled.
pub fn judge_trial<'a>(
    scenario: &'a Scenario,
    target: &TargetFile,
    built: &Result<(), String>,
    seed: u64,
    cancel: &AtomicBool,
) -> Option<Judged<'a>> {
    let namespace = fresh_namespace();
    let trial = Trial::in_namespace(scenario, seed, Timing::live(), Some(&namespace));
    let blocked = |trial, reason: String| Judged {
        trial,
        verdict: Verdict::undecided(reason),
        run: None,
        cell_blocked: true,
    };
    if let Err(why) = built {
        return Some(blocked(trial, why.clone()));
    }
    if cancel.load(Ordering::Relaxed) {
        return None;
    }
    match catch_unwind(AssertUnwindSafe(|| run_trial(&trial, target, cancel))) {
        Ok(LiveRun::Cancelled) => None,
        Ok(LiveRun::NotRun { reason }) => Some(blocked(trial, reason)),
        Ok(LiveRun::Ran { output, info }) => {
            let verdict = catch_unwind(AssertUnwindSafe(|| check::check(&trial, &info, &output)))
                .unwrap_or_else(|_| Verdict::undecided("the checker failed".into()));
            Some(Judged {
                verdict: judge_cut_short(verdict, output.error.is_some()),
                run: Some(output),
                trial,
                cell_blocked: false,
            })
        }
        Err(_) => Some(Judged {
            trial,
            verdict: Verdict::undecided("the live driver panicked; the target was ended".into()),
            run: None,
            cell_blocked: false,
        }),
    }
}

/// A live run cut short (its target died, or hung) leaves operations without
/// their effect or their answer. Those findings are the cut's doing, not the
/// target's: unless something else failed, the verdict is `unknown`.
fn judge_cut_short(verdict: Verdict, cut_short: bool) -> Verdict {
    let artefacts = [
        Check::MissingEffect,
        Check::Stuck,
        Check::UnexpectedOutcome,
        Check::RunIncomplete,
    ];
    let real_failure = verdict
        .findings
        .iter()
        .any(|finding| !artefacts.contains(&finding.check));
    if !cut_short || real_failure {
        return verdict;
    }
    // What remains to say is why the run was cut short.
    Verdict {
        status: Status::Unknown,
        safety: Status::Unknown,
        liveness: Liveness::Unknown,
        findings: verdict
            .findings
            .into_iter()
            .filter(|finding| finding.check == Check::RunIncomplete)
            .collect(),
        operations: verdict.operations,
    }
}

/// Fresh identities for each live trial (see [`Trial::in_namespace`]).
fn fresh_namespace() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos() as u64)
        .unwrap_or(0);
    let mixed =
        nanos ^ (u64::from(std::process::id()) << 40) ^ NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{mixed:x}")
}

/// Runs one trial against `target`, on a runtime of its own: when the trial
/// ends, everything it started (held answers, connections) ends with it.
pub fn run_trial(trial: &Trial<'_>, target: &TargetFile, cancel: &AtomicBool) -> LiveRun {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            return LiveRun::NotRun {
                reason: format!("failed to start an async runtime: {error}"),
            }
        }
    };
    let dir = match TrialDir::create() {
        Ok(dir) => dir,
        Err(error) => {
            return LiveRun::NotRun {
                reason: format!("failed to create the trial's state directory: {error}"),
            }
        }
    };
    let run = runtime.block_on(drive(trial, target, cancel, &dir));
    runtime.shutdown_timeout(Duration::from_millis(200));
    run
}

async fn drive(
    trial: &Trial<'_>,
    target: &TargetFile,
    cancel: &AtomicBool,
    dir: &TrialDir,
) -> LiveRun {
    let scenario = trial.scenario;
    let timing = trial.timing;
    let time = match schedule::live_time(scenario, target.retention) {
        Ok(time) => time,
        Err(why) => {
            return LiveRun::NotRun {
                reason: format!("scenario '{}' cannot be run live: {why}", scenario.name),
            }
        }
    };

    let timeline: Arc<dyn Timeline> = Arc::new(RealTimeline::start());
    let clock = Arc::new(HarnessClock::system());
    let Cast {
        authority,
        nemesis,
        provider,
    } = Cast::new(
        trial,
        timeline.clone(),
        clock.clone(),
        time.provider_retention,
        time.clock_waits.clone(),
    );

    // The harness's servers: on 127.0.0.1 only, until `stop` is dropped.
    let (stop, stopped) = watch::channel(());
    let provider_addr = {
        let provider = provider.clone();
        let handler = http::handler(move |request| provider.clone().handle(request));
        match serve_on_loopback(handler, stopped.clone()).await {
            Ok(addr) => addr,
            Err(reason) => return LiveRun::NotRun { reason },
        }
    };
    let authority_addr = {
        let authority = authority.clone();
        let handler = http::handler(move |request| authority.clone().handle(request));
        match serve_on_loopback(handler, stopped).await {
            Ok(addr) => addr,
            Err(reason) => return LiveRun::NotRun { reason },
        }
    };

    let target_addr = match reserve_port() {
        Ok(port) => format!("{LOOPBACK}:{port}"),
        Err(error) => {
            return LiveRun::NotRun {
                reason: format!("failed to find a free port on 127.0.0.1 for the target: {error}"),
            }
        }
    };
    let launch = launch(
        target,
        trial,
        &time,
        dir,
        &target_addr,
        &provider_addr,
        &authority_addr,
    );
    let mut process = match start(&launch, &target_addr, target, cancel).await {
        Started::Ready(process) => process,
        Started::Cancelled => return LiveRun::Cancelled,
        Started::Failed(why) => return LiveRun::NotRun { reason: why },
    };
    if let Some(reason) = exposure(target, &target_addr) {
        return LiveRun::NotRun { reason };
    }

    let (gate, gate_open) = watch::channel(true);
    let attempts = Arc::new(Mutex::new(Vec::new()));
    let env = AgentEnv {
        http: http::Client::new(Arc::new(GatedNetwork { up: gate_open })),
        target: target_addr.clone(),
        timeline: timeline.clone(),
        clock: clock.clone(),
        nemesis: nemesis.clone(),
        mapping: StatusMapping {
            overrides: target.status.clone(),
        },
        attempts: attempts.clone(),
    };
    let mut agent = tokio::spawn(agent::run(Script::from_trial(trial), env));

    let limit = run_limit(trial, target, &time);
    let started = Instant::now();
    let mut error = None;
    'run: loop {
        tokio::select! {
            ended = &mut agent => {
                if let Err(failure) = ended {
                    error = Some(format!("the agent failed: {failure}"));
                }
                break;
            }
            _ = tokio::time::sleep(POLL) => {}
        }
        if cancel.load(Ordering::Relaxed) {
            agent.abort();
            return LiveRun::Cancelled;
        }
        while let Some(crash) = nemesis.take_crash_request() {
            // The agent's next connection waits for the restart, as the issue's
            // "kill, restart, then retry" asks.
            gate.send_replace(false);
            process.kill();
            nemesis.record_at(
                timeline.now(),
                None,
                "target killed (SIGKILL to its process group)".into(),
            );
            tokio::time::sleep(crash.restart_after).await;
            match start(&launch, &target_addr, target, cancel).await {
                Started::Ready(restarted) => {
                    process = restarted;
                    if let Some(reason) = exposure(target, &target_addr) {
                        error = Some(reason);
                        break 'run;
                    }
                    nemesis.record_at(timeline.now(), None, "target restarted".into());
                    gate.send_replace(true);
                }
                Started::Cancelled => {
                    agent.abort();
                    return LiveRun::Cancelled;
                }
                Started::Failed(why) => {
                    error = Some(format!(
                        "the target did not come back after a restart: {why}"
                    ));
                    break 'run;
                }
            }
        }
        if let Some(status) = process.exited() {
            error = Some(format!(
                "the target exited on its own during the run ({}); the last lines of its stderr:\n{}",
                describe_exit(status),
                process.stderr_tail()
            ));
            break;
        }
        if started.elapsed() > limit {
            error = Some(format!(
                "the run did not finish within {}: the target hangs; the last lines of its stderr:\n{}",
                humantime::format_duration(Duration::from_secs(limit.as_secs())),
                process.stderr_tail()
            ));
            break;
        }
    }
    agent.abort();
    let attempts = std::mem::take(&mut *attempts.lock().unwrap_or_else(|p| p.into_inner()));
    // A target that answers nothing at all hangs: its cell cannot be judged.
    let unanswered = attempts.iter().all(|attempt| {
        matches!(
            attempt.end,
            AttemptEnd::Failed {
                failure: CallFailure::Timeout
            }
        )
    });
    if error.is_none() && !attempts.is_empty() && unanswered {
        error = Some(format!(
            "the target hangs: none of its {} attempt(s) was answered within {}; the last lines of its stderr:\n{}",
            attempts.len(),
            humantime::format_duration(timing.agent_timeout),
            process.stderr_tail()
        ));
    }
    process.kill();
    drop(stop);

    let history = History {
        attempts,
        faults: nemesis.events(),
        authorizations: authority.decisions(),
        ended_at: timeline.now(),
    };
    LiveRun::Ran {
        output: RunOutput {
            history,
            ledger: provider.ledger(),
            error,
        },
        info: target.info_with_retention(time.target_retention),
    }
}

/// Why the target cannot be run, if it listens on its port beyond 127.0.0.1.
fn exposure(target: &TargetFile, target_addr: &str) -> Option<String> {
    let port: u16 = target_addr.rsplit(':').next()?.parse().ok()?;
    let exposed = exposed_listeners(port);
    (!exposed.is_empty()).then(|| {
        format!(
            "target '{}' listens on port {port} beyond 127.0.0.1 (kernel address {}): it must listen on CHAOS_LISTEN_ADDR ({target_addr}) only, or a test run would expose it to the network",
            target.name,
            exposed.join(", ")
        )
    })
}

/// Serves `handler` on 127.0.0.1 on a port the OS picks; returns `host:port`.
async fn serve_on_loopback(
    handler: http::Handler,
    mut stopped: watch::Receiver<()>,
) -> Result<String, String> {
    let listener = bind_loopback()
        .await
        .map_err(|error| format!("failed to listen on 127.0.0.1: {error}"))?;
    let addr = listener
        .local_addr()
        .map_err(|error| format!("failed to read a listener's address: {error}"))?;
    tokio::spawn(http::serve(
        listener,
        async move {
            // Completes when the sender is dropped: the trial is over.
            while stopped.changed().await.is_ok() {}
        },
        handler,
    ));
    Ok(addr.to_string())
}

/// The target's command and its `CHAOS_*` environment for this trial.
fn launch(
    target: &TargetFile,
    trial: &Trial<'_>,
    time: &schedule::LiveTime,
    dir: &TrialDir,
    target_addr: &str,
    provider_addr: &str,
    authority_addr: &str,
) -> Launch {
    let state = dir.path.join("state");
    let _ = std::fs::create_dir_all(&state);
    let mut env: Vec<(String, String)> = vec![
        (env_vars::LISTEN_ADDR.into(), target_addr.into()),
        (
            env_vars::PROVIDER_URL.into(),
            format!("http://{provider_addr}"),
        ),
        (
            env_vars::AUTHORITY_URL.into(),
            format!("http://{authority_addr}"),
        ),
        (
            env_vars::UPSTREAM_TIMEOUT_MS.into(),
            trial.timing.upstream_timeout.as_millis().to_string(),
        ),
        (
            env_vars::PROVIDER_PROFILE.into(),
            trial.scenario.provider.profile.as_str().into(),
        ),
        (env_vars::STATE_DIR.into(), state.display().to_string()),
    ];
    if let Some(retention) = time.provider_retention {
        env.push((
            env_vars::PROVIDER_RETENTION_MS.into(),
            retention.as_millis().to_string(),
        ));
    }
    if let Some(retention) = time.target_retention {
        env.push((
            env_vars::RETENTION_MS.into(),
            retention.as_millis().to_string(),
        ));
    }
    env.extend(
        target
            .env
            .iter()
            .map(|(name, value)| (name.clone(), value.clone())),
    );
    Launch {
        command: target.command.clone(),
        workdir: target.workdir.clone(),
        env,
        stdout: dir.path.join("stdout.log"),
        stderr: dir.path.join("stderr.log"),
    }
}

enum Started {
    Ready(TargetProcess),
    Cancelled,
    Failed(String),
}

/// Starts the target and waits until `GET /healthz` answers 200.
async fn start(launch: &Launch, addr: &str, target: &TargetFile, cancel: &AtomicBool) -> Started {
    let mut process = match TargetProcess::spawn(launch) {
        Ok(process) => process,
        Err(why) => return Started::Failed(why),
    };
    let deadline = Instant::now() + target.ready_timeout;
    loop {
        if cancel.load(Ordering::Relaxed) {
            return Started::Cancelled;
        }
        if let Some(status) = process.exited() {
            return Started::Failed(format!(
                "target '{}' (`{}`) exited before it was ready ({}); the last lines of its stderr:\n{}",
                target.name,
                launch.display(),
                describe_exit(status),
                process.stderr_tail()
            ));
        }
        let last =
            match http::call(&TcpNetwork, addr, Request::get("/healthz"), PROBE_TIMEOUT).await {
                Ok(response) if response.status == 200 => return Started::Ready(process),
                Ok(response) => format!("status {}", response.status),
                Err(failure) => failure.to_string(),
            };
        if Instant::now() >= deadline {
            return Started::Failed(format!(
                "target '{}' (`{}`) did not answer GET /healthz on {addr} with 200 within {} (last: {last}); the last lines of its stderr:\n{}",
                target.name,
                launch.display(),
                humantime::format_duration(target.ready_timeout),
                process.stderr_tail()
            ));
        }
        tokio::time::sleep(PROBE_EVERY).await;
    }
}

/// The longest an honest run of `trial` can take; past it the target hangs.
/// Every attempt of the agent is bounded, so this is a safety net, not a guess.
fn run_limit(trial: &Trial<'_>, target: &TargetFile, time: &schedule::LiveTime) -> Duration {
    let timing = trial.timing;
    let attempts: u32 = trial.calls.iter().map(|call| call.attempts).sum();
    let waits: Duration = time.clock_waits.values().map(|wait| wait.wait).sum();
    let restarts = trial
        .scenario
        .faults
        .iter()
        .filter(|fault| matches!(fault, Fault::CrashTarget { .. }))
        .count() as u32;
    (timing.agent_timeout + timing.backoff_max) * attempts
        + waits
        + (target.ready_timeout + Duration::from_secs(1)) * restarts
        + Duration::from_secs(10)
}

/// A directory for one trial (the target's state, its logs), removed when dropped.
struct TrialDir {
    path: PathBuf,
}

impl TrialDir {
    fn create() -> std::io::Result<TrialDir> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "chaos-live-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path)?;
        Ok(TrialDir { path })
    }
}

impl Drop for TrialDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
