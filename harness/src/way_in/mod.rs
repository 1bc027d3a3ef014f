//! Ways in: how the agent's tool call reaches the target and how its answer
//! is read back into an outcome, one file each.
//!
//! - [`protocol`]: chaos's own target protocol (docs/target-protocol.md §3),
//!   for a target written for chaos; a target file with no `[request]` or
//!   `[response]` table.
//! - [`mapped`]: a service's own HTTP API shape, described by the target
//!   file's `[request]` and `[response]` tables (§1.2).
//!
//! A unit decides, once per cell before anything runs, whether a scenario's
//! calls give it what it needs ([`Way::admit`]); then builds each attempt's
//! request and reads each answer. What happens around an attempt (timeouts,
//! retries, the faults on the answer) is the agent's, the same for every way
//! in. Adding a way in is its file, one line in [`ways!`] below, the table
//! that selects it in `target_file/`, a section of the protocol doc, an
//! example and a test.

pub(crate) mod mapped;
mod protocol;

use std::collections::BTreeMap;

use bytes::Bytes;
use chaos_kit::http::{Request, Response};

use crate::history::Answer;
pub(crate) use mapped::Mapping;
pub(crate) use protocol::Protocol;

/// Declares every way in: its variant of [`WayIn`], carrying the unit's
/// configuration as the target file gave it.
macro_rules! ways {
    ($($variant:ident($unit:ty),)+) => {
        /// How the agent's calls reach one target.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub(crate) enum WayIn {
            $($variant($unit),)+
        }

        impl WayIn {
            fn unit(&self) -> &dyn Way {
                match self {
                    $(WayIn::$variant(unit) => unit,)+
                }
            }

            /// Every way in: its name and docs line, for `chaos list`.
            pub(crate) fn every() -> Vec<(&'static str, &'static str)> {
                vec![$((<$unit>::NAME, <$unit>::DOC),)+]
            }
        }
    };
}

ways! {
    Protocol(Protocol),
    Mapped(Mapping),
}

/// One way in. Object-safe: the agent holds whichever the target file
/// chose; each unit also has a `NAME` and a `DOC` line of its own.
pub(crate) trait Way: Send + Sync {
    /// Whether every call of a scenario gives what this way needs; the
    /// reason when not. Asked once per cell, before any trial runs.
    fn admit(&self, _calls: &[CallArguments], _target: &str) -> Result<(), String> {
        Ok(())
    }
    /// One attempt's request, before the chaos headers (attempt, run, step,
    /// tool-call ids and the trace), which go with any way in.
    fn request(&self, values: &CallValues<'_>, headers: &BTreeMap<String, String>) -> Request;
    /// An answer as the agent reads it; one it cannot read is `unknown`,
    /// saying why.
    fn read(&self, response: &Response) -> Answer;
}

impl Default for WayIn {
    fn default() -> WayIn {
        WayIn::Protocol(Protocol::default())
    }
}

impl WayIn {
    pub(crate) fn admit(&self, calls: &[CallArguments], target: &str) -> Result<(), String> {
        self.unit().admit(calls, target)
    }

    pub(crate) fn request(
        &self,
        values: &CallValues<'_>,
        headers: &BTreeMap<String, String>,
    ) -> Request {
        self.unit().request(values, headers)
    }

    pub(crate) fn read(&self, response: &Response) -> Answer {
        self.unit().read(response)
    }
}

/// What one tool call fills a request with.
pub(crate) struct CallValues<'a> {
    pub tool: &'a str,
    pub operation_id: &'a str,
    pub token: &'a str,
    /// The call's arguments: the JSON object the model wrote.
    pub arguments: &'a Bytes,
}

/// The arguments one payload of a call carries, by name: what a way in
/// checks its templates against before the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CallArguments {
    pub call: u32,
    pub operation: String,
    pub tool: String,
    pub arguments: Vec<String>,
}
