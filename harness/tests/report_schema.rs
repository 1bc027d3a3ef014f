//! report.json: every report chaos produces matches the committed JSON Schema
//! (`docs/report.schema.json`), the schema really constrains, the per-seed
//! record holds what the seed articles ask for, and payloads and tokens stay
//! out unless asked for. Guards issue #4, item 1.

mod common;

use chaos::report::{self, json, merge, Format, Payloads, Summary};
use chaos::scenario::Scenario;
use chaos::{Partition, Seeds, Sweep};

fn sweep(scenarios: &[Scenario], seeds: Seeds, payloads: Payloads) -> Summary {
    common::run_sweep(
        scenarios,
        &chaos::reference_targets(),
        Sweep {
            payloads,
            ..Sweep::new(seeds)
        },
    )
}

fn as_json(summary: &Summary) -> serde_json::Value {
    serde_json::from_str(&json::render(summary)).expect("the report is JSON")
}

#[test]
fn every_kind_of_report_matches_the_schema() {
    // Every scenario and target: every attempt end, disposition, fault and
    // check the reference targets produce.
    let scenarios = common::all_scenarios();
    let seeds = Seeds::Range { first: 0, count: 6 };
    let redacted = sweep(&scenarios, seeds, Payloads::Redacted);
    common::assert_valid_report(&as_json(&redacted));
    common::assert_valid_report(&as_json(&sweep(
        &scenarios,
        Seeds::One(11),
        Payloads::Included,
    )));

    let shards: Vec<Summary> = (1..=3)
        .map(|index| {
            common::run_sweep(
                &scenarios,
                &chaos::reference_targets(),
                Sweep {
                    partition: Some(Partition { index, total: 3 }),
                    ..Sweep::new(seeds)
                },
            )
        })
        .collect();
    for shard in &shards {
        common::assert_valid_report(&as_json(shard));
    }
    common::assert_valid_report(&as_json(&merge::merge(shards).unwrap()));
}

#[test]
fn the_schema_rejects_a_report_that_drifted() {
    let summary = sweep(
        &[common::scenario("worker-restart")],
        Seeds::One(3),
        Payloads::Redacted,
    );
    let report = as_json(&summary);
    assert!(common::schema_errors(&report).is_empty());

    let mut extra = report.clone();
    extra["cells"][0]["failures"][0]["operations"][0]["history"]["surprise"] = 1.into();
    assert!(
        !common::schema_errors(&extra).is_empty(),
        "an unknown field"
    );

    let mut missing = report.clone();
    missing["cells"][0]["failures"][0]["operations"][0]
        .as_object_mut()
        .unwrap()
        .remove("operation_id");
    assert!(
        !common::schema_errors(&missing).is_empty(),
        "a missing field"
    );

    let mut wrong = report.clone();
    wrong["cells"][0]["verdict"] = "maybe".into();
    assert!(
        !common::schema_errors(&wrong).is_empty(),
        "a verdict out of range"
    );

    // The tallies of issue 14 are constrained as strictly.
    assert!(report["cells"][0]["checks"][0].is_object(), "{report}");
    let mut unknown_check = report.clone();
    unknown_check["cells"][0]["checks"][0]["check"] = "duplicate-effects".into();
    assert!(
        !common::schema_errors(&unknown_check).is_empty(),
        "a check that does not exist"
    );
    let mut no_histogram = report.clone();
    no_histogram["cells"][0]["dispatches"]
        .as_object_mut()
        .unwrap()
        .remove("histogram");
    assert!(
        !common::schema_errors(&no_histogram).is_empty(),
        "dispatches without their histogram"
    );
    let mut bad_not_run = report.clone();
    bad_not_run["cells"][0]["not_run"] = serde_json::json!({ "seeds": 1 });
    assert!(
        !common::schema_errors(&bad_not_run).is_empty(),
        "not_run without its reason"
    );
}

/// Issue 14, item 5: a cell counts every check that fired by the seeds it
/// fired on, and the dispatches of every seed run, passing seeds too; the
/// kept records agree with the counts.
#[test]
fn every_cell_counts_its_checks_and_the_dispatches_of_every_seed() {
    let summary = sweep(
        &common::all_scenarios(),
        Seeds::Range { first: 0, count: 6 },
        Payloads::Redacted,
    );
    let mut several = 0;
    for cell in &summary.cells {
        let name = format!("{} x {}", cell.scenario, cell.target);
        let histogram: u64 = cell.dispatches.histogram.iter().map(|bin| bin.seeds).sum();
        assert_eq!(
            histogram, cell.seeds_run,
            "{name}: every seed run is counted"
        );
        assert_eq!(
            cell.dispatches.min,
            cell.dispatches.histogram.first().map(|bin| bin.dispatches),
            "{name}"
        );
        assert_eq!(
            cell.dispatches.max,
            cell.dispatches.histogram.last().map(|bin| bin.dispatches),
            "{name}"
        );
        assert!(
            cell.not_run.is_none(),
            "{name}: simulated trials always run"
        );
        let not_passed = cell.seeds_failed + cell.seeds_unknown;
        assert_eq!(cell.checks.is_empty(), not_passed == 0, "{name}");
        for count in &cell.checks {
            assert!(
                count.seeds >= 1 && count.seeds <= not_passed,
                "{name}: {count:?}"
            );
        }
        for failure in &cell.failures {
            for check in failure.checks() {
                // A warning is counted apart, in the cell's warnings.
                let counted = if check.is_warning() {
                    cell.warnings.iter().any(|warning| warning.check == check)
                } else {
                    cell.checks.iter().any(|count| count.check == check)
                };
                assert!(
                    counted,
                    "{name}: seed {} found {check}, which the cell does not count",
                    failure.seed
                );
            }
        }
        if cell.checks.len() > 1 {
            several += 1;
            assert_eq!(cell.headline(), cell.checks_text(), "{name}");
        }
    }
    assert!(
        several > 0,
        "no cell had several checks fire: the test shows nothing"
    );
}

#[test]
fn the_schema_documents_the_version_chaos_writes() {
    let text =
        std::fs::read_to_string(common::repo_root().join("docs/report.schema.json")).unwrap();
    let schema: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        schema["properties"]["schema_version"]["const"],
        report::SCHEMA_VERSION
    );
}

/// The record of a failing seed, per logical operation: operation id,
/// attempt ids, authorization decisions, dispatches, effects, receipts, the
/// outcomes the agent saw and the faults applied.
#[test]
fn a_failing_seed_keeps_the_record_the_articles_ask_for() {
    let summary = sweep(
        &[common::scenario("worker-restart")],
        Seeds::One(3),
        Payloads::Redacted,
    );
    let cell = summary.cell("worker-restart", "fresh-key").unwrap();
    let failure = &cell.failures[0];
    assert_eq!(failure.seed, 3);
    assert_eq!(
        failure.rerun,
        "chaos run scenarios/worker-restart.toml --target fresh-key --seed 3"
    );
    let operation = &failure.operations[0];
    assert_eq!(operation.operation_id, "op-reminder-3");
    let attempt_ids: Vec<&str> = operation
        .history
        .attempts
        .iter()
        .map(|attempt| attempt.attempt_id.as_str())
        .collect();
    assert_eq!(attempt_ids, ["att-3-1-1-1", "att-3-1-1-2", "att-3-1-1-3"]);
    let saw: Vec<&str> = operation
        .history
        .attempts
        .iter()
        .map(|attempt| attempt.saw.as_str())
        .collect();
    assert_eq!(saw, ["connection reset", "connection refused", "applied"]);
    assert_eq!(operation.summary.effects, 2);
    assert_eq!(operation.ledger.effects.len(), 2);
    assert_eq!(operation.ledger.dispatches.len(), 2);
    assert_eq!(operation.summary.receipts, ["rcpt-1", "rcpt-2"]);
    assert!(
        !operation.history.authorizations.is_empty()
            && operation
                .history
                .authorizations
                .iter()
                .all(|decision| decision.allows_tool && !decision.during_attempts.is_empty()),
        "{:?}",
        operation.history.authorizations
    );
    let faults: Vec<Option<&str>> = operation
        .history
        .faults
        .iter()
        .map(|fault| fault.kind.as_deref())
        .collect();
    assert_eq!(
        faults,
        [Some("crash-target"), None, None],
        "crash, kill, restart"
    );
}

/// Payload bytes and the token appear only with `--include-payloads`, in
/// every format.
#[test]
fn payloads_and_tokens_are_redacted_unless_asked_for() {
    let scenarios = [
        common::scenario("changed-payload"),
        common::scenario("revoked-permission"),
    ];
    // Words of every payload's body, and the token of seed 5.
    let secrets = ["is overdue", "billing@reminder.example", "tok-5"];

    let redacted = sweep(&scenarios, Seeds::One(5), Payloads::Redacted);
    assert!(!redacted.cells.iter().all(|cell| cell.failures.is_empty()));
    for format in Format::ALL {
        let text = format.render(&redacted);
        for secret in secrets {
            assert!(
                !text.contains(secret),
                "{} holds '{secret}' although payloads are redacted",
                format.name()
            );
        }
    }

    let included = sweep(&scenarios, Seeds::One(5), Payloads::Included);
    let text = json::render(&included);
    for secret in secrets {
        assert!(text.contains(secret), "report.json lacks '{secret}'");
    }
    assert!(report::html::render(&included).contains("tok-5"));
}

/// The schema's list of checks is the checker's table, in its order: a new
/// check cannot reach a report the schema would reject.
#[test]
fn the_schema_names_exactly_the_checks_chaos_has() {
    let text =
        std::fs::read_to_string(common::repo_root().join("docs/report.schema.json")).unwrap();
    let schema: serde_json::Value = serde_json::from_str(&text).unwrap();
    let listed: Vec<&str> = schema["$defs"]["check"]["enum"]
        .as_array()
        .expect("the schema lists the checks")
        .iter()
        .map(|name| name.as_str().unwrap())
        .collect();
    let mut known: Vec<&str> = chaos::Check::ALL.iter().map(|(_, name)| *name).collect();
    let mut sorted_listed = listed.clone();
    sorted_listed.sort_unstable();
    known.sort_unstable();
    assert_eq!(sorted_listed, known);
}
