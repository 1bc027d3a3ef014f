//! Issue 27: the harness keeps its own house. Hostile scenario text never
//! reaches a command, reports never replace what is not a regular file,
//! bodies are bounded, secrets are masked, and `init-target` never writes
//! through a symlink.

mod common;

use std::path::{Path, PathBuf};

/// The authorization lab's first scenario with its `[fixture]` `field`
/// set to `value`, written into `dir`.
fn lab_scenario_with(dir: &Path, field: &str, value: &str) -> PathBuf {
    let original = common::repo_root().join("scenarios/authorization/1-read-owned-invoice.toml");
    let text = std::fs::read_to_string(original).unwrap();
    let quoted = toml::Value::String(value.to_owned()).to_string();
    let text = text.replacen(
        &format!(
            "\n{field} = \"{}\"\n",
            if field == "actor" { "alex" } else { "north" }
        ),
        &format!("\n{field} = {quoted}\n"),
        1,
    );
    assert!(text.contains(&quoted), "the field was replaced");
    let path = dir.join(format!("hostile-{field}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_hostile_fixture_actor_or_tenant_is_refused_at_parse_time() {
    let dir = common::temp_dir("house-hostile-fixture");
    let hostile = [
        ("actor", "a', 'b', 'c'); DROP TABLE victim; --"),
        ("actor", "$(touch /tmp/chaos-pwned)"),
        ("tenant", "north' OR '1'='1"),
        ("tenant", "{token}"),
    ];
    for (field, value) in hostile {
        let path = lab_scenario_with(&dir, field, value);
        let output = common::chaos(&["run", path.to_str().unwrap(), "--seeds", "1"]);
        let (stdout, stderr) = common::text(&output);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{field} = {value:?}\n{stdout}\n{stderr}"
        );
        let line = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .position(|line| line.starts_with(&format!("{field} = ")))
            .unwrap()
            + 1;
        let at = format!("{}:{line}:", path.display());
        assert!(stderr.contains(&at), "names {at}: {stderr}");
        assert!(stderr.contains(&format!("fixture.{field}")), "{stderr}");
        assert!(
            stderr.contains("letters, digits"),
            "says the alphabet: {stderr}"
        );
    }
}

/// `chaos run` of one quick passing cell, with `extra` flags.
fn quick_run(out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "run",
        "scenarios/lost-response-keyed.toml",
        "--target",
        "ledger",
        "--seeds",
        "2",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend(extra);
    common::chaos(&args)
}

#[test]
fn junit_to_a_fifo_streams_and_to_a_device_or_a_link_is_refused() {
    use std::os::unix::fs::FileTypeExt;
    let dir = common::temp_dir("house-junit-destinations");
    let out = dir.join("out");

    let fifo = dir.join("junit.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    let output = quick_run(&out, &["--junit", fifo.to_str().unwrap()]);
    if !reader.is_finished() {
        // chaos never opened it: let the reader end, and fail below.
        drop(std::fs::OpenOptions::new().write(true).open(&fifo));
    }
    let streamed = String::from_utf8(reader.join().unwrap()).unwrap();
    let (stdout, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        streamed.starts_with("<?xml"),
        "the reader got the XML: {streamed:?}"
    );
    assert!(streamed.contains("<testsuites"), "{streamed}");
    let still = std::fs::symlink_metadata(&fifo).unwrap().file_type();
    assert!(still.is_fifo(), "the FIFO is still a FIFO");

    let output = quick_run(&out, &["--junit", "-"]);
    let (stdout, _) = common::text(&output);
    assert_eq!(output.status.code(), Some(0));
    assert!(stdout.contains("<testsuites"), "`-` is stdout: {stdout}");

    // `/dev/stdout`, or a link to `/proc/self/fd/1`, is chaos's own stdout:
    // written through, never replaced by a file.
    let to_stdout = dir.join("to-stdout.xml");
    std::os::unix::fs::symlink("/proc/self/fd/1", &to_stdout).unwrap();
    for stream in [Path::new("/dev/stdout"), to_stdout.as_path()] {
        let output = quick_run(&out, &["--junit", stream.to_str().unwrap()]);
        let (stdout, stderr) = common::text(&output);
        assert_eq!(output.status.code(), Some(0), "{stream:?}: {stderr}");
        assert!(stdout.contains("<testsuites"), "{stream:?}: {stdout}");
    }
    assert!(std::fs::symlink_metadata(&to_stdout)
        .unwrap()
        .file_type()
        .is_symlink());

    let output = quick_run(&out, &["--junit", "/dev/null"]);
    let (stdout, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(2), "{stdout}{stderr}");
    assert!(stderr.contains("/dev/null: it is a device"), "{stderr}");
    assert!(stderr.contains("choose another --junit"), "{stderr}");
    assert!(!stdout.contains("exit 0"), "refused before any trial ran");

    let elsewhere = dir.join("elsewhere.xml");
    let link = dir.join("link.xml");
    std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
    let output = quick_run(&out, &["--junit", link.to_str().unwrap()]);
    let (_, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("symbolic link"), "{stderr}");
    assert!(!elsewhere.exists(), "nothing was written through the link");

    // A report inside --out that is a link is refused the same way.
    std::fs::create_dir_all(&out).unwrap();
    let _ = std::fs::remove_file(out.join("report.json"));
    std::os::unix::fs::symlink(&elsewhere, out.join("report.json")).unwrap();
    let output = quick_run(&out, &[]);
    let (_, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("report.json: it is a symbolic link"),
        "{stderr}"
    );
    assert!(!elsewhere.exists(), "nothing was written through the link");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The peak resident memory, in KiB, of the children this test process has
/// waited for (chaos, and what chaos waited for): Linux's `ru_maxrss`.
fn children_peak_rss_kib() -> i64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut usage: nix::libc::rusage = unsafe { std::mem::zeroed() };
    let done = unsafe { nix::libc::getrusage(nix::libc::RUSAGE_CHILDREN, &mut usage) };
    assert_eq!(done, 0);
    usage.ru_maxrss
}

#[test]
fn an_endless_body_is_cut_at_1_mib_and_chaos_stays_small() {
    let dir = common::temp_dir("house-endless-body");
    let fixtures = common::repo_root().join("harness/tests/fixtures/endless-body");

    let target = fixtures.join("target.toml");
    let (code, stdout, stderr, report) = common::run_live(
        &dir,
        &["scenarios/lost-response-keyed.toml"],
        &target,
        "1",
        &[],
    );
    // The target never reached its provider: judged, it fails on that; each
    // of its answers ended `too-large`, unread past 1 MiB.
    assert!(matches!(code, Some(1 | 3)), "{stdout}\n{stderr}");
    let text = report.to_string();
    assert!(text.contains("\"failure\":\"too-large\""), "{text}");

    let output = common::chaos(&["probe", "--target", target.to_str().unwrap()]);
    let (stdout, stderr) = common::text(&output);
    assert!(
        format!("{stdout}{stderr}").contains("too large"),
        "probe names it:\n{stdout}\n{stderr}"
    );

    let healthz = fixtures.join("endless-healthz.target.toml");
    let (code, stdout, stderr, _) = common::run_live(
        &dir,
        &["scenarios/lost-response-keyed.toml"],
        &healthz,
        "1",
        &[],
    );
    assert_ne!(code, Some(0), "{stdout}\n{stderr}");
    assert!(
        format!("{stdout}{stderr}").contains("too large"),
        "the health check says why:\n{stdout}\n{stderr}"
    );

    let peak_kib = children_peak_rss_kib();
    assert!(peak_kib < 100 * 1024, "peak RSS {peak_kib} KiB");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Everything one run wrote and printed: every report in `out`, the
/// `--junit` file, stdout and stderr.
fn everything_written(out: &Path, junit: &Path, output: &std::process::Output) -> String {
    let (stdout, stderr) = common::text(output);
    let mut all = format!("{stdout}\n{stderr}\n");
    for entry in std::fs::read_dir(out).unwrap().flatten() {
        all.push_str(&std::fs::read_to_string(entry.path()).unwrap_or_default());
    }
    all.push_str(&std::fs::read_to_string(junit).unwrap_or_default());
    all
}

fn run_all_reports(
    target: &Path,
    out: &Path,
    junit: &Path,
    extra: &[&str],
) -> std::process::Output {
    let mut args = vec![
        "run",
        "scenarios/revoked-permission.toml",
        "--target",
        target.to_str().unwrap(),
        "--seeds",
        "1",
        "--out",
        out.to_str().unwrap(),
        "--emit",
        "json,junit,markdown,html",
        "--junit",
        junit.to_str().unwrap(),
    ];
    args.extend(extra);
    common::chaos(&args)
}

#[test]
fn reports_of_a_target_that_prints_its_secrets_contain_none_of_them() {
    let dir = common::temp_dir("house-secrets");
    let (out, junit) = (dir.join("out"), dir.join("junit.xml"));
    let password = "s3cret-hunter2";
    let api_key = "sk_live_0123456789abcdef";
    let leaky = dir.join("leaky.target.toml");
    std::fs::write(
        &leaky,
        format!(
            r#"name = "leaky"
command = ["sh", "-c", "echo \"config: DATABASE_URL=$DATABASE_URL API_KEY=$API_KEY\" >&2; exit 3"]

[env]
DATABASE_URL = "postgresql://app:{password}@127.0.0.1:5432/test"
API_KEY = "{api_key}"
"#
        ),
    )
    .unwrap();
    let output = run_all_reports(&leaky, &out, &junit, &[]);
    let all = everything_written(&out, &junit, &output);
    assert_eq!(output.status.code(), Some(3), "{all}");
    assert!(
        all.contains("config: DATABASE_URL=*** API_KEY=***"),
        "the tail is kept, masked: {all}"
    );
    for secret in [password, api_key] {
        assert!(!all.contains(secret), "{secret} leaked: {all}");
    }
    let output = run_all_reports(&leaky, &out, &junit, &["--include-payloads"]);
    let all = everything_written(&out, &junit, &output);
    assert!(
        all.contains(password),
        "--include-payloads keeps them: {all}"
    );

    // A failing [authority] command that prints the token it was given.
    let workdir = common::repo_root().join("targets/python-replay-first");
    let tattler = dir.join("tattler.target.toml");
    std::fs::write(
        &tattler,
        format!(
            r#"name = "tattler"
workdir = "{}"
command = ["python3", "server.py"]

[env]
PYTHONUNBUFFERED = "1"

[authority]
grant = ["sh", "-c", "echo \"no such caller: $1\" >&2; exit 1", "sh", "{{token}}"]
revoke = ["true"]
"#,
            workdir.display()
        ),
    )
    .unwrap();
    let output = run_all_reports(&tattler, &out, &junit, &[]);
    let all = everything_written(&out, &junit, &output);
    assert_eq!(output.status.code(), Some(3), "{all}");
    assert!(all.contains("no such caller: ***"), "{all}");
    assert!(
        all.contains("\"sh\" {token}") || all.contains("sh {token}"),
        "quoted as written: {all}"
    );
    assert!(
        !all.contains("no such caller: tok-"),
        "the token leaked: {all}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A target that starts a `setsid` daemon (a process in a session of its
/// own, out of the target's process group) and writes its pid to `pid_file`,
/// then serves as python-replay-first.
fn daemonizing_target(dir: &Path, pid_file: &Path) -> PathBuf {
    let workdir = common::repo_root().join("targets/python-replay-first");
    let path = dir.join("daemonizing.target.toml");
    std::fs::write(
        &path,
        format!(
            r#"name = "daemonizing"
workdir = "{}"
command = ["sh", "-c", "setsid sleep 300 & echo $! > {}; exec python3 server.py"]

[env]
PYTHONUNBUFFERED = "1"
"#,
            workdir.display(),
            pid_file.display()
        ),
    )
    .unwrap();
    path
}

/// The pid in `file`, once it is written (within 10 s).
fn pid_in(file: &Path) -> i32 {
    for _ in 0..1000 {
        if let Some(pid) = std::fs::read_to_string(file)
            .ok()
            .and_then(|text| text.trim().parse().ok())
        {
            return pid;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("{} was never written", file.display());
}

fn gone_within_a_second(pid: i32) -> bool {
    (0..100).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(10));
        !common::alive(pid)
    })
}

#[test]
fn a_setsid_daemon_started_by_a_target_is_gone_after_a_normal_end_and_after_a_sigkill_of_chaos() {
    let dir = common::temp_dir("house-daemon");
    let pid_file = dir.join("daemon.pid");
    let target = daemonizing_target(&dir, &pid_file);
    let run = |out: &str| {
        let mut command = common::chaos_command();
        command.args([
            "run",
            "scenarios/lost-response-keyed.toml",
            "--target",
            target.to_str().unwrap(),
            "--seeds",
            "1",
            "--out",
            dir.join(out).to_str().unwrap(),
        ]);
        command
    };

    // A normal end: the daemon is killed, and chaos says it outlived.
    let output = run("out-normal").output().unwrap();
    let (stdout, stderr) = common::text(&output);
    let daemon = pid_in(&pid_file);
    assert!(
        gone_within_a_second(daemon),
        "the daemon {daemon} survived a normal end\n{stdout}\n{stderr}"
    );
    assert!(
        stderr.contains("outlived its process group and were killed"),
        "{stderr}"
    );

    // A SIGKILL of chaos: the next chaos start kills it, and removes the
    // dead run's state folder.
    std::fs::remove_file(&pid_file).unwrap();
    let mut killed = run("out-killed")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let daemon = pid_in(&pid_file);
    let chaos_pid = killed.id();
    killed.kill().unwrap();
    killed.wait().unwrap();
    assert!(
        common::alive(daemon),
        "the daemon runs on until chaos next starts"
    );
    let folders = |pid: u32| -> Vec<PathBuf> {
        std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| {
                path.file_name()
                    .and_then(|name| name.to_str())
                    .is_some_and(|name| name.starts_with(&format!("chaos-live-{pid}-")))
            })
            .collect()
    };
    assert!(
        !folders(chaos_pid).is_empty(),
        "the killed run left its state folder"
    );
    let output = run("out-next").output().unwrap();
    let (_, stderr) = common::text(&output);
    assert!(
        gone_within_a_second(daemon),
        "the next start killed the daemon {daemon}\n{stderr}"
    );
    assert!(
        stderr.contains("left running by an earlier chaos run"),
        "{stderr}"
    );
    assert!(
        folders(chaos_pid).is_empty(),
        "the dead run's state folder was removed"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
