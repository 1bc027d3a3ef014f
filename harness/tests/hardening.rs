//! Issue 15: nothing a user does makes chaos panic, hang, orphan a process or
//! lose a report. Each test names the way out it guards.

mod common;

use std::fs::File;
use std::path::Path;
use std::process::{Output, Stdio};

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

// guards: `chaos run --format json 2>&1 | head -c 100` closes stderr too,
// where the summary lines go (issue 15)
#[test]
fn a_closed_stderr_changes_nothing_either() {
    let out = common::fresh_path("epipe-stderr");
    let (reader, writer) = nix::unistd::pipe().expect("a pipe");
    drop(reader);
    let stderr = writer.try_clone().unwrap();
    let status = common::chaos_command()
        .args([
            "run",
            "scenarios/lost-response-keyed.toml",
            "--target",
            "fresh-key",
            "--seeds",
            "3",
            "--format",
            "json",
            "--out",
            out.to_str().unwrap(),
        ])
        .stdout(Stdio::from(writer))
        .stderr(Stdio::from(stderr))
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(1));
    assert_reports_in(&out);
    std::fs::remove_dir_all(&out).unwrap();
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

/// `chaos args...`, and how long it took.
fn timed(args: &[&str]) -> (Output, std::time::Duration) {
    let started = std::time::Instant::now();
    let output = common::chaos_command()
        .args(args)
        .output()
        .expect("chaos runs");
    (output, started.elapsed())
}

// guards: `--out` naming an existing file, or a place chaos may not write
// into, was found only after the whole sweep had run (issue 15)
#[test]
fn an_unwritable_out_is_refused_before_any_trial_runs() {
    let dir = common::temp_dir("unwritable");
    let file = dir.join("a-file");
    std::fs::write(&file, "x").unwrap();
    let file = file.to_str().unwrap();
    let under_file = format!("{file}/out");
    // A million seeds would take minutes: failing fast proves nothing ran.
    let sweep = [
        "run",
        "scenarios/lost-response-keyed.toml",
        "--target",
        "runtime-ledger",
        "--seeds",
        "1000000",
    ];
    for (extra, expected) in [
        (
            vec!["--out", file],
            "it is a file, not a folder; choose another --out",
        ),
        (
            vec!["--out", &under_file],
            "is a file, not a folder; choose another --out",
        ),
        (
            vec!["--out", "/proc/chaos-cannot-be-here"],
            "choose another --out",
        ),
        (
            vec!["--junit", dir.to_str().unwrap()],
            "it is a folder, not a file; choose another --junit",
        ),
    ] {
        let args: Vec<&str> = sweep.iter().copied().chain(extra.iter().copied()).collect();
        let (output, took) = timed(&args);
        let (stdout, stderr) = common::text(&output);
        assert_eq!(output.status.code(), Some(2), "{extra:?}: {stdout}{stderr}");
        assert!(stderr.contains(expected), "{extra:?}: {stderr}");
        assert!(stdout.is_empty(), "{extra:?}: something ran: {stdout}");
        assert!(took.as_secs() < 10, "{extra:?} took {took:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

// guards: `--first-seed 18446744073709551615 --seeds 2` wrapped around to
// seed 0, and `--seeds` had no upper bound (issue 15)
#[test]
fn seed_arithmetic_is_checked() {
    let out = common::fresh_path("seeds");
    let out = out.to_str().unwrap();
    for (seeds, expected) in [
        (["--first-seed", "18446744073709551615", "--seeds", "2"], "runs past the last seed, 18446744073709551615; lower --first-seed to at most 18446744073709551614"),
        (["--first-seed", "0", "--seeds", "100000001"], "is more than the 100000000 one run may take per cell"),
    ] {
        let mut args = vec!["run", "scenarios/lost-response-keyed.toml", "--target", "ledger", "--out", out];
        args.extend(seeds);
        let (output, _) = timed(&args);
        let (_, stderr) = common::text(&output);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(expected), "{stderr}");
    }
    // The last seed itself is fine.
    let (output, _) = timed(&[
        "run",
        "scenarios/lost-response-keyed.toml",
        "--target",
        "ledger",
        "--first-seed",
        "18446744073709551615",
        "--seeds",
        "1",
        "--out",
        out,
    ]);
    let (stdout, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stdout.starts_with("chaos: seeds 18446744073709551615..=18446744073709551615"),
        "{stdout}"
    );
    std::fs::remove_dir_all(out).unwrap();
}

/// A scenario of `calls` calls, each retried through lost answers: a big
/// trial that takes a while to simulate.
fn big_scenario(dir: &Path, calls: usize) -> std::path::PathBuf {
    let mut text = String::from(
        "test = \"lost-response\"\ndescription = \"big\"\n[provider]\nprofile = \"keyed\"\nretention = \"24h\"\n",
    );
    for call in 0..calls {
        text.push_str(&format!("[[call]]\noperation = \"op{call}\"\n"));
    }
    text.push_str("[[fault]]\nkind = \"lose-response\"\nhop = \"target-to-agent\"\nnth = 1\nmode = \"reset\"\n");
    let path = dir.join("big.toml");
    std::fs::write(&path, text).unwrap();
    path
}

// guards: SIGTERM waited for every simulated trial in flight (10.6 s for a
// scenario of 20,000 calls), and said "Ctrl-C again" to a CI runner (issue 15)
#[test]
fn a_signal_stops_a_big_simulated_run_within_a_second() {
    let dir = common::temp_dir("sigterm");
    let scenario = big_scenario(&dir, 100);
    for (signal, named, again) in [
        (
            nix::sys::signal::Signal::SIGTERM,
            "SIGTERM",
            "SIGTERM again to quit now",
        ),
        (
            nix::sys::signal::Signal::SIGINT,
            "SIGINT",
            "Ctrl-C again to quit now",
        ),
    ] {
        let out = dir.join(format!("out-{named}"));
        let mut child = common::chaos_command()
            .args([
                "run",
                scenario.to_str().unwrap(),
                "scenarios/lost-response-keyed.toml",
                "--seeds",
                "100000",
                "--out",
                out.to_str().unwrap(),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The first line is printed once the trials are about to start.
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        std::io::BufRead::read_line(&mut stdout, &mut first).unwrap();
        assert!(first.starts_with("chaos: seeds 0..=99999"), "{first}");
        std::thread::sleep(std::time::Duration::from_millis(1500));
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before the signal"
        );
        let sent = std::time::Instant::now();
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).unwrap();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if sent.elapsed().as_secs() > 30 {
                let _ = child.kill();
                panic!("chaos did not stop within 30 s of {named}");
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        let took = sent.elapsed();
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
        assert_eq!(status.code(), Some(130), "{stderr}");
        assert!(took.as_millis() <= 1000, "{named}: stopping took {took:?}");
        assert!(stderr.contains(again), "{stderr}");
        assert!(
            stderr.contains(&format!("interrupted ({named}): nothing was written")),
            "{stderr}"
        );
        assert!(!out.exists(), "{named}: something was written");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

// guards: a scenario had no size bound (100,000 calls took 390 s to stop, a
// 10 MB file ran past 450 s), and the TOML messages did not say how to fix
// the input (issue 15)
#[test]
fn scenarios_are_bounded_and_their_errors_say_how_to_fix_them() {
    let dir = common::temp_dir("bounded");
    let big = big_scenario(&dir, 101);
    let huge = dir.join("huge.toml");
    std::fs::write(
        &huge,
        format!("description = \"{}\"\n", "x".repeat(300 * 1024)),
    )
    .unwrap();
    let duplicate = dir.join("duplicate.toml");
    std::fs::write(
        &duplicate,
        "test = \"lost-response\"\ndescription = \"d\"\ndescription = \"e\"\n",
    )
    .unwrap();
    let negative = dir.join("negative.toml");
    std::fs::write(
        &negative,
        "test = \"lost-response\"\ndescription = \"d\"\n[provider]\nprofile = -1\n",
    )
    .unwrap();
    for (path, expected) in [
        (&big, "at most 100 [[call]] tables, and this one has 101"),
        (&huge, "a scenario file may hold at most 256 KiB"),
        (&duplicate, "duplicate key `description`"),
        (&negative, "expected a name in quotes (a string), not `-1`"),
    ] {
        let (output, took) = timed(&["run", path.to_str().unwrap(), "--target", "ledger"]);
        let (_, stderr) = common::text(&output);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(expected), "{path:?}: {stderr}");
        assert!(took.as_secs() < 5, "{path:?} took {took:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

// guards: `--time-budget -1s` met clap's "unexpected argument '-1'" (issue 15)
#[test]
fn a_negative_duration_says_it_cannot_be_negative() {
    let (output, _) = timed(&["explore", "--target", "ledger", "--time-budget", "-1s"]);
    let (_, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("a duration cannot be negative: '-1s'"),
        "{stderr}"
    );
}

/// A scenario no target can finish, as a user wrote them for issue 15.
fn unfinishable(faults: &str, calls: &str) -> chaos::Scenario {
    let text = format!(
        "test = \"lost-response\"\ndescription = \"no honest end\"\n[provider]\nprofile = \"keyed\"\nretention = \"24h\"\n{calls}{faults}"
    );
    chaos::Scenario::parse(Path::new("scenarios/unfinishable.toml"), &text).unwrap()
}

// guards: a scenario no target could pass (one attempt whose answer is lost,
// then a clock jump) was accepted and its failure blamed on the target as
// `stuck` (issue 15)
#[test]
fn a_scenario_with_no_honest_end_is_judged_unknown_with_the_reason() {
    let one_call = "[[call]]\noperation = \"reminder\"\nattempts = 1\n";
    let retried = "[[call]]\noperation = \"reminder\"\nattempts = 1\n[[call]]\noperation = \"reminder\"\nattempts = 4\n";
    let jump = "[[fault]]\nkind = \"advance-clock\"\nby = \"25h\"\nafter-call = 1\n";
    let cases = [
        (
            unfinishable(&format!("[[fault]]\nkind = \"lose-response\"\nhop = \"target-to-agent\"\nnth = 1\nmode = \"reset\"\n{jump}"), one_call),
            "lost the answer to its last attempt, and it had no retry left",
        ),
        (
            unfinishable(&format!("[[fault]]\nkind = \"lose-response\"\nhop = \"provider-to-target\"\nnth = 1\nmode = \"hold\"\n{jump}"), one_call),
            "past the provider's 1day retention",
        ),
        (
            unfinishable(&format!("[[fault]]\nkind = \"lose-response\"\nhop = \"provider-to-target\"\nnth = 1\nmode = \"hold\"\n{jump}"), retried),
            "past the provider's 1day retention",
        ),
    ];
    for target in ["runtime-ledger", "ledger"] {
        let target = chaos::find(target).unwrap();
        for (scenario, why) in &cases {
            for seed in 0..5 {
                let (verdict, _) = common::trial(scenario, &target, seed);
                assert_eq!(
                    verdict.status,
                    chaos::Status::Unknown,
                    "{why}: {:?}",
                    verdict.findings
                );
                assert!(
                    verdict
                        .findings
                        .iter()
                        .all(|finding| finding.check == chaos::Check::RunIncomplete),
                    "{:?}",
                    verdict.findings
                );
                assert!(
                    verdict
                        .findings
                        .iter()
                        .any(|finding| finding.message.contains(why)),
                    "{why}: {:?}",
                    verdict.findings
                );
            }
        }
    }
}

// guards: `--seeds -1` met clap's "unexpected argument '-1'", as durations did
#[test]
fn a_negative_seed_says_it_cannot_be_negative() {
    for flag in ["--seeds", "--first-seed", "--seed"] {
        let (output, _) = timed(&["run", "scenarios/lost-response-keyed.toml", flag, "-1"]);
        let (_, stderr) = common::text(&output);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("it cannot be negative: '-1'"),
            "{flag}: {stderr}"
        );
    }
}
