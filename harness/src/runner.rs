//! Runs every (scenario, target, seed) trial, plans it, runs it (simulated or
//! live), checks it, and folds the verdicts into one [`Summary`]. Simulated
//! trials are independent, so they run on every core, each simulation living
//! and dying on one thread; live trials then run one at a time, since they
//! share the machine's real time and services.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::check::{self, Status, Verdict};
use crate::history::RunOutput;
use crate::live;
use crate::plan::{Timing, Trial};
use crate::report::{rerun_command, CellSummary, Payloads, SeedFailure, Summary, TargetMeta};
use crate::scenario::Scenario;
use crate::sim;
use crate::targets::{ReferenceTarget, Target};

/// How many failing seeds per cell keep their full detail in the report, by
/// default (`--keep-failures`).
pub const FAILURES_KEPT_PER_CELL: usize = 5;

/// The seeds of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seeds {
    /// `count` consecutive seeds from `first`.
    Range { first: u64, count: u64 },
    /// Exactly one seed (a rerun).
    One(u64),
}

impl Seeds {
    pub fn iter(self) -> impl Iterator<Item = u64> {
        let (first, count) = match self {
            Seeds::Range { first, count } => (first, count),
            Seeds::One(seed) => (seed, 1),
        };
        (0..count).map(move |offset| first.wrapping_add(offset))
    }

    pub fn count(self) -> u64 {
        match self {
            Seeds::Range { count, .. } => count,
            Seeds::One(_) => 1,
        }
    }
}

impl std::fmt::Display for Seeds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Seeds::One(seed) => write!(f, "seed {seed}"),
            Seeds::Range { first, count } => {
                write!(
                    f,
                    "seeds {first}..={} ({count} per cell)",
                    first.wrapping_add(count.saturating_sub(1))
                )
            }
        }
    }
}

/// One shard of a run: `--partition K/N` takes every Nth trial of the
/// (scenario, target, seed) list, starting with the Kth. Round-robin spreads
/// every cell over every shard, so shards take about the same time; the same
/// command with 1/N to N/N covers every trial exactly once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Partition {
    /// 1-based.
    pub index: u64,
    pub total: u64,
}

impl Partition {
    /// Whether the trial at `position` (0-based, in run order) is this shard's.
    pub fn contains(self, position: u64) -> bool {
        position % self.total == self.index - 1
    }
}

impl std::fmt::Display for Partition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.total)
    }
}

impl std::str::FromStr for Partition {
    type Err = String;

    fn from_str(text: &str) -> Result<Partition, String> {
        let usage = || format!("bad partition '{text}': write K/N with 1 <= K <= N, e.g. 2/4");
        let (index, total) = text.split_once('/').ok_or_else(usage)?;
        let index: u64 = index.trim().parse().map_err(|_| usage())?;
        let total: u64 = total.trim().parse().map_err(|_| usage())?;
        if index == 0 || total == 0 || index > total {
            return Err(usage());
        }
        Ok(Partition { index, total })
    }
}

/// What a run covers, beyond its scenarios and targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sweep {
    pub seeds: Seeds,
    /// Run only this shard's trials.
    pub partition: Option<Partition>,
    /// Whether failing seeds' records carry payload bytes and the token.
    pub payloads: Payloads,
    /// How many non-passing seeds per cell keep their full record (the first
    /// failing and first undecided seeds always do).
    pub failures_kept: usize,
}

impl Sweep {
    pub fn new(seeds: Seeds) -> Sweep {
        Sweep {
            seeds,
            partition: None,
            payloads: Payloads::Redacted,
            failures_kept: FAILURES_KEPT_PER_CELL,
        }
    }
}

/// Observes progress; called from worker threads.
pub trait Progress: Sync {
    /// Called once, before the first trial, with how many will run.
    fn started(&self, _total: usize) {}
    fn trial_done(&self, done: usize, total: usize);
}

impl Progress for () {
    fn trial_done(&self, _: usize, _: usize) {}
}

/// Runs one trial and judges it; a panic anywhere inside is an `unknown`
/// verdict for that trial, never a crash of the whole run.
pub fn run_trial(
    scenario: &Scenario,
    target: &ReferenceTarget,
    seed: u64,
) -> (Verdict, Option<RunOutput>) {
    judge(&plan(scenario, seed), target)
}

fn plan(scenario: &Scenario, seed: u64) -> Trial<'_> {
    Trial::new(scenario, seed, Timing::simulated(scenario))
}

fn judge(trial: &Trial<'_>, target: &ReferenceTarget) -> (Verdict, Option<RunOutput>) {
    let run = match catch_unwind(AssertUnwindSafe(|| sim::simulate(trial, target))) {
        Ok(run) => run,
        Err(panic) => {
            return (
                Verdict::undecided(format!(
                    "the simulation panicked: {}",
                    panic_message(&panic)
                )),
                None,
            )
        }
    };
    match catch_unwind(AssertUnwindSafe(|| check::check(trial, &target.info, &run))) {
        Ok(verdict) => (verdict, Some(run)),
        Err(panic) => (
            Verdict::undecided(format!("the checker failed: {}", panic_message(&panic))),
            Some(run),
        ),
    }
}

/// Runs every trial and summarises. Returns `None` if `cancel` was set before
/// the run finished: a partial run is never reported as if it were whole.
pub fn run(
    scenarios: &[Scenario],
    targets: &[ReferenceTarget],
    seeds: Seeds,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Option<Summary> {
    run_sweep(scenarios, targets, Sweep::new(seeds), progress, cancel)
}

/// Runs this sweep's trials of the reference targets (every one, or one
/// shard's) in the simulator and summarises.
pub fn run_sweep(
    scenarios: &[Scenario],
    targets: &[ReferenceTarget],
    sweep: Sweep,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Option<Summary> {
    let targets: Vec<Target> = targets.iter().cloned().map(Target::Sim).collect();
    run_targets(scenarios, &targets, sweep, progress, cancel)
}

/// Runs this sweep's trials (every one, or one shard's) of targets of any
/// transport and summarises.
///
/// Each cell folds its verdicts as they come, keeping the full record of at
/// most a few failing seeds, so memory stays bounded however many seeds run.
/// The fold is order-independent: the same trials give the same summary on
/// any number of threads, and shards merged give the unsharded summary.
pub fn run_targets(
    scenarios: &[Scenario],
    targets: &[Target],
    sweep: Sweep,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Option<Summary> {
    let per_cell = sweep.seeds.count();
    let cell_count = (scenarios.len() * targets.len()) as u64;
    let first_seed = sweep.seeds.iter().next().unwrap_or(0);
    let mine = |position: u64| sweep.partition.is_none_or(|shard| shard.contains(position));
    let trials = cell_count.saturating_mul(per_cell);
    let total = match sweep.partition {
        // The positions p < trials with p % N == K - 1.
        Some(shard) => trials.saturating_add(shard.total - shard.index) / shard.total,
        None => trials,
    } as usize;
    let done = AtomicUsize::new(0);
    progress.started(total);

    let cells: Vec<Mutex<CellSummary>> = (0..cell_count as usize)
        .map(|cell| {
            let scenario = &scenarios[cell / targets.len()];
            let target = &targets[cell % targets.len()];
            Mutex::new(CellSummary::new(
                scenario,
                target.name(),
                expected_effects(scenario),
            ))
        })
        .collect();

    let cell_of = |position: u64| (position / per_cell) as usize;
    let is_live = |position: u64| {
        matches!(
            targets[cell_of(position) % targets.len()],
            Target::Live { .. }
        )
    };
    let fold = |position: u64, trial: &Trial<'_>, verdict: Verdict, run: Option<&RunOutput>| {
        let cell = cell_of(position);
        let seed = trial.seed;
        let scenario = trial.scenario;
        let target = &targets[cell % targets.len()];
        let wanted = verdict.status != Status::Pass
            && lock(&cells[cell]).wants(seed, verdict.status, first_seed, sweep.failures_kept);
        let failure = wanted.then(|| {
            let rerun = rerun_command(&scenario.path.display().to_string(), target.arg(), seed);
            let trace = run.map(|run| (trial, run));
            SeedFailure::new(seed, verdict.clone(), rerun, trace, sweep.payloads)
        });
        {
            let mut summary = lock(&cells[cell]);
            summary.add(&verdict);
            if let Some(failure) = failure {
                summary.keep(failure, first_seed, sweep.failures_kept);
            }
        }
        progress.trial_done(done.fetch_add(1, Ordering::Relaxed) + 1, total);
    };

    (0..trials)
        .into_par_iter()
        .filter(|&position| mine(position) && !is_live(position))
        .for_each(|position| {
            if cancel.load(Ordering::Relaxed) {
                return;
            }
            let cell = cell_of(position);
            let seed = first_seed.wrapping_add(position % per_cell);
            let scenario = &scenarios[cell / targets.len()];
            let Target::Sim(target) = &targets[cell % targets.len()] else {
                unreachable!("live trials are filtered out")
            };
            let trial = plan(scenario, seed);
            let (verdict, run) = judge(&trial, target);
            fold(position, &trial, verdict, run.as_ref());
        });
    if cancel.load(Ordering::Relaxed) {
        return None;
    }

    // Live trials, one at a time. A target is built once, before its first
    // trial; a trial that cannot run at all (the target never gets ready, the
    // scenario cannot be done live) ends its cell: the rest of its seeds would
    // say the same, and the run goes on with the next cell.
    let mut built: Vec<Option<Result<(), String>>> = vec![None; targets.len()];
    let mut blocked_cell = None;
    for position in (0..trials).filter(|&position| mine(position) && is_live(position)) {
        let cell = cell_of(position);
        if blocked_cell == Some(cell) {
            continue;
        }
        let Target::Live { file, .. } = &targets[cell % targets.len()] else {
            unreachable!("only live trials are left")
        };
        let scenario = &scenarios[cell / targets.len()];
        let seed = first_seed.wrapping_add(position % per_cell);
        let built = built[cell % targets.len()].get_or_insert_with(|| live::build(file, cancel));
        let judged = live::judge_trial(scenario, file, built, seed, cancel)?;
        if judged.cell_blocked {
            blocked_cell = Some(cell);
        }
        fold(position, &judged.trial, judged.verdict, judged.run.as_ref());
    }
    if cancel.load(Ordering::Relaxed) {
        return None;
    }

    let cells = cells
        .into_iter()
        .map(|cell| {
            cell.into_inner()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
        })
        // A shard reports only the cells it ran; a whole run reports them all.
        .filter(|cell| sweep.partition.is_none() || cell.seeds_run > 0)
        .map(|mut cell| {
            cell.settle();
            cell
        })
        .collect();
    let metas = targets
        .iter()
        .map(|target| TargetMeta::of(&target.info(), target.transport()))
        .collect();
    let mut summary = Summary::for_targets(scenarios, metas, sweep.seeds, cells);
    summary.partition = sweep.partition;
    summary.payloads = sweep.payloads;
    summary.failures_kept_per_cell = sweep.failures_kept;
    Some(summary)
}

/// The most effects the scenario allows any one operation, before retention.
fn expected_effects(scenario: &Scenario) -> u32 {
    scenario
        .operations()
        .iter()
        .map(|operation| scenario.expected_effects(operation))
        .max()
        .unwrap_or(0)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|message| (*message).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with no message".into())
}
