//! `chaos merge`: the shard reports of one partitioned run, combined into the
//! report the whole run would have written. Cells fold the same way a run
//! folds its seeds (sums, maxima, and the same rule for which failing seeds
//! keep their detail), so the merge equals the unsharded report exactly.

use super::{CellSummary, Summary};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeError {
    #[error("failed to merge: no reports given. Pass every shard's report.json")]
    Empty,
    #[error("failed to merge: report {0} is not a shard (it was run without --partition); merge only the reports of `chaos run ... --partition K/N`")]
    NotAShard(usize),
    #[error("failed to merge: report {report} is shard {shard}, but report 1 is a shard of {total}; pass the shards of one run")]
    ShardCounts {
        report: usize,
        shard: String,
        total: u64,
    },
    #[error("failed to merge: shard {0} is given twice")]
    Duplicate(String),
    #[error("failed to merge: shard(s) {} missing; pass every shard's report (a run split {total} ways has {total})", missing.join(", "))]
    Missing { missing: Vec<String>, total: u64 },
    #[error("failed to merge: report {report} differs from report 1 in its {field}; the shards of one run share their scenarios, targets, seeds, transport, report settings and chaos version")]
    Mismatch { report: usize, field: &'static str },
}

/// Merges shard reports, given in any order. Report numbers in errors are
/// 1-based positions in `shards`.
pub fn merge(shards: Vec<Summary>) -> Result<Summary, MergeError> {
    let first = shards.first().ok_or(MergeError::Empty)?;
    let total = first.partition.ok_or(MergeError::NotAShard(1))?.total;
    let mut seen = vec![false; total as usize];
    for (index, shard) in shards.iter().enumerate() {
        let report = index + 1;
        let partition = shard.partition.ok_or(MergeError::NotAShard(report))?;
        if partition.total != total {
            return Err(MergeError::ShardCounts {
                report,
                shard: partition.to_string(),
                total,
            });
        }
        if std::mem::replace(&mut seen[partition.index as usize - 1], true) {
            return Err(MergeError::Duplicate(partition.to_string()));
        }
        let differs = |field| MergeError::Mismatch { report, field };
        if shard.schema_version != first.schema_version {
            return Err(differs("schema version"));
        }
        if shard.chaos_version != first.chaos_version {
            return Err(differs("chaos version"));
        }
        if shard.transport != first.transport {
            return Err(differs("transport"));
        }
        if shard.seeds != first.seeds {
            return Err(differs("seeds"));
        }
        if shard.payloads != first.payloads {
            return Err(differs("payload setting"));
        }
        if shard.failures_kept_per_cell != first.failures_kept_per_cell {
            return Err(differs("--keep-failures setting"));
        }
        if shard.scenarios != first.scenarios {
            return Err(differs("scenarios"));
        }
        if shard.targets != first.targets {
            return Err(differs("targets"));
        }
    }
    let missing: Vec<String> = seen
        .iter()
        .enumerate()
        .filter(|(_, seen)| !**seen)
        .map(|(index, _)| format!("{}/{total}", index + 1))
        .collect();
    if !missing.is_empty() {
        return Err(MergeError::Missing { missing, total });
    }

    let first_seed = first.seeds.first;
    let limit = first.failures_kept_per_cell;
    let mut merged = Summary {
        partition: None,
        cells: Vec::new(),
        ..first.clone()
    };
    let mut shard_cells: Vec<CellSummary> =
        shards.into_iter().flat_map(|shard| shard.cells).collect();
    // Scenario-major, in the run's order: the order an unsharded run reports.
    for scenario in &merged.scenarios {
        for target in &merged.targets {
            let mut parts = Vec::new();
            shard_cells.retain(|cell| {
                let ours = cell.scenario == scenario.name && cell.target == target.name;
                if ours {
                    parts.push(cell.clone());
                }
                !ours
            });
            let mut parts = parts.into_iter();
            let Some(mut cell) = parts.next() else {
                continue;
            };
            for part in parts {
                cell.absorb(part, first_seed, limit);
            }
            cell.settle();
            merged.cells.push(cell);
        }
    }
    // Settling re-derives each verdict from its seeds: a run that denied
    // warnings denies them again.
    if merged.warnings_denied {
        merged.deny_warnings();
    }
    Ok(merged)
}
