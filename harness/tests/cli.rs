//! The `chaos` command as users and CI scripts see it: what it prints first,
//! its exit codes, its rerun commands, and its messages for bad input.

mod common;

use std::path::Path;
use std::process::{Command, Output};

fn chaos(args: &[&str], out: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_chaos"))
        .args(args)
        .arg("--out")
        .arg(out)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .output()
        .expect("chaos runs")
}

fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("chaos-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn a_passing_run_exits_0_and_prints_the_seeds_first() {
    let out = temp_dir("pass");
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
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.starts_with("chaos: seeds 0..=19 (20 per cell)"),
        "{stdout}"
    );
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    let cell = &report["cells"][0];
    assert_eq!(cell["verdict"], "pass");
    assert_eq!(cell["seeds_run"], 20);
    assert_eq!(cell["seeds_failed"], 0);
    assert!(cell["first_failing_seed"].is_null());
}

#[test]
fn a_failing_run_exits_1_and_its_rerun_command_replays_the_failure() {
    let out = temp_dir("fail");
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
    let (stdout, _) = text(&output);
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
    let cell = &report["cells"][0];
    assert_eq!(cell["verdict"], "fail");
    assert_eq!(cell["first_failing_seed"], 40);
    assert_eq!(cell["rerun"], rerun_line);
    let failure = &cell["failures"][0];
    assert_eq!(failure["operations"][0]["effects"], 2);

    // Replay it: the same failure, the same reason.
    let args: Vec<&str> = rerun_line.split_whitespace().skip(1).collect();
    let replay_out = temp_dir("replay");
    let replay = chaos(&args, &replay_out);
    let (replay_stdout, _) = text(&replay);
    assert_eq!(replay.status.code(), Some(1));
    assert!(
        replay_stdout.starts_with("chaos: seed 40;"),
        "{replay_stdout}"
    );
    let replayed: serde_json::Value =
        serde_json::from_slice(&std::fs::read(replay_out.join("report.json")).unwrap()).unwrap();
    assert_eq!(replayed["cells"][0]["reason"], cell["reason"]);
    assert_eq!(replayed["cells"][0]["failures"][0], cell["failures"][0]);
}

#[test]
fn a_malformed_scenario_exits_2_naming_file_line_and_choices() {
    let dir = temp_dir("malformed");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.toml");
    std::fs::write(
        &path,
        "test = \"lost-response\"\ndescription = \"x\"\n[provider]\nprofile = \"keyed\"\n[[call]]\noperation = \"a\"\n[[fault]]\nkind = \"crsh\"\nnth = 1\n",
    )
    .unwrap();
    let out = dir.join("out");
    let output = chaos(&["run", path.to_str().unwrap()], &out);
    let (stdout, stderr) = text(&output);
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
    let out = temp_dir("unknown-target");
    let output = chaos(
        &["run", "scenarios/changed-payload.toml", "--target", "ledgr"],
        &out,
    );
    let (_, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr.contains("unknown target 'ledgr'. Choose from: fresh-key, args-hash, ledger"),
        "{stderr}"
    );
}

#[test]
fn a_missing_scenario_file_exits_2() {
    let out = temp_dir("missing");
    let output = chaos(&["run", "scenarios/no-such-scenario.toml"], &out);
    let (_, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr.contains("no-such-scenario.toml: failed to read the scenario file"),
        "{stderr}"
    );
}

#[test]
fn conflicting_seed_flags_are_a_usage_error() {
    let out = temp_dir("usage");
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
    let (stdout, _) = text(&output);
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
