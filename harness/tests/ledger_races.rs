//! Races inside the reference ledger that only show when its durable writes
//! take time, as they do live (an fsync, a database round trip) and do not in
//! the simulator's instant disk. The ledger here is the real one over the
//! simulator's disk, with every write made slow in simulated time.

mod common;

use std::time::Duration;

use chaos::SimTarget;
use chaos::Status;
use target_ledger::{Claim, DiskStore, KeyFrom, Options, Record, RecordStore, Scope, StoreError};

/// About what an fsync costs on the CI machine's disk.
const DURABLE_WRITE: Duration = Duration::from_millis(2);

/// A [`DiskStore`] whose writes return only after [`DURABLE_WRITE`]; reads are instant.
struct SlowDurableWrites(DiskStore);

impl RecordStore for SlowDurableWrites {
    async fn claim(&self, scope: &Scope, record: &Record) -> Result<Claim, StoreError> {
        let claim = self.0.claim(scope, record).await;
        // Only a claim that wrote something waits for the disk; losers only read.
        if claim == Ok(Claim::Won) {
            tokio::time::sleep(DURABLE_WRITE).await;
        }
        claim
    }

    async fn load(&self, scope: &Scope) -> Result<Option<Record>, StoreError> {
        self.0.load(scope).await
    }

    async fn settle(&self, scope: &Scope, record: &Record) -> Result<bool, StoreError> {
        let settled = self.0.settle(scope, record).await;
        tokio::time::sleep(DURABLE_WRITE).await;
        settled
    }

    async fn forget(&self, scope: &Scope, created_at_ms: u64) -> Result<(), StoreError> {
        let forgotten = self.0.forget(scope, created_at_ms).await;
        tokio::time::sleep(DURABLE_WRITE).await;
        forgotten
    }
}

/// The ledger keyed by the run's structure (`runtime-ledger`), the one that
/// holds in every scenario, re-plans included; the claim and reconcile
/// logic under test is the same whichever key it uses.
fn ledger_with_slow_writes() -> SimTarget {
    SimTarget {
        info: target_ledger::runtime_info(),
        serve: |listener, shutdown, env| {
            let store = SlowDurableWrites(DiskStore::new(env.disk.clone()));
            let options = Options {
                key_from: KeyFrom::Structure,
                ..Options::new(target_ledger::RETENTION)
            };
            Box::pin(target_ledger::serve_with(
                listener, shutdown, env, store, options,
            ))
        },
    }
}

/// Stop 6's CI run: `file-ledger` dispatched twice at concurrent-attempts. The
/// winner of the claim marked the operation in flight only once its claim was
/// durable; in between, a second attempt took the fresh `pending` record for a
/// dead worker's, found nothing at the provider and dispatched beside it.
#[test]
fn a_slow_claim_does_not_let_a_second_attempt_dispatch() {
    let target = ledger_with_slow_writes();
    for name in ["concurrent-attempts", "concurrent-attempts-keyed"] {
        let scenario = common::scenario(name);
        let failures: Vec<String> = (0..100)
            .filter_map(|seed| {
                let verdict = common::trial(&scenario, &target, seed).0;
                (verdict.status != Status::Pass)
                    .then(|| format!("seed {seed}: {}", verdict.reason().unwrap_or_default()))
            })
            .collect();
        assert!(failures.is_empty(), "{name}: {failures:#?}");
    }
}

/// Every scenario still holds with slow writes: nothing in the ledger leans on
/// its disk being instant.
#[test]
fn every_scenario_holds_with_slow_durable_writes() {
    let target = ledger_with_slow_writes();
    let mut failures = Vec::new();
    for scenario in common::all_scenarios() {
        for seed in 0..30 {
            let verdict = common::trial(&scenario, &target, seed).0;
            if verdict.status != Status::Pass {
                let reason = verdict.reason().unwrap_or_default();
                failures.push(format!("{} seed {seed}: {reason}", scenario.name));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
