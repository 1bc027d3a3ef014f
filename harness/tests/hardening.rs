//! Issue 15: nothing a user does makes chaos panic, hang, orphan a process or
//! lose a report. Each test names the way out it guards.

mod common;

use std::fs::File;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// `chaos args...` with stdout a pipe whose reading end is closed before
/// chaos starts: every write to stdout fails with EPIPE.
fn with_stdout_closed(args: &[&str]) -> Output {
    let (reader, writer) = nix::unistd::pipe().expect("a pipe");
    drop(reader);
    common::chaos_command()
        .args(args)
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .expect("chaos runs")
}

fn assert_reports_in(out: &Path) {
    for file in ["report.json", "junit.xml", "summary.md", "report.html"] {
        assert!(out.join(file).is_file(), "{file} missing from {out:?}");
    }
}

// guards: `chaos run | head -1` panicked on the broken pipe (exit 101) and
// lost the reports (issue 15)
#[test]
fn a_closed_stdout_keeps_the_runs_exit_code_and_its_reports() {
    for (target, code) in [("runtime-ledger", 0), ("fresh-key", 1)] {
        for format in ["table", "json", "markdown"] {
            let out = common::fresh_path(&format!("epipe-{target}-{format}"));
            let output = with_stdout_closed(&[
                "run",
                "scenarios/lost-response-keyed.toml",
                "--target",
                target,
                "--seeds",
                "3",
                "--format",
                format,
                "--out",
                out.to_str().unwrap(),
            ]);
            let (_, stderr) = common::text(&output);
            assert_eq!(
                output.status.code(),
                Some(code),
                "{target} {format}: {stderr}"
            );
            assert!(!stderr.contains("panicked"), "{stderr}");
            assert!(!stderr.contains("Broken pipe"), "{stderr}");
            assert_reports_in(&out);
            std::fs::remove_dir_all(&out).unwrap();
        }
    }
}

// guards: `chaos list | head -1` panicked on the broken pipe (issue 15)
#[test]
fn every_subcommand_ends_quietly_on_a_closed_stdout() {
    let report = common::repo_root().join("reports/reference/report.json");
    let report = report.to_str().unwrap();
    for args in [
        vec!["list"],
        vec!["compare", report, report],
        vec!["compare", report, "--format", "json"],
    ] {
        let output = with_stdout_closed(&args);
        let (_, stderr) = common::text(&output);
        assert_eq!(output.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(stderr.is_empty(), "{args:?}: {stderr}");
    }
}

// guards: `chaos run > /dev/full` panicked and lost the reports (issue 15)
#[test]
fn a_full_stdout_is_one_warning_and_the_reports_are_written() {
    let out = common::fresh_path("dev-full");
    let output = common::chaos_command()
        .args([
            "run",
            "scenarios/lost-response-keyed.toml",
            "--target",
            "fresh-key",
            "--seeds",
            "3",
            "--out",
            out.to_str().unwrap(),
        ])
        .stdout(File::options().write(true).open("/dev/full").unwrap())
        .output()
        .unwrap();
    let (_, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr
            .matches("warning: stdout could not be written")
            .count(),
        1,
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_reports_in(&out);
    std::fs::remove_dir_all(&out).unwrap();
}
