//! A live target's process: started in a process group of its own, ended with
//! its whole group (a shell script's children, `cargo run`'s binary) on every
//! way out: the end of a trial, a failure, a panic (the `Drop` guard), Ctrl-C
//! (the runner's cancel flag, and [`end_all`] for a second Ctrl-C that exits
//! at once).

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

use super::containment;
use super::error::{Error, Result};

/// Every process group this process started and has not ended yet.
static GROUPS: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

fn groups() -> std::sync::MutexGuard<'static, BTreeSet<i32>> {
    GROUPS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// SIGKILLs every process group still running: for exits that cannot wait for
/// the owners' guards (a second Ctrl-C).
pub(crate) fn end_all() {
    for group in std::mem::take(&mut *groups()) {
        let _ = killpg(Pid::from_raw(group), Signal::SIGKILL);
    }
}

/// How to start a process.
#[derive(Debug, Clone)]
pub(crate) struct Launch {
    pub command: Vec<String>,
    pub workdir: PathBuf,
    pub env: Vec<(String, String)>,
    /// stdout and stderr are appended here (across restarts), so the tail of
    /// stderr can be quoted when the process misbehaves.
    pub stdout: PathBuf,
    pub stderr: PathBuf,
    /// Whether chaos speaks to it over its stdin and stdout (an MCP server
    /// over stdio): they are piped to chaos instead, stdout still copied
    /// to its log line by line ([`super::stdio`]).
    pub stdio: bool,
}

impl Launch {
    /// The command as a user would type it, for messages.
    pub(crate) fn display(&self) -> String {
        self.command.join(" ")
    }
}

pub(crate) struct TargetProcess {
    child: Child,
    group: i32,
    stderr: PathBuf,
    ended: bool,
    /// Its `CHAOS_STATE_DIR`, which everything it starts inherits: what
    /// finds a process that left the group ([`containment`]).
    mark: Option<PathBuf>,
    command: String,
    /// The bridge to its stdin and stdout, when chaos speaks over them:
    /// ended with the process, so its port is free for a restart's.
    bridge: Option<super::stdio::Bridge>,
}

impl TargetProcess {
    /// Starts `launch` in a new process group.
    pub(crate) fn spawn(launch: &Launch) -> Result<TargetProcess> {
        let open = |path: &Path| {
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|source| {
                    Box::new(Error::OpenLog {
                        path: path.to_owned(),
                        source,
                    })
                })
        };
        let workdir = std::fs::canonicalize(&launch.workdir).map_err(|source| Error::Workdir {
            path: launch.workdir.clone(),
            source,
        })?;
        // A relative program path is relative to the working directory, as it
        // would be for a user typing it there.
        let program = &launch.command[0];
        let program = if program.contains('/') && Path::new(program).is_relative() {
            workdir.join(program)
        } else {
            PathBuf::from(program)
        };
        let mut command = Command::new(&program);
        let (stdin, stdout) = if launch.stdio {
            (Stdio::piped(), Stdio::piped())
        } else {
            (Stdio::null(), Stdio::from(open(&launch.stdout)?))
        };
        command
            .args(&launch.command[1..])
            .current_dir(&workdir)
            .envs(launch.env.iter().map(|(name, value)| (name, value)))
            .stdin(stdin)
            .stdout(stdout)
            .stderr(open(&launch.stderr)?)
            // Its own group: one signal ends it and everything it started.
            .process_group(0);
        let parent = nix::unistd::getpid();
        // SAFETY: between fork and exec only async-signal-safe calls: prctl,
        // getppid.
        unsafe {
            command.pre_exec(move || die_with(parent));
        }
        // Hold the registry while spawning, so an `end_all` from another thread
        // cannot slip between the spawn and the registration.
        let mut registry = groups();
        let child = command.spawn().map_err(|source| Error::Spawn {
            command: launch.display(),
            workdir: workdir.clone(),
            source,
        })?;
        let group = child.id() as i32;
        registry.insert(group);
        let mark = launch
            .env
            .iter()
            .find(|(name, _)| name == chaos_kit::process::STATE_DIR)
            .map(|(_, dir)| PathBuf::from(dir));
        Ok(TargetProcess {
            child,
            group,
            stderr: launch.stderr.clone(),
            ended: false,
            mark,
            command: launch.display(),
            bridge: None,
        })
    }

    /// Its stdin and stdout, piped to chaos (a [`Launch::stdio`] process),
    /// once; bridged to `addr` until it ends ([`super::stdio`]).
    pub(crate) fn bridge(&mut self, addr: &str, log: &Path) -> std::io::Result<()> {
        let (Some(stdin), Some(stdout)) = (self.child.stdin.take(), self.child.stdout.take())
        else {
            return Ok(());
        };
        self.bridge = Some(super::stdio::start(addr, stdin, stdout, log)?);
        Ok(())
    }

    /// Its process group: the target and everything it started.
    pub(crate) fn group(&self) -> i32 {
        self.group
    }

    #[cfg(test)]
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The exit status, if the process has exited (without waiting).
    pub(crate) fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// SIGKILLs the whole group and reaps the process. Idempotent.
    pub(crate) fn kill(&mut self) {
        if self.ended {
            return;
        }
        self.ended = true;
        // The group outlives its leader's exit if the leader started others, so
        // it is signalled even when the leader is already gone.
        let _ = killpg(Pid::from_raw(self.group), Signal::SIGKILL);
        let _ = self.child.wait();
        self.bridge = None;
        groups().remove(&self.group);
        let strays = self
            .mark
            .as_deref()
            .map(containment::kill_marked)
            .unwrap_or_default();
        if !strays.is_empty() {
            let listed: Vec<String> = strays.iter().map(ToString::to_string).collect();
            // A closed stderr is no reason to stop (issue 15).
            let _ = writeln!(
                std::io::stderr(),
                "chaos: warning: {} process(es) started by `{}` outlived its process group and were killed: {}; a target should run in the foreground and leave nothing behind (docs/process-containment.md)",
                strays.len(),
                self.command,
                listed.join(", ")
            );
        }
    }

    /// The last lines of the process's stderr, for an error message.
    pub(crate) fn stderr_tail(&self) -> String {
        tail(&self.stderr)
    }
}

/// In the child, before exec: the kernel SIGKILLs it when chaos dies, even
/// of a SIGKILL that runs no guard and no handler (a CI job killed at its
/// timeout used to leave the target holding its port and its database
/// connections; issue 15). The signal goes to the group's leader, the
/// process the target file names: a target started through a shell script
/// should `exec` its server. Linux's parent-death signal is tied to the
/// thread that spawned the child; chaos spawns targets from the thread that
/// drives the trial, which outlives it.
fn die_with(parent: Pid) -> std::io::Result<()> {
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
    // chaos died between fork and prctl: nobody is left to send the signal.
    if nix::unistd::getppid() != parent {
        return Err(std::io::Error::other(
            "chaos exited while starting the target",
        ));
    }
    Ok(())
}

impl Drop for TargetProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// How many lines (and bytes at most) of a misbehaving target's stderr to quote.
const TAIL_LINES: usize = 12;
const TAIL_BYTES: u64 = 4_000;

/// The last [`TAIL_LINES`] lines of the file at `path`, indented for quoting,
/// or a note that it was empty.
pub(crate) fn tail(path: &Path) -> String {
    let mut text = String::new();
    if let Ok(mut file) = File::open(path) {
        let length = file.metadata().map(|meta| meta.len()).unwrap_or(0);
        let _ = file.seek(SeekFrom::Start(length.saturating_sub(TAIL_BYTES)));
        let mut bytes = Vec::new();
        let _ = file.read_to_end(&mut bytes);
        text = String::from_utf8_lossy(&bytes).into_owned();
    }
    let lines: Vec<&str> = text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .collect();
    if lines.is_empty() {
        return "    (its stderr was empty)".into();
    }
    lines[lines.len().saturating_sub(TAIL_LINES)..]
        .iter()
        .map(|line| format!("    | {line}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The word for how a process ended.
pub(crate) fn describe_exit(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("signal {signal}"),
        _ => status.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(command: &[&str], dir: &Path) -> Launch {
        Launch {
            command: command.iter().map(|part| part.to_string()).collect(),
            workdir: dir.to_owned(),
            env: vec![("CHAOS_TEST_VALUE".into(), "41".into())],
            stdout: dir.join("stdout.log"),
            stderr: dir.join("stderr.log"),
            stdio: false,
        }
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("chaos-process-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn alive(pid: i32) -> bool {
        // A zombie is dead for our purpose; /proc/PID/stat's third field says so.
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|stat| {
                !stat
                    .rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
            .unwrap_or(false)
    }

    #[test]
    fn killing_a_target_ends_its_whole_group() {
        let dir = temp_dir("group");
        // The shell starts a grandchild and reports its pid.
        let mut process = TargetProcess::spawn(&launch(
            &["sh", "-c", "sleep 30 & echo $! > child.pid; wait"],
            &dir,
        ))
        .unwrap();
        let pid_file = dir.join("child.pid");
        for _ in 0..200 {
            if std::fs::read_to_string(&pid_file).is_ok_and(|text| !text.trim().is_empty()) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let grandchild: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(alive(grandchild));
        process.kill();
        for _ in 0..200 {
            if !alive(grandchild) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!alive(grandchild), "the grandchild {grandchild} survived");
        assert!(!groups().contains(&(process.pid() as i32)));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_tail_of_stderr_is_quoted() {
        let dir = temp_dir("tail");
        let mut process = TargetProcess::spawn(&launch(
            &[
                "sh",
                "-c",
                "echo value=$CHAOS_TEST_VALUE >&2; echo 'bind: address already in use' >&2; exit 3",
            ],
            &dir,
        ))
        .unwrap();
        let status = loop {
            if let Some(status) = process.exited() {
                break status;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        assert_eq!(describe_exit(status), "exit status 3");
        assert_eq!(
            process.stderr_tail(),
            "    | value=41\n    | bind: address already in use"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
