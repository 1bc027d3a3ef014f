//! The reports people read: the Markdown summary, the JUnit XML CI reads, and
//! `chaos compare`. Snapshots of a fixed run (issue #4, item 8), and the
//! checks that JUnit parses with the expected counts (item 2) and that compare
//! finds regressions (item 4).

mod common;

use std::path::Path;

use chaos::report::compare::{self, ChangeKind};
use chaos::report::{junit, markdown, Summary};
use chaos::Exit;
use chaos::Seeds;
use chaos::SimTarget;
use chaos::Status;

/// The run the terminal table snapshot also uses (tests/table.rs).
fn fixed_run(targets: &[SimTarget]) -> Summary {
    let scenarios = vec![
        common::scenario("lost-response-keyed"),
        common::scenario("changed-payload"),
        common::scenario("revoked-permission"),
    ];
    common::sweep(&scenarios, targets, Seeds::Range { first: 0, count: 3 })
}

#[test]
fn the_markdown_summary_reads_as_a_pull_request_comment() {
    let summary = fixed_run(&chaos::reference_targets());
    let text = markdown::render(&summary);
    insta::assert_snapshot!("markdown", text);
    // One row per scenario, and a rerun command per cell that did not pass.
    let failing = summary
        .cells
        .iter()
        .filter(|cell| cell.verdict != Status::Pass)
        .count();
    assert_eq!(text.matches("\n  chaos run ").count(), failing);
    for scenario in &summary.scenarios {
        assert!(text.contains(&format!("\n| {} |", scenario.name)));
    }
}

#[test]
fn junit_parses_with_a_test_case_per_cell() {
    let summary = fixed_run(&chaos::reference_targets());
    let xml = junit::render(&summary);
    insta::assert_snapshot!("junit", xml);

    let document = roxmltree::Document::parse(&xml).expect("junit.xml is well-formed XML");
    let root = document.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    let cases: Vec<roxmltree::Node> = root
        .descendants()
        .filter(|node| node.has_tag_name("testcase"))
        .collect();
    let failures: Vec<roxmltree::Node> = root
        .descendants()
        .filter(|node| node.has_tag_name("failure"))
        .collect();
    let failing: Vec<_> = summary
        .cells
        .iter()
        .filter(|cell| cell.verdict == Status::Fail)
        .collect();
    assert_eq!(cases.len(), summary.cells.len(), "one test case per cell");
    assert_eq!(failures.len(), failing.len());
    let cells = summary.cells.len().to_string();
    assert_eq!(root.attribute("tests"), Some(cells.as_str()));
    assert_eq!(
        root.attribute("failures"),
        Some(failing.len().to_string().as_str())
    );
    assert_eq!(root.attribute("errors"), Some("0"));
    let suites: Vec<&str> = root
        .children()
        .filter(|node| node.has_tag_name("testsuite"))
        .filter_map(|node| node.attribute("name"))
        .collect();
    assert_eq!(
        suites,
        ["fresh-key", "args-hash", "ledger", "runtime-ledger"]
    );

    // The failure message is the reason and the rerun command.
    for cell in failing {
        let case = cases
            .iter()
            .find(|case| {
                case.attribute("name") == Some(cell.scenario.as_str())
                    && case.attribute("classname") == Some(cell.target.as_str())
            })
            .expect("the failing cell has a test case");
        let failure = case
            .children()
            .find(|node| node.has_tag_name("failure"))
            .expect("a failing cell's test case holds a failure");
        let message = failure.attribute("message").unwrap();
        assert!(
            message.contains(cell.reason.as_deref().unwrap()),
            "{message}"
        );
        assert!(
            message.contains(cell.rerun.as_deref().unwrap()),
            "{message}"
        );
    }

    // A cell that could not be decided is an <error>: the harness, not the
    // target, failed there.
    let mut undecided = summary.clone();
    let cell = undecided
        .cells
        .iter_mut()
        .find(|cell| cell.verdict == Status::Pass)
        .unwrap();
    cell.verdict = Status::Unknown;
    cell.reason = Some("run-incomplete: the simulation stopped".into());
    let xml = junit::render(&undecided);
    let document = roxmltree::Document::parse(&xml).unwrap();
    assert_eq!(document.root_element().attribute("errors"), Some("1"));
    let error = document
        .descendants()
        .find(|node| node.has_tag_name("error"))
        .expect("an <error> element");
    assert!(error
        .attribute("message")
        .unwrap()
        .starts_with("run-incomplete: the simulation stopped"));
}

fn target(name: &str) -> SimTarget {
    chaos::find(name).unwrap()
}

/// Targets from different reports become columns side by side, Hermitage-style.
#[test]
fn compare_puts_implementations_side_by_side() {
    let reports = [
        ("fresh".to_owned(), fixed_run(&[target("fresh-key")])),
        ("hash".to_owned(), fixed_run(&[target("args-hash")])),
        ("ledger".to_owned(), fixed_run(&[target("ledger")])),
    ];
    let comparison = compare::compare(&reports);
    let labels: Vec<&str> = comparison
        .columns
        .iter()
        .map(|column| column.label.as_str())
        .collect();
    assert_eq!(labels, ["fresh-key", "args-hash", "ledger"]);
    assert!(comparison.changes.is_empty());
    assert_eq!(comparison.exit(), Exit::Success);
    insta::assert_snapshot!("compare_matrix", compare::render_table(&comparison, false));
}

/// Between two reports of one target, a cell that went from pass to fail is a
/// regression, and makes `chaos compare` exit 1.
#[test]
fn compare_finds_regressions_between_reports_of_one_target() {
    let before = fixed_run(&[target("args-hash"), target("ledger")]);
    let mut after = before.clone();
    // The ledger "regresses" in revoked-permission, the args-hash "fix" in
    // changed-payload: as a new build of each would show.
    let regressed = after
        .cells
        .iter_mut()
        .find(|cell| cell.scenario == "revoked-permission" && cell.target == "ledger")
        .unwrap();
    regressed.verdict = Status::Fail;
    regressed.reason = Some("disclosure: a receipt after revocation".into());
    regressed.rerun =
        Some("chaos run scenarios/revoked-permission.toml --target ledger --seed 0".into());
    let fixed = after
        .cells
        .iter_mut()
        .find(|cell| cell.scenario == "changed-payload" && cell.target == "args-hash")
        .unwrap();
    fixed.verdict = Status::Pass;
    fixed.reason = None;
    fixed.rerun = None;

    let comparison = compare::compare(&[("main".into(), before), ("branch".into(), after)]);
    let regressions: Vec<(&str, &str)> = comparison
        .regressions()
        .map(|change| (change.scenario.as_str(), change.target.as_str()))
        .collect();
    assert_eq!(regressions, [("revoked-permission", "ledger")]);
    assert!(comparison
        .changes
        .iter()
        .any(|change| change.kind == ChangeKind::Fix && change.target == "args-hash"));
    assert_eq!(comparison.exit(), Exit::InvariantViolated);
    let labels: Vec<&str> = comparison
        .columns
        .iter()
        .map(|column| column.label.as_str())
        .collect();
    assert_eq!(
        labels,
        [
            "args-hash @ main",
            "args-hash @ branch",
            "ledger @ main",
            "ledger @ branch"
        ]
    );
    insta::assert_snapshot!(
        "compare_regression",
        compare::render_table(&comparison, false)
    );
    insta::assert_snapshot!(
        "compare_regression_markdown",
        compare::render_markdown(&comparison)
    );
}

#[test]
fn compare_labels_reports_by_their_folder_or_file() {
    let paths = [
        Path::new("base/report.json"),
        Path::new("runs/head.json"),
        Path::new("report.json"),
    ];
    assert_eq!(compare::labels(&paths), ["base", "runs/head", "report"]);
    let clash = [Path::new("a/x.json"), Path::new("a/x.json")];
    assert_eq!(compare::labels(&clash), ["a/x.json (#1)", "a/x.json (#2)"]);
}
