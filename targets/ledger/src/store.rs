//! Where the ledger keeps its records: a [`RecordStore`].
//!
//! The ledger's logic (authorize, bind the payload, claim, dispatch, record,
//! reconcile) is the same whatever holds the records; what differs is how a
//! store makes the two critical steps atomic:
//!
//! - the **claim**: of all the attempts racing on one operation, exactly one
//!   may create its record, and the others must see the record it created;
//! - the **transition**: a record leaves `pending`/`unknown` once, and a final
//!   state (`succeeded`, `rejected`) is never overwritten by a late writer.
//!
//! [`DiskStore`] does both on a [`Disk`] (the simulator's, or a directory of
//! fsynced files); the `postgres-ledger` and `redis-ledger` crates do them with
//! a unique constraint and guarded `UPDATE`s, and with `SET NX` and a Lua script.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use chaos_kit::disk::Disk;

use crate::record::Record;

/// What an operation is: who asked (the tenant, from the authority), for which
/// tool, under which Idempotency-Key. Two tenants may use the same key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Scope {
    pub tenant: String,
    pub tool: String,
    pub key: String,
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.tenant, self.tool, self.key)
    }
}

/// How a claim came out.
#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    /// This attempt created the record: it alone may dispatch.
    Won,
    /// A record was already there; here it is.
    Taken(Record),
}

/// A store that could not answer. The ledger turns this into an honest
/// `unknown` ("nothing was done" before a dispatch, "may have happened" after).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreError(pub String);

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StoreError {}

pub type StoreResult<T> = Result<T, StoreError>;

/// The ledger's durable memory. Every method must be durable when it returns:
/// a crash right after may not lose what it wrote.
pub trait RecordStore: Send + Sync + 'static {
    /// Creates `record` under `scope` unless a record is already there.
    fn claim(
        &self,
        scope: &Scope,
        record: &Record,
    ) -> impl Future<Output = StoreResult<Claim>> + Send;

    fn load(&self, scope: &Scope) -> impl Future<Output = StoreResult<Option<Record>>> + Send;

    /// Replaces the stored record by `record` (its new state), but only if the
    /// stored one is the same claim (same `created_at_ms`) and is still open
    /// (`pending` or `unknown`). Returns whether it did: `false` means someone
    /// else settled or replaced it first, and the caller must re-read.
    fn settle(
        &self,
        scope: &Scope,
        record: &Record,
    ) -> impl Future<Output = StoreResult<bool>> + Send;

    /// Removes the record under `scope` if it is still the claim created at
    /// `created_at_ms` (so an expiry never deletes a newer claim).
    fn forget(
        &self,
        scope: &Scope,
        created_at_ms: u64,
    ) -> impl Future<Output = StoreResult<()>> + Send;
}

/// Records on a [`Disk`]: the simulator's memory-backed disk, or a
/// [`chaos_kit::disk::FileDisk`] for the live `file-ledger`.
///
/// The disk's `insert_if_absent` is the claim. Transitions are a read and a
/// write, which is atomic only because one process owns the disk and the
/// ledger lets one attempt per operation work at a time (its in-flight set).
#[derive(Clone)]
pub struct DiskStore {
    disk: Arc<dyn Disk>,
}

impl DiskStore {
    pub fn new(disk: Arc<dyn Disk>) -> DiskStore {
        DiskStore { disk }
    }

    fn read(&self, scope: &str) -> StoreResult<Option<Record>> {
        match self.disk.get(scope) {
            None => Ok(None),
            Some(bytes) => Record::decode(&bytes)
                .map(Some)
                .ok_or_else(|| StoreError(format!("the record of {scope} is corrupt"))),
        }
    }
}

impl RecordStore for DiskStore {
    async fn claim(&self, scope: &Scope, record: &Record) -> StoreResult<Claim> {
        let key = scope.to_string();
        // A record can vanish between a lost claim and the read (an expiry);
        // then the claim is simply tried again.
        for _ in 0..3 {
            if self.disk.insert_if_absent(&key, &record.encode()) {
                return Ok(Claim::Won);
            }
            if let Some(existing) = self.read(&key)? {
                return Ok(Claim::Taken(existing));
            }
        }
        Err(StoreError(format!(
            "the record of {key} kept vanishing during the claim"
        )))
    }

    async fn load(&self, scope: &Scope) -> StoreResult<Option<Record>> {
        self.read(&scope.to_string())
    }

    async fn settle(&self, scope: &Scope, record: &Record) -> StoreResult<bool> {
        let key = scope.to_string();
        match self.read(&key)? {
            Some(stored)
                if stored.created_at_ms == record.created_at_ms && stored.state.is_open() =>
            {
                self.disk.put(&key, &record.encode());
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn forget(&self, scope: &Scope, created_at_ms: u64) -> StoreResult<()> {
        let key = scope.to_string();
        if self
            .read(&key)?
            .is_some_and(|stored| stored.created_at_ms == created_at_ms)
        {
            self.disk.remove(&key);
        }
        Ok(())
    }
}
