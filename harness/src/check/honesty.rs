//! Outcome honesty: whether each answer told the truth about the ledger.
//! Never `applied`/`replayed` without an effect, never `applied` for an
//! effect older than the attempt (that is a replay), never `rejected` when
//! the effect exists, never `denied` while dispatching, and only receipts the
//! ledger holds for the operation.

use chaos_kit::protocol::Outcome;

use super::view::{describe, AnswerView, OperationView, RunView};
use super::{Anchor, Check, Findings};

pub(super) fn check(run: &RunView<'_>, findings: &mut Findings) {
    for operation in &run.operations {
        for answer in &operation.answers {
            outcome(run, operation, answer, findings);
            receipt(operation, answer, findings);
        }
    }
}

/// Whether the outcome is true to the ledger. A claimed effect for a changed
/// payload is the payload checker's (`replay-for-changed-payload`).
fn outcome(
    run: &RunView<'_>,
    operation: &OperationView<'_>,
    answer: &AnswerView<'_>,
    findings: &mut Findings,
) {
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
            let first = answer.effects_by_answer[0];
            fail(
                Check::StaleApplied,
                format!(
                    "operation '{name}': attempt {who} answered applied, but the effect ({}) was committed at {} ms, before the attempt was sent at {} ms: a replay reported as a new effect",
                    first.receipt, first.at, answer.attempt.sent_at
                ),
            );
        }
        Outcome::Rejected if !answer.effects_of_epoch.is_empty() => fail(
            Check::RejectedWithEffect,
            format!(
                "operation '{name}': attempt {who} answered rejected, but the provider committed its effect ({}) at {} ms",
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
            let dispatched = run.run.ledger.dispatches.iter().find(|dispatch| {
                dispatch.subject.as_deref() == Some(operation.subject) && attempt.spans(dispatch.at)
            });
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

#[cfg(test)]
mod tests {
    use super::super::tests::{Case, Found, ONE_CALL, REVOKED};
    use crate::check::Check;
    use chaos_kit::protocol::Outcome;

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
                .answer(1, 12, 14, outcome)
                .judge()
        };
        let stale = retry(Outcome::Applied);
        let message = &stale.finding(Check::StaleApplied).message;
        assert!(
            message.contains("committed at 3 ms, before the attempt was sent at 12 ms"),
            "{message}"
        );
        let replayed = retry(Outcome::Replayed);
        assert!(replayed.findings.is_empty(), "{:?}", replayed.findings);
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
