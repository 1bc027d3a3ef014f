//! Hand-built histories for the checkers' unit tests: a scenario, then the
//! attempts, dispatches, effects and faults of one run, written down by hand
//! the way a reader would draw them on a timeline (times in run ms).

use std::path::Path;
use std::time::Duration;

use chaos_kit::http::CallFailure;
use chaos_kit::protocol::Outcome;
use chaos_kit::target::{AfterRetention, TargetInfo};

use super::{Check, Finding, Verdict};
use crate::fault::{Action, Fault};
use crate::history::{
    Answer, Attempt, AttemptEnd, Dispatch, Disposition, Effect, FaultEvent, Happened, History,
    Ledger, Ms, RunOutput,
};
use crate::plan::{attempt_id, Timing, Trial};
use crate::scenario::Scenario;
/// 2026-01-01T00:00:00Z, as in the simulator.
const EPOCH_MS: u64 = 1_767_225_600_000;

/// One operation, one call, a provider that can be asked (lookup).
pub(crate) const ONE_CALL: &str = r#"
test = "lost-response"
description = "one call"
[provider]
profile = "lookup"
[[call]]
operation = "reminder"
attempts = 6
[expect]
effects-per-operation = 1
"#;

/// The same operation called twice, with a 400-day clock jump between.
pub(crate) const TWO_CALLS: &str = r#"
test = "expired-history"
description = "a retry 400 days later"
[provider]
profile = "keyed"
retention = "24h"
[[call]]
operation = "reminder"
[[call]]
operation = "reminder"
[[fault]]
kind = "advance-clock"
by = "400days"
after-call = 1
"#;

/// Applied, then the same key with another recipient: a conflict is expected.
pub(crate) const CHANGED: &str = r#"
test = "changed-payload"
description = "changed"
[provider]
profile = "keyed"
retention = "24h"
[[call]]
operation = "reminder"
expect = ["applied"]
[[call]]
operation = "reminder"
payload = "changed"
expect = ["conflict"]
"#;

/// Applied, then the same arguments reordered: a replay is expected.
pub(crate) const EQUIVALENT: &str = r#"
test = "changed-payload"
description = "equivalent"
[provider]
profile = "keyed"
retention = "24h"
[[call]]
operation = "reminder"
expect = ["applied"]
[[call]]
operation = "reminder"
payload = "equivalent"
expect = ["replayed"]
"#;

/// Applied, then the token revoked, then a retry: a denial is expected.
pub(crate) const REVOKED: &str = r#"
test = "revoked-permission"
description = "revoked"
[provider]
profile = "keyed"
retention = "24h"
[[call]]
operation = "reminder"
expect = ["applied"]
[[call]]
operation = "reminder"
expect = ["denied"]
[[fault]]
kind = "revoke"
grant = "token"
after-call = 1
"#;

/// One charge, decided once more by the planner: a new tool call with a new
/// key (identity "replan"), the same intent.
pub(crate) const RE_PLAN: &str = r#"
test = "re-plan"
description = "the step decided again"
[provider]
profile = "keyed"
retention = "24h"
[workload]
tool = "charge_card"
free-text-field = "memo"
[[call]]
operation = "charge"
attempts = 1
identity = "replan"
[[fault]]
kind = "replan"
nth = 1
times = 1
"#;

/// The same, for a tool whose every call is its own action.
pub(crate) const RE_PLAN_ALLOWED: &str = r#"
test = "re-plan"
description = "every call its own notification"
[provider]
profile = "keyed"
retention = "24h"
[workload]
tool = "send_notification_to_self"
free-text-field = "note"
policy = "allow"
[[call]]
operation = "note"
attempts = 1
identity = "replan"
[[fault]]
kind = "replan"
nth = 1
times = 1
"#;

/// Tenant South reuses tenant North's key for its own operation.
pub(crate) const TENANTS: &str = r#"
test = "operation-identity"
description = "one key, two tenants"
[provider]
profile = "keyed"
retention = "24h"
[operations.north]
tenant = "north"
[operations.south]
tenant = "south"
key = "north"
[[call]]
operation = "north"
[[call]]
operation = "south"
"#;

/// Two reminders for one invoice.
pub(crate) const SHARED_SUBJECT: &str = r#"
test = "operation-identity"
description = "two reminders, one invoice"
[provider]
profile = "keyed"
retention = "24h"
[operations.first]
subject = "shared"
[operations.second]
subject = "shared"
[[call]]
operation = "first"
[[call]]
operation = "second"
"#;

/// A run written down by hand. Attempts are worker 1's, numbered in the
/// order they are added; payloads are those of their call.
pub(crate) struct Case {
    scenario: Scenario,
    retention: Option<Duration>,
    attempts: Vec<Attempt>,
    faults: Vec<FaultEvent>,
    ledger: Ledger,
    /// Clock jumps so far: (run time, ms jumped).
    jumps: Vec<(Ms, u64)>,
    /// The calls decided again so far, latest last: (call, decision, drifted).
    decisions: Vec<(u32, u32, bool)>,
    /// What the target declares a retry past its retention gets.
    after_retention: AfterRetention,
    /// What an MCP server declared, when the target is one.
    mcp: Option<crate::history::McpSeen>,
}

/// What the tool call now deciding a call carries.
struct Decided {
    number: u32,
    tool_use_id: String,
    key: String,
    payload: crate::plan::Payload,
}

impl Case {
    pub(crate) fn new(scenario: &str) -> Case {
        let scenario = Scenario::parse(Path::new("case.toml"), scenario)
            .unwrap_or_else(|error| panic!("{error}"));
        Case {
            scenario,
            retention: None,
            attempts: Vec::new(),
            faults: Vec::new(),
            ledger: Ledger::default(),
            jumps: Vec::new(),
            decisions: Vec::new(),
            after_retention: AfterRetention::NewOperation,
            mcp: None,
        }
    }

    /// An MCP server that declared `tools` in its `tools/list`.
    pub(crate) fn declared(mut self, tools: Vec<crate::history::DeclaredTool>) -> Case {
        self.mcp = Some(crate::history::McpSeen {
            tools,
            ..Default::default()
        });
        self
    }

    /// The target's declared policy past its retention.
    pub(crate) fn after_retention(mut self, policy: AfterRetention) -> Case {
        self.after_retention = policy;
        self
    }

    /// From here on, call `call` is decided again: a new tool call, minting
    /// its own key, with the same arguments or (`drifted`) re-worded ones.
    /// A human signs off the tool call call `call` is decided as last (a
    /// re-plan) at the authority, at `at`, as the scenario's re-plan asks.
    pub(crate) fn sign_off(mut self, call: u32, at: Ms) -> Case {
        let decision = self.decided(call).number;
        let index = (self.scenario.faults.iter())
            .position(|fault: &Fault| fault.kind() == "replan")
            .expect("a sign-off is a re-plan's");
        self.faults.push(FaultEvent {
            at,
            what: Happened::SignedOff {
                index,
                call,
                decision,
            },
            description: format!("a human signed off decision {decision} of call {call}"),
        });
        self
    }

    pub(crate) fn decide_again(mut self, call: u32, drifted: bool) -> Case {
        let number = self.decided(call).number + 1;
        self.decisions.push((call, number, drifted));
        // The scenario's re-plan is what decides again: it acted, then.
        let has_replan = self
            .scenario
            .faults
            .iter()
            .any(|fault| fault.kind() == "replan");
        if has_replan {
            let at = self.attempts.last().map_or(0, |attempt| attempt.ended_at);
            let wording = if drifted {
                crate::fault::Wording::Drifted
            } else {
                crate::fault::Wording::Same
            };
            return self.fault(
                "replan",
                at,
                Action::Replan {
                    times: 1,
                    wording,
                    signed_off: false,
                },
            );
        }
        self
    }

    fn decided(&self, call: u32) -> Decided {
        let trial = self.trial();
        let planned = &trial.calls[call as usize - 1];
        let operation = &trial.operations[planned.operation];
        let latest = self.decisions.iter().rfind(|(of, ..)| *of == call);
        let (number, drifted) =
            latest.map_or((1, false), |&(_, number, drifted)| (number, drifted));
        let tool_use_id = crate::plan::tool_use_id(0, call, number, "");
        let key = if number == 1 {
            operation.key.clone()
        } else {
            crate::plan::own_key(&tool_use_id)
        };
        let payload = if drifted {
            crate::plan::Payload::of(
                &self.scenario.workload,
                &operation.name,
                &operation.subject,
                crate::scenario::PayloadVariant::Drifted,
            )
        } else {
            planned.payload.clone()
        };
        Decided {
            number,
            tool_use_id,
            key,
            payload,
        }
    }

    fn trial(&self) -> Trial<'_> {
        Trial::new(&self.scenario, 0, Timing::simulated(&self.scenario))
    }

    /// The target declares it remembers an operation this long.
    pub(crate) fn retention_days(mut self, days: u64) -> Case {
        self.retention = Some(Duration::from_secs(days * 86_400));
        self
    }

    fn wall_clock(&self, at: Ms) -> u64 {
        let jumped: u64 = self
            .jumps
            .iter()
            .filter(|(when, _)| *when <= at)
            .map(|(_, by)| by)
            .sum();
        EPOCH_MS + at + jumped
    }

    fn dispatch(&mut self, call: u32, at: Ms, disposition: Disposition) {
        let trial = self.trial();
        let planned = &trial.calls[call as usize - 1];
        let subject = trial.operations[planned.operation].subject.clone();
        let decided = self.decided(call);
        let number = self.ledger.dispatches.len() as u32 + 1;
        self.ledger.dispatches.push(Dispatch {
            number,
            at,
            tool: self.scenario.workload.tool.clone(),
            subject: Some(subject),
            key: Some(decided.key),
            // As the provider records it: only when it differs.
            intent_fingerprint: (decided.payload.intent != decided.payload.fingerprint)
                .then_some(decided.payload.intent),
            payload_fingerprint: decided.payload.fingerprint,
            provider_shaped: false,
            delivery: None,
            message: None,
            disposition,
        });
    }

    /// The last dispatch as a consumer on a broker reported it: made by
    /// `delivery` of the message.
    pub(crate) fn delivered(mut self, delivery: u32) -> Case {
        let dispatch = self.ledger.dispatches.last_mut().expect("a dispatch first");
        dispatch.delivery = Some(delivery);
        self
    }

    /// The last dispatch as a consumer on a broker reported it: made from
    /// the message the agent's attempt `message` published.
    pub(crate) fn of_message(mut self, message: &str) -> Case {
        let dispatch = self.ledger.dispatches.last_mut().expect("a dispatch first");
        dispatch.message = Some(message.to_owned());
        self
    }

    /// The last dispatch as a provider with an API of its own (Stripe's
    /// form) records it: its payload in that shape, `fingerprint`.
    pub(crate) fn provider_shaped(mut self, fingerprint: &str) -> Case {
        let dispatch = self.ledger.dispatches.last_mut().expect("a dispatch first");
        dispatch.provider_shaped = true;
        dispatch.payload_fingerprint = fingerprint.to_owned();
        dispatch.intent_fingerprint = None;
        if let Some(effect) = self.ledger.effects.last_mut() {
            if effect.dispatch == dispatch.number {
                effect.payload_fingerprint = fingerprint.to_owned();
            }
        }
        self
    }

    /// A dispatch of call `call`'s payload that the provider commits at `at`,
    /// with the next receipt (`rcpt-1`, `rcpt-2`...).
    pub(crate) fn commit(mut self, call: u32, at: Ms) -> Case {
        let receipt = format!("rcpt-{}", self.ledger.effects.len() + 1);
        self.dispatch(
            call,
            at,
            Disposition::Committed {
                receipt: receipt.clone(),
            },
        );
        let dispatch = self.ledger.dispatches.last().expect("just pushed").clone();
        self.ledger.effects.push(Effect {
            at,
            dispatch: dispatch.number,
            subject: dispatch.subject,
            receipt,
            payload_fingerprint: dispatch.payload_fingerprint,
            wall_clock_ms: self.wall_clock(at),
        });
        self
    }

    /// A dispatch a keyed provider answers from its store: no new effect.
    pub(crate) fn replayed_dispatch(mut self, call: u32, at: Ms) -> Case {
        let receipt = self
            .ledger
            .effects
            .last()
            .map_or_else(|| "rcpt-none".to_owned(), |effect| effect.receipt.clone());
        self.dispatch(call, at, Disposition::Replayed { receipt });
        self
    }

    /// An effect whose subject no operation of the run has.
    pub(crate) fn stray_effect(mut self, at: Ms) -> Case {
        let number = self.ledger.dispatches.len() as u32 + 1;
        self.ledger.effects.push(Effect {
            at,
            dispatch: number,
            subject: Some("inv-nobody".into()),
            receipt: format!("rcpt-{}", self.ledger.effects.len() + 1),
            payload_fingerprint: "f".into(),
            wall_clock_ms: self.wall_clock(at),
        });
        self
    }

    fn attempt(mut self, call: u32, sent_at: Ms, ended_at: Ms, end: AttemptEnd) -> Case {
        let operation = self.trial().calls[call as usize - 1].operation;
        let decided = self.decided(call);
        let number = self
            .attempts
            .iter()
            .filter(|attempt| attempt.call == call)
            .count() as u32
            + 1;
        let wall_clock_ms = self.wall_clock(sent_at);
        self.attempts.push(Attempt {
            operation,
            call,
            worker: 1,
            attempt: number,
            attempt_id: attempt_id(0, call, 1, number),
            tool_use_id: decided.tool_use_id,
            decision: decided.number,
            key: decided.key,
            payload_fingerprint: decided.payload.fingerprint,
            intent: decided.payload.intent,
            sent_at,
            ended_at,
            wall_clock_ms,
            end,
        });
        self
    }

    fn answered(
        self,
        call: u32,
        sent_at: Ms,
        ended_at: Ms,
        outcome: Outcome,
        receipt: Option<String>,
        disclosed_result: bool,
    ) -> Case {
        let status = match outcome {
            Outcome::Applied => 201,
            other => other.default_status(),
        };
        let answer = Answer {
            status,
            outcome,
            receipt,
            disclosed_result,
            records: Vec::new(),
            reason: None,
            unread: None,
        };
        self.attempt(call, sent_at, ended_at, AttemptEnd::Answered(answer))
    }

    /// An answer the target file's mapping could not read, and why.
    pub(crate) fn unread_answer(self, call: u32, sent_at: Ms, ended_at: Ms, why: &str) -> Case {
        let answer = Answer {
            status: 200,
            outcome: Outcome::Unknown,
            receipt: None,
            disclosed_result: false,
            records: Vec::new(),
            reason: None,
            unread: Some(why.to_owned()),
        };
        self.attempt(call, sent_at, ended_at, AttemptEnd::Answered(answer))
    }

    /// A bare answer with this status (one the protocol may not name).
    pub(crate) fn status_answer(
        self,
        call: u32,
        sent_at: Ms,
        ended_at: Ms,
        status: u16,
        outcome: Outcome,
    ) -> Case {
        let answer = Answer {
            status,
            outcome,
            receipt: None,
            disclosed_result: false,
            records: Vec::new(),
            reason: None,
            unread: None,
        };
        self.attempt(call, sent_at, ended_at, AttemptEnd::Answered(answer))
    }

    /// An answer as a target gives it: an outcome that claims an effect
    /// carries the receipt of the latest effect by then, and the result.
    pub(crate) fn answer(self, call: u32, sent_at: Ms, ended_at: Ms, outcome: Outcome) -> Case {
        let receipt = outcome
            .claims_effect()
            .then(|| {
                self.ledger
                    .effects
                    .iter()
                    .rfind(|effect| effect.at <= ended_at)
                    .map(|effect| effect.receipt.clone())
            })
            .flatten();
        let result = receipt.is_some();
        self.answered(call, sent_at, ended_at, outcome, receipt, result)
    }

    /// An answer with `receipt` and no result.
    pub(crate) fn answer_with_receipt(
        self,
        call: u32,
        sent_at: Ms,
        ended_at: Ms,
        outcome: Outcome,
        receipt: &str,
    ) -> Case {
        self.answered(
            call,
            sent_at,
            ended_at,
            outcome,
            Some(receipt.into()),
            false,
        )
    }

    /// An answer as [`Case::answer`] gives it, its result releasing the
    /// records `ids` (an export's).
    pub(crate) fn answer_releasing(
        mut self,
        call: u32,
        sent_at: Ms,
        ended_at: Ms,
        outcome: Outcome,
        ids: &[&str],
    ) -> Case {
        self = self.answer(call, sent_at, ended_at, outcome);
        if let Some(AttemptEnd::Answered(answer)) =
            self.attempts.last_mut().map(|attempt| &mut attempt.end)
        {
            answer.disclosed_result = true;
            answer.records = ids.iter().map(|id| (*id).to_owned()).collect();
        }
        self
    }

    /// An answer with neither receipt nor result.
    pub(crate) fn bare_answer(
        self,
        call: u32,
        sent_at: Ms,
        ended_at: Ms,
        outcome: Outcome,
    ) -> Case {
        self.answered(call, sent_at, ended_at, outcome, None, false)
    }

    pub(crate) fn timeout(self, call: u32, sent_at: Ms, ended_at: Ms) -> Case {
        let failure = CallFailure::Timeout;
        self.attempt(call, sent_at, ended_at, AttemptEnd::Failed { failure })
    }

    /// The scenario's first fault of `kind` acted at `at`, as `action`.
    fn fault(mut self, kind: &str, at: Ms, action: Action) -> Case {
        let index = self
            .scenario
            .faults
            .iter()
            .position(|fault: &Fault| fault.kind() == kind)
            .unwrap_or_else(|| panic!("the scenario has no {kind} fault"));
        let description = self.scenario.faults[index].to_string();
        self.faults.push(FaultEvent {
            at,
            what: Happened::Fault { index, action },
            description,
        });
        self
    }

    /// The target looked call `call`'s downstream key up at `at`; the
    /// provider found the latest effect by then, if `found`.
    pub(crate) fn lookup(mut self, call: u32, at: Ms, found: bool) -> Case {
        let key = self.decided(call).key;
        let found = found
            .then(|| self.ledger.effects.iter().rfind(|effect| effect.at <= at))
            .flatten()
            .map(|effect| effect.receipt.clone());
        self.ledger
            .lookups
            .push(crate::history::LookupRecord { at, key, found });
        self
    }

    /// Call `call`'s attempt sent at `sent_at` was dropped at `ended_at`:
    /// the user interrupted.
    pub(crate) fn interrupted(self, call: u32, sent_at: Ms, ended_at: Ms) -> Case {
        self.attempt(call, sent_at, ended_at, AttemptEnd::Interrupted)
    }

    /// The scenario's user interrupt came at `at`.
    pub(crate) fn interrupt(self, at: Ms) -> Case {
        self.fault("user-interrupt", at, Action::Interrupt)
    }

    /// The scenario's revocation took effect at `at`.
    pub(crate) fn revoked(self, at: Ms) -> Case {
        self.fault("revoke", at, Action::Revoke(crate::fault::Grant::Token))
    }

    /// Every wall clock jumped `days` forward at `at`.
    pub(crate) fn clock_jump(mut self, at: Ms, days: u64) -> Case {
        let by = Duration::from_secs(days * 86_400);
        self.jumps.push((at, by.as_millis() as u64));
        self.fault("advance-clock", at, Action::AdvanceClock(by))
    }

    pub(crate) fn judge(&self) -> Verdict {
        let trial = self.trial();
        let target = TargetInfo {
            name: "hand-built".into(),
            summary: String::new(),
            retention: self.retention,
            after_retention: self.after_retention,
        };
        let ended_at = self
            .attempts
            .iter()
            .map(|attempt| attempt.ended_at)
            .max()
            .unwrap_or(0);
        let run = RunOutput {
            history: History {
                attempts: self.attempts.clone(),
                faults: self.faults.clone(),
                authorizations: Vec::new(),
                ended_at,
                mcp: self.mcp.clone(),
            },
            ledger: self.ledger.clone(),
            error: None,
        };
        super::check(&trial, &target, &run)
    }
}

/// Questions a test asks of a verdict.
pub(crate) trait Found {
    fn has(&self, check: Check) -> bool;
    /// The first finding of `check`; panics, listing what was found, if none.
    fn finding(&self, check: Check) -> &Finding;
}

impl Found for Verdict {
    fn has(&self, check: Check) -> bool {
        self.findings.iter().any(|finding| finding.check == check)
    }

    fn finding(&self, check: Check) -> &Finding {
        self.findings
            .iter()
            .find(|finding| finding.check == check)
            .unwrap_or_else(|| panic!("no {check} among {:#?}", self.findings))
    }
}

#[test]
fn the_checks_table_names_every_check_once_in_specificity_order() {
    for (position, (check, name)) in Check::ALL.iter().enumerate() {
        assert_eq!(check.specificity() as usize, position);
        assert_eq!(Check::parse(name), Some(*check));
        assert_eq!(serde_json::to_value(check).unwrap(), *name);
    }
}

#[test]
fn a_failure_dominates_an_incomplete_run() {
    let mut run = Case::new(ONE_CALL).commit(1, 3).commit(1, 5);
    run = run.answer(1, 1, 7, Outcome::Applied);
    let mut verdict = run.judge();
    assert_eq!(verdict.status, super::Status::Fail);
    // Cut short: what was recorded still fails.
    let trial = run.trial();
    let target = TargetInfo {
        name: "hand-built".into(),
        summary: String::new(),
        retention: None,
        after_retention: AfterRetention::NewOperation,
    };
    let output = RunOutput {
        history: History {
            attempts: run.attempts.clone(),
            faults: Vec::new(),
            authorizations: Vec::new(),
            ended_at: 7,
            mcp: None,
        },
        ledger: run.ledger.clone(),
        error: Some("the simulation stopped".into()),
    };
    verdict = super::check(&trial, &target, &output);
    assert_eq!(verdict.status, super::Status::Fail);
    assert!(verdict.has(Check::RunIncomplete));
    assert_eq!(
        verdict.findings.last().map(|finding| finding.check),
        Some(Check::RunIncomplete),
        "why the run was cut short comes last"
    );
}
