//! The authorization lab's checker: whether each call got the decision its
//! case states, and whether a call refused (denied or held) left any effect.
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
            let decided = Decision::of(answer.outcome);
            if decided != Some(expected) {
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
