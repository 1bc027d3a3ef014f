//! What can stop a command, each with the exit code it ends with (nextest's
//! `process_exit_code` is the model). Errors are printed in one place, the
//! binary's `main`; every message says what to fix.

use std::io;
use std::path::PathBuf;

use crate::exit::Exit;
use crate::input::FileError;
use crate::report::json::ReadError;
use crate::report::merge::MergeError;
use crate::target::ResolveError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Input files that could not be used (scenarios, target files), each
    /// with its file, line and the valid choices.
    #[error("{}", join_errors(.0))]
    Files(Vec<FileError>),
    /// A `--target` that names nothing, or a file that does not parse.
    #[error("{}", join_errors(.0))]
    Targets(Vec<ResolveError>),
    /// A flag or a combination of them that cannot be run.
    #[error("{0}")]
    Usage(String),
    /// A file that should be a chaos report.json and is not.
    #[error(transparent)]
    Report(#[from] ReadError),
    #[error("{error}\n  reports: {reports}")]
    Merge { error: MergeError, reports: String },
    /// The run finished; its reports could not be written.
    #[error("failed to write {what} {}: {source}", path.display())]
    Write {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    /// A place the reports cannot go, found before any trial runs: a run
    /// must not spend an hour and then lose its reports.
    #[error("cannot write {what} {}: {source}; choose another {flag}", path.display())]
    Unwritable {
        what: &'static str,
        flag: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    /// A signal (Ctrl-C, SIGTERM, SIGHUP) before the run finished; it names
    /// the signal.
    #[error("interrupted ({0}): nothing was written")]
    Interrupted(&'static str),
    /// A live target chaos could not start or ask outside a run
    /// (`init-target --mcp`): the reason, with its stderr tail.
    #[error("{0}")]
    TargetNotReady(String),
}

impl Error {
    /// The exit code this error ends the command with.
    pub fn exit(&self) -> Exit {
        match self {
            Error::Files(_)
            | Error::Targets(_)
            | Error::Usage(_)
            | Error::Report(_)
            | Error::Merge { .. }
            | Error::Unwritable { .. } => Exit::BadInput,
            Error::Write { .. } => Exit::ReportsNotWritten,
            Error::Interrupted(_) => Exit::Interrupted,
            Error::TargetNotReady(_) => Exit::Unknown,
        }
    }
}

/// Several errors, one per line; the printer prefixes each with `error: `.
fn join_errors<E: std::fmt::Display>(errors: &[E]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\nerror: ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_carries_a_documented_exit_code() {
        let errors = [
            Error::Usage("--seeds must be at least 1".into()),
            Error::Interrupted("SIGTERM"),
            Error::Write {
                what: "the reports into",
                path: "out".into(),
                source: io::Error::other("disk full"),
            },
        ];
        let codes: Vec<Exit> = errors.iter().map(Error::exit).collect();
        assert_eq!(
            codes,
            [Exit::BadInput, Exit::Interrupted, Exit::ReportsNotWritten]
        );
        for exit in codes {
            assert!(Exit::ALL.contains(&exit));
        }
    }
}
