//! `chaos probe`: first contact with a live target. Four calls, one of each
//! kind the protocol turns on (a first call, an identical retry, a changed
//! payload, a revoked caller), each a one-seed trial of a built-in
//! scenario, and for each what the target did against the protocol: did it
//! ask who the caller is, dispatch with a key, mark the replay, refuse the
//! change. When what went wrong looks like the target file's reading of the
//! service (an unmapped status, a replay nobody marked), the hint says which
//! line of the target file to write. A user reaches a first green or red in
//! seconds, before the whole suite.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::OnceLock;
use std::time::Duration;

use chaos_kit::http::CallFailure;
use chaos_kit::protocol::Outcome;

use crate::check::Status;
use crate::history::{Attempt, AttemptEnd, DeclaredTool, Disposition, RunOutput};
use crate::plan::Timing;
use crate::scenario::{builtin, Policy, Scenario};
use crate::target::Target;
use crate::trial::{self, Judged};
use crate::way_in::WayIn;

/// One kind of call the probe makes: a first call of the operation, and
/// what comes after it.
struct Step {
    kind: Kind,
    name: &'static str,
    /// What a correct target does, in one line.
    expects: &'static str,
    /// The scenario's test family and description.
    test: &'static str,
    description: &'static str,
    /// The first call's own lines (its expectation, or how it is decided
    /// again), as scenario TOML.
    first: &'static str,
    /// The second call, if any, and the fault, as scenario TOML.
    then: &'static str,
}

/// What the step asks of the target, for the hints.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    FirstCall,
    IdenticalRetry,
    ChangedPayload,
    RevokedCaller,
    /// The model decides the same step again: a new tool call, same intent.
    Replan,
}

const STEPS: [Step; 4] = [
    Step {
        kind: Kind::FirstCall,
        name: "a first call",
        expects: "applied, one effect at the provider, dispatched with a key",
        test: "lost-response",
        description: "one call, nothing goes wrong",
        first: APPLIED,
        then: "",
    },
    Step {
        kind: Kind::IdenticalRetry,
        name: "an identical retry",
        expects: "replayed: the stored result, no second effect",
        test: "changed-payload",
        description: "the same call again, same key, same arguments",
        first: APPLIED,
        then: "[[call]]\noperation = \"reminder\"\nexpect = [\"replayed\"]\n",
    },
    Step {
        kind: Kind::ChangedPayload,
        name: "a changed payload",
        expects: "conflict: the key was used with other arguments, nothing done",
        test: "changed-payload",
        description: "the same key with a different recipient",
        first: APPLIED,
        then:
            "[[call]]\noperation = \"reminder\"\npayload = \"changed\"\nexpect = [\"conflict\"]\n",
    },
    Step {
        kind: Kind::RevokedCaller,
        name: "a revoked caller",
        expects: "denied: no dispatch and no stored result for a caller who lost access",
        test: "revoked-permission",
        description: "the caller's token is revoked, then the call is retried",
        first: APPLIED,
        then: "[[call]]\noperation = \"reminder\"\nexpect = [\"denied\"]\n\
               [[fault]]\nkind = \"revoke\"\ngrant = \"token\"\nafter-call = 1\n",
    },
];

const APPLIED: &str = "expect = [\"applied\"]\n";

/// An MCP server's steps, for each tool its file maps: what a plain MCP
/// client's retry and a model deciding again do to the effects behind it.
const MCP_STEPS: [Step; 3] = [
    Step {
        name: "a first call",
        expects: "applied, one effect at the provider",
        ..STEPS[0]
    },
    Step {
        name: "an identical retry",
        expects: "its stored result (replayed or applied), no second effect",
        first: APPLIED,
        then: "[[call]]\noperation = \"reminder\"\nexpect = [\"replayed\", \"applied\"]\n",
        ..STEPS[1]
    },
    Step {
        kind: Kind::Replan,
        name: "a re-plan",
        expects: "the first result for the same intent, no second effect",
        test: "re-plan",
        description: "applied and answered, then the model decides the step again: a new tool call",
        first: "attempts = 4\nidentity = \"replan\"\n",
        then: "[[fault]]\nkind = \"replan\"\nnth = 1\ntimes = 1\n",
    },
];

impl Step {
    /// The step as a scenario file calling `tool` (the suite's default when
    /// `None`), against a `blind` provider (a mail server deduplicates
    /// nothing) or, as every other, Stripe's `keyed` with a day's retention.
    fn scenario(&self, blind: bool, tool: Option<&str>) -> String {
        let provider = if blind {
            "profile = \"blind\""
        } else {
            "profile = \"keyed\"\nretention = \"24h\""
        };
        // The tool is called as the suite calls it: a charge carries its
        // memo, a notification its note.
        let workload = match tool {
            Some(tool) => match suite_free_text(tool) {
                Some(field) => {
                    format!("[workload]\ntool = \"{tool}\"\nfree-text-field = \"{field}\"\n")
                }
                None => format!("[workload]\ntool = \"{tool}\"\n"),
            },
            None => String::new(),
        };
        format!(
            "test = \"{}\"\ndescription = \"probe: {}\"\n[provider]\n{provider}\n{workload}\
             [[call]]\noperation = \"reminder\"\n{}{}\
             [expect]\neffects-per-operation = 1\n",
            self.test, self.description, self.first, self.then
        )
    }
}

/// What came of one step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepReport {
    pub name: &'static str,
    /// The suite's tool the step called, when the probe goes tool by tool
    /// (an MCP server's).
    pub tool: Option<String>,
    pub expects: &'static str,
    pub status: Status,
    /// What the target did, one line each.
    pub observed: Vec<String>,
    /// How to fix the target, or its target file, when something went wrong.
    pub hints: Vec<String>,
}

/// The probe of one target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeReport {
    pub target: String,
    /// Reached over MCP: the steps go tool by tool.
    pub mcp: bool,
    /// What the MCP server declared of each tool probed.
    pub declared: Vec<DeclaredTool>,
    /// Tools the file maps that the probe leaves to `chaos run`, with why.
    pub not_probed: Vec<String>,
    pub steps: Vec<StepReport>,
    /// The service's slowest answer against the agent's budget, and the
    /// `[agent]` lines to write when the budget is too short for it.
    pub patience: Vec<String>,
}

/// What the probe measured of the service's speed: its slowest answer, and
/// whether an attempt ran out of time waiting for one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Slowest {
    answer_ms: u64,
    timed_out: bool,
}

impl Slowest {
    fn of(run: &RunOutput, slowest: &mut Slowest) {
        for attempt in &run.history.attempts {
            let took = attempt.ended_at.saturating_sub(attempt.sent_at);
            match &attempt.end {
                AttemptEnd::Answered(_) => slowest.answer_ms = slowest.answer_ms.max(took),
                AttemptEnd::Failed {
                    failure: CallFailure::Timeout,
                } => slowest.timed_out = true,
                _ => {}
            }
        }
    }
}

/// The lines on the agent's patience: the slowest answer against the
/// budget, and, when an attempt timed out or the slowest answer took more
/// than half an attempt's `timeout` (no room left for a reconcile after a
/// downstream timeout), an `[agent]` budget that fits: a `timeout` of twice
/// the slowest answer, whole seconds, and a `retry-for` of four such
/// attempts, within the file's limits (1 m, 10 m).
fn patience(slowest: Slowest, timing: &Timing) -> Vec<String> {
    let show = |ms: u64| humantime::format_duration(Duration::from_millis(ms)).to_string();
    let timeout = timing.agent_timeout.as_millis() as u64;
    let mut lines = vec![format!(
        "slowest answer: {} (the agent waits {} per attempt{}){}",
        show(slowest.answer_ms),
        show(timeout),
        timing.retry_for.map_or_else(
            || ", and retries a call past its attempts for no longer: no [agent] retry-for"
                .to_owned(),
            |retry_for| format!(
                ", and retries a call for {}",
                humantime::format_duration(retry_for)
            ),
        ),
        if slowest.timed_out {
            "; an attempt timed out waiting"
        } else {
            ""
        }
    )];
    if !slowest.timed_out && slowest.answer_ms * 2 <= timeout {
        return lines;
    }
    // Whole seconds, at least the current timeout's worth.
    let seconds = |ms: u64| ms.div_ceil(1000).max(1);
    let wanted = if slowest.timed_out {
        timeout.max(slowest.answer_ms) * 2
    } else {
        slowest.answer_ms * 2
    };
    let attempt = seconds(wanted).clamp(seconds(timeout), 60);
    let retry_for = (attempt * 4).min(600);
    lines.push(format!(
        "the agent's budget is too short for this service: a call it cannot finish in time is judged stuck, not the service. Add to the target file: [agent] timeout = \"{attempt}s\" and retry-for = \"{retry_for}s\" (twice the slowest answer per attempt, four attempts' worth in all)"
    ));
    lines
}

impl ProbeReport {
    /// A failure dominates; then an unknown.
    pub fn status(&self) -> Status {
        let statuses = self.steps.iter().map(|step| step.status);
        if statuses.clone().any(|status| status == Status::Fail) {
            Status::Fail
        } else if statuses.clone().any(|status| status == Status::Unknown) {
            Status::Unknown
        } else {
            Status::Pass
        }
    }

    /// `tool charge_card -> create_charge: declares idempotentHint: true`.
    fn tool_line(&self, tool: &str) -> String {
        match self.declared.iter().find(|declared| declared.tool == tool) {
            Some(declared) => {
                let hints = declared.hints();
                format!(
                    "tool {tool} -> {}: {}",
                    declared.mcp_tool,
                    if hints.is_empty() {
                        "declares no hints".to_owned()
                    } else {
                        format!("declares {hints}")
                    }
                )
            }
            None => format!("tool {tool}"),
        }
    }

    /// The report as the terminal shows it.
    pub fn render(&self) -> String {
        let mut text = if self.mcp {
            format!(
                "probe of MCP server '{}': per tool, a first call, an identical retry and a re-plan, one seed each\n",
                self.target
            )
        } else {
            format!(
                "probe of target '{}': four calls, one seed each\n",
                self.target
            )
        };
        let mut tool = None;
        for step in &self.steps {
            if step.tool.is_some() && step.tool != tool {
                tool = step.tool.clone();
                text.push_str(&format!(
                    "\n{}\n",
                    self.tool_line(tool.as_deref().unwrap_or(""))
                ));
            }
            let mark = match step.status {
                Status::Pass => "ok  ",
                Status::Fail => "FAIL",
                Status::Unknown => "??  ",
            };
            text.push_str(&format!(
                "\n{mark} {}: expected {}\n",
                step.name, step.expects
            ));
            for line in &step.observed {
                text.push_str(&format!("       {line}\n"));
            }
            for hint in &step.hints {
                text.push_str(&format!("     hint: {hint}\n"));
            }
        }
        if !self.not_probed.is_empty() {
            text.push('\n');
        }
        for line in &self.not_probed {
            text.push_str(&format!("{line}\n"));
        }
        if !self.patience.is_empty() {
            text.push('\n');
        }
        for line in &self.patience {
            text.push_str(&format!("{line}\n"));
        }
        let verdict = match self.status() {
            Status::Pass => "every call was handled as the protocol asks; next: chaos run scenarios/*.toml --target ...",
            Status::Fail => "at least one call was mishandled (above); fix the target, or its target file where a hint says so",
            Status::Unknown => "at least one call could not be judged (above)",
        };
        text.push_str(&format!("\n{verdict}\n"));
        text
    }
}

/// How the built-in suite calls each tool: its free-text field, and
/// whether every call of it is its own effect in every scenario that calls
/// it (`policy = "allow"`).
fn suite_workloads() -> &'static BTreeMap<String, (Option<String>, bool)> {
    static WORKLOADS: OnceLock<BTreeMap<String, (Option<String>, bool)>> = OnceLock::new();
    WORKLOADS.get_or_init(|| {
        let mut workloads = BTreeMap::new();
        for (path, text) in builtin::suite() {
            let Ok(scenario) = Scenario::parse(std::path::Path::new(path), text) else {
                continue;
            };
            let workload = &scenario.workload;
            let entry = workloads
                .entry(workload.tool.clone())
                .or_insert((None, true));
            if entry.0.is_none() {
                entry.0 = workload.free_text_field.clone();
            }
            entry.1 &= workload.policy == Policy::Allow;
        }
        workloads
    })
}

fn suite_free_text(tool: &str) -> Option<&'static str> {
    suite_workloads().get(tool)?.0.as_deref()
}

/// The suite's tools an MCP target's file maps; `None` for any other target.
fn mcp_tools(target: &Target) -> Option<Vec<String>> {
    match target {
        Target::Live { file, .. } => match &file.way_in {
            WayIn::Mcp(mcp) => Some(mcp.mapped_tools()),
            _ => None,
        },
        Target::Sim(_) => None,
    }
}

/// The steps to take, in order, each with its scenario: the four calls of
/// an HTTP target, or an MCP server's three per tool its file maps (the
/// suite's default tool when it maps none).
fn plan(target: &Target, blind: bool) -> Vec<(&'static Step, Option<String>, Scenario)> {
    let mcp_tools = mcp_tools(target);
    let parse = |step: &'static Step, tool: Option<String>| {
        let path = format!("probe/{}.toml", step.name.replace(' ', "-"));
        let text = step.scenario(blind, tool.as_deref());
        // The tool names come from the target file; a name a scenario
        // cannot carry is skipped rather than probed under another name.
        Scenario::parse(std::path::Path::new(&path), &text)
            .ok()
            .map(|scenario| (step, tool, scenario))
    };
    match mcp_tools {
        None => STEPS.iter().filter_map(|step| parse(step, None)).collect(),
        Some(tools) if tools.is_empty() => MCP_STEPS
            .iter()
            .filter_map(|step| parse(step, None))
            .collect(),
        Some(tools) => tools
            .into_iter()
            // A tool every call of which is its own effect is not held to
            // one effect per intent: `chaos run` judges it by its policy.
            .filter(|tool| {
                suite_workloads()
                    .get(tool)
                    .is_none_or(|(_, allowed)| !allowed)
            })
            .flat_map(|tool| MCP_STEPS.iter().map(move |step| (step, tool.clone())))
            .filter_map(|(step, tool)| parse(step, Some(tool)))
            .collect(),
    }
}

/// Probes `target`; `None` when cancelled.
pub fn probe(target: &Target, cancel: &AtomicBool) -> Option<ProbeReport> {
    let blind = matches!(target, Target::Live { file, .. } if file.provider_api.blind_only());
    let plan = plan(target, blind);
    let not_probed = (mcp_tools(target).into_iter().flatten())
        .filter(|tool| suite_workloads().get(tool).is_some_and(|(_, allowed)| *allowed))
        .map(|tool| format!("tool {tool}: not probed: in the suite every call of it is its own effect (policy \"allow\"); chaos run judges it by that policy"))
        .collect();
    let driver = target.driver(false, crate::sweep::Payloads::Redacted);
    let mut steps = Vec::new();
    let mut slowest = Slowest::default();
    let mut declared: Vec<DeclaredTool> = Vec::new();
    for (step, tool, scenario) in &plan {
        let judged = trial::admit_and_judge(driver.as_ref(), scenario, 0, cancel)?;
        if let Some(run) = &judged.run {
            Slowest::of(run, &mut slowest);
            for seen in run.history.mcp.iter().flat_map(|seen| &seen.tools) {
                if !declared.contains(seen) {
                    declared.push(seen.clone());
                }
            }
        }
        let mut report = read(step, &judged, target);
        report.tool = tool.clone();
        steps.push(report);
    }
    let timing = driver.agent_timing();
    driver.finished();
    let mcp = mcp_tools(target).is_some();
    Some(ProbeReport {
        target: target.name().to_owned(),
        mcp,
        declared,
        not_probed,
        steps,
        patience: timing.map_or_else(Vec::new, |timing| patience(slowest, &timing)),
    })
}

/// What the step's trial says about the target.
fn read(step: &Step, judged: &Judged<'_>, target: &Target) -> StepReport {
    let verdict = &judged.verdict;
    let mut observed = Vec::new();
    let mut hints = Vec::new();
    let Some(run) = &judged.run else {
        let why = verdict
            .findings
            .first()
            .map_or("it could not run".to_owned(), |finding| {
                finding.message.clone()
            });
        return StepReport {
            name: step.name,
            tool: None,
            expects: step.expects,
            status: verdict.status,
            observed: vec![format!("not run: {why}")],
            hints,
        };
    };
    let mcp = mcp_tools(target).is_some();
    for (number, attempt) in run.history.attempts.iter().enumerate() {
        observed.push(format!("call {}: {}", number + 1, describe(attempt, mcp)));
    }
    observe_downstream(run, target, &mut observed);
    if verdict.status != Status::Pass {
        for finding in &verdict.findings {
            observed.push(format!("{}: {}", finding.check, finding.message));
        }
        let tool = &judged.trial.scenario.workload.tool;
        if mcp {
            hint_mcp(step, run, &mut hints);
        } else {
            hint(step, run, target, tool, &mut hints);
        }
    }
    StepReport {
        name: step.name,
        tool: None,
        expects: step.expects,
        status: verdict.status,
        observed,
        hints,
    }
}

fn describe(attempt: &Attempt, mcp: bool) -> String {
    match attempt.answer() {
        Some(answer) => {
            let mut line = if mcp {
                format!("tools/call read as {}", answer.outcome)
            } else {
                format!("HTTP {} read as {}", answer.status, answer.outcome)
            };
            if let Some(receipt) = &answer.receipt {
                line.push_str(&format!(", receipt {receipt}"));
            }
            if let Some(reason) = &answer.reason {
                line.push_str(&format!(" ({reason})"));
            }
            line
        }
        None => attempt.summary(),
    }
}

/// Did it ask who the caller is, and did it dispatch with a key.
fn observe_downstream(run: &RunOutput, target: &Target, observed: &mut Vec<String>) {
    let keeps_own_callers = matches!(target, Target::Live { file, .. } if file.authority.is_some());
    let asked = run.history.authorizations.len();
    if keeps_own_callers {
        observed
            .push("callers: its own store, told by the target file's [authority] commands".into());
    } else {
        observed.push(format!("introspected the caller {asked} time(s)"));
    }
    let dispatches = &run.ledger.dispatches;
    let effects = new_effects(dispatches);
    let keys: Vec<&str> = dispatches
        .iter()
        .map(|dispatch| dispatch.key.as_deref().unwrap_or("no key"))
        .collect();
    observed.push(format!(
        "dispatched {} time(s) to the provider ({}), {effects} new effect(s)",
        dispatches.len(),
        if keys.is_empty() {
            "nothing sent".to_owned()
        } else {
            keys.join(", ")
        }
    ));
}

/// The dispatches that were new effects (not a keyed provider's replays).
fn new_effects(dispatches: &[crate::history::Dispatch]) -> usize {
    dispatches
        .iter()
        .filter(|dispatch| matches!(dispatch.disposition, Disposition::Committed { .. }))
        .count()
}

/// How to fix what went wrong, where the answers show it.
fn hint(step: &Step, run: &RunOutput, target: &Target, tool: &str, hints: &mut Vec<String>) {
    let reads_an_outcome_field =
        matches!(target, Target::Live { file, .. } if file.reads_its_own_outcomes());
    let attempts = &run.history.attempts;
    let dispatches = &run.ledger.dispatches;
    let last = attempts.last().and_then(Attempt::answer);
    if dispatches.is_empty()
        && attempts
            .iter()
            .any(|a| a.answer().is_some_and(|a| a.outcome == Outcome::Applied))
    {
        hints.push("it answered applied, but nothing reached chaos's provider: point the service's downstream URL at it (CHAOS_PROVIDER_URL, or \"{provider.url}\" in the target file's [env])".into());
    }
    if dispatches.iter().any(|dispatch| dispatch.key.is_none()) {
        hints.push("it dispatched without an Idempotency-Key: after a lost answer, its retry is a second effect; send a key derived from the operation".into());
    }
    let Some(last) = last else {
        return;
    };
    if let Some(why) = &last.unread {
        hints.push(format!("the target file's [response] could not read the last answer: {why}; map the value in [response.outcomes], or point [response] outcome at the field that names it"));
        return;
    }
    let unmapped = |meaning: &str, outcome: &str| {
        // A 4xx is the service refusing the call: read as a success, every
        // refusal would pass. What it refused is the suite's tool, or the
        // call itself.
        if (400..500).contains(&last.status) && matches!(outcome, "applied" | "replayed") {
            return refused(last.status, last.outcome, tool);
        }
        let line = format!("[status] {} = \"{outcome}\"", last.status);
        let fix = if reads_an_outcome_field {
            format!("map the value it sent in [response.outcomes] to \"{outcome}\", or add {line}")
        } else {
            format!("add to the target file: {line}")
        };
        format!(
            "HTTP {} was read as {}; if the service means {meaning} by it, {fix}",
            last.status, last.outcome
        )
    };
    match step.kind {
        Kind::FirstCall if last.outcome != Outcome::Applied => {
            hints.push(unmapped("done", "applied"));
        }
        Kind::IdenticalRetry => {
            if new_effects(dispatches) > 1 {
                hints.push("the retry made a second effect: it does not deduplicate by the Idempotency-Key".into());
            } else if last.outcome == Outcome::Applied {
                hints.push("it answered the retry as new (applied) though nothing new happened: mark a replay with the header Idempotent-Replayed: true, or an outcome \"replayed\" in the body".into());
            } else if last.outcome != Outcome::Replayed {
                hints.push(unmapped("a replay of the stored result", "replayed"));
            }
        }
        Kind::ChangedPayload => match last.outcome {
            Outcome::Replayed | Outcome::Applied => hints.push(
                "it answered a different payload under a used key as the same operation: bind the payload (a fingerprint of its canonical form) to the key and refuse a mismatch".into(),
            ),
            Outcome::Conflict => {}
            _ => hints.push(unmapped("\"this key was used with other arguments\"", "conflict")),
        },
        Kind::RevokedCaller => match last.outcome {
            Outcome::Replayed | Outcome::Applied => hints.push(
                "it served a caller whose token was revoked: authorize every attempt (introspect, or read its own store) before replaying a stored result or dispatching".into(),
            ),
            Outcome::Denied => {}
            _ => hints.push(unmapped("\"not authorized\"", "denied")),
        },
        _ => {}
    }
}

/// How to fix an MCP server, where the answers show it. A plain MCP client
/// sends no identity, so a retry and a re-plan are new `tools/call`s to the
/// server: only what the call repeats can key its effect.
fn hint_mcp(step: &Step, run: &RunOutput, hints: &mut Vec<String>) {
    let attempts = &run.history.attempts;
    let effects = new_effects(&run.ledger.dispatches);
    if run.ledger.dispatches.is_empty()
        && attempts
            .iter()
            .any(|a| a.answer().is_some_and(|a| a.outcome == Outcome::Applied))
    {
        hints.push("it answered applied, but nothing reached chaos's provider: point the server's downstream at it in [env] ({provider.url}, or {provider.host} and {provider.port} for mail)".into());
    }
    let declared_idempotent = (run.history.mcp.iter())
        .flat_map(|seen| &seen.tools)
        .find(|tool| tool.idempotent == Some(true));
    if effects > 1 {
        let why = match step.kind {
            Kind::Replan => "the model decided the step again (a new tool call for the same intent) and the server made a second effect: key the effect by what stays the same across a re-plan (the run and step chaos sends as X-Run-Id and X-Step-Id, or the intent's own arguments), not by the tool call's id",
            _ => "the retried tools/call made a second effect: to the server a plain client's retry is a new call. Key the effect by what the retry repeats (the arguments, or the run and step chaos sends as X-Run-Id and X-Step-Id), or take an idempotency key and name it in [mcp] identity",
        };
        hints.push(why.into());
        if let Some(tool) = declared_idempotent {
            hints.push(format!(
                "it declares {} idempotentHint: true, which this contradicts (annotation-contradicted): a client that trusts the hint retries it freely",
                tool.mcp_tool
            ));
        }
    }
    let Some(last) = attempts.last().and_then(Attempt::answer) else {
        return;
    };
    if let Some(why) = &last.unread {
        hints.push(format!("the last result could not be read: {why}; point [response] outcome at the field of its structuredContent (or text JSON) that names it, and map its values in [response.outcomes]"));
    } else if step.kind == Kind::FirstCall && last.outcome != Outcome::Applied {
        hints.push(format!("the first call was read as {}: if the server means done by it, point [response] outcome at the field that says so and map the value to \"applied\" in [response.outcomes]", last.outcome));
    }
}

/// The hint for a call the service refused with `status` (a 4xx) where a
/// success was due: never to read it as one.
fn refused(status: u16, read_as: Outcome, tool: &str) -> String {
    format!(
        "HTTP {status} (read as {read_as}) is the service refusing the call to '{tool}', never a success: do not map it to applied. If the service does not know or allow the suite's tool '{tool}' (`chaos list` shows the tools and arguments the suite calls), let the caller use it, or, if the service knows it by another name, map it: [request.tools] {tool} = \"<the service's name>\" (the authority then grants that name); if the refusal is final, read it as one: [status] {status} = \"rejected\" (or \"failed\" when nothing was done and a retry may succeed)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Answer, History};

    fn answered(status: u16, outcome: Outcome) -> RunOutput {
        let attempt = Attempt {
            operation: 0,
            call: 1,
            worker: 1,
            attempt: 1,
            attempt_id: "att".into(),
            tool_use_id: "tu".into(),
            decision: 1,
            key: "k".into(),
            payload_fingerprint: "p".into(),
            intent: "p".into(),
            sent_at: 0,
            ended_at: 1,
            wall_clock_ms: 0,
            end: AttemptEnd::Answered(Answer {
                status,
                outcome,
                receipt: None,
                disclosed_result: false,
                records: Vec::new(),
                reason: None,
                unread: None,
            }),
        };
        RunOutput {
            history: History {
                attempts: vec![attempt],
                ..History::default()
            },
            ledger: crate::history::Ledger::default(),
            error: None,
        }
    }

    fn live() -> Target {
        let file = crate::target_file::TargetFile::parse(
            std::path::Path::new("t/target.toml"),
            "name = \"t\"\ncommand = [\"x\"]",
        )
        .unwrap();
        Target::Live {
            file: std::sync::Arc::new(file),
            arg: "t".into(),
        }
    }

    /// Issue 26 item 8: the probe measures the slowest answer and, where
    /// the default budget (2.5 s an attempt, no retry-for) is too short for
    /// it, says which [agent] lines to write; a fast service gets none.
    #[test]
    fn a_slow_service_gets_an_agent_budget_that_fits_it() {
        let default = Timing::live();
        let fast = patience(
            Slowest {
                answer_ms: 40,
                timed_out: false,
            },
            &default,
        );
        assert_eq!(fast.len(), 1, "{fast:?}");
        assert!(
            fast[0].starts_with("slowest answer: 40ms (the agent waits 2s 500ms per attempt"),
            "{fast:?}"
        );
        let slow = patience(
            Slowest {
                answer_ms: 1_800,
                timed_out: false,
            },
            &default,
        );
        assert!(
            slow[1].contains("[agent] timeout = \"4s\" and retry-for = \"16s\""),
            "{slow:?}"
        );
        // Past the timeout: twice the timeout at least.
        let hung = patience(
            Slowest {
                answer_ms: 300,
                timed_out: true,
            },
            &default,
        );
        assert!(hung[0].contains("an attempt timed out waiting"), "{hung:?}");
        assert!(
            hung[1].contains("timeout = \"5s\" and retry-for = \"20s\""),
            "{hung:?}"
        );
        // Bounded by what the target file accepts.
        let endless = patience(
            Slowest {
                answer_ms: 90_000,
                timed_out: true,
            },
            &default,
        );
        assert!(
            endless[1].contains("timeout = \"60s\" and retry-for = \"240s\""),
            "{endless:?}"
        );
    }

    /// Issue 26 item 4: a first call refused with a 403 (a service that
    /// checks scope and does not know the suite's tool) once got the hint
    /// `[status] 403 = "applied"`, which turns every refusal into a pass.
    #[test]
    fn a_refused_call_is_never_hinted_as_a_success() {
        for (step, status) in [(&STEPS[0], 403), (&STEPS[1], 404), (&STEPS[0], 422)] {
            let mut hints = Vec::new();
            hint(
                step,
                &answered(status, Outcome::Unknown),
                &live(),
                "send_reminder",
                &mut hints,
            );
            let all = hints.join("\n");
            assert!(
                !all.contains("= \"applied\"") && !all.contains("= \"replayed\""),
                "{all}"
            );
            assert!(
                all.contains(&format!("[status] {status} = \"rejected\""))
                    && all.contains("'send_reminder'")
                    && all.contains("chaos list"),
                "{all}"
            );
        }
        // A 2xx the mapping misread still gets the line that reads it.
        let mut hints = Vec::new();
        hint(
            &STEPS[0],
            &answered(202, Outcome::Unknown),
            &live(),
            "send_reminder",
            &mut hints,
        );
        assert!(
            hints.join("\n").contains("[status] 202 = \"applied\""),
            "{hints:?}"
        );
    }

    #[test]
    fn the_steps_scenarios_parse() {
        let parse = |step: &Step, blind, tool: Option<&str>| {
            Scenario::parse(
                std::path::Path::new("probe/step.toml"),
                &step.scenario(blind, tool),
            )
            .unwrap_or_else(|error| panic!("{}: {error}", step.name))
        };
        for blind in [false, true] {
            for step in &STEPS {
                let parsed = parse(step, blind, None);
                let profile = parsed.provider.profile;
                assert_eq!(profile.as_str(), if blind { "blind" } else { "keyed" });
            }
            for step in &MCP_STEPS {
                for tool in ["send_reminder", "charge_card"] {
                    let parsed = parse(step, blind, Some(tool));
                    assert_eq!(parsed.workload.tool, tool);
                }
            }
        }
        // The re-plan step re-plans: its scenario has the fault.
        let replan = parse(&MCP_STEPS[2], false, Some("charge_card"));
        assert_eq!(replan.faults.len(), 1);
    }

    #[test]
    fn a_failure_dominates_an_unknown() {
        let step = |status| StepReport {
            name: "s",
            tool: None,
            expects: "e",
            status,
            observed: vec![],
            hints: vec![],
        };
        let report = ProbeReport {
            target: "t".into(),
            mcp: false,
            declared: vec![],
            not_probed: vec![],
            steps: vec![
                step(Status::Unknown),
                step(Status::Fail),
                step(Status::Pass),
            ],
            patience: vec![],
        };
        assert_eq!(report.status(), Status::Fail);
        let report = ProbeReport {
            target: "t".into(),
            mcp: false,
            declared: vec![],
            not_probed: vec![],
            steps: vec![step(Status::Pass), step(Status::Unknown)],
            patience: vec![],
        };
        assert_eq!(report.status(), Status::Unknown);
    }
}
