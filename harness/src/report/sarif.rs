//! `report.sarif`: SARIF 2.1.0 for code scanning (GitHub's among others),
//! so a layer's failures land beside the repository's other findings.
//!
//! - A **rule** per check that fired in the run, from the check's page (the
//!   one source `chaos explain` prints): its `Fails when:` line as the short
//!   description, what it means as the full one, the page as the help, and
//!   its level (`error`; `warning` for a warning; `note` for what was not
//!   judged). Checks that put a charge or a disclosure at stake carry a
//!   `security-severity`, which code scanning reads to rank alerts.
//! - A **result** per cell that did not pass (`error` for a failure, `note`
//!   for an undecided cell) and per warning under a cell: the headline as
//!   message, the scenario file as location, the scenario's tags (ATLAS,
//!   OWASP) as the result's tags, and the target, the seeds and the rerun
//!   command as properties. A partial fingerprint of scenario, target and
//!   check lets code scanning follow one alert across runs.
//!
//! The types are the `serde-sarif` crate's, generated from the OASIS schema;
//! like every report, it has no timestamp, so a run and its merged shards
//! give the same bytes.

use std::collections::BTreeMap;

use serde_json::json;
use serde_sarif::sarif::{
    ArtifactLocation, Location, Message, MultiformatMessageString, PhysicalLocation, PropertyBag,
    Region, ReportingConfiguration, ReportingDescriptor, Result as SarifResult, ResultLevel, Run,
    Sarif, Tool, ToolComponent,
};

use super::{CellSummary, Summary};
use crate::check::{Check, Status};

/// The schema the file names, as the specification publishes it.
const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";

pub fn render(summary: &Summary) -> String {
    let findings = findings(summary);
    let mut fired: Vec<Check> = findings.iter().map(|finding| finding.check).collect();
    fired.sort_by_key(|check| check.specificity());
    fired.dedup();
    let rules: Vec<ReportingDescriptor> = fired.iter().map(|check| rule(*check)).collect();
    let results: Vec<SarifResult> = findings
        .iter()
        .map(|finding| {
            let index = fired
                .iter()
                .position(|check| *check == finding.check)
                .expect("every finding's check is a rule");
            result(summary, finding, index)
        })
        .collect();
    let driver = ToolComponent::builder()
        .name("chaos")
        .version(summary.chaos_version.clone())
        .semantic_version(summary.chaos_version.clone())
        .rules(rules)
        .build();
    let run = Run::builder()
        .tool(Tool::builder().driver(driver).build())
        .results(results)
        .properties(
            PropertyBag::builder()
                .additional_properties(BTreeMap::from([
                    ("transport".to_owned(), json!(summary.transport.to_string())),
                    ("seeds".to_owned(), json!(summary.seeds_label())),
                ]))
                .build(),
        )
        .build();
    let sarif = Sarif::builder()
        .schema(SCHEMA)
        .version(json!("2.1.0"))
        .runs(vec![run])
        .build();
    let mut text = serde_json::to_string_pretty(&sarif).expect("SARIF serializes");
    text.push('\n');
    text
}

/// What becomes a result: a cell that did not pass, under its most serious
/// check, or a warning under a cell.
struct FoundIn<'a> {
    cell: &'a CellSummary,
    check: Check,
    level: &'static str,
    message: String,
    seeds: u64,
    first_seed: Option<u64>,
    rerun: Option<String>,
}

fn findings(summary: &Summary) -> Vec<FoundIn<'_>> {
    let mut found = Vec::new();
    for cell in &summary.cells {
        if cell.verdict != Status::Pass {
            // Failure dominates: the rule is the most serious check that
            // fired; an undecided cell with none recorded ran incomplete.
            let check = (cell.checks.iter())
                .map(|count| count.check)
                .min_by_key(|check| (check.seriousness(), check.specificity()))
                .unwrap_or(Check::RunIncomplete);
            let (level, seeds, first_seed) = match cell.verdict {
                Status::Fail => ("error", cell.seeds_failed, cell.first_failing_seed),
                _ => ("note", cell.seeds_unknown, cell.first_unknown_seed),
            };
            found.push(FoundIn {
                cell,
                check,
                level,
                message: cell.headline(),
                seeds,
                first_seed,
                rerun: cell.rerun.clone(),
            });
        }
        for warning in &cell.warnings {
            // A warning a denied run already failed the cell on is that
            // cell's result; the others are warnings.
            if cell.verdict == Status::Fail && cell.checks.iter().all(|c| c.check.is_warning()) {
                continue;
            }
            found.push(FoundIn {
                cell,
                check: warning.check,
                level: "warning",
                message: format!("{}: {}", warning.check, warning.message),
                seeds: warning.seeds,
                first_seed: Some(warning.first_seed),
                rerun: Some(warning.rerun.clone()),
            });
        }
    }
    found
}

/// The level a check's finding has unless a cell says otherwise.
fn default_level(check: Check) -> &'static str {
    if check.is_warning() {
        "warning"
    } else if matches!(check, Check::RunIncomplete | Check::FaultNeverActed) {
        "note"
    } else {
        "error"
    }
}

fn result_level(name: &str) -> ResultLevel {
    match name {
        "error" => ResultLevel::Error,
        "warning" => ResultLevel::Warning,
        "note" => ResultLevel::Note,
        _ => ResultLevel::None,
    }
}

/// The section of a page under `heading`, up to the next heading.
fn section(page: &'static str, heading: &str) -> String {
    let Some((_, rest)) = page.split_once(heading) else {
        return String::new();
    };
    let body = rest.split("\n## ").next().unwrap_or(rest);
    body.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn rule(check: Check) -> ReportingDescriptor {
    let page = check.page();
    let mut properties = BTreeMap::from([("seriousness".to_owned(), json!(check.seriousness()))]);
    // Code scanning ranks security alerts by this (0.0 to 10.0): a side
    // effect done twice or shown to the wrong caller is high, a lost one or
    // a dishonest answer medium; the rest are not security findings.
    let severity = match check.seriousness() {
        0 => Some("8.0"),
        1 => Some("6.0"),
        2 => Some("4.0"),
        _ => None,
    };
    if let Some(severity) = severity {
        properties.insert("security-severity".to_owned(), json!(severity));
    }
    ReportingDescriptor::builder()
        .id(check.as_str())
        .name(
            check
                .as_str()
                .split('-')
                .map(|word| {
                    let mut chars = word.chars();
                    chars
                        .next()
                        .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
                        .unwrap_or_default()
                })
                .collect::<String>(),
        )
        .short_description(
            MultiformatMessageString::builder()
                .text(check.fails_when())
                .build(),
        )
        .full_description(
            MultiformatMessageString::builder()
                .text(section(page, "## What it means"))
                .build(),
        )
        .help(
            MultiformatMessageString::builder()
                .text(format!(
                    "{} {}",
                    check.fix(),
                    section(page, "## How to fix the layer")
                ))
                .markdown(page)
                .build(),
        )
        .default_configuration(
            ReportingConfiguration::builder()
                .level(json!(default_level(check)))
                .build(),
        )
        .properties(
            PropertyBag::builder()
                .tags(vec!["idempotency".to_owned(), "chaos".to_owned()])
                .additional_properties(properties)
                .build(),
        )
        .build()
}

fn result(summary: &Summary, found: &FoundIn<'_>, index: usize) -> SarifResult {
    let cell = found.cell;
    let tags = (summary.scenarios.iter())
        .find(|scenario| scenario.name == cell.scenario)
        .map(|scenario| scenario.tags.clone())
        .unwrap_or_default();
    let mut properties = BTreeMap::from([
        ("scenario".to_owned(), json!(cell.scenario)),
        ("target".to_owned(), json!(cell.target)),
        ("verdict".to_owned(), json!(super::verdict_label(cell))),
        ("seeds".to_owned(), json!(found.seeds)),
        ("seeds_run".to_owned(), json!(cell.seeds_run)),
    ]);
    if let Some(seed) = found.first_seed {
        properties.insert("first_seed".to_owned(), json!(seed));
    }
    if let Some(rerun) = &found.rerun {
        properties.insert("rerun".to_owned(), json!(rerun));
    }
    let location = Location::builder()
        .physical_location(
            PhysicalLocation::builder()
                .artifact_location(
                    ArtifactLocation::builder()
                        .uri(cell.scenario_path.clone())
                        .build(),
                )
                .region(Region::builder().start_line(1).build())
                .build(),
        )
        .build();
    let mut bag = PropertyBag::builder()
        .additional_properties(properties)
        .build();
    if !tags.is_empty() {
        bag.tags = Some(tags);
    }
    let rerun = found
        .rerun
        .as_ref()
        .map(|rerun| format!(" Rerun: {rerun}"))
        .unwrap_or_default();
    SarifResult::builder()
        .rule_id(found.check.as_str())
        .rule_index(index as i64)
        .level(result_level(found.level))
        .message(
            Message::builder()
                .text(format!(
                    "{} x {}: {} ({} of {} seeds).{rerun}",
                    cell.scenario, cell.target, found.message, found.seeds, cell.seeds_run
                ))
                .build(),
        )
        .locations(vec![location])
        .partial_fingerprints(BTreeMap::from([(
            "chaosCell/v1".to_owned(),
            format!("{}/{}/{}", cell.scenario, cell.target, found.check),
        )]))
        .properties(bag)
        .build()
}
