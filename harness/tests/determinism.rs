//! Same seed, same history: 200 seeds of every scenario run twice must produce
//! identical histories and ledgers (issue #2, item 1). Different seeds must not
//! all produce the same history, or the seed would be decoration.

mod common;

use std::collections::BTreeSet;

use chaos::plan::{Timing, Trial};
use chaos::sim;
use chaos::targets;

#[test]
fn the_same_seed_replays_the_same_history() {
    let targets = [
        targets::find("ledger").unwrap(),
        targets::find("args-hash").unwrap(),
    ];
    let mut mismatches = Vec::new();
    for scenario in common::all_scenarios() {
        for target in &targets {
            for seed in 0..200 {
                let trial = Trial::new(&scenario, seed, Timing::simulated(&scenario));
                let first = sim::simulate(&trial, target);
                let second = sim::simulate(&trial, target);
                if first != second {
                    mismatches.push(format!(
                        "{} x {} seed {seed}",
                        scenario.name, target.info.name
                    ));
                }
            }
        }
    }
    assert!(
        mismatches.is_empty(),
        "histories differ between two runs of: {mismatches:?}"
    );
}

#[test]
fn different_seeds_explore_different_schedules() {
    let scenario = common::scenario("concurrent-attempts");
    let target = targets::find("ledger").unwrap();
    let timelines: BTreeSet<String> = (0..50)
        .map(|seed| {
            let trial = Trial::new(&scenario, seed, Timing::simulated(&scenario));
            let run = sim::simulate(&trial, &target);
            run.history
                .attempts
                .iter()
                .map(|attempt| {
                    format!(
                        "{}.{}@{}-{}:{}",
                        attempt.worker,
                        attempt.attempt,
                        attempt.sent_at,
                        attempt.ended_at,
                        attempt.summary()
                    )
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    assert!(
        timelines.len() > 5,
        "50 seeds produced only {} distinct schedules",
        timelines.len()
    );
}
