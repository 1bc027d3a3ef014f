//! Past the target's declared retention, its declared policy: the seed
//! article asks to "verify the application's reconciliation policy rather
//! than assuming deduplication lasts forever". A retry past the retention
//! (in both readings of an attempt that straddles it, see `Epochs`) is
//! judged by what the target said it does then:
//!
//! - `new-operation`: one new effect is allowed (counted by `effects`);
//! - `refuse`: no dispatch and no claimed effect, a `rejected` instead;
//! - `reconcile`: no dispatch before the key was looked up at the provider,
//!   and none after the lookup found the effect.

use chaos_kit::target::AfterRetention;

use super::view::{describe, OperationView, RunView};
use super::{Anchor, Check, Findings};
use crate::history::{Dispatch, Ms};

pub(super) fn check(run: &RunView<'_>, findings: &mut Findings) {
    let retention = match run.retention {
        Some(retention) => humantime::format_duration(retention).to_string(),
        None => return,
    };
    for operation in &run.operations {
        match run.after_retention {
            AfterRetention::NewOperation => {}
            AfterRetention::Refuse => refuse(operation, &retention, findings),
            AfterRetention::Reconcile => reconcile(run, operation, &retention, findings),
        }
    }
}

/// Where `dispatch` falls past the retention in both readings: the later of
/// the two epoch starts, or `None` if either reading has it inside.
fn expired_epoch_start(operation: &OperationView<'_>, at: Ms) -> Option<Ms> {
    let mut start = 0;
    for epochs in &operation.readings {
        let epoch = epochs.at(at);
        if epoch == 0 {
            return None;
        }
        start = start.max(epochs.starts[epoch]);
    }
    Some(start)
}

fn refuse(operation: &OperationView<'_>, retention: &str, findings: &mut Findings) {
    let name = operation.name;
    let anchor = Anchor::Operation {
        index: operation.index,
        slot: 3,
    };
    if let Some(dispatch) = operation
        .dispatches
        .iter()
        .find(|dispatch| expired_epoch_start(operation, dispatch.at).is_some())
    {
        findings.fail(
            anchor,
            Check::ExpiredNotRefused,
            Some(name),
            format!(
                "operation '{name}': dispatch {} at {} ms came past the target's declared {retention} retention, whose policy is to refuse such a retry (rejected, with no dispatch)",
                dispatch.number, dispatch.at
            ),
        );
        return;
    }
    let claimed = operation.answers.iter().find(|answer| {
        answer.said.outcome.claims_effect()
            && operation
                .readings
                .iter()
                .all(|epochs| epochs.of_attempt[answer.position] > 0)
    });
    if let Some(answer) = claimed {
        findings.fail(
            anchor,
            Check::ExpiredNotRefused,
            Some(name),
            format!(
                "operation '{name}': attempt {}, past the target's declared {retention} retention, was answered {} instead of rejected, as its policy refuse says",
                describe(answer.attempt),
                answer.said.outcome
            ),
        );
    }
}

fn reconcile(
    run: &RunView<'_>,
    operation: &OperationView<'_>,
    retention: &str,
    findings: &mut Findings,
) {
    for dispatch in &operation.dispatches {
        let Some(epoch_start) = expired_epoch_start(operation, dispatch.at) else {
            continue;
        };
        let key = dispatch.key.as_deref().unwrap_or("");
        let lookups: Vec<_> = run
            .run
            .ledger
            .lookups
            .iter()
            .filter(|lookup| {
                lookup.key == key && epoch_start <= lookup.at && lookup.at <= dispatch.at
            })
            .collect();
        let problem = match lookups.iter().find_map(|lookup| {
            let receipt = lookup.found.as_deref()?;
            Some((lookup.at, receipt))
        }) {
            Some((at, receipt)) => format!(
                "looked key '{key}' up at {at} ms, found its effect ({receipt}), and dispatched anyway"
            ),
            None if lookups.is_empty() => {
                format!("was sent without looking key '{key}' up at the provider first")
            }
            None => continue,
        };
        fail_reconcile(operation, dispatch, retention, &problem, findings);
        return;
    }
}

fn fail_reconcile(
    operation: &OperationView<'_>,
    dispatch: &Dispatch,
    retention: &str,
    problem: &str,
    findings: &mut Findings,
) {
    let name = operation.name;
    findings.fail(
        Anchor::Operation {
            index: operation.index,
            slot: 3,
        },
        Check::ExpiredNotReconciled,
        Some(name),
        format!(
            "operation '{name}': dispatch {} at {} ms, past the target's declared {retention} retention, {problem}; its policy reconcile says to look before sending",
            dispatch.number, dispatch.at
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::super::tests::{Case, Found, TWO_CALLS};
    use crate::check::Check;
    use chaos_kit::protocol::Outcome;
    use chaos_kit::target::AfterRetention;

    /// Applied, then 400 days later (past a 7-day retention) the retry.
    fn late_retry(policy: AfterRetention) -> Case {
        Case::new(TWO_CALLS)
            .retention_days(7)
            .after_retention(policy)
            .commit(1, 3)
            .answer(1, 1, 5, Outcome::Applied)
            .clock_jump(6, 400)
    }

    #[test]
    fn refuse_means_rejected_with_no_dispatch() {
        let refused = late_retry(AfterRetention::Refuse)
            .bare_answer(2, 8, 10, Outcome::Rejected)
            .judge();
        assert!(refused.findings.is_empty(), "{:?}", refused.findings);
        let sent = late_retry(AfterRetention::Refuse)
            .commit(2, 9)
            .answer(2, 8, 10, Outcome::Applied)
            .judge();
        let message = &sent.finding(Check::ExpiredNotRefused).message;
        assert!(
            message.contains("dispatch 2 at 9 ms came past the target's declared 7days retention"),
            "{message}"
        );
        // Refusing allows no new effect either.
        assert!(sent.has(Check::DuplicateEffect));
        // The same retry is a new operation under the default policy.
        let new_operation = late_retry(AfterRetention::NewOperation)
            .commit(2, 9)
            .answer(2, 8, 10, Outcome::Applied)
            .judge();
        assert!(
            new_operation.findings.is_empty(),
            "{:?}",
            new_operation.findings
        );
    }

    #[test]
    fn reconcile_means_a_lookup_before_any_dispatch() {
        let blind_send = late_retry(AfterRetention::Reconcile)
            .commit(2, 9)
            .answer(2, 8, 10, Outcome::Applied)
            .judge();
        let message = &blind_send.finding(Check::ExpiredNotReconciled).message;
        assert!(
            message.contains("was sent without looking key"),
            "{message}"
        );
        // Asked, and the provider had forgotten too: a new operation.
        let asked = late_retry(AfterRetention::Reconcile)
            .lookup(2, 8, false)
            .commit(2, 9)
            .answer(2, 8, 10, Outcome::Applied)
            .judge();
        assert!(asked.findings.is_empty(), "{:?}", asked.findings);
        // Asked, found it, and sent anyway.
        let ignored = late_retry(AfterRetention::Reconcile)
            .lookup(2, 8, true)
            .commit(2, 9)
            .answer(2, 8, 10, Outcome::Applied)
            .judge();
        let message = &ignored.finding(Check::ExpiredNotReconciled).message;
        assert!(
            message.contains("found its effect (rcpt-1), and dispatched anyway"),
            "{message}"
        );
    }
}
