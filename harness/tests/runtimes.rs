//! Real agent runtimes under test (issue 24): chaos plays the model (the
//! `[model]` driver), the user and the provider, and the target is an app
//! on a real framework: `examples/openai-agents` (the OpenAI Agents SDK, on
//! the Responses API and on Chat Completions), `examples/langgraph-postgres`
//! (LangGraph with ChatAnthropic and the PostgreSQL checkpointer) and
//! `examples/dbos-agent` (a DBOS durable workflow). Each `setup` installs the
//! pinned packages, run here when missing.
//!
//! Done when each naive form (the framework's documented tool, no key) fails
//! `duplicate-effect` with the counts the scenario says (three charges for
//! three-charges, two for a crash after the provider committed), each keyed
//! form passes every scenario it is admitted to, and every fault acted.

mod common;

use chaos::report::Summary;
use chaos::{Check, Scenario, Status};

/// (naive, keyed) target files, one pair per runtime and wire format.
const RUNTIMES: &[(&str, &str)] = &[
    (
        "examples/openai-agents/naive.target.toml",
        "examples/openai-agents/target.toml",
    ),
    (
        "examples/openai-agents/naive-chat.target.toml",
        "examples/openai-agents/chat.target.toml",
    ),
    (
        "examples/langgraph-postgres/naive.target.toml",
        "examples/langgraph-postgres/target.toml",
    ),
    (
        "examples/dbos-agent/naive.target.toml",
        "examples/dbos-agent/target.toml",
    ),
];

/// The scenario -> effects the naive form makes for one intent, as each
/// scenario plays it: three decisions; a crash after the provider committed
/// and the run retried.
const NAIVE_COUNTS: &[(&str, u32)] = &[("three-charges", 3), ("worker-restart", 2)];

use common::example_target as target;

/// The README's sweep: three-charges, every replan-*, worker-restart, with
/// the paths a user would write.
fn scenarios() -> Vec<Scenario> {
    let mut scenarios: Vec<Scenario> = common::all_scenarios()
        .into_iter()
        .filter(|scenario| {
            scenario.name == "three-charges"
                || scenario.name == "worker-restart"
                || scenario.name.starts_with("replan-")
        })
        .collect();
    for scenario in &mut scenarios {
        scenario.path = format!("scenarios/{}.toml", scenario.name).into();
    }
    scenarios
}

fn verdicts(summary: &Summary) -> String {
    summary
        .cells
        .iter()
        .map(|cell| {
            format!(
                "{} x {}: {:?} effects {}/{} {} faults: {:?}",
                cell.scenario,
                cell.target,
                cell.verdict,
                cell.effects_observed_max,
                cell.effects_expected,
                cell.reason.as_deref().unwrap_or(""),
                cell.faults_lines()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn assert_every_fault_acted(summary: &Summary) {
    assert!(!summary.cells.is_empty(), "no cell ran");
    for cell in &summary.cells {
        assert!(cell.seeds_run > 0, "{}", verdicts(summary));
        assert_eq!(
            cell.seeds_all_faults_acted,
            cell.seeds_run,
            "{}: a fault did not act: {}",
            cell.scenario,
            verdicts(summary)
        );
    }
}

fn cell<'a>(summary: &'a Summary, scenario: &str) -> &'a chaos::report::CellSummary {
    summary
        .cells
        .iter()
        .find(|cell| cell.scenario == scenario)
        .unwrap_or_else(|| panic!("{scenario} ran: {}", verdicts(summary)))
}

fn naive_fails_keyed_passes(naive: &str, keyed: &str) {
    let scenarios = scenarios();
    assert!(scenarios.len() >= 3, "the sweep's scenarios exist");

    let summary = common::sweep_target(&scenarios, &target(naive), 1);
    assert_every_fault_acted(&summary);
    for (scenario, effects) in NAIVE_COUNTS {
        let cell = cell(&summary, scenario);
        assert_eq!(cell.verdict, Status::Fail, "{}", verdicts(&summary));
        assert_eq!(
            cell.effects_observed_max,
            *effects,
            "{}",
            verdicts(&summary)
        );
        for failure in &cell.failures {
            assert!(
                failure
                    .findings
                    .iter()
                    .any(|finding| finding.check == Check::DuplicateEffect),
                "{scenario} seed {}: {:?}",
                failure.seed,
                failure.checks()
            );
        }
    }
    // A note to oneself is its own action each time: three calls, three
    // effects, whatever the form.
    assert_eq!(
        cell(&summary, "replan-notify-self").verdict,
        Status::Pass,
        "{}",
        verdicts(&summary)
    );

    let summary = common::sweep_target(&scenarios, &target(keyed), 1);
    assert_every_fault_acted(&summary);
    for cell in &summary.cells {
        assert_eq!(cell.verdict, Status::Pass, "{}", verdicts(&summary));
    }
}

// guards: issue 24's done-when on the OpenAI Agents SDK (Responses API): a
// function tool with no key charges once per decision and again after a
// crash (the run starts over); keyed by (run, tool, invoice) it charges once
#[test]
fn the_openai_agents_sdk_charges_per_decision_unless_the_tool_keys_by_the_run() {
    naive_fails_keyed_passes(RUNTIMES[0].0, RUNTIMES[0].1);
}

// guards: the same on Chat Completions, the SDK's other wire format
#[test]
fn the_openai_agents_sdk_on_chat_completions_does_the_same() {
    naive_fails_keyed_passes(RUNTIMES[1].0, RUNTIMES[1].1);
}

// guards: LangGraph resumed from its PostgreSQL checkpoint re-runs the tool
// node, and a re-plan runs the tool again; keyed, it charges once
#[test]
fn a_resumed_langgraph_thread_re_runs_its_tool_node_unless_the_tool_keys_by_the_thread() {
    naive_fails_keyed_passes(RUNTIMES[2].0, RUNTIMES[2].1);
}

// guards: DBOS recovery re-runs a step whose completion was not recorded;
// keyed by (workflow, tool, invoice), it charges once
#[test]
fn a_recovered_dbos_workflow_re_runs_its_step_unless_the_step_keys_by_the_workflow() {
    naive_fails_keyed_passes(RUNTIMES[3].0, RUNTIMES[3].1);
}
