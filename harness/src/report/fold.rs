//! Folds judged trials into a [`Summary`], cell by cell, as they come.
//!
//! Each cell keeps its counts and the full record of at most a few failing
//! seeds, so memory stays bounded however many seeds run. The fold is
//! order-independent: the same trials give the same summary on any number of
//! threads, and shards merged give the unsharded summary.
//!
//! A cell is done when all its trials (this shard's) are folded in, or one
//! could not run (the runner tries no more of it); the observer hears of it
//! then, in the order cells finish.

use chaos_kit::sync::lock;
use std::sync::Mutex;
use std::time::Duration;

use super::{verdict_label, CellSummary, CellWarning, Exclusion, SeedFailure, Summary, TargetMeta};
use crate::check::{Check, Status};
use crate::progress::{CellDone, Observer};
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
    cells: Vec<Mutex<Cell>>,
    observer: &'a dyn Observer,
    /// Cells done so far, of `tried`: those this run (shard) holds trials of.
    /// Held while the observer hears of the cell, so lines count up in the
    /// order they are written, whichever thread finishes a cell.
    done: Mutex<usize>,
    tried: usize,
}

struct Cell {
    summary: CellSummary,
    /// Why the pairing was excluded before running, if it was: no trial of
    /// it runs, and it is reported as an exclusion, not a cell.
    excluded: Option<String>,
    /// Trials folded in, whether they ran or not.
    folded: u64,
    /// How many trials of the cell this run (this shard) holds.
    expected: u64,
    /// The time its trials took, added up.
    elapsed: Duration,
    done: bool,
}

impl<'a> Fold<'a> {
    /// `excluded`, per cell (scenario-major): why the pairing is not run,
    /// for those decided so before running.
    pub(crate) fn new(
        scenarios: &'a [Scenario],
        columns: Vec<Column>,
        excluded: &[Option<String>],
        sweep: Sweep,
        observer: &'a dyn Observer,
    ) -> Fold<'a> {
        let per_cell = sweep.seeds.count();
        // Cell c holds positions c * per_cell .. (c + 1) * per_cell.
        let before = |cell: u64| {
            let positions = cell.saturating_mul(per_cell);
            sweep
                .partition
                .map_or(positions, |shard| shard.share_of(positions))
        };
        let cells = scenarios
            .iter()
            .flat_map(|scenario| columns.iter().map(move |column| (scenario, column)))
            .enumerate()
            .map(|(index, (scenario, column))| {
                let reason = excluded.get(index).cloned().flatten();
                let index = index as u64;
                Mutex::new(Cell {
                    summary: CellSummary::new(
                        scenario,
                        &column.meta.name,
                        most_effects_allowed(scenario),
                    ),
                    expected: match reason {
                        Some(_) => 0,
                        None => before(index + 1) - before(index),
                    },
                    excluded: reason,
                    folded: 0,
                    elapsed: Duration::ZERO,
                    done: false,
                })
            })
            .collect::<Vec<Mutex<Cell>>>();
        let tried = cells.iter().filter(|cell| lock(cell).expected > 0).count();
        Fold {
            scenarios,
            columns,
            sweep,
            cells,
            observer,
            done: Mutex::new(0),
            tried,
        }
    }

    /// Folds one judged trial into cell `cell`; safe from any thread.
    pub(crate) fn add(&self, cell: usize, judged: &Judged<'_>) {
        self.late_effects(cell, judged);
        let first_seed = self.sweep.seeds.first();
        let limit = self.sweep.failures_kept;
        let seed = judged.trial.seed;
        let verdict = &judged.verdict;
        let wanted = verdict.status != Status::Pass
            && lock(&self.cells[cell])
                .summary
                .wants(seed, verdict.status, first_seed, limit);
        // Building a record is the costly part: only for seeds that will keep it.
        let failure = wanted.then(|| {
            let column = &self.columns[cell % self.columns.len()];
            let scenario = judged.trial.scenario;
            let rerun = rerun_command(&scenario.path.display().to_string(), &column.arg, seed);
            let trace = judged.run.as_ref().map(|run| (&judged.trial, run));
            SeedFailure::new(seed, verdict.clone(), rerun, trace, self.sweep.payloads)
        });
        let mut state = lock(&self.cells[cell]);
        match judged.not_run_reason() {
            Some(reason) => state.summary.add_not_run(seed, reason, first_seed),
            None => {
                let dispatches = (judged.run.as_ref())
                    .map(|run| u32::try_from(run.ledger.dispatches.len()).unwrap_or(u32::MAX));
                let acts = (judged.run.as_ref()).map(|run| run.history.faults.as_slice());
                state.summary.add(verdict, dispatches, acts);
                if let Some(mcp) = judged.run.as_ref().and_then(|run| run.history.mcp.as_ref()) {
                    state.summary.declare(&mcp.tools);
                    state.summary.mcp_cancelled += mcp.cancelled.len() as u64;
                    let sessions: std::collections::BTreeSet<&String> =
                        mcp.session_of.values().collect();
                    state.summary.mcp_sessions_max =
                        (state.summary.mcp_sessions_max).max(sessions.len() as u64);
                    for resumed in mcp.resumed.values() {
                        *(state.summary.mcp_resumed)
                            .entry(resumed.name().to_owned())
                            .or_default() += 1;
                    }
                }
                state.summary.warn(seed, first_seed, verdict, || {
                    let column = &self.columns[cell % self.columns.len()];
                    let path = judged.trial.scenario.path.display().to_string();
                    rerun_command(&path, &column.arg, seed)
                });
            }
        }
        if let Some(failure) = failure {
            state.summary.keep(failure, first_seed, limit);
        }
        state.folded += 1;
        state.elapsed += judged.elapsed;
        // A trial that could not run ends its cell: the runner tries no more.
        if state.done || (state.folded < state.expected && !judged.cell_blocked) {
            return;
        }
        state.done = true;
        let mut settled = state.summary.clone();
        let elapsed = state.elapsed;
        drop(state);
        settled.settle();
        if self.sweep.deny_warnings {
            settled.deny_warnings();
        }
        let mut done = self
            .done
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *done += 1;
        // Rendered here, not in progress: the report knows what a cell's
        // counts say, and progress stays below the report.
        self.observer.cell_finished(&CellDone {
            verdict: &verdict_label(&settled),
            scenario: &settled.scenario,
            target: &settled.target,
            observed: settled.observed(),
            elapsed,
            done: *done,
            cells: self.tried,
        });
    }

    /// The effects of earlier trials that reached `judged`'s provider (a
    /// reused process kept working after answering them): each is a
    /// `late-effect` warning of the trial it belongs to, in that trial's
    /// cell of the same target, never a finding of the trial it arrived in.
    fn late_effects(&self, cell: usize, judged: &Judged<'_>) {
        let Some(run) = &judged.run else {
            return;
        };
        let column = cell % self.columns.len();
        let first_seed = self.sweep.seeds.first();
        let arrived = (judged.trial.scenario.name.as_str(), judged.trial.seed);
        let mut trials: Vec<&crate::history::EarlierTrial> = Vec::new();
        for late in &run.ledger.late {
            if !trials.contains(&&late.of) {
                trials.push(&late.of);
            }
        }
        for of in trials {
            let Some(index) =
                (self.scenarios.iter()).position(|scenario| scenario.name == of.scenario)
            else {
                continue;
            };
            let effects: Vec<String> = (run.ledger.late.iter())
                .filter(|late| late.of == *of)
                .map(|late| {
                    format!(
                        "{} {} for {} at {} ms",
                        late.tool, late.receipt, late.subject, late.at
                    )
                })
                .collect();
            let warning = CellWarning {
                check: Check::LateEffect,
                seeds: 1,
                first_seed: of.seed,
                message: format!(
                    "late effect of trial '{}' seed {}, arrived during trial '{}' seed {} ({}): the process kept working after answering; set fresh-process = true",
                    of.scenario,
                    of.seed,
                    arrived.0,
                    arrived.1,
                    effects.join(", ")
                ),
                rerun: rerun_command(
                    &self.scenarios[index].path.display().to_string(),
                    &self.columns[column].arg,
                    of.seed,
                ),
            };
            let target = index * self.columns.len() + column;
            let mut state = lock(&self.cells[target]);
            CellWarning::absorb(&mut state.summary.warnings, warning, first_seed);
        }
    }

    /// The summary of every trial folded in.
    pub(crate) fn finish(self) -> Summary {
        let sharded = self.sweep.partition.is_some();
        let mut excluded = Vec::new();
        let cells = self
            .cells
            .into_iter()
            .map(|cell| {
                cell.into_inner()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
            })
            .filter_map(|cell| match cell.excluded {
                Some(reason) => {
                    excluded.push(Exclusion {
                        scenario: cell.summary.scenario,
                        target: cell.summary.target,
                        reason,
                    });
                    None
                }
                None => Some(cell.summary),
            })
            // A shard reports only the cells it tried; a whole run reports them all.
            .filter(|cell| !sharded || cell.seeds_run > 0 || cell.not_run.is_some())
            .map(|mut cell| {
                cell.settle();
                cell
            })
            .collect();
        let metas = self.columns.into_iter().map(|column| column.meta).collect();
        let mut summary = Summary::for_targets(self.scenarios, metas, self.sweep.seeds, cells);
        summary.excluded = excluded;
        summary.partition = self.sweep.partition;
        summary.payloads = self.sweep.payloads;
        summary.failures_kept_per_cell = self.sweep.failures_kept;
        if self.sweep.deny_warnings {
            summary.deny_warnings();
        }
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
