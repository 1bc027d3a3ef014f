//! chaos plays the model behind a real agent runtime (docs/runtimes.md).
//! The runtime is the target: chaos starts each call step as a run through
//! the app's own entry (`POST {entry}` with the run's id and the user's
//! prompt), and every model request of that run comes to chaos's scripted
//! model ([`desk`]), which answers in the runtime's wire format ([`wire`])
//! with the step's tool call, decides the step again as the faults say,
//! and ends the run with a final text. The tool's effect happens wherever
//! the runtime sends it: chaos's provider, whose ledger counts it.
//!
//! A run that failed (the process was killed mid-run, a 5xx) is retried by
//! the user with the same run id, as a user retries an agent: the runtime
//! resumes it the way its docs say (a checkpointed thread resumed, a
//! durable workflow recovered, a run started over).

pub(crate) mod desk;
pub(crate) mod wire;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chaos_kit::http::{self, Request};
use serde_json::json;
use tokio::sync::watch;

use self::desk::Desk;
use self::wire::Api;
use super::{Caller, Calling, Staged};
use crate::fault::{Action, Event, Fault, Trigger};
use crate::plan::Trial;
use crate::roles::agent::AgentEnv;

/// `[model]`: which wire format the runtime speaks, where its runs start,
/// and the runtime's names for the scenario's tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Model {
    pub api: Api,
    /// The app's entry: `POST` here starts (or retries) a run.
    pub entry: String,
    /// How long one run may take before the user gives up on it.
    pub run_timeout: Duration,
    /// How often the user retries a run that failed.
    pub retries: u32,
    pub tools: BTreeMap<String, String>,
}

pub(crate) const NAME: &str = "model";
pub(crate) const DOC: &str =
    "chaos plays the model behind a real agent runtime: the runtime makes the tool calls";

impl Caller for Model {
    fn admit(&self, trial: &Trial<'_>) -> Result<(), String> {
        for call in &trial.calls {
            if call.concurrency > 1 {
                return Err(format!(
                    "call {} sends one tool call from {} workers at once, and under [model] the runtime, not chaos, sends tool calls; run it against a service (no [model]), or use subagents = N (the model emits N tool calls in one turn)",
                    call.number, call.concurrency
                ));
            }
        }
        trial.scenario.faults.iter().try_for_each(admit_fault)
    }

    fn stage(
        &self,
        trial: &Trial<'_>,
        env: &AgentEnv,
        listener: tokio::net::TcpListener,
        mut stopped: watch::Receiver<()>,
    ) -> Staged {
        let desk = self.desk(trial, env);
        let handler = {
            let desk = desk.clone();
            http::handler(move |request| desk.clone().handle(request))
        };
        tokio::spawn(http::serve(
            listener,
            async move {
                // Completes when the sender is dropped: the trial is over.
                while stopped.changed().await.is_ok() {}
            },
            handler,
        ));
        Staged { desk: Some(desk) }
    }

    fn model_api(&self) -> &'static str {
        self.api.name()
    }

    fn call(&self, trial: &Trial<'_>, env: AgentEnv, staged: &Staged) -> Calling {
        let Some(desk) = staged.desk.clone() else {
            // Staged by the live driver only; the simulator never selects
            // this driver (its targets are chaos's own).
            return Box::pin(std::future::ready(()));
        };
        let numbers: Vec<u32> = trial.calls.iter().map(|call| call.number).collect();
        Box::pin(run(self.clone(), numbers, env, desk))
    }
}

impl Model {
    /// The desk for `trial`: what answers the runtime's model requests.
    fn desk(&self, trial: &Trial<'_>, env: &AgentEnv) -> Arc<Desk> {
        Arc::new(Desk::new(
            self.api,
            self.tools.clone(),
            trial,
            desk::Roles {
                timeline: env.timeline.clone(),
                clock: env.clock.clone(),
                nemesis: env.nemesis.clone(),
                attempts: env.attempts.clone(),
            },
        ))
    }
}

/// A fault the model can play, or why not. The model acts where a model
/// acts: it decides a step again (re-plan, stall, a result it cannot read,
/// a replay after the orchestrator died), and the world around the runtime
/// (the provider, the process, the clock) does the rest.
fn admit_fault(fault: &Fault) -> Result<(), String> {
    let refuse = |why: &str| Err(format!("fault '{fault}': {why}"));
    match fault.kind() {
        "double-approve" => {
            return refuse("a second human approval needs the runtime's own approval interrupt, which [model] does not drive yet; run it against a service (no [model])")
        }
        "user-interrupt" => {
            return refuse("an interrupt while a tool call is in flight needs the runtime's own cancel, which [model] does not drive yet")
        }
        "revoke" | "authority-outage" => {
            return refuse("a runtime under [model] is called by no token of chaos's authority; run authorization scenarios against a service")
        }
        "redeliver" => {
            return refuse("the tool's result reaches the model inside the runtime's process, where nothing delivers it twice; use a broker target (docs/brokers.md)")
        }
        "crash-agent" if !matches!(fault.trigger(), Some(Trigger::AfterCall(_))) => {
            return refuse("a crash of the orchestrator mid-call is the runtime's process killed: use crash-target (after-commit) instead; crash-agent after-call = N replays the run")
        }
        _ => {}
    }
    // The verdicts on the tool's result as it reaches the model: the model
    // can fail to read it, or be slow to answer, and nothing else.
    for nth in 1..=16 {
        match fault.verdict(Event::Answer(nth)) {
            None | Some(Action::TruncateResult | Action::DelayAnswer { .. }) => {}
            Some(_) => {
                return refuse("the tool's result reaches the model inside the runtime's own process, where chaos cannot lose it; put the loss between the runtime and the provider (hop = \"provider-to-target\")")
            }
        }
        if let Some(Action::Replan {
            signed_off: true, ..
        }) = fault.verdict(Event::Moment(Trigger::AfterAnswer(nth)))
        {
            return refuse("a signed-off re-plan needs the runtime to ask chaos's authority for approvals, which [model] does not drive yet");
        }
    }
    Ok(())
}

/// Each call step as one run, to its end.
async fn run(model: Model, numbers: Vec<u32>, env: AgentEnv, desk: Arc<Desk>) {
    for (index, number) in numbers.into_iter().enumerate() {
        if let Some(wait) = env.nemesis.take_wait() {
            tokio::time::sleep(wait).await;
        }
        // Second approvals were refused at admission; the moment still
        // passes, for the faults that wait for it.
        let _ = env.nemesis.before_call(number);
        let mut ran = run_once(&model, &env, &desk, index).await;
        env.nemesis.after_call(number);
        // The orchestrator died once the run was over and forgot it was:
        // the user runs it again.
        if let Some(restart_after) = env.nemesis.take_replay() {
            tokio::time::sleep(restart_after).await;
            ran = run_once(&model, &env, &desk, index).await;
        }
        if let Err(last) = &ran {
            desk.never_completed(index, model.retries + 1, last);
        }
        desk.close(index, ran.as_ref().unwrap_or_else(|last| last));
    }
}

/// Starts step `index`'s run, and retries it while it fails, as a user
/// retries an agent; how its last try ended, in words: `Err` when no try
/// completed.
async fn run_once(
    model: &Model,
    env: &AgentEnv,
    desk: &Desk,
    index: usize,
) -> Result<String, String> {
    let (run_id, prompt) = desk.prompt(index);
    let body = json!({"run_id": run_id, "prompt": prompt}).to_string();
    let mut last = String::new();
    for try_number in 0..=model.retries {
        if try_number > 0 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let request = Request::post(model.entry.clone(), body.clone())
            .header("content-type", "application/json");
        match env.http.call(&env.target, request, model.run_timeout).await {
            Ok(response) if response.status < 500 => {
                return Ok(format!("POST {} answered {}", model.entry, response.status))
            }
            Ok(response) => last = format!("POST {} answered {}", model.entry, response.status),
            Err(failure) => last = format!("POST {}: {failure}", model.entry),
        }
    }
    Err(last)
}
