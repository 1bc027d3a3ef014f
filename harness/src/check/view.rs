//! What every checker reads, built once per run: for each logical operation,
//! its attempts in the order they were sent, its slice of the ledger, its
//! life split into epochs by the target's declared retention, and for each
//! answer what it is judged against.

use std::collections::BTreeMap;

use chaos_kit::clock::millis;
use chaos_kit::target::{AfterRetention, TargetInfo};

use super::OperationSummary;
use crate::fault::{Action, Hop};
use crate::history::{
    Answer, Attempt, AttemptEnd, Dispatch, Disposition, Effect, Happened, Ms, RunOutput,
};
use crate::plan::{PlannedCall, Trial};
use crate::scenario::{Policy, TestKind};

/// The run, as the checkers see it.
pub(crate) struct RunView<'a> {
    pub trial: &'a Trial<'a>,
    pub run: &'a RunOutput,
    pub operations: Vec<OperationView<'a>>,
    /// When the caller's permission was first taken away, if it was.
    pub revoked_at: Option<Ms>,
    /// Every revocation: when, and what it came right after or before, if
    /// it was made at such a moment.
    revocations: Vec<(Ms, Option<Between>)>,
    /// What the target declares a retry past its retention gets.
    pub after_retention: AfterRetention,
    /// The target's declared retention, if it declares one.
    pub retention: Option<std::time::Duration>,
}

/// Where between the agent's call steps a moment's fault was made.
#[derive(Debug, Clone, Copy)]
enum Between {
    AfterCall(u32),
    BeforeCall(u32),
    /// Right after the Nth dispatch: not between calls, but after it.
    AfterCommit(u32),
}

/// One logical operation of the run.
pub(crate) struct OperationView<'a> {
    /// Index into the trial's operations.
    pub index: usize,
    pub name: &'a str,
    /// The tenant whose caller runs it.
    pub tenant: &'a str,
    /// Its attempts, in the order they were sent.
    pub attempts: Vec<&'a Attempt>,
    pub effects: Vec<&'a Effect>,
    pub dispatches: Vec<&'a Dispatch>,
    /// Its life split by the target's retention, in both readings of an
    /// attempt that straddles it: `[eager, strict]` (see [`Epochs`]).
    pub readings: [Epochs; 2],
    /// The effects the scenario expects per epoch, and at most in all (the
    /// reading with the more epochs allows the more).
    pub expected: u32,
    pub expected_max: u32,
    /// Of those, the ones allowed for re-plans a human signed off (policy
    /// `sign-off`): none under any other policy.
    pub signed_off: u32,
    /// The first retention epoch holding more effects than `expected`, in
    /// every reading; `None` under a policy that refuses past the retention
    /// (there the total is the whole judgement).
    pub crowded: Option<Crowded<'a>>,
    /// Every attempt the target answered (even if the answer was then lost).
    pub answers: Vec<AnswerView<'a>>,
}

/// One answer of the target, with what it is judged against.
pub(crate) struct AnswerView<'a> {
    /// The attempt's position in [`OperationView::attempts`].
    pub position: usize,
    pub attempt: &'a Attempt,
    /// What the target said (what the agent read, or what a fault lost).
    pub said: &'a Answer,
    /// The operation's effects committed by the time the answer came.
    pub effects_by_answer: Vec<&'a Effect>,
    /// Those of them in the attempt's own epoch: effects of an earlier epoch
    /// belong to an operation the target has (by its declared policy)
    /// forgotten, and do not make a refusal of the new one dishonest.
    pub effects_of_epoch: Vec<&'a Effect>,
    /// The attempt's payload differs from the one its operation is bound to,
    /// in every reading of the retention split.
    pub changed: bool,
    /// ...or equals it, in every reading.
    pub unchanged: bool,
    /// Whether the attempt's tool call decided the operation again: any but
    /// the first tool call the agent made for it.
    pub decided_again: bool,
    /// A receipt of the operation the target had already given the agent
    /// before this attempt was sent, if it had.
    pub receipt_told: Option<&'a str>,
}

impl<'a> RunView<'a> {
    pub(crate) fn new(trial: &'a Trial<'a>, target: &TargetInfo, run: &'a RunOutput) -> Self {
        let retention_ms = target.retention.map(millis);
        let owners = owners(trial, run);
        let operations = (0..trial.operations.len())
            .map(|index| {
                OperationView::new(
                    trial,
                    run,
                    index,
                    &owners,
                    retention_ms,
                    target.after_retention,
                )
            })
            .collect();
        let revocations: Vec<(Ms, Option<Between>)> = run
            .history
            .faults
            .iter()
            .filter(|event| event.is_revocation())
            .map(|event| {
                let after_call = event
                    .fault()
                    .and_then(|index| trial.scenario.faults.get(index))
                    .and_then(|fault| fault.trigger())
                    .and_then(|trigger| match trigger {
                        crate::fault::Trigger::AfterCall(call) => Some(Between::AfterCall(call)),
                        crate::fault::Trigger::BeforeCall(call) => Some(Between::BeforeCall(call)),
                        crate::fault::Trigger::AfterCommit(nth) => Some(Between::AfterCommit(nth)),
                        _ => None,
                    });
                (event.at, after_call)
            })
            .collect();
        let revoked_at = revocations.iter().map(|(at, _)| *at).min();
        RunView {
            trial,
            run,
            operations,
            revoked_at,
            revocations,
            after_retention: target.after_retention,
            retention: target.retention,
        }
    }

    /// Whether `attempt` was sent after the caller's permission was
    /// revoked. A revocation made between calls falls between one call's
    /// attempts and the next call's, whatever the millisecond clock says: a
    /// fast target answers call N and sees call N+1 in the tick the
    /// revocation is stamped with (redis-ledger, live, once a process
    /// served trials warm).
    pub(crate) fn sent_after_revocation(&self, attempt: &Attempt) -> bool {
        self.revocations.iter().any(|&(at, between)| match between {
            Some(Between::AfterCall(call)) => attempt.call > call,
            Some(Between::BeforeCall(call)) => attempt.call >= call,
            Some(Between::AfterCommit(_)) | None => attempt.sent_at >= at,
        })
    }

    /// Whether dispatch `number` came before every revocation: one made
    /// right after the Nth dispatch follows dispatches 1 to N, even in the
    /// millisecond they share (redis-ledger at revoked-while-unknown, live).
    pub(crate) fn dispatched_before_revocation(&self, number: u32) -> bool {
        self.revocations.iter().all(
            |&(_, between)| matches!(between, Some(Between::AfterCommit(nth)) if number <= nth),
        )
    }

    /// Whether the run is judged on operations *completing* (`missing-effect`,
    /// and liveness for calls without `expect`), or only on the universal
    /// invariants.
    ///
    /// A schedule written by `chaos explore` is judged on the universal
    /// invariants alone: at most the expected effects, honest outcomes, no
    /// disclosure, no dispatch of a changed payload. Whether an operation can
    /// complete there depends on a retry budget and faults a generator chose:
    /// one attempt whose answer is lost, a restart slower than every retry, a
    /// blind provider, a clock jump past the provider's retention. There,
    /// `unknown` (or nothing at all) is the honest end, so completion is not
    /// asked of the target.
    pub(crate) fn judges_completion(&self) -> bool {
        self.trial.scenario.test != TestKind::Explored
    }

    /// The attempts of one call step, in the order they were sent.
    pub(crate) fn attempts_of_call(&self, number: u32) -> Vec<&'a Attempt> {
        let mut attempts: Vec<&Attempt> = self
            .run
            .history
            .attempts
            .iter()
            .filter(|attempt| attempt.call == number)
            .collect();
        attempts.sort_by_key(|attempt| attempt.sent_at);
        attempts
    }

    /// The last attempt of each of the call's workers (every execution's,
    /// a replay's too), in worker order.
    pub(crate) fn finals(&self, call: &PlannedCall) -> Vec<&'a Attempt> {
        let mut last: BTreeMap<u32, &'a Attempt> = BTreeMap::new();
        for attempt in &self.run.history.attempts {
            if attempt.call != call.number {
                continue;
            }
            let entry = last.entry(attempt.worker).or_insert(attempt);
            if attempt.attempt > entry.attempt {
                *entry = attempt;
            }
        }
        last.into_values().collect()
    }

    /// Why no target could bring `call` to an end its operation may be
    /// judged on, when the scenario itself takes every honest end away:
    /// then `stuck` and `missing-effect` would blame the target for the
    /// scenario (issue 15), and the verdict is `unknown` with this reason.
    /// `chaos explore` judges its schedules on the invariants alone for the
    /// same cause ([`RunView::judges_completion`]); a hand-written scenario
    /// is judged on completion wherever one is possible.
    pub(crate) fn no_honest_end(&self, call: &PlannedCall) -> Option<String> {
        let finals = self.finals(call);
        if finals.is_empty() {
            return None;
        }
        // The harness lost (or the agent's crash dropped) the last answer of
        // every worker, and no retry was left: the agent cannot hear an
        // answer, whatever the target said.
        if finals.iter().all(|attempt| {
            matches!(
                attempt.end,
                AttemptEnd::Lost { .. }
                    | AttemptEnd::Truncated { .. }
                    | AttemptEnd::Abandoned
                    | AttemptEnd::Interrupted
            )
        }) {
            return Some(format!(
                "the scenario's own fault lost the answer to its last attempt, and it had no retry left (attempts = {}); give the call more attempts for the target to be judged on finishing it",
                call.attempts
            ));
        }
        // A fault left the target not knowing whether the provider acted,
        // then the clocks jumped past the provider's retention: the provider
        // forgot the key, so nobody is left who knows.
        let provider = &self.trial.scenario.provider;
        let retention = provider
            .retention
            .filter(|_| provider.profile.can_reconcile())?;
        let operation = self.operations.get(call.operation)?;
        let uncertain_from = self
            .run
            .history
            .faults
            .iter()
            .filter(|event| leaves_the_target_uncertain(event.what))
            .filter(|event| {
                operation
                    .attempts
                    .iter()
                    .any(|attempt| attempt.spans(event.at))
            })
            .map(|event| event.at)
            .min()?;
        let jumped: std::time::Duration = self
            .run
            .history
            .faults
            .iter()
            .filter(|event| event.at >= uncertain_from)
            .filter_map(|event| event.clock_jump())
            .sum();
        (jumped >= retention).then(|| {
            format!(
                "a fault left the target not knowing whether the provider acted, and the clocks then jumped {} past the provider's {} retention: the provider forgot the key, so no target can learn the outcome",
                humantime::format_duration(jumped),
                humantime::format_duration(retention)
            )
        })
    }

    pub(crate) fn summaries(&self) -> Vec<OperationSummary> {
        self.operations
            .iter()
            .map(|operation| OperationSummary {
                name: operation.name.to_owned(),
                effects: operation.effects.len() as u32,
                expected_effects_min: operation.expected,
                expected_effects_max: operation.expected_max,
                dispatches: operation.dispatches.len() as u32,
                outcomes: operation
                    .attempts
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
                receipts: operation
                    .effects
                    .iter()
                    .map(|effect| effect.receipt.clone())
                    .collect(),
            })
            .collect()
    }
}

impl<'a> OperationView<'a> {
    fn new(
        trial: &'a Trial<'a>,
        run: &'a RunOutput,
        index: usize,
        owners: &[Option<usize>],
        retention_ms: Option<u64>,
        after_retention: AfterRetention,
    ) -> Self {
        let operation = &trial.operations[index];
        let attempts = attempts_of(run, index);
        let owned = |dispatch: u32| owners.get(dispatch as usize - 1) == Some(&Some(index));
        let effects: Vec<&Effect> = run
            .ledger
            .effects
            .iter()
            .filter(|effect| owned(effect.dispatch))
            .collect();
        let dispatches: Vec<&Dispatch> = run
            .ledger
            .dispatches
            .iter()
            .filter(|dispatch| owned(dispatch.number))
            .collect();
        let split = |straddlers_start| {
            Epochs::split(
                trial,
                run,
                index,
                &attempts,
                &dispatches,
                retention_ms,
                straddlers_start,
            )
        };
        let readings = [split(true), split(false)];
        // Under a policy that allows every call its own effect, each tool
        // call the agent made is an intent of its own.
        let per_intent = trial.scenario.expected_effects(&operation.name);
        // A re-plan a human signed off is a new action the human asked for:
        // under `sign-off`, one more effect each, and none for a re-plan
        // without one.
        let signed_off = match trial.scenario.workload.policy {
            Policy::SignOff => signed_off(run, &attempts),
            Policy::Coalesce | Policy::Refuse | Policy::Allow => 0,
        };
        let expected = match trial.scenario.workload.policy {
            Policy::Coalesce | Policy::Refuse | Policy::SignOff => per_intent + signed_off,
            Policy::Allow => per_intent * tool_calls(&attempts),
        };
        // Past the retention, only a policy that takes the retry for a new
        // operation allows it a new effect; a refusal allows none, and a
        // reconcile only where the provider forgot too (judged apart).
        // An epoch counts by what it holds: a retry that lands past the
        // retention opens one whether or not anything is committed in it, and
        // an empty one must not excuse a burst in an earlier one (issue 22:
        // a wait for `Retry-After` crossed the retention, and two effects of
        // one concurrent burst passed as `3/3`). Each epoch is judged on its
        // own ([`Epochs::crowded`]); the total allows one round per epoch
        // that holds an effect.
        let (epochs, crowded) = match after_retention {
            AfterRetention::Refuse => (1, None),
            AfterRetention::NewOperation | AfterRetention::Reconcile => {
                let holding = readings
                    .iter()
                    .map(|reading| reading.holding(&effects, &attempts))
                    .max()
                    .unwrap_or(1)
                    .max(1);
                // Crowded in every reading of a straddling attempt, or not
                // at all; an operation the retention never split is judged
                // by its total alone.
                let split = readings.iter().any(|reading| reading.starts.len() > 1);
                let crowded = match [&readings[0], &readings[1]]
                    .map(|reading| reading.crowded(&effects, &attempts, expected))
                {
                    [Some(eager), Some(_)] if split => Some(eager),
                    _ => None,
                };
                (holding, crowded)
            }
        };
        let expected_max = expected * epochs;

        let answers = attempts
            .iter()
            .enumerate()
            .filter_map(|(position, attempt)| {
                let said = match &attempt.end {
                    AttemptEnd::Answered(answer) => answer,
                    AttemptEnd::Lost { dropped, .. } | AttemptEnd::Truncated { dropped } => dropped,
                    AttemptEnd::Failed { .. } | AttemptEnd::Abandoned | AttemptEnd::Interrupted => {
                        return None
                    }
                };
                let [eager, strict] = &readings;
                let (eager_epoch, strict_epoch) =
                    (eager.of_attempt[position], strict.of_attempt[position]);
                // The payload the operation is bound to in the attempt's epoch,
                // in each reading; taken as a new operation, a straddling
                // attempt is what binds it, so it is held to no earlier payload.
                let bindings = [
                    (!eager.straddling[position]).then(|| eager.binding(eager_epoch)),
                    Some(strict.binding(strict_epoch)),
                ];
                let epoch_starts_at = eager.starts[eager_epoch].max(strict.starts[strict_epoch]);
                let epoch_starts_wall =
                    eager.start_walls[eager_epoch].max(strict.start_walls[strict_epoch]);
                let effects_by_answer: Vec<&Effect> = effects
                    .iter()
                    .copied()
                    .filter(|effect| effect.at <= attempt.ended_at)
                    .collect();
                let effects_of_epoch: Vec<&Effect> = effects_by_answer
                    .iter()
                    .copied()
                    .filter(|effect| {
                        effect.at >= epoch_starts_at && effect.wall_clock_ms >= epoch_starts_wall
                    })
                    .collect();
                // Changed: another intent (what the action is), which must be
                // refused. Unchanged: the very same arguments, which must not
                // be. A re-worded intent (drift) is neither: a layer may
                // refuse it as different words, or coalesce it as one action.
                let changed = bindings
                    .iter()
                    .all(|binding| binding.is_some_and(|(_, intent)| attempt.intent != intent));
                let unchanged = bindings.iter().all(|binding| {
                    binding
                        .is_some_and(|(fingerprint, _)| attempt.payload_fingerprint == fingerprint)
                });
                let first = attempts.first().map(|first| (first.call, first.decision));
                // Only this epoch's effects: past the target's retention, its
                // policy lets it forget the operation, references and all.
                let receipt_told = attempts
                    .iter()
                    .filter(|earlier| earlier.ended_at < attempt.sent_at)
                    .filter_map(|earlier| earlier.answer()?.receipt.as_deref())
                    .find(|receipt| {
                        effects_of_epoch
                            .iter()
                            .any(|effect| effect.receipt == *receipt)
                    });
                Some(AnswerView {
                    position,
                    attempt,
                    said,
                    effects_by_answer,
                    effects_of_epoch,
                    changed,
                    unchanged,
                    decided_again: first != Some((attempt.call, attempt.decision)),
                    receipt_told,
                })
            })
            .collect();

        OperationView {
            index,
            name: &operation.name,
            tenant: &operation.tenant,
            attempts,
            effects,
            dispatches,
            readings,
            expected,
            expected_max,
            signed_off,
            crowded,
            answers,
        }
    }
}

/// The operation each dispatch (by number) belongs to. The provider names the
/// subject; when several operations share it (two reminders for one
/// invoice), the dispatch belongs to the operation its downstream key was
/// first dispatched for, and a key seen first is the one of the operation
/// that exactly one operation was answered with the receipt of, or else of
/// the operation whose attempt was open when it arrived (of several, the
/// last sent), or else of the last one started by then. Operations of one subject run one
/// after another in every scenario that shares one, so this is exact there.
fn owners(trial: &Trial<'_>, run: &RunOutput) -> Vec<Option<usize>> {
    let mut by_key: BTreeMap<&str, usize> = BTreeMap::new();
    let attempts = &run.history.attempts;
    run.ledger
        .dispatches
        .iter()
        .map(|dispatch| {
            let subject = dispatch.subject.as_deref()?;
            let candidates: Vec<usize> = (0..trial.operations.len())
                .filter(|&index| trial.operations[index].subject == subject)
                .collect();
            if candidates.len() <= 1 {
                return candidates.first().copied();
            }
            if let Some(&owner) = dispatch.key.as_deref().and_then(|key| by_key.get(key)) {
                return Some(owner);
            }
            // The operation that was handed this dispatch's receipt, when
            // exactly one was: stronger than timing, which a millisecond
            // clock cannot split when one call's answer and the next call's
            // send share a tick (seen live, under load).
            let receipt = match &dispatch.disposition {
                Disposition::Committed { receipt } | Disposition::Replayed { receipt } => {
                    Some(receipt.as_str())
                }
                _ => None,
            };
            let told: Vec<usize> = candidates
                .iter()
                .copied()
                .filter(|&index| {
                    receipt.is_some()
                        && attempts.iter().any(|attempt| {
                            attempt.operation == index
                                && attempt
                                    .answer()
                                    .and_then(|answer| answer.receipt.as_deref())
                                    == receipt
                        })
                })
                .collect();
            if let [owner] = told[..] {
                if let Some(key) = dispatch.key.as_deref() {
                    by_key.insert(key, owner);
                }
                return Some(owner);
            }
            let started = |index: usize, open: bool| {
                attempts
                    .iter()
                    .filter(|attempt| attempt.operation == index && attempt.sent_at <= dispatch.at)
                    .filter(|attempt| !open || attempt.ended_at >= dispatch.at)
                    .map(|attempt| attempt.sent_at)
                    .max()
            };
            let latest = |open| {
                candidates
                    .iter()
                    .filter_map(|&index| Some((started(index, open)?, index)))
                    .max()
                    .map(|(_, index)| index)
            };
            let owner = latest(true)
                .or_else(|| latest(false))
                .unwrap_or(candidates[0]);
            if let Some(key) = dispatch.key.as_deref() {
                by_key.insert(key, owner);
            }
            Some(owner)
        })
        .collect()
}

/// How many tool calls (distinct tool-use ids) `attempts` carried.
fn tool_calls(attempts: &[&Attempt]) -> u32 {
    let mut ids: Vec<&str> = attempts
        .iter()
        .map(|attempt| attempt.tool_use_id.as_str())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids.len() as u32
}

/// How many of these attempts' tool calls a human signed off at the
/// authority before they were sent (`replan` with `signed-off = true`).
fn signed_off(run: &RunOutput, attempts: &[&Attempt]) -> u32 {
    let mut signed: Vec<(u32, u32)> = run
        .history
        .faults
        .iter()
        .filter_map(|event| match event.what {
            Happened::SignedOff { call, decision, .. } => Some((call, decision)),
            _ => None,
        })
        .filter(|(call, decision)| {
            attempts
                .iter()
                .any(|attempt| attempt.call == *call && attempt.decision == *decision)
        })
        .collect();
    signed.sort_unstable();
    signed.dedup();
    signed.len() as u32
}

/// The attempts of operation `index`, in the order they were sent (ties by
/// call, worker and attempt number): the order every report lists them in.
pub(crate) fn attempts_of(run: &RunOutput, index: usize) -> Vec<&Attempt> {
    let mut attempts: Vec<&Attempt> = run
        .history
        .attempts
        .iter()
        .filter(|attempt| attempt.operation == index)
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

/// Whether each effect (by its candidate epochs) fits an epoch with `room`
/// left; backtracking, over the handful of effects one operation has.
fn place(candidates: &[Vec<usize>], room: &mut [u32]) -> bool {
    let Some((first, rest)) = candidates.split_first() else {
        return true;
    };
    for &epoch in first {
        if room[epoch] == 0 {
            continue;
        }
        room[epoch] -= 1;
        let fits = place(rest, room);
        room[epoch] += 1;
        if fits {
            return true;
        }
    }
    false
}

/// A retention epoch holding more effects than one round of the operation
/// may have.
pub(crate) struct Crowded<'a> {
    /// When the epoch opened (run time, ms).
    pub starts_at: Ms,
    pub effects: u32,
    /// The first effect past the allowance.
    pub extra: &'a Effect,
}

/// An operation's life split by the target's declared retention. Past it, the
/// target's declared policy is that a retry may be a new operation: a new
/// epoch, bound to its own payload and allowed its own effects. An attempt
/// sent a retention after the start of the current epoch starts a new one. An
/// attempt sent inside it, but still being handled when a clock jump carried
/// the target past it, *straddles*: the target may have judged it either way,
/// so both readings are built, and the checks that depend on the split fail
/// only when they fail in both. Taken as new (the eager reading), it starts
/// an epoch dated from after the jump, as the target's new record would be.
pub(crate) struct Epochs {
    /// When each epoch's first attempt was sent (run time, ms).
    pub starts: Vec<Ms>,
    /// The wall clock (with any jump) when it was sent: an effect of the
    /// epoch was committed no earlier. Run time alone cannot tell an effect
    /// committed in the very millisecond the clock jumped, before the jump,
    /// from the epoch the jump opened (explore found one told a reference
    /// it never had).
    pub start_walls: Vec<u64>,
    /// The payload fingerprint each epoch is bound to: its first dispatch's,
    /// or before any dispatch, its first attempt's.
    pub bindings: Vec<String>,
    /// The intent fingerprint of the same payload.
    pub intents: Vec<String>,
    /// The epoch of each attempt, in the view's order.
    pub of_attempt: Vec<usize>,
    /// Whether each attempt straddles the retention.
    pub straddling: Vec<bool>,
}

impl Epochs {
    fn split(
        trial: &Trial<'_>,
        run: &RunOutput,
        operation: usize,
        attempts: &[&Attempt],
        dispatches: &[&Dispatch],
        retention_ms: Option<u64>,
        straddlers_start: bool,
    ) -> Epochs {
        let mut epochs = Epochs {
            starts: Vec::new(),
            start_walls: Vec::new(),
            bindings: Vec::new(),
            intents: Vec::new(),
            of_attempt: Vec::with_capacity(attempts.len()),
            straddling: Vec::with_capacity(attempts.len()),
        };
        let mut anchor_wall: Option<u64> = None;
        for attempt in attempts {
            let latest = latest_wall_clock(trial, run, attempt);
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
                epochs.start_walls.push(attempt.wall_clock_ms);
                epochs.bindings.push(attempt.payload_fingerprint.clone());
                epochs.intents.push(attempt.intent.clone());
            }
            epochs.of_attempt.push(epochs.starts.len() - 1);
            epochs.straddling.push(straddles);
        }
        if epochs.starts.is_empty() {
            epochs.starts.push(0);
            epochs.start_walls.push(0);
            let approved = &trial.operations[operation].approved;
            epochs.bindings.push(approved.fingerprint.clone());
            epochs.intents.push(approved.intent.clone());
        }
        // What the target bound an epoch to is best seen in what it sent: the
        // first dispatch of the epoch. An attempt the target refused before
        // claiming (say, the authority did not answer) bound nothing.
        let mut bound = vec![false; epochs.starts.len()];
        // A payload in the provider's own shape (a Stripe form) is not the
        // arguments: it tells nothing about what the agent's attempts sent.
        for dispatch in dispatches
            .iter()
            .filter(|dispatch| !dispatch.provider_shaped)
        {
            let epoch = epochs.at(dispatch.at);
            if !bound[epoch] {
                bound[epoch] = true;
                epochs.bindings[epoch] = dispatch.payload_fingerprint.clone();
                epochs.intents[epoch] = dispatch.intent().to_owned();
            }
        }
        epochs
    }

    /// The epochs an effect may belong to: those of the attempts (of
    /// `attempts`, in the view's order) in flight when it was committed, since
    /// an attempt sent before a clock jump may commit after it; with none in
    /// flight, the epoch under way then.
    ///
    /// A straddling attempt that opened an epoch (the eager reading) may
    /// still have committed before the jump, while the target remembered:
    /// its effect may belong to the epoch before too. Found by `chaos
    /// explore`: a subagent's effect committed just before a clock jump was
    /// counted with a straddler's after it, as two in one epoch.
    fn of_effect(&self, effect: &Effect, attempts: &[&Attempt]) -> Vec<usize> {
        let mut epochs: Vec<usize> = (attempts.iter().enumerate())
            .filter(|(_, attempt)| attempt.spans(effect.at))
            .flat_map(|(position, _)| {
                let epoch = self.of_attempt[position];
                let before = (self.straddling[position] && epoch > 0).then(|| epoch - 1);
                std::iter::once(epoch).chain(before)
            })
            .collect();
        epochs.sort_unstable();
        epochs.dedup();
        if epochs.is_empty() {
            epochs.push(self.at(effect.at));
        }
        epochs
    }

    /// How many epochs may hold one of `effects` (an upper bound, erring on
    /// the side of the target).
    fn holding(&self, effects: &[&Effect], attempts: &[&Attempt]) -> u32 {
        let held: std::collections::BTreeSet<usize> = (effects.iter())
            .flat_map(|effect| self.of_effect(effect, attempts))
            .collect();
        held.len() as u32
    }

    /// Whether `effects` can be placed in epochs, each among those it may
    /// belong to, with at most `expected` in any one; if not, the epoch that
    /// overflows first and the effect past its allowance. The target gets
    /// every benefit of the doubt: only a crowding no placement avoids counts.
    fn crowded<'a>(
        &self,
        effects: &[&'a Effect],
        attempts: &[&Attempt],
        expected: u32,
    ) -> Option<Crowded<'a>> {
        let candidates: Vec<Vec<usize>> = (effects.iter())
            .map(|effect| self.of_effect(effect, attempts))
            .collect();
        let mut room = vec![expected; self.starts.len()];
        // More effects than all the epochs allow cannot fit; fewer are few
        // enough to search every placement.
        let fits =
            effects.len() <= expected as usize * self.starts.len() && place(&candidates, &mut room);
        if fits {
            return None;
        }
        // No placement fits: name where the first greedy one overflows.
        let mut room = vec![expected; self.starts.len()];
        for (effect, epochs) in effects.iter().zip(&candidates) {
            match epochs.iter().find(|epoch| room[**epoch] > 0) {
                Some(epoch) => room[*epoch] -= 1,
                None => {
                    let epoch = epochs[0];
                    let inside = (effects.iter().zip(&candidates))
                        .filter(|(_, theirs)| theirs.contains(&epoch))
                        .count() as u32;
                    return Some(Crowded {
                        starts_at: self.starts[epoch],
                        effects: inside,
                        extra: effect,
                    });
                }
            }
        }
        None
    }

    /// What epoch `epoch` is bound to: (payload fingerprint, intent fingerprint).
    pub(crate) fn binding(&self, epoch: usize) -> (&str, &str) {
        (&self.bindings[epoch], &self.intents[epoch])
    }

    /// The epoch under way at run time `at`.
    pub(crate) fn at(&self, at: Ms) -> usize {
        self.starts
            .iter()
            .rposition(|start| *start <= at)
            .unwrap_or(0)
    }
}

/// The latest the target's wall clock can have read while handling
/// `attempt`: its wall clock when sent, plus the time it took, plus every
/// clock jump before its answer arrived (one in the millisecond it was sent
/// too, to err on the side of the target, unless it came after a call
/// ended: the next call's attempts are sent after it, and their wall clock
/// already has it).
fn latest_wall_clock(trial: &Trial<'_>, run: &RunOutput, attempt: &Attempt) -> u64 {
    let seen_when_sent = |event: &crate::history::FaultEvent| {
        event.at == attempt.sent_at
            && event
                .fault()
                .and_then(|index| trial.scenario.faults.get(index))
                .and_then(|fault| fault.trigger())
                .is_some_and(|trigger| matches!(trigger, crate::fault::Trigger::AfterCall(_)))
    };
    let jumps: u64 = run
        .history
        .faults
        .iter()
        .filter(|event| attempt.sent_at <= event.at && event.at < attempt.ended_at)
        .filter(|event| !seen_when_sent(event))
        .filter_map(|event| event.clock_jump().map(millis))
        .sum();
    attempt.wall_clock_ms + (attempt.ended_at - attempt.sent_at) + jumps
}

/// How a reason names an attempt. Written out only when a finding is: most
/// attempts are named by none.
pub(crate) fn describe(attempt: &Attempt) -> Described<'_> {
    Described(attempt)
}

pub(crate) struct Described<'a>(&'a Attempt);

impl std::fmt::Display for Described<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let attempt = self.0;
        write!(f, "{} (call {}, ", attempt.attempt_id, attempt.call)?;
        // A first decision is the ordinary case and says nothing; a later one
        // is the re-plan the reader has to see to understand the count.
        if attempt.decision > 1 {
            write!(
                f,
                "decision {} as tool call {}, ",
                attempt.decision, attempt.tool_use_id
            )?;
        }
        write!(f, "worker {}, attempt {})", attempt.worker, attempt.attempt)
    }
}

/// Whether `what` leaves the target unable to tell, by itself, whether the
/// provider acted on its dispatch.
fn leaves_the_target_uncertain(what: Happened) -> bool {
    let action = match what {
        Happened::Fault { action, .. } => action,
        Happened::ClockWaited { .. }
        | Happened::SignedOff { .. }
        | Happened::TargetKilled
        | Happened::TargetRestarted => return false,
    };
    match action {
        Action::LoseAnswer {
            hop: Hop::ProviderToTarget,
            ..
        }
        | Action::LoseRequest(_)
        | Action::CrashAfterCommit { .. }
        | Action::CrashBeforeDispatch { .. }
        | Action::Stall => true,
        // The target heard back (late, or with an error), or the fault was
        // not on its exchange with the provider.
        Action::LoseAnswer {
            hop: Hop::TargetToAgent,
            ..
        }
        | Action::DelayAnswer { .. }
        | Action::ProviderError { .. }
        | Action::Redeliver
        | Action::AuthorityDown
        | Action::AdvanceClock(_)
        | Action::Revoke(_)
        | Action::Replan { .. }
        | Action::CrashAgent { .. }
        | Action::ApproveAgain { .. }
        | Action::TruncateResult
        | Action::Interrupt => false,
    }
}
