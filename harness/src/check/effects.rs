//! How many effects each operation had, against the provider's ledger: the
//! number users care about (`2/1` is a customer charged twice). Also the
//! dispatches, where a scenario limits them, and effects no operation of the
//! run accounts for.

use super::view::{describe, OperationView, RunView};
use super::{Anchor, Check, Findings};

pub(super) fn check(run: &RunView<'_>, findings: &mut Findings) {
    unattributed(run, findings);
    for operation in &run.operations {
        counts(run, operation, findings);
        dispatches(run, operation, findings);
    }
}

/// Effects carrying no subject of this run: nothing the agent asked for.
fn unattributed(run: &RunView<'_>, findings: &mut Findings) {
    let stray: Vec<String> = run
        .run
        .ledger
        .effects
        .iter()
        .filter(|effect| {
            effect
                .subject
                .as_deref()
                .and_then(|subject| run.trial.operation_of_subject(subject))
                .is_none()
        })
        .map(|effect| format!("{} (dispatch {})", effect.receipt, effect.dispatch))
        .collect();
    if !stray.is_empty() {
        findings.fail(
            Anchor::Run,
            Check::UnattributedEffect,
            None,
            format!(
                "{} effect(s) carry no subject of this run's operations: {}",
                stray.len(),
                stray.join(", ")
            ),
        );
    }
}

/// `duplicate-effect` / `missing-effect`: more effects than the operation may
/// have (past the target's declared retention, a retry may be a new
/// operation: one more per epoch), or fewer than expected.
fn counts(run: &RunView<'_>, operation: &OperationView<'_>, findings: &mut Findings) {
    let anchor = Anchor::Operation {
        index: operation.index,
        slot: 0,
    };
    let name = operation.name;
    let (expected, expected_max) = (operation.expected, operation.expected_max);
    let count = operation.effects.len() as u32;
    // The broker's view, when the consumer reported it: which published
    // message, and which delivery of it, made this effect.
    let dispatch_of = |effect: &crate::history::Effect| {
        run.run
            .ledger
            .dispatches
            .iter()
            .find(|dispatch| dispatch.number == effect.dispatch)
    };
    let delivery = |extra: &crate::history::Effect| {
        let Some(dispatch) = dispatch_of(extra) else {
            return String::new();
        };
        // The message an earlier effect of the operation came from, when
        // the consumer named it and it is another: the producer published
        // the same message again (its confirm was lost), and the broker
        // did not drop it.
        let first = operation
            .effects
            .iter()
            .copied()
            .take_while(|effect| !std::ptr::eq(*effect, extra))
            .filter_map(|effect| dispatch_of(effect)?.message.as_deref())
            .next();
        match (dispatch.message.as_deref(), first, dispatch.delivery) {
            (Some(message), Some(first), delivery) if message != first => format!(
                ", from {} of a second publish of the same message (published by attempt {message}; the first effect came from attempt {first}'s)",
                match delivery {
                    Some(1) | None => "the first delivery".to_owned(),
                    Some(delivery) => format!("delivery {delivery}"),
                }
            ),
            (_, _, Some(1)) => ", from the first delivery of a message".to_owned(),
            (_, _, Some(delivery)) => format!(", from delivery {delivery} of the same message"),
            (_, _, None) => String::new(),
        }
    };
    let culprit = |extra: &crate::history::Effect| {
        operation
            .attempts
            .iter()
            .filter(|attempt| attempt.spans(extra.at))
            .max_by_key(|attempt| attempt.sent_at)
            .map(|attempt| format!("during attempt {}", describe(attempt)))
            .unwrap_or_else(|| "while no attempt was in flight".into())
    };
    if let Some(crowded) = &operation.crowded {
        // Judged epoch by epoch: an epoch that opened past the retention
        // with nothing in it excuses nothing in this one.
        let extra = crowded.extra;
        findings.fail(
            anchor,
            Check::DuplicateEffect,
            Some(name),
            format!(
                "operation '{name}': {} effects within one retention epoch (opened at {} ms), expected {expected} per epoch; effect {} ({}, dispatch {} at {} ms{}) was committed {}",
                crowded.effects,
                crowded.starts_at,
                operation.effects.iter().position(|effect| std::ptr::eq(*effect, extra)).map_or(0, |at| at + 1),
                extra.receipt,
                extra.dispatch,
                extra.at,
                delivery(extra),
                culprit(extra)
            ),
        );
    } else if count > expected_max {
        let extra = operation.effects[expected_max as usize];
        let culprit = culprit(extra);
        findings.fail(
            anchor,
            Check::DuplicateEffect,
            Some(name),
            format!(
                "operation '{name}': {count} effects, expected {}; effect {} ({}, dispatch {} at {} ms{}) was committed {culprit}",
                range(expected, expected_max),
                expected_max + 1,
                extra.receipt,
                extra.dispatch,
                extra.at,
                delivery(extra)
            ),
        );
    } else if let Some(why) = (count < expected && run.judges_completion())
        .then(|| {
            let last = run
                .trial
                .calls
                .iter()
                .rev()
                .find(|call| call.operation == operation.index)?;
            run.no_honest_end(last)
        })
        .flatten()
    {
        findings.fail(
            anchor,
            Check::RunIncomplete,
            Some(name),
            format!("operation '{name}': {count} effects, expected {expected}; not judged on finishing it: {why}"),
        );
    } else if count < expected && run.judges_completion() {
        let last = operation
            .attempts
            .last()
            .map(|attempt| {
                format!(
                    "; the last attempt {} ended {}",
                    describe(attempt),
                    attempt.summary()
                )
            })
            .unwrap_or_default();
        // Under `sign-off`, the effects a human asked for by signing off a
        // re-plan are the ones a coalescing layer drops: say so, not that
        // the operation was abandoned.
        let why = match operation.signed_off {
            0 => "the operation was abandoned".to_owned(),
            signed => format!(
                "{signed} of them for re-plans a human signed off at the authority (its approval names the tool call): a signed-off re-plan was coalesced or refused instead of executed"
            ),
        };
        findings.fail(
            anchor,
            Check::MissingEffect,
            Some(name),
            format!("operation '{name}': {count} effects, expected {expected}: {why}{last}"),
        );
    }
}

/// `extra-dispatch`: more dispatches than `max-dispatches-per-operation`. A
/// target that leans on the provider's dedup shows here, even when its
/// effects are right.
fn dispatches(run: &RunView<'_>, operation: &OperationView<'_>, findings: &mut Findings) {
    let Some(limit) = run.trial.scenario.expect.max_dispatches_per_operation else {
        return;
    };
    let dispatches = &operation.dispatches;
    if dispatches.len() as u32 > limit {
        let extra = dispatches[limit as usize];
        let name = operation.name;
        findings.fail(
            Anchor::Operation {
                index: operation.index,
                slot: 1,
            },
            Check::ExtraDispatch,
            Some(name),
            format!(
                "operation '{name}': {} dispatches reached the provider, at most {limit} allowed; dispatch {} at {} ms was one too many",
                dispatches.len(),
                extra.number,
                extra.at
            ),
        );
    }
}

fn range(min: u32, max: u32) -> String {
    if min == max {
        min.to_string()
    } else {
        format!("{min} to {max}")
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{
        Case, Found, ONE_CALL, RE_PLAN, RE_PLAN_ALLOWED, SHARED_SUBJECT, TWO_CALLS,
    };
    use crate::check::Check;
    use chaos_kit::protocol::Outcome;

    #[test]
    fn one_effect_for_one_operation_passes() {
        let verdict = Case::new(ONE_CALL)
            .commit(1, 3)
            .answer(1, 1, 5, Outcome::Applied)
            .judge();
        assert!(verdict.findings.is_empty(), "{:?}", verdict.findings);
    }

    #[test]
    fn a_second_effect_is_a_duplicate_naming_the_attempt_that_made_it() {
        let verdict = Case::new(ONE_CALL)
            .commit(1, 3)
            .timeout(1, 1, 10)
            .commit(1, 14)
            .answer(1, 12, 16, Outcome::Applied)
            .judge();
        let message = &verdict.finding(Check::DuplicateEffect).message;
        assert!(
            message.starts_with("operation 'reminder': 2 effects, expected 1; effect 2 (rcpt-2, dispatch 2 at 14 ms)"),
            "{message}"
        );
        assert!(
            message.contains("during attempt att-0-1-1-2 (call 1, worker 1, attempt 2)"),
            "{message}"
        );
    }

    // guards: issue 25, "the second effect came from delivery 2 of the same
    // message": the broker's view, as the consumer reported it, is named
    #[test]
    fn a_duplicate_a_broker_redelivered_names_the_delivery() {
        let verdict = Case::new(ONE_CALL)
            .commit(1, 3)
            .delivered(1)
            .commit(1, 9)
            .delivered(2)
            .answer(1, 1, 12, Outcome::Applied)
            .judge();
        let message = &verdict.finding(Check::DuplicateEffect).message;
        assert!(
            message.contains(
                "effect 2 (rcpt-2, dispatch 2 at 9 ms, from delivery 2 of the same message)"
            ),
            "{message}"
        );
        // A second message (the agent published again) is no redelivery.
        let verdict = Case::new(ONE_CALL)
            .commit(1, 3)
            .delivered(1)
            .commit(1, 9)
            .delivered(1)
            .answer(1, 1, 12, Outcome::Applied)
            .judge();
        let message = &verdict.finding(Check::DuplicateEffect).message;
        assert!(
            message.contains("dispatch 2 at 9 ms, from the first delivery of a message)"),
            "{message}"
        );
    }

    // guards: issue 25, "the second effect came from a second publish of the
    // same message": the consumer named the message each effect came from
    #[test]
    fn a_duplicate_from_a_second_publish_names_both_messages() {
        let verdict = Case::new(ONE_CALL)
            .commit(1, 3)
            .delivered(1)
            .of_message("att-0-1-1-1")
            .commit(1, 9)
            .delivered(1)
            .of_message("att-0-1-1-2")
            .answer(1, 1, 12, Outcome::Applied)
            .judge();
        let message = &verdict.finding(Check::DuplicateEffect).message;
        assert!(
            message.contains(
                "dispatch 2 at 9 ms, from the first delivery of a second publish of the same message (published by attempt att-0-1-1-2; the first effect came from attempt att-0-1-1-1's)"
            ),
            "{message}"
        );
        // The same message delivered again is the broker's redelivery.
        let verdict = Case::new(ONE_CALL)
            .commit(1, 3)
            .delivered(1)
            .of_message("att-0-1-1-1")
            .commit(1, 9)
            .delivered(2)
            .of_message("att-0-1-1-1")
            .answer(1, 1, 12, Outcome::Applied)
            .judge();
        let message = &verdict.finding(Check::DuplicateEffect).message;
        assert!(
            message.contains("dispatch 2 at 9 ms, from delivery 2 of the same message)"),
            "{message}"
        );
    }

    /// The 9:41 ticket: each layer idempotent, the planner's second tool call
    /// (new tool-use id, new key, re-worded memo) charged again. Effects are
    /// counted per intent, so the new key and the new words hide nothing.
    #[test]
    fn a_re_plan_under_a_new_key_is_a_duplicate_naming_its_tool_call() {
        let verdict = Case::new(RE_PLAN)
            .commit(1, 3)
            .answer(1, 1, 5, Outcome::Applied)
            .decide_again(1, true)
            .commit(1, 8)
            .answer(1, 6, 10, Outcome::Applied)
            .judge();
        let message = &verdict.finding(Check::DuplicateEffect).message;
        assert!(
            message.starts_with(
                "operation 'charge': 2 effects, expected 1; effect 2 (rcpt-2, dispatch 2 at 8 ms)"
            ),
            "{message}"
        );
        assert!(
            message.contains("(call 1, decision 2 as tool call tu-0-1-2, worker 1, attempt 2)"),
            "{message}"
        );
        assert_eq!(verdict.operations[0].effects, 2);
    }

    #[test]
    fn a_re_plan_coalesced_into_the_first_effect_passes() {
        let verdict = Case::new(RE_PLAN)
            .commit(1, 3)
            .answer(1, 1, 5, Outcome::Applied)
            .decide_again(1, true)
            .answer(1, 6, 10, Outcome::Replayed)
            .judge();
        assert!(verdict.findings.is_empty(), "{:?}", verdict.findings);
    }

    /// `policy = "allow"`: a tool whose every call is its own action (a note
    /// to oneself). Two tool calls expect two effects; coalescing them loses
    /// one the caller asked for.
    #[test]
    fn under_allow_every_tool_call_is_owed_its_own_effect() {
        let base = || {
            Case::new(RE_PLAN_ALLOWED)
                .commit(1, 3)
                .answer(1, 1, 5, Outcome::Applied)
                .decide_again(1, false)
        };
        let both = base()
            .commit(1, 8)
            .answer(1, 6, 10, Outcome::Applied)
            .judge();
        assert!(both.findings.is_empty(), "{:?}", both.findings);
        assert_eq!(both.operations[0].expected_effects_max, 2);
        let coalesced = base().answer(1, 6, 10, Outcome::Replayed).judge();
        let message = &coalesced.finding(Check::MissingEffect).message;
        assert!(
            message.starts_with("operation 'note': 1 effect"),
            "{message}"
        );
    }

    /// Issue 11's false duplicates: "an invoice may legitimately receive
    /// several reminders". Effects on a shared subject are told apart by the
    /// operation whose attempt was open when they were dispatched.
    #[test]
    fn two_operations_on_one_subject_are_each_owed_an_effect() {
        let both = Case::new(SHARED_SUBJECT)
            .commit(1, 3)
            .answer(1, 1, 5, Outcome::Applied)
            .commit(2, 8)
            .answer(2, 6, 10, Outcome::Applied)
            .judge();
        assert!(both.findings.is_empty(), "{:?}", both.findings);
        assert_eq!(both.operations[0].effects, 1);
        assert_eq!(both.operations[1].effects, 1);
        let merged = Case::new(SHARED_SUBJECT)
            .commit(1, 3)
            .answer(1, 1, 5, Outcome::Applied)
            .answer_with_receipt(2, 6, 10, Outcome::Replayed, "rcpt-1")
            .judge();
        let message = &merged.finding(Check::MissingEffect).message;
        assert!(message.starts_with("operation 'second'"), "{message}");
    }

    /// Guards two-reminders-one-invoice x redis-ledger, live under load
    /// (issue 11): the first reminder's dispatch, its answer and the second
    /// reminder's send fell in one millisecond, and timing alone gave the
    /// dispatch to the second (claim-without-effect for the first).
    #[test]
    fn a_dispatch_in_the_tick_one_call_ends_and_the_next_starts_belongs_to_the_one_told_its_receipt(
    ) {
        let verdict = Case::new(SHARED_SUBJECT)
            .commit(1, 56)
            .answer(1, 44, 56, Outcome::Applied)
            .commit(2, 57)
            .answer(2, 56, 57, Outcome::Applied)
            .judge();
        assert!(verdict.findings.is_empty(), "{:?}", verdict.findings);
        assert_eq!(verdict.operations[0].effects, 1);
        assert_eq!(verdict.operations[1].effects, 1);
    }

    #[test]
    fn no_effect_is_a_missing_effect_unless_the_schedule_was_explored() {
        let abandoned = |text: &str| Case::new(text).answer(1, 1, 5, Outcome::Unknown).judge();
        let verdict = abandoned(ONE_CALL);
        let message = &verdict.finding(Check::MissingEffect).message;
        assert!(
            message.contains("the operation was abandoned; the last attempt att-0-1-1-1"),
            "{message}"
        );
        let explored = abandoned(&ONE_CALL.replace("lost-response", "explored"));
        assert!(
            !explored.has(Check::MissingEffect),
            "{:?}",
            explored.findings
        );
    }

    #[test]
    fn past_the_declared_retention_a_retry_may_add_one_effect() {
        let late_retry = |retention_days| {
            Case::new(TWO_CALLS)
                .retention_days(retention_days)
                .commit(1, 3)
                .answer(1, 1, 5, Outcome::Applied)
                .clock_jump(6, 400)
                .commit(2, 9)
                .answer(2, 8, 10, Outcome::Applied)
                .judge()
        };
        assert!(!late_retry(7).has(Check::DuplicateEffect));
        assert!(late_retry(500).has(Check::DuplicateEffect));
    }

    /// Issue 22: a burst of two effects in the first epoch, then a retry
    /// past the retention that committed nothing. The empty second epoch
    /// used to raise the allowance to 2 and pass the burst.
    #[test]
    fn an_empty_epoch_does_not_excuse_a_burst_in_an_earlier_one() {
        let burst = |second_epoch_commits: bool| {
            let case = Case::new(TWO_CALLS)
                .retention_days(7)
                .commit(1, 3)
                .commit(1, 4)
                .answer(1, 1, 5, Outcome::Applied)
                .clock_jump(6, 400);
            let case = if second_epoch_commits {
                case.commit(2, 9).answer(2, 8, 10, Outcome::Applied)
            } else {
                case.answer_with_receipt(2, 8, 10, Outcome::Replayed, "rcpt-2")
            };
            case.judge()
        };
        for second_epoch_commits in [false, true] {
            let verdict = burst(second_epoch_commits);
            let message = &verdict.finding(Check::DuplicateEffect).message;
            assert!(
                message.contains("2 effects within one retention epoch (opened at 1 ms), expected 1 per epoch; effect 2 (rcpt-2, dispatch 2 at 4 ms)"),
                "{message}"
            );
        }
        // What the empty epoch allows: nothing.
        assert_eq!(burst(false).operations[0].expected_effects_max, 1);
        assert_eq!(burst(true).operations[0].expected_effects_max, 2);
    }

    #[test]
    fn a_dispatch_past_the_limit_is_an_extra_dispatch() {
        let twice = |text: &str| {
            Case::new(text)
                .commit(1, 3)
                .replayed_dispatch(1, 7)
                .answer(1, 1, 9, Outcome::Replayed)
                .judge()
        };
        let limited = twice(&format!("{ONE_CALL}max-dispatches-per-operation = 1\n"));
        let message = &limited.finding(Check::ExtraDispatch).message;
        assert!(
            message.contains(
                "2 dispatches reached the provider, at most 1 allowed; dispatch 2 at 7 ms"
            ),
            "{message}"
        );
        assert!(!twice(ONE_CALL).has(Check::ExtraDispatch));
    }

    #[test]
    fn an_effect_nobody_asked_for_is_unattributed() {
        let base = || {
            Case::new(ONE_CALL)
                .commit(1, 3)
                .answer(1, 1, 5, Outcome::Applied)
        };
        let verdict = base().stray_effect(4).judge();
        let message = &verdict.finding(Check::UnattributedEffect).message;
        assert!(
            message.starts_with("1 effect(s) carry no subject"),
            "{message}"
        );
        assert!(!base().judge().has(Check::UnattributedEffect));
    }
}
