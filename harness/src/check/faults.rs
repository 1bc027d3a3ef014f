//! Whether every declared fault acted: a trial in which one never did tested
//! nothing it claims to (a crash on a dispatch that never came, a loss of
//! the ninth answer of a run that reads one). Such a trial is `unknown`, not
//! a pass, unless another check failed (failure dominates). A fault that
//! says `optional = true` may stay idle: acting is not its point.
//!
//! Acts are the nemesis's own record ([`crate::history::FaultEvent`]): a
//! verdict on an exchange, a moment's act, a live clock jump waited out.

use super::view::RunView;
use super::{Anchor, Check, Findings};
use crate::fault::Action;
use crate::history::{AttemptEnd, Happened};

pub(super) fn check(run: &RunView<'_>, findings: &mut Findings) {
    let scenario = run.trial.scenario;
    for (index, fault) in scenario.faults.iter().enumerate() {
        if scenario.optional_faults.contains(&index) {
            continue;
        }
        let acts: Vec<_> = (run.run.history.faults)
            .iter()
            .filter(|event| event.fault() == Some(index))
            .collect();
        // An interrupt is the user's word to the agent: it acted only if it
        // dropped a call the agent was waiting on. One that came when the
        // call had already been answered (or given up) changed nothing.
        let interrupts_only = !acts.is_empty()
            && acts.iter().all(|event| {
                matches!(
                    event.what,
                    Happened::Fault {
                        action: Action::Interrupt,
                        ..
                    }
                )
            });
        if interrupts_only
            && !(run.run.history.attempts)
                .iter()
                .any(|attempt| attempt.end == AttemptEnd::Interrupted)
        {
            findings.fail(
                Anchor::Incomplete,
                Check::FaultNeverActed,
                None,
                format!(
                    "fault {} ({}: {fault}) came when no call was in flight, and dropped nothing: nothing was tested",
                    index + 1,
                    fault.kind()
                ),
            );
            continue;
        }
        if acts.is_empty() {
            findings.fail(
                Anchor::Incomplete,
                Check::FaultNeverActed,
                None,
                format!(
                    "fault {} ({}: {fault}) never acted: nothing was tested",
                    index + 1,
                    fault.kind()
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use chaos_kit::protocol::Outcome;

    use super::super::tests::{Case, Found, TWO_CALLS};
    use super::super::{Check, Status};

    #[test]
    fn a_fault_that_never_acted_leaves_the_trial_unknown() {
        let idle = Case::new(TWO_CALLS)
            .commit(1, 3)
            .answer(1, 1, 5, Outcome::Applied)
            .answer_with_receipt(2, 8, 10, Outcome::Replayed, "rcpt-1")
            .judge();
        assert_eq!(idle.status, Status::Unknown);
        assert_eq!(idle.safety, Status::Unknown);
        let message = &idle.finding(Check::FaultNeverActed).message;
        assert!(
            message.starts_with("fault 1 (advance-clock: clock advanced"),
            "{message}"
        );
        assert!(
            message.contains("never acted: nothing was tested"),
            "{message}"
        );
    }

    #[test]
    fn a_fault_that_acted_leaves_nothing_to_say() {
        let acted = Case::new(TWO_CALLS)
            .commit(1, 3)
            .answer(1, 1, 5, Outcome::Applied)
            .clock_jump(6, 400)
            .answer_with_receipt(2, 8, 10, Outcome::Replayed, "rcpt-1")
            .judge();
        assert!(!acted.has(Check::FaultNeverActed), "{:?}", acted.findings);
    }

    /// A committed charge, the user's interrupt mid-call, the re-plan.
    const INTERRUPTED: &str = r#"
test = "re-plan"
description = "the user says try again mid-call"
[provider]
profile = "keyed"
retention = "24h"
[[call]]
operation = "charge"
attempts = 4
identity = "replan"
[[fault]]
kind = "user-interrupt"
after-commit = 1
"#;

    #[test]
    fn an_interrupt_that_dropped_a_call_acted() {
        let dropped = Case::new(INTERRUPTED)
            .commit(1, 3)
            .interrupt(3)
            .interrupted(1, 1, 3)
            .answer_with_receipt(1, 4, 6, Outcome::Replayed, "rcpt-1")
            .judge();
        assert!(
            !dropped.has(Check::FaultNeverActed),
            "{:?}",
            dropped.findings
        );
    }

    #[test]
    fn an_interrupt_after_the_answer_dropped_nothing_and_the_trial_is_unknown() {
        // Recorded by the nemesis, but the agent had its answer already.
        let late = Case::new(INTERRUPTED)
            .commit(1, 3)
            .answer(1, 1, 3, Outcome::Applied)
            .interrupt(4)
            .judge();
        assert_eq!(late.status, Status::Unknown, "{:?}", late.findings);
        let message = &late.finding(Check::FaultNeverActed).message;
        assert!(
            message.contains("came when no call was in flight, and dropped nothing"),
            "{message}"
        );
    }

    #[test]
    fn an_optional_fault_may_stay_idle() {
        let text = TWO_CALLS.replace("after-call = 1", "after-call = 1\noptional = true");
        let idle = Case::new(&text)
            .commit(1, 3)
            .answer(1, 1, 5, Outcome::Applied)
            .answer_with_receipt(2, 8, 10, Outcome::Replayed, "rcpt-1")
            .judge();
        assert_eq!(idle.status, Status::Pass, "{:?}", idle.findings);
    }

    #[test]
    fn a_failure_dominates_an_idle_fault() {
        let burst = Case::new(TWO_CALLS)
            .commit(1, 3)
            .commit(1, 4)
            .answer(1, 1, 5, Outcome::Applied)
            .answer_with_receipt(2, 8, 10, Outcome::Replayed, "rcpt-2")
            .judge();
        assert_eq!(burst.status, Status::Fail);
        assert!(burst.has(Check::FaultNeverActed));
        assert_eq!(
            burst.decisive().map(|finding| finding.check),
            Some(Check::DuplicateEffect)
        );
    }
}
