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

/// Issue 26 item 3: a target whose lost provider calls are retried in the
/// background after it answered (a stock SDK's habit) does that work during
/// a later trial on a reused process. The effect is counted against the
/// trial it belongs to, as a `late-effect` warning, and never as an
/// `unattributed-effect` of the trial it arrived in (which every later cell
/// showed before).
#[test]
fn work_that_outlives_its_trial_is_its_own_trials_late_effect_not_the_next_trials() {
    let dir = common::temp_dir("late-work");
    let target =
        common::repo_root().join("targets/python-replay-first/background-retry.target.toml");
    let scenarios = [
        "scenarios/lost-response-keyed-reset.toml",
        "scenarios/changed-payload.toml",
    ];
    let (code, stdout, stderr, report) = common::run_live(&dir, &scenarios, &target, "4", &[]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    // The late work really happened: the provider of a later trial saw it.
    assert!(
        stderr.contains("late effect(s) of an earlier trial arrived during a later one"),
        "no late effect arrived, nothing was tested: {stderr}"
    );
    let cells = report["cells"].as_array().unwrap();
    for cell in cells {
        assert_eq!(cell["verdict"], "pass", "{cell}");
        let checks = cell["checks"].as_array().unwrap();
        assert!(
            checks
                .iter()
                .all(|check| check["check"] != "unattributed-effect"),
            "a late effect was judged the later trial's: {cell}"
        );
    }
    let lost = &cells[0];
    assert_eq!(lost["scenario"], "lost-response-keyed-reset");
    let warning = (lost["warnings"].as_array().unwrap().iter())
        .find(|warning| warning["check"] == "late-effect")
        .unwrap_or_else(|| panic!("no late-effect warning on its own trial's cell: {lost}"));
    let message = warning["message"].as_str().unwrap();
    let seed = warning["first_seed"].as_u64().unwrap();
    assert!(
        message.starts_with(&format!(
            "late effect of trial 'lost-response-keyed-reset' seed {seed}, arrived during trial '"
        )) && message
            .ends_with("the process kept working after answering; set fresh-process = true"),
        "{message}"
    );
    assert!(
        warning["rerun"]
            .as_str()
            .unwrap()
            .contains(&format!("--seed {seed}")),
        "{warning}"
    );
    // Only the lost responses leave work behind: changed-payload has none.
    assert!(
        cells[1]["warnings"].as_array().unwrap().is_empty(),
        "{}",
        cells[1]
    );
    common::assert_valid_report(&report);
}

/// A process whose last trial still has a request open at the provider (an
/// answer held past the trial that its SDK, patient for 80 s, still waits
/// for) is replaced, not handed the next trial, and the end-of-run line says
/// so; the example without that patience gave up on the answer within its
/// trial, and its process serves the next one.
#[test]
fn a_process_still_waiting_on_the_provider_is_replaced_and_said_so() {
    let dir = common::temp_dir("still-working");
    let scenario = dir.join("answer-ten-seconds-late.toml");
    std::fs::write(
        &scenario,
        "test = \"lost-response\"\ndescription = \"the provider commits and answers 10 s late\"\ninvariant = \"a late answer adds no effect\"\nboundary = \"accepted-request\"\n\n[provider]\nprofile = \"keyed\"\nretention = \"24h\"\n\n[[call]]\noperation = \"reminder\"\nattempts = 3\n\n[[fault]]\nkind = \"delay\"\nhop = \"provider-to-target\"\nnth = 1\nby = \"10s\"\n\n[expect]\neffects-per-operation = 1\n",
    )
    .unwrap();
    let scenario = scenario.to_str().unwrap();
    let patient =
        common::repo_root().join("targets/python-replay-first/background-retry.target.toml");
    let (code, stdout, stderr, _) = common::run_live(&dir, &[scenario], &patient, "2", &[]);
    assert!(code.is_some(), "{stdout}{stderr}");
    assert!(
        stderr.contains("target 'python-background-retry': 2 trial(s) on 2 process start(s)")
            && stderr.contains("; 2 process(es) not kept for a next trial: a request of their trial was still open at the provider"),
        "{stderr}"
    );

    let impatient = python_target(&dir, "impatient", "");
    let (code, stdout, stderr, _) = common::run_live(&dir, &[scenario], &impatient, "2", &[]);
    assert!(code.is_some(), "{stdout}{stderr}");
    assert!(
        stderr.contains("target 'impatient': 2 trial(s) on 1 process start(s)")
            && !stderr.contains("not kept"),
        "{stderr}"
    );
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

/// The port chaos tells a target is only free when chaos checked it:
/// another program can take it before the target binds (a CI run's
/// `mcp-ledger` exited with `Address already in use`). Here, at the first
/// start, the test itself takes the port (the target writes which, and
/// waits), and the target then fails to bind and exits. chaos sees that its
/// port is held by another program, says so, and starts the target again
/// on a new port; the trial runs there, and its fault acts. (With no retry,
/// the same run is exit 3, `exited before it was ready`.)
#[test]
fn a_port_taken_before_the_target_binds_it_is_replaced_and_the_trial_runs() {
    let dir = common::temp_dir("port-lost");
    let server = common::repo_root().join("targets/python-replay-first/server.py");
    std::fs::write(
        dir.join("launcher.py"),
        format!(
            "import os, socket, sys, time\n\
if not os.path.exists('port'):\n    \
host, port = os.environ['CHAOS_LISTEN_ADDR'].rsplit(':', 1)\n    \
open('port', 'w').write(port)\n    \
while not os.path.exists('squatting'):\n        time.sleep(0.01)\n    \
socket.socket().bind((host, int(port)))\n\
os.execvp(sys.executable, [sys.executable, {server:?}])\n",
            server = server.to_str().unwrap()
        ),
    )
    .unwrap();
    let target = dir.join("lost.target.toml");
    std::fs::write(
        &target,
        "name = \"lost\"\ncommand = [\"python3\", \"launcher.py\"]\n[env]\nPYTHONUNBUFFERED = \"1\"\n",
    )
    .unwrap();
    // The other program: this test, holding the port until the run is over.
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let squatter = {
        let dir = dir.clone();
        std::thread::spawn(move || {
            let port = loop {
                if let Ok(port) = std::fs::read_to_string(dir.join("port")) {
                    if let Ok(port) = port.trim().parse::<u16>() {
                        break port;
                    }
                }
                if finished.try_recv().is_ok() {
                    return None;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            };
            let listener = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
            std::fs::write(dir.join("squatting"), "").unwrap();
            let _ = finished.recv();
            drop(listener);
            Some(port)
        })
    };
    let (code, stdout, stderr, report) = common::run_live(
        &dir,
        &["scenarios/lost-response-keyed.toml"],
        &target,
        "1",
        &[],
    );
    let _ = done.send(());
    let taken = squatter.join().unwrap();
    let taken = taken.unwrap_or_else(|| panic!("the target never wrote its port: {stderr}"));
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let said = stderr
        .lines()
        .find(|line| line.contains("another program took"))
        .unwrap_or_else(|| panic!("chaos says it moved the target: {stderr}"));
    assert!(
        said.contains(&format!("took 127.0.0.1:{taken} before the target could listen there; starting it again on 127.0.0.1:")),
        "{said}"
    );
    assert!(!said.ends_with(&format!(":{taken}")), "{said}");
    let cell = &report["cells"][0];
    assert_eq!(cell["verdict"], "pass", "{cell}");
    assert_eq!(cell["seeds_run"], 1, "{cell}");
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
