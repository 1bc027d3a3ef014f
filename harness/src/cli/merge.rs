//! `chaos merge`: the shard reports of one `--partition` run, combined.

use std::path::PathBuf;

use super::{check_writable, present, say, ReportArgs};
use crate::error::Error;
use crate::exit::Exit;
use crate::report::{json, merge};

#[derive(Debug, clap::Args)]
pub(super) struct MergeArgs {
    /// Every shard's report.json, in any order.
    #[arg(required = true)]
    shards: Vec<PathBuf>,
    #[command(flatten)]
    reports: ReportArgs,
}

pub(super) fn merge(args: MergeArgs) -> Result<Exit, Error> {
    check_writable(&args.reports)?;
    let mut shards = Vec::with_capacity(args.shards.len());
    for path in &args.shards {
        shards.push(json::read(path)?);
    }
    let summary = merge::merge(shards).map_err(|error| {
        // The error numbers the reports in the order given.
        let numbered: Vec<String> = args
            .shards
            .iter()
            .enumerate()
            .map(|(index, path)| format!("{} = {}", index + 1, path.display()))
            .collect();
        Error::Merge {
            error,
            reports: numbered.join(", "),
        }
    })?;
    say(
        &args.reports,
        format!(
            "chaos: merged {} shard(s): {}; {} scenario(s) x {} target(s)",
            args.shards.len(),
            summary.seeds_label(),
            summary.scenarios.len(),
            summary.targets.len()
        ),
    );
    present(&summary, &args.reports)
}
