//! Whether each call ended as its scenario expects (`expect = [...]`), and
//! liveness, judged apart from safety: where the provider lets a target learn
//! the real outcome (`keyed`, `lookup`), the agent must learn it within its
//! retry budget. A target that answers `pending` forever is safe, and stuck.

use chaos_kit::protocol::Outcome;

use super::view::{describe, RunView};
use super::{Anchor, Check, Findings};
use crate::history::Attempt;

pub(super) fn check(run: &RunView<'_>, findings: &mut Findings) {
    let trial = run.trial;
    let can_reconcile = trial.scenario.provider.profile.can_reconcile();
    for call in &trial.calls {
        let name = trial.operations[call.operation].name.as_str();
        let anchor = Anchor::Call(call.number);
        let last_call_of_operation = trial
            .calls
            .iter()
            .rev()
            .find(|other| other.operation == call.operation)
            .is_some_and(|last| last.number == call.number);
        let finals = run.finals(call);
        let definitive: Vec<(&Attempt, Outcome)> = finals
            .iter()
            .filter_map(|attempt| {
                let outcome = attempt.answer()?.outcome;
                outcome.is_definitive().then_some((*attempt, outcome))
            })
            .collect();
        // A target file's `retry-for` kept the agent going past the
        // attempts: the budget it was judged by says so.
        let budget = |attempts: u32| match trial.timing.retry_for {
            Some(retry_for) => format!(
                "{attempts} attempts and {} of retry-for",
                humantime::format_duration(retry_for)
            ),
            None => format!("{attempts} attempts"),
        };
        let seen = || {
            let attempts = run.attempts_of_call(call.number);
            join(attempts.iter().map(|attempt| attempt.summary()))
        };
        // The target asked the agent to come back later (`pending`, or a
        // wait it named) and the budget ran out first: say which line to
        // write, not only that it was stuck.
        let asked_to_wait = run.attempts_of_call(call.number).iter().any(|attempt| {
            attempt
                .answer()
                .is_some_and(|answer| answer.outcome == Outcome::Pending)
        });
        let hint = if asked_to_wait {
            let longer = trial
                .timing
                .retry_for
                .map_or(30, |retry_for| (retry_for.as_secs() * 2).max(30));
            format!(
                "; the target asked the agent to wait (`pending`) past its budget: give it longer in the target file, `[agent]` `retry-for = \"{longer}s\"`"
            )
        } else {
            String::new()
        };

        let label = format!(
            "call {} (operation '{name}', {} payload)",
            call.number,
            call.variant.as_str()
        );
        // The last word the agent had was one the target file's mapping
        // could not read: whether the call finished is the mapping's
        // question, not the target's.
        let unread = finals.iter().find_map(|attempt| {
            let why = attempt.answer()?.unread.as_deref()?;
            Some(format!("attempt {}: {why}", describe(attempt)))
        });
        if let (true, Some(why)) = (definitive.is_empty(), unread) {
            not_judged(findings, anchor, name, &label, &why);
            continue;
        }
        if let Some(expect) = &call.expect {
            let accepted = join(expect.iter().map(|outcome| outcome.as_str()));
            for (attempt, outcome) in &definitive {
                if !expect.contains(outcome) {
                    findings.fail(
                        anchor,
                        Check::UnexpectedOutcome,
                        Some(name),
                        format!(
                            "{label}: attempt {} answered {outcome}, expected {accepted}",
                            describe(attempt)
                        ),
                    );
                }
            }
            let accepts_uncertainty =
                expect.contains(&Outcome::Unknown) || expect.contains(&Outcome::Pending);
            let wants_effect = expect.iter().all(|outcome| outcome.claims_effect());
            if definitive.is_empty() && !accepts_uncertainty && !finals.is_empty() {
                if let Some(why) = run.no_honest_end(call) {
                    not_judged(findings, anchor, name, &label, &why);
                } else if wants_effect {
                    findings.liveness_judged();
                    findings.fail(
                        anchor,
                        Check::Stuck,
                        Some(name),
                        format!(
                            "{label}: never learned its outcome in {} ({}), expected {accepted}{hint}",
                            budget(call.attempts),
                            seen()
                        ),
                    );
                } else {
                    findings.fail(
                        anchor,
                        Check::UnexpectedOutcome,
                        Some(name),
                        format!(
                            "{label}: never got a definitive answer ({}), expected {accepted}",
                            seen()
                        ),
                    );
                }
            } else if wants_effect {
                findings.liveness_judged();
            }
        } else if can_reconcile
            && last_call_of_operation
            && !finals.is_empty()
            && run.judges_completion()
        {
            if definitive.is_empty() {
                if let Some(why) = run.no_honest_end(call) {
                    not_judged(findings, anchor, name, &label, &why);
                    continue;
                }
            }
            findings.liveness_judged();
            if definitive.is_empty() {
                findings.fail(
                    anchor,
                    Check::Stuck,
                    Some(name),
                    format!(
                        "{label}: never learned the outcome in {} ({}), though the {} provider lets a target find it out{hint}",
                        budget(call.attempts),
                        seen(),
                        trial.scenario.provider.profile
                    ),
                );
            }
        }
    }
}

/// A call the scenario left no honest way to finish: `unknown`, with why,
/// rather than `stuck` against the target.
fn not_judged(findings: &mut Findings, anchor: Anchor, name: &str, label: &str, why: &str) {
    findings.fail(
        anchor,
        Check::RunIncomplete,
        Some(name),
        format!("{label}: not judged on finishing it: {why}"),
    );
}

fn join<S: AsRef<str>>(items: impl Iterator<Item = S>) -> String {
    items
        .map(|item| item.as_ref().to_owned())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::super::tests::{Case, Found, CHANGED, ONE_CALL};
    use crate::check::{Check, Liveness, Status};
    use chaos_kit::protocol::Outcome;

    #[test]
    fn learning_the_outcome_passes_liveness() {
        let verdict = Case::new(ONE_CALL)
            .commit(1, 3)
            .timeout(1, 1, 10)
            .answer(1, 12, 14, Outcome::Replayed)
            .judge();
        assert_eq!(verdict.liveness, Liveness::Pass);
        assert_eq!(verdict.status, Status::Pass, "{:?}", verdict.findings);
    }

    #[test]
    fn never_learning_it_where_the_provider_allows_is_stuck_not_unsafe() {
        let verdict = Case::new(ONE_CALL)
            .commit(1, 3)
            .answer(1, 1, 10, Outcome::Unknown)
            .answer(1, 12, 14, Outcome::Pending)
            .judge();
        let message = &verdict.finding(Check::Stuck).message;
        assert!(message.contains("never learned the outcome in 6 attempts (unknown, pending), though the lookup provider"), "{message}");
        assert!(
            message.ends_with("give it longer in the target file, `[agent]` `retry-for = \"30s\"`"),
            "names the line to write: {message}"
        );
        assert_eq!(verdict.safety, Status::Pass);
        assert_eq!(verdict.liveness, Liveness::Fail);
        assert_eq!(verdict.status, Status::Fail);
    }

    // guards: an answer a target file's [response] mapping could not read
    // became a silent `unknown`, judged `stuck` against the target (issue 13)
    #[test]
    fn an_answer_the_mapping_could_not_read_leaves_the_call_unjudged_and_says_why() {
        let why = "the mapping could not read this answer (status 200): the value \"queued\" at /status is not in [response.outcomes]";
        let verdict = Case::new(ONE_CALL)
            .commit(1, 3)
            .unread_answer(1, 1, 10, why)
            .judge();
        assert!(!verdict.has(Check::Stuck), "{:?}", verdict.findings);
        let message = &verdict.finding(Check::RunIncomplete).message;
        assert!(
            message.contains("not judged on finishing it: attempt att-0-1-1-1 (call 1, worker 1, attempt 1): the mapping could not read this answer (status 200)"),
            "{message}"
        );
        assert_eq!(verdict.status, Status::Unknown);
        // A later answer it could read decides as always.
        let verdict = Case::new(ONE_CALL)
            .commit(1, 3)
            .unread_answer(1, 1, 10, why)
            .answer(1, 12, 14, Outcome::Replayed)
            .judge();
        assert_eq!(verdict.status, Status::Pass, "{:?}", verdict.findings);
    }

    #[test]
    fn a_blind_provider_leaves_liveness_unjudged() {
        let verdict = Case::new(&ONE_CALL.replace("lookup", "blind"))
            .commit(1, 3)
            .answer(1, 1, 10, Outcome::Unknown)
            .judge();
        assert_eq!(verdict.liveness, Liveness::NotApplicable);
        assert!(!verdict.has(Check::Stuck));
    }

    #[test]
    fn an_outcome_the_call_does_not_accept_is_unexpected() {
        let accepted = Case::new(CHANGED)
            .commit(1, 3)
            .answer(1, 1, 5, Outcome::Applied)
            .bare_answer(2, 6, 8, Outcome::Conflict)
            .judge();
        assert!(accepted.findings.is_empty(), "{:?}", accepted.findings);
        let verdict = Case::new(CHANGED)
            .commit(1, 3)
            .answer(1, 1, 5, Outcome::Applied)
            .bare_answer(2, 6, 8, Outcome::Rejected)
            .judge();
        let message = &verdict.finding(Check::UnexpectedOutcome).message;
        assert!(message.contains("call 2 (operation 'reminder', changed payload): attempt att-0-2-1-1 (call 2, worker 1, attempt 1) answered rejected, expected conflict"), "{message}");
    }
}
