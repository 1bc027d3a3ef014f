//! A target's whole process tree, not only its process group (issue 27): a
//! shell wrapper that does not `exec`, a backgrounded grandchild and a
//! `setsid` daemon each outlived chaos. Three holds, from the strongest:
//!
//! - chaos is the subreaper of everything it starts
//!   (`PR_SET_CHILD_SUBREAPER`): a process whose parent dies is adopted by
//!   chaos, not by init, so nothing a target starts leaves chaos's tree
//!   while chaos lives, and chaos reaps those it kills (one that exits by
//!   itself stays a zombie until chaos exits: reaping blindly would steal
//!   the exit status of a child chaos waits for);
//! - every process a target starts inherits its `CHAOS_STATE_DIR`, which is
//!   unique to that start: when chaos ends the target (its process group),
//!   any process still carrying it, in whatever group or session, outlived
//!   the trial, is killed, and chaos warns;
//! - a chaos that is SIGKILLed runs nothing more: the group's leader dies
//!   with it (its parent-death signal), and what else the target started is
//!   killed, and its state folder removed, when chaos next starts on the
//!   machine (`sweep_dead_runs`). A process that clears its environment
//!   escapes the last two; docs/process-containment.md says so.

use std::path::{Path, PathBuf};

use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag};
use nix::unistd::Pid;

/// The prefix of every per-run state folder in the temporary directory:
/// `chaos-live-<pid of the chaos that made it>-<n>`.
pub(crate) const STATE_FOLDER_PREFIX: &str = "chaos-live-";

/// The environment variable whose value marks one target start's tree.
const MARK: &str = "CHAOS_STATE_DIR=";

/// A process that outlived its target's process group, and was killed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stray {
    pub pid: i32,
    pub command: String,
}

impl std::fmt::Display for Stray {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (`{}`)", self.pid, self.command)
    }
}

/// Makes chaos the subreaper of every process it starts, once. Where the
/// kernel refuses (not Linux, an old kernel) the other holds remain.
pub(crate) fn become_subreaper() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = nix::sys::prctl::set_child_subreaper(true);
    });
}

/// Kills every process whose `CHAOS_STATE_DIR` is `state_dir` or below it,
/// reaps those chaos adopted, and says which they were.
pub(crate) fn kill_marked(state_dir: &Path) -> Vec<Stray> {
    let own = std::process::id() as i32;
    let mut strays = Vec::new();
    for pid in all_pids() {
        if pid == own || !marked(pid, state_dir) {
            continue;
        }
        if kill(Pid::from_raw(pid), Signal::SIGKILL).is_ok() {
            strays.push(Stray {
                pid,
                command: command_line(pid),
            });
        }
    }
    for stray in &strays {
        reap_if_adopted(stray.pid);
    }
    strays
}

/// At a run's start: the state folders of chaos runs that are gone (a
/// SIGKILL runs no cleanup), with whatever their targets left running.
/// Returns the processes killed.
pub(crate) fn sweep_dead_runs() -> Vec<Stray> {
    let mut strays = Vec::new();
    // Without /proc every run would look dead, live ones included.
    if !Path::new("/proc/self").exists() {
        return strays;
    }
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return strays;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(owner) = name
            .to_str()
            .and_then(|name| name.strip_prefix(STATE_FOLDER_PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<i32>().ok())
        else {
            continue;
        };
        if Path::new(&format!("/proc/{owner}")).exists() {
            continue;
        }
        let folder: PathBuf = entry.path();
        strays.extend(kill_marked(&folder));
        let _ = std::fs::remove_dir_all(&folder);
    }
    strays
}

fn reap_if_adopted(pid: i32) {
    if parent(pid) != Some(std::process::id() as i32) {
        return;
    }
    // SIGKILLed a moment ago: it is gone within milliseconds.
    for _ in 0..100 {
        match waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)) {
            Ok(nix::sys::wait::WaitStatus::StillAlive) => {
                std::thread::sleep(std::time::Duration::from_millis(5))
            }
            _ => return,
        }
    }
}

fn all_pids() -> Vec<i32> {
    std::fs::read_dir("/proc")
        .map(|entries| {
            entries
                .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `pid`'s environment has `CHAOS_STATE_DIR` at or below `dir`.
fn marked(pid: i32, dir: &Path) -> bool {
    let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    let dir = dir.as_os_str().as_encoded_bytes();
    environ.split(|byte| *byte == 0).any(|variable| {
        variable
            .strip_prefix(MARK.as_bytes())
            .and_then(|value| value.strip_prefix(dir))
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(b"/"))
    })
}

/// The fields of `/proc/PID/stat` after the command name.
fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    Some(after.split_whitespace().map(str::to_owned).collect())
}

fn parent(pid: i32) -> Option<i32> {
    stat_fields(pid)?.get(1)?.parse().ok()
}

fn command_line(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|bytes| {
            bytes
                .split(|byte| *byte == 0)
                .filter(|part| !part.is_empty())
                .map(|part| String::from_utf8_lossy(part).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}
