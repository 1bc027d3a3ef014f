//! Runs every (scenario, target, seed) trial of a sweep, or one shard's, and
//! folds each judged trial into one [`Summary`] (`report::fold`).
//!
//! One loop for both transports: a target's driver says how many of its
//! trials may run side by side. Simulated trials are independent, so they
//! run on every core, each simulation living and dying on one thread; live
//! trials then run target by target, one at a time unless the target file
//! allows more (`parallel = N`, each thread with a process of its own),
//! since they share the machine's real time and services; a trial that
//! could not run at all ends its cell.

use chaos_kit::sync::lock;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use rayon::prelude::*;

use crate::progress::Observer;
use crate::report::fold::{Column, Fold};
use crate::report::{AgentMeta, Summary, TargetMeta};
use crate::scenario::Scenario;
use crate::sweep::{Payloads, Sweep};
use crate::target::Target;
use crate::trial::{self, Concurrency, Judged};

/// Runs `sweep`'s trials of every scenario against every target, and
/// summarises them. `None` if `cancel` was set before the run finished: a
/// partial run is never reported as if it were whole.
pub fn run(
    scenarios: &[Scenario],
    targets: &[Target],
    sweep: Sweep,
    observer: &dyn Observer,
    cancel: &AtomicBool,
) -> Option<Summary> {
    let drivers: Vec<_> = targets
        .iter()
        .map(|target| target.driver(sweep.keep_trying, sweep.payloads))
        .collect();
    let columns = targets
        .iter()
        .zip(&drivers)
        .map(|(target, driver)| Column {
            meta: TargetMeta {
                agent: driver.agent_timing().map(|timing| AgentMeta::of(&timing)),
                ..TargetMeta::of(&target.info(), target.transport())
            },
            arg: target.arg().to_owned(),
        })
        .collect();
    // Whether each pairing can run at all, decided once, before any trial,
    // of its first seed's trial: a pairing the target cannot play is
    // excluded (a line and a report entry), never a cell of `unknown`s.
    let excluded: Vec<Option<String>> = scenarios
        .iter()
        .flat_map(|scenario| drivers.iter().map(move |driver| (scenario, driver)))
        .map(|(scenario, driver)| {
            driver
                .admit(&driver.plan(scenario, sweep.seeds.first()))
                .err()
        })
        .collect();
    let fold = Fold::new(scenarios, columns, &excluded, sweep, observer);

    let per_cell = sweep.seeds.count();
    let trials = ((scenarios.len() * targets.len()) as u64).saturating_mul(per_cell);
    // Position p is cell p / per_cell (scenario-major), seed p % per_cell.
    let cell_of = |position: u64| (position / per_cell) as usize;
    let mine = |position: &u64| {
        sweep
            .partition
            .is_none_or(|shard| shard.contains(*position))
            && excluded[cell_of(*position)].is_none()
    };
    let share = |cell: u64| {
        let before = |cell: u64| {
            let positions = cell.saturating_mul(per_cell);
            sweep
                .partition
                .map_or(positions, |shard| shard.share_of(positions))
        };
        before(cell + 1) - before(cell)
    };
    let total = (0..excluded.len() as u64)
        .filter(|cell| excluded[*cell as usize].is_none())
        .map(share)
        .sum();
    observer.started(total);
    let done = AtomicU64::new(0);

    let target_of = |position: u64| cell_of(position) % targets.len();
    let every_core =
        |position: &u64| drivers[target_of(*position)].concurrency() == Concurrency::EveryCore;
    let trial = |position: u64| -> Option<(usize, Judged<'_>)> {
        let cell = cell_of(position);
        let scenario = &scenarios[cell / targets.len()];
        let driver = &drivers[cell % targets.len()];
        let seed = sweep.seeds.first().wrapping_add(position % per_cell);
        let judged = trial::judge(driver.as_ref(), scenario, seed, cancel)?;
        fold.add(cell, &judged);
        let column = cell % targets.len();
        observer.judged(column, targets[column].name(), &judged);
        observer.progressed(done.fetch_add(1, Ordering::Relaxed) + 1);
        Some((cell, judged))
    };

    (0..trials)
        .into_par_iter()
        .filter(|position| mine(position) && every_core(position))
        .for_each(|position| {
            if !cancel.load(Ordering::Relaxed) {
                trial(position);
            }
        });
    if cancel.load(Ordering::Relaxed) {
        return None;
    }

    // The others, one target after another, each on as many threads as its
    // driver allows; a trial that could not run at all ends its cell.
    for (index, driver) in drivers.iter().enumerate() {
        let Concurrency::AtMost(threads) = driver.concurrency() else {
            continue;
        };
        let queue: Vec<u64> = (0..trials)
            .filter(|position| mine(position) && target_of(*position) == index)
            .collect();
        let next = AtomicUsize::new(0);
        let blocked_cells = Mutex::new(HashSet::new());
        let work = || {
            while let Some(&position) = queue.get(next.fetch_add(1, Ordering::Relaxed)) {
                if cancel.load(Ordering::Relaxed) {
                    return;
                }
                if lock(&blocked_cells).contains(&cell_of(position)) {
                    continue;
                }
                let Some((cell, judged)) = trial(position) else {
                    return;
                };
                if judged.cell_blocked {
                    lock(&blocked_cells).insert(cell);
                }
            }
        };
        if threads <= 1 {
            work();
        } else {
            std::thread::scope(|scope| {
                for _ in 0..threads.min(queue.len()) {
                    scope.spawn(work);
                }
            });
        }
        driver.finished();
        if cancel.load(Ordering::Relaxed) {
            return None;
        }
    }
    Some(fold.finish())
}

/// Plans, runs and judges one trial of `scenario` against `target`: what
/// `chaos run --seed` does for one cell, without a report.
pub fn judge<'a>(scenario: &'a Scenario, target: &Target, seed: u64) -> Judged<'a> {
    let never = AtomicBool::new(false);
    trial::admit_and_judge(
        target.driver(false, Payloads::Redacted).as_ref(),
        scenario,
        seed,
        &never,
    )
    .expect("a trial nobody cancels runs to its end")
}
