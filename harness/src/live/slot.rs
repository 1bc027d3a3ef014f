//! What one thread keeps between the live trials it runs: the harness's
//! listening ports, the target's port, and the target process while the
//! trials it serves allow.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::fault::Live;
use crate::history::EarlierTrial;
use crate::plan::Trial;
use crate::target_file::TargetFile;

use super::error::{Error, Result};
use super::launch::{Launch, TargetProcess};
use super::net::{bind_loopback, reserve_port, LOOPBACK};

/// The ports the harness's servers listen on and the target's, so a process
/// started for one trial can serve the next, and that process, if it may.
pub(super) struct Slot {
    pub provider: std::net::TcpListener,
    pub authority: std::net::TcpListener,
    /// chaos's scripted model, served only for a target under `[model]`.
    pub model: std::net::TcpListener,
    pub target_addr: String,
    /// Each process's state and logs, in a directory of its own below.
    dir: TrialDir,
    processes: u64,
    pub running: Option<Running>,
}

/// A target process kept between trials, with how it was started.
pub(super) struct Running {
    pub process: TargetProcess,
    pub launch: Launch,
    pub dir: PathBuf,
    /// The subjects of every trial it served: a request carrying one, in a
    /// later trial, is that trial's work done late.
    pub served: Served,
}

/// Subject -> the trial whose operation it names.
pub(super) type Served = BTreeMap<String, EarlierTrial>;

/// `served` with `trial`'s subjects added.
pub(super) fn served_with(mut served: Served, trial: &Trial<'_>) -> Served {
    for operation in &trial.operations {
        served.insert(
            operation.subject.clone(),
            EarlierTrial {
                scenario: trial.scenario.name.clone(),
                seed: trial.seed,
            },
        );
    }
    served
}

impl Slot {
    pub(super) fn open() -> Result<Slot> {
        let listen = || bind_loopback().map_err(|error| Box::new(Error::Listen(error)));
        Ok(Slot {
            provider: listen()?,
            authority: listen()?,
            model: listen()?,
            target_addr: format!("{LOOPBACK}:{}", reserve_port().map_err(Error::NoPort)?),
            dir: TrialDir::create().map_err(Error::StateDir)?,
            processes: 0,
            running: None,
        })
    }

    /// A new, empty directory for the next process's state and logs; the
    /// previous process's goes (a new process starts from nothing, as
    /// `fresh-process` promises, while a restart keeps its state).
    pub(super) fn new_process_dir(&mut self) -> std::io::Result<PathBuf> {
        if self.processes > 0 {
            let _ = std::fs::remove_dir_all(self.dir.path.join(self.processes.to_string()));
        }
        self.processes += 1;
        let dir = self.dir.path.join(self.processes.to_string());
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        // Before the directory it writes to goes.
        if let Some(running) = &mut self.running {
            running.process.kill();
        }
    }
}

/// Whether a process may serve `trial` after serving others, and be kept
/// for the next: not when the target file asks for a fresh process, and not
/// in a scenario that kills the target (it gets a process of its own, and
/// the one it restarted goes with it).
pub(super) fn reusable(trial: &Trial<'_>, target: &TargetFile) -> bool {
    !target.fresh_process
        && !trial
            .scenario
            .faults
            .iter()
            .any(|fault| fault.live() == Live::Restarts)
}

/// A directory for one slot (its processes' state, their logs), or for a
/// build's logs, removed when dropped.
pub(super) struct TrialDir {
    pub path: PathBuf,
}

impl TrialDir {
    pub(super) fn create() -> std::io::Result<TrialDir> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "{}{}-{}",
            super::containment::STATE_FOLDER_PREFIX,
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path)?;
        Ok(TrialDir { path })
    }
}

impl Drop for TrialDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::plan::Timing;
    use crate::scenario::Scenario;

    fn scenario(name: &str) -> Scenario {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
        Scenario::load(&root.join(format!("{name}.toml"))).unwrap()
    }

    #[test]
    fn a_process_is_kept_unless_the_file_or_a_crash_says_otherwise() {
        let kept = TargetFile::parse(
            Path::new("t/target.toml"),
            "name = \"t\"\ncommand = [\"x\"]",
        )
        .unwrap();
        let fresh = TargetFile::parse(
            Path::new("t/target.toml"),
            "name = \"t\"\ncommand = [\"x\"]\nfresh-process = true",
        )
        .unwrap();
        let lost = scenario("lost-response-keyed");
        let restart = scenario("worker-restart");
        let trial = |scenario| Trial::new(scenario, 1, Timing::live());
        assert!(reusable(&trial(&lost), &kept));
        assert!(!reusable(&trial(&lost), &fresh));
        assert!(!reusable(&trial(&restart), &kept));
    }

    #[test]
    fn each_process_gets_an_empty_directory_and_the_last_one_goes() {
        let mut slot = Slot::open().unwrap();
        let first = slot.new_process_dir().unwrap();
        std::fs::write(first.join("state"), "x").unwrap();
        let second = slot.new_process_dir().unwrap();
        assert_ne!(first, second);
        assert!(!first.exists(), "the previous process's directory stays");
        assert_eq!(std::fs::read_dir(&second).unwrap().count(), 0);
        let root = slot.dir.path.clone();
        drop(slot);
        assert!(!root.exists(), "the slot's directory outlived it");
    }
}
