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

/// `chaos bench --live`: a live suite against one target file, timed the
/// way it used to run (a process per trial, one trial at a time:
/// `fresh-process = true`, `parallel = 1`) and the way the file says, in
/// alternating rounds of one process, so both see the same machine.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LiveFigures {
    pub target: String,
    pub scenarios: usize,
    pub trials_per_cell: u64,
    pub parallel: usize,
    pub fresh_process: bool,
    pub one_process_per_trial: Vec<Duration>,
    pub as_configured: Vec<Duration>,
    /// Cells whose verdict, failing seeds or effects differed between any
    /// two rounds: the speed must not change what is measured.
    pub verdicts_differ: Vec<String>,
}

impl LiveFigures {
    pub(crate) fn ratio(&self) -> f64 {
        median_time(&self.one_process_per_trial).as_secs_f64()
            / median_time(&self.as_configured)
                .as_secs_f64()
                .max(f64::EPSILON)
    }

    pub(crate) fn render(&self) -> String {
        let rounds = |times: &[Duration]| {
            times
                .iter()
                .map(|time| format!("{:.1} s", time.as_secs_f64()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let verdicts = if self.verdicts_differ.is_empty() {
            "identical in every round".to_owned()
        } else {
            format!("DIFFERED: {}", self.verdicts_differ.join("; "))
        };
        let configured = format!(
            "as the target file says ({}, parallel = {})",
            if self.fresh_process {
                "fresh-process"
            } else {
                "reuse"
            },
            self.parallel
        );
        format!(
            "chaos bench --live: target {}, {} scenario(s) x {} trial(s), {} round(s) each, alternating\n\
             {:<48}{:>6.1} s (median; rounds: {})\n\
             {:<48}{:>6.1} s (median; rounds: {})\n\
             {:<48}{:>6.2}x\n\
             verdicts, failing seeds and effects: {verdicts}\n",
            self.target,
            self.scenarios,
            self.trials_per_cell,
            self.as_configured.len(),
            "a process per trial, one at a time",
            median_time(&self.one_process_per_trial).as_secs_f64(),
            rounds(&self.one_process_per_trial),
            configured,
            median_time(&self.as_configured).as_secs_f64(),
            rounds(&self.as_configured),
            "ratio",
            self.ratio(),
        )
    }
}

fn median_time(times: &[Duration]) -> Duration {
    let mut sorted = times.to_vec();
    sorted.sort();
    sorted.get(sorted.len() / 2).copied().unwrap_or_default()
}

/// Runs `scenarios` x `trials` against `file` in `rounds` alternating
/// pairs; `None` if cancelled.
pub(crate) fn bench_live(
    scenarios: &[Scenario],
    file: &crate::target_file::TargetFile,
    arg: &str,
    trials: u64,
    rounds: usize,
    cancel: &AtomicBool,
) -> Option<LiveFigures> {
    use crate::target::Target;
    let as_configured = Target::Live {
        file: std::sync::Arc::new(file.clone()),
        arg: arg.to_owned(),
    };
    let one_per_trial = Target::Live {
        file: std::sync::Arc::new(crate::target_file::TargetFile {
            fresh_process: true,
            parallel: 1,
            ..file.clone()
        }),
        arg: arg.to_owned(),
    };
    let sweep = crate::sweep::Sweep::new(crate::sweep::Seeds::Range {
        first: 0,
        count: trials,
    });
    let timed = |target: &Target| {
        let started = Instant::now();
        let summary =
            crate::runner::run(scenarios, std::slice::from_ref(target), sweep, &(), cancel)?;
        Some((started.elapsed(), summary))
    };
    // Rounds alternate, so both ways see the same machine.
    let mut times: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    let mut runs: Vec<Vec<CellFigures>> = Vec::new();
    for _ in 0..rounds {
        for (way, target) in [&one_per_trial, &as_configured].into_iter().enumerate() {
            let (elapsed, summary) = timed(target)?;
            times[way].push(elapsed);
            runs.push(cell_figures(&summary));
        }
    }
    let mut verdicts_differ: Vec<String> = Vec::new();
    for run in &runs[1..] {
        for (want, got) in runs[0].iter().zip(run) {
            if want != got && !verdicts_differ.contains(&got.0) {
                verdicts_differ.push(got.0.clone());
            }
        }
    }
    let [one_process_per_trial, as_configured] = times;
    Some(LiveFigures {
        target: file.name.clone(),
        scenarios: scenarios.len(),
        trials_per_cell: trials,
        parallel: file.parallel,
        fresh_process: file.fresh_process,
        one_process_per_trial,
        as_configured,
        verdicts_differ,
    })
}

/// (scenario, verdict, failing seeds, most effects) of each cell.
type CellFigures = (String, Status, u64, u32);

fn cell_figures(summary: &crate::report::Summary) -> Vec<CellFigures> {
    summary
        .cells
        .iter()
        .map(|cell| {
            (
                cell.scenario.clone(),
                cell.verdict,
                cell.seeds_failed,
                cell.effects_observed_max,
            )
        })
        .collect()
}
