//! The record of one failing seed: what the seed articles ask a test to keep,
//! per logical operation: its id, the attempt ids, the authorization decisions,
//! the dispatches, the effects and the provider's receipts, the outcomes the
//! agent saw, and the faults applied. It is built from the trial, its run
//! output and its verdict, and it is what the HTML timeline is drawn from.
//!
//! Payload bytes and the bearer token are redacted unless the run asked for
//! them: reports end up as CI artifacts and pull-request comments. Identifiers
//! (operation ids, attempt ids, subjects, downstream keys, receipts) are kept:
//! they are the record.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::check::view::attempts_of;
use crate::check::{Check, Finding, OperationSummary, Status, Verdict};
pub use crate::fault::Role;
use crate::history::{
    Attempt, AttemptEnd, AuthDecision, Dispatch, Effect, FaultEvent, Happened, Ledger, Ms,
    RunOutput,
};
use crate::plan::Trial;
use crate::scenario::PayloadVariant;
use crate::sweep::Payloads;

/// Detail of one failing (or undecided) seed of a cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeedFailure {
    pub seed: u64,
    pub verdict: Status,
    /// The decisive finding, one line.
    pub reason: String,
    /// The exact command that replays this seed.
    pub rerun: String,
    pub findings: Vec<Finding>,
    /// One record per logical operation of the trial.
    pub operations: Vec<OperationRecord>,
    /// When the run ended (ms on the run's own clock).
    pub ended_at: Ms,
    /// Why the run could not complete, when it could not.
    pub run_error: Option<String>,
    /// The bearer token the agent presented (the first tenant's, when
    /// several tenants call); `null` when redacted.
    pub token: Option<String>,
    /// Every fault the nemesis applied, and its consequences (kill, restart).
    pub faults: Vec<FaultRecord>,
    /// Every question the target asked the authority, and its answer.
    pub authorizations: Vec<AuthRecord>,
    /// Dispatches and effects no operation of the run accounts for.
    pub unattributed: LedgerSlice,
}

/// What one logical operation came to, with its slice of the history and ledger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperationRecord {
    #[serde(flatten)]
    pub summary: OperationSummary,
    /// The Idempotency-Key the agent sent on every attempt.
    pub operation_id: String,
    /// The subject field's value, by which the provider attributes effects.
    pub subject: String,
    pub history: OperationHistory,
    pub ledger: LedgerSlice,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OperationHistory {
    pub attempts: Vec<AttemptRecord>,
    /// Authority answers given while one of this operation's attempts was in flight.
    pub authorizations: Vec<AuthRecord>,
    /// Faults applied between this operation's first attempt and its last answer.
    pub faults: Vec<FaultRecord>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LedgerSlice {
    pub dispatches: Vec<Dispatch>,
    pub effects: Vec<Effect>,
}

impl LedgerSlice {
    /// The ledger's dispatches and effects whose subject `keep` accepts.
    fn of(ledger: &Ledger, keep: impl Fn(&Option<String>) -> bool) -> LedgerSlice {
        LedgerSlice {
            dispatches: (ledger.dispatches.iter())
                .filter(|dispatch| keep(&dispatch.subject))
                .cloned()
                .collect(),
            effects: (ledger.effects.iter())
                .filter(|effect| keep(&effect.subject))
                .cloned()
                .collect(),
        }
    }
}

/// One transport attempt, as the agent made and saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptRecord {
    pub attempt_id: String,
    pub call: u32,
    pub worker: u32,
    pub attempt: u32,
    /// The tool call it carried (`X-Tool-Use-Id`).
    pub tool_use_id: String,
    /// 1 for the step as first decided; 2 and on each time it was decided
    /// again (a re-plan, another subagent, a second approval).
    pub decision: u32,
    /// The Idempotency-Key it carried.
    pub key: String,
    pub sent_at: Ms,
    pub ended_at: Ms,
    pub payload_variant: PayloadVariant,
    pub payload_fingerprint: String,
    /// The exact bytes sent; `null` when redacted.
    pub payload: Option<String>,
    /// What the agent saw, in a word or two: the outcome, or how it failed.
    pub saw: String,
    pub end: AttemptEnd,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultRecord {
    pub at: Ms,
    /// Index into the scenario's faults; `null` for a consequence (a kill, a restart).
    pub fault: Option<usize>,
    /// The scenario's fault kind (`crash-target`, ...); `null` for a consequence.
    pub kind: Option<String>,
    pub role: Role,
    pub description: String,
    /// What the driver carried out, for a consequence; absent for a fault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consequence: Option<Consequence>,
}

/// What a driver carries out for a crash: the timeline shades the time
/// between a kill and its restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Consequence {
    TargetKilled,
    TargetRestarted,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthRecord {
    pub at: Ms,
    /// The authority's answer: the token was active...
    pub active: bool,
    /// ...with these tools granted.
    pub scope: String,
    /// Whether that answer allows the scenario's tool.
    pub allows_tool: bool,
    /// The attempts in flight when the target asked.
    pub during_attempts: Vec<String>,
}

impl SeedFailure {
    /// Every check that found something on this seed.
    pub fn checks(&self) -> BTreeSet<Check> {
        self.findings.iter().map(|finding| finding.check).collect()
    }

    /// The record of `seed`. `trace` is the trial and its run output, absent
    /// when the simulation itself could not run.
    pub fn new(
        seed: u64,
        verdict: Verdict,
        rerun: String,
        trace: Option<(&Trial<'_>, &RunOutput)>,
        payloads: Payloads,
    ) -> SeedFailure {
        let reason = verdict.reason().unwrap_or_default();
        let mut failure = SeedFailure {
            seed,
            verdict: verdict.status,
            reason,
            rerun,
            findings: verdict.findings,
            operations: Vec::new(),
            ended_at: 0,
            run_error: None,
            token: None,
            faults: Vec::new(),
            authorizations: Vec::new(),
            unattributed: LedgerSlice::default(),
        };
        let Some((trial, run)) = trace else {
            return failure;
        };
        let included = payloads == Payloads::Included;
        let tool = &trial.scenario.workload.tool;
        let attempts = &run.history.attempts;

        failure.ended_at = run.history.ended_at;
        failure.run_error = run.error.clone();
        failure.token = included.then(|| trial.tokens[0].1.clone());
        failure.faults = run
            .history
            .faults
            .iter()
            .map(|event| fault_record(trial, event))
            .collect();
        failure.authorizations = run
            .history
            .authorizations
            .iter()
            .map(|decision| auth_record(decision, tool, attempts.iter()))
            .collect();
        let attributed = |subject: &Option<String>| {
            subject
                .as_deref()
                .and_then(|subject| trial.operation_of_subject(subject))
                .is_some()
        };
        failure.unattributed = LedgerSlice::of(&run.ledger, |subject| !attributed(subject));

        let mut summaries = verdict.operations.into_iter();
        failure.operations = trial
            .operations
            .iter()
            .enumerate()
            .map(|(index, operation)| {
                let subject = Some(operation.subject.clone());
                let ledger = LedgerSlice::of(&run.ledger, |of| *of == subject);
                let own = attempts_of(run, index);
                let span = own
                    .iter()
                    .map(|attempt| attempt.sent_at)
                    .min()
                    .zip(own.iter().map(|attempt| attempt.ended_at).max());
                let within = |at: Ms| span.is_some_and(|(from, to)| from <= at && at <= to);
                let history = OperationHistory {
                    attempts: own
                        .iter()
                        .map(|attempt| attempt_record(trial, attempt, included))
                        .collect(),
                    authorizations: run
                        .history
                        .authorizations
                        .iter()
                        .filter(|decision| own.iter().any(|attempt| attempt.spans(decision.at)))
                        .map(|decision| auth_record(decision, tool, own.iter().copied()))
                        .collect(),
                    faults: run
                        .history
                        .faults
                        .iter()
                        .filter(|event| within(event.at))
                        .map(|event| fault_record(trial, event))
                        .collect(),
                };
                // A checker that could not run leaves no summary: count from the slices.
                let summary = summaries.next().unwrap_or_else(|| OperationSummary {
                    name: operation.name.clone(),
                    effects: ledger.effects.len() as u32,
                    expected_effects_min: trial.scenario.expected_effects(&operation.name),
                    expected_effects_max: trial.scenario.expected_effects(&operation.name),
                    dispatches: ledger.dispatches.len() as u32,
                    outcomes: own.iter().map(|attempt| attempt.summary()).collect(),
                    receipts: ledger
                        .effects
                        .iter()
                        .map(|effect| effect.receipt.clone())
                        .collect(),
                });
                OperationRecord {
                    summary,
                    operation_id: operation.key.clone(),
                    subject: operation.subject.clone(),
                    history,
                    ledger,
                }
            })
            .collect();
        failure
    }
}

fn attempt_record(trial: &Trial<'_>, attempt: &Attempt, included: bool) -> AttemptRecord {
    let call = trial.calls.iter().find(|call| call.number == attempt.call);
    AttemptRecord {
        attempt_id: attempt.attempt_id.clone(),
        call: attempt.call,
        worker: attempt.worker,
        attempt: attempt.attempt,
        tool_use_id: attempt.tool_use_id.clone(),
        decision: attempt.decision,
        key: attempt.key.clone(),
        sent_at: attempt.sent_at,
        ended_at: attempt.ended_at,
        payload_variant: call.map_or(PayloadVariant::Original, |call| call.variant),
        payload_fingerprint: attempt.payload_fingerprint.clone(),
        payload: call
            .filter(|_| included)
            .map(|call| String::from_utf8_lossy(&call.payload.bytes).into_owned()),
        saw: attempt.summary(),
        end: attempt.end.clone(),
    }
}

fn auth_record<'a>(
    decision: &AuthDecision,
    tool: &str,
    attempts: impl Iterator<Item = &'a Attempt>,
) -> AuthRecord {
    AuthRecord {
        at: decision.at,
        active: decision.active,
        scope: decision.scope.clone(),
        allows_tool: decision.active && decision.scope.split_whitespace().any(|t| t == tool),
        during_attempts: attempts
            .filter(|attempt| attempt.spans(decision.at))
            .map(|attempt| attempt.attempt_id.clone())
            .collect(),
    }
}

fn fault_record(trial: &Trial<'_>, event: &FaultEvent) -> FaultRecord {
    let fault = event
        .fault()
        .and_then(|index| trial.scenario.faults.get(index));
    let consequence = match event.what {
        Happened::TargetKilled => Some(Consequence::TargetKilled),
        Happened::TargetRestarted => Some(Consequence::TargetRestarted),
        Happened::Fault { .. } | Happened::ClockWaited { .. } | Happened::SignedOff { .. } => None,
    };
    FaultRecord {
        at: event.at,
        fault: event.fault(),
        kind: fault.map(|fault| fault.kind().to_owned()),
        // Consequences without a fault (a kill, a restart) happen to the target.
        role: fault.map_or(Role::Target, |fault| fault.role()),
        description: event.description.clone(),
        consequence,
    }
}

/// Whether an attempt's end carried an answer from the target (even one the
/// harness then lost on its way back).
pub fn target_answer(end: &AttemptEnd) -> Option<&crate::history::Answer> {
    match end {
        AttemptEnd::Answered(answer) => Some(answer),
        AttemptEnd::Lost { dropped, .. } | AttemptEnd::Truncated { dropped } => Some(dropped),
        AttemptEnd::Failed { .. } | AttemptEnd::Abandoned | AttemptEnd::Interrupted => None,
    }
}
