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
//! environment differs, its scenario kills the target, a request of its
//! trial is still open at the provider (the process is still working on
//! it), or the target file asks for `fresh-process`; each trial still gets
//! its own runtime, so whatever it started (held answers, connections) ends
//! with it. A request that carries the subject of a trial the process served
//! before is that trial's late work: its provider records it apart
//! (`Ledger::late`), and the report counts it against that trial.
//!
//! A trial goes along the simulator's seams, one file each: whether the
//! cell can run live at all, decided once before any process starts
//! ([`admit`]); the target built, started or reused ([`start`], [`slot`]);
//! the harness's servers and the caller ([`run`]); the watch loop, which
//! shares the simulator's crash schedule: where `sim` calls `sim.crash` and
//! `sim.bounce`, it SIGKILLs the target's process group when the nemesis
//! asks and starts the same command on the same state directory after
//! `restart-after` ([`watch`]); clock jumps become waits ([`schedule`]). The
//! output is the same `RunOutput`, judged by the same checkers; a trial that
//! could not run at all is an honest `unknown`.

mod admit;
pub(crate) mod authority;
mod containment;
mod effects;
mod error;
mod launch;
pub(crate) mod listing;
mod net;
mod redact;
mod run;
pub(crate) mod schedule;
mod slot;
mod start;
mod stdio;
mod watch;

use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::thread::ThreadId;

use crate::plan::{Timing, Trial};
use crate::scenario::Scenario;
use crate::sweep::{Payloads, Transport};
use crate::target_file::TargetFile;
use crate::trial::{Concurrency, Driver, Run};
pub(crate) use error::Error;
use slot::Slot;

/// Ends every target process still running, then deletes the queues the
/// run created on a broker: for exits that cannot wait for the owners'
/// guards (a second Ctrl-C).
pub(crate) fn end_all_targets() {
    launch::end_all();
    crate::way_in::broker::delete_created(None);
}

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
    /// Redacted: the target's secrets are masked in every message it hands on.
    payloads: Payloads,
}

/// The target's processes first, then what its way in set up (a broker's
/// queue): a queue deleted under a live consumer would read as the
/// consumer's failure.
impl Drop for LiveDriver<'_> {
    fn drop(&mut self) {
        self.slots().clear();
        self.file.way_in.take_down();
    }
}

impl<'a> LiveDriver<'a> {
    /// `keep_trying`: a target that never gets ready is still tried in
    /// every cell (`--keep-trying`), not given up on after the first.
    pub(crate) fn new(
        file: &'a TargetFile,
        keep_trying: bool,
        payloads: Payloads,
    ) -> LiveDriver<'a> {
        containment::become_subreaper();
        sweep_dead_runs_once();
        LiveDriver {
            file,
            built: OnceLock::new(),
            slots: Mutex::new(HashMap::new()),
            starts: Starts::default(),
            given_up: OnceLock::new(),
            keep_trying,
            payloads,
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

impl LiveDriver<'_> {
    /// One trial, its messages as they came.
    fn run_unmasked(&self, trial: &Trial<'_>, cancel: &AtomicBool) -> Run {
        if let Some(reason) = self.given_up.get() {
            return Run::Blocked {
                reason: reason.clone(),
            };
        }
        let built = self
            .built
            .get_or_init(|| start::build(self.file, cancel).map_err(|error| error.to_string()));
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
        let ran = run::run_trial(
            trial,
            self.file,
            cancel,
            &mut slot,
            &self.starts,
            self.payloads,
        );
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

    fn admit(&self, trial: &Trial<'_>) -> std::result::Result<(), String> {
        admit::admit(self.file, trial)
    }

    fn agent_timing(&self) -> Option<Timing> {
        Some(Timing::live_with(&self.file.agent))
    }

    fn run(&self, trial: &Trial<'_>, cancel: &AtomicBool) -> Run {
        let secrets = redact::Secrets::of(self.file, trial, self.payloads);
        match self.run_unmasked(trial, cancel) {
            Run::Ran { mut output, target } => {
                secrets.mask_output(&mut output);
                Run::Ran { output, target }
            }
            Run::Blocked { reason } => Run::Blocked {
                reason: secrets.mask(&reason),
            },
            Run::Cancelled => Run::Cancelled,
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
                "chaos: target '{}': {trials} trial(s) on {processes} process start(s){}{}",
                self.file.name,
                if self.file.fresh_process {
                    " (fresh-process = true: one per trial, and each restart)"
                } else {
                    " (a process serves the next trial unless its scenario kills it or it is still working; fresh-process = true starts one per trial)"
                },
                reuse_notes(
                    self.starts.replaced.load(Ordering::Relaxed),
                    self.starts.late.load(Ordering::Relaxed)
                ),
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
    /// Processes that could have served the next trial but were replaced:
    /// a request of their last trial was still open at the provider.
    replaced: AtomicU64,
    /// Effects of an earlier trial that reached a later one's provider.
    late: AtomicU64,
}

impl Starts {
    fn got_ready(&self) {
        self.ready.store(true, Ordering::Relaxed);
        self.processes.fetch_add(1, Ordering::Relaxed);
    }
}

/// What the end-of-run line adds when reuse met a process still working
/// after its trial: how many were replaced, and how many late effects were
/// told apart (each a `late-effect` warning of its own trial).
fn reuse_notes(replaced: u64, late: u64) -> String {
    let mut notes = String::new();
    if replaced > 0 {
        notes.push_str(&format!(
            "; {replaced} process(es) not kept for a next trial: a request of their trial was still open at the provider (the process kept working after answering)"
        ));
    }
    if late > 0 {
        notes.push_str(&format!(
            "; {late} late effect(s) of an earlier trial arrived during a later one and were attributed to their own trial (late-effect warnings); set fresh-process = true to start a process per trial"
        ));
    }
    notes
}

/// What chaos runs that were SIGKILLed left behind (their state folders, and
/// what their targets started), cleaned once per process, before its first
/// target starts.
fn sweep_dead_runs_once() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let strays = containment::sweep_dead_runs();
        if !strays.is_empty() {
            let listed: Vec<String> = strays.iter().map(ToString::to_string).collect();
            // A closed stderr is no reason to stop (issue 15).
            let _ = writeln!(
                std::io::stderr(),
                "chaos: warning: killed {} process(es) left running by an earlier chaos run that was killed: {}",
                strays.len(),
                listed.join(", ")
            );
        }
    });
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
