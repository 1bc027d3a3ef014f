//! Stage 3's output: what happened in one run, as two independent records.
//!
//! - The [`History`] is what the harness observed from outside the target: every
//!   attempt the agent made and what it saw, every fault applied, every
//!   authorization decision.
//! - The [`Ledger`] is the provider's ground truth: every dispatch that reached
//!   it and every effect it committed.
//!
//! The checker judges the target by comparing the two; the target's own word
//! (its answers) is only one input to that comparison.

use std::collections::BTreeMap;
use std::time::Duration;

use chaos_kit::http::CallFailure;
use chaos_kit::protocol::Outcome;
use serde::{Deserialize, Serialize};

use crate::fault::{Action, LossMode};

/// Milliseconds since the run started, on the run's own (simulated or real) time.
pub type Ms = u64;

/// What one run produced, by any transport.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutput {
    pub history: History,
    pub ledger: Ledger,
    /// Why the run could not complete, when it could not.
    pub error: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    pub attempts: Vec<Attempt>,
    pub faults: Vec<FaultEvent>,
    pub authorizations: Vec<AuthDecision>,
    /// When the agent finished, or when the run was cut short.
    pub ended_at: Ms,
    /// What an MCP target declared and what its client did, when the
    /// target was reached over MCP.
    pub mcp: Option<McpSeen>,
}

/// What chaos, as an MCP client, saw of a server during one trial.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpSeen {
    /// The annotations of each tool the trial called, as `tools/list`
    /// declared them.
    pub tools: Vec<DeclaredTool>,
    /// The attempts whose `tools/call` chaos cancelled with
    /// `notifications/cancelled` when its timeout passed.
    pub cancelled: Vec<String>,
    /// `initialize` handshakes completed with the target so far in the run
    /// (one per server process, and again after a restart).
    pub sessions: u64,
    /// The session each attempt's `tools/call` went on (its
    /// `Mcp-Session-Id`, or `initialize #N` when the server gave none), by
    /// attempt id: which calls of one operation shared one.
    pub session_of: BTreeMap<String, String>,
    /// What resuming the stream of each attempt whose answer was cut
    /// (`lose-response`, `reset`) came to, by attempt id.
    pub resumed: BTreeMap<String, Resumed>,
}

/// What resuming a Streamable HTTP stream cut before its result came to
/// (MCP's `Last-Event-ID`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resumed {
    /// The server numbered no event before the result: nothing to resume
    /// from, and the answer is lost.
    NotOffered,
    /// A `GET` with `Last-Event-ID: from` was sent, and the result did not
    /// come back on it: lost, and the agent retries.
    NotReplayed { from: String, why: String },
    /// The server replayed the result: the agent read it, and no retry was
    /// needed.
    Replayed { from: String },
}

impl Resumed {
    /// Its name in reports.
    pub fn name(&self) -> &'static str {
        match self {
            Resumed::NotOffered => "not-offered",
            Resumed::NotReplayed { .. } => "not-replayed",
            Resumed::Replayed { .. } => "replayed",
        }
    }
}

/// One tool's annotations, as an MCP server declared them: hints a client
/// must not trust (MCP 2025-11-25, "Tools"), which chaos holds to the ledger.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct DeclaredTool {
    /// The scenario's tool it answers for.
    pub tool: String,
    /// Its name on the server.
    pub mcp_tool: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destructive: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotent: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_world: Option<bool>,
}

impl DeclaredTool {
    /// `readOnlyHint: false, idempotentHint: true` (only the hints declared).
    pub fn hints(&self) -> String {
        let hints: Vec<String> = [
            ("readOnlyHint", self.read_only),
            ("destructiveHint", self.destructive),
            ("idempotentHint", self.idempotent),
            ("openWorldHint", self.open_world),
        ]
        .into_iter()
        .filter_map(|(name, value)| value.map(|value| format!("{name}: {value}")))
        .collect();
        if hints.is_empty() {
            "no hints".into()
        } else {
            hints.join(", ")
        }
    }
}

/// One transport attempt of one logical operation.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    /// Index into the trial's operations.
    pub operation: usize,
    /// 1-based call step.
    pub call: u32,
    pub worker: u32,
    /// 1-based within the worker.
    pub attempt: u32,
    pub attempt_id: String,
    /// The tool call it carries (`X-Tool-Use-Id`): the same on the retries
    /// of one tool call, new each time the step was decided again.
    pub tool_use_id: String,
    /// Which decision of the step that tool call is: 1 for the first, 2 and
    /// on for re-plans, further subagents, second approvals.
    pub decision: u32,
    /// The Idempotency-Key it carried.
    pub key: String,
    pub payload_fingerprint: String,
    /// Of the payload's intent (`plan::Payload::intent`).
    pub intent: String,
    pub sent_at: Ms,
    pub ended_at: Ms,
    /// The wall clock (with any injected offset) when the attempt was sent.
    pub wall_clock_ms: u64,
    pub end: AttemptEnd,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum AttemptEnd {
    /// The agent read an answer.
    Answered(Answer),
    /// The target answered, but the harness lost the answer on its way back.
    Lost { mode: LossMode, dropped: Answer },
    /// No answer: timeout, reset or refusal.
    Failed { failure: CallFailure },
    /// The agent crashed while waiting: whatever came back reached nobody.
    Abandoned,
    /// The target answered, and the answer reached the agent cut short (a
    /// `truncate-result` fault): it could not be parsed, so the planner
    /// decided the step again. `dropped` is what the target said.
    Truncated { dropped: Answer },
    /// The user said "try again" while the agent waited (a `user-interrupt`
    /// fault): the agent dropped the attempt, whose answer reached nobody,
    /// and decided the step again.
    Interrupted,
}

/// An answer as the agent read it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    pub status: u16,
    pub outcome: Outcome,
    pub receipt: Option<String>,
    /// Whether the body carried a `result`.
    pub disclosed_result: bool,
    /// The records the result released to the caller (`result.records[].id`,
    /// as an export returns them): the disclosure check compares their
    /// stored owners with the caller's tenant.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub records: Vec<String>,
    pub reason: Option<String>,
    /// Why the target file's `[response]` mapping could not read this
    /// answer (its outcome is then `unknown`): the finding is the mapping's,
    /// not the target's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unread: Option<String>,
}

impl Attempt {
    /// The answer the agent acted on, if it got one.
    pub fn answer(&self) -> Option<&Answer> {
        match &self.end {
            AttemptEnd::Answered(answer) => Some(answer),
            _ => None,
        }
    }

    /// How the agent would describe this attempt's end in one word.
    pub fn summary(&self) -> String {
        match &self.end {
            AttemptEnd::Answered(Answer {
                unread: Some(why), ..
            }) => format!("unknown ({why})"),
            AttemptEnd::Answered(answer) => answer.outcome.to_string(),
            AttemptEnd::Lost { mode, .. } => format!("lost ({mode})"),
            AttemptEnd::Failed { failure } => failure.to_string(),
            AttemptEnd::Abandoned => "abandoned (the agent crashed)".into(),
            AttemptEnd::Truncated { .. } => "truncated (unreadable)".into(),
            AttemptEnd::Interrupted => "dropped (the user interrupted)".into(),
        }
    }

    /// Whether `at` falls while this attempt was in flight.
    pub fn spans(&self, at: Ms) -> bool {
        self.sent_at <= at && at <= self.ended_at
    }
}

/// Something the nemesis or the driver did to the run.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultEvent {
    pub at: Ms,
    pub what: Happened,
    /// One line for people, in the history and the reports.
    pub description: String,
}

/// What a [`FaultEvent`] was, typed, for the checkers and the timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Happened {
    /// The scenario's fault at `index` acted: its rule's verdict.
    Fault { index: usize, action: Action },
    /// The scenario's clock jump at `index`, carried out live as a real wait
    /// (nobody may move a real clock; retentions were shortened instead).
    ClockWaited {
        index: usize,
        by: Duration,
        waited: Duration,
    },
    /// A human signed off decision `decision` of call `call` (a re-planned
    /// tool call) at the authority, as the `replan` fault at `index` asked.
    SignedOff {
        index: usize,
        call: u32,
        decision: u32,
    },
    /// The driver killed the target, as a crash asked.
    TargetKilled,
    /// The driver started the target again after a crash.
    TargetRestarted,
}

impl FaultEvent {
    /// Which declared fault acted, and what it did in a few words; `None`
    /// for what the driver carried out (a kill, a restart).
    pub fn act(&self) -> Option<(usize, String)> {
        match self.what {
            Happened::Fault { index, action } => Some((index, action.what())),
            Happened::ClockWaited { index, by, waited } => Some((
                index,
                format!(
                    "waited {} for a {} clock jump",
                    humantime::format_duration(waited),
                    humantime::format_duration(by)
                ),
            )),
            Happened::SignedOff { index, .. } => {
                Some((index, "signed off a re-plan at the authority".into()))
            }
            Happened::TargetKilled | Happened::TargetRestarted => None,
        }
    }

    /// Index into the scenario's faults; `None` for what the driver did.
    pub fn fault(&self) -> Option<usize> {
        match self.what {
            Happened::Fault { index, .. }
            | Happened::ClockWaited { index, .. }
            | Happened::SignedOff { index, .. } => Some(index),
            Happened::TargetKilled | Happened::TargetRestarted => None,
        }
    }

    /// How far every wall clock jumped, for a clock jump (waited out or
    /// not). A reader's question about one kind
    /// of verdict, not a role carrying one out, so it names only that one.
    pub fn clock_jump(&self) -> Option<Duration> {
        match self.what {
            Happened::Fault {
                action: Action::AdvanceClock(by),
                ..
            }
            | Happened::ClockWaited { by, .. } => Some(by),
            Happened::Fault { .. }
            | Happened::SignedOff { .. }
            | Happened::TargetKilled
            | Happened::TargetRestarted => None,
        }
    }

    pub fn is_revocation(&self) -> bool {
        matches!(
            self.what,
            Happened::Fault {
                action: Action::Revoke(_),
                ..
            }
        )
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct AuthDecision {
    pub at: Ms,
    pub active: bool,
    /// The tools the token was granted at that moment.
    pub scope: String,
}

/// The provider's ground truth.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ledger {
    pub dispatches: Vec<Dispatch>,
    pub effects: Vec<Effect>,
    /// Every `GET /effects?key=` the target asked, in order.
    pub lookups: Vec<LookupRecord>,
    /// Live, on a reused process: effects that reached this trial's
    /// provider carrying an earlier trial's subject. They are that trial's
    /// (the process kept working after answering it), never this one's: kept
    /// out of `dispatches` and `effects`, and out of the nemesis's count.
    pub late: Vec<LateEffect>,
}

/// A trial a process served before the one now running, by the names a
/// report gives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EarlierTrial {
    pub scenario: String,
    pub seed: u64,
}

/// An effect of an earlier trial that arrived during this one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LateEffect {
    /// The trial whose subject it carries.
    pub of: EarlierTrial,
    /// When it arrived, on this trial's timeline.
    pub at: Ms,
    pub tool: String,
    pub subject: String,
    pub receipt: String,
}

/// A lookup the target made at the provider, and what it was told.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LookupRecord {
    pub at: Ms,
    pub key: String,
    /// The receipt found, or `None` for a `404` (or a provider with no lookup).
    pub found: Option<String>,
}

/// A request that reached the provider's `POST /effects/{tool}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dispatch {
    /// 1-based, as `nth` counts dispatches.
    pub number: u32,
    pub at: Ms,
    pub tool: String,
    pub subject: Option<String>,
    pub key: Option<String>,
    pub payload_fingerprint: String,
    /// Of the payload's intent, when it differs from `payload_fingerprint`
    /// (a number spelled `4999.0`, a free-text field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent_fingerprint: Option<String>,
    /// The payload was in the provider's own API shape (a Stripe form), not
    /// the tool's arguments: its fingerprints compare only with the other
    /// provider-shaped dispatches of the operation, never with what the agent
    /// sent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub provider_shaped: bool,
    /// Which delivery of a broker's message the consumer acted on (1: the
    /// first), when it said so in `X-Chaos-Delivery`: what a finding names
    /// when a redelivery made the second effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<u32>,
    /// Which published message the consumer acted on (the `x-attempt-id` of
    /// the agent's attempt that published it), when it said so in
    /// `X-Chaos-Message`: two effects from two messages are a second
    /// publish (a producer's retry after its confirm was lost), not a
    /// redelivery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub disposition: Disposition,
}

impl Dispatch {
    /// The fingerprint of what the dispatch meant to do.
    pub fn intent(&self) -> &str {
        self.intent_fingerprint
            .as_deref()
            .unwrap_or(&self.payload_fingerprint)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Disposition {
    /// A new effect.
    Committed { receipt: String },
    /// A keyed provider answered from its idempotency store; no new effect.
    Replayed { receipt: String },
    /// A keyed provider refused a key reused with another body (422).
    KeyConflict,
    /// The provider refused the payload definitively (`402 card_declined`);
    /// `replayed` when a keyed provider answered a retry from its store.
    Declined { replayed: bool },
    /// The provider failed with `status` and did nothing; `replayed` when a
    /// provider that saves errors answered a retry with the saved one.
    Failed { status: u16, replayed: bool },
    /// A fault kept the provider from acting on it.
    Dropped,
    /// The body was not JSON.
    Malformed,
}

impl Disposition {
    /// One word for it, as the HTML timeline styles it.
    pub fn class(&self) -> &'static str {
        match self {
            Disposition::Committed { .. } => "committed",
            Disposition::Replayed { .. } => "replayed",
            Disposition::KeyConflict => "key-conflict",
            Disposition::Declined { .. } => "declined",
            Disposition::Failed { .. } => "failed",
            Disposition::Dropped => "dropped",
            Disposition::Malformed => "malformed",
        }
    }

    /// What the provider did with the dispatch, in words.
    pub fn describe(&self) -> String {
        let replay = |replayed: bool| {
            if replayed {
                " (replayed from its store)"
            } else {
                ""
            }
        };
        match self {
            Disposition::Committed { receipt } => format!("committed {receipt}"),
            Disposition::Replayed { receipt } => {
                format!("answered from its idempotency store ({receipt})")
            }
            Disposition::KeyConflict => "refused: key reused with another body".into(),
            Disposition::Declined { replayed } => {
                format!("declined for good (402 card_declined){}", replay(*replayed))
            }
            Disposition::Failed { status, replayed } => {
                format!("failed with {status}, nothing done{}", replay(*replayed))
            }
            Disposition::Dropped => "never acted on (a fault dropped it)".into(),
            Disposition::Malformed => "refused: the body was not JSON".into(),
        }
    }
}

/// A side effect that really happened downstream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Effect {
    pub at: Ms,
    pub dispatch: u32,
    pub subject: Option<String>,
    pub receipt: String,
    pub payload_fingerprint: String,
    /// The provider's wall clock (with any injected offset) at commit.
    pub wall_clock_ms: u64,
}
