//! Every check's page, as rustc's `--explain` has one per error: what the
//! finding means, an example history, and how to fix the layer. One
//! Markdown file per check under `pages/`; `chaos explain CHECK` prints it,
//! the book's "Every check, explained" chapter is all of them
//! (`chaos explain --all`), and the one-line fix under a failing table
//! (`Check::fix`) and the "fails when" of docs/checks.md are read from it,
//! so the three cannot say different things.

use super::Check;

impl Check {
    /// This check's page (Markdown).
    pub fn page(self) -> &'static str {
        match self {
            Check::WrongDecision => include_str!("pages/wrong-decision.md"),
            Check::Disclosure => include_str!("pages/disclosure.md"),
            Check::ChangedPayloadDispatched => include_str!("pages/changed-payload-dispatched.md"),
            Check::ReplayForChangedPayload => include_str!("pages/replay-for-changed-payload.md"),
            Check::FalseConflict => include_str!("pages/false-conflict.md"),
            Check::DeniedButDispatched => include_str!("pages/denied-but-dispatched.md"),
            Check::DispatchedAfterRevocation => {
                include_str!("pages/dispatched-after-revocation.md")
            }
            Check::UnmarkedReplay => include_str!("pages/unmarked-replay.md"),
            Check::StaleApplied => include_str!("pages/stale-applied.md"),
            Check::ClaimWithoutEffect => include_str!("pages/claim-without-effect.md"),
            Check::RejectedWithEffect => include_str!("pages/rejected-with-effect.md"),
            Check::HeldWithEffect => include_str!("pages/held-with-effect.md"),
            Check::FailedWithEffect => include_str!("pages/failed-with-effect.md"),
            Check::ReceiptMismatch => include_str!("pages/receipt-mismatch.md"),
            Check::ExpiredNotRefused => include_str!("pages/expired-not-refused.md"),
            Check::ExpiredNotReconciled => include_str!("pages/expired-not-reconciled.md"),
            Check::AnnotationContradicted => include_str!("pages/annotation-contradicted.md"),
            Check::DuplicateEffect => include_str!("pages/duplicate-effect.md"),
            Check::MissingEffect => include_str!("pages/missing-effect.md"),
            Check::ExtraDispatch => include_str!("pages/extra-dispatch.md"),
            Check::UnattributedEffect => include_str!("pages/unattributed-effect.md"),
            Check::MissingReference => include_str!("pages/missing-reference.md"),
            Check::ReplanNotRefused => include_str!("pages/replan-not-refused.md"),
            Check::UnexpectedOutcome => include_str!("pages/unexpected-outcome.md"),
            Check::Stuck => include_str!("pages/stuck.md"),
            Check::FaultNeverActed => include_str!("pages/fault-never-acted.md"),
            Check::RunIncomplete => include_str!("pages/run-incomplete.md"),
            Check::RaceAbsorbedByProvider => include_str!("pages/race-absorbed-by-provider.md"),
            Check::LateEffect => include_str!("pages/late-effect.md"),
        }
    }

    /// The page's `Fix:` line: what to change in the layer (or the scenario).
    pub fn fix(self) -> &'static str {
        line(self.page(), "Fix: ")
    }

    /// The page's `Fails when:` line.
    pub fn fails_when(self) -> &'static str {
        line(self.page(), "Fails when: ")
    }
}

/// The text after `label` on the page's line that starts with it; a page
/// without one is caught by the tests below, never shown as empty.
fn line(page: &'static str, label: &str) -> &'static str {
    page.lines()
        .find_map(|line| line.strip_prefix(label))
        .unwrap_or("")
}

/// Every page, in the order of [`Check::ALL`]: the book's chapter.
pub fn all_pages() -> String {
    let mut out = String::from(
        "# Every check, explained\n\nOne page per check, as `chaos explain CHECK` prints it (this chapter is\n`chaos explain --all`; a test keeps it current).\n",
    );
    for (check, _) in Check::ALL {
        out.push('\n');
        // One level down, under the chapter's title.
        for line in check.page().lines() {
            if line.starts_with('#') {
                out.push('#');
            }
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_check_has_a_whole_page_under_its_own_name() {
        for (check, name) in Check::ALL {
            let page = check.page();
            assert!(
                page.starts_with(&format!("# `{name}`\n")),
                "{name}: the page's title is not its name"
            );
            for part in [
                "## What it means",
                "## An example",
                "## How to fix the layer",
            ] {
                assert!(page.contains(part), "{name}: no '{part}'");
            }
            assert!(check.fix().len() > 20, "{name}: no Fix: line");
            assert!(check.fails_when().len() > 20, "{name}: no Fails when: line");
        }
    }

    /// The book's chapter is `chaos explain --all`, byte for byte.
    #[test]
    fn the_book_chapter_is_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/explain.md");
        let found = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            found == all_pages(),
            "docs/explain.md is stale; regenerate it from the repository root with:\n    cargo run -p chaos -- explain --all > docs/explain.md"
        );
    }

    /// docs/checks.md's table says what each page's `Fails when:` says.
    #[test]
    fn the_checks_table_reads_the_pages() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/checks.md");
        let text = std::fs::read_to_string(&path).unwrap();
        for (check, name) in Check::ALL {
            let row = text
                .lines()
                .find(|line| line.starts_with(&format!("| `{name}`")))
                .unwrap_or_else(|| panic!("docs/checks.md has no row for `{name}`"));
            assert!(
                row.ends_with(&format!("| {} |", check.fails_when())),
                "docs/checks.md's row for `{name}` is not its page's Fails when: line:\n  {row}\n  | {} |",
                check.fails_when()
            );
        }
    }
}
