//! Target protocol v1.3: what crosses the wire between agent, target, provider
//! and authority. `docs/target-protocol.md` is the prose version of this file.
//! v1.3 adds the final outcome `held` and the fixture endpoints of the
//! authorization lab (`GET /records/{id}`, `GET /approvals`). v1.1 added the
//! agent run's structure (run, step, tool-use id) to every
//! attempt; a v1 target ignores it and is driven exactly as before.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Stable across every attempt of one logical action.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// Differs on every transport attempt; never an operation identity.
pub const ATTEMPT_ID: &str = "x-attempt-id";
/// Trace identity (W3C trace context); never an operation identity.
pub const TRACEPARENT: &str = "traceparent";
pub const AUTHORIZATION: &str = "authorization";
/// The agent run the attempt belongs to: one per conversation the harness plays.
pub const RUN_ID: &str = "x-run-id";
/// The planned step of the run: the same on every attempt and every re-plan of
/// one logical action, different for a genuinely new action.
pub const STEP_ID: &str = "x-step-id";
/// The model's id for one tool call: new on every re-plan (the planner decided
/// again), the same on the transport retries of one tool call. Never an
/// operation identity: deduplicating on it lets a re-plan through.
pub const TOOL_USE_ID: &str = "x-tool-use-id";
/// Set to `true` by a target (or the keyed provider) that answers from a stored result.
pub const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";

/// What an attempt's answer says happened. Serialised in kebab-case, which is
/// also the value of the `outcome` field in a target's JSON body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The effect happened now.
    Applied,
    /// It happened earlier; the stored result is returned.
    Replayed,
    /// Claimed, no confirmed outcome yet.
    Pending,
    /// May have happened; the evidence is insufficient.
    Unknown,
    /// Not done, and nothing of it was started: the target could not begin
    /// (the authority did not answer, its store refused the claim). Safe to
    /// retry. Unlike `unknown`, it says the effect did not happen; unlike
    /// `rejected`, it is not final.
    Failed,
    /// Definitively not done (the provider refused, or policy did).
    Rejected,
    /// The key was reused with a different payload.
    Conflict,
    /// The caller is not authorized now.
    Denied,
    /// Held for human review: final for the agent, and nothing was done. A
    /// default-deny gate answers it for an action that is not refused
    /// outright but that no rule allows (an unsafe action "HELD for review").
    Held,
}

impl Outcome {
    pub const ALL: [Outcome; 9] = [
        Outcome::Applied,
        Outcome::Replayed,
        Outcome::Pending,
        Outcome::Unknown,
        Outcome::Failed,
        Outcome::Rejected,
        Outcome::Conflict,
        Outcome::Denied,
        Outcome::Held,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Applied => "applied",
            Outcome::Replayed => "replayed",
            Outcome::Pending => "pending",
            Outcome::Unknown => "unknown",
            Outcome::Failed => "failed",
            Outcome::Rejected => "rejected",
            Outcome::Conflict => "conflict",
            Outcome::Denied => "denied",
            Outcome::Held => "held",
        }
    }

    pub fn parse(text: &str) -> Option<Outcome> {
        Outcome::ALL
            .into_iter()
            .find(|outcome| outcome.as_str() == text)
    }

    /// A definitive answer ends the agent's retries: the agent knows what happened.
    pub fn is_definitive(self) -> bool {
        !matches!(self, Outcome::Pending | Outcome::Unknown | Outcome::Failed)
    }

    /// Says the effect exists.
    pub fn claims_effect(self) -> bool {
        matches!(self, Outcome::Applied | Outcome::Replayed)
    }

    /// The status a target answers with by default for this outcome.
    pub fn default_status(self) -> u16 {
        match self {
            Outcome::Applied => 201,
            Outcome::Replayed => 200,
            Outcome::Pending => 409,
            Outcome::Unknown => 503,
            // Only the body can say it: a bare 503 stays `unknown`, the
            // reading that never invites a second effect.
            Outcome::Failed => 503,
            Outcome::Rejected => 400,
            Outcome::Conflict => 422,
            Outcome::Denied => 403,
            // RFC 9110's "accepted for processing, not completed". Only the
            // body can say it: a bare 202 stays `pending`, which a retry
            // resolves without harm (the gate holds it again).
            Outcome::Held => 202,
        }
    }

    /// The outcome a bare status means when the body names none (IETF
    /// idempotency-key draft conventions).
    pub fn from_status(status: u16, replayed_header: bool) -> Outcome {
        match status {
            200..=299 if status == 202 => Outcome::Pending,
            200..=299 if replayed_header => Outcome::Replayed,
            200..=299 => Outcome::Applied,
            409 => Outcome::Pending,
            422 => Outcome::Conflict,
            401 | 403 => Outcome::Denied,
            400..=499 => Outcome::Rejected,
            _ => Outcome::Unknown,
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The JSON body a target answers with. Every field is optional on the wire.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AnswerBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    /// The provider's receipt id for the effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<String>,
    /// Whatever result the tool returns to an authorized caller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    /// A human-readable reason, for rejections and conflicts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl AnswerBody {
    pub fn outcome(outcome: Outcome) -> Self {
        AnswerBody {
            outcome: Some(outcome),
            ..AnswerBody::default()
        }
    }

    pub fn with_receipt(mut self, receipt: impl Into<String>) -> Self {
        self.receipt = Some(receipt.into());
        self
    }

    pub fn with_result(mut self, result: serde_json::Value) -> Self {
        self.result = Some(result);
        self
    }

    pub fn with_reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }
}

/// The provider's idempotency contract, as a target integrating with it would
/// know from its documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProviderProfile {
    /// Honours `Idempotency-Key` within a retention window, replays the first
    /// answer (with `Idempotent-Replayed: true`), 422 on a different body
    /// (Stripe-like). Objects can be fetched: `GET /effects?key=` finds
    /// receipts, unless the contract says its lookup is `none`.
    Keyed,
    /// No dedup: every POST is an effect; but `GET /effects?key=` finds receipts.
    Lookup,
    /// Every POST is an effect and nothing can be looked up (SMTP-like).
    Blind,
}

impl ProviderProfile {
    pub const ALL: [ProviderProfile; 3] = [
        ProviderProfile::Keyed,
        ProviderProfile::Lookup,
        ProviderProfile::Blind,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ProviderProfile::Keyed => "keyed",
            ProviderProfile::Lookup => "lookup",
            ProviderProfile::Blind => "blind",
        }
    }

    pub fn parse(text: &str) -> Option<ProviderProfile> {
        ProviderProfile::ALL
            .into_iter()
            .find(|profile| profile.as_str() == text)
    }

    /// Whether a target can learn the real outcome of an ambiguous dispatch.
    pub fn can_reconcile(self) -> bool {
        !matches!(self, ProviderProfile::Blind)
    }
}

impl fmt::Display for ProviderProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The contract a target is told about: profile and, for `keyed`, how long the
/// provider keeps idempotency keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProviderContract {
    pub profile: ProviderProfile,
    pub retention: Option<std::time::Duration>,
    /// What `GET /effects?key=` can tell.
    pub lookup: LookupCapability,
    /// A keyed provider that saves an error answer (a 5xx) under the key and
    /// replays it on every retry with that key, as Stripe's API v1 documents:
    /// re-sending then teaches nothing, and only a lookup can.
    pub saves_errors: bool,
}

impl ProviderContract {
    /// The contract of `profile` as it always was: lookups where the profile
    /// has them, exact, and no saved errors.
    pub fn of(profile: ProviderProfile, retention: Option<std::time::Duration>) -> Self {
        ProviderContract {
            profile,
            retention,
            lookup: LookupCapability::default_for(profile),
            saves_errors: false,
        }
    }
}

/// What a provider's lookup (`GET /effects?key=`) can tell about a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LookupCapability {
    /// No lookup: `501`.
    None,
    /// Every committed effect is found; `404` means it never happened.
    Exact,
    /// An eventually consistent search: an effect is found only once it is
    /// this old, and `404` before that. A `404` inside the lag proves nothing.
    Lagging(std::time::Duration),
}

impl LookupCapability {
    pub const NAMES: [&'static str; 3] = ["none", "exact", "lagging"];

    /// What a profile offers unless its contract says otherwise.
    pub fn default_for(profile: ProviderProfile) -> LookupCapability {
        match profile {
            ProviderProfile::Keyed | ProviderProfile::Lookup => LookupCapability::Exact,
            ProviderProfile::Blind => LookupCapability::None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            LookupCapability::None => "none",
            LookupCapability::Exact => "exact",
            LookupCapability::Lagging(_) => "lagging",
        }
    }

    /// How long a committed effect stays invisible to a lookup.
    pub fn lag(self) -> std::time::Duration {
        match self {
            LookupCapability::Lagging(lag) => lag,
            _ => std::time::Duration::ZERO,
        }
    }

    pub fn is_available(self) -> bool {
        self != LookupCapability::None
    }
}

/// What the provider answers to an accepted effect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Receipt {
    pub receipt: String,
}

/// `GET /records/{id}` at the provider: the record and the tenant that owns
/// it. Ownership comes from here, never from a tool call's arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub id: String,
    pub tenant: String,
}

/// One approval recorded at the authority by trusted code (`GET
/// /approvals?actor=`): a human approved exactly this action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    pub actor: String,
    pub tool: String,
    pub invoice: String,
    pub recipient: String,
    pub body: String,
    /// Wall-clock milliseconds (the target's [`crate::clock::Clock`]) from
    /// which the approval no longer holds; absent, it never expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<u64>,
    /// A sign-off: the one tool call (its `X-Tool-Use-Id`) a human approved
    /// mid-run, a step decided again that the tool's policy (`sign-off`)
    /// executes only so approved. Absent on an approval of an action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call: Option<String>,
}

/// RFC 7662-style token introspection answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Introspection {
    pub active: bool,
    #[serde(default)]
    pub sub: Option<String>,
    #[serde(default)]
    pub tenant: Option<String>,
    /// Space-separated tool names.
    #[serde(default)]
    pub scope: Option<String>,
}

impl Introspection {
    /// Whether this introspection allows calling `tool` now.
    pub fn allows(&self, tool: &str) -> bool {
        self.active
            && self
                .scope
                .as_deref()
                .unwrap_or("")
                .split_whitespace()
                .any(|granted| granted == tool)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_mapping_follows_the_draft() {
        assert_eq!(Outcome::from_status(201, false), Outcome::Applied);
        assert_eq!(Outcome::from_status(200, true), Outcome::Replayed);
        assert_eq!(Outcome::from_status(202, false), Outcome::Pending);
        assert_eq!(Outcome::from_status(409, false), Outcome::Pending);
        assert_eq!(Outcome::from_status(422, false), Outcome::Conflict);
        assert_eq!(Outcome::from_status(403, false), Outcome::Denied);
        assert_eq!(Outcome::from_status(404, false), Outcome::Rejected);
        assert_eq!(Outcome::from_status(502, false), Outcome::Unknown);
    }

    #[test]
    fn default_statuses_round_trip() {
        // `failed` shares 503 with `unknown`, and `held` 202 with `pending`:
        // both are told apart by their body.
        for outcome in Outcome::ALL
            .into_iter()
            .filter(|o| !matches!(o, Outcome::Failed | Outcome::Held))
        {
            let replayed = outcome == Outcome::Replayed;
            assert_eq!(
                Outcome::from_status(outcome.default_status(), replayed),
                outcome
            );
        }
    }

    #[test]
    fn held_is_final_and_claims_nothing() {
        assert!(Outcome::Held.is_definitive());
        assert!(!Outcome::Held.claims_effect());
        assert_eq!(Outcome::parse("held"), Some(Outcome::Held));
        assert_eq!(Outcome::from_status(202, false), Outcome::Pending);
    }

    #[test]
    fn scope_is_checked_word_by_word() {
        let grant = Introspection {
            active: true,
            scope: Some("read_invoice send_reminder".into()),
            ..Introspection::default()
        };
        assert!(grant.allows("send_reminder"));
        assert!(!grant.allows("send"));
        assert!(!Introspection {
            active: false,
            ..grant
        }
        .allows("send_reminder"));
    }
}
