//! The terminal matrix: a row per scenario, a column per target; each cell the
//! verdict, the effects observed against those expected, and seeds failed / run
//! (or `not run: <reason>` when no trial of it ran). Under it, the footer: for
//! every cell that did not pass, every check that fired with its seeds, the
//! dispatches per seed and what each declared fault did on how many seeds.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{Cell, Color, ContentArrangement, Table};

use super::{verdict_label, CellSummary, Summary};
use crate::check::Status;

/// An empty table in the style of every table chaos prints. `color` is off
/// when output is not a terminal or `NO_COLOR` is set.
pub(crate) fn new_table(color: bool) -> Table {
    let mut table = Table::new();
    table
        .load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic);
    if !color {
        table.force_no_tty();
    }
    table
}

/// Renders the matrix. `color` is off when output is not a terminal or
/// `NO_COLOR` is set.
pub fn render(summary: &Summary, color: bool) -> String {
    let mut table = new_table(color);
    let mut header = vec![Cell::new("scenario")];
    header.extend(summary.targets.iter().map(|target| Cell::new(&target.name)));
    table.set_header(header);

    for scenario in rows(summary) {
        let mut row = vec![Cell::new(&scenario.name)];
        for target in &summary.targets {
            row.push(match summary.cell(&scenario.name, &target.name) {
                Some(cell) => render_cell(cell, color),
                None if summary.exclusion(&scenario.name, &target.name).is_some() => {
                    Cell::new("excluded")
                }
                None => Cell::new("-"),
            });
        }
        table.add_row(row);
    }
    table.to_string()
}

/// The scenarios the matrix has a row for: every one but those excluded
/// against every target (the table is for what ran).
pub(crate) fn rows(summary: &Summary) -> impl Iterator<Item = &super::ScenarioMeta> {
    summary.scenarios.iter().filter(|scenario| {
        !(summary.targets.iter())
            .all(|target| summary.exclusion(&scenario.name, &target.name).is_some())
    })
}

/// One line per pairing excluded before running, and why; what to say when
/// that was every pairing.
pub fn render_excluded(summary: &Summary) -> String {
    let mut out = String::new();
    for excluded in &summary.excluded {
        out.push_str(&excluded.line());
        out.push('\n');
    }
    if summary.nothing_tested() {
        out.push_str("nothing was tested: every scenario was excluded for every target (above); run scenarios the target's provider API can play (docs/live-mode.md lists them)\n");
    }
    out
}

fn render_cell(cell: &CellSummary, color: bool) -> Cell {
    let mut lines = vec![verdict_label(cell).to_owned()];
    // A reason can be a paragraph: the matrix shows its start, the footer all of it.
    lines.extend(cell.observed().into_iter().map(|line| shorten(&line, 40)));
    let rendered = Cell::new(lines.join("\n"));
    if !color {
        return rendered;
    }
    rendered.fg(match cell.verdict {
        Status::Pass => Color::Green,
        Status::Fail => Color::Red,
        Status::Unknown => Color::Yellow,
    })
}

/// `text` on one line, cut to `width` characters with an ellipsis.
fn shorten(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut short: String = text.chars().take(width - 1).collect();
    short.push('…');
    short
}

/// The lines under the table: for every cell that did not pass, the checks
/// that fired on how many seeds (or why it never ran), the first such seed's
/// reason, the dispatches per seed, and the command that replays it.
pub fn render_failures(summary: &Summary) -> String {
    let mut out = String::new();
    for cell in &summary.cells {
        if cell.verdict == Status::Pass {
            // What the pass hides: each warning, its seeds, its first seed.
            for warning in &cell.warnings {
                out.push_str(&format!(
                    "warning {} x {}: {} (seed {}): {}\n    rerun: {}\n",
                    cell.scenario,
                    cell.target,
                    warning.text(cell.seeds_run),
                    warning.first_seed,
                    warning.message,
                    warning.rerun
                ));
            }
            continue;
        }
        let verdict = match cell.verdict {
            Status::Fail => "FAIL",
            _ => "UNKNOWN",
        };
        let seed = cell.first_failing_seed.or(cell.first_unknown_seed);
        let seed = seed.map_or_else(|| "-".into(), |seed| seed.to_string());
        let reason = cell.reason.as_deref().unwrap_or("no reason recorded");
        let headline = cell.headline();
        if cell.never_ran() {
            out.push_str(&format!(
                "{verdict} {} x {}: {headline}\n",
                cell.scenario, cell.target
            ));
            // The whole reason: the headline has its first line only.
            if let Some(not_run) = &cell.not_run {
                for line in not_run.reason.lines().skip(1) {
                    out.push_str(&format!("    {line}\n"));
                }
            }
        } else if headline == reason {
            // One check says it all: the reason heads, its count follows.
            out.push_str(&format!(
                "{verdict} {} x {} (seed {seed}): {reason}\n",
                cell.scenario, cell.target
            ));
            out.push_str(&format!("    checks: {}\n", cell.checks_text()));
        } else {
            // Several: their counts head, the first seed's reason follows.
            out.push_str(&format!(
                "{verdict} {} x {}: {headline}\n",
                cell.scenario, cell.target
            ));
            out.push_str(&format!("    seed {seed}: {reason}\n"));
        }
        if let Some(dispatches) = cell.dispatches.text() {
            out.push_str(&format!("    dispatches per seed: {dispatches}\n"));
        }
        if !cell.never_ran() {
            for fault in cell.faults_lines() {
                out.push_str(&format!("    {fault}\n"));
            }
        }
        // The claim that broke, as the scenario states it.
        if let Some(scenario) = summary.scenario(&cell.scenario) {
            out.push_str(&format!(
                "    invariant ({}): {}\n",
                scenario.boundary, scenario.invariant
            ));
            if !scenario.tags.is_empty() {
                out.push_str(&format!("    tags: {}\n", scenario.tags.join(", ")));
            }
        }
        out.push_str(&format!(
            "    rerun: {}\n",
            cell.rerun.as_deref().unwrap_or("-")
        ));
    }
    for note in summary.expectation_notes() {
        out.push_str(&format!("note: {note}\n"));
    }
    out.push_str(&render_causes(summary));
    for (target, tool) in summary.declared_tools() {
        out.push_str(&format!(
            "declared {target}: MCP tool '{}' (called as {}): {}\n",
            tool.mcp_tool,
            tool.tool,
            tool.hints()
        ));
    }
    out
}

/// The findings grouped by check, most serious first: each with the cells
/// it fired in and its fix in one line, so a reader of many failing rows
/// reads a few causes (one missing replay header failed eight rows).
pub fn render_causes(summary: &Summary) -> String {
    let mut causes: Vec<(crate::check::Check, Vec<String>)> = Vec::new();
    for cell in (summary.cells.iter()).filter(|cell| cell.verdict != Status::Pass) {
        for count in &cell.checks {
            let name = format!("{} x {}", cell.scenario, cell.target);
            match causes.iter_mut().find(|(check, _)| *check == count.check) {
                Some((_, cells)) => cells.push(name),
                None => causes.push((count.check, vec![name])),
            }
        }
    }
    if causes.len() < 2 {
        return String::new();
    }
    causes.sort_by_key(|(check, _)| (check.seriousness(), check.specificity()));
    let mut out =
        String::from("causes, most serious first (`chaos explain CHECK` for a check's page):\n");
    for (check, cells) in causes {
        let shown: Vec<&str> = cells.iter().take(3).map(String::as_str).collect();
        let more = match cells.len() {
            0..=3 => String::new(),
            n => format!(" and {} more", n - 3),
        };
        out.push_str(&format!(
            "  {check} in {} cell(s): {}{more}\n    fix: {}\n",
            cells.len(),
            shown.join(", "),
            check.fix()
        ));
    }
    out
}

/// What to do after a run that did not pass: replay its first failing (else
/// undecided) cell's seed, and where its timeline is; `None` after a pass.
pub fn render_next(summary: &Summary, html: Option<&std::path::Path>) -> Option<String> {
    let cell = (summary.cells.iter())
        .find(|cell| cell.verdict == Status::Fail)
        .or_else(|| (summary.cells.iter()).find(|cell| cell.verdict == Status::Unknown))?;
    let mut next = match &cell.rerun {
        Some(rerun) => format!(
            "next: replay {} x {} alone with `{rerun}`",
            cell.scenario, cell.target
        ),
        None => format!(
            "next: {} x {} did not run; `chaos probe` against the target says why",
            cell.scenario, cell.target
        ),
    };
    if let Some(html) = html {
        next.push_str(&format!("; its timeline is in {}", html.display()));
    }
    Some(next)
}
