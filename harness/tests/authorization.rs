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
    // Every opened case failed on its decision: a denied call that leaked
    // is a wrong decision, never only a count.
    for cell in summary
        .cells
        .iter()
        .filter(|cell| cell.verdict == chaos::Status::Fail)
    {
        let reason = cell.reason.as_deref().unwrap_or("");
        assert!(
            reason.starts_with("wrong-decision: "),
            "{}: {reason}",
            cell.target
        );
    }
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
        ["baseline", "gate-no-identity", "gate-checks-once"]
    );
    assert_eq!(
        opened_by(3),
        ["baseline", "gate-no-tenant", "gate-trusts-header"]
    );
    for cell in summary
        .cells
        .iter()
        .filter(|cell| cell.verdict == chaos::Status::Fail)
    {
        let reason = cell.reason.as_deref().unwrap_or("");
        assert!(
            reason.starts_with("wrong-decision: "),
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
            ]
            .contains(&target.info.name.as_str())
        })
        .collect();
    assert_eq!(weakened.len(), 4);
    let summary = common::sweep(&lab(), &weakened, Seeds::Range { first: 0, count: 3 });
    let matrix = Matrix::of(&summary).expect("the lab");
    for column in &matrix.columns {
        assert_eq!(column.figure(), "7/7", "{}", column.target);
    }
}

/// The documented command, as `reports/README.md` states it.
fn documented_command() -> String {
    let readme = std::fs::read_to_string(common::repo_root().join("reports/README.md"))
        .expect("reports/README.md exists");
    readme
        .lines()
        .find(|line| {
            line.starts_with("cargo run --release -p chaos -- run scenarios/authorization/")
        })
        .expect("reports/README.md documents the authorization lab's command")
        .to_owned()
}

#[test]
fn the_checked_in_lab_report_is_fresh() {
    let command = documented_command();
    assert_eq!(
        command,
        decisions::COMMAND,
        "reports/README.md and the report's own command drifted apart"
    );
    let out = common::temp_dir("seeds");
    let mut arguments: Vec<String> = Vec::new();
    let mut words = command.split_once(" -- ").unwrap().1.split_whitespace();
    while let Some(word) = words.next() {
        match word {
            glob if glob.ends_with("/*.toml") => {
                let dir = glob.trim_end_matches("/*.toml");
                let mut paths: Vec<String> = std::fs::read_dir(common::repo_root().join(dir))
                    .unwrap()
                    .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
                    .filter(|name| name.ends_with(".toml"))
                    .map(|name| format!("{dir}/{name}"))
                    .collect();
                paths.sort();
                arguments.extend(paths);
            }
            "--out" => {
                assert_eq!(words.next(), Some("reports/seeds"));
                arguments.push("--out".into());
                arguments.push(out.display().to_string());
            }
            other => arguments.push(other.to_owned()),
        }
    }
    let output = common::chaos_command()
        .args(&arguments)
        .output()
        .expect("chaos runs");
    assert_eq!(
        output.status.code(),
        Some(1),
        "the baseline and the ablations fail: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let fresh = std::fs::read_to_string(out.join("authorization.md")).unwrap();
    let checked_in =
        std::fs::read_to_string(common::repo_root().join("reports/seeds/authorization.md"))
            .expect("reports/seeds/authorization.md is checked in");
    assert!(
        fresh == checked_in,
        "reports/seeds/authorization.md is stale; regenerate it from the repository root with:\n    {command}"
    );
}
