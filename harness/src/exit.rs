//! Named exit codes. They are part of the interface CI scripts depend on.

use std::process::ExitCode;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Exit {
    /// Every invariant held on every seed.
    Success = 0,
    /// At least one invariant failed on at least one seed.
    InvariantViolated = 1,
    /// Bad input or usage: a malformed scenario, an unknown target, a bad flag.
    BadInput = 2,
    /// No invariant failed, but at least one verdict could not be reached
    /// (a target error, a run cut short).
    Unknown = 3,
    /// The run finished, but its reports could not be written (a full disk,
    /// a folder chaos may not write into).
    ReportsNotWritten = 4,
    /// Interrupted (Ctrl-C) before the run finished; nothing was written.
    Interrupted = 130,
}

impl Exit {
    pub fn code(self) -> u8 {
        self as u8
    }

    pub fn describe(self) -> &'static str {
        match self {
            Exit::Success => "every invariant held",
            Exit::InvariantViolated => "an invariant was violated",
            Exit::BadInput => "bad input or usage",
            Exit::Unknown => "a verdict could not be reached",
            Exit::ReportsNotWritten => "the reports could not be written",
            Exit::Interrupted => "interrupted",
        }
    }

    pub const ALL: [Exit; 6] = [
        Exit::Success,
        Exit::InvariantViolated,
        Exit::BadInput,
        Exit::Unknown,
        Exit::ReportsNotWritten,
        Exit::Interrupted,
    ];
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit.code())
    }
}
