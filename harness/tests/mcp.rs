//! MCP servers under test (issue 23), live: chaos as the MCP client over
//! Streamable HTTP and over stdio, the reference MCP server
//! (`targets/mcp-ledger`) and the Python example on the official SDKs
//! (`examples/mcp-python`) as the targets, chaos's provider as the payment
//! API their tools charge.
//!
//! Done when the naive server (a new downstream key per `tools/call`, its
//! tools declared `idempotentHint: true`) fails the lost-response, worker
//! restart and re-plan scenarios with `duplicate-effect` and
//! `annotation-contradicted`, the correct one (the ledger behind `tools/call`)
//! passes them all, and every fault is shown to have acted; and bad input
//! (an unlisted tool, an `initialize` that never completes, an answer that
//! is not JSON-RPC, over either transport) is one clear message with its
//! documented exit code.

mod common;

use std::path::{Path, PathBuf};

use serde_json::Value;

const CORRECT: &str = "targets/mcp-ledger/target.toml";
const NAIVE: &str = "targets/mcp-ledger/naive.target.toml";
const STDIO_CORRECT: &str = "targets/mcp-ledger/stdio.target.toml";
const STDIO_NAIVE: &str = "targets/mcp-ledger/stdio-naive.target.toml";

/// The top-level scenarios of the three families: a lost answer, a
/// restarted worker, a re-plan. Admission decides which a target plays.
const SCENARIOS: [&str; 6] = [
    "scenarios/lost-response-agent-hop.toml",
    "scenarios/lost-response-keyed.toml",
    "scenarios/worker-restart.toml",
    "scenarios/replan-injected.toml",
    "scenarios/replan-stall.toml",
    "scenarios/replan-injected-crash-replay.toml",
];

fn fixture(name: &str) -> PathBuf {
    common::repo_root()
        .join("harness/tests/fixtures/mcp")
        .join(name)
}

/// `chaos run` of [`SCENARIOS`] against `target`, 2 seeds: its exit code,
/// output, report.json and the folder of its reports.
fn run(target: &str, out: &str) -> (Option<i32>, String, String, Value, PathBuf) {
    let dir = common::temp_dir(out);
    let target = common::repo_root().join(target);
    let (code, stdout, stderr, report) = common::run_live(&dir, &SCENARIOS, &target, "2", &[]);
    let reports = dir.join(format!(
        "out-{}",
        target.file_stem().unwrap().to_string_lossy()
    ));
    (code, stdout, stderr, report, reports)
}

fn cells(report: &Value) -> &Vec<Value> {
    report["cells"].as_array().expect("a report has cells")
}

fn checks(cell: &Value) -> Vec<&str> {
    (cell["checks"].as_array().into_iter().flatten())
        .filter_map(|check| check["check"].as_str())
        .collect()
}

/// Every declared fault of every cell acted on every seed run: a verdict
/// about a fault that never happened would prove nothing.
fn assert_faults_acted(report: &Value) {
    for cell in cells(report) {
        let seeds = cell["seeds_run"].as_u64().unwrap();
        assert!(seeds > 0, "{cell:#}");
        for fault in cell["faults"].as_array().unwrap() {
            assert_eq!(
                fault["seeds_acted"].as_u64(),
                Some(seeds),
                "{} x {}: {fault:#}",
                cell["scenario"],
                cell["target"]
            );
        }
    }
}

// guards: issue 23's done-when, the naive MCP server caught and the correct one passing
#[test]
fn the_naive_mcp_server_charges_again_and_contradicts_its_hint_the_correct_one_holds() {
    let (code, stdout, stderr, naive, _) = run(NAIVE, "mcp-naive");
    common::assert_valid_report(&naive);
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    assert_faults_acted(&naive);
    let ran: Vec<&str> = cells(&naive)
        .iter()
        .filter_map(|cell| cell["scenario"].as_str())
        .collect();
    for family in ["lost-response", "worker-restart", "replan"] {
        assert!(
            ran.iter().any(|name| name.starts_with(family)),
            "no {family} scenario was run: {ran:?}\n{stderr}"
        );
    }
    for cell in cells(&naive) {
        let scenario = cell["scenario"].as_str().unwrap();
        assert_eq!(cell["verdict"], "fail", "{scenario}: {cell:#}");
        let fired = checks(cell);
        assert!(fired.contains(&"duplicate-effect"), "{scenario}: {fired:?}");
        // The hint is about identical calls: a retry of the same tools/call
        // (a lost answer, a restart) contradicts it; a re-plan under a new
        // tool call does only where it sent the same arguments again.
        if scenario.starts_with("lost-response") || scenario.starts_with("worker-restart") {
            assert!(
                fired.contains(&"annotation-contradicted"),
                "{scenario}: {fired:?}"
            );
        }
        let declared = cell["declared_tools"].as_array().unwrap();
        assert!(
            declared
                .iter()
                .any(|tool| tool["idempotent"] == true && tool["read-only"] == false),
            "{scenario}: {declared:?}"
        );
    }
    assert!(
        stdout.contains("declared mcp-ledger-naive: MCP tool 'send_reminder' (called as send_reminder): readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: true"),
        "{stdout}"
    );
    assert!(stdout.contains("annotation-contradicted"), "{stdout}");
    // An answer held past the agent's timeout: chaos cancels the call,
    // MCP's own way, once per seed.
    let held = cells(&naive)
        .iter()
        .find(|cell| cell["scenario"] == "lost-response-agent-hop")
        .unwrap();
    assert_eq!(held["mcp_cancelled"].as_u64(), Some(2), "{held:#}");

    let (code, stdout, stderr, correct, reports) = run(CORRECT, "mcp-correct");
    common::assert_valid_report(&correct);
    assert_faults_acted(&correct);
    for cell in cells(&correct) {
        assert_eq!(
            cell["verdict"], "pass",
            "{}: {cell:#}\n{stderr}",
            cell["scenario"]
        );
    }
    assert_eq!(
        cells(&correct).len(),
        cells(&naive).len(),
        "the same scenarios were admitted for both"
    );
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let markdown = std::fs::read_to_string(reports.join("summary.md")).unwrap_or_default();
    assert!(
        markdown.contains("### MCP tools as their servers declare them"),
        "{markdown}"
    );
}

fn run_fixture(file: &str, scenario: &str) -> (Option<i32>, String) {
    let dir = common::temp_dir(&format!("mcp-{file}"));
    let (code, stdout, stderr, _) = common::run_live(&dir, &[scenario], &fixture(file), "1", &[]);
    (code, format!("{stdout}\n{stderr}"))
}

#[test]
fn a_tool_the_server_does_not_list_is_named_with_the_tools_it_lists() {
    let (code, output) = run_fixture(
        "unlisted.target.toml",
        "scenarios/lost-response-agent-hop.toml",
    );
    assert_eq!(code, Some(3), "{output}");
    assert!(
        output.contains("[mcp.tools] maps to 'remind', which the server does not list; it lists 'charge_card', 'send_notification_to_self', 'send_reminder'. Fix the tool names in the target file's [mcp.tools]"),
        "{output}"
    );
}

#[test]
fn a_server_that_never_completes_initialize_is_unknown_with_its_stderr() {
    let (code, output) = run_fixture(
        "silent.target.toml",
        "scenarios/lost-response-agent-hop.toml",
    );
    assert_eq!(code, Some(3), "{output}");
    assert!(
        output.contains("did not complete MCP initialize and tools/list at http://127.0.0.1:"),
        "{output}"
    );
    assert!(output.contains("(last: initialize: timed out)"), "{output}");
    assert!(
        output.contains("mcp-silent: got a request, never answering it"),
        "its stderr is quoted: {output}"
    );
}

#[test]
fn a_server_answering_text_instead_of_json_rpc_is_named_so() {
    let (code, output) = run_fixture(
        "garbage.target.toml",
        "scenarios/lost-response-agent-hop.toml",
    );
    assert_eq!(code, Some(3), "{output}");
    assert!(
        output.contains(
            "initialize: the answer (status 200) is not JSON-RPC: hello, this is not JSON-RPC"
        ),
        "{output}"
    );
}

// guards: issue 23 item "stdio": the same verdicts with chaos owning the
// server's stdin and stdout, a restart re-initializing over the new pipes
#[test]
fn over_stdio_the_naive_server_charges_again_and_the_correct_one_holds() {
    let (code, stdout, stderr, naive, _) = run(STDIO_NAIVE, "mcp-stdio-naive");
    common::assert_valid_report(&naive);
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    assert_faults_acted(&naive);
    for cell in cells(&naive) {
        let scenario = cell["scenario"].as_str().unwrap();
        assert_eq!(cell["verdict"], "fail", "{scenario}: {cell:#}");
        let fired = checks(cell);
        assert!(fired.contains(&"duplicate-effect"), "{scenario}: {fired:?}");
        if scenario.starts_with("lost-response") || scenario.starts_with("worker-restart") {
            assert!(
                fired.contains(&"annotation-contradicted"),
                "{scenario}: {fired:?}"
            );
        }
    }
    // The restarted server is a new process on new pipes, which answers
    // nothing before its own initialize: the correct one's passing the
    // restart (below) is the way in initializing it anew.
    let (code, stdout, stderr, correct, _) = run(STDIO_CORRECT, "mcp-stdio-correct");
    common::assert_valid_report(&correct);
    assert_faults_acted(&correct);
    for cell in cells(&correct) {
        assert_eq!(
            cell["verdict"], "pass",
            "{}: {cell:#}\n{stderr}",
            cell["scenario"]
        );
    }
    assert_eq!(cells(&correct).len(), cells(&naive).len());
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
}

#[test]
fn a_stdio_server_that_never_completes_initialize_is_unknown_with_its_stderr() {
    let (code, output) = run_fixture(
        "silent-stdio.target.toml",
        "scenarios/lost-response-agent-hop.toml",
    );
    assert_eq!(code, Some(3), "{output}");
    assert!(
        output.contains("did not complete MCP initialize and tools/list over its stdin and stdout"),
        "{output}"
    );
    assert!(
        output.contains("mcp-silent-stdio: got a message, never answering it"),
        "its stderr is quoted: {output}"
    );
}

#[test]
fn a_stdio_server_writing_text_to_stdout_is_named_so() {
    let (code, output) = run_fixture(
        "garbage-stdio.target.toml",
        "scenarios/lost-response-agent-hop.toml",
    );
    assert_eq!(code, Some(3), "{output}");
    assert!(
        output.contains(
            "initialize: the line on its stdout is not JSON-RPC: hello, this is not JSON-RPC"
        ),
        "{output}"
    );
}

/// The Python example (`examples/mcp-python`): an MCP server on the official
/// `mcp` SDK charging through the official `stripe` SDK at chaos's
/// Stripe-shaped provider; its naive and correct modes.
const PYTHON_CORRECT: &str = "examples/mcp-python/target.toml";
const PYTHON_NAIVE: &str = "examples/mcp-python/naive.target.toml";

/// A lost answer on the agent's hop, a restarted worker, re-plans: each a
/// second tools/call of one operation. (`lost-response-keyed` loses the
/// provider's answer, which the stripe SDK's own retry recovers under the
/// same key in either mode: it proves nothing about the MCP server.)
/// `replan-stall` is where the naive mode hides: Stripe's answer is held
/// past the SDK's timeout, and the server finds the charge by Stripe's
/// search and answers before the agent gives up, so no re-plan comes.
const PYTHON_SCENARIOS: [&str; 5] = [
    "scenarios/lost-response-agent-hop.toml",
    "scenarios/worker-restart.toml",
    "scenarios/replan-injected.toml",
    "scenarios/replan-stall.toml",
    "scenarios/replan-injected-crash-replay.toml",
];

// guards: issue 23's done-when for the Python example, live: the naive
// server charges again on every second tools/call and contradicts its
// idempotentHint, the correct one charges once
#[test]
fn the_python_mcp_example_charges_again_when_naive_and_once_when_correct() {
    let dir = common::temp_dir("mcp-python");
    let root = common::repo_root();
    let (code, stdout, stderr, naive) =
        common::run_live(&dir, &PYTHON_SCENARIOS, &root.join(PYTHON_NAIVE), "2", &[]);
    common::assert_valid_report(&naive);
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    assert_faults_acted(&naive);
    let ran: Vec<&str> = cells(&naive)
        .iter()
        .filter_map(|cell| cell["scenario"].as_str())
        .collect();
    assert_eq!(ran.len(), PYTHON_SCENARIOS.len(), "{ran:?}\n{stdout}");
    for cell in cells(&naive) {
        let scenario = cell["scenario"].as_str().unwrap();
        if scenario == "replan-stall" {
            assert_eq!(
                (
                    cell["verdict"].as_str(),
                    cell["effects_observed_max"].as_u64()
                ),
                (Some("pass"), Some(1)),
                "{scenario}: {cell:#}"
            );
            continue;
        }
        assert_eq!(cell["verdict"], "fail", "{scenario}: {cell:#}");
        let fired = checks(cell);
        assert!(fired.contains(&"duplicate-effect"), "{scenario}: {fired:?}");
        assert!(
            cell["effects_observed_max"].as_u64().unwrap() >= 2,
            "{scenario}: {cell:#}"
        );
        if scenario.starts_with("lost-response") || scenario.starts_with("worker-restart") {
            assert!(
                fired.contains(&"annotation-contradicted"),
                "{scenario}: {fired:?}"
            );
        }
        // The suite's tools are the server's create_charge, declared idempotent.
        let declared = cell["declared_tools"].as_array().unwrap();
        assert!(
            declared
                .iter()
                .any(|tool| tool["mcp-tool"] == "create_charge" && tool["idempotent"] == true),
            "{scenario}: {declared:?}"
        );
    }

    let (code, stdout, stderr, correct) = common::run_live(
        &dir,
        &PYTHON_SCENARIOS,
        &root.join(PYTHON_CORRECT),
        "2",
        &[],
    );
    common::assert_valid_report(&correct);
    assert_faults_acted(&correct);
    for cell in cells(&correct) {
        assert_eq!(
            (
                cell["verdict"].as_str(),
                cell["effects_observed_max"].as_u64()
            ),
            (Some("pass"), Some(1)),
            "{}: {cell:#}\n{stdout}\n{stderr}",
            cell["scenario"]
        );
    }
    assert_eq!(cells(&correct).len(), PYTHON_SCENARIOS.len(), "{stdout}");
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
}

// guards: issue 23's bad input "a tool whose input schema rejects the
// mapped arguments": refused before any call, with the schema's type
#[test]
fn a_template_the_tools_input_schema_rejects_is_named_with_the_schemas_type() {
    let (code, output) = run_fixture(
        "schema.target.toml",
        "scenarios/lost-response-agent-hop.toml",
    );
    assert_eq!(code, Some(3), "{output}");
    assert!(
        output.contains("[mcp.tools.send_reminder] arguments.amount_cents renders text, and the input schema tool 'send_reminder' lists gives amount_cents the type \"integer\""),
        "{output}"
    );
    assert!(
        output.contains("Fix the target file's [mcp.tools.send_reminder]"),
        "{output}"
    );
}

// guards: issue 23's bad input "one that answers with a result for an id it
// was never sent": the server acted (one charge, counted), and chaos, which
// could read none of its answers, says why and judges nothing
#[test]
fn a_server_answering_an_id_it_was_never_sent_is_unknown_with_both_ids() {
    let dir = common::temp_dir("mcp-stranger");
    let (code, stdout, stderr, report) = common::run_live(
        &dir,
        &["scenarios/lost-response-agent-hop.toml"],
        &fixture("stranger.target.toml"),
        "1",
        &[],
    );
    common::assert_valid_report(&report);
    assert_eq!(code, Some(3), "{stdout}\n{stderr}");
    let cell = &cells(&report)[0];
    assert_eq!(cell["verdict"], "unknown", "{cell:#}");
    // The tool acted: the result it answered under a stranger id was real.
    assert_eq!(cell["effects_observed_max"].as_u64(), Some(1), "{cell:#}");
    let output = format!("{stdout}\n{stderr}\n{cell}");
    assert!(
        output.contains("a result for an id it was never sent"),
        "{output}"
    );
    // Both ids are named: the one it answered (ours plus 1000000) and ours.
    let named = ids_named(&output);
    assert!(
        named
            .iter()
            .any(|(theirs, ours)| *theirs == ours + 1_000_000),
        "{named:?}: {output}"
    );
}

/// Each `answered request id N and never request M` in `text`, as (N, M).
fn ids_named(text: &str) -> Vec<(u64, u64)> {
    let mut found = Vec::new();
    for piece in text.split("answered request id ").skip(1) {
        let theirs: String = piece.chars().take_while(char::is_ascii_digit).collect();
        let Some(rest) = piece.split_once(" and never request ") else {
            continue;
        };
        let ours: String = rest.1.chars().take_while(char::is_ascii_digit).collect();
        if let (Ok(theirs), Ok(ours)) = (theirs.parse(), ours.parse()) {
            found.push((theirs, ours));
        }
    }
    found
}

/// Calls of one operation in flight at once: four workers releasing
/// attempts together (`concurrency`), two subagents running the same step
/// (`subagents`, with a re-plan).
const AT_ONCE: [&str; 2] = [
    "scenarios/concurrent-attempts.toml",
    "scenarios/replan-injected-subagents.toml",
];

/// `chaos run` of [`AT_ONCE`] against `target`, 2 seeds: its exit code and
/// report, with the run's output for messages.
fn run_at_once(target: &Path, out: &str) -> (Option<i32>, Value, String) {
    let dir = common::temp_dir(out);
    let (code, stdout, stderr, report) = common::run_live(&dir, &AT_ONCE, target, "2", &[]);
    common::assert_valid_report(&report);
    (code, report, format!("{stdout}\n{stderr}"))
}

// guards: issue 23's "several tools/call of one operation in flight at once,
// on one session and on separate sessions": the naive server charges more
// than once either way, the correct one once, and the report says how many
// sessions the calls went on
#[test]
fn calls_in_flight_at_once_on_one_session_and_on_separate_ones() {
    let root = common::repo_root();
    let runs = [
        (root.join(NAIVE), "mcp-at-once-naive", false, false),
        (
            fixture("per-attempt-naive.target.toml"),
            "mcp-at-once-naive-per-attempt",
            false,
            true,
        ),
        (root.join(CORRECT), "mcp-at-once-correct", true, false),
        (
            fixture("per-attempt.target.toml"),
            "mcp-at-once-correct-per-attempt",
            true,
            true,
        ),
    ];
    for (target, out, correct, per_attempt) in runs {
        let (code, report, output) = run_at_once(&target, out);
        let ran: Vec<&str> = cells(&report)
            .iter()
            .filter_map(|cell| cell["scenario"].as_str())
            .collect();
        assert_eq!(ran.len(), AT_ONCE.len(), "{out}: {ran:?}\n{output}");
        assert_faults_acted(&report);
        for cell in cells(&report) {
            let scenario = cell["scenario"].as_str().unwrap();
            let effects = cell["effects_observed_max"].as_u64().unwrap();
            if correct {
                assert_eq!(
                    (cell["verdict"].as_str(), effects),
                    (Some("pass"), 1),
                    "{out} {scenario}: {cell:#}\n{output}"
                );
            } else {
                assert_eq!(cell["verdict"], "fail", "{out} {scenario}: {cell:#}");
                assert!(
                    checks(cell).contains(&"duplicate-effect"),
                    "{out} {scenario}: {cell:#}"
                );
                assert!(effects >= 2, "{out} {scenario}: {cell:#}");
            }
            // One session for every call, or one per call: at least as
            // many as the calls released together.
            let sessions = cell["mcp_sessions_max"].as_u64().unwrap_or(0);
            if per_attempt {
                assert!(sessions >= 2, "{out} {scenario}: {sessions}: {cell:#}");
            } else {
                assert_eq!(sessions, 1, "{out} {scenario}: {cell:#}");
            }
        }
        assert_eq!(code, Some(if correct { 0 } else { 1 }), "{out}: {output}");
    }
}

/// The caller's access revoked at chaos's authority mid-run: after an
/// applied call, while an answer is held, for a new operation, by scope.
const REVOKED: [&str; 4] = [
    "scenarios/revoked-permission.toml",
    "scenarios/revoked-scope.toml",
    "scenarios/revoked-while-unknown.toml",
    "scenarios/revoked-new-operation.toml",
];

// guards: issue 23's "for Streamable HTTP servers with OAuth bearer auth:
// revocation at the authority mid-run": chaos sends the bearer its authority
// issued, the server introspects it on every tools/call, and after the
// revocation each call is denied with no new charge, naive or correct (the
// naive server's bug is its key, not its authorization)
#[test]
fn a_bearer_revoked_mid_run_is_denied_by_either_mcp_server() {
    let root = common::repo_root();
    for (target, out) in [(NAIVE, "mcp-revoked-naive"), (CORRECT, "mcp-revoked")] {
        let dir = common::temp_dir(out);
        let (code, stdout, stderr, report) =
            common::run_live(&dir, &REVOKED, &root.join(target), "2", &[]);
        common::assert_valid_report(&report);
        assert_faults_acted(&report);
        let ran: Vec<&str> = cells(&report)
            .iter()
            .filter_map(|cell| cell["scenario"].as_str())
            .collect();
        assert_eq!(ran.len(), REVOKED.len(), "{target}: {ran:?}\n{stdout}");
        for cell in cells(&report) {
            assert_eq!(
                (
                    cell["verdict"].as_str(),
                    cell["effects_observed_max"].as_u64()
                ),
                (Some("pass"), Some(1)),
                "{target} {}: {cell:#}\n{stderr}",
                cell["scenario"]
            );
        }
        assert_eq!(code, Some(0), "{target}: {stdout}\n{stderr}");
    }
}

// guards: issue 23's Streamable HTTP resumption: a stream cut before its
// result is first resumed with Last-Event-ID; a server that replays the
// result passes with one effect, naive or not; one that numbers its events
// and keeps nothing is retried, and the naive one then charges twice
#[test]
fn a_stream_cut_before_its_result_is_resumed_before_it_is_retried() {
    let root = common::repo_root();
    let scenario = fixture("stream-cut.toml");
    let runs = [
        // rmcp's session manager without an event store: ids, no replay.
        (root.join(NAIVE), "mcp-cut-naive", "not-replayed", 2),
        (root.join(CORRECT), "mcp-cut-correct", "not-replayed", 1),
        (
            fixture("resumable-naive.target.toml"),
            "mcp-cut-resumable",
            "replayed",
            1,
        ),
    ];
    for (target, out, resumed, effects) in runs {
        let dir = common::temp_dir(out);
        let (code, stdout, stderr, report) =
            common::run_live(&dir, &[scenario.to_str().unwrap()], &target, "2", &[]);
        common::assert_valid_report(&report);
        assert_faults_acted(&report);
        let cell = &cells(&report)[0];
        // Every seed's cut stream was resumed, and came to the same.
        assert_eq!(
            cell["mcp_resumed"],
            serde_json::json!({ resumed: 2 }),
            "{out}: {cell:#}\n{stderr}"
        );
        assert_eq!(
            cell["effects_observed_max"].as_u64(),
            Some(effects),
            "{out}: {cell:#}"
        );
        if effects == 1 {
            assert_eq!(cell["verdict"], "pass", "{out}: {cell:#}\n{stderr}");
            assert_eq!(code, Some(0), "{out}: {stdout}\n{stderr}");
        } else {
            assert_eq!(cell["verdict"], "fail", "{out}: {cell:#}");
            assert!(
                checks(cell).contains(&"duplicate-effect"),
                "{out}: {cell:#}"
            );
            assert_eq!(code, Some(1), "{out}: {stdout}\n{stderr}");
        }
    }
}
