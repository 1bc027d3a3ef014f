//! Live at library speed (issue 14, items 2 and 3): one target process
//! serves the trials it may, `parallel = N` runs trials side by side on
//! processes of their own, `fresh-process = true` and scenarios that kill
//! the target still get a process each, and a target that never gets ready
//! costs one `ready-timeout`, not one per cell. Verdicts do not depend on
//! any of it.

mod common;

use std::path::{Path, PathBuf};

/// A target file for the Python example target in `dir`, with `extra` lines
/// (e.g. `parallel = 2`) after its command.
fn python_target(dir: &Path, name: &str, extra: &str) -> PathBuf {
    let workdir = common::repo_root().join("targets/python-replay-first");
    let path = dir.join(format!("{name}.target.toml"));
    std::fs::write(
        &path,
        format!(
            "name = \"{name}\"\ncommand = [\"python3\", \"server.py\"]\nworkdir = \"{}\"\n{extra}\n[retention]\nperiod = \"7days\"\nafter = \"new-operation\"\n",
            workdir.display()
        ),
    )
    .unwrap();
    path
}

/// (scenario, verdict, seeds failed) of every cell.
fn verdicts(report: &serde_json::Value) -> Vec<(String, String, u64)> {
    report["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cell| {
            (
                cell["scenario"].as_str().unwrap().to_owned(),
                cell["verdict"].as_str().unwrap().to_owned(),
                cell["seeds_failed"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn one_process_serves_a_cells_trials_and_the_next_cells_unless_told_otherwise() {
    let dir = common::temp_dir("reuse");
    let scenarios = [
        "scenarios/changed-payload.toml",
        "scenarios/revoked-permission.toml",
    ];
    let reused = python_target(&dir, "reused", "");
    let fresh = python_target(&dir, "fresh", "fresh-process = true");

    let (code, stdout, stderr, reused_report) =
        common::run_live(&dir, &scenarios, &reused, "3", &[]);
    // revoked-permission catches the example's documented weakness.
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains("target 'reused': 6 trial(s) on 1 process start(s)"),
        "both cells' trials on one process: {stderr}"
    );

    let (code, stdout, stderr, fresh_report) = common::run_live(&dir, &scenarios, &fresh, "3", &[]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains("target 'fresh': 6 trial(s) on 6 process start(s)"),
        "{stderr}"
    );
    assert_eq!(verdicts(&reused_report), verdicts(&fresh_report));
    common::assert_valid_report(&reused_report);
}

#[test]
fn a_scenario_that_kills_the_target_gets_a_process_of_its_own() {
    let dir = common::temp_dir("reuse-crash");
    let target = python_target(&dir, "crashed", "");
    let (code, stdout, stderr, report) = common::run_live(
        &dir,
        &[
            "scenarios/changed-payload.toml",
            "scenarios/worker-restart.toml",
        ],
        &target,
        "2",
        &[],
    );
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    // changed-payload: one process for both trials, handed on to nobody:
    // each worker-restart trial starts its own and restarts it once.
    assert!(
        stderr.contains("target 'crashed': 4 trial(s) on 5 process start(s)"),
        "{stderr}"
    );
    assert!(verdicts(&report)
        .iter()
        .all(|(_, verdict, _)| verdict == "pass"));
}

#[test]
fn parallel_trials_each_run_on_a_process_of_their_own_with_the_same_verdicts() {
    let dir = common::temp_dir("parallel");
    // Scenarios whose provider contract is the same: the target's
    // environment is, so a process may serve both.
    let scenarios = [
        "scenarios/changed-payload.toml",
        "scenarios/revoked-permission.toml",
    ];
    let one = python_target(&dir, "one-at-a-time", "");
    let two = python_target(&dir, "two-at-a-time", "parallel = 2");
    let (_, _, stderr, sequential) = common::run_live(&dir, &scenarios, &one, "4", &[]);
    assert!(
        stderr.contains("target 'one-at-a-time': 8 trial(s) on 1 process start(s)"),
        "{stderr}"
    );
    let (code, stdout, stderr, parallel) = common::run_live(&dir, &scenarios, &two, "4", &[]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    // Two threads, each keeping the process it started for every trial it
    // takes.
    assert!(
        stderr.contains("target 'two-at-a-time': 8 trial(s) on 2 process start(s)"),
        "{stderr}"
    );
    assert_eq!(verdicts(&sequential), verdicts(&parallel));
    common::assert_valid_report(&parallel);
}

#[test]
fn a_target_that_never_gets_ready_costs_one_timeout_and_says_so_once() {
    let dir = common::temp_dir("never-ready-once");
    let target = dir.join("hangs.target.toml");
    std::fs::write(
        &target,
        "name = \"hangs\"\ncommand = [\"sleep\", \"30\"]\nready-timeout = \"300ms\"\n",
    )
    .unwrap();
    let scenarios = [
        "scenarios/changed-payload.toml",
        "scenarios/lost-response-keyed.toml",
        "scenarios/revoked-permission.toml",
    ];
    let (code, stdout, stderr, report) = common::run_live(&dir, &scenarios, &target, "2", &[]);
    assert_eq!(code, Some(3), "{stdout}{stderr}");
    assert_eq!(
        stdout.matches("did not answer GET /healthz").count(),
        1,
        "one timeout, quoted once: {stdout}"
    );
    assert_eq!(
        stderr
            .matches("target 'hangs' never became ready; its remaining cells are not run")
            .count(),
        1,
        "{stderr}"
    );
    let cells = report["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 3);
    for cell in &cells[1..] {
        assert_eq!(cell["verdict"], "unknown", "{cell}");
        assert!(
            cell["reason"]
                .as_str()
                .unwrap()
                .contains("not run: target 'hangs' never became ready in this run (first at scenario 'changed-payload'"),
            "{cell}"
        );
    }

    // Asked to, it is tried in every cell.
    let (code, stdout, _, _) = common::run_live(&dir, &scenarios, &target, "2", &["--keep-trying"]);
    assert_eq!(code, Some(3));
    assert_eq!(
        stdout.matches("did not answer GET /healthz").count(),
        3,
        "{stdout}"
    );
}

/// `chaos bench --live` times the live suite both ways in one process and
/// refuses to call it faster if anything it measured changed.
#[test]
fn bench_live_times_both_ways_and_compares_the_verdicts() {
    let output = common::chaos(&[
        "bench",
        "--live",
        "python-replay-first",
        "--rounds",
        "1",
        "--trials",
        "1",
    ]);
    let (stdout, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("15 scenario(s) x 1 trial(s), 1 round(s) each")
            && stdout.contains("a process per trial, one at a time")
            && stdout.contains("as the target file says (reuse, parallel = 8)")
            && stdout.contains("verdicts, failing seeds and effects: identical in every round"),
        "{stdout}"
    );

    let simulated = common::chaos(&["bench", "--live", "ledger"]);
    let (_, stderr) = common::text(&simulated);
    assert_eq!(simulated.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("'ledger' is simulated"), "{stderr}");
}

/// A `/healthz` answered on the target's port by a process outside its
/// process group is another program's, not the target's: the trial must
/// not test it. (Two chaos runs side by side once handed one port to two
/// targets, and a trial talked to another library's process.) The stray
/// server here is the target's own child in a session of its own, which
/// ends itself after a few seconds.
#[test]
fn a_port_another_program_answers_on_is_refused_not_tested() {
    let dir = common::temp_dir("port-taken");
    let stray = "import http.server, os, threading\n\
host, port = os.environ['CHAOS_LISTEN_ADDR'].rsplit(':', 1)\n\
class Healthy(http.server.BaseHTTPRequestHandler):\n    \
def do_GET(self):\n        self.send_response(200)\n        self.end_headers()\n    \
def log_message(self, *args):\n        pass\n\
threading.Timer(5, os._exit, [0]).start()\n\
http.server.HTTPServer((host, int(port)), Healthy).serve_forever()\n";
    std::fs::write(dir.join("stray.py"), stray).unwrap();
    std::fs::write(
        dir.join("launcher.py"),
        "import subprocess, sys, time\nsubprocess.Popen([sys.executable, 'stray.py'], start_new_session=True)\ntime.sleep(30)\n",
    )
    .unwrap();
    let target = dir.join("taken.target.toml");
    std::fs::write(
        &target,
        "name = \"taken\"\ncommand = [\"python3\", \"launcher.py\"]\nready-timeout = \"3s\"\n",
    )
    .unwrap();
    let (code, stdout, stderr, _) =
        common::run_live(&dir, &["scenarios/changed-payload.toml"], &target, "1", &[]);
    assert_eq!(code, Some(3), "{stdout}{stderr}");
    assert!(
        stdout.contains("another program holds that port"),
        "{stdout}{stderr}"
    );
}
