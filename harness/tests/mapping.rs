//! A service with an API shape of its own (harness/tests/mapped/server.py:
//! `POST /v1/invoices/{invoice}/reminders`, `X-Request-Key`, answers
//! `{"status":"sent","id":...}`), run by `chaos run --target` through a
//! target file's `[request]`/`[response]` mapping, and the live agent's
//! `[agent]` retry budget against a layer whose stale-claim window is
//! seconds long. Guards issue 13, items 1 and 5.

mod common;

use std::path::{Path, PathBuf};

fn mapped_dir() -> PathBuf {
    common::repo_root().join("harness/tests/mapped")
}

/// The checked-in mapped target file, edited by `edit`, in `dir`; it runs
/// the checked-in server.
fn target_file(dir: &Path, name: &str, edit: impl Fn(String) -> String) -> PathBuf {
    let text = std::fs::read_to_string(mapped_dir().join("target.toml")).unwrap();
    let text = text.replace(
        "command = [\"python3\", \"server.py\"]",
        &format!(
            "command = [\"python3\", \"{}\"]",
            mapped_dir().join("server.py").display()
        ),
    );
    let path = dir.join(format!("{name}.target.toml"));
    std::fs::write(&path, edit(text)).unwrap();
    path
}

fn run(args: &[&str], out: &Path) -> (Option<i32>, String, serde_json::Value) {
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--out", out.to_str().unwrap()]);
    let output = common::chaos(&all);
    let (stdout, stderr) = common::text(&output);
    let report = std::fs::read(out.join("report.json"))
        .map(|bytes| serde_json::from_slice(&bytes).unwrap())
        .unwrap_or(serde_json::Value::Null);
    (output.status.code(), format!("{stdout}{stderr}"), report)
}

fn cell<'a>(report: &'a serde_json::Value, scenario: &str) -> &'a serde_json::Value {
    report["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|cell| cell["scenario"] == scenario)
        .unwrap_or_else(|| panic!("no cell for {scenario}: {report}"))
}

#[test]
fn a_service_with_its_own_shape_is_judged_through_its_mapping() {
    let out = common::fresh_path("mapped-pass");
    let (code, printed, report) = run(
        &[
            "scenarios/lost-response-keyed.toml",
            "scenarios/changed-payload.toml",
            "--target",
            "harness/tests/mapped/target.toml",
            "--seeds",
            "2",
        ],
        &out,
    );
    assert_eq!(code, Some(0), "{printed}");
    common::assert_valid_report(&report);
    for scenario in ["lost-response-keyed", "changed-payload"] {
        let cell = cell(&report, scenario);
        assert_eq!(cell["verdict"], "pass", "{scenario}: {cell}");
        assert_eq!(cell["seeds_run"], 2, "{scenario}: {cell}");
    }
    // The budget in force is in the report, and in its markdown.
    let agent = &report["targets"][0]["agent"];
    assert_eq!(agent["retry_for"], serde_json::Value::Null, "{agent}");
    assert_eq!(agent["backoff"], "20ms..60ms", "{agent}");
    assert_eq!(agent["timeout"], "2s 500ms", "{agent}");
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(
        summary.contains(
            "The agent's retry budget against mapped-reminders: each call's attempts, no retry-for"
        ),
        "{summary}"
    );
}

#[test]
fn an_answer_the_mapping_cannot_read_is_reported_as_such_not_as_an_outcome() {
    let dir = common::temp_dir("mapped-unread");
    // "sent" is no longer mapped: every success is unreadable.
    let path = target_file(&dir, "unread", |text| {
        text.replace("sent = \"applied\"\n", "")
    });
    let (code, printed, report) = run(
        &[
            "scenarios/changed-payload.toml",
            "--target",
            path.to_str().unwrap(),
            "--seed",
            "1",
        ],
        &dir.join("out"),
    );
    assert_eq!(code, Some(3), "{printed}");
    let cell = cell(&report, "changed-payload");
    assert_eq!(cell["verdict"], "unknown", "{cell}");
    let reason = cell["reason"].as_str().unwrap();
    assert!(
        reason.contains("not judged on finishing it: attempt")
            && reason.contains("the mapping could not read this answer (status 20")
            && reason.contains("the value \"sent\" at /status is not in [response.outcomes] (it names \"in_progress\", \"key_reused\")"),
        "{reason}"
    );
}

#[test]
fn a_placeholder_no_argument_fills_is_refused_naming_it_the_call_and_the_arguments() {
    let dir = common::temp_dir("mapped-placeholder");
    let path = target_file(&dir, "placeholder", |text| {
        text.replace(
            "path = \"/v1/invoices/{invoice}/reminders\"",
            "path = \"/v1/customers/{customer}/invoices/{invoice}/reminders\"",
        )
    });
    let (code, printed, report) = run(
        &[
            "scenarios/changed-payload.toml",
            "--target",
            path.to_str().unwrap(),
            "--seed",
            "1",
        ],
        &dir.join("out"),
    );
    // Excluded before running, the only pairing: nothing was tested.
    assert_eq!(code, Some(3), "{printed}");
    assert!(report["cells"].as_array().unwrap().is_empty(), "{report}");
    let excluded = &report["excluded"][0];
    assert_eq!(excluded["scenario"], "changed-payload", "{report}");
    let reason = excluded["reason"].as_str().unwrap();
    assert!(
        reason.contains("target 'mapped-reminders' [request] uses {customer}, and call 1 (operation 'reminder', tool 'send_reminder') has no argument 'customer': its arguments are {amount_cents}, {invoice}, {message}, {recipient}, and every call has {tool}, {operation-id}, {token}"),
        "{reason}"
    );
}

/// Issue 26 item 4: a service that checks its caller's scope by a tool
/// name of its own refuses every call of the suite's `send_reminder` until
/// the target file maps it (`[request.tools]`); mapped, the authority grants
/// the service's name and the same scenario passes. The refusal is read as
/// `denied`, never taken for an effect.
#[test]
fn request_tools_give_the_suites_tool_the_services_own_name_at_the_authority() {
    let dir = common::temp_dir("mapped-tools");
    let renamed = |tools: &'static str| {
        move |text: String| format!("{text}\n[env]\nREMINDERS_TOOL = \"remind_customer\"\n{tools}")
    };
    let unmapped = target_file(&dir, "unmapped", renamed(""));
    let out = dir.join("unmapped");
    let (code, printed, report) = run(
        &[
            "scenarios/lost-response-keyed.toml",
            "--target",
            unmapped.to_str().unwrap(),
            "--seeds",
            "1",
        ],
        &out,
    );
    assert_ne!(code, Some(0), "{printed}");
    let refused = cell(&report, "lost-response-keyed");
    assert_eq!(refused["effects_observed_max"], 0, "{refused}");
    assert!(
        printed.contains("denied"),
        "the refusal is read as denied: {printed}"
    );

    let mapped = target_file(
        &dir,
        "mapped",
        renamed("\n[request.tools]\nsend_reminder = \"remind_customer\"\n"),
    );
    let out = dir.join("mapped");
    let (code, printed, report) = run(
        &[
            "scenarios/lost-response-keyed.toml",
            "--target",
            mapped.to_str().unwrap(),
            "--seeds",
            "1",
        ],
        &out,
    );
    assert_eq!(code, Some(0), "{printed}");
    let passed = cell(&report, "lost-response-keyed");
    assert_eq!(passed["verdict"], "pass", "{passed}");
    assert_eq!(passed["effects_observed_max"], 1, "{passed}");
}

#[test]
fn a_mapping_error_in_the_target_file_exits_2_naming_the_line_and_the_fix() {
    let dir = common::temp_dir("mapped-malformed");
    for (name, edit, says) in [
        (
            "pointer",
            ("outcome = \"/status\"", "outcome = \"status\""),
            "response.outcome 'status' is not a JSON pointer",
        ),
        (
            "place",
            (
                "operation-id = { header = \"X-Request-Key\" }",
                "operation-id = { header = \"X-Request-Key\", body = \"key\" }",
            ),
            "request.operation-id names one place",
        ),
        (
            "body",
            ("body = \"json\"", "body = \"xml\""),
            "unknown variant `xml`, expected `json` or `form`",
        ),
        (
            "outcome",
            ("in_progress = \"pending\"", "in_progress = \"waiting\""),
            "unknown variant `waiting`",
        ),
    ] {
        let path = target_file(&dir, name, |text| {
            assert!(text.contains(edit.0), "{name}: {}", edit.0);
            text.replace(edit.0, edit.1)
        });
        let output = common::chaos(&[
            "run",
            "scenarios/changed-payload.toml",
            "--target",
            path.to_str().unwrap(),
            "--out",
            dir.join("out").to_str().unwrap(),
        ]);
        let (stdout, stderr) = common::text(&output);
        assert_eq!(output.status.code(), Some(2), "{name}: {stdout}{stderr}");
        assert!(
            stderr.contains(&format!("{name}.target.toml:")),
            "{name}: {stderr}"
        );
        assert!(stderr.contains(says), "{name}: {stderr}");
    }
}

/// A scenario with one call of two attempts, expected to be applied.
fn two_attempts(dir: &Path) -> PathBuf {
    let path = dir.join("pending-window.toml");
    std::fs::write(
        &path,
        "test = \"lost-response\"\ndescription = \"a claim in flight for 1.5 s, answered pending with Retry-After: 1\"\n[provider]\nprofile = \"keyed\"\nretention = \"24h\"\n[[call]]\noperation = \"reminder\"\nattempts = 2\nexpect = [\"applied\"]\n[expect]\neffects-per-operation = 1\n",
    )
    .unwrap();
    path
}

/// Seconds between the requests the service logged.
fn gaps(log: &Path) -> Vec<f64> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let times: Vec<f64> = text
        .lines()
        .map(|line| line.split(' ').next().unwrap().parse().unwrap())
        .collect();
    times.windows(2).map(|pair| pair[1] - pair[0]).collect()
}

// guards: the live agent's budget was 20-60 ms backoffs over the call's
// attempts, so a layer whose stale-claim window is seconds long was judged
// stuck after half a second, and Retry-After was ignored (issue 13, item 5)
#[test]
fn retry_for_lets_the_agent_outwait_a_stale_claim_window_honouring_retry_after() {
    let dir = common::temp_dir("mapped-budget");
    let scenario = two_attempts(&dir);
    let with_env = |log: &Path, agent: &str| {
        let log = log.display().to_string();
        let agent = agent.to_owned();
        move |text: String| {
            format!(
                "{text}{agent}\n[env]\nREMINDERS_PENDING_MS = \"1500\"\nREQUEST_LOG = \"{log}\"\n"
            )
        }
    };

    let log = dir.join("default.log");
    let path = target_file(&dir, "default", with_env(&log, ""));
    let (code, printed, report) = run(
        &[
            scenario.to_str().unwrap(),
            "--target",
            path.to_str().unwrap(),
            "--seed",
            "1",
        ],
        &dir.join("default-out"),
    );
    assert_eq!(code, Some(1), "{printed}");
    let stuck = cell(&report, "pending-window");
    assert_eq!(stuck["liveness"], "fail", "{stuck}");
    assert!(
        stuck["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|check| check["check"] == "stuck"),
        "{stuck}"
    );
    assert!(
        stuck
            .to_string()
            .contains("never learned its outcome in 2 attempts (pending, pending)"),
        "{stuck}"
    );
    // Two attempts, the second a Retry-After (1 s) after the first, not a
    // 20-60 ms backoff.
    let waited = gaps(&log);
    assert_eq!(waited.len(), 1, "{waited:?}");
    assert!(waited[0] >= 0.95, "{waited:?}");

    let log = dir.join("budget.log");
    let path = target_file(
        &dir,
        "budget",
        with_env(&log, "[agent]\nretry-for = \"5s\"\n"),
    );
    let (code, printed, report) = run(
        &[
            scenario.to_str().unwrap(),
            "--target",
            path.to_str().unwrap(),
            "--seed",
            "1",
        ],
        &dir.join("budget-out"),
    );
    assert_eq!(code, Some(0), "{printed}");
    assert_eq!(cell(&report, "pending-window")["verdict"], "pass");
    assert_eq!(report["targets"][0]["agent"]["retry_for"], "5s");
    // Past its two attempts, a Retry-After apart each, until the window
    // closed and the third was applied.
    let waited = gaps(&log);
    assert_eq!(waited.len(), 2, "{waited:?}");
    assert!(
        waited.iter().all(|gap| *gap >= 0.95 && *gap < 3.0),
        "{waited:?}"
    );
}
