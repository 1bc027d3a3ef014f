//! Issue 12: the seed article's seven-case authorization lab, reproduced in
//! the simulator, and `reports/seeds/authorization.md` kept fresh.
//!
//! Published: "the unchecked baseline matches 2 of 7 expected decisions";
//! "with all four controls enabled, 7 of 7 decisions match"; turning one
//! control off opens its cases (tenant: 2; approval: 4 and 6; scope: 3;
//! identity: 7).

mod common;

use chaos::report::decisions::{self, Matrix};
use chaos::{Scenario, Seeds};

fn lab() -> Vec<Scenario> {
    common::scenarios_in(&common::scenarios_dir().join("authorization"))
}

#[test]
fn the_lab_reproduces_the_published_figures_exactly() {
    let scenarios = lab();
    assert_eq!(scenarios.len(), 7, "the lab has seven cases");
    let summary = common::sweep(
        &scenarios,
        &chaos::gate_targets(),
        Seeds::Range { first: 0, count: 5 },
    );
    let matrix = Matrix::of(&summary).expect("the lab's scenarios are authorization ones");
    let opened = |target: &str| {
        let column = matrix
            .columns
            .iter()
            .find(|column| column.target == target)
            .unwrap_or_else(|| panic!("{target} ran"));
        assert!(
            column.matched.iter().all(Option::is_some),
            "{target}: every case decided"
        );
        (column.count(), column.opened())
    };
    assert_eq!(opened("baseline"), (2, vec![2, 3, 4, 6, 7]));
    assert_eq!(opened("gate"), (7, vec![]));
    assert_eq!(opened("gate-no-tenant"), (6, vec![2]));
    assert_eq!(opened("gate-no-approval"), (5, vec![4, 6]));
    assert_eq!(opened("gate-no-scope"), (6, vec![3]));
    assert_eq!(opened("gate-no-identity"), (6, vec![7]));
    assert_failures_are_wrong_decisions(&summary);
}

fn beyond() -> Vec<Scenario> {
    common::scenarios_in(&common::scenarios_dir().join("authorization/beyond"))
}

/// Beyond the lab, with faults: each case is caught by the variant weakened
/// in its one way (and by the control taken out, and the baseline), and
/// passed by `gate` and by every other variant.
#[test]
fn each_fault_beyond_the_lab_is_caught_by_its_weakened_variant() {
    let scenarios = beyond();
    let names: Vec<&str> = scenarios.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "approval-expired",
            "approval-replayed",
            "export-in-scope",
            "revoked-in-flight",
            "tenant-header-forged"
        ]
    );
    let summary = common::sweep(
        &scenarios,
        &chaos::gate_targets(),
        Seeds::Range { first: 0, count: 5 },
    );
    let matrix = Matrix::beyond(&summary).expect("the cases beyond the lab");
    assert!(Matrix::of(&summary).is_none(), "no lab case ran");
    let opened_by = |row: usize| -> Vec<&str> {
        matrix
            .columns
            .iter()
            .filter(|column| {
                assert!(column.matched[row].is_some(), "{}: decided", column.target);
                column.matched[row] == Some(false)
            })
            .map(|column| column.target.as_str())
            .collect()
    };
    assert_eq!(
        opened_by(0),
        ["baseline", "gate-no-approval", "gate-ignores-expiry"]
    );
    assert_eq!(
        opened_by(1),
        ["baseline", "gate-no-approval", "gate-reuses-approval"]
    );
    assert_eq!(
        opened_by(2),
        ["baseline", "gate-no-tenant", "gate-export-unscoped"]
    );
    assert_eq!(
        opened_by(3),
        ["baseline", "gate-no-identity", "gate-checks-once"]
    );
    assert_eq!(
        opened_by(4),
        ["baseline", "gate-no-tenant", "gate-trusts-header"]
    );
    assert_failures_are_wrong_decisions(&summary);
}

/// The composition failure: with export in scope, the export is allowed
/// by every variant (a right decision), and what reached Alex decides the
/// case: South's INV-B in the answer's records is a disclosure, found by
/// reading the records against their stored owners.
#[test]
fn an_export_in_scope_leaks_south_s_records_past_a_route_only_tenant_check() {
    let scenarios: Vec<Scenario> = beyond()
        .into_iter()
        .filter(|scenario| scenario.name == "export-in-scope")
        .collect();
    assert_eq!(
        scenarios.len(),
        1,
        "scenarios/authorization/beyond/export-in-scope.toml"
    );
    let summary = common::sweep(
        &scenarios,
        &chaos::gate_targets(),
        Seeds::Range { first: 0, count: 3 },
    );
    for cell in &summary.cells {
        let reason = cell.reason.as_deref().unwrap_or("");
        match cell.target.as_str() {
            "baseline" | "gate-no-tenant" | "gate-export-unscoped" => {
                assert_eq!(
                    cell.verdict,
                    chaos::Status::Fail,
                    "{}: {reason}",
                    cell.target
                );
                assert!(
                    reason.starts_with("disclosure: ")
                        && reason
                            .contains("INV-B (tenant 'south'), which tenant 'north' does not own"),
                    "{}: {reason}",
                    cell.target
                );
            }
            _ => assert_eq!(
                cell.verdict,
                chaos::Status::Pass,
                "{}: {reason}",
                cell.target
            ),
        }
    }
}

/// Every opened case failed on its decision or on what reached the caller:
/// a denied call that leaked is a wrong decision, another tenant's record
/// in an answer a disclosure, never only a count.
fn assert_failures_are_wrong_decisions(summary: &chaos::report::Summary) {
    for cell in summary
        .cells
        .iter()
        .filter(|cell| cell.verdict == chaos::Status::Fail)
    {
        let reason = cell.reason.as_deref().unwrap_or("");
        assert!(
            reason.starts_with("wrong-decision: ") || reason.starts_with("disclosure: "),
            "{} x {}: {reason}",
            cell.scenario,
            cell.target
        );
    }
}

/// The weakened variants are invisible to the lab: each matches 7/7.
#[test]
fn the_lab_cannot_see_the_weaknesses_beyond_it() {
    let weakened: Vec<chaos::SimTarget> = chaos::gate_targets()
        .into_iter()
        .filter(|target| {
            [
                "gate-reuses-approval",
                "gate-ignores-expiry",
                "gate-checks-once",
                "gate-trusts-header",
                "gate-export-unscoped",
            ]
            .contains(&target.info.name.as_str())
        })
        .collect();
    assert_eq!(weakened.len(), 5);
    let summary = common::sweep(&lab(), &weakened, Seeds::Range { first: 0, count: 3 });
    let matrix = Matrix::of(&summary).expect("the lab");
    for column in &matrix.columns {
        assert_eq!(column.figure(), "7/7", "{}", column.target);
    }
}

#[test]
fn the_checked_in_lab_report_is_fresh() {
    common::assert_seeds_report_fresh(
        "cargo run --release -p chaos -- run scenarios/authorization/",
        decisions::COMMAND,
        "authorization.md",
        "the baseline and the ablations fail",
    );
}
