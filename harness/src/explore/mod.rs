//! `chaos explore`: finds fault schedules nobody wrote, and shrinks each to
//! the smallest one that still shows its failure.
//!
//! proptest generates [`schedule::Case`]s (faults of every kind the simulator
//! has, several calls and operations, a provider, a network) from an RNG seeded
//! by `--seed`, so the same seed explores the same cases in the same order.
//! Each case is one simulated trial judged by the checkers, as `chaos run`
//! would judge it. Cases run in batches on every core; the first failure of a
//! batch, in generation order, is the one kept, so parallelism never changes
//! the result. A failure is shrunk ([`shrink`]) and written as a scenario that
//! `chaos run` replays ([`write`]). A case one of whose faults never acted
//! tested nothing: it is skipped, and shrinking drops such a fault (removing
//! a fault that never acted leaves the run as it was), so every fault of a
//! written scenario acts on its seed.

pub mod bench;
pub mod schedule;
pub mod shrink;
pub mod write;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use chaos_kit::protocol::ProviderProfile;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use rayon::prelude::*;

use crate::check::{Check, Status, Verdict};
use crate::exit::Exit;
use crate::progress::Observer;
use crate::scenario::Scenario;
use crate::sim::SimTarget;
use crate::trial;
use schedule::Case;
use shrink::Shrunk;

/// What to explore.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Only schedules against this provider profile; every profile if `None`.
    pub provider: Option<ProviderProfile>,
    /// At most this many cases.
    pub cases: u64,
    /// Stop looking for failures after this long (a found failure is still shrunk).
    pub time_budget: Option<Duration>,
    /// Seeds the generator: the same seed explores the same cases.
    pub seed: u64,
    /// Keep exploring after a failure, for failures with another decisive check.
    pub keep_going: bool,
}

/// Why the exploration stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Every case was run.
    Cases,
    /// A failure was found (and `keep_going` was off).
    Failure,
    /// The time budget ran out.
    TimeBudget,
    /// Ctrl-C.
    Interrupted,
}

/// One failure, shrunk.
#[derive(Debug, Clone)]
pub struct Found {
    /// 1-based number of the case that failed, in generation order.
    pub case_number: u64,
    /// The case as generated, and what it failed with.
    pub original: Case,
    pub original_reason: String,
    pub shrunk: Shrunk,
}

impl Found {
    pub fn check(&self) -> Check {
        self.shrunk
            .verdict
            .failed_check()
            .expect("a found failure has a decisive check")
    }

    pub fn reason(&self) -> String {
        self.shrunk.verdict.reason().unwrap_or_default()
    }

    /// The shrunk schedule as the scenario file at `path` holds it.
    pub fn scenario(&self, target: &str, path: PathBuf) -> Scenario {
        let name = path
            .file_stem()
            .map(|stem| stem.to_string_lossy().into_owned())
            .unwrap_or_else(|| "explored".into());
        let description = format!(
            "found by chaos explore against {target}: {} with {} fault(s)",
            self.check(),
            self.shrunk.case.faults.len()
        );
        self.shrunk.case.scenario(&name, path, description)
    }
}

/// What an exploration did.
#[derive(Debug, Clone)]
pub struct Exploration {
    pub target: String,
    pub settings: Settings,
    pub cases_run: u64,
    /// Cases whose verdict was `fail`, shrunk or not.
    pub cases_failed: u64,
    /// Cases whose verdict could not be reached (the simulation panicked or
    /// ran out of simulated time).
    pub cases_unknown: u64,
    /// The first unknown case, to look into.
    pub first_unknown: Option<(u64, Case, String)>,
    /// Cases skipped because a fault of theirs never acted and nothing
    /// failed: they tested nothing, so they are neither a pass nor kept.
    pub cases_idle: u64,
    pub found: Vec<Found>,
    pub stop: Stop,
    /// Time spent running cases, shrinking excluded.
    pub exploring: Duration,
    /// Time from the start to the first failing case (before shrinking it).
    pub first_failure_after: Option<Duration>,
    pub elapsed: Duration,
}

impl Exploration {
    pub fn shrink_steps(&self) -> u64 {
        self.found.iter().map(|found| found.shrunk.steps).sum()
    }

    pub fn cases_per_second(&self) -> f64 {
        self.cases_run as f64 / self.exploring.as_secs_f64().max(f64::EPSILON)
    }

    /// A failure dominates; Ctrl-C before any failure is an interruption.
    pub fn exit(&self) -> Exit {
        if !self.found.is_empty() {
            Exit::InvariantViolated
        } else if self.stop == Stop::Interrupted {
            Exit::Interrupted
        } else if self.cases_unknown > 0 {
            Exit::Unknown
        } else {
            Exit::Success
        }
    }
}

/// The proptest runner for `seed`: ChaCha, the algorithm proptest keeps
/// stable, seeded with the seed's bytes.
pub fn runner_for(seed: u64) -> TestRunner {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &bytes),
    )
}

/// Runs one case against `target`, judged as `chaos run` would judge it.
pub fn judge(case: &Case, target: &SimTarget) -> Verdict {
    let scenario = case.scenario("explored", PathBuf::from("explored.toml"), String::new());
    let never = AtomicBool::new(false);
    trial::judge(target, &scenario, case.seed, &never)
        .expect("a trial nobody cancels runs to its end")
        .verdict
}

/// Explores up to `settings.cases` cases against `target`.
pub fn explore(
    target: &SimTarget,
    settings: &Settings,
    observer: &dyn Observer,
    cancel: &AtomicBool,
) -> Exploration {
    let started = Instant::now();
    let strategy = schedule::cases(settings.provider);
    let mut runner = runner_for(settings.seed);
    // Batches start small, so a failure in the first cases is found (and
    // timed) quickly, and grow, so cores are not left idle waiting for the
    // slowest case of a small batch.
    let mut batch = (rayon::current_num_threads() * 2) as u64;
    let largest_batch = batch * 16;
    let judge_case = |case: &Case| judge(case, target);
    observer.started(settings.cases);

    let mut exploration = Exploration {
        target: target.info.name.clone(),
        settings: settings.clone(),
        cases_run: 0,
        cases_failed: 0,
        cases_unknown: 0,
        first_unknown: None,
        cases_idle: 0,
        found: Vec::new(),
        stop: Stop::Cases,
        exploring: Duration::ZERO,
        first_failure_after: None,
        elapsed: Duration::ZERO,
    };

    'explore: while exploration.cases_run < settings.cases {
        if cancel.load(Ordering::Relaxed) {
            exploration.stop = Stop::Interrupted;
            break;
        }
        if settings
            .time_budget
            .is_some_and(|budget| started.elapsed() >= budget)
        {
            exploration.stop = Stop::TimeBudget;
            break;
        }
        let batch_started = Instant::now();
        let size = batch.min(settings.cases - exploration.cases_run);
        let mut trees: Vec<_> = (0..size)
            .map(|_| {
                strategy
                    .new_tree(&mut runner)
                    .expect("the strategy has no filter, so it never rejects")
            })
            .collect();
        let candidates: Vec<Case> = trees.iter().map(ValueTree::current).collect();
        let verdicts: Vec<Verdict> = candidates.par_iter().map(judge_case).collect();
        exploration.exploring += batch_started.elapsed();
        batch = (batch * 2).min(largest_batch);

        for (tree, verdict) in trees.iter_mut().zip(verdicts) {
            exploration.cases_run += 1;
            match verdict.status {
                Status::Pass => {}
                Status::Unknown if verdict.vacuous() => exploration.cases_idle += 1,
                Status::Unknown => {
                    exploration.cases_unknown += 1;
                    if exploration.first_unknown.is_none() {
                        exploration.first_unknown = Some((
                            exploration.cases_run,
                            tree.current(),
                            verdict.reason().unwrap_or_default(),
                        ));
                    }
                }
                Status::Fail => {
                    exploration.cases_failed += 1;
                    let check = verdict.failed_check();
                    if exploration
                        .found
                        .iter()
                        .any(|found| Some(found.check()) == check)
                    {
                        continue;
                    }
                    exploration
                        .first_failure_after
                        .get_or_insert(started.elapsed());
                    progressed(observer, &exploration);
                    let original = tree.current();
                    let original_reason = verdict.reason().unwrap_or_default();
                    let shrunk = shrink::shrink(
                        tree,
                        verdict,
                        &judge_case,
                        &|shrunk| {
                            observer.note(format!(
                                "shrinking: {} steps, {} fault(s) left",
                                shrunk.steps,
                                shrunk.case.faults.len()
                            ))
                        },
                        cancel,
                    );
                    exploration.found.push(Found {
                        case_number: exploration.cases_run,
                        original,
                        original_reason,
                        shrunk,
                    });
                    if !settings.keep_going {
                        exploration.stop = Stop::Failure;
                        break 'explore;
                    }
                    if cancel.load(Ordering::Relaxed) {
                        exploration.stop = Stop::Interrupted;
                        break 'explore;
                    }
                }
            }
        }
        progressed(observer, &exploration);
    }
    observer.finished();
    exploration.elapsed = started.elapsed();
    exploration
}

fn progressed(observer: &dyn Observer, exploration: &Exploration) {
    observer.progressed(exploration.cases_run);
    if exploration.cases_failed > 0 {
        observer.note(format!("{} failing", exploration.cases_failed));
    }
}
