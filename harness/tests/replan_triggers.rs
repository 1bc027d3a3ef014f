//! Issue 22 §4: two re-plan triggers of the first seed article as fault
//! kinds, `truncate-result` and `user-interrupt`. Each scenario's fault
//! acts, makes the planner decide the step again (a new tool call, the
//! same intent), is caught on a layer keyed by the tool call (`ledger`
//! under `identity = "replan"`) and passes on `runtime-ledger`; without
//! the fault, the same scenario catches nothing.

mod common;

use chaos::history::AttemptEnd;
use chaos::{Check, Scenario, Status};

/// `scenarios/{name}.toml`, and the same file with its `[[fault]]` table
/// removed.
fn with_and_without_its_fault(name: &str) -> (Scenario, Scenario) {
    let with = common::scenario(name);
    let text =
        std::fs::read_to_string(common::scenarios_dir().join(format!("{name}.toml"))).unwrap();
    let (before, after) = text.split_once("[[fault]]").unwrap();
    let (_, rest) = after.split_once("\n\n").unwrap();
    let dir = common::temp_dir(&format!("{name}-without"));
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, format!("{before}{rest}")).unwrap();
    (with, Scenario::load(&path).unwrap())
}

/// What the scenario does to `ledger` and `runtime-ledger` over a few
/// seeds, and how the first attempt of seed 0 against `ledger` ended.
fn trigger(name: &str, first_end: fn(&AttemptEnd) -> bool) {
    let (with, without) = with_and_without_its_fault(name);
    let ledger = chaos::find("ledger").unwrap();
    let runtime = chaos::find("runtime-ledger").unwrap();
    for seed in 0..10 {
        let (verdict, run) = common::trial(&with, &ledger, seed);
        assert_eq!(verdict.status, Status::Fail, "{name} seed {seed}");
        assert!(
            verdict
                .findings
                .iter()
                .any(|finding| finding.check == Check::DuplicateEffect),
            "{name} seed {seed}: {:?}",
            verdict.findings
        );
        let run = run.unwrap();
        let mut attempts = run.history.attempts.clone();
        attempts.sort_by_key(|attempt| attempt.sent_at);
        assert!(
            first_end(&attempts[0].end),
            "{name} seed {seed}: {:?}",
            attempts[0].end
        );
        // Decided again: the next tool call is a new one, of the same intent.
        let next = &attempts[1];
        assert_eq!(next.decision, 2, "{name} seed {seed}");
        assert_ne!(next.tool_use_id, attempts[0].tool_use_id);
        assert_eq!(next.intent, attempts[0].intent);
        // The act is recorded like every fault's.
        assert_eq!(run.history.faults.len(), 1, "{name} seed {seed}");
        assert_eq!(run.history.faults[0].fault(), Some(0));

        let (verdict, _) = common::trial(&with, &runtime, seed);
        assert_eq!(
            verdict.status,
            Status::Pass,
            "{name} seed {seed}: {:?}",
            verdict.findings
        );

        let (verdict, run) = common::trial(&without, &ledger, seed);
        assert_eq!(
            verdict.status,
            Status::Pass,
            "{name} seed {seed} without its fault"
        );
        assert!(run
            .unwrap()
            .history
            .attempts
            .iter()
            .all(|attempt| attempt.decision == 1));
    }
}

#[test]
fn a_truncated_result_makes_the_planner_decide_again() {
    trigger(
        "replan-truncated-result",
        |end| matches!(end, AttemptEnd::Truncated { dropped } if dropped.receipt.is_some()),
    );
}

#[test]
fn a_user_interrupt_drops_the_call_and_the_planner_decides_again() {
    trigger("replan-user-interrupt", |end| {
        matches!(end, AttemptEnd::Interrupted)
    });
}
