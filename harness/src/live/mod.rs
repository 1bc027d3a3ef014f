//! Stage 3, live: one trial against a target running as a real process.
//!
//! The same roles as in the simulator ([`crate::roles`]), on the real network:
//! the provider and the authority are HTTP servers on 127.0.0.1 on ports the
//! OS picks, the agent talks to the target's port, and the target is a process
//! started from its target file with the `CHAOS_*` environment
//! (`docs/target-protocol.md`), in a process group of its own ([`launch`]).
//! A process serves the trials it may, one after another (fresh identities
//! keep them apart): each thread that runs trials keeps a [`Slot`], the
//! ports the process was told and the process itself, until a trial's
//! environment differs, its scenario kills the target, or the target file
//! asks for `fresh-process`; each trial still gets its own runtime, so
//! whatever it started (held answers, connections) ends with it.
//!
//! The driver loop mirrors the simulator's and shares its crash schedule
//! ([`Crashes`]): where `sim` calls `sim.crash` and `sim.bounce`, this one
//! SIGKILLs the target's process group when the nemesis asks (the provider
//! has committed and holds its answer), and after `restart-after` starts the
//! same command on the same state directory and waits for it to be ready
//! again. Clock jumps become waits ([`schedule`]). The output is the same
//! [`RunOutput`], judged by the same checkers; a trial that could not run at
//! all is an honest `unknown`.

pub(crate) mod authority;
mod effects;
mod error;
mod launch;
mod net;
pub(crate) mod schedule;
mod smtp;

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use chaos_kit::http::{self, CallFailure, Request};
use chaos_kit::net::TcpNetwork;
use chaos_kit::process as env_vars;
use chaos_kit::protocol::{LookupCapability, ProviderProfile};
use tokio::sync::watch;

use crate::fault::{Action, Fault, Live};
use crate::history::{AttemptEnd, RunOutput};
use crate::plan::{Timing, Trial};
use crate::roles::agent::{self, Script};
use crate::roles::clock::{HarnessClock, RealTimeline, Timeline};
use crate::roles::mapping;
use crate::roles::nemesis::{Crashes, Due};
use crate::roles::Cast;
use crate::scenario::{Boundary, Scenario};
use crate::sweep::Transport;
use crate::target_file::{ProviderApi, RunFacts, TargetFile};
use crate::trial::{Concurrency, Driver, Run};
pub(crate) use error::{Error, Result};
use launch::{describe_exit, Launch, TargetProcess};
use net::{bind_loopback, exposed_listeners, held_by_group, reserve_port, GatedNetwork, LOOPBACK};

pub(crate) use launch::end_all as end_all_targets;

/// How often the driver looks at the nemesis, the target and the cancel flag.
const POLL: Duration = Duration::from_millis(2);
/// How often, and how patiently, readiness is probed.
const PROBE_EVERY: Duration = Duration::from_millis(10);
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// Runs a target file's trials: built once, before its first trial; then
/// each thread that runs its trials keeps one process ([`Slot`]) for as long
/// as the trials it serves allow.
pub(crate) struct LiveDriver<'a> {
    file: &'a TargetFile,
    built: OnceLock<std::result::Result<(), String>>,
    /// Per thread: a process started on a thread dies with it (its
    /// parent-death signal), so a process is only ever used by its thread.
    slots: Mutex<HashMap<ThreadId, Slot>>,
    starts: Starts,
    /// Set when the target never got ready: the rest of the run is not tried.
    given_up: OnceLock<String>,
    keep_trying: bool,
}

impl<'a> LiveDriver<'a> {
    /// `keep_trying`: a target that never gets ready is still tried in
    /// every cell (`--keep-trying`), not given up on after the first.
    pub(crate) fn new(file: &'a TargetFile, keep_trying: bool) -> LiveDriver<'a> {
        LiveDriver {
            file,
            built: OnceLock::new(),
            slots: Mutex::new(HashMap::new()),
            starts: Starts::default(),
            given_up: OnceLock::new(),
            keep_trying,
        }
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<ThreadId, Slot>> {
        self.slots
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A target that has never been ready in this run, and now timed out
    /// once more, is broken, not slow: its remaining cells say so at once
    /// instead of waiting out `ready-timeout` each.
    fn give_up_if_never_ready(&self, error: &Error, scenario: &str) {
        if self.keep_trying
            || self.starts.ready.load(Ordering::Relaxed)
            || !matches!(error, Error::NeverReady { .. })
        {
            return;
        }
        let reason = format!(
            "not run: target '{}' never became ready in this run (first at scenario '{scenario}', after its ready-timeout of {}); fix its target file, or pass --keep-trying to try every cell",
            self.file.name,
            humantime::format_duration(self.file.ready_timeout)
        );
        if self.given_up.set(reason).is_ok() {
            // A closed stderr is no reason to stop (issue 15).
            let _ = writeln!(
                std::io::stderr(),
                "chaos: target '{}' never became ready; its remaining cells are not run (unknown). Pass --keep-trying to try each.",
                self.file.name
            );
        }
    }
}

impl Driver for LiveDriver<'_> {
    fn transport(&self) -> Transport {
        Transport::Live
    }

    fn concurrency(&self) -> Concurrency {
        Concurrency::AtMost(self.file.parallel)
    }

    /// Live targets keep state across runs (a database): a rerun of the same
    /// seed must not find the previous run's records, so each live trial gets
    /// fresh identities, while the seed still decides every timing.
    fn plan<'s>(&self, scenario: &'s Scenario, seed: u64) -> Trial<'s> {
        let timing = Timing::live_with(&self.file.agent);
        Trial::in_namespace(scenario, seed, timing, Some(&fresh_namespace()))
    }

    fn run(&self, trial: &Trial<'_>, cancel: &AtomicBool) -> Run {
        if let Some(reason) = self.given_up.get() {
            return Run::Blocked {
                reason: reason.clone(),
            };
        }
        let built = self
            .built
            .get_or_init(|| build(self.file, cancel).map_err(|error| error.to_string()));
        if let Err(reason) = built {
            return Run::Blocked {
                reason: reason.clone(),
            };
        }
        let thread = std::thread::current().id();
        let slot = self.slots().remove(&thread);
        let mut slot = match slot {
            Some(slot) => slot,
            None => match Slot::open() {
                Ok(slot) => slot,
                Err(error) => {
                    return Run::Blocked {
                        reason: error.to_string(),
                    }
                }
            },
        };
        self.starts.trials.fetch_add(1, Ordering::Relaxed);
        let ran = run_trial(trial, self.file, cancel, &mut slot, &self.starts);
        self.slots().insert(thread, slot);
        match ran {
            Ok(Some((output, retention))) => Run::Ran {
                output: Box::new(output),
                target: self.file.info_with_retention(retention),
            },
            Ok(None) => Run::Cancelled,
            Err(error) => {
                self.give_up_if_never_ready(&error, &trial.scenario.name);
                Run::Blocked {
                    reason: error.to_string(),
                }
            }
        }
    }

    fn finished(&self) {
        self.slots().clear();
        let trials = self.starts.trials.load(Ordering::Relaxed);
        let processes = self.starts.processes.load(Ordering::Relaxed);
        if processes > 0 {
            // What reuse did, since a target that keeps state between
            // trials is judged differently with and without it.
            let _ = writeln!(
                std::io::stderr(),
                "chaos: target '{}': {trials} trial(s) on {processes} process start(s){}",
                self.file.name,
                if self.file.fresh_process {
                    " (fresh-process = true: one per trial, and each restart)"
                } else {
                    " (a process serves the next trial unless its scenario kills it; fresh-process = true starts one per trial)"
                }
            );
        }
    }
}

/// What the driver counts of the processes it starts, over the run.
#[derive(Default)]
struct Starts {
    /// Whether the target has passed its readiness probe in this run.
    ready: AtomicBool,
    trials: AtomicU64,
    /// Every start that got ready, restarts after a crash included.
    processes: AtomicU64,
}

impl Starts {
    fn got_ready(&self) {
        self.ready.store(true, Ordering::Relaxed);
        self.processes.fetch_add(1, Ordering::Relaxed);
    }
}

/// Runs a target file's `build` command.
fn build(target: &TargetFile, cancel: &AtomicBool) -> Result<()> {
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
/// The target process may be `slot`'s, and may stay there for the next
/// trial. `Ok(None)` when cancelled; with the output, the target's
/// retention in force for the run.
fn run_trial(
    trial: &Trial<'_>,
    target: &TargetFile,
    cancel: &AtomicBool,
    slot: &mut Slot,
    starts: &Starts,
) -> Result<Option<(RunOutput, Option<Duration>)>> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(Error::Runtime)?;
    let run = runtime.block_on(drive(trial, target, cancel, slot, starts));
    runtime.shutdown_timeout(Duration::from_millis(200));
    run
}

async fn drive(
    trial: &Trial<'_>,
    target: &TargetFile,
    cancel: &AtomicBool,
    slot: &mut Slot,
    starts: &Starts,
) -> Result<Option<(RunOutput, Option<Duration>)>> {
    let scenario = trial.scenario;
    let timing = trial.timing;
    let time = schedule::live_time(scenario, target.retention).map_err(|why| Error::NotLive {
        scenario: scenario.name.clone(),
        why,
    })?;

    in_database(trial, target)?;
    // A provider of another API's shape keeps that API's own contract.
    match target.provider_api {
        ProviderApi::Chaos => {}
        ProviderApi::Smtp => smtp::refuse_unless_blind(trial, &target.name)?,
        ProviderApi::Stripe => refuse_unless_stripe(trial, target)?,
    }
    mapping::check_arguments(&target.request, &target.name, trial).map_err(|why| {
        Error::NotLive {
            scenario: scenario.name.clone(),
            why,
        }
    })?;

    let timeline: Arc<dyn Timeline> = Arc::new(RealTimeline::start());
    // The same instant on the wall clock, to place rows the database stamped.
    let wall_start = std::time::SystemTime::now();
    let cast = Cast::new(
        trial,
        timeline.clone(),
        Arc::new(HarnessClock::system()),
        time.provider_retention,
        time.clock_waits.clone(),
        Some(&time.approval_expiries),
        target.provider_api,
    );

    // The harness's servers, on the slot's ports on 127.0.0.1 (a kept
    // process was told them), for this trial only: until `stop` is dropped.
    let (stop, stopped) = watch::channel(());
    let provider_addr = match target.provider_api {
        ProviderApi::Chaos | ProviderApi::Stripe => {
            let provider = cast.provider.clone();
            let handler = http::handler(move |request| provider.clone().handle(request));
            serve_for_trial(&slot.provider, handler, stopped.clone())?
        }
        // On the same port: a process kept from an earlier trial was told it.
        ProviderApi::Smtp => smtp::serve_for_trial(
            &slot.provider,
            cast.provider.clone(),
            smtp::Attribution::of(trial),
            stopped.clone(),
        )?,
    };
    let authority_addr = {
        let authority = cast.authority.clone();
        let handler = http::handler(move |request| authority.clone().handle(request));
        serve_for_trial(&slot.authority, handler, stopped)?
    };

    let target_addr = slot.target_addr.clone();
    // A process kept from an earlier trial serves this one if it was
    // started with the same environment, is still up, and nothing in this
    // scenario kills it; otherwise this trial starts its own.
    let handed_on = slot.running.take().filter(|_| reusable(trial, target));
    let kept = match handed_on {
        Some(mut running) => {
            let wanted = launch(
                target,
                trial,
                &time,
                &running.dir,
                &target_addr,
                &provider_addr,
                &authority_addr,
            );
            let same = wanted.env == running.launch.env && running.process.exited().is_none();
            if same && healthy(&target_addr).await {
                Some(running)
            } else {
                running.process.kill();
                None
            }
        }
        None => None,
    };
    let (launch, mut process, process_dir) = match kept {
        Some(running) => (running.launch, running.process, running.dir),
        None => {
            let process_dir = slot.new_process_dir().map_err(Error::StateDir)?;
            let launch = launch(
                target,
                trial,
                &time,
                &process_dir,
                &target_addr,
                &provider_addr,
                &authority_addr,
            );
            let Some(process) = start(&launch, &target_addr, target, cancel).await? else {
                return Ok(None);
            };
            starts.got_ready();
            exposure(target, &target_addr)?;
            (launch, process, process_dir)
        }
    };

    // A target that keeps its own callers learns of this trial's tokens
    // before the first call, and of each revocation at its protocol point.
    if let Some(commands) = &target.authority {
        cast.authority
            .adapted_by(Arc::new(authority::CommandAdapter {
                commands: commands.clone(),
                workdir: target.workdir.clone(),
                env: launch.env.clone(),
            }));
        if let Some(why) = cast.authority.adapter_failure() {
            return Err(Error::Authority {
                target: target.name.clone(),
                why,
            }
            .into());
        }
    }

    let (gate, gate_open) = watch::channel(true);
    let env = cast.agent_env(
        http::Client::new(Arc::new(GatedNetwork { up: gate_open })),
        target_addr.clone(),
        target.mapping(),
    );
    let mut agent = tokio::spawn(agent::run(Script::from_trial(trial), env));

    // A crash after the Nth commit, for a target whose commits are rows:
    // the rows are watched, and the Nth one seen is the Nth commit.
    let mut rows = match &target.effects {
        Some(query) if scenario.faults.iter().any(Fault::acts_on_dispatches) => {
            match effects::Effects::open(query, trial).await {
                Ok(rows) => Some(rows),
                Err(why) => {
                    agent.abort();
                    process.kill();
                    return Err(Error::Effects {
                        target: target.name.clone(),
                        why,
                    }
                    .into());
                }
            }
        }
        _ => None,
    };

    let limit = run_limit(trial, target, &time);
    let started = Instant::now();
    let mut crashes = Crashes::default();
    let mut error: Option<Box<Error>> = None;
    'run: loop {
        tokio::select! {
            ended = &mut agent => {
                if let Err(failure) = ended {
                    error = Some(Error::Agent(failure.to_string()).into());
                }
                break;
            }
            _ = tokio::time::sleep(POLL) => {}
        }
        if cancel.load(Ordering::Relaxed) {
            agent.abort();
            return Ok(None);
        }
        if let Some(watched) = &mut rows {
            match watched.new_rows().await {
                Ok(new) => {
                    for nth in new {
                        cast.nemesis.dispatch(nth);
                        cast.nemesis.after_commit(nth);
                    }
                }
                Err(why) => {
                    error = Some(
                        Error::Effects {
                            target: target.name.clone(),
                            why,
                        }
                        .into(),
                    );
                    break;
                }
            }
        }
        while let Some(due) = crashes.due(&cast.nemesis, timeline.now()) {
            match due {
                Due::Kill => {
                    // The agent's next connection waits for the restart, as
                    // "kill, restart, then retry" asks.
                    gate.send_replace(false);
                    process.kill();
                    crashes.killed(
                        &cast.nemesis,
                        timeline.now(),
                        "target killed (SIGKILL to its process group)",
                    );
                }
                Due::Restart => match start(&launch, &target_addr, target, cancel).await {
                    Ok(Some(restarted)) => {
                        starts.got_ready();
                        process = restarted;
                        if let Err(exposed) = exposure(target, &target_addr) {
                            error = Some(exposed);
                            break 'run;
                        }
                        crashes.restarted(&cast.nemesis, timeline.now());
                        gate.send_replace(true);
                    }
                    Ok(None) => {
                        agent.abort();
                        return Ok(None);
                    }
                    Err(why) => {
                        error = Some(Error::NoRestart(why).into());
                        break 'run;
                    }
                },
            }
        }
        if !crashes.down() {
            if let Some(status) = process.exited() {
                error = Some(
                    Error::ExitedDuringRun {
                        status: describe_exit(status),
                        stderr: process.stderr_tail(),
                    }
                    .into(),
                );
                break;
            }
        }
        if started.elapsed() > limit {
            error = Some(
                Error::RunTooLong {
                    limit: Duration::from_secs(limit.as_secs()),
                    stderr: process.stderr_tail(),
                }
                .into(),
            );
            break;
        }
    }
    agent.abort();
    // A revocation its store never got would be judged as the target's
    // fault: the trial did not happen as the scenario says, so it is not run.
    if let Some(why) = cast.authority.adapter_failure() {
        process.kill();
        return Err(Error::Authority {
            target: target.name.clone(),
            why,
        }
        .into());
    }
    // A target that answers nothing at all hangs: its cell cannot be judged.
    let attempts = cast.attempts();
    let unanswered = attempts.iter().all(|attempt| {
        matches!(
            attempt.end,
            AttemptEnd::Failed {
                failure: CallFailure::Timeout
            }
        )
    });
    if error.is_none() && !attempts.is_empty() && unanswered {
        error = Some(
            Error::Unanswered {
                attempts: attempts.len(),
                timeout: timing.agent_timeout,
                stderr: process.stderr_tail(),
            }
            .into(),
        );
    }
    drop(stop);
    let hand_on = error.is_none() && reusable(trial, target) && process.exited().is_none();
    if hand_on {
        slot.running = Some(Running {
            process,
            launch,
            dir: process_dir,
        });
    } else {
        process.kill();
    }
    let mut output = cast.finish(timeline.now(), error.map(|error| error.to_string()));
    if let Some(query) = &target.effects {
        let read = match rows.take() {
            Some(rows) => rows.read().await,
            None => match effects::Effects::open(query, trial).await {
                Ok(rows) => rows.read().await,
                Err(why) => Err(why),
            },
        };
        match read {
            Ok(rows) => effects::record(
                &mut output.ledger,
                rows,
                &scenario.workload.tool,
                wall_start,
            ),
            Err(why) => {
                output
                    .error
                    .get_or_insert(format!("target '{}' [effects]: {why}", target.name));
            }
        }
    }
    Ok(Some((output, time.target_retention)))
}

/// Refuses a pairing whose claim and effects do not meet: a target whose
/// effects are rows in its database is judged only by scenarios that claim
/// one database mutation, and with no fault that waits for a dispatch to
/// the provider (it never comes).
fn in_database(trial: &Trial<'_>, target: &TargetFile) -> Result<()> {
    let scenario = trial.scenario;
    let not_live = |why: String| {
        Err(Error::NotLive {
            scenario: scenario.name.clone(),
            why,
        }
        .into())
    };
    let claims_rows = scenario.claim.boundary == Boundary::DatabaseMutation;
    match (&target.effects, claims_rows) {
        (None, true) => not_live(format!(
            "it claims one database mutation per operation (boundary = \"database-mutation\"), and target '{}' has no [effects] query to count its rows; add one to its target file, or run a scenario whose boundary is at the provider",
            target.name
        )),
        (Some(_), false) => not_live(format!(
            "target '{}' keeps its effects in its database ([effects] in its target file), and the scenario claims {} (boundary = \"{}\"); run scenarios with boundary = \"database-mutation\", e.g. scenarios/database/*.toml",
            target.name,
            scenario.claim.boundary.describe(),
            scenario.claim.boundary.as_str()
        )),
        (Some(_), true) => {
            // A crash after the Nth commit is the one verdict on a dispatch
            // a row can stand for (the driver watches the rows, and the Nth
            // row is the Nth commit); every other one needs a request to the
            // provider, which never comes.
            let needs_the_provider = |fault: &&Fault| {
                fault
                    .dispatch_verdicts()
                    .any(|action| !matches!(action, Action::CrashAfterCommit { .. }))
            };
            match scenario.faults.iter().find(needs_the_provider) {
                Some(fault) => not_live(format!(
                    "fault '{fault}' acts on dispatches to the provider, and target '{}' writes its effects to its own database without one; use crash-target at after-commit (the Nth row written), or faults on the agent's side (lose-response at target-to-agent, delay, replan, crash-agent, revoke, advance-clock)",
                    target.name
                )),
                None => Ok(()),
            }
        }
        (None, false) => Ok(()),
    }
}

/// Stripe's idempotency contract is fixed: keys kept 24 hours, every answer
/// saved (a 500 too), objects fetched by id. A scenario that declares
/// another provider would be judged against a contract the target never
/// met, so it is not run against a Stripe-shaped provider.
const STRIPE_RETENTION: Duration = Duration::from_secs(24 * 3600);

fn refuse_unless_stripe(trial: &Trial<'_>, target: &TargetFile) -> Result<()> {
    let scenario = trial.scenario;
    let provider = &scenario.provider;
    let contradiction = if provider.profile != ProviderProfile::Keyed {
        Some(format!(
            "it declares a '{}' provider, and Stripe deduplicates by Idempotency-Key (keyed)",
            provider.profile.as_str()
        ))
    } else if provider.retention != Some(STRIPE_RETENTION) {
        Some(format!(
            "it declares the provider keeps keys {}, and Stripe keeps them 24h",
            provider
                .retention
                .map_or("forever".to_owned(), |kept| humantime::format_duration(
                    kept
                )
                .to_string())
        ))
    } else if matches!(provider.lookup, LookupCapability::Lagging(_)) {
        Some("it declares a lagging lookup, and Stripe's GET of an object by id is exact".into())
    } else if !provider.saves_errors
        && scenario
            .faults
            .iter()
            .any(|fault| matches!(fault, Fault::ProviderError(_)))
    {
        Some("its provider errors are not saved under the key (no saves-errors = true), and Stripe saves a 500 and replays it".into())
    } else {
        None
    };
    match contradiction {
        Some(why) => Err(Error::NotLive {
            scenario: scenario.name.clone(),
            why: format!(
                "target '{}' talks to a Stripe-shaped provider ([provider] api = \"stripe\"), and {why}; run scenarios whose [provider] is profile = \"keyed\", retention = \"24h\" (and saves-errors = true with a provider-error fault)",
                target.name
            ),
        }
        .into()),
        None => Ok(()),
    }
}

/// Refuses a target that listens on its port beyond 127.0.0.1.
fn exposure(target: &TargetFile, target_addr: &str) -> Result<()> {
    let Some(port) = target_addr
        .rsplit(':')
        .next()
        .and_then(|port| port.parse::<u16>().ok())
    else {
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

/// Serves `handler` on `listener` (a slot's port on 127.0.0.1) until
/// `stopped` ends; returns `host:port`. The server runs on the trial's
/// runtime, so the connections it accepted end with the trial; the port
/// stays the slot's.
fn serve_for_trial(
    listener: &std::net::TcpListener,
    handler: http::Handler,
    mut stopped: watch::Receiver<()>,
) -> Result<String> {
    let listener = net::for_this_trial(listener).map_err(Error::Listen)?;
    let addr = listener.local_addr().map_err(Error::Listen)?;
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

/// Whether a process may serve `trial` after serving others, and be kept
/// for the next: not when the target file asks for a fresh process, and not
/// in a scenario that kills the target (it gets a process of its own, and
/// the one it restarted goes with it).
fn reusable(trial: &Trial<'_>, target: &TargetFile) -> bool {
    !target.fresh_process
        && !trial
            .scenario
            .faults
            .iter()
            .any(|fault| fault.live() == Live::Restarts)
}

/// One readiness probe of a kept process.
async fn healthy(addr: &str) -> bool {
    matches!(
        http::call(&TcpNetwork, addr, Request::get("/healthz"), PROBE_TIMEOUT).await,
        Ok(response) if response.status == 200
    )
}

/// The target's command and its `CHAOS_*` environment for this trial.
fn launch(
    target: &TargetFile,
    trial: &Trial<'_>,
    time: &schedule::LiveTime,
    process_dir: &Path,
    target_addr: &str,
    provider_addr: &str,
    authority_addr: &str,
) -> Launch {
    let state = process_dir.join("state");
    let _ = std::fs::create_dir_all(&state);
    let provider_url = match target.provider_api {
        ProviderApi::Chaos | ProviderApi::Stripe => format!("http://{provider_addr}"),
        ProviderApi::Smtp => format!("smtp://{provider_addr}"),
    };
    let mut env: Vec<(String, String)> = vec![
        (env_vars::LISTEN_ADDR.into(), target_addr.into()),
        (env_vars::PROVIDER_URL.into(), provider_url.clone()),
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
    let provider = &trial.scenario.provider;
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
    if provider.saves_errors || target.provider_api == ProviderApi::Stripe {
        env.push((env_vars::PROVIDER_SAVES_ERRORS.into(), "true".into()));
    }
    if let Some(retention) = time.target_retention {
        env.push((
            env_vars::RETENTION_MS.into(),
            retention.as_millis().to_string(),
        ));
    }
    let facts = RunFacts {
        listen_addr: target_addr,
        provider_url: &provider_url,
        authority_url: &format!("http://{authority_addr}"),
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
    }
}

/// Starts the target and waits until `GET /healthz` answers 200; `None` when
/// cancelled meanwhile.
async fn start(
    launch: &Launch,
    addr: &str,
    target: &TargetFile,
    cancel: &AtomicBool,
) -> Result<Option<TargetProcess>> {
    let mut process = TargetProcess::spawn(launch)?;
    let deadline = Instant::now() + target.ready_timeout;
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
        let last =
            match http::call(&TcpNetwork, addr, Request::get("/healthz"), PROBE_TIMEOUT).await {
                Ok(response) if response.status == 200 => {
                    let port = addr.rsplit(':').next().and_then(|port| port.parse().ok());
                    let taken = port.and_then(|port| held_by_group(port, process.group()));
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
                Ok(response) => format!("status {}", response.status),
                Err(failure) => failure.to_string(),
            };
        if Instant::now() >= deadline {
            return Err(Error::NeverReady {
                target: target.name.clone(),
                command: launch.display(),
                addr: addr.to_owned(),
                timeout: target.ready_timeout,
                last,
                stderr: process.stderr_tail(),
            }
            .into());
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
        .filter(|fault| fault.live() == Live::Restarts)
        .count() as u32;
    // A `Retry-After` wait is bounded by the budget left, or else by an
    // attempt's timeout; a `retry-for` budget runs per worker, and the
    // workers of a call run side by side.
    let retry_for: Duration = timing.retry_for.unwrap_or_default() * trial.calls.len() as u32;
    (timing.agent_timeout * 2 + timing.backoff_max) * attempts
        + retry_for * 2
        + waits
        + (target.ready_timeout + Duration::from_secs(1)) * restarts
        + Duration::from_secs(10)
}

/// What one thread keeps between the trials it runs: the ports the
/// harness's servers listen on and the target's, so a process started for
/// one trial can serve the next, and that process, if it may.
struct Slot {
    provider: std::net::TcpListener,
    authority: std::net::TcpListener,
    target_addr: String,
    /// Each process's state and logs, in a directory of its own below.
    dir: TrialDir,
    processes: u64,
    running: Option<Running>,
}

/// A target process kept between trials, with how it was started.
struct Running {
    process: TargetProcess,
    launch: Launch,
    dir: PathBuf,
}

impl Slot {
    fn open() -> Result<Slot> {
        let listen = || bind_loopback().map_err(|error| Box::new(Error::Listen(error)));
        Ok(Slot {
            provider: listen()?,
            authority: listen()?,
            target_addr: format!("{LOOPBACK}:{}", reserve_port().map_err(Error::NoPort)?),
            dir: TrialDir::create().map_err(Error::StateDir)?,
            processes: 0,
            running: None,
        })
    }

    /// A new, empty directory for the next process's state and logs; the
    /// previous process's goes (a new process starts from nothing, as
    /// `fresh-process` promises, while a restart keeps its state).
    fn new_process_dir(&mut self) -> std::io::Result<PathBuf> {
        if self.processes > 0 {
            let _ = std::fs::remove_dir_all(self.dir.path.join(self.processes.to_string()));
        }
        self.processes += 1;
        let dir = self.dir.path.join(self.processes.to_string());
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        // Before the directory it writes to goes.
        if let Some(running) = &mut self.running {
            running.process.kill();
        }
    }
}

/// A directory for one slot (its processes' state, their logs), removed when dropped.
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
