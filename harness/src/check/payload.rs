//! The payload an operation was approved with. The same key with another
//! recipient or body is another action wearing the old identity: it must be
//! refused (`conflict`), never sent and never answered with the old result.
//! The same arguments reordered or re-spaced are the same action: refusing
//! them strands a legitimate retry.

use chaos_kit::protocol::Outcome;

use super::view::{describe, OperationView, RunView};
use super::{Anchor, Check, Findings};

pub(super) fn check(run: &RunView<'_>, findings: &mut Findings) {
    for operation in &run.operations {
        changed_payload_dispatched(operation, findings);
        answers(operation, findings);
    }
}

/// `changed-payload-dispatched`: a dispatch whose payload differs from the one
/// its epoch is bound to, in both readings of the retention split, and not
/// during an attempt the target may have taken as a new operation.
fn changed_payload_dispatched(operation: &OperationView<'_>, findings: &mut Findings) {
    let [eager, _] = &operation.readings;
    for dispatch in &operation.dispatches {
        let during_straddling_attempt = operation
            .attempts
            .iter()
            .zip(&eager.straddling)
            .any(|(attempt, straddles)| *straddles && attempt.spans(dispatch.at));
        let changed_in_every_reading = operation.readings.iter().all(|epochs| {
            let epoch = epochs.at(dispatch.at);
            if dispatch.provider_shaped {
                // In the provider's shape, a payload compares only with the
                // first one the target sent in that shape under the same
                // downstream key in its epoch: under another key it is
                // another request, whose per-request details (the key
                // itself, in the metadata) may differ, and whose effect the
                // effect count judges.
                operation
                    .dispatches
                    .iter()
                    .find(|first| {
                        first.provider_shaped
                            && first.key == dispatch.key
                            && epochs.at(first.at) == epoch
                    })
                    .is_some_and(|first| first.intent() != dispatch.intent())
            } else {
                dispatch.intent() != epochs.intents[epoch]
            }
        });
        if changed_in_every_reading && !during_straddling_attempt {
            let name = operation.name;
            findings.fail(
                Anchor::Operation {
                    index: operation.index,
                    slot: 2,
                },
                Check::ChangedPayloadDispatched,
                Some(name),
                format!(
                    "operation '{name}': dispatch {} at {} ms carried a payload that differs from the approved one; a changed payload for the same operation must be a conflict, not a new send",
                    dispatch.number, dispatch.at
                ),
            );
            break;
        }
    }
}

/// What each answer says about the payload it was given.
fn answers(operation: &OperationView<'_>, findings: &mut Findings) {
    let name = operation.name;
    for answer in &operation.answers {
        let anchor = Anchor::Attempt {
            operation: operation.index,
            position: answer.position,
            slot: 0,
        };
        let who = describe(answer.attempt);
        let outcome = answer.said.outcome;
        // An answer that claims an effect the ledger lacks is a
        // claim-without-effect (honesty), whatever its payload.
        if outcome.claims_effect() && !answer.effects_by_answer.is_empty() && answer.changed {
            findings.fail(
                anchor,
                Check::ReplayForChangedPayload,
                Some(name),
                format!(
                    "operation '{name}': attempt {who} sent a payload that differs from the approved one and was answered {outcome} with the old result, instead of a conflict"
                ),
            );
        } else if outcome == Outcome::Conflict && answer.unchanged {
            findings.fail(
                anchor,
                Check::FalseConflict,
                Some(name),
                format!(
                    "operation '{name}': attempt {who} answered conflict to a payload equal to the approved one (same canonical form): a retry was refused as a different action"
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{Case, Found, CHANGED, EQUIVALENT, RE_PLAN};
    use crate::check::Check;
    use chaos_kit::protocol::Outcome;

    fn applied_first(text: &str) -> Case {
        Case::new(text)
            .commit(1, 3)
            .answer(1, 1, 5, Outcome::Applied)
    }

    /// A re-worded intent (the model's "Re: invoice 1, 1st notice") is
    /// neither another action nor the same bytes: a layer may refuse it or
    /// coalesce it, and neither is a payload finding.
    #[test]
    fn a_drifted_re_plan_may_be_refused_or_coalesced() {
        let drifted = || applied_first(RE_PLAN).decide_again(1, true);
        for outcome in [Outcome::Conflict, Outcome::Replayed] {
            let verdict = match outcome {
                Outcome::Conflict => drifted().bare_answer(1, 6, 8, outcome),
                _ => drifted().answer(1, 6, 8, outcome),
            }
            .judge();
            assert!(
                verdict.findings.is_empty(),
                "{outcome}: {:?}",
                verdict.findings
            );
        }
    }

    #[test]
    fn a_changed_payload_refused_as_a_conflict_passes() {
        let verdict = applied_first(CHANGED)
            .bare_answer(2, 6, 8, Outcome::Conflict)
            .judge();
        assert!(verdict.findings.is_empty(), "{:?}", verdict.findings);
    }

    // guards: a Stripe-shaped dispatch (a form, not the arguments) bound the
    // operation to its own fingerprint, and every replay of the very same
    // arguments read as a replay for a changed payload (issue 13, item 2)
    #[test]
    fn a_provider_shaped_payload_is_compared_only_with_its_own_kind() {
        let verdict = Case::new(EQUIVALENT)
            .commit(1, 3)
            .provider_shaped("form-a")
            .answer(1, 1, 5, Outcome::Applied)
            .replayed_dispatch(2, 6)
            .provider_shaped("form-a")
            .answer(2, 6, 8, Outcome::Replayed)
            .judge();
        assert!(verdict.findings.is_empty(), "{:?}", verdict.findings);

        let verdict = Case::new(CHANGED)
            .commit(1, 3)
            .provider_shaped("form-a")
            .answer(1, 1, 5, Outcome::Applied)
            .commit(2, 7)
            .provider_shaped("form-b")
            .answer(2, 6, 8, Outcome::Applied)
            .judge();
        let message = &verdict.finding(Check::ChangedPayloadDispatched).message;
        assert!(message.contains("dispatch 2 at 7 ms"), "{message}");
    }

    #[test]
    fn a_changed_payload_sent_to_the_provider_is_caught() {
        let verdict = applied_first(CHANGED)
            .commit(2, 7)
            .answer(2, 6, 8, Outcome::Applied)
            .judge();
        let message = &verdict.finding(Check::ChangedPayloadDispatched).message;
        assert!(
            message.contains("dispatch 2 at 7 ms carried a payload that differs"),
            "{message}"
        );
    }

    #[test]
    fn the_old_result_for_a_changed_payload_is_caught() {
        let verdict = applied_first(CHANGED)
            .answer(2, 6, 8, Outcome::Replayed)
            .judge();
        assert!(verdict.has(Check::ReplayForChangedPayload));
        assert!(!verdict.has(Check::ChangedPayloadDispatched));
    }

    #[test]
    fn an_equal_payload_must_replay_not_conflict() {
        let replayed = applied_first(EQUIVALENT)
            .answer(2, 6, 8, Outcome::Replayed)
            .judge();
        assert!(replayed.findings.is_empty(), "{:?}", replayed.findings);
        let refused = applied_first(EQUIVALENT)
            .bare_answer(2, 6, 8, Outcome::Conflict)
            .judge();
        let message = &refused.finding(Check::FalseConflict).message;
        assert!(
            message.contains("answered conflict to a payload equal to the approved one"),
            "{message}"
        );
    }
}
