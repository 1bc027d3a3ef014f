//! `replan.md` (`--emit replan`): the re-plan matrix of the seed article "A
//! retry is not a replay", every `test = "re-plan"` scenario of a run x every
//! target, with what each cell caught (the checks that fired, on how many
//! seeds); and the fourth seed's IdempotentStore demo (three attempts of one
//! charge: executed once, replayed twice, one charge), per target. Only what
//! a fixed run decides, so it is byte-stable.

use super::{verdict_label, CellSummary, Summary, TestKind};
use crate::check::Status;

/// The scenario that reproduces the IdempotentStore demo.
pub const DEMO: &str = "idempotent-store-demo";

/// The command that writes `reports/seeds/replan.md`;
/// `harness/tests/replan.rs` runs exactly it and fails when the file is stale.
pub const COMMAND: &str = "cargo run --release -p chaos -- run scenarios/replan-*.toml scenarios/three-charges.toml scenarios/seeds/idempotent-store-demo.toml --target fresh-key --target args-hash --target ledger --target runtime-ledger --seeds 20 --out reports/seeds --emit replan";

/// What one cell came to, in a few words: `pass, effects 1/1`, or
/// `FAIL, effects 3/1 ×3: duplicate-effect 20/20`, the checks that fired
/// being what the scenario caught.
pub fn cell_text(cell: &CellSummary) -> String {
    let mut text = format!("{}, {}", verdict_label(cell), cell.effects_text());
    if cell.never_ran() {
        return format!("{}: {}", verdict_label(cell), cell.headline());
    }
    if cell.verdict != Status::Pass && !cell.checks.is_empty() {
        text.push_str(&format!(": {}", cell.checks_text()));
    }
    text
}

/// The re-plan matrix as Markdown: a row per re-plan scenario, a column per
/// target, and per target how many scenarios it held; `None` when the run
/// had no re-plan scenario.
pub fn render_matrix(summary: &Summary) -> Option<String> {
    let scenarios: Vec<_> = (summary.scenarios.iter())
        .filter(|scenario| scenario.test == TestKind::RePlan)
        .collect();
    if scenarios.is_empty() {
        return None;
    }
    let mut out = String::from("| scenario |");
    for target in &summary.targets {
        out.push_str(&format!(" `{}` |", target.name));
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(summary.targets.len()));
    out.push('\n');
    for scenario in &scenarios {
        out.push_str(&format!("| `{}`: {}", scenario.name, scenario.description));
        if !scenario.tags.is_empty() {
            let tags: Vec<String> = (scenario.tags.iter())
                .map(|tag| format!("`{tag}`"))
                .collect();
            out.push_str(&format!(" ({})", tags.join(", ")));
        }
        out.push_str(" |");
        for target in &summary.targets {
            match summary.cell(&scenario.name, &target.name) {
                Some(cell) => out.push_str(&format!(" {} |", cell_text(cell))),
                None => out.push_str(" - |"),
            }
        }
        out.push('\n');
    }
    out.push_str("| **held** |");
    for target in &summary.targets {
        let held = (scenarios.iter())
            .filter_map(|scenario| summary.cell(&scenario.name, &target.name))
            .filter(|cell| cell.verdict == Status::Pass)
            .count();
        out.push_str(&format!(" **{held}/{}** |", scenarios.len()));
    }
    out.push('\n');
    Some(out)
}

/// The IdempotentStore demo, a row per target: its verdict, the charges at
/// the provider and the dispatches per seed; `None` when the run did not
/// have the demo's scenario.
pub fn render_demo(summary: &Summary) -> Option<String> {
    summary.scenario(DEMO)?;
    let mut out =
        String::from("| target | verdict | charges | dispatches per seed |\n|---|---|---|---|\n");
    for target in &summary.targets {
        let Some(cell) = summary.cell(DEMO, &target.name) else {
            continue;
        };
        let caught = match cell.verdict {
            Status::Pass => String::new(),
            _ => format!(": {}", cell.headline()),
        };
        out.push_str(&format!(
            "| `{}` | {}{caught} | {} | {} |\n",
            target.name,
            verdict_label(cell),
            cell.effects_text(),
            cell.dispatches.text().unwrap_or_else(|| "-".into())
        ));
    }
    Some(out)
}

/// `replan.md`: the re-plan matrix and the IdempotentStore demo.
pub fn render_document(summary: &Summary) -> String {
    let matrix = render_matrix(summary);
    let demo = render_demo(summary);
    if matrix.is_none() && demo.is_none() {
        return format!(
            "# Re-plans\n\nThis run had no `test = \"re-plan\"` scenario and no `{DEMO}`.\n"
        );
    }
    let mut out = String::from("# A retry is not a replay: the re-plan matrix\n\n");
    out.push_str(
        "The seed article \"A retry is not a replay\" opens on a ticket: \"One user message, one \
         planner turn, three calls to charge_card — each with a distinct tool-use ID, each \
         returning 200, each writing a different Stripe charge. [...] Every layer is idempotent. \
         The customer still paid three times.\" A retry re-sends one tool call under its key; a \
         re-plan is the planner deciding the step again, a new tool call with a new tool-use id \
         and, unless the runtime holds the key, a new Idempotency-Key. Each `test = \"re-plan\"` \
         scenario drives one way a step gets decided again (a timeout, a stall past it, an \
         injected \"the previous attempt failed\", subagents, a crash and replay, a second \
         approval, a drifted wording) against the reference targets: `fresh-key` (a new key per \
         attempt), `args-hash` (the key a hash of the tool and its arguments), `ledger` (a durable \
         claim per tenant, tool and the caller's Idempotency-Key, so a re-plan's new key is a new \
         operation) and `runtime-ledger` (the ledger keyed by run, step, tool and business scope, \
         and bound by intent).\n\n",
    );
    out.push_str(&format!(
        "Regenerated by (a test fails when this file is stale):\n\n```sh\n{COMMAND}\n```\n\n"
    ));
    out.push_str(&format!("{}.\n\n", summary.seeds_label()));
    if let Some(matrix) = matrix {
        out.push_str(&matrix);
        out.push_str(
            "\nEach cell: the verdict, `effects X/Y` (the most charges one intent had / the most \
             allowed; `×3` a customer charged three times), and, where the cell failed, what the \
             scenario caught: every check that fired, on how many of the seeds run.\n",
        );
    }
    if let Some(demo) = demo {
        out.push_str(
            "\n## The IdempotentStore demo\n\n\
             The fourth seed article's demo: an IdempotentStore keeps each key's first result, so \
             one charge sent three times under one key is \"executed once, replayed twice\", and \
             the customer pays once. `scenarios/seeds/idempotent-store-demo.toml` sends the charge \
             three times under the one key the orchestrator holds for it and expects `applied`, \
             then `replayed`, then `replayed` (a call that ends otherwise fails the cell), and one \
             charge at the provider. `ledger` is the reference target that keeps such a store: \
             each key's outcome and receipt, answered again to the next attempt. Unlike the \
             matrix above, nothing here decides the step again: the demo is the retry the store \
             was built for, and the re-plans are what it was not.\n\n",
        );
        out.push_str(&demo);
    }
    out
}
