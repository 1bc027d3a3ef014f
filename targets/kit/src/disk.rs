//! Durable state: what a target keeps survives a crash only if it is on the disk.
//!
//! The interface is a tiny key-value store with an atomic insert, which is all a
//! single-process idempotency ledger needs. Every call is synchronous and durable
//! when it returns (the file-backed disk fsyncs), so a crash can never observe a
//! half-done write.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

pub trait Disk: Send + Sync + 'static {
    fn get(&self, key: &str) -> Option<Vec<u8>>;
    fn put(&self, key: &str, value: &[u8]);
    /// Stores `value` only when `key` is absent; returns whether it did.
    /// This is the claim: two attempts racing on one key cannot both win.
    fn insert_if_absent(&self, key: &str, value: &[u8]) -> bool;
    fn remove(&self, key: &str);
}

/// A disk that lives outside the simulated host, so it survives the host's crash
/// while everything the host kept in memory is lost.
#[derive(Debug, Clone, Default)]
pub struct MemoryDisk {
    entries: Arc<Mutex<BTreeMap<String, Vec<u8>>>>,
}

impl MemoryDisk {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Vec<u8>>> {
        // A poisoned lock means a target panicked mid-write; the data itself is
        // still a consistent map, and the harness reports the panic separately.
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Disk for MemoryDisk {
    fn get(&self, key: &str) -> Option<Vec<u8>> {
        self.lock().get(key).cloned()
    }

    fn put(&self, key: &str, value: &[u8]) {
        self.lock().insert(key.to_owned(), value.to_vec());
    }

    fn insert_if_absent(&self, key: &str, value: &[u8]) -> bool {
        let mut entries = self.lock();
        if entries.contains_key(key) {
            return false;
        }
        entries.insert(key.to_owned(), value.to_vec());
        true
    }

    fn remove(&self, key: &str) {
        self.lock().remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_if_absent_claims_once() {
        let disk = MemoryDisk::new();
        assert!(disk.insert_if_absent("k", b"first"));
        assert!(!disk.insert_if_absent("k", b"second"));
        assert_eq!(disk.get("k").as_deref(), Some(&b"first"[..]));
    }

    #[test]
    fn clones_share_the_same_platters() {
        let disk = MemoryDisk::new();
        let after_restart = disk.clone();
        disk.put("k", b"v");
        assert_eq!(after_restart.get("k").as_deref(), Some(&b"v"[..]));
    }
}
