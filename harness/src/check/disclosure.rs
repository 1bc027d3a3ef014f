//! No disclosure: an idempotency key is not a credential. A caller whose
//! permission was revoked gets no receipt and no result, and neither does an
//! answer that refuses (`denied`, `conflict`).

use chaos_kit::protocol::Outcome;

use super::view::{describe, RunView};
use super::{Anchor, Check, Findings};

pub(super) fn check(run: &RunView<'_>, findings: &mut Findings) {
    for operation in &run.operations {
        let name = operation.name;
        for answer in &operation.answers {
            let said = answer.said;
            let who = describe(answer.attempt);
            let anchor = Anchor::Attempt {
                operation: operation.index,
                position: answer.position,
                slot: 1,
            };
            let sent_after_revocation = run
                .revoked_at
                .is_some_and(|at| answer.attempt.sent_at >= at);
            if sent_after_revocation && said.outcome.claims_effect() {
                let what = match (said.receipt.is_some(), said.disclosed_result) {
                    (true, true) => "with the receipt and result",
                    (true, false) => "with the receipt",
                    (false, true) => "with the result",
                    (false, false) => "",
                };
                findings.fail(
                    anchor,
                    Check::Disclosure,
                    Some(name),
                    format!(
                        "operation '{name}': attempt {who}, sent after the caller's permission was revoked at {} ms, was answered {} {what} instead of denied",
                        run.revoked_at.unwrap_or_default(),
                        said.outcome
                    ),
                );
            } else if matches!(said.outcome, Outcome::Denied | Outcome::Conflict)
                && (said.receipt.is_some() || said.disclosed_result)
            {
                let what = match (said.receipt.is_some(), said.disclosed_result) {
                    (true, true) => "a receipt and a result",
                    (true, false) => "a receipt",
                    _ => "a result",
                };
                findings.fail(
                    anchor,
                    Check::Disclosure,
                    Some(name),
                    format!(
                        "operation '{name}': attempt {who} answered {} but disclosed {what}",
                        said.outcome
                    ),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{Case, Found, CHANGED, REVOKED};
    use crate::check::Check;
    use chaos_kit::protocol::Outcome;

    fn revoked_after_the_first_call() -> Case {
        Case::new(REVOKED)
            .commit(1, 3)
            .answer(1, 1, 5, Outcome::Applied)
            .revoked(6)
    }

    #[test]
    fn a_bare_denial_after_revocation_passes() {
        let verdict = revoked_after_the_first_call()
            .bare_answer(2, 7, 9, Outcome::Denied)
            .judge();
        assert!(verdict.findings.is_empty(), "{:?}", verdict.findings);
    }

    #[test]
    fn a_replay_after_revocation_discloses_the_receipt() {
        let verdict = revoked_after_the_first_call()
            .answer(2, 7, 9, Outcome::Replayed)
            .judge();
        let message = &verdict.finding(Check::Disclosure).message;
        assert!(
            message.contains("sent after the caller's permission was revoked at 6 ms, was answered replayed with the receipt and result instead of denied"),
            "{message}"
        );
    }

    #[test]
    fn a_refusal_that_carries_a_receipt_discloses_it() {
        let denied = revoked_after_the_first_call()
            .answer_with_receipt(2, 7, 9, Outcome::Denied, "rcpt-1")
            .judge();
        assert!(denied
            .finding(Check::Disclosure)
            .message
            .contains("answered denied but disclosed a receipt"));
        let conflict = Case::new(CHANGED)
            .commit(1, 3)
            .answer(1, 1, 5, Outcome::Applied)
            .answer_with_receipt(2, 6, 8, Outcome::Conflict, "rcpt-1")
            .judge();
        assert!(conflict.has(Check::Disclosure));
    }
}
