//! Ways in: how the agent's tool call reaches the target and how its answer
//! is read back into an outcome, one file each.
//!
//! - [`protocol`]: chaos's own target protocol (docs/target-protocol.md §3),
//!   for a target written for chaos; a target file with no `[request]` or
//!   `[response]` table.
//! - [`mapped`]: a service's own HTTP API shape, described by the target
//!   file's `[request]` and `[response]` tables (§1.2).
//! - [`mcp`]: an MCP server over Streamable HTTP, chaos its client, each
//!   attempt a `tools/call` (§1.4); the target file's `[mcp]` table.
//! - [`broker`]: a message on a real broker's queue, taken by a consumer
//!   process; the file's `[broker]` table (docs/brokers.md).
//!
//! A unit decides, once per cell before anything runs, whether a scenario's
//! calls give it what it needs ([`Way::admit`]); then carries each attempt
//! and reads its answer ([`Way::send`]); says when a process it is to
//! reach is ready ([`Way::ready`]) and what it learned of the target for the
//! history ([`Way::seen`]). What happens around an attempt (timeouts,
//! retries, the faults on the answer) is the agent's, the same for every way
//! in. Adding a way in is its file, one line in [`ways!`] below, the table
//! that selects it in `target_file/`, a section of the protocol doc, an
//! example and a test.

pub(crate) mod broker;
pub(crate) mod mapped;
pub(crate) mod mcp;
mod protocol;

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use chaos_kit::http::{CallFailure, Client, Request, Response};

use crate::history::{Answer, McpSeen};
pub(crate) use broker::Broker;
pub(crate) use mapped::Mapping;
pub(crate) use mcp::Mcp;
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
    Mcp(Mcp),
    Broker(Broker),
}

/// One way in. Object-safe: the agent holds whichever the target file
/// chose; each unit also has a `NAME` and a `DOC` line of its own.
pub(crate) trait Way: Send + Sync {
    /// The service's own names for the suite's tools (`[request.tools]`):
    /// the authority grants and lists them by these names.
    fn tool_names(&self) -> &BTreeMap<String, String> {
        const NONE: &BTreeMap<String, String> = &BTreeMap::new();
        NONE
    }
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
    /// Whether the target process at `target` is ready to be called, asked
    /// until it is (or its `ready-timeout` passes) after each start, and
    /// once before a kept process serves another trial. `GET /healthz`
    /// answering 200, unless the way in has a handshake of its own.
    fn ready<'a>(
        &'a self,
        http: &'a Client,
        target: &'a str,
        timeout: Duration,
        _new_process: bool,
    ) -> Readying<'a> {
        Box::pin(async move {
            match http.call(target, Request::get("/healthz"), timeout).await {
                Ok(response) if response.status == 200 => Ready::Yes,
                Ok(response) => Ready::NotYet(format!("status {}", response.status)),
                Err(failure) => Ready::NotYet(failure.to_string()),
            }
        })
    }
    /// The agent gave up waiting for attempt `attempt`'s answer (a fault
    /// held it past the agent's timeout): a way in whose protocol has a
    /// cancel says so to the target. Nothing, unless it has one.
    fn timed_out<'a>(
        &'a self,
        _http: &'a Client,
        _target: &'a str,
        _attempt: &'a str,
    ) -> Cancelling<'a> {
        Box::pin(std::future::ready(()))
    }
    /// Attempt `attempt`'s answer was lost to a connection closed before
    /// it was read (`lose-response` at `target-to-agent`, mode `reset`): a
    /// way in whose protocol can resume the stream it came on does so, and
    /// hands back the answer the resumed stream carried. None, unless it
    /// can: the answer is lost and the agent retries.
    fn resume<'a>(
        &'a self,
        _http: &'a Client,
        _target: &'a str,
        _attempt: &'a str,
    ) -> Resuming<'a> {
        Box::pin(std::future::ready(None))
    }
    /// What [`Way::ready`] waits for, as an error says it was not done.
    fn readiness(&self, addr: &str) -> String {
        format!("answer GET /healthz on {addr} with 200")
    }
    /// Variables this way in adds to the target's environment (a broker's
    /// URL and queue). None, unless it has some.
    fn env(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    /// What must exist before the target process starts (a broker's queue
    /// for the run), set up; why not, when it cannot be. Nothing, unless
    /// the way in needs something.
    fn prepare(&self) -> Preparing<'_> {
        Box::pin(std::future::ready(Ok(())))
    }
    /// The duplicate window the way in keeps for the target, as declared
    /// (a broker's, inside which it drops a message it saw): a milestone a
    /// clock jump may cross, shortened for a run that jumps as retentions
    /// are. None, unless it keeps one chaos can set.
    fn duplicate_window(&self) -> Option<Duration> {
        None
    }
    /// Readies what it set up for the trial about to run, before its
    /// target process starts or is reused (a broker's queue emptied of an
    /// earlier trial's messages; not on a restart within the trial, whose
    /// messages are its own); why not, when refused. Nothing, unless it set
    /// something up.
    fn before_trial(&self) -> Preparing<'_> {
        Box::pin(std::future::ready(Ok(())))
    }
    /// Sets the duplicate window for the trial about to run (the declared
    /// one, or the one shortened for its clock jumps), once the target is
    /// ready and before its first call; why not, when the broker refused.
    /// Nothing, unless it keeps one.
    fn set_duplicate_window(&self, _window: Duration) -> Preparing<'_> {
        Box::pin(std::future::ready(Ok(())))
    }
    /// Whether the target process listens on `{listen.addr}` (and must be
    /// the one holding that port once ready). A consumer on a broker does
    /// not: its calls come through the broker.
    fn listens(&self) -> bool {
        true
    }
    /// Whether chaos speaks to the target over its stdin and stdout (an MCP
    /// server over stdio): the launch pipes them to a bridge chaos runs on
    /// the target's `{listen.addr}` (`live/stdio.rs`).
    fn stdio(&self) -> bool {
        false
    }
    /// Whether answers are read through a `[response]` mapping's own
    /// outcome values rather than chaos's outcome names.
    fn reads_its_own_outcomes(&self) -> bool {
        false
    }
    /// Takes down what [`Way::prepare`] set up, once the target's run is
    /// over and its processes are gone. Blocking, bounded. Nothing, unless
    /// it set something up.
    fn take_down(&self) {}
    /// Whether the target takes its calls as messages it must settle with a
    /// broker (ack them): then a trial the target never answered asks the
    /// broker what it still holds ([`Way::unsettled`]).
    fn settles(&self) -> bool {
        false
    }
    /// What the broker says of this trial's messages the target never
    /// answered, once the target process is stopped: one it still holds
    /// unacked, or one the target rejected; which message, how often it
    /// was delivered, how long since it was published, read from the broker
    /// itself. None when there is nothing to say, or no broker to ask.
    fn unsettled<'a>(&'a self, _published: &'a [Sent]) -> Reading<'a> {
        Box::pin(std::future::ready(None))
    }
    /// What this way in learned of the target at `target` (its address)
    /// during a trial whose calls are of tools `called` and whose attempts
    /// are `attempts` (by id).
    fn seen(
        &self,
        _target: &str,
        _called: &BTreeSet<String>,
        _attempts: &BTreeSet<&str>,
    ) -> Option<McpSeen> {
        None
    }
}

/// What an attempt comes back with.
pub(crate) type Sending<'a> = Pin<Box<dyn Future<Output = Result<Reply, CallFailure>> + Send + 'a>>;

/// A cancel on its way.
pub(crate) type Cancelling<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// A resumed stream's answer, when it carried one.
pub(crate) type Resuming<'a> = Pin<Box<dyn Future<Output = Option<Answer>> + Send + 'a>>;

/// What a way in sets up before the target starts.
pub(crate) type Preparing<'a> = Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'a>>;

/// One message a trial published, as a broker's account names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sent {
    /// The attempt that published it (its `x-attempt-id`).
    pub id: String,
    /// How long ago.
    pub ago: Duration,
    /// Whether the provider saw a call made for it (a dispatch naming the
    /// message, or one naming none, which may be its).
    pub acted: bool,
}

/// What a broker still holds unsettled, said as a sentence.
pub(crate) type Reading<'a> = Pin<Box<dyn Future<Output = Option<String>> + Send + 'a>>;

/// Whether a target is ready.
pub(crate) type Readying<'a> = Pin<Box<dyn Future<Output = Ready> + Send + 'a>>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ready {
    Yes,
    /// Not yet: what it answered.
    NotYet(String),
    /// It answered, and it cannot be tested as the target file says: why.
    Refused(String),
}

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

    pub(crate) fn tool_names(&self) -> &BTreeMap<String, String> {
        self.unit().tool_names()
    }

    pub(crate) fn send<'a>(
        &'a self,
        http: &'a Client,
        target: &'a str,
        outgoing: &'a Outgoing<'a>,
    ) -> Sending<'a> {
        self.unit().send(http, target, outgoing)
    }

    pub(crate) fn ready<'a>(
        &'a self,
        http: &'a Client,
        target: &'a str,
        timeout: Duration,
        new_process: bool,
    ) -> Readying<'a> {
        self.unit().ready(http, target, timeout, new_process)
    }

    pub(crate) fn timed_out<'a>(
        &'a self,
        http: &'a Client,
        target: &'a str,
        attempt: &'a str,
    ) -> Cancelling<'a> {
        self.unit().timed_out(http, target, attempt)
    }

    pub(crate) fn resume<'a>(
        &'a self,
        http: &'a Client,
        target: &'a str,
        attempt: &'a str,
    ) -> Resuming<'a> {
        self.unit().resume(http, target, attempt)
    }

    pub(crate) fn readiness(&self, addr: &str) -> String {
        self.unit().readiness(addr)
    }

    pub(crate) fn env(&self) -> Vec<(String, String)> {
        self.unit().env()
    }

    pub(crate) fn prepare(&self) -> Preparing<'_> {
        self.unit().prepare()
    }

    pub(crate) fn take_down(&self) {
        self.unit().take_down()
    }

    pub(crate) fn duplicate_window(&self) -> Option<Duration> {
        self.unit().duplicate_window()
    }

    pub(crate) fn before_trial(&self) -> Preparing<'_> {
        self.unit().before_trial()
    }

    pub(crate) fn set_duplicate_window(&self, window: Duration) -> Preparing<'_> {
        self.unit().set_duplicate_window(window)
    }

    pub(crate) fn settles(&self) -> bool {
        self.unit().settles()
    }

    pub(crate) fn unsettled<'a>(&'a self, published: &'a [Sent]) -> Reading<'a> {
        self.unit().unsettled(published)
    }

    pub(crate) fn reads_its_own_outcomes(&self) -> bool {
        self.unit().reads_its_own_outcomes()
    }

    pub(crate) fn listens(&self) -> bool {
        self.unit().listens()
    }

    pub(crate) fn stdio(&self) -> bool {
        self.unit().stdio()
    }

    pub(crate) fn seen(
        &self,
        target: &str,
        called: &BTreeSet<String>,
        attempts: &BTreeSet<&str>,
    ) -> Option<McpSeen> {
        self.unit().seen(target, called, attempts)
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
