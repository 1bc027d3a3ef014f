//! Issue 13, item 7: first contact with a user's own service. `chaos
//! init-target` writes a target file that parses; `chaos probe` walks one
//! call of each kind in seconds and says what the target did, with a hint
//! where the target file, not the target, is what is wrong.

mod common;

fn probe(target: &str) -> (Option<i32>, String, String) {
    let output = common::chaos(&["probe", "--target", target]);
    let (stdout, stderr) = common::text(&output);
    (output.status.code(), stdout, stderr)
}

#[test]
fn a_correct_target_probes_green() {
    let target = common::repo_root().join("targets/ledger/target.toml");
    let (code, stdout, stderr) = probe(target.to_str().unwrap());
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    for step in [
        "a first call",
        "an identical retry",
        "a changed payload",
        "a revoked caller",
    ] {
        assert!(
            stdout.contains(&format!("ok   {step}")),
            "{step}:\n{stdout}"
        );
    }
    assert!(
        stdout.contains("dispatched 1 time(s) to the provider (ledger-"),
        "{stdout}"
    );
}

#[test]
fn a_weakness_probes_red_with_what_to_fix() {
    let target = common::repo_root().join("targets/python-replay-first/target.toml");
    let (code, stdout, _) = probe(target.to_str().unwrap());
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stdout.contains("FAIL a revoked caller"), "{stdout}");
    assert!(stdout.contains("HTTP 200 read as replayed"), "{stdout}");
    assert!(
        stdout.contains("hint: it served a caller whose token was revoked")
            // It measures the service's speed (issue 26 item 8); this one
            // is fast, so no [agent] budget is suggested.
            && stdout.contains("\nslowest answer: ")
            && !stdout.contains("budget is too short"),
        "{stdout}"
    );
}

/// A status the target file does not map is the mapping's fault, and the
/// hint names the line to write; with it written, the probe is green.
#[test]
fn an_unmapped_status_gets_the_target_file_line_that_fixes_it() {
    let fixture = common::repo_root().join("harness/tests/fixtures/bare-status");
    let (code, stdout, _) = probe(fixture.join("target.toml").to_str().unwrap());
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stdout.contains("FAIL a changed payload"), "{stdout}");
    assert!(stdout.contains("HTTP 409 read as pending"), "{stdout}");
    assert!(
        stdout.contains("add to the target file: [status] 409 = \"conflict\""),
        "the hint names the line:\n{stdout}"
    );
    let dir = common::temp_dir("probe-mapped");
    let mapped = dir.join("mapped.target.toml");
    std::fs::write(
        &mapped,
        format!(
            "name = \"bare-status-mapped\"\ncommand = [\"python3\", \"server.py\"]\nworkdir = \"{}\"\n[status]\n409 = \"conflict\"\n",
            fixture.display()
        ),
    )
    .unwrap();
    let (code, stdout, _) = probe(mapped.to_str().unwrap());
    assert_eq!(code, Some(0), "{stdout}");
}

#[test]
fn a_simulated_target_is_not_probed() {
    let (code, _, stderr) = probe("ledger");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("probe a live one"), "{stderr}");
}

#[test]
fn init_target_writes_a_file_that_parses_and_never_overwrites() {
    let dir = common::temp_dir("init-target");
    std::fs::write(
        dir.join("package.json"),
        r#"{"name":"reminders","scripts":{"start":"node server.js"}}"#,
    )
    .unwrap();
    let output = common::chaos(&["init-target", dir.to_str().unwrap()]);
    let (stdout, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("suggested by package.json"), "{stdout}");
    let written = dir.join("target.toml");
    let list = common::chaos(&["list", "--targets", dir.parent().unwrap().to_str().unwrap()]);
    let (listed, list_err) = common::text(&list);
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        listed.contains(&name),
        "the written file parses:\n{listed}\n{list_err}"
    );
    assert!(std::fs::read_to_string(&written)
        .unwrap()
        .contains("command = [\"npm\", \"start\", \"--silent\"]"));
    let again = common::chaos(&["init-target", dir.to_str().unwrap()]);
    let (_, stderr) = common::text(&again);
    assert_eq!(again.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--force"), "{stderr}");
}

/// A service that has never heard of chaos, at its own API through its
/// target file's mapping, its mail sent to chaos's SMTP provider: the probe
/// walks it with a blind provider (a mail server deduplicates nothing).
#[test]
fn a_service_at_its_own_api_probes_through_its_mapping() {
    let target = common::repo_root().join("examples/reminder-mail/target.toml");
    let (code, stdout, stderr) = probe(target.to_str().unwrap());
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("ok   a revoked caller"), "{stdout}");
}
