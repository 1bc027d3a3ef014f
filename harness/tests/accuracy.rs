//! The harness's accuracy: over 200 seeds per cell, every simulated target
//! (the reference targets and the ledger's variants) is caught exactly where
//! its design is weak, for the right reason, and the correct ones pass
//! everything. Guards issue #2, item 8, and the cells issues 10 and 11 added.
//! One test per target, so the suite spreads them over the cores.

mod common;

use chaos::{Check, Seeds, Status};

const SEEDS: u64 = 200;

/// The scenarios where the planner decides a step again under a new key.
fn re_plans_under_a_new_key(scenario: &str) -> bool {
    (scenario == "three-charges" || scenario.starts_with("replan-"))
        && !matches!(scenario, "replan-held-key" | "replan-notify-self")
}

/// What each simulated target must get in each scenario: `None` means pass
/// on every seed; `Some(checks)` means fail on every seed, with every seed's
/// findings including at least one of `checks`.
fn expectation(scenario: &str, target: &str) -> Option<&'static [Check]> {
    use Check::*;
    match (target, scenario) {
        // Agent-idempotent: one effect per intent, whoever decides again.
        ("runtime-ledger", _) => None,
        // The same, as two replicas each guarding an expired operation in
        // its own memory: a concurrent burst past the retention makes one
        // effect per replica in one epoch (issue 22's shape: the retry
        // after the honoured `Retry-After` opens an empty epoch).
        // Its memory is each replica's, so is its knowledge of who is
        // working on an operation: a claim the other replica holds looks
        // abandoned, is reconciled, and (not found yet) is sent again.
        ("replica-guard", "expired-history-concurrent" | "concurrent-attempts") => {
            Some(&[DuplicateEffect])
        }
        ("replica-guard", _) => None,

        // Tool-idempotent: right as long as the caller holds the key. A step
        // the planner decides again, under a new key, is a new charge. Its
        // variants are the same code with one design choice changed.
        // A silence taken for success: a lost request is never sent again,
        // and a held answer is told with a receipt the provider never gave.
        ("assumes-delivered", "lost-request-keyed") => Some(&[ClaimWithoutEffect, MissingEffect]),
        (
            "assumes-delivered",
            "lost-response-blind"
            | "lost-response-keyed"
            | "lost-response-lookup-hold"
            | "replan-stall"
            | "revoked-while-unknown",
        ) => Some(&[ReceiptMismatch]),
        (
            "ledger" | "refusing-ledger" | "reconciling-ledger" | "tenantless" | "expiry-race"
            | "trusts-missing" | "reset-is-failure" | "assumes-delivered",
            re_plan,
        ) if re_plans_under_a_new_key(re_plan) => Some(&[DuplicateEffect]),
        ("tenantless", "key-reused-across-tenants") => Some(&[MissingEffect, Disclosure]),
        ("expiry-race", "expired-history-concurrent") => Some(&[DuplicateEffect]),
        ("trusts-missing", "lost-response-lookup-lagging") => Some(&[DuplicateEffect]),
        (
            "reset-is-failure",
            "lost-response-lookup"
            | "lost-response-keyed-reset"
            | "lost-response-blind-reset"
            | "lost-response-lookup-lagging",
        ) => Some(&[FailedWithEffect]),
        (
            "ledger" | "refusing-ledger" | "reconciling-ledger" | "tenantless" | "expiry-race"
            | "trusts-missing" | "reset-is-failure" | "assumes-delivered",
            _,
        ) => None,

        // Keyed by invoice, or by the conversation: re-plans coalesce, but
        // so do genuinely new operations (false duplicates).
        ("subject-key" | "trace-key", "two-reminders-one-invoice" | "replan-notify-self") => {
            Some(&[MissingEffect])
        }
        ("subject-key" | "trace-key", _) => None,

        (
            "fresh-key",
            "revoked-permission"
            | "revoked-scope"
            | "revoked-while-unknown"
            | "revoked-new-operation"
            | "worker-restart-before-dispatch"
            | "replan-notify-self"
            | "key-reused-across-tenants"
            | "two-reminders-one-invoice"
            | "authority-outage"
            // Nothing reached the provider: a fresh key's retry is the only send.
            | "lost-request-keyed",
        ) => None,
        ("fresh-key", "changed-payload" | "changed-payload-body") => {
            Some(&[ChangedPayloadDispatched])
        }
        ("fresh-key", "provider-declines") => Some(&[ExtraDispatch]),
        // The same attempt id, so the same key: the keyed provider replays,
        // and fresh-key tells the replay as new.
        ("fresh-key", "redelivered-keyed") => Some(&[UnmarkedReplay]),
        // Every other scenario retries or redelivers: every retry is a new effect.
        ("fresh-key", _) => Some(&[DuplicateEffect]),

        ("args-hash", "concurrent-attempts") => Some(&[DuplicateEffect, ExtraDispatch]),
        ("args-hash", "changed-payload" | "changed-payload-body") => {
            Some(&[ChangedPayloadDispatched])
        }
        ("args-hash", "revoked-permission" | "revoked-scope") => Some(&[Disclosure]),
        // A keyed provider replays its first answer, which args-hash reports as new.
        (
            "args-hash",
            "lost-response-keyed"
            | "lost-response-keyed-reset"
            | "worker-restart"
            | "replan-stall"
            | "replan-stall-crash-replay",
        ) => Some(&[UnmarkedReplay]),
        (
            "args-hash",
            "lost-response-lookup"
            | "lost-response-lookup-hold"
            | "lost-response-lookup-lagging"
            | "lost-response-blind"
            | "lost-response-blind-reset"
            | "worker-restart-lookup"
            | "worker-restart-blind",
        ) => Some(&[DuplicateEffect]),
        // The same arguments hash to the same key; re-worded ones do not.
        ("args-hash", "replan-injected-drifted" | "replan-timeout-drifted") => {
            Some(&[DuplicateEffect])
        }
        // Distinct actions with the same arguments, one hash: all but one never sent.
        ("args-hash", "replan-notify-self" | "two-reminders-one-invoice") => Some(&[MissingEffect]),
        // It remembers no refusal, so it sends the declined charge again.
        ("args-hash", "provider-declines") => Some(&[ExtraDispatch]),
        // The saved 500 comes back on every retry with the same key, and it
        // never asks the provider: it never learns the charge went through.
        ("args-hash", "provider-saved-error") => Some(&[Stuck]),
        ("args-hash", _) => None,

        (target, scenario) => {
            panic!("no expectation for {target} in {scenario}: add one to this table")
        }
    }
}

/// Runs every scenario against `target` over 200 seeds and holds each cell
/// to its expectation.
fn caught_exactly_where_weak(target: &str) {
    let scenarios = common::all_scenarios();
    assert!(scenarios.len() >= 12, "the six tests and their variants");
    let target = chaos::find(target).unwrap_or_else(|error| panic!("{error}"));
    let summary = common::sweep(
        &scenarios,
        &[target],
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

macro_rules! accuracy {
    ($($test:ident => $target:literal),+ $(,)?) => {
        $(
            #[test]
            fn $test() {
                caught_exactly_where_weak($target);
            }
        )+

        /// Every simulated target has its test above.
        #[test]
        fn every_simulated_target_is_in_the_table() {
            let covered = [$($target),+];
            for target in chaos::sim_targets() {
                assert!(
                    covered.contains(&target.info.name.as_str()),
                    "{} has no accuracy test: add it to accuracy! and to the expectation table",
                    target.info.name
                );
            }
        }
    };
}

accuracy! {
    fresh_key_is_caught_exactly_where_it_is_weak => "fresh-key",
    args_hash_is_caught_exactly_where_it_is_weak => "args-hash",
    ledger_is_caught_exactly_where_it_is_weak => "ledger",
    runtime_ledger_passes_everything => "runtime-ledger",
    refusing_ledger_is_caught_exactly_where_it_is_weak => "refusing-ledger",
    reconciling_ledger_is_caught_exactly_where_it_is_weak => "reconciling-ledger",
    subject_key_is_caught_exactly_where_it_is_weak => "subject-key",
    trace_key_is_caught_exactly_where_it_is_weak => "trace-key",
    tenantless_is_caught_exactly_where_it_is_weak => "tenantless",
    expiry_race_is_caught_exactly_where_it_is_weak => "expiry-race",
    trusts_missing_is_caught_exactly_where_it_is_weak => "trusts-missing",
    reset_is_failure_is_caught_exactly_where_it_is_weak => "reset-is-failure",
    assumes_delivered_is_caught_exactly_where_it_is_weak => "assumes-delivered",
    replica_guard_is_caught_exactly_where_it_is_weak => "replica-guard",
}

/// Issue 22, end to end: against `replica-guard`, the retry the agent makes
/// after honouring `Retry-After: 1` crosses the declared retention and opens
/// an epoch that commits nothing, while two effects of one concurrent burst
/// share the epoch before it. Judged by the old allowance (`expected x
/// epochs`, against the total) every seed passed; judged epoch by epoch,
/// every seed fails.
#[test]
fn an_empty_epoch_after_an_honoured_retry_after_excuses_nothing() {
    let scenario = common::scenario("expired-history-concurrent");
    let target = chaos::find("replica-guard").unwrap();
    let retention = chaos_kit::clock::millis(target.info.retention.unwrap());
    for seed in 0..20 {
        let (verdict, run) = common::trial(&scenario, &target, seed);
        let run = run.unwrap();
        let message = &verdict
            .findings
            .iter()
            .find(|finding| finding.check == Check::DuplicateEffect)
            .unwrap_or_else(|| panic!("seed {seed}: {:?}", verdict.findings))
            .message;
        assert!(
            message.contains("2 effects within one retention epoch"),
            "seed {seed}: {message}"
        );
        // The epochs as the old allowance counted them: a new one for each
        // attempt sent a retention after the current one's first.
        let mut attempts: Vec<&chaos::history::Attempt> = run.history.attempts.iter().collect();
        attempts.sort_by_key(|attempt| attempt.sent_at);
        let mut starts: Vec<(u64, chaos::history::Ms)> = Vec::new();
        for attempt in &attempts {
            match starts.last() {
                Some(&(anchor, _)) if attempt.wall_clock_ms - anchor < retention => {}
                _ => starts.push((attempt.wall_clock_ms, attempt.sent_at)),
            }
        }
        let effects = &run.ledger.effects;
        assert_eq!(
            effects.len(),
            3,
            "seed {seed}: the first call's, and two of the burst"
        );
        assert!(
            starts.len() >= 3,
            "seed {seed}: the honoured wait opened a third epoch: {starts:?}"
        );
        let last_opened = starts.last().unwrap().1;
        assert!(
            effects.iter().all(|effect| effect.at < last_opened),
            "seed {seed}: the last epoch committed nothing"
        );
        // What the old allowance made of it: 3 effects against 1 x 3 epochs.
        assert!(
            effects.len() <= starts.len(),
            "seed {seed}: the old rule passed it"
        );
    }
}

/// The per-tool policies beyond coalesce and allow (`scenarios/policy/`),
/// judged apart: a layer is held to the policy its tool declares. Each
/// policy's scenario is passed by its policy target alone, and every other
/// simulated target is caught on every seed, by the checks that policy
/// implies: under `refuse`, a re-plan coalesced into the first result or
/// executed again; under `sign-off`, a re-plan nobody signed off executed
/// (a duplicate) or the signed-off one coalesced or refused (a missing
/// effect). Held to coalesce, `refuses-replans` is caught (its refusal
/// denies an effect that exists) and `signs-off-replans`, with nobody
/// signing off, coalesces as asked.
#[test]
fn each_policy_target_holds_its_policy_and_only_it() {
    let seeds = || Seeds::Range {
        first: 0,
        count: SEEDS,
    };
    let policies = common::scenarios_in(&common::scenarios_dir().join("policy"));
    let policy_targets = chaos::policy_targets();
    // Which target holds each policy scenario, and the checks that catch
    // the others there.
    let holds = [
        (
            "replan-refused",
            "refuses-replans",
            &[Check::ReplanNotRefused, Check::DuplicateEffect][..],
        ),
        (
            "replan-signed-off",
            "signs-off-replans",
            &[
                Check::DuplicateEffect,
                Check::MissingEffect,
                Check::RejectedWithEffect,
            ][..],
        ),
    ];
    let mut names: Vec<&str> = policies
        .iter()
        .map(|scenario| scenario.name.as_str())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["replan-refused", "replan-signed-off"],
        "a policy scenario without its row here"
    );
    let mut targets = chaos::sim_targets();
    targets.extend(policy_targets.iter().cloned());
    let summary = common::sweep(&policies, &targets, seeds());
    let mut problems = Vec::new();
    for cell in &summary.cells {
        let (_, holder, catching) = holds
            .iter()
            .find(|(scenario, ..)| *scenario == cell.scenario)
            .expect("every policy scenario has its row");
        if cell.target == *holder {
            if cell.verdict != Status::Pass {
                problems.push(format!(
                    "{} x {}: {:?}",
                    cell.scenario, cell.target, cell.reason
                ));
            }
            continue;
        }
        if cell.seeds_failed != SEEDS {
            problems.push(format!(
                "{} x {}: failed {}",
                cell.scenario, cell.target, cell.seeds_failed
            ));
        }
        for failure in &cell.failures {
            let found = failure.checks();
            if !catching.iter().any(|check| found.contains(check)) {
                problems.push(format!("{} x {}: {found:?}", cell.scenario, cell.target));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    let coalesced = common::scenario("replan-injected");
    let summary = common::sweep(&[coalesced], &policy_targets, seeds());
    for cell in &summary.cells {
        match cell.target.as_str() {
            "refuses-replans" => {
                assert_eq!(cell.seeds_failed, SEEDS);
                for failure in &cell.failures {
                    assert!(failure.checks().contains(&Check::RejectedWithEffect));
                }
            }
            _ => assert_eq!(
                cell.verdict,
                Status::Pass,
                "{}: {:?}",
                cell.target,
                cell.reason
            ),
        }
    }
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
