//! `chaos bench --explore`: the exploration figures of docs/performance.md, at full
//! counts. Against the correct target (`runtime-ledger`), 10,000 cases must
//! find nothing; against each broken one (`fresh-key`, `args-hash`, and
//! `ledger`, which a re-plan under a new key defeats), every seed must find a
//! failure within 1,000 cases and shrink it to at most two faults. It reports
//! cases per second and the median time to the first failure, and names
//! every seed that misses.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::{explore, Exploration, Settings};
use crate::sim::SimTarget;

/// The target every explored case must pass.
pub const CORRECT: &str = "runtime-ledger";
/// The full counts.
pub const LEDGER_CASES: u64 = 10_000;
pub const BROKEN_CASES: u64 = 1_000;
pub const MAX_SHRUNK_FAULTS: usize = 2;

#[derive(Debug, Clone)]
pub struct ExploreBench {
    pub cores: usize,
    pub ledger: Exploration,
    /// One exploration per seed, per broken target.
    pub broken: Vec<(String, Vec<Exploration>)>,
}

/// Explores `ledger` once, and each broken target once per seed in `0..seeds`.
pub fn bench(
    ledger: &SimTarget,
    broken: &[SimTarget],
    seeds: u64,
    cancel: &AtomicBool,
) -> ExploreBench {
    let settings = |cases, seed| Settings {
        provider: None,
        cases,
        time_budget: None,
        seed,
        keep_going: false,
    };
    let ledger = explore(ledger, &settings(LEDGER_CASES, 0), &(), cancel);
    let broken = broken
        .iter()
        .map(|target| {
            let runs = (0..seeds)
                .map(|seed| explore(target, &settings(BROKEN_CASES, seed), &(), cancel))
                .collect();
            (target.info.name.clone(), runs)
        })
        .collect();
    ExploreBench {
        cores: rayon::current_num_threads(),
        ledger,
        broken,
    }
}

impl ExploreBench {
    /// Every way the figures miss the bar; empty when they meet it.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.ledger.cases_run < LEDGER_CASES || !self.ledger.found.is_empty() {
            problems.push(format!(
                "{CORRECT}: {} failure(s) in {} of {LEDGER_CASES} cases (expected none in all)",
                self.ledger.found.len(),
                self.ledger.cases_run
            ));
        }
        if self.ledger.cases_unknown > 0 {
            problems.push(format!(
                "{CORRECT}: {} case(s) unknown",
                self.ledger.cases_unknown
            ));
        }
        for (target, runs) in &self.broken {
            for run in runs {
                match run.found.first() {
                    None => problems.push(format!(
                        "{target} seed {}: nothing found in {} cases",
                        run.settings.seed, run.cases_run
                    )),
                    Some(found) if found.shrunk.case.faults.len() > MAX_SHRUNK_FAULTS => problems
                        .push(format!(
                            "{target} seed {}: shrunk to {} faults, at most {MAX_SHRUNK_FAULTS} wanted",
                            run.settings.seed,
                            found.shrunk.case.faults.len()
                        )),
                    Some(_) => {}
                }
            }
        }
        problems
    }

    pub fn render(&self) -> String {
        let mut out = format!(
            "chaos bench --explore: {} cores{}\n",
            self.cores,
            if cfg!(debug_assertions) {
                " (DEBUG BUILD: figures are not representative; use --release)"
            } else {
                ""
            }
        );
        out.push_str(&format!(
            "{CORRECT:<14} {} cases in {:.1} s: {:.0} cases/s; {} failure(s), {} unknown\n",
            self.ledger.cases_run,
            self.ledger.exploring.as_secs_f64(),
            self.ledger.cases_per_second(),
            self.ledger.found.len(),
            self.ledger.cases_unknown
        ));
        for (target, runs) in &self.broken {
            let found: Vec<&Exploration> =
                runs.iter().filter(|run| !run.found.is_empty()).collect();
            let to_first: Vec<Duration> = found
                .iter()
                .filter_map(|run| run.first_failure_after)
                .collect();
            let cases_to_first: Vec<u64> =
                found.iter().map(|run| run.found[0].case_number).collect();
            let shrink_time: Vec<Duration> = found
                .iter()
                .map(|run| {
                    run.elapsed
                        .saturating_sub(run.first_failure_after.unwrap_or_default())
                })
                .collect();
            let steps: Vec<u64> = found.iter().map(|run| run.shrink_steps()).collect();
            let faults: Vec<usize> = found
                .iter()
                .map(|run| run.found[0].shrunk.case.faults.len())
                .collect();
            let mut checks: Vec<String> = found
                .iter()
                .map(|run| run.found[0].check().to_string())
                .collect();
            checks.sort();
            checks.dedup();
            out.push_str(&format!(
                "{target:<14} found on {}/{} seeds; first failure after a median of {} case(s) (max {}) and {} (max {}); \
                 shrinking: median {} steps, {}; shrunk to at most {} fault(s); checks: {}\n",
                found.len(),
                runs.len(),
                median(&cases_to_first).unwrap_or_default(),
                cases_to_first.iter().max().copied().unwrap_or_default(),
                millis(median(&to_first)),
                millis(to_first.iter().max().copied()),
                median(&steps).unwrap_or_default(),
                millis(median(&shrink_time)),
                faults.iter().max().copied().unwrap_or_default(),
                checks.join(", ")
            ));
        }
        let problems = self.problems();
        if problems.is_empty() {
            out.push_str(&format!(
                "ok: nothing found against {CORRECT} in {LEDGER_CASES} cases; every broken target caught within {BROKEN_CASES} cases and shrunk to at most {MAX_SHRUNK_FAULTS} faults\n"
            ));
        }
        for problem in problems {
            out.push_str(&format!("MISSED: {problem}\n"));
        }
        out
    }
}

fn median<T: Ord + Copy>(values: &[T]) -> Option<T> {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    sorted.get(sorted.len().saturating_sub(1) / 2).copied()
}

fn millis(duration: Option<Duration>) -> String {
    match duration {
        Some(duration) => format!("{:.1} ms", duration.as_secs_f64() * 1_000.0),
        None => "-".into(),
    }
}
