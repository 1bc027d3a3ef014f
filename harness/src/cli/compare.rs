//! `chaos compare`: reports side by side, and the regressions between them.

use super::stdout::{out, outln};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use clap::ValueEnum;

use crate::error::Error;
use crate::exit::Exit;
use crate::report::{compare, json};

#[derive(Debug, clap::Args)]
pub(super) struct CompareArgs {
    /// Reports to compare, oldest first: regressions are read from each
    /// report to the next one holding the same target.
    #[arg(required = true)]
    reports: Vec<PathBuf>,
    /// table (terminal), markdown (pull-request comment) or json.
    #[arg(long, value_enum, default_value_t = CompareFormat::Table)]
    format: CompareFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum CompareFormat {
    Table,
    Markdown,
    Json,
}

pub(super) fn compare(args: CompareArgs) -> Result<Exit, Error> {
    let paths: Vec<&Path> = args.reports.iter().map(PathBuf::as_path).collect();
    let labels = compare::labels(&paths);
    let mut reports = Vec::with_capacity(paths.len());
    for (path, label) in paths.iter().zip(labels) {
        reports.push((label, json::read(path)?));
    }
    let comparison = compare::compare(&reports);
    match args.format {
        CompareFormat::Table => {
            let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            out!("{}", compare::render_table(&comparison, color));
        }
        CompareFormat::Markdown => out!("{}", compare::render_markdown(&comparison)),
        CompareFormat::Json => outln!(
            "{}",
            serde_json::to_string_pretty(&comparison).expect("a comparison always serialises")
        ),
    }
    Ok(comparison.exit())
}
