//! What a pass hides: a race the provider absorbed. With a keyed provider,
//! a layer that lets concurrent attempts through shows several dispatches
//! under one key and one effect: the provider's idempotency store, not the
//! layer, held. That is a `race-absorbed-by-provider` warning, never a
//! failure (the effects are right): it says the layer would charge twice
//! against a provider without keys, and `--deny warnings` makes it fail.

use super::view::RunView;
use super::{Anchor, Check, Findings};
use crate::history::Disposition;

pub(super) fn check(run: &RunView<'_>, findings: &mut Findings) {
    for operation in &run.operations {
        // A duplicate already fails, and says more.
        if operation.effects.len() as u32 > operation.expected_max {
            continue;
        }
        // Answered from the provider's store while another attempt of the
        // operation was in flight: a lost answer's retry comes after the
        // attempt it retries, so it is not counted.
        let absorbed: Vec<_> = (operation.dispatches.iter())
            .filter(|dispatch| matches!(dispatch.disposition, Disposition::Replayed { .. }))
            .filter(|dispatch| {
                (operation.attempts.iter())
                    .filter(|attempt| attempt.spans(dispatch.at))
                    .count()
                    >= 2
            })
            .collect();
        let Some(first) = absorbed.first() else {
            continue;
        };
        let name = operation.name;
        findings.fail(
            Anchor::Operation {
                index: operation.index,
                slot: 2,
            },
            Check::RaceAbsorbedByProvider,
            Some(name),
            format!(
                "operation '{name}': {} dispatches reached the provider for {} effect(s); {} of them came while another attempt was in flight and the provider answered from its idempotency store (dispatch {} at {} ms): the layer let the race through, the provider's key held",
                operation.dispatches.len(),
                operation.effects.len(),
                absorbed.len(),
                first.number,
                first.at
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use chaos_kit::protocol::Outcome;

    use super::super::tests::{Case, Found, ONE_CALL};
    use super::super::{Check, Status};

    #[test]
    fn a_store_answer_while_another_attempt_was_in_flight_is_a_warning() {
        let raced = Case::new(ONE_CALL)
            .commit(1, 3)
            .replayed_dispatch(1, 4)
            .answer(1, 1, 6, Outcome::Applied)
            .answer(1, 2, 7, Outcome::Replayed)
            .judge();
        assert_eq!(raced.status, Status::Pass, "a warning never fails");
        let message = &raced.finding(Check::RaceAbsorbedByProvider).message;
        assert!(
            message.starts_with("operation 'reminder': 2 dispatches reached the provider for 1 effect(s); 1 of them"),
            "{message}"
        );
        assert!(raced.decisive().is_some());
    }

    #[test]
    fn a_retry_after_the_attempt_ended_is_no_race() {
        let retried = Case::new(ONE_CALL)
            .commit(1, 3)
            .timeout(1, 1, 5)
            .replayed_dispatch(1, 7)
            .answer(1, 6, 9, Outcome::Replayed)
            .judge();
        assert!(
            !retried.has(Check::RaceAbsorbedByProvider),
            "{:?}",
            retried.findings
        );
    }
}
