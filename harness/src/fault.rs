//! Faults as plain data: what a scenario declares and what an explorer generates.
//!
//! Every fault names *when* it fires in protocol terms (the Nth dispatch, the
//! Nth answer, after the Nth call), never in wall-clock terms, so the same
//! schedule means the same thing in the simulator and against a real process.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Fault {
    /// The Nth dispatch never reaches the provider: nothing is committed, and
    /// the target's connection is held (past its timeout) or reset.
    LoseRequest { nth: u32, mode: LossMode },
    /// The answer on `hop` to the Nth request is lost after the sender acted.
    LoseResponse { hop: Hop, nth: u32, mode: LossMode },
    /// The answer on `hop` to the Nth request arrives `by` late.
    Delay {
        hop: Hop,
        nth: u32,
        #[serde(with = "humantime_serde")]
        by: Duration,
    },
    /// Kill the target at a protocol point of the Nth dispatch, and start it
    /// again `restart-after` later (with its durable state, without its memory).
    CrashTarget {
        at: CrashPoint,
        nth: u32,
        #[serde(with = "humantime_serde", rename = "restart-after")]
        restart_after: Duration,
    },
    /// Move every wall clock forward (provider retention, target retention).
    AdvanceClock {
        #[serde(with = "humantime_serde")]
        by: Duration,
        #[serde(
            default,
            rename = "after-call",
            skip_serializing_if = "Option::is_none"
        )]
        after_call: Option<u32>,
        #[serde(
            default,
            rename = "after-commit",
            skip_serializing_if = "Option::is_none"
        )]
        after_commit: Option<u32>,
    },
    /// Take the caller's permission away.
    Revoke {
        grant: Grant,
        #[serde(
            default,
            rename = "after-call",
            skip_serializing_if = "Option::is_none"
        )]
        after_call: Option<u32>,
        #[serde(
            default,
            rename = "after-commit",
            skip_serializing_if = "Option::is_none"
        )]
        after_commit: Option<u32>,
    },
}

/// A one-way hop carrying an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Hop {
    /// The provider's answer to the target's Nth dispatch.
    ProviderToTarget,
    /// The target's answer to the agent's Nth attempt.
    TargetToAgent,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LossMode {
    /// Held past the caller's timeout: the caller sees a timeout.
    Hold,
    /// The connection is closed with no answer: the caller sees a reset.
    Reset,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CrashPoint {
    /// The dispatch reached the provider, which did not act on it.
    BeforeDispatch,
    /// The provider committed the effect; the target never hears back.
    AfterCommit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Grant {
    /// The caller's token stops being active.
    Token,
    /// The tool is removed from the token's scope.
    Scope,
}

/// When a clock jump or a revocation fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Trigger {
    /// After the agent's Nth call step has ended (1-based).
    AfterCall(u32),
    /// Right after the provider acted on its Nth dispatch.
    AfterCommit(u32),
}

impl Fault {
    /// The trigger of a clock jump or revocation, if it names exactly one.
    pub fn trigger(&self) -> Option<Trigger> {
        let (after_call, after_commit) = match self {
            Fault::AdvanceClock {
                after_call,
                after_commit,
                ..
            }
            | Fault::Revoke {
                after_call,
                after_commit,
                ..
            } => (*after_call, *after_commit),
            _ => return None,
        };
        match (after_call, after_commit) {
            (Some(call), None) => Some(Trigger::AfterCall(call)),
            (None, Some(dispatch)) => Some(Trigger::AfterCommit(dispatch)),
            _ => None,
        }
    }

    /// The kebab-case kind, as written in a scenario.
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::LoseRequest { .. } => "lose-request",
            Fault::LoseResponse { .. } => "lose-response",
            Fault::Delay { .. } => "delay",
            Fault::CrashTarget { .. } => "crash-target",
            Fault::AdvanceClock { .. } => "advance-clock",
            Fault::Revoke { .. } => "revoke",
        }
    }

    pub const KINDS: [&'static str; 6] = [
        "lose-request",
        "lose-response",
        "delay",
        "crash-target",
        "advance-clock",
        "revoke",
    ];
}

impl fmt::Display for Hop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Hop::ProviderToTarget => "provider-to-target",
            Hop::TargetToAgent => "target-to-agent",
        })
    }
}

impl fmt::Display for LossMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LossMode::Hold => "held",
            LossMode::Reset => "reset",
        })
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let when = |trigger: Option<Trigger>| match trigger {
            Some(Trigger::AfterCall(n)) => format!("after call {n}"),
            Some(Trigger::AfterCommit(n)) => format!("after dispatch {n} was committed"),
            None => "never".to_owned(),
        };
        match self {
            Fault::LoseRequest { nth, mode } => {
                write!(f, "dispatch {nth} lost before the provider ({mode})")
            }
            Fault::LoseResponse { hop, nth, mode } => {
                write!(f, "answer {nth} on {hop} lost ({mode})")
            }
            Fault::Delay { hop, nth, by } => {
                write!(
                    f,
                    "answer {nth} on {hop} delayed {}",
                    humantime::format_duration(*by)
                )
            }
            Fault::CrashTarget {
                at,
                nth,
                restart_after,
            } => {
                let point = match at {
                    CrashPoint::BeforeDispatch => "before dispatch",
                    CrashPoint::AfterCommit => "after commit",
                };
                write!(
                    f,
                    "target crashed {point} of dispatch {nth}, restarted {} later",
                    humantime::format_duration(*restart_after)
                )
            }
            Fault::AdvanceClock { by, .. } => write!(
                f,
                "clock advanced {} {}",
                humantime::format_duration(*by),
                when(self.trigger())
            ),
            Fault::Revoke { grant, .. } => {
                let what = match grant {
                    Grant::Token => "caller's token revoked",
                    Grant::Scope => "tool removed from the caller's scope",
                };
                write!(f, "{what} {}", when(self.trigger()))
            }
        }
    }
}
