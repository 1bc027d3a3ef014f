//! The agent: plays the orchestrator. For each call step it releases the
//! step's workers together; each worker sends attempts of the same logical
//! operation (same Idempotency-Key, new X-Attempt-Id) until it gets a
//! definitive answer or spends its retry budget.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use chaos_kit::clock::Clock;
use chaos_kit::http::{CallFailure, Client, Request, Response};
use chaos_kit::protocol::{
    AnswerBody, Outcome, ATTEMPT_ID, AUTHORIZATION, IDEMPOTENCY_KEY, IDEMPOTENT_REPLAYED,
    TRACEPARENT,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::fault::{Action, LossMode};
use crate::history::{Answer, Attempt, AttemptEnd};
use crate::plan::{attempt_id, Timing, Trial};
use crate::roles::clock::Timeline;
use crate::roles::nemesis::Nemesis;

/// How a target's statuses map to outcomes when its body names none. Targets
/// may override single statuses (some middleware answers 417 on a mismatch).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct StatusMapping {
    pub overrides: BTreeMap<u16, Outcome>,
}

impl StatusMapping {
    pub(crate) fn interpret(&self, response: &Response) -> Answer {
        let body: AnswerBody = serde_json::from_slice(&response.body).unwrap_or_default();
        let replayed = response.header_value(IDEMPOTENT_REPLAYED) == Some("true");
        let outcome = body.outcome.unwrap_or_else(|| {
            self.overrides
                .get(&response.status)
                .copied()
                .unwrap_or_else(|| Outcome::from_status(response.status, replayed))
        });
        Answer {
            status: response.status,
            outcome,
            receipt: body.receipt,
            disclosed_result: body.result.is_some(),
            reason: body.reason,
        }
    }
}

/// The agent's whole script, owned, so it can run as a `'static` task.
#[derive(Debug, Clone)]
pub(crate) struct Script {
    pub seed: u64,
    pub tool: String,
    pub token: String,
    pub timing: Timing,
    pub calls: Vec<ScriptedCall>,
}

#[derive(Debug, Clone)]
pub(crate) struct ScriptedCall {
    pub number: u32,
    pub operation: usize,
    pub key: String,
    pub payload: Bytes,
    pub fingerprint: String,
    pub attempts: u32,
    pub concurrency: u32,
}

impl Script {
    pub(crate) fn from_trial(trial: &Trial<'_>) -> Script {
        Script {
            seed: trial.seed,
            tool: trial.scenario.workload.tool.clone(),
            token: trial.token.clone(),
            timing: trial.timing,
            calls: trial
                .calls
                .iter()
                .map(|call| ScriptedCall {
                    number: call.number,
                    operation: call.operation,
                    key: trial.operations[call.operation].key.clone(),
                    payload: call.payload.clone(),
                    fingerprint: call.fingerprint.clone(),
                    attempts: call.attempts,
                    concurrency: call.concurrency,
                })
                .collect(),
        }
    }
}

/// What the agent runs against.
#[derive(Clone)]
pub(crate) struct AgentEnv {
    /// The agent's HTTP client. It pools connections like any production
    /// client; a connection whose attempt timed out or was reset is dropped.
    pub http: Client,
    /// `host:port` of the target.
    pub target: String,
    pub timeline: Arc<dyn Timeline>,
    pub clock: Arc<dyn Clock>,
    pub nemesis: Arc<Nemesis>,
    pub mapping: StatusMapping,
    pub attempts: Arc<Mutex<Vec<Attempt>>>,
}

/// Runs the script to the end. Every wait is bounded, so this always ends.
pub(crate) async fn run(script: Script, env: AgentEnv) {
    let script = Arc::new(script);
    for (index, call) in script.calls.iter().enumerate() {
        sit_out_clock_jump(&env).await;
        let mut workers = Vec::with_capacity(call.concurrency as usize);
        for worker in 1..=call.concurrency {
            let (script, env) = (script.clone(), env.clone());
            let network = env.http.network().clone();
            workers.push(network.spawn(Box::pin(async move {
                let call = &script.calls[index];
                run_worker(&script, call, worker, &env).await
            })));
        }
        for worker in workers {
            // A worker only ends by returning; a JoinError means the runtime is
            // shutting down, and the run is over anyway.
            let _ = worker.await;
        }
        env.nemesis.after_call(call.number);
    }
}

async fn run_worker(script: &Script, call: &ScriptedCall, worker: u32, env: &AgentEnv) {
    let mut rng = ChaCha8Rng::seed_from_u64(
        script.seed ^ (u64::from(call.number) << 40) ^ (u64::from(worker) << 20),
    );
    for attempt in 1..=call.attempts {
        sit_out_clock_jump(env).await;
        let attempt_id = attempt_id(script.seed, call.number, worker, attempt);
        let sent_at = env.timeline.now();
        let wall_clock_ms = env.clock.now_ms();
        let end = send_attempt(script, call, &attempt_id, env, attempt).await;
        let definitive =
            matches!(&end, AttemptEnd::Answered(answer) if answer.outcome.is_definitive());
        lock(&env.attempts).push(Attempt {
            operation: call.operation,
            call: call.number,
            worker,
            attempt,
            attempt_id,
            payload_fingerprint: call.fingerprint.clone(),
            sent_at,
            ended_at: env.timeline.now(),
            wall_clock_ms,
            end,
        });
        if definitive || attempt == call.attempts {
            return;
        }
        let timing = &script.timing;
        let backoff_ms = rng.random_range(millis(timing.backoff_min)..=millis(timing.backoff_max));
        tokio::time::sleep(Duration::from_millis(backoff_ms)).await;
    }
}

/// Live, a clock jump is a real wait before the agent's next step; in the
/// simulator there is never one (the jump moved the clock instead).
async fn sit_out_clock_jump(env: &AgentEnv) {
    if let Some(wait) = env.nemesis.take_wait() {
        tokio::time::sleep(wait).await;
    }
}

async fn send_attempt(
    script: &Script,
    call: &ScriptedCall,
    attempt_id: &str,
    env: &AgentEnv,
    attempt: u32,
) -> AttemptEnd {
    let request = Request::post(format!("/tools/{}", script.tool), call.payload.clone())
        .header(IDEMPOTENCY_KEY, call.key.as_str())
        .header(AUTHORIZATION, format!("Bearer {}", script.token))
        .header(ATTEMPT_ID, attempt_id)
        .header(TRACEPARENT, traceparent(script.seed, call.number, attempt))
        .header("content-type", "application/json");
    let timeout = script.timing.agent_timeout;
    let deadline = tokio::time::Instant::now() + timeout;
    let response = match env.http.call(&env.target, request, timeout).await {
        Ok(response) => response,
        Err(failure) => return AttemptEnd::Failed { failure },
    };
    let answer = env.mapping.interpret(&response);
    match env.nemesis.answer() {
        Some(Action::LoseAnswer { mode, .. }) => {
            if mode == LossMode::Hold {
                tokio::time::sleep_until(deadline).await;
            }
            AttemptEnd::Lost {
                mode,
                dropped: answer,
            }
        }
        Some(Action::DelayAnswer { by, .. }) => {
            if tokio::time::Instant::now() + by >= deadline {
                tokio::time::sleep_until(deadline).await;
                AttemptEnd::Failed {
                    failure: CallFailure::Timeout,
                }
            } else {
                tokio::time::sleep(by).await;
                AttemptEnd::Answered(answer)
            }
        }
        _ => AttemptEnd::Answered(answer),
    }
}

/// A W3C trace context: one trace per call, one span per attempt. Trace
/// identity is deliberately unrelated to the operation's identity.
fn traceparent(seed: u64, call: u32, attempt: u32) -> String {
    format!("00-{seed:016x}{call:016x}-{attempt:016x}-01")
}

fn millis(duration: Duration) -> u64 {
    chaos_kit::clock::millis(duration)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_outcome_wins_over_the_status() {
        let response = Response::json(503, &AnswerBody::outcome(Outcome::Pending));
        assert_eq!(
            StatusMapping::default().interpret(&response).outcome,
            Outcome::Pending
        );
    }

    #[test]
    fn overrides_apply_to_bare_statuses() {
        let mut mapping = StatusMapping::default();
        mapping.overrides.insert(417, Outcome::Conflict);
        assert_eq!(
            mapping.interpret(&Response::new(417)).outcome,
            Outcome::Conflict
        );
        assert_eq!(
            StatusMapping::default()
                .interpret(&Response::new(417))
                .outcome,
            Outcome::Rejected
        );
    }

    #[test]
    fn replays_are_read_from_the_header() {
        let response = Response::new(200).header(IDEMPOTENT_REPLAYED, "true");
        assert_eq!(
            StatusMapping::default().interpret(&response).outcome,
            Outcome::Replayed
        );
    }
}
