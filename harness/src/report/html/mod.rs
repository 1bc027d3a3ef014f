//! `report.html`: one self-contained page (inline CSS, JS and SVG; nothing is
//! fetched) that a person can read at a glance: the matrix, then for every
//! cell that did not pass its reason, its rerun command and a timeline per
//! kept seed. The page is a minijinja template (`report.html` beside this
//! file) over a view model built here; [`timeline`] lays out the swimlanes.

pub(crate) mod timeline;

use minijinja::value::Serde;
use minijinja::{Environment, Value};
use serde::Serialize;

use super::record::{AttemptRecord, SeedFailure};
use super::{verdict_label, CellSummary, Payloads, Summary};
use crate::check::Status;
use crate::history::AttemptEnd;
use timeline::Timeline;

const TEMPLATE: &str = include_str!("report.html");
const STYLE: &str = include_str!("style.css");
const SCRIPT: &str = include_str!("script.js");

pub fn render(summary: &Summary) -> String {
    let mut environment = Environment::new();
    // The name ends in .html: minijinja escapes every value for HTML.
    environment
        .add_template("report.html", TEMPLATE)
        .expect("the report template parses (checked by the tests)");
    let page = page(summary);
    environment
        .get_template("report.html")
        .and_then(|template| {
            template.render(minijinja::context! {
                page => Value::from(Serde(&page)),
                style => Value::from_safe_string(STYLE.to_owned()),
                script => Value::from_safe_string(SCRIPT.to_owned()),
            })
        })
        .expect("the report template renders (checked by the tests)")
}

#[derive(Debug, Serialize)]
struct Page {
    title: String,
    headline: String,
    status: &'static str,
    meta: Vec<(String, String)>,
    targets: Vec<String>,
    rows: Vec<MatrixRow>,
    cases: Vec<Case>,
}

#[derive(Debug, Serialize)]
struct MatrixRow {
    scenario: String,
    description: String,
    all_passed: bool,
    cells: Vec<Option<MatrixCell>>,
}

#[derive(Debug, Serialize)]
struct MatrixCell {
    class: &'static str,
    verdict: String,
    /// The effects, or `not run: <reason>` when no trial ran.
    effects: String,
    /// Seeds that did not pass / run; empty when no trial ran.
    seeds: String,
    /// Dispatches per seed, on hover.
    title: String,
    anchor: Option<String>,
}

#[derive(Debug, Serialize)]
struct Case {
    anchor: String,
    scenario: String,
    target: String,
    class: &'static str,
    verdict: String,
    /// Every check that fired with its seeds when several did, else the reason.
    headline: String,
    /// The first failing (or undecided) seed's reason, when the headline is not it.
    reason: Option<String>,
    rerun: String,
    counts: String,
    /// `duplicate-effect 29/40, ...`; empty when no trial ran.
    checks: String,
    dispatches: Option<String>,
    /// What each declared fault did, on how many seeds.
    faults: Vec<String>,
    /// The claim that broke: the scenario's invariant, at its boundary.
    invariant: String,
    /// Why the cell allows more effects than its scenario file, if it does.
    note: Option<String>,
    seeds: Vec<SeedView>,
}

#[derive(Debug, Serialize)]
struct SeedView {
    seed: u64,
    verdict: String,
    reason: String,
    rerun: String,
    open: bool,
    token: Option<String>,
    run_error: Option<String>,
    findings: Vec<(String, String)>,
    operations: Vec<OperationView>,
    timeline: Timeline,
}

#[derive(Debug, Serialize)]
struct OperationView {
    name: String,
    operation_id: String,
    effects: String,
    dispatches: u32,
    receipts: String,
    attempts: Vec<AttemptView>,
    dispatch_rows: Vec<(String, String, String, String)>,
}

#[derive(Debug, Serialize)]
struct AttemptView {
    attempt_id: String,
    tool_use_id: String,
    decision: u32,
    key: String,
    sent_at: u64,
    ended_at: u64,
    variant: String,
    saw: String,
    target_said: String,
    payload: Option<String>,
}

fn status_class(status: Status) -> &'static str {
    match status {
        Status::Pass => "pass",
        Status::Fail => "fail",
        Status::Unknown => "unknown",
    }
}

fn anchor(cell: &CellSummary) -> String {
    format!("case-{}--{}", slug(&cell.scenario), slug(&cell.target))
}

fn slug(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

fn page(summary: &Summary) -> Page {
    let totals = summary.totals();
    let (status, headline) = if totals.failed > 0 {
        (
            "fail",
            format!("{} of {} cells failed", totals.failed, totals.cells),
        )
    } else if totals.unknown > 0 {
        (
            "unknown",
            format!(
                "{} of {} cells could not be decided",
                totals.unknown, totals.cells
            ),
        )
    } else {
        ("pass", format!("all {} cells passed", totals.cells))
    };
    let mut meta = vec![
        ("chaos".to_owned(), summary.chaos_version.clone()),
        ("transport".to_owned(), summary.transport.to_string()),
        // The label names its own seeds: under "seeds" it read "seeds seeds 0..=199".
        ("run".to_owned(), summary.seeds_label()),
        (
            "scenarios × targets".to_owned(),
            format!("{} × {}", summary.scenarios.len(), summary.targets.len()),
        ),
    ];
    meta.push((
        "payloads".to_owned(),
        match summary.payloads {
            Payloads::Redacted => "redacted".to_owned(),
            Payloads::Included => "included".to_owned(),
        },
    ));

    let rows = summary
        .scenarios
        .iter()
        .map(|scenario| {
            let cells: Vec<Option<MatrixCell>> = summary
                .targets
                .iter()
                .map(|target| {
                    summary.cell(&scenario.name, &target.name).map(|cell| {
                        let mut observed = cell.observed().into_iter();
                        MatrixCell {
                            class: status_class(cell.verdict),
                            verdict: verdict_label(cell),
                            effects: observed.next().unwrap_or_default(),
                            seeds: observed.next().unwrap_or_default(),
                            title: (cell.dispatches.text())
                                .map(|text| format!("dispatches per seed: {text}"))
                                .into_iter()
                                .chain(cell.warnings.iter().map(|warning| {
                                    format!("warning: {}", warning.text(cell.seeds_run))
                                }))
                                .chain(cell.faults_lines())
                                .collect::<Vec<String>>()
                                .join("\n"),
                            anchor: (cell.verdict != Status::Pass).then(|| anchor(cell)),
                        }
                    })
                })
                .collect();
            MatrixRow {
                scenario: scenario.name.clone(),
                description: format!(
                    "{} | invariant ({}): {}{}",
                    scenario.description.lines().next().unwrap_or(""),
                    scenario.boundary,
                    scenario.invariant,
                    tags_text(&scenario.tags)
                ),
                all_passed: cells
                    .iter()
                    .all(|cell| cell.as_ref().is_none_or(|cell| cell.class == "pass")),
                cells,
            }
        })
        .collect();

    let cases = summary
        .cells
        .iter()
        .filter(|cell| cell.verdict != Status::Pass)
        .map(|cell| Case {
            anchor: anchor(cell),
            scenario: cell.scenario.clone(),
            target: cell.target.clone(),
            class: status_class(cell.verdict),
            verdict: verdict_label(cell),
            headline: cell.headline(),
            reason: cell
                .reason
                .clone()
                .filter(|reason| *reason != cell.headline()),
            rerun: cell.rerun.clone().unwrap_or_default(),
            counts: if cell.never_ran() {
                cell.not_run
                    .as_ref()
                    .map(|not_run| {
                        format!(
                            "{} trial(s) could not run: {}",
                            not_run.seeds, not_run.reason
                        )
                    })
                    .unwrap_or_default()
            } else {
                format!(
                    "{} of {} seeds did not pass; {} (most observed / allowed)",
                    cell.seeds_failed + cell.seeds_unknown,
                    cell.seeds_run,
                    cell.effects_text()
                )
            },
            checks: cell.checks_text(),
            dispatches: cell.dispatches.text(),
            faults: if cell.never_ran() {
                Vec::new()
            } else {
                cell.faults_lines()
            },
            invariant: summary
                .scenario(&cell.scenario)
                .map(|scenario| {
                    format!(
                        "{} ({}){}",
                        scenario.invariant,
                        scenario.boundary,
                        tags_text(&scenario.tags)
                    )
                })
                .unwrap_or_default(),
            note: summary
                .target(&cell.target)
                .and_then(|target| cell.expectation_note(target)),
            seeds: cell
                .failures
                .iter()
                .enumerate()
                .map(|(index, failure)| seed_view(failure, index == 0))
                .collect(),
        })
        .collect();

    Page {
        title: format!("chaos report: {headline}"),
        headline,
        status,
        meta,
        targets: summary.targets.iter().map(|t| t.name.clone()).collect(),
        rows,
        cases,
    }
}

fn seed_view(failure: &SeedFailure, open: bool) -> SeedView {
    SeedView {
        seed: failure.seed,
        verdict: failure.verdict.to_string(),
        reason: failure.reason.clone(),
        rerun: failure.rerun.clone(),
        open,
        token: failure.token.clone(),
        run_error: failure.run_error.clone(),
        findings: failure
            .findings
            .iter()
            .map(|finding| (finding.check.to_string(), finding.message.clone()))
            .collect(),
        operations: failure
            .operations
            .iter()
            .map(|operation| OperationView {
                name: operation.summary.name.clone(),
                operation_id: operation.operation_id.clone(),
                effects: if operation.summary.expected_effects_min
                    == operation.summary.expected_effects_max
                {
                    format!(
                        "{}/{}",
                        operation.summary.effects, operation.summary.expected_effects_max
                    )
                } else {
                    format!(
                        "{}/{}..{}",
                        operation.summary.effects,
                        operation.summary.expected_effects_min,
                        operation.summary.expected_effects_max
                    )
                },
                dispatches: operation.summary.dispatches,
                receipts: operation.summary.receipts.join(", "),
                attempts: operation
                    .history
                    .attempts
                    .iter()
                    .map(attempt_view)
                    .collect(),
                dispatch_rows: operation
                    .ledger
                    .dispatches
                    .iter()
                    .map(|dispatch| {
                        let disposition = dispatch.disposition.describe();
                        (
                            format!("#{}", dispatch.number),
                            format!("{} ms", dispatch.at),
                            dispatch.key.clone().unwrap_or_else(|| "none".into()),
                            disposition,
                        )
                    })
                    .collect(),
            })
            .collect(),
        timeline: timeline::layout(failure),
    }
}

fn attempt_view(attempt: &AttemptRecord) -> AttemptView {
    let target_said = match &attempt.end {
        AttemptEnd::Answered(answer)
        | AttemptEnd::Lost {
            dropped: answer, ..
        }
        | AttemptEnd::Truncated { dropped: answer } => format!(
            "{} {}{}",
            answer.status,
            answer.outcome,
            answer
                .receipt
                .as_ref()
                .map(|receipt| format!(" ({receipt})"))
                .unwrap_or_default()
        ),
        AttemptEnd::Failed { .. } | AttemptEnd::Abandoned | AttemptEnd::Interrupted => "–".into(),
    };
    AttemptView {
        attempt_id: attempt.attempt_id.clone(),
        tool_use_id: attempt.tool_use_id.clone(),
        decision: attempt.decision,
        key: attempt.key.clone(),
        sent_at: attempt.sent_at,
        ended_at: attempt.ended_at,
        variant: serde_json::to_value(attempt.payload_variant)
            .ok()
            .and_then(|value| value.as_str().map(str::to_owned))
            .unwrap_or_default(),
        saw: attempt.saw.clone(),
        target_said,
        payload: attempt.payload.clone(),
    }
}

/// ` | tags: a, b` after a claim, or nothing for a scenario without tags.
fn tags_text(tags: &[String]) -> String {
    if tags.is_empty() {
        return String::new();
    }
    format!(" | tags: {}", tags.join(", "))
}
