//! `junit.xml` for CI: a test suite per target, a test case per (scenario,
//! target). A failing cell is a `<failure>` whose message is its headline
//! (every check that fired with its seeds, when several did), the first
//! seed's reason and the rerun command; an undecided one is an `<error>` (the
//! harness could not judge it, which is not the target's failure). Every
//! case carries its check counts and dispatches per seed as properties. No
//! timestamps or durations: the same run gives the same bytes.

use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};

use super::{verdict_label, CellSummary, Summary};
use crate::check::Status;

pub fn render(summary: &Summary) -> String {
    let mut report = Report::new("chaos");
    for target in &summary.targets {
        let mut suite = TestSuite::new(target.name.as_str());
        suite.add_property(Property::new("transport", summary.transport.to_string()));
        suite.add_property(Property::new("seeds", summary.seeds_label()));
        for cell in summary
            .cells
            .iter()
            .filter(|cell| cell.target == target.name)
        {
            suite.add_test_case(test_case(summary, cell));
        }
        report.add_test_suite(suite);
    }
    report
        .to_string()
        .expect("a report of plain strings always serialises")
}

fn test_case(summary: &Summary, cell: &CellSummary) -> TestCase {
    let status = match cell.verdict {
        Status::Pass => TestCaseStatus::success(),
        Status::Fail | Status::Unknown => {
            let kind = if cell.verdict == Status::Fail {
                NonSuccessKind::Failure
            } else {
                NonSuccessKind::Error
            };
            let reason = cell.reason.as_deref().unwrap_or("no reason recorded");
            let rerun = cell.rerun.as_deref().unwrap_or("-");
            let headline = cell.headline();
            let message = if headline == reason {
                format!("{reason} (rerun: {rerun})")
            } else {
                format!("{headline}; first: {reason} (rerun: {rerun})")
            };
            let observed = if cell.never_ran() {
                headline.clone()
            } else {
                format!(
                    "{} of {} seeds did not pass; {} (most observed / allowed); checks: {}",
                    cell.seeds_failed + cell.seeds_unknown,
                    cell.seeds_run,
                    cell.effects_text(),
                    cell.checks_text(),
                )
            };
            let mut status = TestCaseStatus::non_success(kind);
            status
                .set_message(message)
                .set_type(decisive_check(reason))
                .set_description(format!(
                    "{}: {observed}\n{reason}\nrerun: {rerun}",
                    verdict_label(cell),
                ));
            status
        }
    };
    let mut case = TestCase::new(cell.scenario.as_str(), status);
    case.set_classname(cell.target.as_str());
    case.add_property(Property::new("seeds-run", cell.seeds_run.to_string()));
    case.add_property(Property::new("seeds-failed", cell.seeds_failed.to_string()));
    case.add_property(Property::new(
        "seeds-undecided",
        cell.seeds_unknown.to_string(),
    ));
    case.add_property(Property::new(
        "effects",
        format!("{}/{}", cell.effects_observed_max, cell.effects_expected),
    ));
    case.add_property(Property::new(
        "amplification",
        format!("{}", cell.amplification_max),
    ));
    if !cell.checks.is_empty() {
        case.add_property(Property::new("checks", cell.checks_text()));
    }
    if let Some(dispatches) = cell.dispatches.text() {
        case.add_property(Property::new("dispatches-per-seed", dispatches));
    }
    if !cell.warnings.is_empty() {
        let warnings: Vec<String> = (cell.warnings.iter())
            .map(|warning| {
                format!(
                    "{} (seed {}): {}",
                    warning.text(cell.seeds_run),
                    warning.first_seed,
                    warning.message
                )
            })
            .collect();
        case.add_property(Property::new("warnings", warnings.join("; ")));
    }
    if !cell.faults.is_empty() {
        case.add_property(Property::new("faults", cell.faults_lines().join("; ")));
        case.add_property(Property::new(
            "seeds-all-faults-acted",
            cell.seeds_all_faults_acted.to_string(),
        ));
    }
    if let Some(not_run) = &cell.not_run {
        case.add_property(Property::new("seeds-not-run", not_run.seeds.to_string()));
        case.add_property(Property::new("not-run", not_run.reason.as_str()));
    }
    if let Some(seed) = cell.first_failing_seed.or(cell.first_unknown_seed) {
        case.add_property(Property::new("first-failing-seed", seed.to_string()));
    }
    if let Some(scenario) = summary.scenario(&cell.scenario) {
        case.add_property(Property::new("invariant", scenario.invariant.as_str()));
        case.add_property(Property::new("boundary", scenario.boundary.as_str()));
        if !scenario.tags.is_empty() {
            case.add_property(Property::new("tags", scenario.tags.join(" ")));
        }
    }
    if let Some(note) = summary
        .target(&cell.target)
        .and_then(|target| cell.expectation_note(target))
    {
        case.add_property(Property::new("expectation", note));
    }
    case
}

/// The check a reason starts with (`duplicate-effect: ...`), as the failure type.
fn decisive_check(reason: &str) -> String {
    reason
        .split_once(':')
        .map_or("invariant", |(check, _)| check)
        .to_owned()
}
