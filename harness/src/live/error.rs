//! Why a live trial could not run, or was cut short. Each says what went
//! wrong and, where the target misbehaved, quotes the tail of its stderr.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// Live errors travel boxed: they are rare, and end a trial.
pub(crate) type Result<T> = std::result::Result<T, Box<Error>>;

#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    // ---- the target's build -------------------------------------------------
    #[error("failed to prepare a build: {0}")]
    BuildDir(io::Error),
    #[error("failed to build target '{target}': {source}")]
    BuildNotStarted { target: String, source: Box<Error> },
    #[error("failed to build target '{target}': `{command}` ended with {status}; the last lines of its stderr:\n{stderr}")]
    BuildFailed {
        target: String,
        command: String,
        status: String,
        stderr: String,
    },
    #[error("the build was cancelled")]
    BuildCancelled,

    // ---- setting up one trial ------------------------------------------------
    #[error("failed to start an async runtime: {0}")]
    Runtime(io::Error),
    #[error("failed to create the trial's state directory: {0}")]
    StateDir(io::Error),
    #[error("scenario '{scenario}' cannot be run live: {why}")]
    NotLive { scenario: String, why: String },
    #[error("failed to listen on 127.0.0.1: {0}")]
    Listen(io::Error),
    #[error("failed to find a free port on 127.0.0.1 for the target: {0}")]
    NoPort(io::Error),

    // ---- starting the target -------------------------------------------------
    #[error("failed to open {}: {source}", path.display())]
    OpenLog { path: PathBuf, source: io::Error },
    #[error("failed to use {} as the working directory: {source}", path.display())]
    Workdir { path: PathBuf, source: io::Error },
    #[error("failed to start `{command}` in {}: {source}", workdir.display())]
    Spawn {
        command: String,
        workdir: PathBuf,
        source: io::Error,
    },
    #[error("target '{target}' (`{command}`) exited before it was ready ({status}); the last lines of its stderr:\n{stderr}")]
    ExitedBeforeReady {
        target: String,
        command: String,
        status: String,
        stderr: String,
    },
    #[error("target '{target}' (`{command}`) did not {readiness} within {} (last: {last}); the last lines of its stderr:\n{stderr}", humantime::format_duration(*timeout))]
    NeverReady {
        target: String,
        command: String,
        /// What ready means for its way in: `answer GET /healthz on {addr} with 200`.
        readiness: String,
        timeout: Duration,
        last: String,
        stderr: String,
    },
    #[error("target '{target}' was told to listen on {addr}, but another program holds that port: GET /healthz there was answered by a process outside the target's process group (another chaos run, or a server left behind); free the port, or run again; the last lines of the target's stderr:\n{stderr}")]
    PortTaken {
        target: String,
        addr: String,
        stderr: String,
    },
    #[error("target '{target}' listens on port {port} beyond 127.0.0.1 (kernel address {}): it must listen on CHAOS_LISTEN_ADDR ({addr}) only, or a test run would expose it to the network", exposed.join(", "))]
    Exposed {
        target: String,
        port: u16,
        exposed: Vec<String>,
        addr: String,
    },

    #[error("target '{target}' speaks over stdio, and chaos could not listen on {addr} for it: {source}")]
    Bridge {
        target: String,
        addr: String,
        source: io::Error,
    },
    #[error("target '{target}' cannot be tested as its target file says: {why}")]
    Untestable { target: String, why: String },
    /// What its way in sets up before the process starts (a broker's queue)
    /// could not be: the reason says what and how to fix it.
    #[error("target '{target}': {why}")]
    NotPrepared { target: String, why: String },
    #[error("target '{target}' [effects]: {why}")]
    Effects { target: String, why: String },
    #[error("target '{target}': {why}; the run cannot be judged on a grant its store never got (fix the command in the target file's [authority], and try it by hand)")]
    Authority { target: String, why: String },

    // ---- a run cut short -----------------------------------------------------
    #[error("the agent failed: {0}")]
    Agent(String),
    #[error("target '{target}' is an agent runtime whose model chaos plays, and the run was no trial of it: {why}")]
    Caller { target: String, why: String },
    #[error("the agent runtime's run was cut short: {0}")]
    RunNeverCompleted(String),
    #[error("the target did not come back after a restart: {0}")]
    NoRestart(Box<Error>),
    #[error("the target exited on its own during the run ({status}); the last lines of its stderr:\n{stderr}")]
    ExitedDuringRun { status: String, stderr: String },
    #[error("the run did not finish within {}: the target hangs; the last lines of its stderr:\n{stderr}", humantime::format_duration(*limit))]
    RunTooLong { limit: Duration, stderr: String },
    #[error("the consumer answered none of its {attempts} attempt(s) within {}: {held}; the last lines of its stderr:\n{stderr}", humantime::format_duration(*timeout))]
    Unsettled {
        attempts: usize,
        timeout: Duration,
        /// What the broker still holds, in its own words.
        held: String,
        stderr: String,
    },
    #[error("the target hangs: none of its {attempts} attempt(s) was answered within {}; the last lines of its stderr:\n{stderr}", humantime::format_duration(*timeout))]
    Unanswered {
        attempts: usize,
        timeout: Duration,
        stderr: String,
    },
}
