//! chaos plays the model behind a real agent runtime (issue 24), live: the
//! runtime is `examples/sdk-agent`, an agent loop written straight on the
//! official SDKs (openai, anthropic; exact pins, installed by its `setup`,
//! run here), speaking each wire format to chaos's scripted model and
//! making the tool calls itself.
//!
//! Done when the naive loop (every tool call executed as it comes) fails
//! with the count each fault makes (three charges for three decisions), the
//! keyed loop passes the same scenarios, every fault acted, and a runtime
//! chaos cannot test is told so, never judged.

mod common;

use std::path::Path;

use chaos::report::Summary;
use chaos::{Check, Scenario, Status, Target};

const APIS: [&str; 3] = ["openai-chat", "openai-responses", "anthropic"];

/// Scenario -> the effects the naive loop makes for its one intent.
const NAIVE_COUNTS: [(&str, u32); 8] = [
    ("three-charges", 3),
    ("replan-injected", 2),
    ("replan-injected-drifted", 2),
    ("replan-injected-subagents", 3),
    ("replan-injected-crash-replay", 3),
    ("replan-stall", 2),
    ("replan-truncated-result", 2),
    ("worker-restart", 2),
];

fn setup() {
    common::setup_example("examples/sdk-agent");
}

fn target_at(path: &Path) -> Target {
    common::live_target(path)
}

fn example(file: &str) -> Target {
    common::example_target(&format!("examples/sdk-agent/{file}"))
}

/// A target file of the example's own process with `extra` lines, written
/// beside nothing of the repository's.
fn variant(name: &str, env: &str, model: &str) -> Target {
    setup();
    let dir = common::temp_dir(name);
    let example = common::repo_root().join("examples/sdk-agent");
    let path = dir.join("target.toml");
    std::fs::write(
        &path,
        format!(
            "name = \"{name}\"\ncommand = [\".venv/bin/python\", \"app.py\"]\nworkdir = {:?}\nready-timeout = \"20s\"\n[env]\nAGENT_MODE = \"keyed\"\nOPENAI_API_KEY = \"chaos\"\nANTHROPIC_API_KEY = \"chaos\"\n{env}\n[model]\n{model}\n",
            example.canonicalize().unwrap().display().to_string()
        ),
    )
    .unwrap();
    target_at(&path)
}

fn scenarios(names: &[&str]) -> Vec<Scenario> {
    names.iter().map(|name| common::scenario(name)).collect()
}

fn verdicts(summary: &Summary) -> String {
    summary
        .cells
        .iter()
        .map(|cell| {
            format!(
                "{} x {}: {:?} effects {} {}{}",
                cell.scenario,
                cell.target,
                cell.verdict,
                cell.effects_observed_max,
                cell.reason.as_deref().unwrap_or(""),
                cell.not_run
                    .as_ref()
                    .map_or("", |not_run| not_run.reason.as_str())
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

// guards: issue 24's done-when on a runtime of the official SDKs: each wire
// format, naive fails with the right count per scenario, keyed passes
#[test]
fn the_naive_loop_charges_once_per_decision_and_the_keyed_loop_once_per_intent() {
    let mut names: Vec<&str> = NAIVE_COUNTS.iter().map(|(name, _)| *name).collect();
    names.push("replan-notify-self");
    let scenarios = scenarios(&names);
    for api in APIS {
        let summary =
            common::sweep_target(&scenarios, &example(&format!("naive.{api}.target.toml")), 1);
        for cell in &summary.cells {
            assert_eq!(
                cell.seeds_all_faults_acted,
                cell.seeds_run,
                "{api}: {}",
                verdicts(&summary)
            );
            assert!(cell.seeds_run > 0, "{}", verdicts(&summary));
            match NAIVE_COUNTS.iter().find(|(name, _)| *name == cell.scenario) {
                Some((_, count)) => {
                    assert_eq!(cell.verdict, Status::Fail, "{api}: {}", verdicts(&summary));
                    assert_eq!(
                        cell.effects_observed_max,
                        *count,
                        "{api}: {}",
                        verdicts(&summary)
                    );
                    assert!(
                        cell.checks
                            .iter()
                            .any(|check| check.check == Check::DuplicateEffect),
                        "{api}: {}",
                        verdicts(&summary)
                    );
                }
                // Under the allow policy, every decision is its own action.
                None => assert_eq!(cell.verdict, Status::Pass, "{api}: {}", verdicts(&summary)),
            }
        }
        let summary =
            common::sweep_target(&scenarios, &example(&format!("keyed.{api}.target.toml")), 1);
        for cell in &summary.cells {
            assert_eq!(cell.verdict, Status::Pass, "{api}: {}", verdicts(&summary));
            assert_eq!(
                cell.seeds_all_faults_acted,
                cell.seeds_run,
                "{api}: {}",
                verdicts(&summary)
            );
        }
    }
}

// guards: the model's tool calls are the history's attempts: one per
// decision, with the tool-call id the model minted, ended by the result
// the runtime handed back (or abandoned when the process died with it)
#[test]
fn each_tool_call_the_model_emits_is_an_attempt_ended_by_what_the_runtime_handed_back() {
    let target = example("naive.openai-chat.target.toml");
    let scenario = common::scenario("worker-restart");
    let judged = chaos::judge(&scenario, &target, 0);
    let run = judged.run.expect("the trial ran");
    let attempts = &run.history.attempts;
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    assert_eq!((attempts[0].decision, attempts[1].decision), (1, 2));
    assert_ne!(attempts[0].tool_use_id, attempts[1].tool_use_id);
    // The first tool call's result died with the killed process.
    assert_eq!(attempts[0].summary(), "abandoned (the agent crashed)");
    assert!(attempts[1].answer().is_some(), "{:?}", attempts[1]);
    assert_eq!(run.ledger.effects.len(), 2);
}

/// The one trial of `scenario` against `target`: unknown, with a reason
/// containing `says`.
fn assert_unknown_saying(target: &Target, scenario: &str, says: &str) {
    let summary = common::sweep_target(&scenarios(&[scenario]), target, 1);
    let cell = &summary.cells[0];
    assert_eq!(cell.verdict, Status::Unknown, "{}", verdicts(&summary));
    let reason = verdicts(&summary);
    assert!(reason.contains(says), "{says:?} not in: {reason}");
}

// guards: a runtime whose SDK never reaches chaos's model is no trial: the
// reason names the base URL setting to check
#[test]
fn a_runtime_that_never_asks_the_model_is_unknown_naming_its_base_url_setting() {
    let target = variant(
        "model-nowhere",
        "MODEL_API = \"openai-chat\"\nOPENAI_BASE_URL = \"http://127.0.0.1:9/v1\"",
        "api = \"openai-chat\"\nretries = 0",
    );
    assert_unknown_saying(&target, "replan-injected", "never asked the model");
    assert_unknown_saying(
        &target,
        "replan-injected",
        "OPENAI_BASE_URL = \"{model.url}/v1\"",
    );
}

// guards: a runtime that speaks another wire format than its file says,
// and one that never declares the scenario's tool, are told so
#[test]
fn a_runtime_in_another_format_or_without_the_tool_is_unknown_saying_which() {
    let env = "MODEL_API = \"openai-chat\"\nOPENAI_BASE_URL = \"{model.url}/v1\"\nANTHROPIC_BASE_URL = \"{model.url}\"";
    let other = variant(
        "model-other-format",
        env,
        "api = \"anthropic\"\nretries = 0",
    );
    assert_unknown_saying(
        &other,
        "replan-injected",
        "called its model at /v1/chat/completions",
    );

    let renamed = variant(
        "model-no-tool",
        env,
        "api = \"openai-chat\"\nretries = 0\n[model.tools]\ncharge_card = \"refund_card\"",
    );
    assert_unknown_saying(
        &renamed,
        "replan-injected",
        "declared the tools charge_card",
    );
}

// guards: what the model cannot play is refused before anything starts,
// saying why
#[test]
fn a_scenario_the_model_cannot_play_is_not_run_and_says_why() {
    let target = example("keyed.openai-chat.target.toml");
    let summary = common::sweep_target(
        &scenarios(&["replan-injected-double-approve", "concurrent-attempts"]),
        &target,
        1,
    );
    assert!(summary.cells.is_empty(), "{}", verdicts(&summary));
    let reasons: Vec<String> = summary
        .excluded
        .iter()
        .map(|excluded| excluded.line())
        .collect();
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    let reasons = reasons.join("\n");
    assert!(reasons.contains("approval interrupt"), "{reasons}");
    assert!(
        reasons.contains("the runtime, not chaos, sends tool calls"),
        "{reasons}"
    );
}

// guards: a run that never completes (the model's answer held past the
// run's timeout, no retry left) is bounded and incomplete: unknown, saying
// which run, never a pass
#[test]
fn a_run_that_never_completes_is_bounded_and_unknown_saying_which_run() {
    let target = variant(
        "model-held",
        "MODEL_API = \"openai-chat\"\nOPENAI_BASE_URL = \"{model.url}/v1\"",
        "api = \"openai-chat\"\nrun-timeout = \"1s\"\nretries = 0",
    );
    let dir = common::temp_dir("model-held-scenario");
    let path = dir.join("model-held.toml");
    std::fs::write(
        &path,
        "test = \"re-plan\"\ndescription = \"the model's answer after the charge is held past the run's timeout\"\ninvariant = \"one effect per intent\"\nboundary = \"accepted-request\"\n[provider]\nprofile = \"keyed\"\nretention = \"24h\"\n[workload]\ntool = \"charge_card\"\n[[call]]\noperation = \"charge\"\nattempts = 1\n[[fault]]\nkind = \"delay\"\nhop = \"target-to-agent\"\nnth = 1\nby = \"3s\"\n[expect]\neffects-per-operation = 1\n",
    )
    .unwrap();
    let scenario = Scenario::load(&path).unwrap_or_else(|error| panic!("{error}"));
    let summary = common::sweep_target(&[scenario], &target, 1);
    let cell = &summary.cells[0];
    assert_eq!(cell.verdict, Status::Unknown, "{}", verdicts(&summary));
    assert_eq!(cell.effects_observed_max, 1, "{}", verdicts(&summary));
    let reasons = verdicts(&summary);
    assert!(reasons.contains("never completed in 1 tries"), "{reasons}");
}
