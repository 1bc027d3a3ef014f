//! Ways in: how the agent's tool call reaches the target and how its answer
//! is read back into an outcome, one file each.
//!
//! - [`protocol`]: chaos's own target protocol (docs/target-protocol.md §3),
//!   for a target written for chaos; a target file with no `[request]` or
//!   `[response]` table.
//! - [`mapped`]: a service's own HTTP API shape, described by the target
//!   file's `[request]` and `[response]` tables (§1.2).
//! - [`broker`]: a message on a real broker's queue, taken by a consumer
//!   process; the file's `[broker]` table (docs/brokers.md).
//!
//! A unit decides, once per cell before anything runs, whether a scenario's
//! calls give it what it needs ([`Way::admit`]); then carries each attempt
//! and reads its answer ([`Way::send`]). What happens around an attempt (timeouts,
//! retries, the faults on the answer) is the agent's, the same for every way
//! in. Adding a way in is its file, one line in [`ways!`] below, the table
//! that selects it in `target_file/`, a section of the protocol doc, an
//! example and a test.

pub(crate) mod broker;
pub(crate) mod mapped;
mod protocol;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use chaos_kit::http::{CallFailure, Client, Request, Response};

use crate::history::Answer;
pub(crate) use broker::Broker;
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
    Broker(Broker),
}

/// One way in. Object-safe: the agent holds whichever the target file
/// chose; each unit also has a `NAME` and a `DOC` line of its own.
pub(crate) trait Way: Send + Sync {
    /// Whether every call of a scenario gives what this way needs; the
    /// reason when not. Asked once per cell, before any trial runs.
    fn admit(&self, _calls: &[CallArguments], _target: &str) -> Result<(), String> {
        Ok(())
    }
    /// Carries one attempt to the target at `target` and reads its answer;
    /// a transport failure (a timeout, a reset) is the agent's to judge.
    /// `http` is the trial's client (simulated or real, gated while the
    /// target is down): a way in over HTTP goes through it.
    fn send<'a>(
        &'a self,
        http: &'a Client,
        target: &'a str,
        outgoing: &'a Outgoing<'a>,
    ) -> Sending<'a>;
}

/// What an attempt comes back with.
pub(crate) type Sending<'a> = Pin<Box<dyn Future<Output = Result<Reply, CallFailure>> + Send + 'a>>;

/// One attempt as the agent hands it to a way in.
pub(crate) struct Outgoing<'a> {
    pub values: &'a CallValues<'a>,
    /// The scenario's extra headers for this call.
    pub headers: &'a BTreeMap<String, String>,
    /// chaos's identities of the attempt (attempt, run, step and tool-call
    /// ids, the trace): name and value, carried wherever the way in can.
    pub identities: &'a [(&'a str, &'a str)],
    /// How long the agent waits for the answer.
    pub timeout: Duration,
}

/// A target's answer to one attempt, read.
pub(crate) struct Reply {
    pub answer: Answer,
    /// How long the target asked the agent to wait before retrying.
    pub retry_after: Option<Duration>,
}

/// An attempt over HTTP through `http`: the request `build` makes, with
/// the identities as headers, and the answer `read` reads. Shared by the
/// ways in that speak HTTP.
pub(super) async fn over_http(
    http: &Client,
    target: &str,
    outgoing: &Outgoing<'_>,
    build: impl Fn(&CallValues<'_>, &BTreeMap<String, String>) -> Request,
    read: impl Fn(&Response) -> Answer,
) -> Result<Reply, CallFailure> {
    let request = outgoing.identities.iter().fold(
        build(outgoing.values, outgoing.headers),
        |request, (name, value)| request.header(name, *value),
    );
    let response = http.call(target, request, outgoing.timeout).await?;
    Ok(Reply {
        answer: read(&response),
        retry_after: mapped::retry_after(&response),
    })
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

    pub(crate) fn send<'a>(
        &'a self,
        http: &'a Client,
        target: &'a str,
        outgoing: &'a Outgoing<'a>,
    ) -> Sending<'a> {
        self.unit().send(http, target, outgoing)
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
