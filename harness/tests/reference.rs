//! `reports/reference/` is the checked-in comparison of the reference targets.
//! This test runs the exact command `reports/README.md` documents (in a debug
//! build, into a temporary folder) and fails when a checked-in file differs
//! from what it writes. Guards issue #4, item 7.

mod common;

use std::path::{Path, PathBuf};

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|error| panic!("{}: {error}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    files
}

#[test]
fn the_checked_in_reference_reports_are_fresh() {
    // The first documented `chaos run`: the reference comparison's.
    let command = common::documented_command("cargo run --release -p chaos -- run ");
    let out = common::temp_dir("reference");
    let output = common::chaos_command()
        .args(common::documented_arguments(
            &command,
            "reports/reference",
            &out,
        ))
        .output()
        .expect("chaos runs");
    assert_eq!(
        output.status.code(),
        Some(1),
        "the broken reference targets fail: {}",
        String::from_utf8_lossy(&output.stderr)
    );

    let checked_in = common::repo_root().join("reports/reference");
    let fresh: Vec<String> = files_in(&out)
        .iter()
        .map(|path| path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let kept: Vec<String> = files_in(&checked_in)
        .iter()
        .map(|path| path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        kept, fresh,
        "reports/reference holds other files than the command writes; regenerate it with:\n    {command}"
    );
    for name in &fresh {
        let expected = std::fs::read_to_string(out.join(name)).unwrap();
        let actual = std::fs::read_to_string(checked_in.join(name)).unwrap();
        if expected != actual {
            let line = expected
                .lines()
                .zip(actual.lines())
                .position(|(fresh, old)| fresh != old)
                .map_or_else(
                    || "its length".to_owned(),
                    |index| format!("line {}", index + 1),
                );
            panic!(
                "reports/reference/{name} is stale (first difference at {line}); regenerate it from the repository root with:\n    {command}"
            );
        }
    }
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(checked_in.join("report.json")).unwrap())
            .unwrap();
    common::assert_valid_report(&report);
}

/// Issue 22: a pass must mean the fault happened. Every fault of every
/// shipped scenario acts on every seed against every reference target it is
/// run against, or the scenario declares it `optional` (with its reason in a
/// comment). The reference report is the run that shows it (the test above
/// keeps it fresh).
#[test]
fn every_shipped_fault_acts_against_every_reference_target() {
    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(common::repo_root().join("reports/reference/report.json"))
            .unwrap(),
    )
    .unwrap();
    let mut idle = Vec::new();
    let mut faults_seen = 0;
    for cell in report["cells"].as_array().unwrap() {
        let seeds_run = cell["seeds_run"].as_u64().unwrap();
        assert!(seeds_run > 0, "{cell}");
        for fault in cell["faults"].as_array().unwrap() {
            faults_seen += 1;
            let optional = fault["optional"].as_bool().unwrap_or(false);
            if !optional && fault["seeds_acted"].as_u64() != Some(seeds_run) {
                idle.push(format!(
                    "{} x {}: fault {} acted on {}/{seeds_run} seeds",
                    cell["scenario"], cell["target"], fault["description"], fault["seeds_acted"]
                ));
            }
        }
    }
    assert!(faults_seen > 100, "the reference run declares faults");
    assert!(idle.is_empty(), "{}", idle.join("\n"));
}
