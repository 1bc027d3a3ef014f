//! Issue 13, item 4: a service that keeps its callers in its own store is
//! told each grant and revocation by the commands of its target file's
//! `[authority]`, at the fault's protocol point, and is judged on the same
//! revocation scenarios as a service that introspects.

mod common;

use std::path::{Path, PathBuf};

const REVOCATIONS: [&str; 3] = [
    "scenarios/revoked-new-operation.toml",
    "scenarios/revoked-permission.toml",
    "scenarios/revoked-scope.toml",
];

/// `own-callers.target.toml` of the Python example, with its `revoke`
/// command replaced by `revoke`, in `dir`.
fn own_callers_with(dir: &Path, name: &str, revoke: &str) -> PathBuf {
    let workdir = common::repo_root().join("targets/python-replay-first");
    let text = std::fs::read_to_string(workdir.join("own-callers.target.toml")).unwrap();
    let mut lines: Vec<String> = text
        .lines()
        .map(|line| match line {
            line if line.starts_with("name = ") => format!("name = \"{name}\""),
            line if line.starts_with("revoke = ") => format!("revoke = {revoke}"),
            line => line.to_owned(),
        })
        .collect();
    lines.insert(0, format!("workdir = \"{}\"", workdir.display()));
    let path = dir.join(format!("{name}.target.toml"));
    std::fs::write(&path, lines.join("\n")).unwrap();
    path
}

fn run(dir: &Path, target: &Path) -> (Option<i32>, String, serde_json::Value) {
    let (code, stdout, stderr, report) = common::run_live(dir, &REVOCATIONS, target, "1", &[]);
    assert!(
        !report.is_null(),
        "no report.json; stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    (code, stdout, report)
}

/// (scenario, verdict, reason) of every cell.
fn cells(report: &serde_json::Value) -> Vec<(String, String, String)> {
    report["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cell| {
            (
                cell["scenario"].as_str().unwrap().to_owned(),
                cell["verdict"].as_str().unwrap().to_owned(),
                cell["reason"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

#[test]
fn revocations_reach_a_service_that_keeps_its_own_callers() {
    let dir = common::temp_dir("own-callers");
    let target = common::repo_root().join("targets/python-replay-first/own-callers.target.toml");
    let (_, stdout, report) = run(&dir, &target);
    common::assert_valid_report(&report);
    let cells = cells(&report);
    let verdict = |name: &str| {
        cells
            .iter()
            .find(|(scenario, _, _)| scenario == name)
            .unwrap_or_else(|| panic!("{name} ran:\n{stdout}"))
            .clone()
    };
    // Its own table said the token went: the new operation was refused.
    assert_eq!(verdict("revoked-new-operation").1, "pass", "{stdout}");
    // Its documented weakness, a replay before authorization, is caught as
    // it is when it introspects.
    let (_, permission, reason) = verdict("revoked-permission");
    assert_eq!(permission, "fail", "{stdout}");
    assert!(reason.contains("disclos"), "{reason}");
    assert_eq!(verdict("revoked-scope").1, "fail", "{stdout}");
}

/// Without the revocation reaching its store, the service keeps serving a
/// caller who lost access: the check that proves the adapter matters.
#[test]
fn a_revocation_that_never_reaches_the_store_is_caught() {
    let dir = common::temp_dir("own-callers-deaf");
    let target = own_callers_with(&dir, "deaf-own-callers", "[\"true\"]");
    let (_, stdout, report) = run(&dir, &target);
    let new_operation = cells(&report)
        .into_iter()
        .find(|(scenario, _, _)| scenario == "revoked-new-operation")
        .unwrap();
    assert_eq!(new_operation.1, "fail", "{stdout}");
    assert!(
        new_operation.2.contains("after-revocation") || new_operation.2.contains("denied"),
        "{}",
        new_operation.2
    );
}

/// A revocation command that fails leaves nothing to judge: the cell is
/// unknown and names the command and its stderr, never a pass.
#[test]
fn a_failing_revocation_command_is_unknown_with_its_stderr() {
    let dir = common::temp_dir("own-callers-broken");
    let target = own_callers_with(
        &dir,
        "broken-own-callers",
        "[\"python3\", \"callers.py\", \"set\", \"no-such-token\", \"{active}\", \"{scope}\"]",
    );
    let (_, stdout, report) = run(&dir, &target);
    for (scenario, verdict, reason) in cells(&report) {
        assert_eq!(verdict, "unknown", "{scenario}: {stdout}");
        assert!(
            reason.contains("[authority] revoke `python3 callers.py set no-such-token"),
            "{scenario}: {reason}"
        );
        assert!(
            reason.contains("no caller with token no-such-token"),
            "{reason}"
        );
    }
}
