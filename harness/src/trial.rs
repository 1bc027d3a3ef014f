//! One trial, whatever carries it: `plan -> Driver::run -> check -> Judged`.
//!
//! A [`Driver`] (the simulator, or a real process) plans a scenario's trial
//! for a seed and runs it into a [`RunOutput`]; it never judges. Judging is
//! here and only here, the same for both transports: one `catch_unwind`
//! around the run, one around the checkers, and one policy for a run cut
//! short, so the same history gets the same verdict sim and live.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use chaos_kit::target::TargetInfo;

use crate::check::{self, Check, Liveness, Status, Verdict};
use crate::history::RunOutput;
use crate::plan::{Timing, Trial};
use crate::scenario::Scenario;
use crate::sweep::Transport;

/// Carries trials of one target: the simulator, or a real process.
pub(crate) trait Driver: Sync {
    fn transport(&self) -> Transport;

    /// How many of its trials may run at once. Simulated trials are
    /// independent; live ones share the machine's real time and services,
    /// and run side by side only as far as the target file allows.
    fn concurrency(&self) -> Concurrency;

    /// The trial of `scenario` for `seed`: its keys, subjects, payloads and
    /// timeouts, decided before anything runs.
    fn plan<'a>(&self, scenario: &'a Scenario, seed: u64) -> Trial<'a>;

    /// Whether `trial`'s scenario can run on this driver at all; the reason
    /// when not. Asked once per cell, of its first trial, before any runs:
    /// every reason is about the pairing (a provider API that cannot play the
    /// scenario's provider), never about a seed.
    fn admit(&self, _trial: &Trial<'_>) -> Result<(), String> {
        Ok(())
    }

    fn run(&self, trial: &Trial<'_>, cancel: &AtomicBool) -> Run;

    /// The agent's timing, when its target's file may set it (a live
    /// target's `[agent]`): the report shows the budget the run had. The
    /// driver knows its target, so the runner need not look inside one.
    fn agent_timing(&self) -> Option<Timing> {
        None
    }

    /// Its last trial of the run has been judged: what it kept between
    /// trials (a target process) can go.
    fn finished(&self) {}
}

/// How many trials of one driver may run at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Concurrency {
    /// On every core, in any order.
    EveryCore,
    /// At most this many at once, each on a thread of its own that the
    /// driver may pin state to (a live target's process).
    AtMost(usize),
}

/// What became of one trial's run.
#[derive(Debug)]
pub(crate) enum Run {
    /// The trial ran (perhaps cut short: then `output.error` says why).
    /// `target` is what the checkers know of the target for this run: its
    /// retention in force (live runs shorten it).
    Ran {
        /// Boxed: a run's record is large beside the other variants.
        output: Box<RunOutput>,
        target: TargetInfo,
    },
    /// The trial could not run at all (the target never got ready, the
    /// scenario cannot be done live): every seed of the cell would say the
    /// same.
    Blocked { reason: String },
    /// Ctrl-C: nothing is judged.
    Cancelled,
}

/// One trial, judged.
#[derive(Debug)]
pub struct Judged<'a> {
    pub trial: Trial<'a>,
    pub verdict: Verdict,
    /// What the run produced, when it ran.
    pub run: Option<RunOutput>,
    /// The target as the checkers knew it for this run (live runs shorten
    /// its retention), when it ran.
    pub target: Option<TargetInfo>,
    /// The trial could not run at all: the rest of its cell is not tried.
    /// Set only by [`Judged::blocked`], whose verdict carries the reason.
    pub(crate) cell_blocked: bool,
    /// How long planning, running and judging it took (zero for a trial
    /// judged blocked without being tried); never in a report, whose bytes
    /// a run fixes.
    pub(crate) elapsed: Duration,
}

impl<'a> Judged<'a> {
    /// A trial that could not run at all, for `reason` (the target never
    /// became ready, could not be built, ...): `unknown`, and folded into
    /// its cell as not run, never as a seed that observed something. A
    /// runner that already knows a cell cannot run judges one of its trials
    /// this way, without running it, and folds it like any other.
    pub(crate) fn blocked(trial: Trial<'a>, reason: String) -> Judged<'a> {
        Judged {
            trial,
            verdict: Verdict::unknown(reason),
            run: None,
            target: None,
            cell_blocked: true,
            elapsed: Duration::ZERO,
        }
    }

    /// Why the trial never ran, when it could not run at all.
    pub(crate) fn not_run_reason(&self) -> Option<&str> {
        let finding = self
            .verdict
            .findings
            .first()
            .filter(|_| self.cell_blocked)?;
        Some(&finding.message)
    }
}

/// The trial of `scenario` for `seed` on `driver`, judged not run for
/// `reason` without running it: a cell its driver did not admit.
pub(crate) fn not_admitted<'a>(
    driver: &dyn Driver,
    scenario: &'a Scenario,
    seed: u64,
    reason: String,
) -> Judged<'a> {
    Judged::blocked(driver.plan(scenario, seed), reason)
}

/// [`judge`] for a lone trial, whose cell nobody admitted before: asks the
/// driver first (`chaos::judge`, a probe's step, a bench round).
pub(crate) fn admit_and_judge<'a>(
    driver: &dyn Driver,
    scenario: &'a Scenario,
    seed: u64,
    cancel: &AtomicBool,
) -> Option<Judged<'a>> {
    match driver.admit(&driver.plan(scenario, seed)) {
        Ok(()) => judge(driver, scenario, seed, cancel),
        Err(reason) => Some(not_admitted(driver, scenario, seed, reason)),
    }
}

/// Plans, runs and judges the trial of `scenario` for `seed` on `driver`,
/// whose cell was admitted (see [`Driver::admit`]).
/// `None` when cancelled. A panic in the driver or in a checker is an
/// `unknown` verdict for this trial, never a crash of the whole run.
pub(crate) fn judge<'a>(
    driver: &dyn Driver,
    scenario: &'a Scenario,
    seed: u64,
    cancel: &AtomicBool,
) -> Option<Judged<'a>> {
    let started = Instant::now();
    let trial = driver.plan(scenario, seed);
    if cancel.load(Ordering::Relaxed) {
        return None;
    }
    let run = catch_unwind(AssertUnwindSafe(|| driver.run(&trial, cancel)));
    let judged = |trial, verdict, run: Option<(RunOutput, TargetInfo)>| {
        let (run, target) = run.unzip();
        Judged {
            trial,
            verdict,
            run,
            target,
            cell_blocked: false,
            elapsed: started.elapsed(),
        }
    };
    Some(match run {
        Err(panic) => {
            let verdict = Verdict::unknown(format!(
                "the {} run panicked: {}",
                driver.transport(),
                panic_message(&panic)
            ));
            judged(trial, verdict, None)
        }
        Ok(Run::Cancelled) => return None,
        Ok(Run::Blocked { reason }) => Judged {
            elapsed: started.elapsed(),
            ..Judged::blocked(trial, reason)
        },
        Ok(Run::Ran { .. }) if cancel.load(Ordering::Relaxed) => return None,
        Ok(Run::Ran { output, target }) => {
            let verdict = catch_unwind(AssertUnwindSafe(|| check::check(&trial, &target, &output)))
                .unwrap_or_else(|panic| {
                    Verdict::unknown(format!("the checker failed: {}", panic_message(&panic)))
                });
            let verdict = cut_short(verdict, output.error.is_some());
            judged(trial, verdict, Some((*output, target)))
        }
    })
}

/// A run cut short (its target died or hung, the simulation ran out of
/// time) leaves operations without their effect or their answer. Those
/// findings are the cut's doing, not the target's: unless something else
/// failed, the verdict is `unknown`, and what remains to say is why the run
/// was cut short. As in Jepsen, a failure already recorded dominates.
fn cut_short(verdict: Verdict, cut_short: bool) -> Verdict {
    let artefacts = [
        Check::MissingEffect,
        Check::Stuck,
        Check::UnexpectedOutcome,
        Check::RunIncomplete,
    ];
    let real_failure = verdict
        .findings
        .iter()
        .any(|finding| !artefacts.contains(&finding.check));
    if !cut_short || real_failure {
        return verdict;
    }
    Verdict {
        status: Status::Unknown,
        safety: Status::Unknown,
        liveness: Liveness::Unknown,
        findings: verdict
            .findings
            .into_iter()
            .filter(|finding| finding.check == Check::RunIncomplete)
            .collect(),
        operations: verdict.operations,
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|message| (*message).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with no message".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Finding;

    fn verdict(checks: &[Check]) -> Verdict {
        Verdict {
            status: Status::Fail,
            safety: Status::Fail,
            liveness: Liveness::Fail,
            findings: checks
                .iter()
                .map(|&check| Finding {
                    check,
                    operation: None,
                    message: check.to_string(),
                })
                .collect(),
            operations: Vec::new(),
        }
    }

    #[test]
    fn a_cut_short_run_is_unknown_unless_something_real_failed() {
        let artefacts = verdict(&[Check::MissingEffect, Check::Stuck, Check::RunIncomplete]);
        let judged = cut_short(artefacts.clone(), true);
        assert_eq!(judged.status, Status::Unknown);
        assert_eq!(judged.findings.len(), 1);
        assert_eq!(judged.findings[0].check, Check::RunIncomplete);
        assert_eq!(cut_short(artefacts, false).status, Status::Fail);

        let real = verdict(&[Check::DuplicateEffect, Check::RunIncomplete]);
        assert_eq!(cut_short(real, true).status, Status::Fail);
    }
}
