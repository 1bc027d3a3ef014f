//! Folds judged trials into a [`Summary`], cell by cell, as they come.
//!
//! Each cell keeps its counts and the full record of at most a few failing
//! seeds, so memory stays bounded however many seeds run. The fold is
//! order-independent: the same trials give the same summary on any number of
//! threads, and shards merged give the unsharded summary.

use std::sync::Mutex;

use super::{CellSummary, SeedFailure, Summary, TargetMeta};
use crate::check::Status;
use crate::scenario::Scenario;
use crate::sweep::{rerun_command, Sweep};
use crate::trial::Judged;

/// A column of the run: what the report says of the target, and how
/// `--target` named it (rerun commands repeat that).
#[derive(Debug, Clone)]
pub(crate) struct Column {
    pub meta: TargetMeta,
    pub arg: String,
}

pub(crate) struct Fold<'a> {
    scenarios: &'a [Scenario],
    columns: Vec<Column>,
    sweep: Sweep,
    /// Scenario-major: cell `s * columns + t`.
    cells: Vec<Mutex<CellSummary>>,
}

impl<'a> Fold<'a> {
    pub(crate) fn new(scenarios: &'a [Scenario], columns: Vec<Column>, sweep: Sweep) -> Fold<'a> {
        let cells = scenarios
            .iter()
            .flat_map(|scenario| {
                columns.iter().map(move |column| {
                    Mutex::new(CellSummary::new(
                        scenario,
                        &column.meta.name,
                        most_effects_allowed(scenario),
                    ))
                })
            })
            .collect();
        Fold {
            scenarios,
            columns,
            sweep,
            cells,
        }
    }

    /// Folds one judged trial into cell `cell`; safe from any thread.
    pub(crate) fn add(&self, cell: usize, judged: &Judged<'_>) {
        let first_seed = self.sweep.seeds.first();
        let limit = self.sweep.failures_kept;
        let seed = judged.trial.seed;
        let verdict = &judged.verdict;
        let wanted = verdict.status != Status::Pass
            && lock(&self.cells[cell]).wants(seed, verdict.status, first_seed, limit);
        // Building a record is the costly part: only for seeds that will keep it.
        let failure = wanted.then(|| {
            let column = &self.columns[cell % self.columns.len()];
            let scenario = judged.trial.scenario;
            let rerun = rerun_command(&scenario.path.display().to_string(), &column.arg, seed);
            let trace = judged.run.as_ref().map(|run| (&judged.trial, run));
            SeedFailure::new(seed, verdict.clone(), rerun, trace, self.sweep.payloads)
        });
        let mut summary = lock(&self.cells[cell]);
        summary.add(verdict);
        if let Some(failure) = failure {
            summary.keep(failure, first_seed, limit);
        }
    }

    /// The summary of every trial folded in.
    pub(crate) fn finish(self) -> Summary {
        let sharded = self.sweep.partition.is_some();
        let cells = self
            .cells
            .into_iter()
            .map(|cell| {
                cell.into_inner()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
            })
            // A shard reports only the cells it ran; a whole run reports them all.
            .filter(|cell| !sharded || cell.seeds_run > 0)
            .map(|mut cell| {
                cell.settle();
                cell
            })
            .collect();
        let metas = self.columns.into_iter().map(|column| column.meta).collect();
        let mut summary = Summary::for_targets(self.scenarios, metas, self.sweep.seeds, cells);
        summary.partition = self.sweep.partition;
        summary.payloads = self.sweep.payloads;
        summary.failures_kept_per_cell = self.sweep.failures_kept;
        summary
    }
}

/// The most effects the scenario allows any one operation, before retention.
fn most_effects_allowed(scenario: &Scenario) -> u32 {
    scenario
        .operations
        .iter()
        .map(|operation| scenario.expected_effects(&operation.name))
        .max()
        .unwrap_or(0)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
