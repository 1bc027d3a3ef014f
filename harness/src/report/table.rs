//! The terminal matrix: a row per scenario, a column per target; each cell the
//! verdict, the effects observed against those expected, and seeds failed / run.

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

    for scenario in &summary.scenarios {
        let mut row = vec![Cell::new(&scenario.name)];
        for target in &summary.targets {
            row.push(match summary.cell(&scenario.name, &target.name) {
                Some(cell) => render_cell(cell, color),
                None => Cell::new("-"),
            });
        }
        table.add_row(row);
    }
    table.to_string()
}

fn render_cell(cell: &CellSummary, color: bool) -> Cell {
    let verdict = verdict_label(cell);
    let non_passing = cell.seeds_failed + cell.seeds_unknown;
    let text = format!(
        "{verdict}\n{}\n{non_passing}/{} seeds",
        cell.effects_text(),
        cell.seeds_run
    );
    let rendered = Cell::new(text);
    if !color {
        return rendered;
    }
    rendered.fg(match cell.verdict {
        Status::Pass => Color::Green,
        Status::Fail => Color::Red,
        Status::Unknown => Color::Yellow,
    })
}

/// The lines under the table: for every cell that did not pass, its reason and
/// the command that replays it.
pub fn render_failures(summary: &Summary) -> String {
    let mut out = String::new();
    for cell in &summary.cells {
        if cell.verdict == Status::Pass {
            continue;
        }
        let seed = cell.first_failing_seed.or(cell.first_unknown_seed);
        out.push_str(&format!(
            "{} {} x {} (seed {}): {}\n",
            match cell.verdict {
                Status::Fail => "FAIL",
                _ => "UNKNOWN",
            },
            cell.scenario,
            cell.target,
            seed.map_or_else(|| "-".into(), |seed| seed.to_string()),
            cell.reason.as_deref().unwrap_or("no reason recorded"),
        ));
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
    out
}
