//! The `chaos` command as users and CI scripts see it: what it prints first,
//! its exit codes, its rerun commands, and its messages for bad input.

mod common;

use common::chaos_out as chaos;

use std::path::Path;
use std::process::Command;

#[test]
fn a_passing_run_exits_0_and_prints_the_seeds_first() {
    let out = common::fresh_path("pass");
    let output = chaos(
        &[
            "run",
            "scenarios/lost-response-keyed.toml",
            "--target",
            "ledger",
            "--seeds",
            "20",
        ],
        &out,
    );
    let (stdout, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.starts_with("chaos: seeds 0..=19 (20 per cell)"),
        "{stdout}"
    );
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    common::assert_valid_report(&report);
    let cell = &report["cells"][0];
    assert_eq!(cell["verdict"], "pass");
    assert_eq!(cell["seeds_run"], 20);
    assert_eq!(cell["seeds_failed"], 0);
    assert!(cell["first_failing_seed"].is_null());
}

#[test]
fn a_failing_run_exits_1_and_its_rerun_command_replays_the_failure() {
    let out = common::fresh_path("fail");
    let output = chaos(
        &[
            "run",
            "scenarios/worker-restart.toml",
            "--target",
            "fresh-key",
            "--seeds",
            "5",
            "--first-seed",
            "40",
        ],
        &out,
    );
    let (stdout, _) = common::text(&output);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    let rerun_line = stdout
        .lines()
        .find_map(|line| line.trim().strip_prefix("rerun: "))
        .expect("a rerun command is printed");
    assert_eq!(
        rerun_line,
        "chaos run scenarios/worker-restart.toml --target fresh-key --seed 40"
    );

    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    common::assert_valid_report(&report);
    let cell = &report["cells"][0];
    assert_eq!(cell["verdict"], "fail");
    assert_eq!(cell["first_failing_seed"], 40);
    assert_eq!(cell["rerun"], rerun_line);
    let failure = &cell["failures"][0];
    assert_eq!(failure["operations"][0]["effects"], 2);

    // Replay it: the same failure, the same reason.
    let args: Vec<&str> = rerun_line.split_whitespace().skip(1).collect();
    let replay_out = common::fresh_path("replay");
    let replay = chaos(&args, &replay_out);
    let (replay_stdout, _) = common::text(&replay);
    assert_eq!(replay.status.code(), Some(1));
    assert!(
        replay_stdout.starts_with("chaos: seed 40;"),
        "{replay_stdout}"
    );
    let replayed: serde_json::Value =
        serde_json::from_slice(&std::fs::read(replay_out.join("report.json")).unwrap()).unwrap();
    common::assert_valid_report(&replayed);
    assert_eq!(replayed["cells"][0]["reason"], cell["reason"]);
    assert_eq!(replayed["cells"][0]["failures"][0], cell["failures"][0]);
}

#[test]
fn a_malformed_scenario_exits_2_naming_file_line_and_choices() {
    let dir = common::fresh_path("malformed");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.toml");
    std::fs::write(
        &path,
        "test = \"lost-response\"\ndescription = \"x\"\n[provider]\nprofile = \"keyed\"\n[[call]]\noperation = \"a\"\n[[fault]]\nkind = \"crsh\"\nnth = 1\n",
    )
    .unwrap();
    let out = dir.join("out");
    let output = chaos(&["run", path.to_str().unwrap()], &out);
    let (stdout, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(2), "{stdout}{stderr}");
    assert!(stderr.contains("bad.toml:8:"), "{stderr}");
    assert!(
        stderr.contains("crsh") && stderr.contains("crash-target"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!out.exists(), "nothing is written for bad input");
}

#[test]
fn an_unknown_target_exits_2_with_the_choices() {
    let out = common::fresh_path("unknown-target");
    let output = chaos(
        &["run", "scenarios/changed-payload.toml", "--target", "ledgr"],
        &out,
    );
    let (_, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr.contains("unknown target 'ledgr'. Choose from: fresh-key, args-hash, ledger"),
        "{stderr}"
    );
}

#[test]
fn a_missing_scenario_file_exits_2() {
    let out = common::fresh_path("missing");
    let output = chaos(&["run", "scenarios/no-such-scenario.toml"], &out);
    let (_, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr.contains("no-such-scenario.toml: failed to read the scenario file"),
        "{stderr}"
    );
}

#[test]
fn conflicting_seed_flags_are_a_usage_error() {
    let out = common::fresh_path("usage");
    let output = chaos(
        &[
            "run",
            "scenarios/changed-payload.toml",
            "--seed",
            "1",
            "--seeds",
            "3",
        ],
        &out,
    );
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn list_shows_targets_and_every_scenario() {
    let output = Command::new(env!("CARGO_BIN_EXE_chaos"))
        .args(["list", "--scenarios"])
        .arg(common::scenarios_dir())
        .output()
        .unwrap();
    let (stdout, _) = common::text(&output);
    assert_eq!(output.status.code(), Some(0));
    for target in ["fresh-key", "args-hash", "ledger"] {
        assert!(stdout.contains(target), "{stdout}");
    }
    for scenario in common::all_scenarios() {
        assert!(
            stdout.contains(&scenario.name),
            "{} missing: {stdout}",
            scenario.name
        );
    }
}

/// Issue #4, items 2 and 6: `--format json` keeps stdout for the report alone,
/// `--junit FILE` writes the JUnit report there too, and a run writes every
/// format into `--out`.
#[test]
fn format_json_prints_only_the_report_on_stdout() {
    let out = common::fresh_path("format-json");
    let junit = out.with_extension("xml");
    let output = chaos(
        &[
            "run",
            "scenarios/changed-payload.toml",
            "--target",
            "args-hash",
            "--seeds",
            "3",
            "--format",
            "json",
            "--junit",
            junit.to_str().unwrap(),
        ],
        &out,
    );
    let (stdout, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let printed: serde_json::Value =
        serde_json::from_str(&stdout).expect("stdout is exactly one JSON document");
    common::assert_valid_report(&printed);
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(printed, written);
    assert!(stderr.starts_with("chaos: seeds 0..=2"), "{stderr}");
    assert!(
        stderr.contains("rerun: chaos run scenarios/changed-payload.toml"),
        "{stderr}"
    );
    for file in ["report.json", "junit.xml", "summary.md", "report.html"] {
        assert!(out.join(file).is_file(), "{file} missing from --out");
    }
    assert_eq!(
        std::fs::read(&junit).unwrap(),
        std::fs::read(out.join("junit.xml")).unwrap()
    );
}

#[test]
fn emit_chooses_which_reports_are_written() {
    let out = common::fresh_path("emit");
    let output = chaos(
        &[
            "run",
            "scenarios/changed-payload.toml",
            "--target",
            "ledger",
            "--seeds",
            "2",
            "--emit",
            "json,markdown",
        ],
        &out,
    );
    assert_eq!(output.status.code(), Some(0));
    let mut files: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files, ["report.json", "summary.md"]);

    let bad = chaos(
        &[
            "run",
            "scenarios/changed-payload.toml",
            "--emit",
            "json,pdf",
        ],
        &common::fresh_path("emit-bad"),
    );
    let (_, stderr) = common::text(&bad);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr.contains("unknown report format 'pdf'. Choose from: json, junit, markdown, html"),
        "{stderr}"
    );
}

#[test]
fn a_bad_partition_is_a_usage_error_that_shows_the_form() {
    for partition in ["5/4", "0/3", "2", "a/b"] {
        let output = chaos(
            &[
                "run",
                "scenarios/changed-payload.toml",
                "--partition",
                partition,
            ],
            &common::fresh_path("partition"),
        );
        let (_, stderr) = common::text(&output);
        assert_eq!(output.status.code(), Some(2), "{partition}: {stderr}");
        assert!(stderr.contains("write K/N with 1 <= K <= N"), "{stderr}");
    }
}

/// Issue #4, item 6: no progress bar (nor any control character) when stderr
/// is not a terminal, as in CI logs.
#[test]
fn no_progress_bar_when_stderr_is_not_a_terminal() {
    let out = common::fresh_path("no-bar");
    let output = chaos(
        &["run", "scenarios/concurrent-attempts.toml", "--seeds", "30"],
        &out,
    );
    let (stdout, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(1));
    for stream in [&stdout, &stderr] {
        assert!(!stream.contains('\r'), "{stream}");
        assert!(!stream.contains('\u{1b}'), "{stream}");
        assert!(!stream.contains("trials,"), "{stream}");
    }
}

/// Issue 14, item 4: off a terminal (a CI log) a sweep prints a line per
/// cell as it finishes, nextest style: the verdict right-aligned, the time its
/// trials took, `(done/cells)`, scenario x target, effects and seeds; lines
/// come in the order cells finish (the counter counts up whatever the order).
#[test]
fn a_ci_log_gets_a_line_per_finished_cell() {
    let out = common::fresh_path("ci-lines");
    let output = chaos(
        &[
            "run",
            "scenarios/lost-response-keyed.toml",
            "scenarios/changed-payload.toml",
            "--target",
            "fresh-key",
            "--target",
            "ledger",
            "--seeds",
            "4",
        ],
        &out,
    );
    let (stdout, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(1), "{stdout}{stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|line| line.contains("] (")).collect();
    assert_eq!(lines.len(), 4, "a line per cell: {stderr}");
    for (index, line) in lines.iter().enumerate() {
        assert!(line.contains(&format!("] ({}/4) ", index + 1)), "{line}");
        // nextest's columns: the verdict in 12, then `[   0.004s]`.
        assert_eq!(&line[12..14], " [", "{line}");
        assert!(line[14..23].trim_start().ends_with('s'), "{line}");
    }
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    for cell in report["cells"].as_array().unwrap() {
        let name = format!(
            "{} x {}: ",
            cell["scenario"].as_str().unwrap(),
            cell["target"].as_str().unwrap()
        );
        let mine: Vec<&&str> = lines.iter().filter(|line| line.contains(&name)).collect();
        assert_eq!(mine.len(), 1, "{name}: {stderr}");
        let verdict = match cell["verdict"].as_str().unwrap() {
            "pass" => "PASS",
            "fail" => "FAIL",
            _ => "UNKNOWN",
        };
        // `FAIL (STUCK)` when only liveness failed.
        assert!(
            mine[0][..12].trim_start().starts_with(verdict),
            "{}",
            mine[0]
        );
        let not_passed =
            cell["seeds_failed"].as_u64().unwrap() + cell["seeds_unknown"].as_u64().unwrap();
        assert!(
            mine[0].ends_with(&format!(" · {not_passed}/4 seeds")),
            "{}",
            mine[0]
        );
        assert!(mine[0].contains(&format!(
            ": effects {}/{}",
            cell["effects_observed_max"], cell["effects_expected"]
        )));
    }
    // The lines are progress, not the report: stdout holds the table as before.
    assert!(!stdout.contains("] (1/4)"), "{stdout}");
}

/// Issue #4, item 6: on a terminal a sweep shows a progress bar, in colour
/// unless `NO_COLOR` is set. `script` (util-linux) gives the run a terminal.
#[test]
fn a_terminal_gets_a_progress_bar_and_no_color_is_respected() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipping: `script` (util-linux) is not installed, so no terminal can be faked");
        return;
    }
    let run = |no_color: bool| {
        let out = common::fresh_path(if no_color { "tty-plain" } else { "tty-color" });
        let command = format!(
            "{} run scenarios/concurrent-attempts.toml --seeds 60 --out {}",
            env!("CARGO_BIN_EXE_chaos"),
            out.display()
        );
        let mut script = Command::new("script");
        script
            .args(["-qec", &command, "/dev/null"])
            .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."));
        if no_color {
            script.env("NO_COLOR", "1");
        } else {
            script.env_remove("NO_COLOR");
        }
        let output = script.output().expect("script runs");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let colored = run(false);
    assert!(
        colored.contains("trials,"),
        "no progress bar drawn: {colored}"
    );
    assert!(
        colored.contains("\u{1b}[3"),
        "no colour on a terminal: {colored}"
    );
    let plain = run(true);
    assert!(plain.contains("trials,"), "no progress bar drawn: {plain}");
    // The bar, not a log's line per cell.
    assert!(
        !plain.contains("] (1/"),
        "a line per cell on a terminal: {plain}"
    );
    assert!(
        !plain.contains("\u{1b}[3"),
        "NO_COLOR was set, yet colours were printed: {plain}"
    );
}

/// Issue #4, item 4: `chaos compare` exits 1 when a cell went from pass to
/// fail between two reports of one target, 0 when nothing regressed, and 2
/// for a file that is not a report.
#[test]
fn compare_exits_1_on_a_regression_and_0_without() {
    let dir = common::fresh_path("compare");
    let base = dir.join("base");
    let output = chaos(
        &[
            "run",
            "scenarios/revoked-permission.toml",
            "--target",
            "ledger",
            "--seeds",
            "2",
        ],
        &base,
    );
    assert_eq!(output.status.code(), Some(0));
    let base_report = base.join("report.json");
    let mut head: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&base_report).unwrap()).unwrap();
    head["cells"][0]["verdict"] = "fail".into();
    head["cells"][0]["reason"] = "disclosure: a receipt after revocation".into();
    let head_report = dir.join("head.json");
    std::fs::write(&head_report, head.to_string()).unwrap();
    let (base_arg, head_arg) = (base_report.to_str().unwrap(), head_report.to_str().unwrap());

    let same = common::chaos(&["compare", base_arg, base_arg]);
    let (stdout, _) = common::text(&same);
    assert_eq!(same.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("no changes between the reports"),
        "{stdout}"
    );

    let regressed = common::chaos(&["compare", base_arg, head_arg]);
    let (stdout, _) = common::text(&regressed);
    assert_eq!(regressed.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("REGRESSION revoked-permission x ledger: pass in"),
        "{stdout}"
    );
    assert!(stdout.contains("ledger @ "), "{stdout}");

    let as_json = common::chaos(&["compare", base_arg, head_arg, "--format", "json"]);
    let comparison: serde_json::Value =
        serde_json::from_slice(&as_json.stdout).expect("--format json prints JSON");
    assert_eq!(as_json.status.code(), Some(1));
    assert_eq!(comparison["changes"][0]["kind"], "regression");

    let not_a_report = common::chaos(&["compare", base_arg, "Cargo.toml"]);
    let (_, stderr) = common::text(&not_a_report);
    assert_eq!(not_a_report.status.code(), Some(2));
    assert!(
        stderr.contains("failed to read the report Cargo.toml: it is not JSON"),
        "{stderr}"
    );
}

// Issue 28 item 3: every finding has a page that says how to fix it, as
// rustc's --explain does.
#[test]
fn chaos_explain_prints_a_check_s_page_and_names_the_choices_for_a_typo() {
    let output = common::chaos(&["explain", "duplicate-effect"]);
    let (stdout, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stdout.starts_with("# `duplicate-effect`\n"), "{stdout}");
    for part in [
        "Fix: claim the key durably",
        "## An example",
        "## How to fix the layer",
    ] {
        assert!(stdout.contains(part), "{part}: {stdout}");
    }
    // Pasted from a finding, colon and all.
    let pasted = common::chaos(&["explain", "Disclosure:"]);
    assert!(common::text(&pasted).0.starts_with("# `disclosure`"));

    let typo = common::chaos(&["explain", "duplicate"]);
    let (_, stderr) = common::text(&typo);
    assert_eq!(typo.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("Did you mean duplicate-effect?"),
        "{stderr}"
    );
    assert!(stderr.contains("race-absorbed-by-provider"), "{stderr}");

    let listed = common::chaos(&["explain"]);
    let (stdout, _) = common::text(&listed);
    assert_eq!(
        stdout.lines().count(),
        1 + chaos::Check::ALL.len(),
        "{stdout}"
    );
}
