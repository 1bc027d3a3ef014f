//! No disclosure: an idempotency key is not a credential. A caller whose
//! permission was revoked gets no receipt and no result, whatever the answer
//! says (`pending` and `unknown` and `rejected` included), and neither does an
//! answer that refuses (`denied`, `conflict`) nor a caller of another tenant.
//! Nor does a caller receive a record its tenant does not own: the records
//! an answer's result released (an export's) are held against their owners
//! as the provider stores them.
//! Revocation also bounds what happens downstream: nothing is dispatched for
//! an attempt sent after it.

use chaos_kit::protocol::Outcome;

use super::view::{describe, AnswerView, OperationView, RunView};
use super::{Anchor, Check, Findings};

pub(super) fn check(run: &RunView<'_>, findings: &mut Findings) {
    for operation in &run.operations {
        for answer in &operation.answers {
            answer_discloses(run, operation, answer, findings);
            releases_foreign_records(run, operation, answer, findings);
        }
        dispatched_after_revocation(run, operation, findings);
    }
}

fn answer_discloses(
    run: &RunView<'_>,
    operation: &OperationView<'_>,
    answer: &AnswerView<'_>,
    findings: &mut Findings,
) {
    let name = operation.name;
    let said = answer.said;
    let who = describe(answer.attempt);
    let anchor = Anchor::Attempt {
        operation: operation.index,
        position: answer.position,
        slot: 1,
    };
    let carries = said.receipt.is_some() || said.disclosed_result;
    let what = match (said.receipt.is_some(), said.disclosed_result) {
        (true, true) => "with the receipt and result",
        (true, false) => "with the receipt",
        (false, true) => "with the result",
        (false, false) => "",
    };
    let sent_after_revocation = run.sent_after_revocation(answer.attempt);
    // Saying the effect exists is itself a disclosure; so is carrying its
    // receipt or result in any answer at all.
    if matches!(said.outcome, Outcome::Denied | Outcome::Conflict) && carries {
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
    } else if sent_after_revocation && (said.outcome.claims_effect() || carries) {
        let instead = if said.outcome.claims_effect() {
            " instead of denied"
        } else {
            ""
        };
        findings.fail(
            anchor,
            Check::Disclosure,
            Some(name),
            format!(
                "operation '{name}': attempt {who}, sent after the caller's permission was revoked at {} ms, was answered {} {what}{instead}",
                run.revoked_at.unwrap_or_default(),
                said.outcome
            ),
        );
    } else if let Some(owner) = said
        .receipt
        .as_deref()
        .and_then(|receipt| owner_of_receipt(run, receipt))
        .filter(|owner| owner.tenant != operation.tenant)
    {
        findings.fail(
            anchor,
            Check::Disclosure,
            Some(name),
            format!(
                "operation '{name}' of tenant '{}': attempt {who} was answered {} with receipt {} of operation '{}' of tenant '{}': one tenant saw another's effect (a record scoped without the tenant)",
                operation.tenant,
                said.outcome,
                said.receipt.as_deref().unwrap_or_default(),
                owner.name,
                owner.tenant
            ),
        );
    }
}

/// An answer whose result carried records another tenant owns, by the
/// fixture's stored owners (what the provider's `GET /records` serves):
/// a bulk route that skipped the per-record check the single-record one
/// does. Judged on what reached the caller, whatever the answer's outcome.
fn releases_foreign_records(
    run: &RunView<'_>,
    operation: &OperationView<'_>,
    answer: &AnswerView<'_>,
    findings: &mut Findings,
) {
    let Some(fixture) = &run.trial.scenario.fixture else {
        return;
    };
    let (_, caller) = run.trial.caller(operation.tenant);
    let foreign: Vec<String> = answer
        .said
        .records
        .iter()
        .filter_map(|id| {
            let owner = fixture.records.get(id)?;
            (*owner != caller).then(|| format!("{id} (tenant '{owner}')"))
        })
        .collect();
    if foreign.is_empty() {
        return;
    }
    let name = operation.name;
    findings.fail(
        Anchor::Attempt {
            operation: operation.index,
            position: answer.position,
            slot: 1,
        },
        Check::Disclosure,
        Some(name),
        format!(
            "operation '{name}': attempt {} was answered {} with {}, which tenant '{caller}' does not own: another tenant's records reached the caller (a bulk route without the per-record tenant check)",
            describe(answer.attempt),
            answer.said.outcome,
            foreign.join(", ")
        ),
    );
}

/// The operation whose effect carries `receipt`.
fn owner_of_receipt<'a>(run: &'a RunView<'_>, receipt: &str) -> Option<&'a OperationView<'a>> {
    run.operations.iter().find(|operation| {
        operation
            .effects
            .iter()
            .any(|effect| effect.receipt == receipt)
    })
}

/// `dispatched-after-revocation`: every attempt in flight when the dispatch
/// reached the provider was sent after the revocation took effect, so every
/// authorization check behind it came after too, and none could pass.
/// (A dispatch of an attempt authorized before the revocation is a race
/// the revocation lost, not a bypass.)
fn dispatched_after_revocation(
    run: &RunView<'_>,
    operation: &OperationView<'_>,
    findings: &mut Findings,
) {
    let Some(revoked_at) = run.revoked_at else {
        return;
    };
    let name = operation.name;
    for dispatch in &operation.dispatches {
        if run.dispatched_before_revocation(dispatch.number) {
            continue;
        }
        let in_flight: Vec<_> = operation
            .attempts
            .iter()
            .filter(|attempt| attempt.spans(dispatch.at))
            .collect();
        if in_flight.is_empty()
            || in_flight
                .iter()
                .any(|attempt| !run.sent_after_revocation(attempt))
        {
            continue;
        }
        findings.fail(
            Anchor::Operation {
                index: operation.index,
                slot: 4,
            },
            Check::DispatchedAfterRevocation,
            Some(name),
            format!(
                "operation '{name}': dispatch {} reached the provider at {} ms for attempt {}, sent after the caller's permission was revoked at {revoked_at} ms: authorization was bypassed",
                dispatch.number,
                dispatch.at,
                describe(in_flight[0])
            ),
        );
        return;
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{Case, Found, CHANGED, REVOKED, TENANTS};
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

    /// Issue 11: "no receipt or result in any answer after the caller was
    /// revoked" held only for applied and replayed; a 409 carrying the
    /// stored body is a disclosure too.
    #[test]
    fn any_answer_after_revocation_that_carries_the_receipt_discloses_it() {
        for outcome in [Outcome::Pending, Outcome::Unknown, Outcome::Rejected] {
            let verdict = revoked_after_the_first_call()
                .answer_with_receipt(2, 7, 9, outcome, "rcpt-1")
                .judge();
            let message = &verdict.finding(Check::Disclosure).message;
            assert!(
                message.contains(&format!("was answered {outcome} with the receipt")),
                "{message}"
            );
        }
        let bare = revoked_after_the_first_call()
            .bare_answer(2, 7, 9, Outcome::Pending)
            .judge();
        assert!(!bare.has(Check::Disclosure), "{:?}", bare.findings);
    }

    #[test]
    fn a_dispatch_for_an_attempt_sent_after_revocation_is_caught_whatever_it_said() {
        let verdict = revoked_after_the_first_call()
            .commit(2, 8)
            .bare_answer(2, 7, 9, Outcome::Unknown)
            .judge();
        let message = &verdict.finding(Check::DispatchedAfterRevocation).message;
        assert!(
            message.contains("dispatch 2 reached the provider at 8 ms for attempt att-0-2-1-1"),
            "{message}"
        );
        // An attempt authorized before the revocation lost a race, nothing
        // more: a revocation in flight, stamped after the attempt was sent.
        let in_flight = REVOKED.replace("after-call = 1", "after-commit = 1");
        let raced = Case::new(&in_flight)
            .commit(1, 3)
            .answer(1, 1, 5, Outcome::Applied)
            .commit(2, 8)
            .revoked(7)
            .answer(2, 6, 9, Outcome::Applied)
            .judge();
        assert!(
            !raced.has(Check::DispatchedAfterRevocation),
            "{:?}",
            raced.findings
        );
    }

    /// A warm target answers call 1 and receives call 2 in the millisecond
    /// the revocation between them is stamped with: call 1's attempt was
    /// still sent before it (redis-ledger at revoked-new-operation, live,
    /// failed `disclosure` on its applied first call once processes were
    /// reused across trials).
    #[test]
    fn a_revocation_between_calls_orders_them_when_the_clock_cannot() {
        let verdict = Case::new(REVOKED)
            .commit(1, 1)
            .answer(1, 1, 1, Outcome::Applied)
            .revoked(1)
            .bare_answer(2, 1, 2, Outcome::Denied)
            .judge();
        assert!(verdict.findings.is_empty(), "{:?}", verdict.findings);

        let replayed = Case::new(REVOKED)
            .commit(1, 1)
            .answer(1, 1, 1, Outcome::Applied)
            .revoked(1)
            .answer(2, 1, 2, Outcome::Replayed)
            .judge();
        assert!(replayed.has(Check::Disclosure), "{:?}", replayed.findings);
    }

    /// A revocation right after the first dispatch, stamped in the tick
    /// that dispatch and its attempt share (redis-ledger at
    /// revoked-while-unknown, live, with a warm process).
    #[test]
    fn the_dispatch_a_revocation_follows_came_before_it_in_one_tick() {
        let after_the_commit = REVOKED.replace("after-call = 1", "after-commit = 1");
        let verdict = Case::new(&after_the_commit)
            .commit(1, 0)
            .revoked(0)
            .bare_answer(1, 0, 2, Outcome::Unknown)
            .bare_answer(2, 3, 4, Outcome::Denied)
            .judge();
        assert!(
            !verdict.has(Check::DispatchedAfterRevocation),
            "{:?}",
            verdict.findings
        );
    }

    #[test]
    fn another_tenants_receipt_is_a_disclosure() {
        let leaked = Case::new(TENANTS)
            .commit(1, 3)
            .answer(1, 1, 5, Outcome::Applied)
            .answer_with_receipt(2, 6, 8, Outcome::Replayed, "rcpt-1")
            .judge();
        let message = &leaked.finding(Check::Disclosure).message;
        assert!(
            message.contains("operation 'south' of tenant 'south'")
                && message.contains("receipt rcpt-1 of operation 'north' of tenant 'north'"),
            "{message}"
        );
        assert!(leaked.has(Check::MissingEffect));
        let apart = Case::new(TENANTS)
            .commit(1, 3)
            .answer(1, 1, 5, Outcome::Applied)
            .commit(2, 7)
            .answer(2, 6, 8, Outcome::Applied)
            .judge();
        assert!(apart.findings.is_empty(), "{:?}", apart.findings);
    }

    const EXPORT: &str = r#"
test = "authorization"
description = "Alex exports North's invoices"
[provider]
profile = "keyed"
[fixture]
actor = "alex"
tenant = "north"
scope = ["read_invoice", "export_invoices"]
[fixture.records]
INV-A = "north"
INV-B = "south"
[[call]]
operation = "export-own"
tool = "export_invoices"
attempts = 1
decision = "allow"
[call.arguments]
tenant = "north"
"#;

    /// The composition failure: an export in scope, allowed, whose result
    /// carried South's record to North's caller. The answer's decision is
    /// right; what reached the caller is not.
    #[test]
    fn an_export_that_releases_another_tenants_record_discloses_it() {
        let leaked = Case::new(EXPORT)
            .commit(1, 3)
            .answer_releasing(1, 1, 5, Outcome::Applied, &["INV-A", "INV-B"])
            .judge();
        let message = &leaked.finding(Check::Disclosure).message;
        assert!(
            message.contains("was answered applied with INV-B (tenant 'south'), which tenant 'north' does not own"),
            "{message}"
        );
        assert!(!leaked.has(Check::WrongDecision), "{:?}", leaked.findings);
        let own = Case::new(EXPORT)
            .commit(1, 3)
            .answer_releasing(1, 1, 5, Outcome::Applied, &["INV-A"])
            .judge();
        assert!(own.findings.is_empty(), "{:?}", own.findings);
        // A record the fixture does not hold is nobody's to protect.
        let unknown = Case::new(EXPORT)
            .commit(1, 3)
            .answer_releasing(1, 1, 5, Outcome::Applied, &["INV-Z"])
            .judge();
        assert!(unknown.findings.is_empty(), "{:?}", unknown.findings);
    }
}
