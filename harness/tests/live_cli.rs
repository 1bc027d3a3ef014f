//! `chaos run --target FILE` as users and CI see it: what a misbehaving target
//! costs (a clear message quoting its stderr, `unknown`, exit 3, and the run
//! goes on), what a malformed target file says, and that no target process
//! outlives the run, Ctrl-C included. Guards issue #3, items 1, 2 and 6.

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

/// Pids of live processes whose environment holds `marker`.
fn processes_marked(marker: &str) -> Vec<u32> {
    let needle = format!("ORPHAN_MARKER={marker}");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|stat| {
                    stat.rsplit(')')
                        .next()
                        .unwrap_or("")
                        .trim_start()
                        .starts_with('Z')
                })
                .unwrap_or(true);
            !zombie
                && environ
                    .split(|byte| *byte == 0)
                    .any(|variable| variable == needle.as_bytes())
        })
        .collect()
}

/// Waits (bounded) until no process carries `marker`; returns the survivors.
fn survivors(marker: &str) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = processes_marked(marker);
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_target_that_never_gets_ready_or_exits_early_is_unknown_and_the_run_goes_on() {
    let dir = common::temp_dir("misbehaving");
    let marker = format!("never-ready-{}", std::process::id());
    std::fs::write(
        dir.join("hangs.target.toml"),
        format!(
            "name = \"hangs\"\ncommand = [\"sleep\", \"30\"]\nready-timeout = \"1s\"\n[env]\nORPHAN_MARKER = \"{marker}\"\n"
        ),
    )
    .unwrap();
    // A port already taken: this target insists on a port the test holds.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    std::fs::write(
        dir.join("dies.target.toml"),
        format!(
            "name = \"dies\"\ncommand = [\"python3\", \"-c\", \"import socket; socket.socket().bind(('127.0.0.1', {}))\"]\n",
            taken.local_addr().unwrap().port()
        ),
    )
    .unwrap();
    let out = dir.join("out");
    let output = common::chaos(&[
        "run",
        "scenarios/lost-response-keyed.toml",
        "scenarios/changed-payload.toml",
        "--target",
        dir.join("hangs.target.toml").to_str().unwrap(),
        "--target",
        dir.join("dies.target.toml").to_str().unwrap(),
        "--seeds",
        "3",
        "--out",
        out.to_str().unwrap(),
    ]);
    let (stdout, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(3), "{stdout}{stderr}");
    assert!(
        stdout.contains("did not answer GET /healthz") && stdout.contains("with 200 within 1s"),
        "{stdout}"
    );
    assert!(
        stdout.contains("exited before it was ready (exit status 1)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("| OSError: [Errno 98] Address already in use"),
        "the tail of stderr is quoted: {stdout}"
    );
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    let cells = report["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4, "every cell was tried: the run went on");
    for cell in cells {
        assert_eq!(cell["verdict"], "unknown", "{cell}");
        // The first seed showed the target cannot start; the other seeds of
        // the cell were not burnt on it, and none counts as run (issue 14).
        assert_eq!(cell["seeds_run"], 0, "{cell}");
        assert_eq!(cell["not_run"]["seeds"], 1, "{cell}");
    }
    assert_eq!(report["transport"], "live");
    // Nothing was observed, and the table does not pretend it was.
    assert!(
        stdout.contains("x hangs: not run: target 'hangs'"),
        "{stdout}"
    );
    assert!(!stdout.contains("effects 0/"), "{stdout}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(
        survivors(&marker),
        Vec::<u32>::new(),
        "a target process survived"
    );
    drop(taken);
}

#[test]
fn a_scenario_that_cannot_be_done_live_is_excluded_with_the_reason() {
    let dir = common::temp_dir("cannot");
    std::fs::write(
        dir.join("target.toml"),
        "name = \"fixed-retention\"\ncommand = [\"sleep\", \"30\"]\n[retention]\nperiod = \"7days\"\nafter = \"new-operation\"\nshorten = false\n",
    )
    .unwrap();
    let out = dir.join("out");
    let output = common::chaos(&[
        "run",
        "scenarios/expired-history-target.toml",
        "--target",
        dir.join("target.toml").to_str().unwrap(),
        "--seed",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    let (stdout, stderr) = common::text(&output);
    // Nothing else ran: nothing was tested.
    assert_eq!(output.status.code(), Some(3), "{stdout}{stderr}");
    assert!(
        stdout.contains("excluded: expired-history-target x fixed-retention: scenario 'expired-history-target' cannot be run live")
            && stdout.contains("which the target cannot shorten")
            && stdout.contains("nothing was tested"),
        "{stdout}"
    );
}

#[test]
fn a_malformed_target_file_exits_2_naming_file_line_and_choices() {
    let dir = common::temp_dir("malformed");
    let path = dir.join("target.toml");
    std::fs::write(
        &path,
        "name = \"x\"\ncommand = [\"python3\", \"server.py\"]\n[status]\n417 = \"conflcit\"\n",
    )
    .unwrap();
    let output = common::chaos(&[
        "run",
        "scenarios/changed-payload.toml",
        "--target",
        path.to_str().unwrap(),
        "--out",
        dir.join("out").to_str().unwrap(),
    ]);
    let (stdout, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(2), "{stdout}{stderr}");
    assert!(stderr.contains("target.toml:4:"), "{stderr}");
    assert!(
        stderr.contains("conflcit") && stderr.contains("conflict"),
        "{stderr}"
    );
    assert!(
        !dir.join("out").exists(),
        "nothing is written for bad input"
    );
}

#[test]
fn list_shows_target_files_and_their_names_work_with_target() {
    let output = common::chaos(&["list"]);
    let (stdout, _) = common::text(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    for (name, transport) in [
        ("ledger", "sim"),
        ("file-ledger", "live"),
        ("postgres-ledger", "live"),
        ("redis-ledger", "live"),
        ("python-replay-first", "live"),
        ("postgres-ledger-check-then-insert", "live"),
        ("redis-ledger-provider-ttl", "live"),
    ] {
        assert!(
            stdout
                .lines()
                .any(|line| line.split_whitespace().take(2).eq([name, transport])),
            "{name} ({transport}) missing: {stdout}"
        );
    }
    // The tools the suite calls, with their arguments (issue 26 item 4).
    assert!(
        stdout.contains("tools these scenarios call")
            && stdout.contains("  send_reminder(amount_cents, invoice, message, recipient) in ")
            && stdout.contains("  charge_card("),
        "{stdout}"
    );
    let out = common::temp_dir("by-name").join("out");
    let output = common::chaos(&[
        "run",
        "scenarios/changed-payload.toml",
        "--target",
        "file-ledger",
        "--seeds",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    let (stdout, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}{stderr}");
}

/// Starts `chaos run` live against the Python target on
/// lost-response-agent-hop, which holds an answer for the agent's whole
/// timeout, and returns once the target has been up for 300 ms: alive,
/// busy and inside a real wait, for a signal to arrive then. The target's
/// processes carry a marker of their own (`processes_marked`).
fn live_run_holding_an_answer(
    name: &str,
    stdout: Stdio,
    stderr: Stdio,
) -> (std::path::PathBuf, String, std::process::Child) {
    let dir = common::temp_dir(name);
    let marker = format!("{name}-{}", std::process::id());
    let server = common::repo_root().join("targets/python-replay-first/server.py");
    std::fs::write(
        dir.join("target.toml"),
        format!(
            "name = \"py\"\ncommand = [\"python3\", \"{}\"]\n[env]\nORPHAN_MARKER = \"{marker}\"\n",
            server.display()
        ),
    )
    .unwrap();
    let child = common::chaos_command()
        .args([
            "run",
            "scenarios/lost-response-agent-hop.toml",
            "--target",
            dir.join("target.toml").to_str().unwrap(),
            "--seeds",
            "20",
            "--out",
            dir.join("out").to_str().unwrap(),
        ])
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while processes_marked(&marker).is_empty() {
        assert!(Instant::now() < deadline, "the target never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    (dir, marker, child)
}

#[test]
fn ctrl_c_mid_run_leaves_no_target_process_behind() {
    let (dir, marker, mut child) =
        live_run_holding_an_answer("sigint", Stdio::piped(), Stdio::piped());
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chaos did not stop within 20s of Ctrl-C");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let output = child.wait_with_output().unwrap();
    let (_, stderr) = common::text(&output);
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert!(
        !dir.join("out").join("report.json").exists(),
        "no half report"
    );
    assert_eq!(
        survivors(&marker),
        Vec::<u32>::new(),
        "a target process survived Ctrl-C"
    );
}

/// A target that is ready at once, listens where `BIND` says, and never
/// answers a tool call.
const SILENT_TARGET: &str = r#"
import os, time, http.server as h
port = int(os.environ["CHAOS_LISTEN_ADDR"].rsplit(":", 1)[1])
class Handler(h.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def do_POST(self):
        print("tool call received; never answering", file=os.sys.stderr, flush=True)
        time.sleep(60)
    def log_message(self, *args):
        pass
h.ThreadingHTTPServer((os.environ["BIND"], port), Handler).serve_forever()
"#;

#[test]
fn a_target_that_hangs_or_listens_beyond_loopback_is_unknown() {
    let dir = common::temp_dir("silent");
    let marker = format!("silent-{}", std::process::id());
    std::fs::write(dir.join("silent.py"), SILENT_TARGET).unwrap();
    for (name, bind) in [("hangs", "127.0.0.1"), ("exposed", "0.0.0.0")] {
        std::fs::write(
            dir.join(format!("{name}.target.toml")),
            format!(
                "name = \"{name}\"\ncommand = [\"python3\", \"silent.py\"]\n[env]\nBIND = \"{bind}\"\nORPHAN_MARKER = \"{marker}\"\n"
            ),
        )
        .unwrap();
    }
    // One call, one attempt: a hang costs one agent timeout, not a budget.
    std::fs::write(
        dir.join("one-attempt.toml"),
        "test = \"lost-response\"\ndescription = \"one attempt\"\n[provider]\nprofile = \"keyed\"\n[[call]]\noperation = \"a\"\nattempts = 1\n",
    )
    .unwrap();
    let out = dir.join("out");
    let output = common::chaos(&[
        "run",
        dir.join("one-attempt.toml").to_str().unwrap(),
        "--target",
        dir.join("hangs.target.toml").to_str().unwrap(),
        "--target",
        dir.join("exposed.target.toml").to_str().unwrap(),
        "--seeds",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    let (stdout, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(3), "{stdout}{stderr}");
    assert!(
        stdout.contains("UNKNOWN one-attempt x hangs")
            && stdout.contains("the target hangs: none of its 1 attempt(s) was answered")
            && stdout.contains("| tool call received; never answering"),
        "{stdout}"
    );
    assert!(
        stdout.contains("UNKNOWN one-attempt x exposed") && stdout.contains("beyond 127.0.0.1"),
        "{stdout}"
    );
    assert_eq!(
        survivors(&marker),
        Vec::<u32>::new(),
        "a target process survived"
    );
}

// guards: a SIGKILLed chaos left its live target running, holding its port
// and its database connections (issue 15)
#[test]
fn a_sigkilled_chaos_takes_its_target_with_it() {
    let (_dir, marker, mut child) =
        live_run_holding_an_answer("sigkill", Stdio::null(), Stdio::null());
    // SIGKILL: no handler and no guard of chaos runs; only the kernel can help.
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(
        survivors(&marker),
        Vec::<u32>::new(),
        "a target process outlived a SIGKILLed chaos"
    );
}

// guards: `[network]` latencies applied only in the simulator, and a live run
// said nothing of the field it ignored (issue 15)
#[test]
fn a_field_the_live_transport_ignores_is_a_warning_naming_it() {
    let dir = common::temp_dir("ignored-field");
    let scenario = dir.join("slow-network.toml");
    let text = std::fs::read_to_string(common::scenarios_dir().join("lost-response-keyed.toml"))
        .unwrap()
        + "\n[network]\nmin-latency = \"1ms\"\nmax-latency = \"50ms\"\n";
    std::fs::write(&scenario, text).unwrap();
    let output = common::chaos_command()
        .args([
            "run",
            scenario.to_str().unwrap(),
            "--target",
            "python-replay-first",
            "--seeds",
            "1",
            "--out",
            dir.join("out").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let (stdout, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stderr.contains("[network] min-latency = \"1ms\" and max-latency = \"50ms\" apply only in the simulator; live (python-replay-first)"),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

// guards: one SIGTERM (what a CI runner sends at its timeout) did not end a
// live run in 10 minutes (issue 15)
#[test]
fn one_sigterm_ends_a_live_run_within_a_second_and_leaves_no_target() {
    let (dir, marker, mut child) =
        live_run_holding_an_answer("sigterm-live", Stdio::null(), Stdio::piped());
    let sent = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if sent.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("chaos did not stop within 20 s of one SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let took = sent.elapsed();
    let output = child.wait_with_output().unwrap();
    let (_, stderr) = common::text(&output);
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(took <= Duration::from_secs(1), "stopping took {took:?}");
    assert!(stderr.contains("interrupted (SIGTERM)"), "{stderr}");
    assert!(!dir.join("out").exists(), "something was written");
    assert_eq!(
        survivors(&marker),
        Vec::<u32>::new(),
        "a target process survived SIGTERM"
    );
}

/// Issue 26 item 6: a pairing the target cannot play is decided once before
/// running: one line for it (not one per seed), no cell and no row in the
/// table, an entry in report.json's `excluded` and in summary.md; the table
/// keeps what ran. A run whose every pairing was excluded tested nothing:
/// exit 3.
#[test]
fn a_pairing_the_target_cannot_play_is_excluded_before_running_not_a_cell() {
    let dir = common::temp_dir("excluded");
    let target = dir.join("python.target.toml");
    std::fs::write(
        &target,
        format!(
            "name = \"python\"\ncommand = [\"python3\", \"server.py\"]\nworkdir = \"{}\"\n[retention]\nperiod = \"7days\"\nafter = \"new-operation\"\n",
            common::repo_root()
                .join("targets/python-replay-first")
                .display()
        ),
    )
    .unwrap();
    // No [effects] query: a database scenario cannot be judged against it.
    let (code, stdout, stderr, report) = common::run_live(
        &dir,
        &[
            "scenarios/database/database-changed-payload.toml",
            "scenarios/changed-payload.toml",
        ],
        &target,
        "3",
        &[],
    );
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let line = "excluded: database-changed-payload x python: scenario 'database-changed-payload' cannot be run live: it claims one database mutation per operation";
    assert_eq!(
        stdout.matches(line).count(),
        1,
        "one line, not one per seed: {stdout}"
    );
    assert!(
        !stdout.contains("│ database-changed-payload"),
        "the table is for what ran: {stdout}"
    );
    assert!(stdout.contains("changed-payload"), "{stdout}");
    let cells = report["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 1, "{report}");
    assert_eq!(cells[0]["scenario"], "changed-payload");
    assert_eq!(cells[0]["verdict"], "pass");
    let excluded = report["excluded"].as_array().unwrap();
    assert_eq!(excluded.len(), 1, "{report}");
    assert_eq!(excluded[0]["scenario"], "database-changed-payload");
    assert_eq!(excluded[0]["target"], "python");
    assert!(
        excluded[0]["reason"]
            .as_str()
            .unwrap()
            .contains("has no [effects] query"),
        "{report}"
    );
    common::assert_valid_report(&report);
    let markdown =
        std::fs::read_to_string(dir.join("out-python.target").join("summary.md")).unwrap();
    assert!(
        markdown.contains("### Excluded before running")
            && markdown.contains("- `database-changed-payload` × python: "),
        "{markdown}"
    );

    // Nothing it can play: nothing tested, exit 3, and no process started.
    let (code, stdout, stderr, report) = common::run_live(
        &dir,
        &["scenarios/database/database-changed-payload.toml"],
        &target,
        "3",
        &[],
    );
    assert_eq!(code, Some(3), "{stdout}{stderr}");
    assert!(
        stdout.contains("nothing was tested: every scenario was excluded for every target"),
        "{stdout}"
    );
    assert!(!stderr.contains("process start"), "{stderr}");
    assert!(report["cells"].as_array().unwrap().is_empty());
    common::assert_valid_report(&report);
}
