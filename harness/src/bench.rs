//! `chaos bench`: how many simulations per second the simulator runs, for the
//! test mix (a scenario of each of the six tests, and a re-plan) and for a
//! no-fault run, measured in the same process.
//!
//! Figures are medians over several timed rounds on one thread (per core),
//! then one all-cores round. Machines are noisy; the ratio of two medians
//! measured back to back is the figure to compare across machines.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rayon::prelude::*;

use std::sync::atomic::AtomicBool;

use crate::check::{Status, Verdict};
use crate::scenario::Scenario;
use crate::sim::SimTarget;
use crate::trial;

/// The scenario a no-fault round runs: one operation, one attempt that succeeds.
const NO_FAULT: &str = r#"
test = "lost-response"
description = "no fault: one call, answered at once"
[provider]
profile = "keyed"
retention = "24h"
[[call]]
operation = "reminder"
"#;

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BenchFigures {
    pub target: String,
    pub rounds: usize,
    pub round_length: Duration,
    pub no_fault_per_core: Rate,
    pub mix_per_core: Rate,
    pub mix_all_cores: f64,
    pub cores: usize,
    /// Trials in the mix that did not pass (a benchmark of a broken target is
    /// still a benchmark, but the reader should know).
    pub mix_not_passing: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rate {
    pub median: f64,
    pub rounds: Vec<f64>,
}

impl BenchFigures {
    pub(crate) fn ratio(&self) -> f64 {
        self.mix_per_core.median / self.no_fault_per_core.median
    }

    pub(crate) fn render(&self) -> String {
        let rounds = |rate: &Rate| {
            rate.rounds
                .iter()
                .map(|value| format!("{value:.0}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "chaos bench: target {}, {} rounds of {} per figure{}\n\
             no-fault run        {:>8.0} simulations/s per core (median; rounds: {})\n\
             test mix            {:>8.0} simulations/s per core (median; rounds: {})\n\
             ratio mix/no-fault  {:>8.2}\n\
             {:<20}{:>8.0} simulations/s\n{}",
            self.target,
            self.rounds,
            humantime::format_duration(self.round_length),
            if cfg!(debug_assertions) {
                " (DEBUG BUILD: figures are not representative; use --release)"
            } else {
                ""
            },
            self.no_fault_per_core.median,
            rounds(&self.no_fault_per_core),
            self.mix_per_core.median,
            rounds(&self.mix_per_core),
            self.ratio(),
            format!("test mix, {} cores", self.cores),
            self.mix_all_cores,
            if self.mix_not_passing > 0 {
                format!(
                    "note: {} trials of the mix did not pass\n",
                    self.mix_not_passing
                )
            } else {
                String::new()
            }
        )
    }
}

/// Runs the benchmark: `mix` are the mixed scenarios, run round-robin.
pub(crate) fn bench(
    mix: &[Scenario],
    target: &SimTarget,
    rounds: usize,
    round_length: Duration,
) -> BenchFigures {
    let no_fault = Scenario::parse(Path::new("no-fault.toml"), NO_FAULT)
        .expect("the built-in scenario is valid");
    let not_passing = AtomicU64::new(0);
    let no_fault_rounds: Vec<f64> = (0..rounds)
        .map(|round| {
            per_core_rate(
                std::slice::from_ref(&no_fault),
                target,
                round,
                round_length,
                &not_passing,
            )
        })
        .collect();
    not_passing.store(0, Ordering::Relaxed);
    let mix_rounds: Vec<f64> = (0..rounds)
        .map(|round| per_core_rate(mix, target, round, round_length, &not_passing))
        .collect();
    let mix_not_passing = not_passing.load(Ordering::Relaxed);

    let cores = rayon::current_num_threads();
    let started = Instant::now();
    let all_cores_trials: u64 = (0..cores)
        .into_par_iter()
        .map(|core| {
            let mut trials = 0;
            let mut seed = 1_000_000 * (core as u64 + 1);
            while started.elapsed() < round_length {
                judge(&mix[(seed as usize) % mix.len()], target, seed);
                seed += 1;
                trials += 1;
            }
            trials
        })
        .sum();
    let mix_all_cores = all_cores_trials as f64 / started.elapsed().as_secs_f64();

    BenchFigures {
        target: target.info.name.clone(),
        rounds,
        round_length,
        no_fault_per_core: Rate {
            median: median(&no_fault_rounds),
            rounds: no_fault_rounds,
        },
        mix_per_core: Rate {
            median: median(&mix_rounds),
            rounds: mix_rounds,
        },
        mix_all_cores,
        cores,
        mix_not_passing,
    }
}

fn per_core_rate(
    scenarios: &[Scenario],
    target: &SimTarget,
    round: usize,
    length: Duration,
    not_passing: &AtomicU64,
) -> f64 {
    let started = Instant::now();
    let mut trials = 0u64;
    let mut seed = (round as u64) << 32;
    while started.elapsed() < length {
        let verdict = judge(&scenarios[(seed as usize) % scenarios.len()], target, seed);
        if verdict.status != Status::Pass {
            not_passing.fetch_add(1, Ordering::Relaxed);
        }
        seed += 1;
        trials += 1;
    }
    trials as f64 / started.elapsed().as_secs_f64()
}

fn judge(scenario: &Scenario, target: &SimTarget, seed: u64) -> Verdict {
    let never = AtomicBool::new(false);
    trial::judge(target, scenario, seed, &never)
        .expect("a trial nobody cancels runs to its end")
        .verdict
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}
