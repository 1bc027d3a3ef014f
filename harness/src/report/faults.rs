//! A cell's `faults` block: each fault its scenario declares, on how many of
//! the seeds run it acted, and what it did. A pass means the fault happened
//! and the layer held; this block is the first half's evidence. Every count
//! sums, so shards merge into the unsharded run and cells compare.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::history::FaultEvent;
use crate::scenario::Scenario;

/// One declared fault over a cell's seeds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultTally {
    /// Its place in the scenario file, from 1.
    pub fault: usize,
    /// The fault's kind and what it is (`lose-response: the answer of dispatch 1 lost ...`).
    pub description: String,
    /// Declared `optional = true`: it may never act without leaving a trial
    /// `unknown`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
    /// Of the seeds run, how many it acted on at least once.
    pub seeds_acted: u64,
    /// What it did, each act counted over every seed, in the order first seen.
    pub acts: Vec<ActCount>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActCount {
    pub what: String,
    pub count: u64,
}

/// Every fault `scenario` declares, none acted yet.
pub(crate) fn declared(scenario: &Scenario) -> Vec<FaultTally> {
    (scenario.faults.iter().enumerate())
        .map(|(index, fault)| FaultTally {
            fault: index + 1,
            description: format!("{}: {fault}", fault.kind()),
            optional: scenario.optional_faults.contains(&index),
            seeds_acted: 0,
            acts: Vec::new(),
        })
        .collect()
}

/// Counts one seed's acts into `tallies`; whether every fault that must act did.
pub(crate) fn count_seed(tallies: &mut [FaultTally], events: &[FaultEvent]) -> bool {
    let mut acted = BTreeSet::new();
    for (index, what) in events.iter().filter_map(FaultEvent::act) {
        let Some(tally) = tallies.get_mut(index) else {
            continue;
        };
        acted.insert(index);
        add_act(&mut tally.acts, what, 1);
    }
    for index in &acted {
        tallies[*index].seeds_acted += 1;
    }
    (tallies.iter().enumerate()).all(|(index, tally)| tally.optional || acted.contains(&index))
}

/// Folds another part's tallies (a shard's, of the same scenario) in.
pub(crate) fn absorb(tallies: &mut Vec<FaultTally>, other: Vec<FaultTally>) {
    if tallies.is_empty() {
        *tallies = other;
        return;
    }
    for (tally, theirs) in tallies.iter_mut().zip(other) {
        tally.seeds_acted += theirs.seeds_acted;
        for act in theirs.acts {
            add_act(&mut tally.acts, act.what, act.count);
        }
    }
}

fn add_act(acts: &mut Vec<ActCount>, what: String, count: u64) {
    match acts.iter_mut().find(|act| act.what == what) {
        Some(act) => act.count += count,
        None => acts.push(ActCount { what, count }),
    }
}

impl FaultTally {
    /// `fault 1 lose-response provider-to-target nth = 1: acted on 20/20 seeds (lost an answer provider-to-target (held) x20)`.
    pub fn text(&self, seeds_run: u64) -> String {
        let acts: Vec<String> = (self.acts.iter())
            .map(|act| format!("{} x{}", act.what, act.count))
            .collect();
        let optional = if self.optional { ", optional" } else { "" };
        let did = if acts.is_empty() {
            String::new()
        } else {
            format!(" ({})", acts.join(", "))
        };
        format!(
            "fault {} {}: acted on {}/{seeds_run} seeds{optional}{did}",
            self.fault, self.description, self.seeds_acted
        )
    }

    /// Whether it must act and acted on no seed.
    pub fn idle(&self) -> bool {
        !self.optional && self.seeds_acted == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::Action;
    use crate::history::Happened;

    fn tallies() -> Vec<FaultTally> {
        vec![
            FaultTally {
                fault: 1,
                description: "first".into(),
                optional: false,
                seeds_acted: 0,
                acts: Vec::new(),
            },
            FaultTally {
                fault: 2,
                description: "second".into(),
                optional: true,
                seeds_acted: 0,
                acts: Vec::new(),
            },
        ]
    }

    fn stall(index: usize) -> FaultEvent {
        FaultEvent {
            at: 1,
            what: Happened::Fault {
                index,
                action: Action::Stall,
            },
            description: String::new(),
        }
    }

    #[test]
    fn a_seed_counts_once_per_fault_and_each_act_is_counted() {
        let mut counted = tallies();
        assert!(count_seed(&mut counted, &[stall(0), stall(0)]));
        assert!(!count_seed(&mut counted, &[stall(1)]), "fault 1 must act");
        assert_eq!(counted[0].seeds_acted, 1);
        assert_eq!(counted[0].acts[0].count, 2);
        assert_eq!(counted[1].seeds_acted, 1);
        assert_eq!(
            counted[0].text(2),
            "fault 1 first: acted on 1/2 seeds (stalled a dispatch past the agent's timeout x2)"
        );
        assert!(!counted[0].idle());
        let mut merged = tallies();
        absorb(&mut merged, counted.clone());
        absorb(&mut merged, counted);
        assert_eq!(merged[0].seeds_acted, 2);
        assert_eq!(merged[0].acts[0].count, 4);
        assert!(tallies()[0].idle() && !tallies()[1].idle());
    }
}
