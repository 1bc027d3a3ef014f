//! Runs every (scenario, target, seed) trial, plans it, runs it (simulated or
//! live), checks it, and folds the verdicts into one [`Summary`]. Simulated
//! trials are independent, so they run on every core, each simulation living
//! and dying on one thread; live trials then run one at a time, since they
//! share the machine's real time and services.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use rayon::prelude::*;

use crate::check::{self, Status, Verdict};
use crate::history::RunOutput;
use crate::live;
use crate::plan::{Timing, Trial};
use crate::report::{rerun_command, CellSummary, SeedFailure, Summary, TargetMeta};
use crate::scenario::Scenario;
use crate::sim;
use crate::targets::{ReferenceTarget, Target};

/// How many failing seeds per cell keep their full detail in the report.
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

/// Observes progress; called from worker threads.
pub trait Progress: Sync {
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
    let trial = Trial::new(scenario, seed, Timing::simulated(scenario));
    let run = match catch_unwind(AssertUnwindSafe(|| sim::simulate(&trial, target))) {
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
    match catch_unwind(AssertUnwindSafe(|| {
        check::check(&trial, &target.info, &run)
    })) {
        Ok(verdict) => (verdict, Some(run)),
        Err(panic) => (
            Verdict::undecided(format!("the checker failed: {}", panic_message(&panic))),
            Some(run),
        ),
    }
}

/// Runs every trial of the reference targets in the simulator and summarises.
/// Returns `None` if `cancel` was set before the run finished: a partial run
/// is never reported as if it were whole.
pub fn run(
    scenarios: &[Scenario],
    targets: &[ReferenceTarget],
    seeds: Seeds,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Option<Summary> {
    let targets: Vec<Target> = targets.iter().cloned().map(Target::Sim).collect();
    run_targets(scenarios, &targets, seeds, progress, cancel)
}

/// Runs every trial of any targets, simulated and live, and summarises.
pub fn run_targets(
    scenarios: &[Scenario],
    targets: &[Target],
    seeds: Seeds,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Option<Summary> {
    let seed_list: Vec<u64> = seeds.iter().collect();
    let cells: Vec<(usize, usize)> = (0..scenarios.len())
        .flat_map(|scenario| (0..targets.len()).map(move |target| (scenario, target)))
        .collect();
    let sim_trials: Vec<(usize, usize, u64)> = cells
        .iter()
        .filter_map(|&(scenario, target)| match &targets[target] {
            Target::Sim(reference) => Some((scenario, target, reference)),
            Target::Live { .. } => None,
        })
        .flat_map(|(scenario, target, _)| {
            seed_list.iter().map(move |&seed| (scenario, target, seed))
        })
        .collect();
    let total = cells.len() * seed_list.len();
    let done = AtomicUsize::new(0);
    let trial_done = || progress.trial_done(done.fetch_add(1, Ordering::Relaxed) + 1, total);

    let sim_verdicts: Vec<Option<Verdict>> = sim_trials
        .par_iter()
        .map(|&(scenario, target, seed)| {
            if cancel.load(Ordering::Relaxed) {
                return None;
            }
            let Target::Sim(reference) = &targets[target] else {
                unreachable!("only simulated targets are in this list")
            };
            let (verdict, _) = run_trial(&scenarios[scenario], reference, seed);
            trial_done();
            Some(verdict)
        })
        .collect();
    if cancel.load(Ordering::Relaxed) {
        return None;
    }
    let mut sim_verdicts = sim_verdicts.into_iter();

    // A live target is built once per run, before its first trial.
    let mut built: Vec<Option<Result<(), String>>> = vec![None; targets.len()];
    let mut summaries = Vec::with_capacity(cells.len());
    for (scenario, target) in cells {
        let judged: Vec<(u64, Verdict)> = match &targets[target] {
            Target::Sim(_) => seed_list
                .iter()
                .zip(sim_verdicts.by_ref().take(seed_list.len()))
                .filter_map(|(&seed, verdict)| Some((seed, verdict?)))
                .collect(),
            Target::Live { file, .. } => {
                let built = built[target].get_or_insert_with(|| live::build(file, cancel));
                live::run_cell(
                    &scenarios[scenario],
                    file,
                    built,
                    &seed_list,
                    cancel,
                    &trial_done,
                )?
            }
        };
        summaries.push(summarise_cell(
            &scenarios[scenario],
            &targets[target],
            judged,
        ));
    }
    if cancel.load(Ordering::Relaxed) {
        return None;
    }
    let metas = targets
        .iter()
        .map(|target| TargetMeta::of(&target.info(), target.transport()))
        .collect();
    Some(Summary::for_targets(scenarios, metas, seeds, summaries))
}

fn summarise_cell(
    scenario: &Scenario,
    target: &Target,
    judged: Vec<(u64, Verdict)>,
) -> CellSummary {
    let expected_effects = scenario
        .operations()
        .iter()
        .map(|operation| scenario.expected_effects(operation))
        .max()
        .unwrap_or(0);
    let mut cell = CellSummary::new(scenario, target.name(), expected_effects);
    for (seed, verdict) in judged {
        cell.seeds_run += 1;
        let most_effects = verdict
            .operations
            .iter()
            .map(|operation| operation.effects)
            .max()
            .unwrap_or(0);
        cell.effects_observed_max = cell.effects_observed_max.max(most_effects);
        // Calls past the target's declared retention may add effects: show the
        // most this cell ever allowed, not only the scenario's base expectation.
        let most_allowed = verdict
            .operations
            .iter()
            .map(|operation| operation.expected_effects_max)
            .max()
            .unwrap_or(0);
        cell.effects_expected = cell.effects_expected.max(most_allowed);
        match verdict.status {
            Status::Pass => {}
            Status::Unknown => cell.seeds_unknown += 1,
            Status::Fail => cell.seeds_failed += 1,
        }
        cell.safety = cell.safety.max(verdict.safety);
        cell.liveness = cell.liveness.max(verdict.liveness);
        if verdict.status != Status::Pass && cell.failures.len() < FAILURES_KEPT_PER_CELL {
            cell.failures.push(SeedFailure::new(seed, verdict));
        }
    }
    cell.settle();
    // A target file named by its path is rerun by its path.
    if target.arg() != target.name() {
        cell.rerun = cell
            .first_failing_seed
            .or(cell.first_undecided_seed)
            .map(|seed| rerun_command(&cell.scenario_path, target.arg(), seed));
    }
    cell
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|message| (*message).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with no message".into())
}
