//! `summary.md`: the run as a pull-request comment. A headline, the matrix
//! (a row per scenario, a column per target), then every cell that did not
//! pass with every check that fired on how many seeds, its first seed's
//! reason and the command that replays it, then the dispatches per seed of
//! every cell. GitHub-flavoured Markdown; nothing machine-specific, so a
//! fixed run renders the same bytes.

use std::fmt::Write;

use super::{verdict_label, CellSummary, Summary};
use crate::check::Status;

pub fn render(summary: &Summary) -> String {
    let mut out = String::new();
    let totals = summary.totals();
    let headline = if summary.nothing_tested() {
        format!(
            "⚠️ nothing was tested: all {} pairing(s) excluded before running",
            summary.excluded.len()
        )
    } else if totals.failed > 0 {
        format!("❌ {} of {} cells failed", totals.failed, totals.cells)
    } else if totals.unknown > 0 {
        format!(
            "⚠️ {} of {} cells could not be decided",
            totals.unknown, totals.cells
        )
    } else {
        format!("✅ all {} cells passed", totals.cells)
    };
    let _ = writeln!(out, "## chaos: {headline}\n");
    let _ = writeln!(
        out,
        "chaos {} · {} transport · {} · {} scenario(s) × {} target(s){}\n",
        summary.chaos_version,
        summary.transport,
        summary.seeds_label(),
        summary.scenarios.len(),
        summary.targets.len(),
        match summary.payloads {
            super::Payloads::Redacted => "",
            super::Payloads::Included => " · payloads included",
        }
    );

    if summary.nothing_tested() {
        out.push_str(&render_exclusions(summary));
        return out;
    }
    out.push_str("| scenario |");
    for target in &summary.targets {
        let _ = write!(out, " {} |", escape(&target.name));
    }
    out.push_str("\n|---|");
    for _ in &summary.targets {
        out.push_str("---|");
    }
    out.push('\n');
    for scenario in super::table::rows(summary) {
        let _ = write!(out, "| {} |", escape(&scenario.name));
        for target in &summary.targets {
            match summary.cell(&scenario.name, &target.name) {
                Some(cell) => {
                    let _ = write!(out, " {} |", cell_text(cell));
                }
                None if summary.exclusion(&scenario.name, &target.name).is_some() => {
                    out.push_str(" excluded |")
                }
                None => out.push_str(" – |"),
            }
        }
        out.push('\n');
    }
    out.push_str(&render_exclusions(summary));
    out.push_str(
        "\nEach cell: the verdict, `effects X/Y` (the most side effects any one operation had / the most allowed: `2/1` is a customer charged twice; `×3` the most effects one intent had for each it was allowed), and seeds that did not pass / seeds run; `not run` when no trial of the cell could run.\n",
    );

    for target in &summary.targets {
        if let Some(agent) = &target.agent {
            let _ = writeln!(
                out,
                "\nThe agent's retry budget against {}: {}.",
                escape(&target.name),
                agent.describe()
            );
        }
    }

    if let Some(matrix) = super::decisions::Matrix::of(summary) {
        out.push_str("\n### Authorization decisions\n\n");
        out.push_str(&matrix.render_markdown());
    }
    if let Some(matrix) = super::decisions::Matrix::beyond(summary) {
        out.push_str("\n### Authorization decisions beyond the lab\n\n");
        out.push_str(&matrix.render_markdown());
    }
    let postures = super::posture::figures(summary);
    if !postures.is_empty() {
        out.push_str("\n### Postures\n\n");
        out.push_str(&super::posture::render_markdown(&postures));
    }

    let failing: Vec<&CellSummary> = summary
        .cells
        .iter()
        .filter(|cell| cell.verdict != Status::Pass)
        .collect();
    if !failing.is_empty() {
        let _ = writeln!(out, "\n### Did not pass ({})\n", failing.len());
        for cell in failing {
            let seed = cell.first_failing_seed.or(cell.first_unknown_seed);
            let seed = seed.map_or_else(|| "-".into(), |seed| seed.to_string());
            let reason = cell.reason.as_deref().unwrap_or("no reason recorded");
            let headline = cell.headline();
            let name = format!(
                "**{} × {}** — {}",
                escape(&cell.scenario),
                escape(&cell.target),
                verdict_label(cell)
            );
            if cell.never_ran() {
                let _ = writeln!(out, "- {name}: {}", escape(&headline));
            } else if headline == reason {
                let _ = writeln!(out, "- {name} (seed {seed}): {}", escape(reason));
                let _ = writeln!(out, "  - checks: {}", escape(&cell.checks_text()));
            } else {
                let _ = writeln!(out, "- {name}: {}", escape(&headline));
                let _ = writeln!(out, "  - seed {seed}: {}", escape(reason));
            }
            if let Some(dispatches) = cell.dispatches.text() {
                let _ = writeln!(out, "  - dispatches per seed: {}", escape(&dispatches));
            }
            if !cell.never_ran() {
                for fault in cell.faults_lines() {
                    let _ = writeln!(out, "  - {}", escape(&fault));
                }
            }
            if let Some(scenario) = summary.scenario(&cell.scenario) {
                let _ = writeln!(
                    out,
                    "  - invariant ({}): {}",
                    scenario.boundary,
                    escape(&scenario.invariant)
                );
                if !scenario.tags.is_empty() {
                    let tags: Vec<String> =
                        scenario.tags.iter().map(|tag| format!("`{tag}`")).collect();
                    let _ = writeln!(out, "  - tags: {}", tags.join(", "));
                }
            }
            if let Some(rerun) = &cell.rerun {
                let _ = writeln!(out, "  ```sh\n  {rerun}\n  ```");
            }
        }
    }
    let counted: Vec<(&CellSummary, String)> = (summary.cells.iter())
        .filter_map(|cell| Some((cell, cell.dispatches.text()?)))
        .collect();
    if !counted.is_empty() {
        out.push_str("\n<details><summary>Dispatches per seed</summary>\n\n");
        out.push_str("The provider's dispatches in each seed run (every operation's, passing seeds too): the range, and how many seeds made each number.\n\n");
        out.push_str("| scenario | target | dispatches |\n|---|---|---|\n");
        for (cell, dispatches) in counted {
            let _ = writeln!(
                out,
                "| {} | {} | {} |",
                escape(&cell.scenario),
                escape(&cell.target),
                escape(&dispatches)
            );
        }
        out.push_str("\n</details>\n");
    }
    let warned: Vec<&CellSummary> = (summary.cells.iter())
        .filter(|cell| cell.verdict == Status::Pass && !cell.warnings.is_empty())
        .collect();
    if !warned.is_empty() {
        let _ = writeln!(out, "\n### Passed with warnings ({})\n", warned.len());
        for cell in warned {
            for warning in &cell.warnings {
                let _ = writeln!(
                    out,
                    "- **{} × {}** — {} (seed {}): {}",
                    escape(&cell.scenario),
                    escape(&cell.target),
                    escape(&warning.text(cell.seeds_run)),
                    warning.first_seed,
                    escape(&warning.message)
                );
                let _ = writeln!(out, "  ```sh\n  {}\n  ```", warning.rerun);
            }
        }
    }
    let with_faults: Vec<&CellSummary> = (summary.cells.iter())
        .filter(|cell| !cell.faults.is_empty() && !cell.never_ran())
        .collect();
    if !with_faults.is_empty() {
        out.push_str("\n<details><summary>Faults acted</summary>\n\n");
        out.push_str("Each fault the scenario declares: on how many of the seeds run it acted, and what it did. A fault that never acted tested nothing.\n\n");
        out.push_str("| scenario | target | faults |\n|---|---|---|\n");
        for cell in with_faults {
            let _ = writeln!(
                out,
                "| {} | {} | {} |",
                escape(&cell.scenario),
                escape(&cell.target),
                escape(&cell.faults_lines().join("; "))
            );
        }
        out.push_str("\n</details>\n");
    }
    let declared = summary.declared_tools();
    if !declared.is_empty() {
        out.push_str("\n### MCP tools as their servers declare them\n\n");
        out.push_str(
            "Hints from `tools/list`, held to the ledger by `annotation-contradicted`.\n\n",
        );
        out.push_str("| target | MCP tool | called as | declared |\n|---|---|---|---|\n");
        for (target, tool) in declared {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} |",
                escape(target),
                escape(&tool.mcp_tool),
                escape(&tool.tool),
                escape(&tool.hints())
            );
        }
        let cancelled: Vec<&CellSummary> = (summary.cells.iter())
            .filter(|cell| cell.mcp_cancelled > 0)
            .collect();
        if !cancelled.is_empty() {
            out.push_str("\nCalls chaos cancelled with `notifications/cancelled` when the agent's timeout passed:\n\n");
            for cell in cancelled {
                let _ = writeln!(
                    out,
                    "- {} × {}: {} over {} seed(s)",
                    escape(&cell.scenario),
                    escape(&cell.target),
                    cell.mcp_cancelled,
                    cell.seeds_run
                );
            }
        }
        let resumed: Vec<&CellSummary> = (summary.cells.iter())
            .filter(|cell| !cell.mcp_resumed.is_empty())
            .collect();
        if !resumed.is_empty() {
            out.push_str(
                "
Streams cut before their result, resumed with `Last-Event-ID`:

",
            );
            for cell in resumed {
                let counts: Vec<String> = (cell.mcp_resumed.iter())
                    .map(|(resumed, count)| format!("{resumed} {count}"))
                    .collect();
                let _ = writeln!(
                    out,
                    "- {} × {}: {} over {} seed(s)",
                    escape(&cell.scenario),
                    escape(&cell.target),
                    counts.join(", "),
                    cell.seeds_run
                );
            }
        }
    }
    let notes = summary.expectation_notes();
    if !notes.is_empty() {
        out.push_str("\n### Expectations moved by a target's retention\n\n");
        for note in notes {
            let _ = writeln!(out, "- {}", escape(&note));
        }
    }
    out
}

fn cell_text(cell: &CellSummary) -> String {
    let icon = match cell.verdict {
        Status::Pass => "✅",
        Status::Fail => "❌",
        Status::Unknown => "⚠️",
    };
    format!(
        "{icon} {} · {}",
        verdict_label(cell),
        escape(&cell.observed().join(" · "))
    )
}

/// The pairings excluded before running, each with why; empty when none.
fn render_exclusions(summary: &Summary) -> String {
    let mut out = String::new();
    if summary.excluded.is_empty() {
        return out;
    }
    out.push_str(
        "\n### Excluded before running\n\nPairings the target cannot play, decided once each before any trial (no cell, no verdict):\n\n",
    );
    for excluded in &summary.excluded {
        let _ = writeln!(
            out,
            "- `{}` × {}: {}",
            excluded.scenario,
            escape(&excluded.target),
            escape(&excluded.reason)
        );
    }
    out
}

/// Keeps text from breaking the table or turning into markup.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '|' | '*' | '_' | '`' | '<' | '>' | '[' | ']' | '\\' => {
                out.push('\\');
                out.push(character);
            }
            '\n' => out.push(' '),
            _ => out.push(character),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_keeps_pipes_inside_a_cell() {
        assert_eq!(escape("a|b_c\nd"), "a\\|b\\_c d");
    }
}
