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

pub(super) fn check(run: &RunView<'_>, findings: &mut Findings) {
    let scenario = run.trial.scenario;
    for (index, fault) in scenario.faults.iter().enumerate() {
        if scenario.optional_faults.contains(&index) {
            continue;
        }
        let acted = (run.run.history.faults)
            .iter()
            .any(|event| event.fault() == Some(index));
        if !acted {
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
