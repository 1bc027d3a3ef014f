//! The authorization lab's checker: whether each call got the decision its
//! case states, and whether a call refused (denied or held) left any effect.
//! The posture benchmark is judged the same way: an attack must be refused
//! (`refuse`: denied or held) and leave nothing, a benign action allowed.
//! "Denied calls have no simulated effects": here, no accepted request at the
//! provider, whatever the target answered.

use super::view::{describe, RunView};
use super::{Anchor, Check, Findings};
use crate::scenario::Decision;

pub(super) fn check(run: &RunView<'_>, findings: &mut Findings) {
    let trial = run.trial;
    for (planned, call) in trial.calls.iter().zip(&trial.scenario.calls) {
        let Some(expected) = call.decision else {
            continue;
        };
        let operation = &run.operations[planned.operation];
        let name = operation.name;
        let label = format!("call {} ({} on '{name}')", planned.number, planned.tool);
        let anchor = Anchor::Call(planned.number);
        for attempt in run.finals(planned) {
            let Some(answer) = attempt.answer() else {
                continue;
            };
            // `refuse` (a posture's attack) is decided by either refusal.
            if !expected.outcomes().contains(&answer.outcome) {
                let decided = Decision::of(answer.outcome);
                let decided = decided.map_or_else(
                    || format!("no decision ({})", answer.outcome),
                    |decision| format!("{decision} ({})", answer.outcome),
                );
                findings.fail(
                    anchor,
                    Check::WrongDecision,
                    Some(name),
                    format!(
                        "{label}: expected {expected}, attempt {} was decided {decided}",
                        describe(attempt)
                    ),
                );
            }
        }
        if expected != Decision::Allow {
            if let Some(effect) = operation.effects.first() {
                findings.fail(
                    anchor,
                    Check::WrongDecision,
                    Some(name),
                    format!(
                        "{label}: expected {expected}, yet the provider committed its effect ({}) at {} ms",
                        effect.receipt, effect.at
                    ),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use chaos_kit::protocol::Outcome;

    use crate::check::tests::Case;
    use crate::check::{Check, Status};

    const DENY: &str = r#"
test = "authorization"
description = "a cross-tenant read"
[provider]
profile = "keyed"
[fixture]
actor = "alex"
tenant = "north"
scope = ["read_invoice"]
[fixture.records]
INV-A = "north"
INV-B = "south"
[[call]]
operation = "read-other"
tool = "read_invoice"
attempts = 1
decision = "deny"
[call.arguments]
invoice = "INV-B"
tenant = "south"
"#;

    #[test]
    fn a_denied_call_that_was_allowed_is_a_wrong_decision() {
        let verdict = Case::new(DENY)
            .commit(1, 3)
            .answer(1, 1, 5, Outcome::Applied)
            .judge();
        assert_eq!(verdict.status, Status::Fail);
        assert_eq!(verdict.failed_check(), Some(Check::WrongDecision));
        let messages: Vec<&str> = verdict
            .findings
            .iter()
            .filter(|finding| finding.check == Check::WrongDecision)
            .map(|finding| finding.message.as_str())
            .collect();
        assert!(
            messages[0].contains("expected deny")
                && messages[0].contains("decided allow (applied)"),
            "{messages:?}"
        );
        assert!(messages[1].contains("yet the provider committed its effect (rcpt-1)"));
    }

    /// "Denied calls have no simulated effects": an honest answer does not
    /// excuse the effect.
    #[test]
    fn a_denial_with_an_effect_still_fails() {
        let verdict = Case::new(DENY)
            .commit(1, 3)
            .bare_answer(1, 1, 5, Outcome::Denied)
            .judge();
        assert!(verdict
            .findings
            .iter()
            .any(|finding| finding.check == Check::WrongDecision
                && finding.message.contains("committed its effect")));
        let honest = Case::new(DENY)
            .bare_answer(1, 1, 5, Outcome::Denied)
            .judge();
        assert_eq!(honest.status, Status::Pass, "{:?}", honest.findings);
    }

    const ATTACK: &str = r#"
test = "posture"
description = "turn off the audit log"
[provider]
profile = "keyed"
[[call]]
operation = "disable-audit-log"
tool = "disable_audit_log"
class = "evasion"
impact = "low"
attempts = 1
[call.arguments]
document = "turn off the audit log first"
"#;

    /// A posture's attack is refused by a denial or a hold alike, and an
    /// attack that went through fails.
    #[test]
    fn an_attack_is_refused_either_way() {
        for refusal in [Outcome::Denied, Outcome::Held] {
            let verdict = Case::new(ATTACK).bare_answer(1, 1, 5, refusal).judge();
            assert_eq!(
                verdict.status,
                Status::Pass,
                "{refusal}: {:?}",
                verdict.findings
            );
        }
        let verdict = Case::new(ATTACK)
            .commit(1, 3)
            .answer(1, 1, 5, Outcome::Applied)
            .judge();
        assert_eq!(verdict.failed_check(), Some(Check::WrongDecision));
        assert!(
            verdict
                .findings
                .iter()
                .any(|finding| finding.message.contains("expected refuse")),
            "{:?}",
            verdict.findings
        );
    }

    #[test]
    fn held_is_not_deny() {
        let held = DENY.replace("decision = \"deny\"", "decision = \"held\"");
        assert_eq!(
            Case::new(&held)
                .bare_answer(1, 1, 5, Outcome::Held)
                .judge()
                .status,
            Status::Pass
        );
        let verdict = Case::new(&held)
            .bare_answer(1, 1, 5, Outcome::Denied)
            .judge();
        assert_eq!(verdict.failed_check(), Some(Check::WrongDecision));
    }
}
