//! What a cell counts over its seeds besides pass and fail: which checks
//! fired on how many seeds, how many dispatches each seed made, and which
//! trials never ran. The first seed's reason alone misled (issue 14): on a
//! racy layer it said `stale-applied` while 29 of 40 seeds had duplicate
//! effects. Every tally sums, so a cell folds the same in any order and
//! shards merge into the unsharded run.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::check::Check;

/// One check, and on how many seeds of the cell it fired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckCount {
    pub check: Check,
    pub seeds: u64,
}

/// Counts one seed's distinct checks into `counts`, kept most specific first.
pub(crate) fn count_checks(counts: &mut Vec<CheckCount>, checks: BTreeSet<Check>) {
    for check in checks {
        add_check(counts, check, 1);
    }
}

/// Folds another part's counts (a shard's) into `counts`.
pub(crate) fn absorb_checks(counts: &mut Vec<CheckCount>, other: Vec<CheckCount>) {
    for count in other {
        add_check(counts, count.check, count.seeds);
    }
}

fn add_check(counts: &mut Vec<CheckCount>, check: Check, seeds: u64) {
    match counts.binary_search_by_key(&check, |count| count.check) {
        Ok(index) => counts[index].seeds += seeds,
        Err(index) => counts.insert(index, CheckCount { check, seeds }),
    }
}

/// `duplicate-effect 29/40, stale-applied 40/40`: each check over the seeds run.
pub fn checks_text(counts: &[CheckCount], seeds_run: u64) -> String {
    counts
        .iter()
        .map(|count| format!("{} {}/{seeds_run}", count.check, count.seeds))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The provider's dispatches in each seed that ran (every operation's,
/// passing seeds too): a race rate reads off the histogram without keeping
/// every failure's record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dispatches {
    /// The fewest one seed made; `null` when no seed ran.
    pub min: Option<u32>,
    /// The most one seed made; `null` when no seed ran.
    pub max: Option<u32>,
    /// How many seeds made each number of dispatches, fewest first; a number
    /// no seed made is left out.
    pub histogram: Vec<DispatchBin>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DispatchBin {
    pub dispatches: u32,
    pub seeds: u64,
}

impl Dispatches {
    /// Counts one seed that made `dispatches`.
    pub(crate) fn add(&mut self, dispatches: u32) {
        self.add_seeds(dispatches, 1);
    }

    /// Folds another part's histogram (a shard's) in.
    pub(crate) fn absorb(&mut self, other: Dispatches) {
        for bin in other.histogram {
            self.add_seeds(bin.dispatches, bin.seeds);
        }
    }

    fn add_seeds(&mut self, dispatches: u32, seeds: u64) {
        match (self.histogram).binary_search_by_key(&dispatches, |bin| bin.dispatches) {
            Ok(index) => self.histogram[index].seeds += seeds,
            Err(index) => self
                .histogram
                .insert(index, DispatchBin { dispatches, seeds }),
        }
        self.min = self.histogram.first().map(|bin| bin.dispatches);
        self.max = self.histogram.last().map(|bin| bin.dispatches);
    }

    /// `1..2 (1: 11 seeds, 2: 29 seeds)`, or `1 (40 seeds)`; `None` when no
    /// seed ran.
    pub fn text(&self) -> Option<String> {
        let (min, max) = self.min.zip(self.max)?;
        let range = if min == max {
            min.to_string()
        } else {
            format!("{min}..{max}")
        };
        let bins: Vec<String> = self
            .histogram
            .iter()
            .map(|bin| {
                let seeds = if bin.seeds == 1 { "seed" } else { "seeds" };
                if self.histogram.len() == 1 {
                    format!("{} {seeds}", bin.seeds)
                } else {
                    format!("{}: {} {seeds}", bin.dispatches, bin.seeds)
                }
            })
            .collect();
        Some(format!("{range} ({})", bins.join(", ")))
    }
}

/// Trials of a cell that never ran: the target never became ready, could
/// not be built, the scenario cannot be done on this transport. They are not
/// among the cell's seeds run, and the cell cannot pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotRun {
    /// How many trials were judged without running.
    pub seeds: u64,
    /// The first of them, in seed order.
    pub first_seed: u64,
    /// Why it could not run.
    pub reason: String,
}

impl NotRun {
    /// Folds in another trial (or a shard's trials) that did not run; the
    /// reason kept is the first seed's, whatever order they came in.
    pub(crate) fn absorb(slot: &mut Option<NotRun>, other: NotRun, first_seed: u64) {
        let Some(kept) = slot else {
            *slot = Some(other);
            return;
        };
        kept.seeds += other.seeds;
        if earlier(other.first_seed, kept.first_seed, first_seed) {
            kept.first_seed = other.first_seed;
            kept.reason = other.reason;
        }
    }

    /// `not run: the target never answered GET /healthz ...`, on one line.
    pub fn text(&self) -> String {
        let reason = self.reason.lines().next().unwrap_or_default();
        format!("not run: {reason}")
    }
}

/// Whether `seed` comes before `than` in a run starting at `first_seed`
/// (seeds wrap past `u64::MAX`): the order a cell keeps its first seed by,
/// whatever order seeds and shards arrive in.
pub(crate) fn earlier(seed: u64, than: u64, first_seed: u64) -> bool {
    seed.wrapping_sub(first_seed) < than.wrapping_sub(first_seed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_count_seeds_most_specific_first_in_any_order() {
        let mut forward = Vec::new();
        count_checks(&mut forward, [Check::DuplicateEffect].into());
        count_checks(
            &mut forward,
            [Check::DuplicateEffect, Check::StaleApplied].into(),
        );
        let mut backward = Vec::new();
        count_checks(
            &mut backward,
            [Check::StaleApplied, Check::DuplicateEffect].into(),
        );
        count_checks(&mut backward, [Check::DuplicateEffect].into());
        assert_eq!(forward, backward);
        assert_eq!(
            checks_text(&forward, 3),
            "stale-applied 1/3, duplicate-effect 2/3"
        );

        let mut merged = forward.clone();
        absorb_checks(&mut merged, backward);
        assert_eq!(
            checks_text(&merged, 6),
            "stale-applied 2/6, duplicate-effect 4/6"
        );
    }

    #[test]
    fn dispatches_keep_a_histogram_and_its_range() {
        let mut dispatches = Dispatches::default();
        assert_eq!(dispatches.text(), None);
        for count in [2, 1, 2, 2] {
            dispatches.add(count);
        }
        assert_eq!((dispatches.min, dispatches.max), (Some(1), Some(2)));
        assert_eq!(dispatches.text().unwrap(), "1..2 (1: 1 seed, 2: 3 seeds)");
        let mut other = Dispatches::default();
        other.add(0);
        dispatches.absorb(other);
        assert_eq!(dispatches.min, Some(0));
        assert_eq!(
            dispatches.histogram[0],
            DispatchBin {
                dispatches: 0,
                seeds: 1
            }
        );

        let mut same = Dispatches::default();
        same.add(1);
        same.add(1);
        assert_eq!(same.text().unwrap(), "1 (2 seeds)");
    }

    #[test]
    fn the_reason_not_run_is_the_first_seeds() {
        let not_run = |seed, reason: &str| NotRun {
            seeds: 1,
            first_seed: seed,
            reason: reason.into(),
        };
        let mut slot = None;
        NotRun::absorb(&mut slot, not_run(12, "later"), 10);
        NotRun::absorb(&mut slot, not_run(10, "first\nmore detail"), 10);
        NotRun::absorb(&mut slot, not_run(11, "middle"), 10);
        let slot = slot.unwrap();
        assert_eq!(slot.seeds, 3);
        assert_eq!(slot.first_seed, 10);
        assert_eq!(slot.text(), "not run: first");
    }
}
