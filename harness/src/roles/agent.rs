//! The agent: plays the orchestrator and the planner. For each call step it
//! executes the step (once per subagent, and again for a second approval);
//! each execution's workers send one tool call, retried with the same
//! tool-use id and key (new X-Attempt-Id) until a definitive answer or the
//! retry budget is spent. When the planner decides the step again (a
//! re-plan, a stalled call, a replay after the orchestrator crashed, or any
//! retry when the runtime holds no key) the next tool call has a new tool-use
//! id, and a key of its own unless the orchestrator holds the step's.

use chaos_kit::sync::lock;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chaos_kit::clock::Clock;
use chaos_kit::http::{CallFailure, Client};
use chaos_kit::protocol::{ATTEMPT_ID, RUN_ID, STEP_ID, TOOL_USE_ID, TRACEPARENT};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::fault::{Action, LossMode, Wording};
use crate::history::{Answer, Attempt, AttemptEnd};
use crate::plan::{attempt_id, own_key, tool_use_id, traceparent, Payload, Timing, Trial};
use crate::roles::clock::Timeline;
use crate::roles::nemesis::{Nemesis, Replans, SignOff};
use crate::scenario::Identity;
use crate::way_in::{CallValues, Outgoing, WayIn};

/// The agent's whole script, owned, so it can run as a `'static` task.
#[derive(Debug, Clone)]
pub(crate) struct Script {
    pub seed: u64,
    pub run_id: String,
    pub timing: Timing,
    pub calls: Vec<ScriptedCall>,
}

#[derive(Debug, Clone)]
pub(crate) struct ScriptedCall {
    pub number: u32,
    /// The tool it calls: the workload's, or the lab call's own.
    pub tool: String,
    pub operation: usize,
    pub step_id: String,
    /// The bearer token of the operation's tenant.
    pub token: String,
    /// Headers the scenario has the client add (a forged `X-Tenant`).
    pub headers: std::collections::BTreeMap<String, String>,
    pub payload: Payload,
    /// The operation's arguments re-worded, for a re-plan that drifts.
    pub drifted: Option<Payload>,
    pub attempts: u32,
    pub concurrency: u32,
    pub subagents: u32,
    pub identity: Identity,
    /// Tool-use id and Idempotency-Key of each decision of the step, from 1.
    pub decisions: Decisions,
    /// The next decision's number: decisions are numbered in the order the
    /// tool calls are made, across every execution and replay of the step.
    pub next_decision: Arc<AtomicU32>,
    /// The next worker's number, across executions and replays alike.
    pub next_worker: Arc<AtomicU32>,
}

/// How the tool calls of one step are named.
#[derive(Debug, Clone)]
pub(crate) struct Decisions {
    seed: u64,
    call: u32,
    suffix: String,
    /// The key every decision carries while the orchestrator holds it.
    held_key: Option<String>,
}

impl Decisions {
    fn tool_use_id(&self, decision: u32) -> String {
        tool_use_id(self.seed, self.call, decision, &self.suffix)
    }

    fn key(&self, decision: u32) -> String {
        match &self.held_key {
            Some(key) => key.clone(),
            None => own_key(&self.tool_use_id(decision)),
        }
    }
}

impl Script {
    pub(crate) fn from_trial(trial: &Trial<'_>) -> Script {
        Script {
            seed: trial.seed,
            run_id: trial.run_id.clone(),
            timing: trial.timing,
            calls: trial
                .calls
                .iter()
                .map(|call| {
                    let operation = &trial.operations[call.operation];
                    ScriptedCall {
                        number: call.number,
                        tool: call.tool.clone(),
                        operation: call.operation,
                        step_id: operation.step_id.clone(),
                        token: operation.token.clone(),
                        headers: trial.scenario.calls[call.number as usize - 1]
                            .headers
                            .clone(),
                        payload: call.payload.clone(),
                        drifted: operation.drifted.clone(),
                        attempts: call.attempts,
                        concurrency: call.concurrency,
                        subagents: call.subagents,
                        identity: call.identity,
                        decisions: Decisions {
                            seed: trial.seed,
                            call: call.number,
                            suffix: trial.suffix().to_owned(),
                            held_key: (call.identity == Identity::Stable)
                                .then(|| operation.key.clone()),
                        },
                        next_decision: Arc::new(AtomicU32::new(1)),
                        next_worker: Arc::new(AtomicU32::new(1)),
                    }
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
    /// How a tool call is put to the target, and its answer read.
    pub way_in: WayIn,
    pub attempts: Arc<Mutex<Vec<Attempt>>>,
}

/// Runs the script to the end. Every wait is bounded, so this always ends.
pub(crate) async fn run(script: Script, env: AgentEnv) {
    let script = Arc::new(script);
    for (index, call) in script.calls.iter().enumerate() {
        sit_out_clock_jump(&env).await;
        let second_approvals = env.nemesis.before_call(call.number);
        run_call(&script, index, &second_approvals, &env).await;
        env.nemesis.after_call(call.number);
        // An orchestrator that died once the call was over forgot that it
        // was: on restart it replays the call, decided again.
        if let Some(restart_after) = env.nemesis.take_replay() {
            tokio::time::sleep(restart_after).await;
            run_call(&script, index, &[], &env).await;
        }
    }
}

/// One execution of a step: a tool call sent by `concurrency` workers.
struct Execution {
    /// Released this long after the step starts.
    after: Duration,
}

/// Runs call `index`: each subagent, and each second approval `gap` later,
/// executes the step; each execution's workers send its tool call.
async fn run_call(
    script: &Arc<Script>,
    index: usize,
    second_approvals: &[Duration],
    env: &AgentEnv,
) {
    let call = &script.calls[index];
    let executions: Vec<Execution> = (0..call.subagents)
        .map(|_| Execution {
            after: Duration::ZERO,
        })
        .chain(second_approvals.iter().map(|gap| Execution { after: *gap }))
        .collect();
    // The executions' tool calls are decided first, in order; re-plans take
    // the numbers after them as they happen.
    let decisions: Vec<u32> = executions
        .iter()
        .map(|_| call.next_decision.fetch_add(1, Ordering::Relaxed))
        .collect();
    let mut workers = Vec::with_capacity(executions.len() * call.concurrency as usize);
    for (number, execution) in executions.iter().enumerate() {
        let decision = decisions[number];
        for _ in 0..call.concurrency {
            let worker = call.next_worker.fetch_add(1, Ordering::Relaxed);
            let (script, env) = (script.clone(), env.clone());
            let after = execution.after;
            let network = env.http.network().clone();
            workers.push(network.spawn(Box::pin(async move {
                if !after.is_zero() {
                    tokio::time::sleep(after).await;
                }
                let call = &script.calls[index];
                let first = ToolCall::decided(call, decision, Wording::Same);
                run_worker(&script, call, worker, first, &env).await
            })));
        }
    }
    for worker in workers {
        // A worker only ends by returning; a JoinError means the runtime is
        // shutting down, and the run is over anyway.
        let _ = worker.await;
    }
}

/// One tool call of a step: what the model emitted, which the worker sends
/// and retries.
struct ToolCall<'a> {
    decision: u32,
    tool_use_id: String,
    key: String,
    payload: &'a Payload,
}

impl<'a> ToolCall<'a> {
    fn decided(call: &'a ScriptedCall, decision: u32, wording: Wording) -> ToolCall<'a> {
        let payload = match (wording, &call.drifted) {
            (Wording::Drifted, Some(drifted)) => drifted,
            _ => &call.payload,
        };
        ToolCall {
            decision,
            tool_use_id: call.decisions.tool_use_id(decision),
            key: call.decisions.key(decision),
            payload,
        }
    }
}

async fn run_worker(
    script: &Script,
    call: &ScriptedCall,
    worker: u32,
    first: ToolCall<'_>,
    env: &AgentEnv,
) {
    let mut rng = ChaCha8Rng::seed_from_u64(
        script.seed ^ (u64::from(call.number) << 40) ^ (u64::from(worker) << 20),
    );
    let decide_again = |wording| {
        ToolCall::decided(
            call,
            call.next_decision.fetch_add(1, Ordering::Relaxed),
            wording,
        )
    };
    let mut crashes = env.nemesis.agent_crashes();
    crashes.mark_unchanged();
    let mut interrupts = env.nemesis.interrupts();
    interrupts.mark_unchanged();
    let mut attempt = 0;
    let timing = &script.timing;
    // The time budget runs from the worker's first attempt: a runtime that
    // decides the step again on every retry must not restart it.
    let worker_started = tokio::time::Instant::now();
    let budget_left = || {
        timing
            .retry_for
            .map(|budget| budget.saturating_sub(worker_started.elapsed()))
            .filter(|left| !left.is_zero())
    };
    // Tool calls to make, in order: this one, then any the planner re-issues.
    let mut tool_calls = VecDeque::from([first]);
    while let Some(mut tool_call) = tool_calls.pop_front() {
        let mut tries = 0;
        loop {
            sit_out_clock_jump(env).await;
            attempt += 1;
            tries += 1;
            let attempt_id = attempt_id(script.seed, call.number, worker, attempt);
            let sent_at = env.timeline.now();
            let wall_clock_ms = env.clock.now_ms();
            let sent = send_attempt(script, call, &tool_call, &attempt_id, env, worker, attempt);
            let Sent {
                end,
                replans,
                redelivery,
                retry_after,
            } = tokio::select! {
                // The nemesis acts on the agent at a commit, before the
                // provider answers: an answer that is ready together with a
                // crash or an interrupt came after it, and must not win the
                // race (live, a loaded machine polls this worker late, and
                // the interrupt would never act).
                biased;
                _ = crashes.changed() => Sent::ended(AttemptEnd::Abandoned),
                _ = interrupts.changed() => Sent::ended(AttemptEnd::Interrupted),
                sent = sent => sent,
            };
            let definitive =
                matches!(&end, AttemptEnd::Answered(answer) if answer.outcome.is_definitive());
            let abandoned = end == AttemptEnd::Abandoned;
            let interrupted = end == AttemptEnd::Interrupted;
            // Unreadable: there is no outcome to retry on, so the planner,
            // not the retry loop, decides what comes next.
            let unreadable = matches!(end, AttemptEnd::Truncated { .. });
            let record = |attempt_id: String, sent_at, ended_at, wall_clock_ms, end| Attempt {
                operation: call.operation,
                call: call.number,
                worker,
                attempt,
                attempt_id,
                tool_use_id: tool_call.tool_use_id.clone(),
                decision: tool_call.decision,
                key: tool_call.key.clone(),
                payload_fingerprint: tool_call.payload.fingerprint.clone(),
                intent: tool_call.payload.intent.clone(),
                sent_at,
                ended_at,
                wall_clock_ms,
                end,
            };
            {
                let mut attempts = lock(&env.attempts);
                if let Some(copy) = redelivery {
                    // Judged like any attempt: the target answered it, and
                    // whatever it did downstream happened.
                    attempts.push(record(
                        format!("{attempt_id}-redelivered"),
                        copy.sent_at,
                        copy.ended_at,
                        copy.wall_clock_ms,
                        copy.end,
                    ));
                }
                attempts.push(record(
                    attempt_id,
                    sent_at,
                    env.timeline.now(),
                    wall_clock_ms,
                    end,
                ));
            }
            for replans in replans {
                for _ in 0..replans.times {
                    let replanned = decide_again(replans.wording);
                    if let Some(fault) = replans.signed_off_by {
                        sign_off(fault, call, &replanned, env);
                    }
                    tool_calls.push_back(replanned);
                }
            }
            if abandoned {
                // The orchestrator died waiting. Restarted, it replays the
                // step: the planner decides it again; what it forgot does
                // not count against the budget.
                tokio::time::sleep(env.nemesis.agent_restart_after()).await;
                crashes.mark_unchanged();
                tool_call = decide_again(Wording::Same);
                tries -= 1;
                continue;
            }
            if interrupted {
                // The user said "try again": the planner decides the step
                // again at once, and the dropped attempt is not a retry.
                tool_call = decide_again(Wording::Same);
                tries -= 1;
                continue;
            }
            // `attempts` is the cap on tries; a `retry-for` budget lets a
            // call whose answer is not final go on past it until spent.
            if definitive || (tries >= call.attempts && budget_left().is_none()) {
                break;
            }
            // Drawn whether or not it is used, so the seed's other draws
            // stay where they were.
            let backoff_ms =
                rng.random_range(millis(timing.backoff_min)..=millis(timing.backoff_max));
            let pause = match retry_after {
                // The wait the answer asks for, bounded by what is left of
                // the budget (without one, by an attempt's timeout: an
                // answer never stalls the agent longer than a silence would).
                Some(asked) => asked.min(budget_left().unwrap_or(timing.agent_timeout)),
                None => Duration::from_millis(backoff_ms),
            };
            tokio::time::sleep(pause).await;
            // Heard nothing useful: a runtime that holds no key lets the
            // model decide again instead of retrying, as does one whose call
            // stalled past the agent's patience.
            if call.identity == Identity::Replan || unreadable || env.nemesis.take_stall() {
                tool_call = decide_again(Wording::Same);
            }
        }
    }
}

/// A human signs off `tool_call`, just decided, at the authority: the
/// approval names the tool call and what it asks, as the arguments say it.
fn sign_off(fault: usize, call: &ScriptedCall, tool_call: &ToolCall<'_>, env: &AgentEnv) {
    let arguments: serde_json::Value =
        serde_json::from_slice(&tool_call.payload.bytes).unwrap_or_default();
    let field = |name: &str| {
        arguments
            .get(name)
            .and_then(|value| value.as_str())
            .unwrap_or("")
    };
    env.nemesis.sign_off(SignOff {
        fault,
        token: &call.token,
        tool: &call.tool,
        call: call.number,
        decision: tool_call.decision,
        tool_use_id: &tool_call.tool_use_id,
        action: [field("invoice"), field("recipient"), field("body")],
    });
}

/// Live, a clock jump is a real wait before the agent's next step; in the
/// simulator there is never one (the jump moved the clock instead).
async fn sit_out_clock_jump(env: &AgentEnv) {
    if let Some(wait) = env.nemesis.take_wait() {
        tokio::time::sleep(wait).await;
    }
}

/// What came of one attempt: how it ended, the re-plans the planner makes
/// after its answer, and the second delivery of it a fault made, if one did.
struct Sent {
    end: AttemptEnd,
    replans: Vec<Replans>,
    redelivery: Option<Redelivery>,
    /// The wait a `Retry-After` on the answer the agent read asks for.
    retry_after: Option<Duration>,
}

impl Sent {
    fn ended(end: AttemptEnd) -> Sent {
        Sent {
            end,
            replans: Vec::new(),
            redelivery: None,
            retry_after: None,
        }
    }
}

/// The same request delivered to the target a second time.
struct Redelivery {
    sent_at: crate::history::Ms,
    ended_at: crate::history::Ms,
    wall_clock_ms: u64,
    end: AttemptEnd,
}

/// Sends one attempt of `tool_call`.
async fn send_attempt(
    script: &Script,
    call: &ScriptedCall,
    tool_call: &ToolCall<'_>,
    attempt_id: &str,
    env: &AgentEnv,
    worker: u32,
    attempt: u32,
) -> Sent {
    // Sent again for a second delivery: the same bytes, identities and all.
    // The chaos identities go with any way in (HTTP: headers, which
    // services ignore when they do not know them).
    let values = CallValues {
        tool: &call.tool,
        operation_id: &tool_call.key,
        token: &call.token,
        arguments: &tool_call.payload.bytes,
    };
    let traceparent = traceparent(&script.run_id, call.number, worker, attempt);
    let identities = [
        (ATTEMPT_ID, attempt_id),
        (RUN_ID, script.run_id.as_str()),
        (STEP_ID, call.step_id.as_str()),
        (TOOL_USE_ID, tool_call.tool_use_id.as_str()),
        (TRACEPARENT, traceparent.as_str()),
    ];
    let outgoing = Outgoing {
        values: &values,
        headers: &call.headers,
        identities: &identities,
        timeout: script.timing.agent_timeout,
    };
    let deadline = tokio::time::Instant::now() + outgoing.timeout;
    let reply = match env.way_in.send(&env.http, &env.target, &outgoing).await {
        Ok(reply) => reply,
        Err(failure) => return Sent::ended(AttemptEnd::Failed { failure }),
    };
    let (answer, retry_after) = (reply.answer, reply.retry_after);
    let fate = env.nemesis.answer();
    let mut redelivery = None;
    let end = match fate.action {
        // Processed, and before the answer reaches the agent the same
        // request is delivered again, as to a second consumer; the agent
        // reads the first answer once the second delivery is settled.
        Some(Action::Redeliver) => {
            let (sent_at, wall_clock_ms) = (env.timeline.now(), env.clock.now_ms());
            let end = match env.way_in.send(&env.http, &env.target, &outgoing).await {
                Ok(reply) => AttemptEnd::Answered(reply.answer),
                Err(failure) => AttemptEnd::Failed { failure },
            };
            redelivery = Some(Redelivery {
                sent_at,
                ended_at: env.timeline.now(),
                wall_clock_ms,
                end,
            });
            AttemptEnd::Answered(answer)
        }
        Some(Action::LoseAnswer { mode, .. }) => {
            // The connection closed before the answer was read: a protocol
            // that can resume the stream first asks for the rest of it.
            let resumed = match mode {
                LossMode::Reset => {
                    (env.way_in)
                        .resume(&env.http, &env.target, attempt_id)
                        .await
                }
                LossMode::Hold => None,
            };
            if let Some(resumed) = resumed {
                AttemptEnd::Answered(resumed)
            } else {
                lost(env, mode, deadline, attempt_id, answer).await
            }
        }
        // Cut on its way: the agent holds bytes it cannot parse.
        Some(Action::TruncateResult) => AttemptEnd::Truncated { dropped: answer },
        Some(Action::DelayAnswer { by, .. }) => {
            if tokio::time::Instant::now() + by >= deadline {
                tokio::time::sleep_until(deadline).await;
                env.way_in
                    .timed_out(&env.http, &env.target, attempt_id)
                    .await;
                AttemptEnd::Failed {
                    failure: CallFailure::Timeout,
                }
            } else {
                tokio::time::sleep(by).await;
                AttemptEnd::Answered(answer)
            }
        }
        // Verdicts on dispatches, on introspections, or at moments (the
        // nemesis carried those out, or handed back the re-plans).
        None
        | Some(
            Action::CrashBeforeDispatch { .. }
            | Action::LoseRequest(_)
            | Action::CrashAfterCommit { .. }
            | Action::Stall
            | Action::ProviderError { .. }
            | Action::AuthorityDown
            | Action::AdvanceClock(_)
            | Action::Revoke(_)
            | Action::Replan { .. }
            | Action::CrashAgent { .. }
            | Action::ApproveAgain { .. }
            | Action::Interrupt,
        ) => AttemptEnd::Answered(answer),
    };
    let retry_after = match &end {
        AttemptEnd::Answered(_) => retry_after,
        _ => None,
    };
    Sent {
        end,
        replans: fate.replans,
        redelivery,
        retry_after,
    }
}

/// An answer lost on its way to the agent: held past its timeout (then
/// cancelled, by a protocol with a cancel) or cut with its connection.
async fn lost(
    env: &AgentEnv,
    mode: LossMode,
    deadline: tokio::time::Instant,
    attempt_id: &str,
    answer: Answer,
) -> AttemptEnd {
    if mode == LossMode::Hold {
        tokio::time::sleep_until(deadline).await;
        // The agent timed out: a protocol with a cancel sends it.
        env.way_in
            .timed_out(&env.http, &env.target, attempt_id)
            .await;
    }
    AttemptEnd::Lost {
        mode,
        dropped: answer,
    }
}

fn millis(duration: Duration) -> u64 {
    chaos_kit::clock::millis(duration)
}
