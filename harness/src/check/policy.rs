//! Per-tool runtime policies beyond `coalesce` and `allow`, judged on what
//! each step decided again was answered.
//!
//! `refuse`: a re-plan (a tool call other than the step's first) must be
//! refused with an explicit outcome the agent can read, `rejected` or
//! `conflict` ([`Policy::refuses`]). Executed again it is a second effect
//! (`duplicate-effect`, from the effects checker, since the allowance is
//! one per intent); answered `applied` or `replayed` with the first call's
//! result, it is a silent replay the policy forbids (`replan-not-refused`
//! here); ended on anything else, it was never refused.

use std::collections::BTreeMap;

use chaos_kit::protocol::Outcome;

use super::view::{describe, AnswerView, RunView};
use super::{Anchor, Check, Findings};
use crate::scenario::Policy;

pub(super) fn check(run: &RunView<'_>, findings: &mut Findings) {
    if run.trial.scenario.workload.policy != Policy::Refuse {
        return;
    }
    for operation in &run.operations {
        // Each re-planned tool call's answers, in the order they were sent.
        let mut tool_calls: BTreeMap<&str, Vec<&AnswerView<'_>>> = BTreeMap::new();
        for answer in (operation.answers.iter()).filter(|answer| answer.decided_again) {
            let id = answer.attempt.tool_use_id.as_str();
            tool_calls.entry(id).or_default().push(answer);
        }
        let name = operation.name;
        for answers in tool_calls.values() {
            let claimed = answers
                .iter()
                .find(|answer| matches!(answer.said.outcome, Outcome::Applied | Outcome::Replayed));
            let Some(last) = answers.last() else {
                continue;
            };
            let (answer, message) = match claimed {
                Some(answer) => (
                    answer,
                    format!(
                        "operation '{name}': attempt {} decided the step again and was answered {}{}, but the tool's policy is refuse: a step decided again must be refused explicitly (rejected or conflict), not executed nor answered with the first call's result",
                        describe(answer.attempt),
                        answer.said.outcome,
                        answer
                            .said
                            .receipt
                            .as_deref()
                            .map(|receipt| format!(" (receipt {receipt})"))
                            .unwrap_or_default()
                    ),
                ),
                None if !Policy::refuses(last.said.outcome) => (
                    last,
                    format!(
                        "operation '{name}': attempt {} decided the step again and its tool call ended {}, never refused: the tool's policy is refuse, which a step decided again must hear explicitly (rejected or conflict)",
                        describe(last.attempt),
                        last.said.outcome
                    ),
                ),
                None => continue,
            };
            findings.fail(
                Anchor::Attempt {
                    operation: operation.index,
                    position: answer.position,
                    slot: 4,
                },
                Check::ReplanNotRefused,
                Some(name),
                message,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use chaos_kit::protocol::Outcome;

    use super::super::tests::{Case, Found, RE_PLAN};
    use crate::check::{Check, Status};

    /// `RE_PLAN` under the tool policy `refuse`.
    fn refused() -> String {
        RE_PLAN.replace(
            "free-text-field = \"memo\"\n",
            "free-text-field = \"memo\"\npolicy = \"refuse\"\n",
        )
    }

    fn re_plan_answered(text: &str, outcome: Outcome) -> crate::check::Verdict {
        Case::new(text)
            .commit(1, 3)
            .answer(1, 1, 5, Outcome::Applied)
            .decide_again(1, false)
            .answer(1, 6, 10, outcome)
            .judge()
    }

    #[test]
    fn a_re_plan_refused_explicitly_passes() {
        let verdict = re_plan_answered(&refused(), Outcome::Rejected);
        assert_eq!(verdict.status, Status::Pass, "{:?}", verdict.findings);
        // `conflict` is a refusal too, but for the very same arguments it
        // says they differ: the payload checker's false conflict, not this.
        let verdict = re_plan_answered(&refused(), Outcome::Conflict);
        assert!(!verdict.has(Check::ReplanNotRefused));
        assert!(verdict.has(Check::FalseConflict));
        // The same refusal where the policy is coalesce lies about the ledger.
        assert!(re_plan_answered(RE_PLAN, Outcome::Rejected).has(Check::RejectedWithEffect));
    }

    #[test]
    fn a_re_plan_answered_with_the_first_result_is_not_refused() {
        let verdict = re_plan_answered(&refused(), Outcome::Replayed);
        let message = &verdict.finding(Check::ReplanNotRefused).message;
        assert!(
            message.contains("(call 1, decision 2 as tool call tu-0-1-2, worker 1, attempt 2) decided the step again and was answered replayed (receipt rcpt-1), but the tool's policy is refuse"),
            "{message}"
        );
        // Under coalesce, the very same replay is what is asked.
        assert!(!re_plan_answered(RE_PLAN, Outcome::Replayed).has(Check::ReplanNotRefused));
    }

    #[test]
    fn a_re_plan_that_never_hears_a_refusal_is_not_refused() {
        for outcome in [
            Outcome::Pending,
            Outcome::Failed,
            Outcome::Denied,
            Outcome::Held,
        ] {
            let verdict = re_plan_answered(&refused(), outcome);
            assert!(verdict.has(Check::ReplanNotRefused), "{outcome}");
        }
    }

    #[test]
    fn a_re_plan_executed_again_is_a_duplicate() {
        let verdict = Case::new(&refused())
            .commit(1, 3)
            .answer(1, 1, 5, Outcome::Applied)
            .decide_again(1, false)
            .commit(1, 8)
            .answer(1, 6, 10, Outcome::Applied)
            .judge();
        assert!(verdict.has(Check::DuplicateEffect));
        assert!(verdict.has(Check::ReplanNotRefused));
    }
}
