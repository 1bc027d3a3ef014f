//! Outcome honesty: whether each answer told the truth about the ledger.
//! Never `applied`/`replayed` without an effect, never `applied` for an
//! effect older than the attempt (that is a replay), never `rejected` when
//! the effect exists, never `denied` while dispatching, and only receipts the
//! ledger holds for the operation.

use chaos_kit::protocol::Outcome;

use super::view::{describe, AnswerView, OperationView, RunView};
use super::{Anchor, Check, Findings};
use crate::scenario::Policy;

pub(super) fn check(run: &RunView<'_>, findings: &mut Findings) {
    for operation in &run.operations {
        for answer in &operation.answers {
            outcome(run, operation, answer, findings);
            receipt(operation, answer, findings);
            reference(run, operation, answer, findings);
        }
    }
}

/// Whether `answer` refused a changed payload while the approved one's
/// effect, committed before it was sent, stands.
fn refused_a_change(answer: &AnswerView<'_>) -> bool {
    answer.changed
        && answer
            .effects_of_epoch
            .iter()
            .all(|effect| effect.at < answer.attempt.sent_at)
}

/// What to tell the user when a bare status outside the protocol was read
/// as `rejected` by the default mapping: the finding may be the mapping's,
/// not the target's.
fn unmapped_status_hint(status: u16) -> String {
    let in_the_protocol = matches!(status, 400 | 401 | 403 | 409 | 422) || status < 400;
    if in_the_protocol || status >= 500 {
        return String::new();
    }
    format!(
        " (it answered status {status}, which the protocol does not name, so it was read as rejected; if your target means another outcome by it, say so in its target file, e.g. [status] {status} = \"conflict\" for a key reused with another payload)"
    )
}

/// Whether the outcome is true to the ledger. A claimed effect for a changed
/// payload is the payload checker's (`replay-for-changed-payload`).
fn outcome(
    run: &RunView<'_>,
    operation: &OperationView<'_>,
    answer: &AnswerView<'_>,
    findings: &mut Findings,
) {
    // Under `refuse`, a rejected re-plan is the policy, not a lie: nothing
    // was done for *this* tool call (the policy checker judges it).
    let refused_a_replan =
        run.trial.scenario.workload.policy == Policy::Refuse && answer.decided_again;
    let name = operation.name;
    let who = describe(answer.attempt);
    let said = answer.said.outcome;
    let anchor = Anchor::Attempt {
        operation: operation.index,
        position: answer.position,
        slot: 0,
    };
    let mut fail = |check, message| findings.fail(anchor, check, Some(name), message);
    match said {
        Outcome::Applied | Outcome::Replayed if answer.effects_by_answer.is_empty() => fail(
            Check::ClaimWithoutEffect,
            format!(
                "operation '{name}': attempt {who} answered {said}, but the provider holds no effect for it"
            ),
        ),
        Outcome::Applied
            if !answer.changed
                && !answer
                    .effects_by_answer
                    .iter()
                    .any(|effect| answer.attempt.spans(effect.at)) =>
        {
            // The target did replay (it handed back the stored receipt), and
            // only failed to say so: name that, not a harness riddle.
            let replayed = answer.said.receipt.as_deref().and_then(|receipt| {
                answer
                    .effects_by_answer
                    .iter()
                    .find(|effect| effect.receipt == receipt)
            });
            match replayed {
                Some(effect) => fail(
                    Check::UnmarkedReplay,
                    format!(
                        "operation '{name}': attempt {who} was answered {} with the stored receipt {} of the effect committed at {} ms, before it was sent at {} ms, but not marked as a replay (no `Idempotent-Replayed: true`, no outcome \"replayed\" in the body): the agent reads an old effect as a new one",
                        answer.said.status, effect.receipt, effect.at, answer.attempt.sent_at
                    ),
                ),
                None => {
                    let first = answer.effects_by_answer[0];
                    fail(
                        Check::StaleApplied,
                        format!(
                            "operation '{name}': attempt {who} answered applied, but the effect ({}) was committed at {} ms, before the attempt was sent at {} ms: a replay reported as a new effect",
                            first.receipt, first.at, answer.attempt.sent_at
                        ),
                    );
                }
            }
        }
        Outcome::Failed if !answer.effects_of_epoch.is_empty() => fail(
            Check::FailedWithEffect,
            format!(
                "operation '{name}': attempt {who} answered failed (not done, safe to retry), but the provider committed its effect ({}) at {} ms: a retry now does it twice",
                answer.effects_of_epoch[0].receipt, answer.effects_of_epoch[0].at
            ),
        ),
        // A changed payload refused while the approved one's effect stands
        // is the refusal it should be: nothing was done for *this* request.
        // Only `conflict` says why, which the payload checker does not ask.
        Outcome::Rejected
            if !answer.effects_of_epoch.is_empty()
                && !refused_a_change(answer)
                && !refused_a_replan =>
        {
            fail(
                Check::RejectedWithEffect,
                format!(
                    "operation '{name}': attempt {who} answered rejected, but the provider committed its effect ({}) at {} ms{}",
                    answer.effects_of_epoch[0].receipt,
                    answer.effects_of_epoch[0].at,
                    unmapped_status_hint(answer.said.status)
                ),
            )
        }
        Outcome::Held if !answer.effects_of_epoch.is_empty() => fail(
            Check::HeldWithEffect,
            format!(
                "operation '{name}': attempt {who} answered held (for review, nothing done), but the provider committed its effect ({}) at {} ms",
                answer.effects_of_epoch[0].receipt, answer.effects_of_epoch[0].at
            ),
        ),
        Outcome::Denied => {
            // Only an attempt alone in flight is judged: with another one
            // overlapping, the dispatch may well have been the other's.
            let attempt = answer.attempt;
            let alone = operation.attempts.iter().all(|other| {
                std::ptr::eq(*other, attempt)
                    || other.ended_at < attempt.sent_at
                    || other.sent_at > attempt.ended_at
            });
            let dispatched = operation
                .dispatches
                .iter()
                .find(|dispatch| attempt.spans(dispatch.at));
            if let (true, Some(dispatch)) = (alone, dispatched) {
                fail(
                    Check::DeniedButDispatched,
                    format!(
                        "operation '{name}': attempt {who} answered denied, yet dispatch {} reached the provider at {} ms while it was in flight",
                        dispatch.number, dispatch.at
                    ),
                );
            }
        }
        _ => {}
    }
}

/// `receipt-mismatch`: a receipt the ledger does not hold for this operation.
fn receipt(operation: &OperationView<'_>, answer: &AnswerView<'_>, findings: &mut Findings) {
    let Some(receipt) = &answer.said.receipt else {
        return;
    };
    if operation
        .effects
        .iter()
        .any(|effect| &effect.receipt == receipt)
    {
        return;
    }
    let name = operation.name;
    let known: Vec<&str> = operation
        .effects
        .iter()
        .map(|effect| effect.receipt.as_str())
        .collect();
    findings.fail(
        Anchor::Attempt {
            operation: operation.index,
            position: answer.position,
            slot: 2,
        },
        Check::ReceiptMismatch,
        Some(name),
        format!(
            "operation '{name}': attempt {} answered with receipt '{receipt}', but the provider's receipts for this operation are [{}]",
            describe(answer.attempt),
            known.join(", ")
        ),
    );
}

/// `missing-reference`: the seed article's runtime answers "applied |
/// replayed | in_flight | unknown with an effect reference". Once the target
/// has told the agent an intent's receipt, every answer to a tool call that
/// decides the intent again and speaks of the effect (applied, replayed,
/// pending) must carry it: a model that hears "pending" with no reference
/// cannot tell its re-plan from a new action. `unknown` is left out: a
/// target that could not check who is asking (the authority did not answer)
/// must not hand out the reference, and says it does not know.
fn reference(
    run: &RunView<'_>,
    operation: &OperationView<'_>,
    answer: &AnswerView<'_>,
    findings: &mut Findings,
) {
    let said = answer.said;
    let speaks_of_the_effect = matches!(
        said.outcome,
        Outcome::Applied | Outcome::Replayed | Outcome::Pending
    );
    // Under `allow`, every tool call is an intent of its own.
    let one_intent = run.trial.scenario.workload.policy == Policy::Coalesce;
    let (Some(told), true, true, None) = (
        answer.receipt_told,
        answer.decided_again && one_intent,
        speaks_of_the_effect,
        &said.receipt,
    ) else {
        return;
    };
    let name = operation.name;
    findings.fail(
        Anchor::Attempt {
            operation: operation.index,
            position: answer.position,
            slot: 3,
        },
        Check::MissingReference,
        Some(name),
        format!(
            "operation '{name}': attempt {} decided the step again and was answered {} without the effect reference, though the target had already given it ({told})",
            describe(answer.attempt),
            said.outcome
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::super::tests::{Case, Found, CHANGED, ONE_CALL, REVOKED, RE_PLAN, RE_PLAN_ALLOWED};
    use crate::check::Check;
    use chaos_kit::protocol::Outcome;

    /// The seed article's runtime contract: a re-planned call hears about
    /// the effect it duplicates by its reference, or the model cannot tell
    /// "already done" from "done now".
    #[test]
    fn a_re_plan_answered_without_the_reference_it_was_already_given_is_caught() {
        let re_planned = |text: &str, outcome, receipt: Option<&str>| {
            let case = Case::new(text)
                .commit(1, 3)
                .answer(1, 1, 5, Outcome::Applied)
                .decide_again(1, false);
            match receipt {
                Some(receipt) => case.answer_with_receipt(1, 6, 10, outcome, receipt),
                None => case.bare_answer(1, 6, 10, outcome),
            }
            .judge()
        };
        let bare = re_planned(RE_PLAN, Outcome::Replayed, None);
        let message = &bare.finding(Check::MissingReference).message;
        assert!(
            message.contains("(call 1, decision 2 as tool call tu-0-1-2, worker 1, attempt 2) decided the step again and was answered replayed without the effect reference, though the target had already given it (rcpt-1)"),
            "{message}"
        );
        let pending = re_planned(RE_PLAN, Outcome::Pending, None);
        assert!(pending.has(Check::MissingReference));
        let with_reference = re_planned(RE_PLAN, Outcome::Replayed, Some("rcpt-1"));
        assert!(!with_reference.has(Check::MissingReference));
        // Nobody could tell who asked: saying so is not hiding the reference.
        let unknown = re_planned(RE_PLAN, Outcome::Unknown, None);
        assert!(!unknown.has(Check::MissingReference));
        // Under allow, the second call is an action of its own, not a re-plan.
        let allowed = re_planned(RE_PLAN_ALLOWED, Outcome::Replayed, None);
        assert!(!allowed.has(Check::MissingReference));
    }

    /// A re-plan coalesced into the first charge but told `applied`: the
    /// model hears a new charge and may report two to the user.
    #[test]
    fn applied_to_a_re_plan_of_an_applied_intent_is_stale() {
        let verdict = Case::new(RE_PLAN)
            .commit(1, 3)
            .answer(1, 1, 5, Outcome::Applied)
            .decide_again(1, true)
            .bare_answer(1, 6, 10, Outcome::Applied)
            .judge();
        let message = &verdict.finding(Check::StaleApplied).message;
        assert!(
            message.contains("(call 1, decision 2 as tool call tu-0-1-2, worker 1, attempt 2) answered applied, but the effect (rcpt-1) was committed at 3 ms, before the attempt was sent at 6 ms"),
            "{message}"
        );
        assert!(!verdict.has(Check::DuplicateEffect));
        // Told with the first charge's receipt, it is named for what it is.
        let with_receipt = Case::new(RE_PLAN)
            .commit(1, 3)
            .answer(1, 1, 5, Outcome::Applied)
            .decide_again(1, true)
            .answer(1, 6, 10, Outcome::Applied)
            .judge();
        assert!(with_receipt.has(Check::UnmarkedReplay));
    }

    /// A retry of the same tool call is not a re-plan: its reference was
    /// never owed by this check (the honesty checks above judge it).
    #[test]
    fn a_retry_of_the_same_tool_call_owes_no_reference() {
        let verdict = Case::new(ONE_CALL)
            .commit(1, 3)
            .answer(1, 1, 5, Outcome::Applied)
            .bare_answer(1, 6, 10, Outcome::Replayed)
            .judge();
        assert!(
            !verdict.has(Check::MissingReference),
            "{:?}",
            verdict.findings
        );
    }

    #[test]
    fn applied_for_the_effect_of_the_same_attempt_passes() {
        let verdict = Case::new(ONE_CALL)
            .commit(1, 3)
            .answer(1, 1, 5, Outcome::Applied)
            .judge();
        assert!(verdict.findings.is_empty(), "{:?}", verdict.findings);
    }

    #[test]
    fn a_claim_with_no_effect_is_caught() {
        let verdict = Case::new(ONE_CALL)
            .answer(1, 1, 5, Outcome::Applied)
            .judge();
        let message = &verdict.finding(Check::ClaimWithoutEffect).message;
        assert!(
            message.contains("answered applied, but the provider holds no effect"),
            "{message}"
        );
    }

    #[test]
    fn applied_for_an_older_effect_is_stale_and_replayed_is_not() {
        let retry = |outcome| {
            Case::new(ONE_CALL)
                .commit(1, 3)
                .timeout(1, 1, 10)
                .bare_answer(1, 12, 14, outcome)
                .judge()
        };
        let stale = retry(Outcome::Applied);
        let message = &stale.finding(Check::StaleApplied).message;
        assert!(
            message.contains("committed at 3 ms, before the attempt was sent at 12 ms"),
            "{message}"
        );
        let replayed = Case::new(ONE_CALL)
            .commit(1, 3)
            .timeout(1, 1, 10)
            .answer(1, 12, 14, Outcome::Replayed)
            .judge();
        assert!(replayed.findings.is_empty(), "{:?}", replayed.findings);
    }

    /// Issue 11: a replay answered with a plain 201 and the stored receipt
    /// read as `stale-applied`, true by the protocol but taken for a harness
    /// bug. It is named for what it is: the replay was not marked.
    #[test]
    fn a_stored_receipt_told_as_applied_is_an_unmarked_replay() {
        let verdict = Case::new(ONE_CALL)
            .commit(1, 3)
            .timeout(1, 1, 10)
            .answer(1, 12, 14, Outcome::Applied)
            .judge();
        let message = &verdict.finding(Check::UnmarkedReplay).message;
        assert!(
            message.contains("was answered 201 with the stored receipt rcpt-1 of the effect committed at 3 ms, before it was sent at 12 ms, but not marked as a replay"),
            "{message}"
        );
        assert!(!verdict.has(Check::StaleApplied));
    }

    #[test]
    fn failed_while_the_effect_exists_is_caught() {
        let verdict = Case::new(ONE_CALL)
            .commit(1, 3)
            .bare_answer(1, 1, 5, Outcome::Failed)
            .judge();
        let message = &verdict.finding(Check::FailedWithEffect).message;
        assert!(
            message.contains("committed its effect (rcpt-1) at 3 ms"),
            "{message}"
        );
    }

    #[test]
    fn rejected_while_the_effect_exists_is_caught() {
        let rejected = Case::new(ONE_CALL)
            .commit(1, 3)
            .bare_answer(1, 1, 5, Outcome::Rejected)
            .judge();
        assert!(rejected.has(Check::RejectedWithEffect));
        let truly = Case::new(ONE_CALL)
            .bare_answer(1, 1, 5, Outcome::Rejected)
            .judge();
        assert!(!truly.has(Check::RejectedWithEffect));
    }

    /// Issue 13: a changed payload refused with a bare 417 was read as
    /// rejected, and `rejected-with-effect` blamed the first call's effect
    /// on the refused one.
    #[test]
    fn a_changed_payload_refused_while_the_first_effect_stands_is_not_rejected_with_effect() {
        let refused = Case::new(CHANGED)
            .commit(1, 3)
            .answer(1, 1, 5, Outcome::Applied)
            .status_answer(2, 6, 8, 417, Outcome::Rejected)
            .judge();
        assert!(
            !refused.has(Check::RejectedWithEffect),
            "{:?}",
            refused.findings
        );
        // The same payload retried and rejected while its effect stands is
        // still caught, with a hint when the status is not the protocol's.
        let retried = Case::new(ONE_CALL)
            .commit(1, 3)
            .timeout(1, 1, 10)
            .status_answer(1, 12, 14, 417, Outcome::Rejected)
            .judge();
        let message = &retried.finding(Check::RejectedWithEffect).message;
        assert!(
            message.contains("it answered status 417, which the protocol does not name")
                && message.contains("[status] 417 = \"conflict\""),
            "{message}"
        );
        let plain = Case::new(ONE_CALL)
            .commit(1, 3)
            .bare_answer(1, 1, 5, Outcome::Rejected)
            .judge();
        assert!(!plain
            .finding(Check::RejectedWithEffect)
            .message
            .contains("does not name"));
    }

    /// Issue 12: a held call is for review, so any effect it had is a lie.
    #[test]
    fn held_while_the_effect_exists_is_caught() {
        let held = Case::new(ONE_CALL)
            .commit(1, 3)
            .bare_answer(1, 1, 5, Outcome::Held)
            .judge();
        let message = &held.finding(Check::HeldWithEffect).message;
        assert!(message.contains("answered held"), "{message}");
        assert_eq!(held.status, crate::Status::Fail);
        let truly = Case::new(ONE_CALL)
            .bare_answer(1, 1, 5, Outcome::Held)
            .judge();
        assert!(!truly.has(Check::HeldWithEffect));
    }

    #[test]
    fn denied_while_dispatching_is_caught() {
        let verdict = Case::new(REVOKED)
            .commit(1, 3)
            .answer(1, 1, 5, Outcome::Applied)
            .revoked(6)
            .replayed_dispatch(2, 8)
            .bare_answer(2, 7, 9, Outcome::Denied)
            .judge();
        let message = &verdict.finding(Check::DeniedButDispatched).message;
        assert!(
            message.contains("yet dispatch 2 reached the provider at 8 ms"),
            "{message}"
        );
        let honest = Case::new(REVOKED)
            .commit(1, 3)
            .answer(1, 1, 5, Outcome::Applied)
            .revoked(6)
            .bare_answer(2, 7, 9, Outcome::Denied)
            .judge();
        assert!(honest.findings.is_empty(), "{:?}", honest.findings);
    }

    #[test]
    fn a_receipt_the_ledger_does_not_hold_is_caught() {
        let verdict = Case::new(ONE_CALL)
            .commit(1, 3)
            .answer_with_receipt(1, 1, 5, Outcome::Applied, "rcpt-99")
            .judge();
        let message = &verdict.finding(Check::ReceiptMismatch).message;
        assert!(
            message.contains(
                "receipt 'rcpt-99', but the provider's receipts for this operation are [rcpt-1]"
            ),
            "{message}"
        );
    }
}
