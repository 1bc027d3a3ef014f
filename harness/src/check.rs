//! Stage 4: the checkers. History + ledger in, a [`Verdict`] out.
//!
//! Ground truth is the provider's ledger; the target's answers are claims to
//! be checked against it. Every finding names the operation, the counts and
//! the attempt that broke it. As in Jepsen, a failure dominates: a run that
//! could not finish is `unknown` unless what it did record already fails.

use std::fmt;

use chaos_kit::protocol::Outcome;
use chaos_kit::target::TargetInfo;
use serde::{Deserialize, Serialize};

use crate::history::RunOutput;
use crate::history::{Answer, Attempt, AttemptEnd, Dispatch, Effect, Ms};
use crate::plan::Trial;
use crate::scenario::TestKind;

/// pass / fail / unknown, ordered so that the worst is the greatest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Pass,
    Unknown,
    Fail,
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Status::Pass => "pass",
            Status::Unknown => "unknown",
            Status::Fail => "fail",
        })
    }
}

/// Liveness is judged apart from safety: a stuck target is safe, and still broken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Liveness {
    /// No call in this run could be judged (e.g. a blind provider).
    NotApplicable,
    Pass,
    Unknown,
    Fail,
}

/// Which invariant a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Check {
    /// More effects than the operation may have.
    DuplicateEffect,
    /// Fewer effects than expected: the operation was abandoned.
    MissingEffect,
    /// More dispatches than the scenario allows.
    ExtraDispatch,
    /// An effect no operation of the run accounts for.
    UnattributedEffect,
    /// `applied` for an effect committed before the attempt: a replay told as new.
    StaleApplied,
    /// `applied`/`replayed` with no effect in the ledger.
    ClaimWithoutEffect,
    /// A receipt that is not in the ledger for this operation.
    ReceiptMismatch,
    /// `rejected` although the ledger holds the operation's effect.
    RejectedWithEffect,
    /// `denied` although the attempt dispatched.
    DeniedButDispatched,
    /// A receipt or result shown to a caller who may not see it: in a `denied`
    /// or `conflict` answer, or in any answer after the caller was revoked.
    Disclosure,
    /// `conflict` for a payload equal to the approved one.
    FalseConflict,
    /// A payload different from the approved one reached the provider.
    ChangedPayloadDispatched,
    /// The old result returned for a different payload.
    ReplayForChangedPayload,
    /// A call ended with an outcome its scenario does not accept.
    UnexpectedOutcome,
    /// Liveness: the agent never learned the outcome it could have learned.
    Stuck,
    /// The run could not complete, so some invariants could not be judged.
    RunIncomplete,
}

impl Check {
    /// Lower is more specific: the reason shown for a failing seed is its most
    /// specific finding (a changed payload that was sent explains the duplicate
    /// effect it caused, not the other way round).
    pub fn specificity(self) -> u8 {
        match self {
            Check::Disclosure => 0,
            Check::ChangedPayloadDispatched => 1,
            Check::ReplayForChangedPayload => 2,
            Check::FalseConflict => 3,
            Check::DeniedButDispatched => 4,
            Check::StaleApplied => 5,
            Check::ClaimWithoutEffect => 6,
            Check::RejectedWithEffect => 7,
            Check::ReceiptMismatch => 8,
            Check::DuplicateEffect => 9,
            Check::MissingEffect => 10,
            Check::ExtraDispatch => 11,
            Check::UnattributedEffect => 12,
            Check::UnexpectedOutcome => 13,
            Check::Stuck => 14,
            Check::RunIncomplete => 15,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Check::DuplicateEffect => "duplicate-effect",
            Check::MissingEffect => "missing-effect",
            Check::ExtraDispatch => "extra-dispatch",
            Check::UnattributedEffect => "unattributed-effect",
            Check::StaleApplied => "stale-applied",
            Check::ClaimWithoutEffect => "claim-without-effect",
            Check::ReceiptMismatch => "receipt-mismatch",
            Check::RejectedWithEffect => "rejected-with-effect",
            Check::DeniedButDispatched => "denied-but-dispatched",
            Check::Disclosure => "disclosure",
            Check::FalseConflict => "false-conflict",
            Check::ChangedPayloadDispatched => "changed-payload-dispatched",
            Check::ReplayForChangedPayload => "replay-for-changed-payload",
            Check::UnexpectedOutcome => "unexpected-outcome",
            Check::Stuck => "stuck",
            Check::RunIncomplete => "run-incomplete",
        }
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub check: Check,
    pub operation: Option<String>,
    /// One line: the operation, the counts, the attempt.
    pub message: String,
}

/// What one operation came to in one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperationSummary {
    pub name: String,
    pub effects: u32,
    pub expected_effects_min: u32,
    pub expected_effects_max: u32,
    pub dispatches: u32,
    /// What each attempt ended with, in the order they were sent.
    pub outcomes: Vec<String>,
    pub receipts: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub status: Status,
    pub safety: Status,
    pub liveness: Liveness,
    pub findings: Vec<Finding>,
    pub operations: Vec<OperationSummary>,
}

impl Verdict {
    /// The finding that decided the verdict: the most specific one.
    pub fn decisive(&self) -> Option<&Finding> {
        self.findings
            .iter()
            .min_by_key(|finding| finding.check.specificity())
    }

    /// The first finding that decided the verdict, as a one-line reason.
    pub fn reason(&self) -> Option<String> {
        let decisive = self.decisive()?;
        Some(format!("{}: {}", decisive.check, decisive.message))
    }

    /// A verdict for a run whose checker could not be run at all.
    pub fn undecided(message: String) -> Verdict {
        Verdict {
            status: Status::Unknown,
            safety: Status::Unknown,
            liveness: Liveness::Unknown,
            findings: vec![Finding {
                check: Check::RunIncomplete,
                operation: None,
                message,
            }],
            operations: Vec::new(),
        }
    }
}

/// Judges one run of `trial` against `target`.
pub fn check(trial: &Trial<'_>, target: &TargetInfo, run: &RunOutput) -> Verdict {
    let mut checker = Checker {
        trial,
        target,
        run,
        findings: Vec::new(),
        liveness_judged: false,
    };
    checker.unattributed_effects();
    let operations = (0..trial.operations.len())
        .map(|operation| checker.operation(operation))
        .collect();
    checker.calls();
    if let Some(error) = &run.error {
        checker.findings.push(Finding {
            check: Check::RunIncomplete,
            operation: None,
            message: error.clone(),
        });
    }

    let incomplete = run.error.is_some();
    let safety_failed = checker
        .findings
        .iter()
        .any(|finding| !matches!(finding.check, Check::Stuck | Check::RunIncomplete));
    let stuck = checker
        .findings
        .iter()
        .any(|finding| finding.check == Check::Stuck);
    let safety = match (safety_failed, incomplete) {
        (true, _) => Status::Fail,
        (false, true) => Status::Unknown,
        (false, false) => Status::Pass,
    };
    let liveness = match (stuck, incomplete, checker.liveness_judged) {
        (true, _, _) => Liveness::Fail,
        (false, true, _) => Liveness::Unknown,
        (false, false, true) => Liveness::Pass,
        (false, false, false) => Liveness::NotApplicable,
    };
    let status = if safety == Status::Fail || liveness == Liveness::Fail {
        Status::Fail
    } else if incomplete {
        Status::Unknown
    } else {
        Status::Pass
    };
    Verdict {
        status,
        safety,
        liveness,
        findings: checker.findings,
        operations,
    }
}

struct Checker<'a> {
    trial: &'a Trial<'a>,
    target: &'a TargetInfo,
    run: &'a RunOutput,
    findings: Vec<Finding>,
    liveness_judged: bool,
}

impl<'a> Checker<'a> {
    fn fail(&mut self, check: Check, operation: Option<usize>, message: String) {
        self.findings.push(Finding {
            check,
            operation: operation.map(|index| self.trial.operations[index].name.clone()),
            message,
        });
    }

    fn effects_of(&self, operation: usize) -> Vec<&'a Effect> {
        let subject = &self.trial.operations[operation].subject;
        self.run
            .ledger
            .effects
            .iter()
            .filter(|effect| effect.subject.as_ref() == Some(subject))
            .collect()
    }

    fn attempts_of(&self, operation: usize) -> Vec<&'a Attempt> {
        let mut attempts: Vec<&'a Attempt> = self
            .run
            .history
            .attempts
            .iter()
            .filter(|attempt| attempt.operation == operation)
            .collect();
        attempts.sort_by_key(|attempt| {
            (
                attempt.sent_at,
                attempt.call,
                attempt.worker,
                attempt.attempt,
            )
        });
        attempts
    }

    fn unattributed_effects(&mut self) {
        let stray: Vec<String> = self
            .run
            .ledger
            .effects
            .iter()
            .filter(|effect| {
                effect
                    .subject
                    .as_deref()
                    .and_then(|subject| self.trial.operation_of_subject(subject))
                    .is_none()
            })
            .map(|effect| format!("{} (dispatch {})", effect.receipt, effect.dispatch))
            .collect();
        if !stray.is_empty() {
            self.fail(
                Check::UnattributedEffect,
                None,
                format!(
                    "{} effect(s) carry no subject of this run's operations: {}",
                    stray.len(),
                    stray.join(", ")
                ),
            );
        }
    }

    /// Splits the operation's life into [`Epochs`] by the target's declared retention.
    /// With `straddlers_start`, an attempt that straddles the retention starts
    /// a new epoch (the target took it as a new operation); without, it does
    /// not (the target judged it before the jump). The checks that depend on
    /// the split fail only when they fail under both readings.
    fn epochs(
        &self,
        operation: usize,
        attempts: &[&Attempt],
        dispatches: &[&Dispatch],
        straddlers_start: bool,
    ) -> Epochs {
        let mut epochs = Epochs {
            starts: Vec::new(),
            bindings: Vec::new(),
            of_attempt: Vec::with_capacity(attempts.len()),
            straddling: Vec::with_capacity(attempts.len()),
        };
        let retention_ms = self.target.retention.map(chaos_kit::clock::millis);
        let mut anchor_wall: Option<u64> = None;
        for attempt in attempts {
            let latest = self.latest_wall_clock(attempt);
            // (whether it starts an epoch, whether it straddles, the new anchor)
            let (starts_epoch, straddles, anchor) = match (anchor_wall, retention_ms) {
                (None, _) => (true, false, attempt.wall_clock_ms),
                (Some(anchor), Some(retention))
                    if attempt.wall_clock_ms.saturating_sub(anchor) >= retention =>
                {
                    (true, false, attempt.wall_clock_ms)
                }
                // Perhaps a new operation: if the target took it as one, its
                // record dates from after the jump, and so does this epoch.
                (Some(anchor), Some(retention)) if latest.saturating_sub(anchor) >= retention => {
                    if straddlers_start {
                        (true, true, latest)
                    } else {
                        (false, true, anchor)
                    }
                }
                (Some(anchor), _) => (false, false, anchor),
            };
            anchor_wall = Some(anchor);
            if starts_epoch {
                epochs.starts.push(attempt.sent_at);
                epochs.bindings.push(attempt.payload_fingerprint.clone());
            }
            epochs.of_attempt.push(epochs.starts.len() - 1);
            epochs.straddling.push(straddles);
        }
        if epochs.starts.is_empty() {
            epochs.starts.push(0);
            epochs.bindings.push(
                self.trial.operations[operation]
                    .approved_fingerprint
                    .clone(),
            );
        }
        // What the target bound an epoch to is best seen in what it sent: the
        // first dispatch of the epoch. An attempt the target refused before
        // claiming (say, the authority did not answer) bound nothing.
        let mut bound = vec![false; epochs.starts.len()];
        for dispatch in dispatches {
            let epoch = epochs.at(dispatch.at);
            if !bound[epoch] {
                bound[epoch] = true;
                epochs.bindings[epoch] = dispatch.payload_fingerprint.clone();
            }
        }
        epochs
    }

    /// The latest the target's wall clock can have read while handling
    /// `attempt`: its wall clock when sent, plus the time it took, plus every
    /// clock jump before its answer arrived (one in the millisecond it was sent
    /// too, to err on the side of the target).
    fn latest_wall_clock(&self, attempt: &Attempt) -> u64 {
        let jumps: u64 = self
            .run
            .history
            .faults
            .iter()
            .filter(|event| attempt.sent_at <= event.at && event.at < attempt.ended_at)
            .filter_map(
                |event| match self.trial.scenario.faults.get(event.fault?)? {
                    crate::fault::Fault::AdvanceClock { by, .. } => {
                        Some(chaos_kit::clock::millis(*by))
                    }
                    _ => None,
                },
            )
            .sum();
        attempt.wall_clock_ms + (attempt.ended_at - attempt.sent_at) + jumps
    }

    fn operation(&mut self, index: usize) -> OperationSummary {
        let trial = self.trial;
        let run = self.run;
        let operation = &trial.operations[index];
        let name = operation.name.clone();
        let effects = self.effects_of(index);
        let attempts = self.attempts_of(index);
        let dispatches: Vec<_> = run
            .ledger
            .dispatches
            .iter()
            .filter(|dispatch| dispatch.subject.as_ref() == Some(&operation.subject))
            .collect();
        let readings = [
            self.epochs(index, &attempts, &dispatches, true),
            self.epochs(index, &attempts, &dispatches, false),
        ];
        let expected = trial.scenario.expected_effects(&name);
        // The reading with the more epochs allows the more effects.
        let expected_max = expected * readings[0].starts.len() as u32;
        let count = effects.len() as u32;

        if count > expected_max {
            let extra = effects[expected_max as usize];
            let culprit = attempts
                .iter()
                .filter(|attempt| attempt.spans(extra.at))
                .max_by_key(|attempt| attempt.sent_at)
                .map(|attempt| format!("during attempt {}", describe(attempt)))
                .unwrap_or_else(|| "while no attempt was in flight".into());
            self.fail(
                Check::DuplicateEffect,
                Some(index),
                format!(
                    "operation '{name}': {count} effects, expected {}; effect {} ({}, dispatch {} at {} ms) was committed {culprit}",
                    range(expected, expected_max),
                    expected_max + 1,
                    extra.receipt,
                    extra.dispatch,
                    extra.at
                ),
            );
        } else if count < expected && judges_completion(trial) {
            let last = attempts
                .last()
                .map(|attempt| {
                    format!(
                        "; the last attempt {} ended {}",
                        describe(attempt),
                        attempt.summary()
                    )
                })
                .unwrap_or_default();
            self.fail(
                Check::MissingEffect,
                Some(index),
                format!(
                    "operation '{name}': {count} effects, expected {expected}: the operation was abandoned{last}"
                ),
            );
        }

        if let Some(limit) = trial.scenario.expect.max_dispatches_per_operation {
            if dispatches.len() as u32 > limit {
                let extra = dispatches[limit as usize];
                self.fail(
                    Check::ExtraDispatch,
                    Some(index),
                    format!(
                        "operation '{name}': {} dispatches reached the provider, at most {limit} allowed; dispatch {} at {} ms was one too many",
                        dispatches.len(),
                        extra.number,
                        extra.at
                    ),
                );
            }
        }

        for dispatch in &dispatches {
            let during_straddling_attempt = attempts
                .iter()
                .zip(&readings[0].straddling)
                .any(|(attempt, straddles)| *straddles && attempt.spans(dispatch.at));
            let changed_in_every_reading = readings.iter().all(|epochs| {
                dispatch.payload_fingerprint != epochs.bindings[epochs.at(dispatch.at)]
            });
            if changed_in_every_reading && !during_straddling_attempt {
                self.fail(
                    Check::ChangedPayloadDispatched,
                    Some(index),
                    format!(
                        "operation '{name}': dispatch {} at {} ms carried a payload that differs from the approved one; a changed payload under the same key must be a conflict, not a new send",
                        dispatch.number, dispatch.at
                    ),
                );
                break;
            }
        }

        for (position, attempt) in attempts.iter().enumerate() {
            let said = match &attempt.end {
                AttemptEnd::Answered(answer) => answer,
                AttemptEnd::Lost { dropped, .. } => dropped,
                AttemptEnd::Failed { .. } => continue,
            };
            let [eager, strict] = &readings;
            let (eager_epoch, strict_epoch) =
                (eager.of_attempt[position], strict.of_attempt[position]);
            let context = AttemptContext {
                bindings: [
                    // Taken as a new operation, a straddling attempt is what
                    // binds it: it is held to no earlier payload.
                    (!eager.straddling[position]).then(|| eager.bindings[eager_epoch].as_str()),
                    Some(strict.bindings[strict_epoch].as_str()),
                ],
                epoch_starts_at: eager.starts[eager_epoch].max(strict.starts[strict_epoch]),
            };
            self.honesty(index, attempt, said, &effects, &attempts, context);
        }

        OperationSummary {
            name,
            effects: count,
            expected_effects_min: expected,
            expected_effects_max: expected_max,
            dispatches: dispatches.len() as u32,
            outcomes: attempts
                .iter()
                .map(|attempt| {
                    format!(
                        "{}.{}.{} {}",
                        attempt.call,
                        attempt.worker,
                        attempt.attempt,
                        attempt.summary()
                    )
                })
                .collect(),
            receipts: effects
                .iter()
                .map(|effect| effect.receipt.clone())
                .collect(),
        }
    }

    /// Outcome honesty and no disclosure, for what the target said to one attempt.
    fn honesty(
        &mut self,
        index: usize,
        attempt: &Attempt,
        said: &Answer,
        effects: &[&Effect],
        attempts: &[&Attempt],
        context: AttemptContext<'_>,
    ) {
        let name = &self.trial.operations[index].name;
        let who = describe(attempt);
        let effects_by_answer: Vec<&&Effect> = effects
            .iter()
            .filter(|effect| effect.at <= attempt.ended_at)
            .collect();
        // Effects of an earlier epoch belong to an operation the target has
        // (by its declared policy) forgotten: they do not make a refusal of the
        // new one dishonest.
        let effects_of_epoch: Vec<&&Effect> = effects_by_answer
            .iter()
            .copied()
            .filter(|effect| effect.at >= context.epoch_starts_at)
            .collect();
        // Judged against the payload the operation is bound to, in every
        // reading of the retention split (see `epochs`).
        let changed = context
            .bindings
            .iter()
            .all(|binding| binding.is_some_and(|binding| attempt.payload_fingerprint != binding));
        let unchanged = context
            .bindings
            .iter()
            .all(|binding| binding.is_some_and(|binding| attempt.payload_fingerprint == binding));

        match said.outcome {
            Outcome::Applied | Outcome::Replayed if effects_by_answer.is_empty() => self.fail(
                Check::ClaimWithoutEffect,
                Some(index),
                format!(
                    "operation '{name}': attempt {who} answered {}, but the provider holds no effect for it",
                    said.outcome
                ),
            ),
            Outcome::Applied | Outcome::Replayed if changed => self.fail(
                Check::ReplayForChangedPayload,
                Some(index),
                format!(
                    "operation '{name}': attempt {who} sent a payload that differs from the approved one and was answered {} with the old result, instead of a conflict",
                    said.outcome
                ),
            ),
            Outcome::Applied if !effects_by_answer.iter().any(|effect| attempt.spans(effect.at)) => {
                let first = effects_by_answer[0];
                self.fail(
                    Check::StaleApplied,
                    Some(index),
                    format!(
                        "operation '{name}': attempt {who} answered applied, but the effect ({}) was committed at {} ms, before the attempt was sent at {} ms: a replay reported as a new effect",
                        first.receipt, first.at, attempt.sent_at
                    ),
                );
            }
            Outcome::Rejected if !effects_of_epoch.is_empty() => self.fail(
                Check::RejectedWithEffect,
                Some(index),
                format!(
                    "operation '{name}': attempt {who} answered rejected, but the provider committed its effect ({}) at {} ms",
                    effects_of_epoch[0].receipt, effects_of_epoch[0].at
                ),
            ),
            Outcome::Conflict if unchanged => self.fail(
                Check::FalseConflict,
                Some(index),
                format!(
                    "operation '{name}': attempt {who} answered conflict to a payload equal to the approved one (same canonical form): a retry was refused as a different action"
                ),
            ),
            Outcome::Denied => {
                let alone = attempts.iter().all(|other| {
                    std::ptr::eq(*other, attempt)
                        || other.ended_at < attempt.sent_at
                        || other.sent_at > attempt.ended_at
                });
                let dispatched = self.run.ledger.dispatches.iter().find(|dispatch| {
                    dispatch.subject.as_ref() == Some(&self.trial.operations[index].subject)
                        && attempt.spans(dispatch.at)
                });
                if let (true, Some(dispatch)) = (alone, dispatched) {
                    self.fail(
                        Check::DeniedButDispatched,
                        Some(index),
                        format!(
                            "operation '{name}': attempt {who} answered denied, yet dispatch {} reached the provider at {} ms while it was in flight",
                            dispatch.number, dispatch.at
                        ),
                    );
                }
            }
            _ => {}
        }

        let revoked_at = self.revoked_at();
        let sent_after_revocation = revoked_at.is_some_and(|at| attempt.sent_at >= at);
        if sent_after_revocation && said.outcome.claims_effect() {
            let what = match (said.receipt.is_some(), said.disclosed_result) {
                (true, true) => "with the receipt and result",
                (true, false) => "with the receipt",
                (false, true) => "with the result",
                (false, false) => "",
            };
            self.fail(
                Check::Disclosure,
                Some(index),
                format!(
                    "operation '{name}': attempt {who}, sent after the caller's permission was revoked at {} ms, was answered {} {what} instead of denied",
                    revoked_at.unwrap_or_default(),
                    said.outcome
                ),
            );
        } else if matches!(said.outcome, Outcome::Denied | Outcome::Conflict)
            && (said.receipt.is_some() || said.disclosed_result)
        {
            let what = match (said.receipt.is_some(), said.disclosed_result) {
                (true, true) => "a receipt and a result",
                (true, false) => "a receipt",
                _ => "a result",
            };
            self.fail(
                Check::Disclosure,
                Some(index),
                format!(
                    "operation '{name}': attempt {who} answered {} but disclosed {what}",
                    said.outcome
                ),
            );
        }

        if let Some(receipt) = &said.receipt {
            if !effects.iter().any(|effect| &effect.receipt == receipt) {
                let known: Vec<&str> = effects
                    .iter()
                    .map(|effect| effect.receipt.as_str())
                    .collect();
                self.fail(
                    Check::ReceiptMismatch,
                    Some(index),
                    format!(
                        "operation '{name}': attempt {who} answered with receipt '{receipt}', but the provider's receipts for this operation are [{}]",
                        known.join(", ")
                    ),
                );
            }
        }
    }

    /// When the caller's permission was first taken away, if it was.
    fn revoked_at(&self) -> Option<crate::history::Ms> {
        self.run
            .history
            .faults
            .iter()
            .filter(|event| {
                event
                    .fault
                    .and_then(|index| self.trial.scenario.faults.get(index))
                    .is_some_and(|fault| matches!(fault, crate::fault::Fault::Revoke { .. }))
            })
            .map(|event| event.at)
            .min()
    }

    /// Per-call expectations, and liveness.
    fn calls(&mut self) {
        let can_reconcile = self.trial.scenario.provider.profile.can_reconcile();
        for call in &self.trial.calls {
            let name = self.trial.operations[call.operation].name.clone();
            let last_call_of_operation = self
                .trial
                .calls
                .iter()
                .rev()
                .find(|other| other.operation == call.operation)
                .is_some_and(|last| last.number == call.number);
            let finals: Vec<&Attempt> = (1..=call.concurrency)
                .filter_map(|worker| {
                    self.run
                        .history
                        .attempts
                        .iter()
                        .filter(|attempt| attempt.call == call.number && attempt.worker == worker)
                        .max_by_key(|attempt| attempt.attempt)
                })
                .collect();
            let definitive: Vec<(&Attempt, Outcome)> = finals
                .iter()
                .filter_map(|attempt| {
                    let outcome = attempt.answer()?.outcome;
                    outcome.is_definitive().then_some((*attempt, outcome))
                })
                .collect();

            let label = format!(
                "call {} (operation '{name}', {} payload)",
                call.number,
                variant_name(call.variant)
            );
            if let Some(expect) = &call.expect {
                let accepted = join(expect.iter().map(|outcome| outcome.as_str()));
                for (attempt, outcome) in &definitive {
                    if !expect.contains(outcome) {
                        self.fail(
                            Check::UnexpectedOutcome,
                            Some(call.operation),
                            format!(
                                "{label}: attempt {} answered {outcome}, expected {accepted}",
                                describe(attempt)
                            ),
                        );
                    }
                }
                let accepts_uncertainty =
                    expect.contains(&Outcome::Unknown) || expect.contains(&Outcome::Pending);
                let wants_effect = expect.iter().all(|outcome| outcome.claims_effect());
                if definitive.is_empty() && !accepts_uncertainty && !finals.is_empty() {
                    let seen = self.outcomes_of_call(call.number);
                    if wants_effect {
                        self.liveness_judged = true;
                        self.fail(
                            Check::Stuck,
                            Some(call.operation),
                            format!("{label}: never learned its outcome in {} attempts ({seen}), expected {accepted}", call.attempts),
                        );
                    } else {
                        self.fail(
                            Check::UnexpectedOutcome,
                            Some(call.operation),
                            format!("{label}: never got a definitive answer ({seen}), expected {accepted}"),
                        );
                    }
                } else if wants_effect {
                    self.liveness_judged = true;
                }
            } else if can_reconcile
                && last_call_of_operation
                && !finals.is_empty()
                && judges_completion(self.trial)
            {
                self.liveness_judged = true;
                if definitive.is_empty() {
                    let seen = self.outcomes_of_call(call.number);
                    self.fail(
                        Check::Stuck,
                        Some(call.operation),
                        format!(
                            "{label}: never learned the outcome in {} attempts ({seen}), though the {} provider lets a target find it out",
                            call.attempts, self.trial.scenario.provider.profile
                        ),
                    );
                }
            }
        }
    }

    fn outcomes_of_call(&self, number: u32) -> String {
        let mut attempts: Vec<&Attempt> = self
            .run
            .history
            .attempts
            .iter()
            .filter(|attempt| attempt.call == number)
            .collect();
        attempts.sort_by_key(|attempt| attempt.sent_at);
        join(attempts.iter().map(|attempt| attempt.summary()))
    }
}

/// Whether the run is judged on operations *completing* (`missing-effect`, and
/// liveness for calls without `expect`), or only on the universal invariants.
///
/// A schedule written by `chaos explore` (issue 5) is judged on the universal
/// invariants alone: at most the expected effects, honest outcomes, no
/// disclosure, no dispatch of a changed payload. Whether an operation can
/// complete there depends on a retry budget and faults a generator chose: one
/// attempt whose answer is lost, a restart slower than every retry, a blind
/// provider, a clock jump past the provider's retention. There, `unknown` (or
/// nothing at all) is the honest end, so completion is not asked of the target.
fn judges_completion(trial: &Trial<'_>) -> bool {
    trial.scenario.test != TestKind::Explored
}

/// An operation's life split by the target's declared retention. Past it, the
/// target's declared policy is that a retry may be a new operation: a new
/// epoch, bound to its own payload and allowed its own effects. An attempt
/// sent a retention after the start of the current epoch starts a new one. An
/// attempt sent inside it, but still being handled when a clock jump carried
/// the target past it, *straddles*: the target may have judged it either way,
/// so both readings are built (see `Checker::epochs`). Taken as new, it starts
/// an epoch dated from after the jump, as the target's new record would be.
struct Epochs {
    /// When each epoch's first attempt was sent (run time, ms).
    starts: Vec<Ms>,
    /// The payload fingerprint each epoch is bound to: its first dispatch's,
    /// or before any dispatch, its first attempt's.
    bindings: Vec<String>,
    /// The epoch of each attempt, in the order of `attempts_of`.
    of_attempt: Vec<usize>,
    /// Whether each attempt straddles the retention: sent inside it, it was
    /// still being handled when a clock jump carried the target past it.
    straddling: Vec<bool>,
}

impl Epochs {
    /// The epoch under way at run time `at`.
    fn at(&self, at: Ms) -> usize {
        self.starts
            .iter()
            .rposition(|start| *start <= at)
            .unwrap_or(0)
    }
}

/// What an attempt is judged against.
#[derive(Clone, Copy)]
struct AttemptContext<'a> {
    /// The payload fingerprint its operation is bound to in its epoch, in each
    /// reading of the split; `None` where the attempt itself may bind it.
    bindings: [Option<&'a str>; 2],
    epoch_starts_at: Ms,
}

fn describe(attempt: &Attempt) -> String {
    format!(
        "{} (call {}, worker {}, attempt {})",
        attempt.attempt_id, attempt.call, attempt.worker, attempt.attempt
    )
}

fn range(min: u32, max: u32) -> String {
    if min == max {
        min.to_string()
    } else {
        format!("{min} to {max}")
    }
}

fn variant_name(variant: crate::scenario::PayloadVariant) -> &'static str {
    match variant {
        crate::scenario::PayloadVariant::Original => "original",
        crate::scenario::PayloadVariant::Changed => "changed",
        crate::scenario::PayloadVariant::Equivalent => "equivalent",
    }
}

fn join<S: AsRef<str>>(items: impl Iterator<Item = S>) -> String {
    items
        .map(|item| item.as_ref().to_owned())
        .collect::<Vec<_>>()
        .join(", ")
}
