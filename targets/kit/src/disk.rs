//! Durable state: what a target keeps survives a crash only if it is on the disk.
//!
//! The interface is a tiny key-value store with an atomic insert, which is all a
//! single-process idempotency ledger needs. Every call is synchronous and durable
//! when it returns (the file-backed disk fsyncs), so a crash can never observe a
//! half-done write.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
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

/// A disk on the real file system, for a target running as a process: one file
/// per key in a directory, and every change fsynced (the file, then the
/// directory that names it) before the call returns. A `SIGKILL` at any
/// instant leaves each key either absent or holding a whole value.
///
/// The trait is infallible, as a disk in the simulator cannot fail; a real one
/// can, and a target must not carry on as if a claim were recorded when it was
/// not, so an I/O error panics with what failed. The panic takes down only the
/// request's connection, which its caller sees as an ambiguous reset.
#[derive(Debug)]
pub struct FileDisk {
    dir: PathBuf,
    /// Names temporary files apart within this process (the pid tells processes apart).
    next_temporary: AtomicU64,
}

impl FileDisk {
    /// Opens (creating if needed) the directory `dir` as a disk.
    pub fn open(dir: impl Into<PathBuf>) -> io::Result<FileDisk> {
        let dir = dir.into();
        fs::create_dir_all(&dir)?;
        Ok(FileDisk {
            dir,
            next_temporary: AtomicU64::new(0),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Keys may hold any character (`tenant/tool/key`); file names may not, so
    /// each key is stored under its hex spelling.
    fn path_of(&self, key: &str) -> PathBuf {
        let name: String = key.bytes().map(|byte| format!("{byte:02x}")).collect();
        self.dir.join(format!("k-{name}"))
    }

    /// Writes `value` into a new temporary file and fsyncs it, so that linking
    /// or renaming it into place publishes a whole, durable value at once.
    fn write_temporary(&self, value: &[u8]) -> io::Result<PathBuf> {
        let number = self.next_temporary.fetch_add(1, Ordering::Relaxed);
        let path = self
            .dir
            .join(format!(".tmp-{}-{number}", std::process::id()));
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)?;
        file.write_all(value)?;
        file.sync_all()?;
        Ok(path)
    }

    /// A new, removed or renamed name is durable only once its directory is synced.
    fn sync_dir(&self) -> io::Result<()> {
        File::open(&self.dir)?.sync_all()
    }

    fn try_get(&self, key: &str) -> io::Result<Option<Vec<u8>>> {
        match fs::read(self.path_of(key)) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error),
        }
    }

    fn try_put(&self, key: &str, value: &[u8]) -> io::Result<()> {
        let temporary = self.write_temporary(value)?;
        fs::rename(&temporary, self.path_of(key))?;
        self.sync_dir()
    }

    fn try_insert_if_absent(&self, key: &str, value: &[u8]) -> io::Result<bool> {
        let temporary = self.write_temporary(value)?;
        // link(2) fails if the name exists, atomically, even between processes:
        // this is the claim.
        let claimed = match fs::hard_link(&temporary, self.path_of(key)) {
            Ok(()) => true,
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => false,
            Err(error) => {
                let _ = fs::remove_file(&temporary);
                return Err(error);
            }
        };
        fs::remove_file(&temporary)?;
        self.sync_dir()?;
        Ok(claimed)
    }

    fn try_remove(&self, key: &str) -> io::Result<()> {
        match fs::remove_file(self.path_of(key)) {
            Ok(()) => self.sync_dir(),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(error),
        }
    }

    fn or_panic<T>(&self, what: &str, result: io::Result<T>) -> T {
        result.unwrap_or_else(|error| {
            panic!(
                "failed to {what} in the state directory {}: {error}",
                self.dir.display()
            )
        })
    }
}

impl Disk for FileDisk {
    fn get(&self, key: &str) -> Option<Vec<u8>> {
        self.or_panic("read a record", self.try_get(key))
    }

    fn put(&self, key: &str, value: &[u8]) {
        self.or_panic("write a record", self.try_put(key, value))
    }

    fn insert_if_absent(&self, key: &str, value: &[u8]) -> bool {
        self.or_panic("claim a record", self.try_insert_if_absent(key, value))
    }

    fn remove(&self, key: &str) {
        self.or_panic("remove a record", self.try_remove(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("chaos-kit-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_file_disk_claims_once_and_survives_reopening() {
        let dir = temp_dir("file-disk");
        let disk = FileDisk::open(&dir).unwrap();
        assert!(disk.insert_if_absent("north/send/k1", b"first"));
        assert!(!disk.insert_if_absent("north/send/k1", b"second"));
        disk.put("north/send/k2", b"v");
        let reopened = FileDisk::open(&dir).unwrap();
        assert_eq!(
            reopened.get("north/send/k1").as_deref(),
            Some(&b"first"[..])
        );
        assert_eq!(reopened.get("north/send/k2").as_deref(), Some(&b"v"[..]));
        reopened.remove("north/send/k1");
        assert_eq!(disk.get("north/send/k1"), None);
        let leftovers: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .filter_map(|entry| entry.ok())
            .filter(|entry| entry.file_name().to_string_lossy().starts_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "temporary files are cleaned up");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn concurrent_claims_on_a_file_disk_have_one_winner() {
        let dir = temp_dir("file-disk-race");
        let disk = Arc::new(FileDisk::open(&dir).unwrap());
        let winners: usize = (0..8)
            .map(|worker| {
                let disk = disk.clone();
                std::thread::spawn(move || {
                    disk.insert_if_absent("k", format!("{worker}").as_bytes())
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|handle| usize::from(handle.join().unwrap()))
            .sum();
        assert_eq!(winners, 1);
        fs::remove_dir_all(&dir).unwrap();
    }

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
