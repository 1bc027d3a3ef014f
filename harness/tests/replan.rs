//! Issue 22, section 4: the fourth seed article's IdempotentStore demo (one
//! charge sent three times under one key: executed once, replayed twice, one
//! charge) and the re-plan matrix, published in `reports/seeds/replan.md`
//! and kept fresh.

mod common;

use chaos::report::replan;
use chaos::{Scenario, Seeds, Status};

/// A re-plan scenario (`scenarios/`) or the demo (`scenarios/seeds/`).
fn scenario(name: &str) -> Scenario {
    let mut scenarios = common::all_scenarios();
    scenarios.extend(common::scenarios_in(&common::scenarios_dir().join("seeds")));
    scenarios
        .into_iter()
        .find(|scenario| scenario.name == name)
        .unwrap_or_else(|| panic!("scenarios/{name}.toml"))
}

/// `ledger` keeps the store: the first attempt is executed, the next two are
/// answered from it, one charge. `fresh-key` mints a key per attempt and
/// charges three times: the scenario can fail.
#[test]
fn the_idempotent_store_demo_executes_once_and_replays_twice() {
    let demo = scenario(replan::DEMO);
    let expected: Vec<Vec<String>> = demo
        .calls
        .iter()
        .map(|call| {
            (call.expect.iter().flatten())
                .map(ToString::to_string)
                .collect()
        })
        .collect();
    assert_eq!(expected, [["applied"], ["replayed"], ["replayed"]]);
    let summary = common::sweep(
        std::slice::from_ref(&demo),
        &chaos::reference_targets(),
        Seeds::Range { first: 0, count: 5 },
    );
    let cell = |target: &str| {
        summary
            .cell(replan::DEMO, target)
            .unwrap_or_else(|| panic!("{target} ran"))
    };
    let ledger = cell("ledger");
    assert_eq!(ledger.verdict, Status::Pass, "{:?}", ledger.reason);
    assert_eq!(ledger.effects_text(), "effects 1/1");
    assert_eq!(
        (ledger.dispatches.min, ledger.dispatches.max),
        (Some(1), Some(1)),
        "one dispatch: the replays never reached the provider"
    );
    let fresh = cell("fresh-key");
    assert_eq!(fresh.verdict, Status::Fail);
    assert_eq!(fresh.effects_observed_max, 3, "{:?}", fresh.reason);
}

/// The matrix names what each cell caught, and the three-charges ticket is
/// caught on `ledger` and held by `runtime-ledger`.
#[test]
fn the_replan_matrix_shows_what_each_target_let_through() {
    let scenarios = vec![scenario("three-charges"), scenario("replan-held-key")];
    let summary = common::sweep(
        &scenarios,
        &chaos::reference_targets(),
        Seeds::Range { first: 0, count: 3 },
    );
    let matrix = replan::render_matrix(&summary).expect("re-plan scenarios ran");
    let row = (matrix.lines())
        .find(|line| line.starts_with("| `three-charges`"))
        .expect("a row per re-plan scenario");
    let cells: Vec<&str> = row.split(" | ").skip(1).collect();
    let targets: Vec<&str> = (summary.targets.iter())
        .map(|target| target.name.as_str())
        .collect();
    let at = |target: &str| cells[targets.iter().position(|t| *t == target).unwrap()];
    assert!(
        at("ledger").starts_with("FAIL, effects 3/1 ×3: "),
        "{}",
        at("ledger")
    );
    assert!(
        at("runtime-ledger").starts_with("pass, effects 1/1"),
        "{}",
        at("runtime-ledger")
    );
    assert!(matrix.contains("| **held** |"), "{matrix}");
}

#[test]
fn the_checked_in_replan_report_is_fresh() {
    common::assert_seeds_report_fresh(
        "cargo run --release -p chaos -- run scenarios/replan-*.toml",
        replan::COMMAND,
        "replan.md",
        "fresh-key, args-hash and ledger charge again on a re-plan",
    );
}
