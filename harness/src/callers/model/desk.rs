//! The model's desk: chaos's scripted model endpoint for one trial. Every
//! request a runtime sends its model comes here; the desk finds the run it
//! belongs to by the marker chaos put in the user's prompt, reads the tool
//! results the runtime sent back (each the end of a tool call the model
//! emitted), lets the nemesis act on them, and answers with the script's
//! next turn: the step's tool call, the same step decided again (a
//! re-plan, a stall, a run started over), or the final text.
//!
//! What the model emitted is the history's: each tool call is an attempt
//! (its tool-call id minted here, deterministic per seed), ended by the
//! result the runtime handed back, or abandoned if none ever came.

use chaos_kit::sync::lock;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chaos_kit::clock::Clock;
use chaos_kit::http::{Abort, Request, Response};
use chaos_kit::protocol::Outcome;
use serde_json::{json, Value};

use super::wire::{Api, Asked, Emitted, Turn};
use crate::fault::{Action, Wording};
use crate::history::{Answer, Attempt, AttemptEnd};
use crate::plan::{attempt_id, tool_use_id, Payload, Trial};
use crate::roles::clock::Timeline;
use crate::roles::nemesis::Nemesis;

/// What opens a run's marker in the prompt: `[chaos-run RUN-ID]`.
pub(crate) const MARKER: &str = "[chaos-run ";

/// The most tool calls the model emits for one step, whatever the faults
/// and the runtime do: a runtime that loops on the tool ends the run.
const MOST_DECISIONS: u32 = 32;

pub(crate) struct Desk {
    api: Api,
    /// The scenario's tool -> the runtime's name for it.
    tools: BTreeMap<String, String>,
    seed: u64,
    suffix: String,
    steps: Mutex<Vec<Step>>,
    timeline: Arc<dyn Timeline>,
    clock: Arc<dyn Clock>,
    nemesis: Arc<Nemesis>,
    attempts: Arc<Mutex<Vec<Attempt>>>,
    /// Model requests answered, for ids.
    requests: AtomicU64,
    /// What made the run not a trial of the runtime (a request chaos could
    /// not read, a tool the runtime never declared): the trial is not run.
    problems: Mutex<Vec<String>>,
    /// Runs that never completed, however often the user retried: the run
    /// is incomplete, and what did happen is still judged (a duplicate it
    /// made fails it all the same).
    incomplete: Mutex<Vec<String>>,
}

/// One call step of the scenario, as one run of the runtime.
struct Step {
    run_id: String,
    number: u32,
    operation: usize,
    tool: String,
    payload: Payload,
    drifted: Option<Payload>,
    /// Decisions the model makes on its own when a result is not final:
    /// the step's attempt budget.
    attempts: u32,
    subagents: u32,
    decisions: Vec<Decision>,
    /// Re-decisions the faults asked for, emitted one per turn.
    queued: VecDeque<Wording>,
    /// Model requests that named this run.
    asked: u32,
}

struct Decision {
    tool_use_id: String,
    /// Index into the trial's attempts.
    attempt: usize,
    resolved: bool,
}

impl Desk {
    pub(crate) fn new(
        api: Api,
        tools: BTreeMap<String, String>,
        trial: &Trial<'_>,
        roles: Roles,
    ) -> Desk {
        let steps = trial
            .calls
            .iter()
            .map(|call| Step {
                run_id: run_id(&trial.run_id, call.number),
                number: call.number,
                operation: call.operation,
                tool: call.tool.clone(),
                payload: call.payload.clone(),
                drifted: trial.operations[call.operation].drifted.clone(),
                attempts: call.attempts,
                subagents: call.subagents.max(1),
                decisions: Vec::new(),
                queued: VecDeque::new(),
                asked: 0,
            })
            .collect();
        Desk {
            api,
            tools,
            seed: trial.seed,
            suffix: trial.suffix().to_owned(),
            steps: Mutex::new(steps),
            timeline: roles.timeline,
            clock: roles.clock,
            nemesis: roles.nemesis,
            attempts: roles.attempts,
            requests: AtomicU64::new(0),
            problems: Mutex::new(Vec::new()),
            incomplete: Mutex::new(Vec::new()),
        }
    }

    /// The prompt that starts step `index`'s run, with its marker.
    pub(crate) fn prompt(&self, index: usize) -> (String, String) {
        let steps = lock(&self.steps);
        let step = &steps[index];
        let name = self.runtime_name(&step.tool);
        let arguments = String::from_utf8_lossy(&step.payload.bytes);
        (
            step.run_id.clone(),
            format!(
                "Please call the tool {name} once, with these arguments: {arguments}. {MARKER}{}]",
                step.run_id
            ),
        )
    }

    /// Step `index`'s run is over: a tool call whose result never reached
    /// the model was abandoned with the process that held it; a run that
    /// never asked the model is no trial of the runtime.
    pub(crate) fn close(&self, index: usize, entry: &str) {
        let steps = lock(&self.steps);
        let step = &steps[index];
        if step.asked == 0 {
            self.problem(format!(
                "the runtime never asked the model during run {} ({entry}); check its base URL setting: {}",
                step.run_id,
                self.api.base_url_setting()
            ));
        }
    }

    /// Step `index`'s run never completed in `tries` tries (a resume that
    /// never finishes, a runtime that fails every run).
    pub(crate) fn never_completed(&self, index: usize, tries: u32, last: &str) {
        let run = lock(&self.steps)[index].run_id.clone();
        lock(&self.incomplete).push(format!(
            "run {run} never completed in {tries} tries (the last: {last})"
        ));
    }

    /// Why the runs did not all complete, if they did not.
    pub(crate) fn incomplete_text(&self) -> Option<String> {
        let incomplete = lock(&self.incomplete);
        (!incomplete.is_empty()).then(|| incomplete.join("; "))
    }

    /// Why the run was not a trial of the runtime, if it was not.
    pub(crate) fn problem_text(&self) -> Option<String> {
        let problems = lock(&self.problems);
        (!problems.is_empty()).then(|| problems.join("; "))
    }

    fn problem(&self, text: String) {
        let mut problems = lock(&self.problems);
        if !problems.contains(&text) {
            problems.push(text);
        }
    }

    fn runtime_name<'a>(&'a self, tool: &'a str) -> &'a str {
        self.tools.get(tool).map_or(tool, String::as_str)
    }

    /// One model request, answered.
    pub(crate) async fn handle(self: Arc<Self>, request: Request) -> Result<Response, Abort> {
        if request.method == "GET" && request.path.ends_with("/models") {
            return Ok(Response::json(
                200,
                &json!({"object": "list", "data": [{"id": "chaos-scripted", "object": "model", "created": 0, "owned_by": "chaos"}]}),
            ));
        }
        let api = self.api;
        match Api::at(&request.path) {
            Some(spoken) if spoken == api => {}
            Some(spoken) => {
                let why = format!(
                    "the runtime called its model at {} ({}), and the target file says [model] api = \"{}\"; write api = \"{}\"",
                    request.path,
                    spoken.name(),
                    api.name(),
                    spoken.name()
                );
                self.problem(why.clone());
                return Ok(spoken.error(400, &why));
            }
            None => {
                return Ok(api.error(
                    404,
                    &format!(
                        "chaos's scripted model answers {} {}, not {} {}",
                        "POST",
                        api.path(),
                        request.method,
                        request.path
                    ),
                ))
            }
        }
        let asked = match api.read(&request.body) {
            Ok(asked) => asked,
            Err(why) => {
                let why = format!("a model request chaos cannot read as {}: {why}", api.name());
                self.problem(why.clone());
                return Ok(api.error(400, &why));
            }
        };
        let number = self.requests.fetch_add(1, Ordering::Relaxed) + 1;
        let Some(run) = marked_run(&asked.text) else {
            let why = format!(
                "a model request carried no {MARKER}…] marker: the runtime must pass the user's prompt as chaos sent it (the marker tells chaos which run asks)"
            );
            self.problem(why.clone());
            return Ok(api.error(400, &why));
        };
        match self.turn(&run, &asked) {
            Ok((turn, hold)) => {
                if let Some(hold) = hold {
                    tokio::time::sleep(hold).await;
                }
                Ok(api.answer(&turn, &asked, number))
            }
            Err(why) => {
                self.problem(why.clone());
                Ok(api.error(400, &why))
            }
        }
    }

    /// The model's next turn in run `run`, given what the runtime sent; a
    /// wait before answering when a fault delays the model.
    fn turn(&self, run: &str, asked: &Asked) -> Result<(Turn, Option<Duration>), String> {
        let mut steps = lock(&self.steps);
        let known: Vec<String> = steps
            .iter()
            .flat_map(|step| step.decisions.iter().map(|d| d.tool_use_id.clone()))
            .collect();
        let Some(step) = steps.iter_mut().find(|step| step.run_id == run) else {
            return Err(format!(
                "a model request names run {run}, which chaos did not start in this trial"
            ));
        };
        step.asked += 1;
        let name = self.runtime_name(&step.tool).to_owned();
        if !asked.tools.contains(&name) {
            let declared = if asked.tools.is_empty() {
                "no tools".to_owned()
            } else {
                format!("the tools {}", asked.tools.join(", "))
            };
            return Err(format!(
                "the runtime declared {declared} to its model, and the scenario calls {name}; give the agent that tool, or map it in the target file ([model.tools] {} = \"<the runtime's name>\")",
                step.tool
            ));
        }
        if let Some((id, tool)) = asked.calls.iter().find(|(id, _)| !known.contains(id)) {
            return Err(format!(
                "the runtime sent its model a tool call ({tool}, id {id}) that chaos's model never emitted"
            ));
        }
        let mut hold = None;
        for result in &asked.results {
            let Some(decision) = step
                .decisions
                .iter_mut()
                .find(|decision| decision.tool_use_id == result.id && !decision.resolved)
            else {
                continue;
            };
            decision.resolved = true;
            let answer = read_result(&result.content, result.is_error);
            let definitive = answer.outcome.is_definitive();
            let fate = self.nemesis.answer();
            let end = match fate.action {
                // The model could not read what came back: it decides the
                // step again, as a planner with an unparseable result does.
                Some(Action::TruncateResult) => {
                    step.queued.push_back(Wording::Same);
                    AttemptEnd::Truncated { dropped: answer }
                }
                Some(Action::DelayAnswer { by, .. }) => {
                    hold = Some(by);
                    AttemptEnd::Answered(answer)
                }
                // The other verdicts on an answer were refused when the cell
                // was admitted; the model reads what it got.
                _ => AttemptEnd::Answered(answer),
            };
            {
                let mut attempts = lock(&self.attempts);
                let attempt = &mut attempts[decision.attempt];
                attempt.end = end;
                attempt.ended_at = self.timeline.now();
            }
            for replans in fate.replans {
                for _ in 0..replans.times {
                    step.queued.push_back(replans.wording);
                }
            }
            // A stalled call, or a result that is not final: the model tries
            // the step again (a new tool call), within the step's budget.
            let again = self.nemesis.take_stall()
                || (!definitive && (step.decisions.len() as u32) < step.attempts);
            if again && step.queued.is_empty() {
                step.queued.push_back(Wording::Same);
            }
        }
        let ours = asked
            .calls
            .iter()
            .any(|(id, _)| step.decisions.iter().any(|d| d.tool_use_id == *id));
        let turn = if step.decisions.len() as u32 >= MOST_DECISIONS {
            Turn::Text(format!(
                "I stopped: {MOST_DECISIONS} tool calls for one step is enough."
            ))
        } else if let Some(wording) = step.queued.pop_front() {
            Turn::Calls(vec![self.emit(step, wording, &name)])
        } else if !ours {
            // A conversation with none of the model's tool calls in it: the
            // run's first request, or the run started over (the user's
            // retry, a replay) and the model decides the step again.
            let count = if step.decisions.is_empty() {
                step.subagents
            } else {
                1
            };
            Turn::Calls(
                (0..count)
                    .map(|_| self.emit(step, Wording::Same, &name))
                    .collect(),
            )
        } else {
            Turn::Text(final_text(step, &lock(&self.attempts)))
        };
        Ok((turn, hold))
    }

    /// A new tool call for `step`, recorded as an attempt until its result
    /// comes back.
    fn emit(&self, step: &mut Step, wording: Wording, name: &str) -> Emitted {
        let decision = step.decisions.len() as u32 + 1;
        let id = tool_use_id(self.seed, step.number, decision, &self.suffix);
        let payload = match (wording, &step.drifted) {
            (Wording::Drifted, Some(drifted)) => drifted,
            _ => &step.payload,
        };
        let arguments: Value = serde_json::from_slice(&payload.bytes).unwrap_or(Value::Null);
        let now = self.timeline.now();
        let mut attempts = lock(&self.attempts);
        attempts.push(Attempt {
            operation: step.operation,
            call: step.number,
            worker: decision,
            attempt: 1,
            attempt_id: attempt_id(self.seed, step.number, decision, 1),
            tool_use_id: id.clone(),
            decision,
            // The runtime's key, if it sends one, is its own: the model
            // never sees it. The provider's ledger has it.
            key: String::new(),
            payload_fingerprint: payload.fingerprint.clone(),
            intent: payload.intent.clone(),
            sent_at: now,
            ended_at: now,
            wall_clock_ms: self.clock.now_ms(),
            // Until the runtime hands the result back: none reached the model.
            end: AttemptEnd::Abandoned,
        });
        step.decisions.push(Decision {
            tool_use_id: id.clone(),
            attempt: attempts.len() - 1,
            resolved: false,
        });
        Emitted {
            id,
            name: name.to_owned(),
            arguments,
        }
    }
}

/// What the desk needs of the trial's roles.
pub(crate) struct Roles {
    pub timeline: Arc<dyn Timeline>,
    pub clock: Arc<dyn Clock>,
    pub nemesis: Arc<Nemesis>,
    pub attempts: Arc<Mutex<Vec<Attempt>>>,
}

/// The run id chaos gives call step `number` of the trial's run.
pub(crate) fn run_id(trial_run: &str, number: u32) -> String {
    format!("{trial_run}-c{number}")
}

/// The run a request's text names by its marker.
fn marked_run(text: &str) -> Option<String> {
    let start = text.find(MARKER)? + MARKER.len();
    let end = text[start..].find(']')? + start;
    let run = text[start..end].trim();
    (!run.is_empty()).then(|| run.to_owned())
}

/// A tool's result as the model reads it: JSON whose `status` is one of
/// chaos's outcomes and whose `receipt` is the effect's, as the contract in
/// docs/runtimes.md asks. Anything else is an answer the model cannot
/// judge: unknown, saying why.
pub(crate) fn read_result(content: &str, is_error: bool) -> Answer {
    let value: Option<Value> = serde_json::from_str(content.trim()).ok();
    let status = value
        .as_ref()
        .and_then(|value| value.get("status"))
        .and_then(Value::as_str)
        .and_then(Outcome::parse);
    let receipt = value
        .as_ref()
        .and_then(|value| value.get("receipt"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let unread = match (status, is_error) {
        (_, true) => Some(format!(
            "the runtime reported the tool failed: {}",
            clip(content)
        )),
        (Some(_), false) => None,
        (None, false) => Some(format!(
            "the tool's result is not JSON with a chaos outcome in `status`: {}",
            clip(content)
        )),
    };
    Answer {
        status: 200,
        outcome: match unread {
            Some(_) => Outcome::Unknown,
            None => status.unwrap_or(Outcome::Unknown),
        },
        receipt,
        disclosed_result: false,
        records: Vec::new(),
        reason: None,
        unread,
    }
}

/// What the model finally tells the user: what the last result it read said.
fn final_text(step: &Step, attempts: &[Attempt]) -> String {
    let last = step
        .decisions
        .iter()
        .rev()
        .filter(|decision| decision.resolved)
        .find_map(|decision| attempts.get(decision.attempt));
    match last.and_then(Attempt::answer) {
        Some(answer) => format!(
            "Done: {} {} ({}).",
            step.tool,
            answer.outcome,
            answer.receipt.as_deref().unwrap_or("no receipt")
        ),
        None => format!("I could not tell whether {} happened.", step.tool),
    }
}

fn clip(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(120) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_names_the_run_wherever_the_prompt_puts_it() {
        assert_eq!(
            marked_run("system text\nPlease call x. [chaos-run run-1f-c2]\n").as_deref(),
            Some("run-1f-c2")
        );
        assert_eq!(marked_run("no marker here"), None);
        assert_eq!(marked_run("[chaos-run ]"), None);
        assert_eq!(marked_run("[chaos-run run-1"), None);
    }

    #[test]
    fn a_result_in_the_contract_is_read_and_anything_else_is_unknown_saying_why() {
        let applied = read_result(r#"{"status": "applied", "receipt": "pi_1"}"#, false);
        assert_eq!(applied.outcome, Outcome::Applied);
        assert_eq!(applied.receipt.as_deref(), Some("pi_1"));
        assert_eq!(applied.unread, None);

        let prose = read_result("Charged the card, all good", false);
        assert_eq!(prose.outcome, Outcome::Unknown);
        assert!(prose.unread.unwrap().contains("not JSON"));

        let error = read_result(r#"{"status": "applied"}"#, true);
        assert_eq!(error.outcome, Outcome::Unknown);
        assert!(error.unread.unwrap().contains("reported the tool failed"));
    }
}
