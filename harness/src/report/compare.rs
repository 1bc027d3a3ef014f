//! `chaos compare A.json B.json ...`: reports side by side, Hermitage-style
//! (targets as columns, scenarios as rows, each cell pass or fail with its
//! effects), and, for a target found in more than one report, what changed
//! from one report to the next. A regression is a cell that went from pass to
//! fail, or a fault that acted in the earlier report and never in the later
//! one (a pass that stopped testing anything): the things a release gate must
//! not let through.

use std::collections::BTreeSet;
use std::fmt::Write;
use std::path::Path;

use comfy_table::{Cell, Color};
use serde::Serialize;

use super::{verdict_label, CellSummary, CheckCount, Dispatches, NotRun, Summary};
use crate::check::Status;
use crate::exit::Exit;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub reports: Vec<ReportInfo>,
    pub columns: Vec<Column>,
    pub rows: Vec<Row>,
    /// Every cell whose verdict differs between two reports of one target, in
    /// the order the reports were given.
    pub changes: Vec<Change>,
    /// Things a reader should know before trusting a change (different seeds...).
    pub notes: Vec<String>,
    /// The posture benchmark's figures of each report that ran it, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub postures: Vec<PostureFigure>,
}

/// One posture's figures in one report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PostureFigure {
    /// The report's label.
    pub report: String,
    pub figure: super::posture::Figure,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReportInfo {
    pub label: String,
    pub chaos_version: String,
    pub transport: String,
    pub seeds: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Column {
    /// The target's name, with the report's label when two reports share it.
    pub label: String,
    pub target: String,
    /// Index into `reports`.
    pub report: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub scenario: String,
    /// One per column; `null` where that report did not run the scenario.
    pub cells: Vec<Option<CompareCell>>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompareCell {
    pub verdict: Status,
    pub label: String,
    pub effects_observed_max: u32,
    pub effects_expected: u32,
    pub amplification_max: f64,
    pub seeds_not_passed: u64,
    pub seeds_run: u64,
    /// Every check that fired, with its seeds.
    pub checks: Vec<CheckCount>,
    pub dispatches: Dispatches,
    /// The trials that never ran, and why.
    pub not_run: Option<NotRun>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChangeKind {
    /// pass -> fail.
    Regression,
    /// fail -> pass.
    Fix,
    /// Any other change (to or from undecided).
    Changed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    pub kind: ChangeKind,
    pub target: String,
    pub scenario: String,
    pub from_report: String,
    pub to_report: String,
    pub from: Status,
    pub to: Status,
    /// Every check that fired on the earlier and the later cell, with its
    /// seeds (`stale-applied 3/40`); empty where none did.
    pub from_checks: String,
    pub to_checks: String,
    /// The faults that acted in the earlier cell and on no seed of the later
    /// one (each a regression, whatever the verdicts).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub faults_stopped: Vec<String>,
    /// Why the later report's cell did not pass, and how to replay it.
    pub reason: Option<String>,
    pub rerun: Option<String>,
}

impl Comparison {
    pub fn regressions(&self) -> impl Iterator<Item = &Change> {
        self.changes
            .iter()
            .filter(|change| change.kind == ChangeKind::Regression)
    }

    /// 1 when any cell regressed, else 0.
    pub fn exit(&self) -> Exit {
        if self.regressions().next().is_some() {
            Exit::InvariantViolated
        } else {
            Exit::Success
        }
    }
}

/// Short, distinct labels for report files: `base/report.json` is `base`,
/// `main.json` is `main`; clashes fall back to the path as given.
pub fn labels(paths: &[&Path]) -> Vec<String> {
    let short = |path: &Path| {
        let name = path.file_name().map(|name| name.to_string_lossy());
        match (name.as_deref(), path.parent()) {
            (Some("report.json"), Some(parent)) if !parent.as_os_str().is_empty() => {
                parent.display().to_string()
            }
            _ => path.with_extension("").display().to_string(),
        }
    };
    let shorts: Vec<String> = paths.iter().map(|path| short(path)).collect();
    shorts
        .iter()
        .enumerate()
        .map(|(index, label)| {
            let clash = shorts.iter().filter(|other| *other == label).count() > 1;
            if clash {
                format!("{} (#{})", paths[index].display(), index + 1)
            } else {
                label.clone()
            }
        })
        .collect()
}

/// Compares `reports`, each with its label, in the order given.
pub fn compare(reports: &[(String, Summary)]) -> Comparison {
    let infos: Vec<ReportInfo> = reports
        .iter()
        .map(|(label, summary)| ReportInfo {
            label: label.clone(),
            chaos_version: summary.chaos_version.clone(),
            transport: summary.transport.to_string(),
            seeds: summary.seeds_label(),
        })
        .collect();

    // A target's columns sit together, in report order, so a change reads
    // left to right.
    let mut targets: Vec<&str> = Vec::new();
    for (_, summary) in reports {
        for target in &summary.targets {
            if !targets.contains(&target.name.as_str()) {
                targets.push(&target.name);
            }
        }
    }
    let mut columns = Vec::new();
    for target in targets {
        for (report, (_, summary)) in reports.iter().enumerate() {
            if summary.targets.iter().any(|meta| meta.name == target) {
                columns.push(Column {
                    label: target.to_owned(),
                    target: target.to_owned(),
                    report,
                });
            }
        }
    }
    let shared: BTreeSet<String> = columns
        .iter()
        .filter(|column| {
            columns
                .iter()
                .filter(|other| other.target == column.target)
                .count()
                > 1
        })
        .map(|column| column.target.clone())
        .collect();
    for column in &mut columns {
        if shared.contains(&column.target) {
            column.label = format!("{} @ {}", column.target, infos[column.report].label);
        }
    }

    let mut scenarios: Vec<String> = Vec::new();
    for (_, summary) in reports {
        for scenario in &summary.scenarios {
            if !scenarios.contains(&scenario.name) {
                scenarios.push(scenario.name.clone());
            }
        }
    }
    let rows = scenarios
        .iter()
        .map(|scenario| Row {
            scenario: scenario.clone(),
            cells: columns
                .iter()
                .map(|column| {
                    reports[column.report]
                        .1
                        .cell(scenario, &column.target)
                        .map(compare_cell)
                })
                .collect(),
        })
        .collect();

    let mut changes = Vec::new();
    let mut notes = Vec::new();
    for target in &shared {
        let holding: Vec<usize> = (0..reports.len())
            .filter(|&report| {
                reports[report]
                    .1
                    .targets
                    .iter()
                    .any(|meta| &meta.name == target)
            })
            .collect();
        for pair in holding.windows(2) {
            let (before, after) = (&reports[pair[0]], &reports[pair[1]]);
            if before.1.seeds != after.1.seeds {
                let note = format!(
                    "{} ran {}, {} ran {}; a pass on fewer seeds is weaker evidence",
                    before.0,
                    before.1.seeds_label(),
                    after.0,
                    after.1.seeds_label()
                );
                if !notes.contains(&note) {
                    notes.push(note);
                }
            }
            for scenario in &scenarios {
                let (Some(from), Some(to)) = (
                    before.1.cell(scenario, target),
                    after.1.cell(scenario, target),
                ) else {
                    continue;
                };
                let faults_stopped = faults_stopped(from, to);
                if from.verdict == to.verdict && faults_stopped.is_empty() {
                    continue;
                }
                let kind = match (from.verdict, to.verdict) {
                    _ if !faults_stopped.is_empty() => ChangeKind::Regression,
                    (Status::Pass, Status::Fail) => ChangeKind::Regression,
                    (Status::Fail, Status::Pass) => ChangeKind::Fix,
                    _ => ChangeKind::Changed,
                };
                changes.push(Change {
                    kind,
                    target: target.clone(),
                    scenario: scenario.clone(),
                    from_report: before.0.clone(),
                    to_report: after.0.clone(),
                    from: from.verdict,
                    to: to.verdict,
                    from_checks: from.checks_text(),
                    to_checks: to.checks_text(),
                    faults_stopped,
                    reason: to.reason.clone(),
                    rerun: to.rerun.clone(),
                });
            }
        }
    }
    let postures = reports
        .iter()
        .flat_map(|(label, summary)| {
            super::posture::figures(summary)
                .into_iter()
                .map(|figure| PostureFigure {
                    report: label.clone(),
                    figure,
                })
        })
        .collect();
    Comparison {
        reports: infos,
        columns,
        rows,
        changes,
        notes,
        postures,
    }
}

impl CompareCell {
    /// The effects, or why no trial ran, as the run's own matrix says it.
    fn effects_text(&self) -> String {
        match &self.not_run {
            Some(not_run) if self.seeds_run == 0 => not_run.text(),
            _ => super::effects_text(
                self.effects_observed_max,
                self.effects_expected,
                self.amplification_max,
            ),
        }
    }
}

/// The faults that acted on some seed of `from` and on none of `to`: the
/// same place in the scenario, of the same kind (its settings may have been
/// edited); an optional one may stop.
fn faults_stopped(from: &CellSummary, to: &CellSummary) -> Vec<String> {
    let kind = |description: &str| description.split(':').next().unwrap_or_default().to_owned();
    (to.faults.iter())
        .filter(|fault| fault.idle() && to.seeds_run > 0)
        .filter(|fault| {
            (from.faults.iter()).any(|before| {
                before.fault == fault.fault
                    && kind(&before.description) == kind(&fault.description)
                    && before.seeds_acted > 0
            })
        })
        .map(|fault| format!("fault {} {}", fault.fault, fault.description))
        .collect()
}

fn compare_cell(cell: &CellSummary) -> CompareCell {
    CompareCell {
        verdict: cell.verdict,
        label: verdict_label(cell),
        effects_observed_max: cell.effects_observed_max,
        effects_expected: cell.effects_expected,
        amplification_max: cell.amplification_max,
        seeds_not_passed: cell.seeds_failed + cell.seeds_unknown,
        seeds_run: cell.seeds_run,
        checks: cell.checks.clone(),
        dispatches: cell.dispatches.clone(),
        not_run: cell.not_run.clone(),
    }
}

/// The matrix and the changes, for a terminal.
pub fn render_table(comparison: &Comparison, color: bool) -> String {
    let mut table = super::table::new_table(color);
    let mut header = vec![Cell::new("scenario")];
    header.extend(
        comparison
            .columns
            .iter()
            .map(|column| Cell::new(&column.label)),
    );
    table.set_header(header);
    for row in &comparison.rows {
        let mut cells = vec![Cell::new(&row.scenario)];
        for cell in &row.cells {
            cells.push(match cell {
                None => Cell::new("-"),
                Some(cell) => {
                    let text = format!("{}\n{}", cell.label, cell.effects_text());
                    let rendered = Cell::new(text);
                    if color {
                        rendered.fg(match cell.verdict {
                            Status::Pass => Color::Green,
                            Status::Fail => Color::Red,
                            Status::Unknown => Color::Yellow,
                        })
                    } else {
                        rendered
                    }
                }
            });
        }
        table.add_row(cells);
    }
    let mut out = format!("{table}\n");
    if !comparison.postures.is_empty() {
        let mut postures = super::table::new_table(false);
        postures.set_header(vec![
            "posture",
            "report",
            "attack success",
            "benign blocked",
            "leaked",
        ]);
        for posture in &comparison.postures {
            postures.add_row(vec![
                posture.figure.target.clone(),
                posture.report.clone(),
                posture.figure.attack_text(),
                posture.figure.benign_text(),
                posture.figure.leaked_text(),
            ]);
        }
        out.push_str(&format!("{postures}\n"));
    }
    out.push_str(&render_changes(comparison, false));
    out
}

/// The matrix and the changes, for a pull-request comment.
pub fn render_markdown(comparison: &Comparison) -> String {
    let mut out = String::from("## chaos compare\n\n");
    for report in &comparison.reports {
        let _ = writeln!(
            out,
            "- **{}**: chaos {} · {} transport · {}",
            report.label, report.chaos_version, report.transport, report.seeds
        );
    }
    out.push_str("\n| scenario |");
    for column in &comparison.columns {
        let _ = write!(out, " {} |", column.label.replace('|', "\\|"));
    }
    out.push_str("\n|---|");
    for _ in &comparison.columns {
        out.push_str("---|");
    }
    out.push('\n');
    for row in &comparison.rows {
        let _ = write!(out, "| {} |", row.scenario);
        for cell in &row.cells {
            match cell {
                None => out.push_str(" – |"),
                Some(cell) => {
                    let icon = match cell.verdict {
                        Status::Pass => "✅",
                        Status::Fail => "❌",
                        Status::Unknown => "⚠️",
                    };
                    let _ = write!(out, " {icon} {} · {} |", cell.label, cell.effects_text());
                }
            }
        }
        out.push('\n');
    }
    if !comparison.postures.is_empty() {
        out.push_str("\n| posture | report | attack success | benign blocked | leaked |\n|---|---|---|---|---|\n");
        for posture in &comparison.postures {
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} | {} |",
                posture.figure.target,
                posture.report,
                posture.figure.attack_text(),
                posture.figure.benign_text(),
                posture.figure.leaked_text()
            );
        }
    }
    let changes = render_changes(comparison, true);
    if !changes.is_empty() {
        out.push('\n');
        out.push_str(&changes);
    }
    out
}

fn render_changes(comparison: &Comparison, markdown: bool) -> String {
    let mut out = String::new();
    for note in &comparison.notes {
        let _ = writeln!(out, "note: {note}");
    }
    let shared = comparison
        .columns
        .iter()
        .map(|column| &column.target)
        .collect::<BTreeSet<_>>()
        .len()
        < comparison.columns.len();
    if comparison.changes.is_empty() {
        if shared {
            out.push_str("no changes between the reports\n");
        }
        return out;
    }
    let regressions = comparison.regressions().count();
    let heading = format!(
        "{} change(s), {regressions} regression(s)",
        comparison.changes.len()
    );
    if markdown {
        let _ = writeln!(out, "### {heading}\n");
    } else {
        let _ = writeln!(out, "{heading}:");
    }
    for change in &comparison.changes {
        let kind = match change.kind {
            ChangeKind::Regression => "REGRESSION",
            ChangeKind::Fix => "fixed",
            ChangeKind::Changed => "changed",
        };
        let what = format!(
            "{} x {}: {} in {} -> {} in {}",
            change.scenario,
            change.target,
            change.from,
            change.from_report,
            change.to,
            change.to_report
        );
        let stopped = (!change.faults_stopped.is_empty()).then(|| {
            format!(
                "stopped acting (nothing was tested): {}",
                change.faults_stopped.join("; ")
            )
        });
        if markdown {
            let _ = write!(out, "- **{kind}** {what}");
            if let Some(checks) = checks_change(change) {
                let _ = write!(out, "  \n  {checks}");
            }
            if let Some(stopped) = &stopped {
                let _ = write!(out, "  \n  {stopped}");
            }
            if let Some(reason) = &change.reason {
                let _ = write!(out, "  \n  {reason}");
            }
            if let Some(rerun) = &change.rerun {
                let _ = write!(out, "  \n  `{rerun}`");
            }
            out.push('\n');
        } else {
            let _ = writeln!(out, "{kind} {what}");
            if let Some(checks) = checks_change(change) {
                let _ = writeln!(out, "    {checks}");
            }
            if let Some(stopped) = &stopped {
                let _ = writeln!(out, "    {stopped}");
            }
            if let Some(reason) = &change.reason {
                let _ = writeln!(out, "    {reason}");
            }
            if let Some(rerun) = &change.rerun {
                let _ = writeln!(out, "    rerun: {rerun}");
            }
        }
    }
    out
}

/// `checks: none -> stale-applied 3/40`, when the checks that fired changed.
fn checks_change(change: &Change) -> Option<String> {
    if change.from_checks == change.to_checks {
        return None;
    }
    let side = |checks: &str| {
        if checks.is_empty() {
            "none".to_owned()
        } else {
            checks.to_owned()
        }
    };
    Some(format!(
        "checks: {} -> {}",
        side(&change.from_checks),
        side(&change.to_checks)
    ))
}
