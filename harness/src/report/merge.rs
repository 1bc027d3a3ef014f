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
    #[error("failed to merge: report {report} (shard {shard}) does not add up at {cell}: {why}; it was edited or cut short, so run that shard again")]
    Inconsistent {
        report: usize,
        shard: String,
        cell: String,
        why: String,
    },
}

/// Whether a shard holds what a shard of this run must: a cell for every
/// (scenario, target) with trials in its share and for no other, each with
/// no more trials than its share, and counts that add up. A report is a
/// file anyone can edit; a merge must not sum a deleted cell away or a
/// `seeds_run` of 10^12 in.
fn check_shard(report: usize, shard: &Summary) -> Result<(), MergeError> {
    let Some(partition) = shard.partition else {
        return Err(MergeError::NotAShard(report));
    };
    let per_cell = shard.seeds.count;
    let share = |cell: u64| {
        let before = |cell: u64| partition.share_of(cell.saturating_mul(per_cell));
        before(cell + 1) - before(cell)
    };
    let wrong = |cell: &str, why: String| MergeError::Inconsistent {
        report,
        shard: partition.to_string(),
        cell: cell.to_owned(),
        why,
    };
    let pairs = (shard.scenarios.iter())
        .flat_map(|scenario| (shard.targets.iter()).map(move |target| (scenario, target)));
    let mut expected_cells = 0;
    for (index, (scenario, target)) in pairs.enumerate() {
        let name = format!("{} x {}", scenario.name, target.name);
        // Not run in any shard: a cell of it is one too many (counted below).
        if shard.exclusion(&scenario.name, &target.name).is_some() {
            continue;
        }
        let trials = share(index as u64);
        let cell = shard.cell(&scenario.name, &target.name);
        let Some(cell) = cell else {
            if trials > 0 {
                return Err(wrong(
                    &name,
                    format!("the cell is missing, and {trials} trial(s) of it are this shard's"),
                ));
            }
            continue;
        };
        expected_cells += 1;
        let not_run = cell.not_run.as_ref().map_or(0, |not_run| not_run.seeds);
        let held = cell.seeds_run.saturating_add(not_run);
        // A cell that could not run stops early; any other holds its share.
        let fits = if cell.not_run.is_some() {
            held <= trials
        } else {
            held == trials
        };
        if !fits {
            return Err(wrong(
                &name,
                format!("{held} trial(s), and {trials} of it are this shard's"),
            ));
        }
        let most = |what: &str, count: u64| {
            (count > cell.seeds_run).then(|| {
                wrong(
                    &name,
                    format!("{what} {count} exceeds the {} seeds run", cell.seeds_run),
                )
            })
        };
        let counts = [
            (
                "seeds failed and undecided",
                cell.seeds_failed.saturating_add(cell.seeds_unknown),
            ),
            ("seeds with every fault acting", cell.seeds_all_faults_acted),
            (
                "seeds in the dispatch histogram",
                cell.dispatches.histogram.iter().map(|bin| bin.seeds).sum(),
            ),
        ];
        let tallies = (cell.checks.iter()).map(|count| ("seeds of a check", count.seeds));
        let faults =
            (cell.faults.iter()).map(|fault| ("seeds a fault acted on", fault.seeds_acted));
        let warnings = (cell.warnings.iter()).map(|warning| ("seeds of a warning", warning.seeds));
        for (what, count) in counts
            .into_iter()
            .chain(tallies)
            .chain(faults)
            .chain(warnings)
        {
            if let Some(error) = most(what, count) {
                return Err(error);
            }
        }
    }
    if shard.cells.len() != expected_cells {
        return Err(wrong(
            "its cells",
            format!(
                "{} cells, of which {expected_cells} are of its scenarios and targets",
                shard.cells.len()
            ),
        ));
    }
    Ok(())
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
        if shard.excluded != first.excluded {
            return Err(differs("exclusions"));
        }
        check_shard(report, shard)?;
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
