//! The authorization lab's decision matrix: a row per case (each
//! `test = "authorization"` scenario), a column per target, each cell whether
//! every call of the case got its stated decision with no effect where it
//! was refused; and per target, "decisions matched n/7" beside what the
//! seed article published for that control variant.

use super::{Summary, TestKind};
use crate::check::Status;

/// What "Testing AI Agent Tool Authorization: Seven Reproducible Failure
/// Cases" published for each control variant, in its own words.
const PUBLISHED: [(&str, &str); 6] = [
    (
        "baseline",
        "2/7: \"the unchecked baseline matches 2 of 7 expected decisions\"",
    ),
    (
        "gate-no-identity",
        "opens case 7 (the article names no figure; the issue's reading)",
    ),
    ("gate-no-scope", "opens case 3: \"tool scope blocks it\""),
    (
        "gate-no-tenant",
        "opens case 2: \"the cross-tenant read becomes allowed\"",
    ),
    (
        "gate-no-approval",
        "opens cases 4 and 6: \"unapproved or modified sends become possible\"",
    ),
    (
        "gate",
        "7/7: \"with all four controls enabled, 7 of 7 decisions match\"",
    ),
];

/// What the lab published for `target`, if it is one of its variants.
pub fn published(target: &str) -> Option<&'static str> {
    PUBLISHED
        .iter()
        .find(|(name, _)| *name == target)
        .map(|(_, figure)| *figure)
}

/// One target's column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    pub target: String,
    /// Per case, in row order: `Some(true)` matched, `Some(false)` opened
    /// (a wrong decision or an effect), `None` not judged (not run, unknown).
    pub matched: Vec<Option<bool>>,
}

impl Column {
    pub fn count(&self) -> usize {
        self.matched
            .iter()
            .filter(|cell| **cell == Some(true))
            .count()
    }

    /// The 1-based cases this target got wrong.
    pub fn opened(&self) -> Vec<usize> {
        self.matched
            .iter()
            .enumerate()
            .filter(|(_, cell)| **cell == Some(false))
            .map(|(index, _)| index + 1)
            .collect()
    }

    /// "6/7, opens case 2", as the matrix's footer says it.
    pub fn figure(&self) -> String {
        let total = self.matched.len();
        let opened = self.opened();
        let cases = |numbers: &[usize]| {
            let words: Vec<String> = numbers.iter().map(usize::to_string).collect();
            match words.len() {
                1 => format!("case {}", words[0]),
                _ => format!(
                    "cases {} and {}",
                    words[..words.len() - 1].join(", "),
                    words[words.len() - 1]
                ),
            }
        };
        match opened.len() {
            0 => format!("{}/{total}", self.count()),
            _ => format!("{}/{total}, opens {}", self.count(), cases(&opened)),
        }
    }
}

/// One row: a case of the lab.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    pub name: String,
    pub description: String,
    pub tags: Vec<String>,
}

/// The matrix of `summary`'s authorization scenarios; `None` when it has none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matrix {
    /// The lab's own cases, or the faults beyond it (`scenarios/authorization/beyond/`).
    pub block: Block,
    /// Scenario name, description and tags, per case.
    pub cases: Vec<Case>,
    pub columns: Vec<Column>,
}

/// Which cases a matrix holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Block {
    /// The seven cases of the seed article, with its published figures.
    Lab,
    /// Approval replay and expiry, a revocation in flight, a forged tenant
    /// header: what the lab says it does not test, each a scenario under a
    /// `beyond/` directory. Nothing was published for them.
    Beyond,
}

impl Block {
    fn of(path: &str) -> Block {
        let beyond = std::path::Path::new(path)
            .parent()
            .and_then(std::path::Path::file_name)
            .is_some_and(|dir| dir == "beyond");
        if beyond {
            Block::Beyond
        } else {
            Block::Lab
        }
    }
}

impl Matrix {
    /// The lab's matrix: every authorization scenario not beyond it.
    pub fn of(summary: &Summary) -> Option<Matrix> {
        Matrix::block(summary, Block::Lab)
    }

    /// The matrix of the authorization scenarios beyond the lab.
    pub fn beyond(summary: &Summary) -> Option<Matrix> {
        Matrix::block(summary, Block::Beyond)
    }

    /// Both, the lab's first, those the run has.
    pub fn all(summary: &Summary) -> Vec<Matrix> {
        [Matrix::of(summary), Matrix::beyond(summary)]
            .into_iter()
            .flatten()
            .collect()
    }

    fn block(summary: &Summary, block: Block) -> Option<Matrix> {
        let cases: Vec<Case> = summary
            .scenarios
            .iter()
            .filter(|scenario| scenario.test == TestKind::Authorization)
            .filter(|scenario| Block::of(&scenario.path) == block)
            .map(|scenario| Case {
                name: scenario.name.clone(),
                description: scenario.description.clone(),
                tags: scenario.tags.clone(),
            })
            .collect();
        if cases.is_empty() {
            return None;
        }
        let columns = summary
            .targets
            .iter()
            .map(|target| Column {
                target: target.name.clone(),
                matched: cases
                    .iter()
                    .map(|case| {
                        let cell = summary.cell(&case.name, &target.name)?;
                        match cell.verdict {
                            Status::Pass => Some(true),
                            Status::Fail => Some(false),
                            Status::Unknown => None,
                        }
                    })
                    .collect(),
            })
            .collect();
        Some(Matrix {
            block,
            cases,
            columns,
        })
    }

    /// The matrix as plain text, for the terminal.
    pub fn render_text(&self) -> String {
        let mut table = super::table::new_table(false);
        let mut header = vec![match self.block {
            Block::Lab => "decision matched".to_owned(),
            Block::Beyond => "beyond the lab".to_owned(),
        }];
        header.extend(self.columns.iter().map(|column| column.target.clone()));
        table.set_header(header);
        for (row, case) in self.cases.iter().enumerate() {
            let mut cells = vec![case.name.clone()];
            cells.extend(
                self.columns
                    .iter()
                    .map(|column| cell_word(column.matched[row]).to_owned()),
            );
            table.add_row(cells);
        }
        let mut total = vec!["matched".to_owned()];
        total.extend(self.columns.iter().map(Column::figure));
        table.add_row(total);
        format!("{table}\n")
    }

    /// The matrix as Markdown, with the published figures beside chaos's.
    pub fn render_markdown(&self) -> String {
        let mut out = String::new();
        out.push_str("| case |");
        for column in &self.columns {
            out.push_str(&format!(" `{}` |", column.target));
        }
        out.push_str("\n|---|");
        out.push_str(&"---|".repeat(self.columns.len()));
        out.push('\n');
        for (row, case) in self.cases.iter().enumerate() {
            out.push_str(&format!("| `{}`: {}", case.name, case.description));
            if !case.tags.is_empty() {
                let tags: Vec<String> = case.tags.iter().map(|tag| format!("`{tag}`")).collect();
                out.push_str(&format!(" ({})", tags.join(", ")));
            }
            out.push_str(" |");
            for column in &self.columns {
                out.push_str(&format!(" {} |", cell_word(column.matched[row])));
            }
            out.push('\n');
        }
        out.push_str("| **chaos: decisions matched** |");
        for column in &self.columns {
            out.push_str(&format!(" **{}** |", column.figure()));
        }
        if self.block == Block::Lab {
            out.push_str("\n| published |");
            for column in &self.columns {
                out.push_str(&format!(" {} |", published(&column.target).unwrap_or("-")));
            }
        }
        out.push('\n');
        out
    }
}

/// The command that writes `reports/seeds/authorization.md`;
/// `harness/tests/seeds.rs` runs exactly it and fails when the file is stale.
pub const COMMAND: &str = "cargo run --release -p chaos -- run scenarios/authorization/*.toml scenarios/authorization/beyond/*.toml --target baseline --target gate-no-identity --target gate-no-scope --target gate-no-tenant --target gate-no-approval --target gate --target gate-reuses-approval --target gate-ignores-expiry --target gate-checks-once --target gate-trusts-header --target gate-export-unscoped --seeds 20 --out reports/seeds --emit decisions";

/// `authorization.md`: the lab reproduced, chaos's figures beside the
/// published ones. Only what a fixed run decides, so it is byte-stable.
pub fn render_document(summary: &Summary) -> String {
    let Some(matrix) = Matrix::of(summary) else {
        return "# Authorization lab\n\nThis run had no `test = \"authorization\"` scenario.\n"
            .into();
    };
    let mut out = String::new();
    out.push_str("# The authorization lab, reproduced\n\n");
    out.push_str(
        "The seed article \"Testing AI Agent Tool Authorization: Seven Reproducible Failure Cases\" \
         asks: \"if the unwanted call has already been proposed, can an authorization boundary refuse it \
         while preserving legitimate operations?\" Its fixture: \"The caller, Alex, belongs to tenant North. \
         Invoice INV-A belongs to North; INV-B belongs to South.\" Its four controls: active identity, \
         tool scope, tenant ownership resolved from the stored record, exact approval of actor, tool, \
         invoice, recipient and body.\n\n",
    );
    out.push_str(
        "chaos runs each case as a scenario under `scenarios/authorization/`, against the reference \
         target `gate` (all four controls), each control taken out (`gate-no-*`) and the `baseline` \
         (none), in the simulator. Each allowed call is dispatched to the provider, so a refused call \
         that leaked shows as an effect; a case matches when every call got its stated decision \
         and no denied or held call had an effect.\n\n",
    );
    out.push_str(&format!(
        "Regenerated by (a test fails when this file is stale):\n\n```sh\n{COMMAND}\n```\n\n"
    ));
    out.push_str(&format!(
        "{}; a case matches only where every seed of it did.\n\n",
        summary.seeds_label()
    ));
    out.push_str(&matrix.render_markdown());
    out.push_str(
        "\n\"Denied calls have no simulated effects\": the `wrong-decision` check fails any denied \
         or held call with an effect at the provider.\n\n\
         Not tested by the lab, as it says of itself: \"token validation, approval expiry or replay, \
         concurrent revocation, network egress, idempotent writes, or malicious final answers\". \
         The five `gate-*` variants weakened past the lab (`gate-reuses-approval`, `gate-ignores-expiry`, \
         `gate-checks-once`, `gate-trusts-header`, `gate-export-unscoped`) match all seven of its cases: \
         the lab cannot see them.\n",
    );
    if let Some(beyond) = Matrix::beyond(summary) {
        out.push_str(
            "\n## Beyond the lab, with faults\n\n\
             Each case under `scenarios/authorization/beyond/` injects what the lab leaves out: the \
             same approval used twice, an approval past its expiry (the clock jumps), the caller's \
             access revoked between the gate's introspection and its dispatch (`revoke` with \
             `after-introspection`), a tenant forged in an `X-Tenant` header, and the composition \
             failure the lab names and keeps out of scope: an export granted to the caller, whose \
             bulk route (the provider's `GET /records`) answers with every tenant's records. `gate` \
             uses an approval once, reads its expiry, asks the authority again right before \
             dispatching, takes the caller's tenant from the authority only, and checks the owner \
             of each record an export releases; each weakened variant gives up one of these. \
             `gate-export-unscoped` is the lab's own tenant control, which guards the single-record \
             route only (\"Tenant checks on individual reads do not protect this separate bulk \
             endpoint\"): the export is allowed, as it should be, and South's record reaches Alex, \
             caught by the `disclosure` check on the records the answer carried, not by the \
             decision. Nothing was published for these cases; the figure is chaos's alone.\n\n",
        );
        out.push_str(&beyond.render_markdown());
    }
    out
}

fn cell_word(cell: Option<bool>) -> &'static str {
    match cell {
        Some(true) => "match",
        Some(false) => "OPEN",
        None => "-",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_figure_names_the_opened_cases() {
        let column = |matched: Vec<Option<bool>>| Column {
            target: "t".into(),
            matched,
        };
        let all = column(vec![Some(true); 7]);
        assert_eq!(all.figure(), "7/7");
        let mut two = vec![Some(true); 7];
        two[3] = Some(false);
        two[5] = Some(false);
        assert_eq!(column(two).figure(), "5/7, opens cases 4 and 6");
        let mut one = vec![Some(true); 7];
        one[1] = None;
        one[6] = Some(false);
        assert_eq!(column(one).figure(), "5/7, opens case 7");
    }
}
