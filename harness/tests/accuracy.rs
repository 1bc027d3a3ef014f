//! The harness's accuracy: over 200 seeds per cell, every reference target is
//! caught exactly where its design is weak, for the right reason, and the
//! correct one passes everything. Guards issue #2, item 8.

mod common;

use chaos::{Check, Seeds, Status};

const SEEDS: u64 = 200;

/// What each reference target must get in each scenario: `None` means pass on
/// every seed; `Some(checks)` means fail on every seed, with every seed's
/// findings including at least one of `checks`.
fn expectation(scenario: &str, target: &str) -> Option<&'static [Check]> {
    use Check::*;
    match (target, scenario) {
        // Agent-idempotent: one effect per intent, whoever decides again.
        ("runtime-ledger", _) => None,

        // Tool-idempotent: right as long as the caller holds the key. A step
        // the planner decides again, under a new key, is a new charge.
        ("ledger", "replan-held-key" | "replan-notify-self") => None,
        ("ledger", re_plan) if re_plan == "three-charges" || re_plan.starts_with("replan-") => {
            Some(&[DuplicateEffect])
        }
        ("ledger", _) => None,

        (
            "fresh-key",
            "lost-response-keyed"
            | "lost-response-lookup"
            | "lost-response-blind"
            | "lost-response-agent-hop",
        ) => Some(&[DuplicateEffect]),
        ("fresh-key", "concurrent-attempts" | "concurrent-attempts-keyed") => {
            Some(&[DuplicateEffect])
        }
        ("fresh-key", "worker-restart") => Some(&[DuplicateEffect]),
        ("fresh-key", "changed-payload") => Some(&[ChangedPayloadDispatched]),
        (
            "fresh-key",
            "changed-payload-equivalent" | "expired-history" | "expired-history-target",
        ) => Some(&[DuplicateEffect]),
        (
            "fresh-key",
            "revoked-permission"
            | "revoked-scope"
            | "revoked-while-unknown"
            | "worker-restart-before-dispatch"
            | "replan-notify-self",
        ) => None,
        ("fresh-key", re_plan) if re_plan == "three-charges" || re_plan.starts_with("replan-") => {
            Some(&[DuplicateEffect])
        }

        ("args-hash", "concurrent-attempts") => Some(&[DuplicateEffect, ExtraDispatch]),
        ("args-hash", "changed-payload") => Some(&[ChangedPayloadDispatched]),
        ("args-hash", "revoked-permission" | "revoked-scope") => Some(&[Disclosure]),
        // A keyed provider replays its first answer, which args-hash reports as new.
        (
            "args-hash",
            "lost-response-keyed" | "worker-restart" | "replan-stall" | "replan-stall-crash-replay",
        ) => Some(&[StaleApplied]),
        ("args-hash", "lost-response-lookup" | "lost-response-blind") => Some(&[DuplicateEffect]),
        // The same arguments hash to the same key; re-worded ones do not.
        ("args-hash", "replan-injected-drifted" | "replan-timeout-drifted") => {
            Some(&[DuplicateEffect])
        }
        // Three notifications asked for, one hash: two are never sent.
        ("args-hash", "replan-notify-self") => Some(&[MissingEffect]),
        ("args-hash", _) => None,

        (target, scenario) => {
            panic!("no expectation for {target} in {scenario}: add one to this table")
        }
    }
}

#[test]
fn every_target_is_caught_exactly_where_it_is_weak() {
    let scenarios = common::all_scenarios();
    assert!(scenarios.len() >= 12, "the six tests and their variants");
    let targets = chaos::reference_targets();
    let summary = common::sweep(
        &scenarios,
        &targets,
        Seeds::Range {
            first: 0,
            count: SEEDS,
        },
    );

    let mut problems = Vec::new();
    for cell in &summary.cells {
        let wanted = expectation(&cell.scenario, &cell.target);
        assert_eq!(cell.seeds_run, SEEDS);
        match wanted {
            None => {
                if cell.verdict != Status::Pass {
                    problems.push(format!(
                        "{} x {}: expected pass on every seed, got {} on {} seeds: {}",
                        cell.scenario,
                        cell.target,
                        cell.verdict,
                        cell.seeds_failed + cell.seeds_unknown,
                        cell.reason.as_deref().unwrap_or("")
                    ));
                }
            }
            Some(checks) => {
                if cell.seeds_failed != SEEDS {
                    problems.push(format!(
                        "{} x {}: expected a failure on every seed, failed on {}",
                        cell.scenario, cell.target, cell.seeds_failed
                    ));
                }
                for failure in &cell.failures {
                    let found = failure.checks();
                    if !checks.iter().any(|check| found.contains(check)) {
                        problems.push(format!(
                            "{} x {} seed {}: expected one of {:?}, found {:?}",
                            cell.scenario, cell.target, failure.seed, checks, found
                        ));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn reasons_name_the_operation_the_counts_and_the_attempt() {
    let scenario = common::scenario("lost-response-keyed");
    let target = chaos::find("fresh-key").unwrap();
    let (verdict, _) = common::trial(&scenario, &target, 7);
    let reason = verdict.reason().unwrap();
    assert!(
        reason.starts_with("duplicate-effect: operation 'reminder': 2 effects, expected 1"),
        "{reason}"
    );
    assert!(
        reason.contains("during attempt att-7-1-1-2 (call 1, worker 1, attempt 2)"),
        "{reason}"
    );
}

#[test]
fn a_stuck_target_fails_liveness_not_safety() {
    // revoked-while-unknown ends with a denial by design; lost-response-blind is
    // unknown by design. Neither may be called stuck: liveness is judged only
    // where the provider lets a target learn the outcome.
    let scenario = common::scenario("lost-response-blind");
    let target = chaos::find("ledger").unwrap();
    let (verdict, _) = common::trial(&scenario, &target, 1);
    assert_eq!(verdict.status, Status::Pass, "{:?}", verdict.findings);
    assert_eq!(verdict.liveness, chaos::Liveness::NotApplicable);
}
