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

    /// `RE_PLAN` under the tool policy `sign-off`.
    fn sign_off() -> String {
        RE_PLAN.replace(
            "free-text-field = \"memo\"\n",
            "free-text-field = \"memo\"\npolicy = \"sign-off\"\n",
        )
    }

    /// Under `sign-off`, the allowance follows the sign-offs: a re-plan a
    /// human signed off is one more effect asked for, a re-plan without one
    /// coalesces; executing the unsigned one or coalescing the signed one
    /// both fail.
    #[test]
    fn a_signed_off_re_plan_allows_one_more_effect_and_an_unsigned_one_none() {
        let executed = |signed: bool| {
            let case = Case::new(&sign_off())
                .commit(1, 3)
                .answer(1, 1, 5, Outcome::Applied)
                .decide_again(1, false);
            let case = if signed { case.sign_off(1, 5) } else { case };
            case.commit(1, 8).answer(1, 6, 10, Outcome::Applied).judge()
        };
        let signed = executed(true);
        assert_eq!(signed.status, Status::Pass, "{:?}", signed.findings);
        assert_eq!(signed.operations[0].expected_effects_min, 2);
        let unsigned = executed(false);
        assert!(
            unsigned.has(Check::DuplicateEffect),
            "{:?}",
            unsigned.findings
        );

        let coalesced = |signed: bool| {
            let case = Case::new(&sign_off())
                .commit(1, 3)
                .answer(1, 1, 5, Outcome::Applied)
                .decide_again(1, false);
            let case = if signed { case.sign_off(1, 5) } else { case };
            case.answer_with_receipt(1, 6, 10, Outcome::Replayed, "rcpt-1")
                .judge()
        };
        let unsigned = coalesced(false);
        assert_eq!(unsigned.status, Status::Pass, "{:?}", unsigned.findings);
        let signed = coalesced(true);
        let message = &signed.finding(Check::MissingEffect).message;
        assert!(
            message.contains(
                "1 effects, expected 2: 1 of them for re-plans a human signed off at the authority"
            ),
            "{message}"
        );
        // Under coalesce, a sign-off allows nothing: the policy decides.
        let under_coalesce = Case::new(RE_PLAN)
            .commit(1, 3)
            .answer(1, 1, 5, Outcome::Applied)
            .decide_again(1, false)
            .sign_off(1, 5)
            .commit(1, 8)
            .answer(1, 6, 10, Outcome::Applied)
            .judge();
        assert!(under_coalesce.has(Check::DuplicateEffect));
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
