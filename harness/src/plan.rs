//! Stage 2: the plan. A scenario, a target and a seed become a [`Trial`]: every
//! operation key, subject, payload byte and timeout the run will use, decided
//! before anything runs.

use std::collections::BTreeSet;
use std::time::Duration;

use bytes::Bytes;
use chaos_kit::canonical::{intent_fingerprint, payload_fingerprint};
use chaos_kit::protocol::Outcome;

use crate::provider_api::Sent;
use crate::scenario::{
    Arguments, Identity, PayloadVariant, Scenario, TestKind, Workload, DEFAULT_TENANT,
};
use crate::way_in::CallArguments;

/// Who the agent acts as. The target learns tenant and actor from the
/// authority, never from these constants or the arguments.
pub(crate) const ACTOR: &str = "agent-7";
/// Tools granted to the agent's token besides the scenario's own.
pub(crate) const BASE_SCOPE: &str = "read_invoice";

/// Timeouts and latencies of one transport. The simulator's are short because
/// every simulated millisecond is a step of work; live ones are real time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    pub tick: Duration,
    pub min_latency: Duration,
    pub max_latency: Duration,
    /// Suggested to the target for each of its upstream calls.
    pub upstream_timeout: Duration,
    /// How long the agent waits for one attempt's answer.
    pub agent_timeout: Duration,
    /// How long a "held" answer is held: well past the receiver's timeout.
    pub hold: Duration,
    /// Agent pause between attempts, drawn uniformly from this range.
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    /// How long a worker keeps retrying a call whose answer is not final
    /// past its `attempts` (a target file's `[agent] retry-for`); none: the
    /// attempts alone bound it.
    pub retry_for: Option<Duration>,
}

impl Timing {
    pub(crate) fn simulated(scenario: &Scenario) -> Timing {
        let upstream_timeout = Duration::from_millis(10);
        // The target's worst case is an authority call plus one upstream timeout
        // plus a reconcile; the agent must outlast it, or it would call honest
        // slowness a lost answer.
        let agent_timeout = upstream_timeout * 4 + scenario.network.max_latency * 8;
        Timing {
            tick: Duration::from_millis(1),
            min_latency: scenario.network.min_latency,
            max_latency: scenario.network.max_latency,
            upstream_timeout,
            agent_timeout,
            hold: agent_timeout + upstream_timeout,
            backoff_min: Duration::from_millis(2),
            backoff_max: Duration::from_millis(5),
            retry_for: None,
        }
    }

    /// Real-time timeouts for a live run: long enough that an honest target on
    /// a busy 2-core machine (a Python interpreter, a PostgreSQL round trip)
    /// answers well inside them, short enough that the six tests take seconds.
    /// Latencies are whatever loopback gives; a scenario's `[network]` applies
    /// to the simulator only.
    pub(crate) fn live() -> Timing {
        let upstream_timeout = Duration::from_millis(500);
        // As in the simulator: an authority call, an upstream timeout and a
        // reconcile must fit inside one agent attempt, with room to spare.
        let agent_timeout = upstream_timeout * 5;
        Timing {
            tick: Duration::from_millis(1),
            min_latency: Duration::ZERO,
            max_latency: Duration::ZERO,
            upstream_timeout,
            agent_timeout,
            hold: agent_timeout + upstream_timeout,
            backoff_min: Duration::from_millis(20),
            backoff_max: Duration::from_millis(60),
            retry_for: None,
        }
    }

    /// [`Timing::live`] with a target file's `[agent]` budget in force. A
    /// longer attempt timeout leaves the upstream timeout alone: the target's
    /// own patience is its own.
    pub(crate) fn live_with(budget: &AgentBudget) -> Timing {
        let live = Timing::live();
        let agent_timeout = budget.timeout.unwrap_or(live.agent_timeout);
        let (backoff_min, backoff_max) = budget
            .backoff
            .unwrap_or((live.backoff_min, live.backoff_max));
        Timing {
            agent_timeout,
            hold: agent_timeout + live.upstream_timeout,
            backoff_min,
            backoff_max,
            retry_for: budget.retry_for,
            ..live
        }
    }
}

/// A target file's `[agent]`: how long, and how patiently, the live agent
/// retries a call whose answer is not final. Left out, the transport's
/// defaults ([`Timing::live`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AgentBudget {
    /// How long a worker keeps retrying past the call's `attempts`.
    pub retry_for: Option<Duration>,
    /// The pause between attempts, drawn from this range.
    pub backoff: Option<(Duration, Duration)>,
    /// How long the agent waits for one attempt's answer.
    pub timeout: Option<Duration>,
}

/// One logical operation of the workload: one intent of the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    pub name: String,
    /// The caller's tenant, as the authority tells the target.
    pub tenant: String,
    /// The caller's bearer token: one per tenant.
    pub token: String,
    /// The Idempotency-Key the agent sends when the orchestrator holds it.
    pub key: String,
    /// The planned step of the run it is (`X-Step-Id`): the same on every
    /// attempt and every re-plan of it.
    pub step_id: String,
    /// The value of the subject field; how the provider attributes effects.
    pub subject: String,
    /// The payload of the operation's first call: what was approved.
    pub approved: Payload,
    /// Its arguments as a re-plan re-words them, when the workload has a
    /// free-text field to re-word.
    pub drifted: Option<Payload>,
}

/// The arguments of a tool call, with what they are judged by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payload {
    pub bytes: Bytes,
    /// Of the canonical JSON: two payloads that mean the same bytes-wise.
    pub fingerprint: String,
    /// Of the intent: the same action, however the model worded it
    /// (`chaos_kit::canonical::intent`).
    pub intent: String,
}

/// One call step, with its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedCall {
    /// 1-based, as `after-call` counts.
    pub number: u32,
    pub operation: usize,
    /// The tool it calls (`POST /tools/{tool}`).
    pub tool: String,
    pub variant: PayloadVariant,
    pub payload: Payload,
    pub attempts: u32,
    pub concurrency: u32,
    pub subagents: u32,
    pub identity: Identity,
    pub expect: Option<BTreeSet<Outcome>>,
}

/// Everything one run needs: one scenario, one seed, one target's worth of data.
#[derive(Debug, Clone)]
pub struct Trial<'a> {
    pub scenario: &'a Scenario,
    pub seed: u64,
    pub timing: Timing,
    /// The agent run (`X-Run-Id`).
    pub run_id: String,
    pub operations: Vec<Operation>,
    pub calls: Vec<PlannedCall>,
    /// Each tenant's caller token, in order of first use.
    pub tokens: Vec<(String, String)>,
    /// What makes this trial's identities fresh (live), appended to each.
    suffix: String,
}

impl<'a> Trial<'a> {
    pub(crate) fn new(scenario: &'a Scenario, seed: u64, timing: Timing) -> Trial<'a> {
        Trial::in_namespace(scenario, seed, timing, None)
    }

    /// A trial whose keys, subjects and token also carry `namespace`. Live
    /// targets keep state across runs (a database): a rerun of the same seed
    /// must not find the previous run's records, so each live trial gets fresh
    /// identities, while the seed still decides every timing.
    pub(crate) fn in_namespace(
        scenario: &'a Scenario,
        seed: u64,
        timing: Timing,
        namespace: Option<&str>,
    ) -> Trial<'a> {
        let suffix = namespace.map_or_else(String::new, |namespace| format!("-{namespace}"));
        let workload = &scenario.workload;
        let token_of = |tenant: &str| {
            if tenant == DEFAULT_TENANT {
                format!("tok-{seed:x}{suffix}")
            } else {
                format!("tok-{tenant}-{seed:x}{suffix}")
            }
        };
        let operations: Vec<Operation> = scenario
            .operations
            .iter()
            .map(|setup| {
                let name = setup.name.as_str();
                let first_call = scenario.calls.iter().find(|call| call.operation == name);
                // The lab's records are the fixture's own ids: the provider
                // serves their owners, and the model's arguments name them.
                let fixture_arguments = first_call.and_then(|call| call.arguments.as_ref());
                let subject = match fixture_arguments {
                    // A posture call's action is named by its operation.
                    Some(_) if scenario.test == TestKind::Posture => name.to_owned(),
                    Some(arguments) => arguments
                        .invoice
                        .clone()
                        .unwrap_or_else(|| bulk_subject(name)),
                    None => format!("inv-{}-{seed:x}{suffix}", setup.subject),
                };
                let first_variant = scenario
                    .calls
                    .iter()
                    .find(|call| call.operation == name)
                    .map(|call| call.payload)
                    .unwrap_or(PayloadVariant::Original);
                let of = |variant| match fixture_arguments {
                    Some(arguments) => Payload::of_arguments(scenario, arguments, name),
                    None => Payload::of(workload, &setup.subject, &subject, variant),
                };
                let drifted = workload
                    .free_text_field
                    .is_some()
                    .then(|| of(PayloadVariant::Drifted));
                Operation {
                    name: name.to_owned(),
                    tenant: setup.tenant.clone(),
                    token: token_of(&setup.tenant),
                    key: format!("op-{}-{seed:x}{suffix}", setup.key),
                    step_id: format!("step-{name}"),
                    approved: of(first_variant),
                    drifted,
                    subject,
                }
            })
            .collect();
        let mut tokens: Vec<(String, String)> = Vec::new();
        for operation in &operations {
            if !tokens.iter().any(|(tenant, _)| *tenant == operation.tenant) {
                tokens.push((operation.tenant.clone(), operation.token.clone()));
            }
        }

        let calls = scenario
            .calls
            .iter()
            .enumerate()
            .map(|(index, call)| {
                let operation = operations
                    .iter()
                    .position(|op| op.name == call.operation)
                    .expect("every call's operation was collected above");
                let payload = match &call.arguments {
                    Some(arguments) => Payload::of_arguments(scenario, arguments, &call.operation),
                    None => Payload::of(
                        workload,
                        &scenario.setup(&call.operation).subject,
                        &operations[operation].subject,
                        call.payload,
                    ),
                };
                PlannedCall {
                    number: index as u32 + 1,
                    operation,
                    tool: call.tool(workload).to_owned(),
                    variant: call.payload,
                    payload,
                    attempts: call.attempts,
                    concurrency: call.concurrency,
                    subagents: call.subagents,
                    identity: call.identity,
                    expect: call.expect.clone(),
                }
            })
            .collect();

        Trial {
            scenario,
            seed,
            timing,
            run_id: format!("run-{seed:x}{suffix}"),
            operations,
            calls,
            tokens,
            suffix,
        }
    }

    /// The scope granted to the agent's token: the fixture's, in the lab.
    pub fn scope(&self) -> String {
        match &self.scenario.fixture {
            Some(fixture) => fixture.scope.join(" "),
            None => format!("{BASE_SCOPE} {}", self.scenario.workload.tool),
        }
    }

    /// Who the agent's token belongs to, and in which tenant, as the
    /// authority tells it: the fixture's caller in the lab.
    pub(crate) fn caller(&self, tenant: &str) -> (String, String) {
        match &self.scenario.fixture {
            Some(fixture) => (fixture.actor.clone(), fixture.tenant.clone()),
            None => (ACTOR.to_owned(), tenant.to_owned()),
        }
    }

    /// The operation a subject value belongs to.
    pub fn operation_of_subject(&self, subject: &str) -> Option<usize> {
        self.operations.iter().position(|op| op.subject == subject)
    }

    /// What the trial sends, for a provider API that must attribute what
    /// reaches it by its content (a mail message): every operation's
    /// subject, and every payload it may send for each, approved and
    /// drifted first, then each call's.
    pub(crate) fn sent(&self) -> Sent {
        let workload = &self.scenario.workload;
        let planned = self.operations.iter().flat_map(|operation| {
            std::iter::once(&operation.approved)
                .chain(operation.drifted.as_ref())
                .map(move |payload| (operation, payload))
        });
        let called = self
            .calls
            .iter()
            .map(|call| (&self.operations[call.operation], &call.payload));
        Sent {
            tool: workload.tool.clone(),
            subject_field: workload.subject_field.clone(),
            free_text_field: workload.free_text_field.clone(),
            subjects: self
                .operations
                .iter()
                .map(|operation| operation.subject.clone())
                .collect(),
            payloads: planned
                .chain(called)
                .map(|(operation, payload)| (operation.subject.clone(), payload.bytes.clone()))
                .collect(),
        }
    }

    /// The argument names each payload of each call carries (its own, and
    /// its operation's drifted one), for a way in that fills templates from
    /// them.
    pub(crate) fn call_arguments(&self) -> Vec<CallArguments> {
        let names = |payload: &Payload| -> Vec<String> {
            match serde_json::from_slice::<serde_json::Value>(&payload.bytes) {
                Ok(serde_json::Value::Object(map)) => map.keys().cloned().collect(),
                _ => Vec::new(),
            }
        };
        self.calls
            .iter()
            .flat_map(|call| {
                let operation = &self.operations[call.operation];
                std::iter::once(&call.payload)
                    .chain(operation.drifted.as_ref())
                    .map(move |payload| CallArguments {
                        call: call.number,
                        operation: operation.name.clone(),
                        tool: call.tool.clone(),
                        arguments: names(payload),
                    })
            })
            .collect()
    }

    /// What this trial's identities carry to keep them fresh (live).
    pub(crate) fn suffix(&self) -> &str {
        &self.suffix
    }
}

/// The attempt id of one transport attempt: unique within the run, and across
/// runs with different seeds.
pub(crate) fn attempt_id(seed: u64, call: u32, worker: u32, attempt: u32) -> String {
    format!("att-{seed:x}-{call}-{worker}-{attempt}")
}

/// The W3C trace id of an agent run (a conversation): one trace per run, so
/// a target's own spans and the ones `--otlp` exports meet in it. A
/// conversation holds several distinct actions, so a trace id is never an
/// operation's identity: a layer keyed on it merges them.
pub(crate) fn trace_id(run_id: &str) -> [u8; 16] {
    let fingerprint = chaos_kit::canonical::fingerprint(run_id);
    let mut id = [0u8; 16];
    // The fingerprint's 12 bytes, right-aligned: the id the header has
    // always carried (`{fingerprint:0>32}`).
    for (at, pair) in fingerprint.as_bytes().chunks(2).enumerate() {
        let hex = std::str::from_utf8(pair).unwrap_or("00");
        id[4 + at] = u8::from_str_radix(hex, 16).unwrap_or(0);
    }
    id
}

/// The span id of one attempt: its `traceparent`'s parent id, which a
/// target's server span names as its parent. Call, worker and attempt each
/// have their bits (16, 16, 24), so concurrent workers' attempts differ and
/// the top byte stays 0 (the other spans of an exported trace have theirs
/// there, `report::otlp`); a call number is at least 1, so the id is never
/// the invalid zero.
pub(crate) fn attempt_span_id(call: u32, worker: u32, attempt: u32) -> u64 {
    (u64::from(call & 0xffff) << 40)
        | (u64::from(worker & 0xffff) << 24)
        | u64::from(attempt & 0xff_ffff)
}

/// The `traceparent` header of an attempt (W3C Trace Context, sampled).
pub(crate) fn traceparent(run_id: &str, call: u32, worker: u32, attempt: u32) -> String {
    let trace: String = trace_id(run_id)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    let span = attempt_span_id(call, worker, attempt);
    format!("00-{trace}-{span:016x}-01")
}

/// The model's id for tool call `decision` of call `call`: 1 for the step as
/// first decided, 2 and on for each time it was decided again (a re-plan,
/// another subagent, a second approval).
pub(crate) fn tool_use_id(seed: u64, call: u32, decision: u32, suffix: &str) -> String {
    format!("tu-{seed:x}-{call}-{decision}{suffix}")
}

/// The subject of a lab call on no one record (an export): named in its
/// body under the subject field, so an allowed export's effect is its own.
fn bulk_subject(operation: &str) -> String {
    format!("all-invoices-{operation}")
}

/// The key a tool call mints for itself when nobody holds the step's: the
/// model's tool-use id, as frameworks that key on it do.
pub(crate) fn own_key(tool_use_id: &str) -> String {
    format!("key-{tool_use_id}")
}

impl Payload {
    /// The model's arguments as the call's body; a posture call's also
    /// name its action (`operation`), and a lab call on no one record (an
    /// export) its own subject, by which the provider attributes the effect.
    pub(crate) fn of_arguments(
        scenario: &Scenario,
        arguments: &Arguments,
        operation: &str,
    ) -> Payload {
        let workload = &scenario.workload;
        let json = match (scenario.test, &arguments.invoice) {
            (TestKind::Posture, _) => arguments.to_json_naming(&workload.subject_field, operation),
            (TestKind::Authorization, None) => {
                arguments.to_json_naming(&workload.subject_field, &bulk_subject(operation))
            }
            _ => arguments.to_json(),
        };
        Payload::fingerprinted(workload, Bytes::from(json))
    }

    /// The arguments of the operation on subject `label` in `variant`, with
    /// their fingerprints.
    pub(crate) fn of(
        workload: &Workload,
        label: &str,
        subject: &str,
        variant: PayloadVariant,
    ) -> Payload {
        Payload::fingerprinted(workload, payload(workload, label, subject, variant))
    }

    /// JSON the harness wrote, with its fingerprints by bytes and by intent.
    fn fingerprinted(workload: &Workload, bytes: Bytes) -> Payload {
        let value: serde_json::Value =
            serde_json::from_slice(&bytes).expect("the harness writes JSON");
        let free_text: Vec<&str> = workload.free_text_field.as_deref().into_iter().collect();
        Payload {
            fingerprint: payload_fingerprint(&bytes),
            intent: intent_fingerprint(&value, &free_text),
            bytes,
        }
    }
}

/// The JSON arguments of an operation on the subject labelled `label`
/// (operations that share a subject share their arguments: two reminders for
/// one invoice read the same). `Equivalent` is the original with keys in
/// another order and other whitespace: byte-different, meaning-equal.
/// `Drifted` is the same intent re-worded, as a re-planning model writes it.
pub(crate) fn payload(
    workload: &Workload,
    label: &str,
    subject: &str,
    variant: PayloadVariant,
) -> Bytes {
    let subject_json = serde_json::to_string(subject).expect("strings serialise");
    let field = serde_json::to_string(&workload.subject_field).expect("strings serialise");
    let recipient = match variant {
        PayloadVariant::Changed => format!("\"collections@{label}.example\""),
        _ => format!("\"billing@{label}.example\""),
    };
    let message = match variant {
        PayloadVariant::ChangedBody => format!(
            "\"Invoice {subject} is overdue. Final notice: it goes to collection in 3 days.\""
        ),
        _ => format!("\"Invoice {subject} is overdue.\""),
    };
    let amount = match variant {
        PayloadVariant::Drifted => "4999.0",
        _ => "4999",
    };
    // The free-text field, when the workload has one, comes last.
    let free_text = match &workload.free_text_field {
        Some(name) => {
            let name = serde_json::to_string(name).expect("strings serialise");
            let text = match variant {
                PayloadVariant::Drifted => format!("Re: invoice {subject}, 1st notice"),
                _ => format!("First notice for invoice {subject}"),
            };
            let text = serde_json::to_string(&text).expect("strings serialise");
            format!(",{name}:{text}")
        }
        None => String::new(),
    };
    let text = match variant {
        PayloadVariant::Original
        | PayloadVariant::Changed
        | PayloadVariant::ChangedBody
        | PayloadVariant::Drifted => format!(
            "{{{field}:{subject_json},\"recipient\":{recipient},\"amount_cents\":{amount},\"message\":{message}{free_text}}}"
        ),
        PayloadVariant::Equivalent => format!(
            "{{\n  \"message\" : {message},\n  \"amount_cents\" : {amount},\n  \"recipient\" : {recipient},\n  {field} : {subject_json}{free_text}\n}}"
        ),
    };
    Bytes::from(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(free_text_field: Option<&str>) -> Workload {
        Workload {
            tool: "send_reminder".into(),
            subject_field: "invoice".into(),
            free_text_field: free_text_field.map(str::to_owned),
            policy: crate::scenario::Policy::Coalesce,
        }
    }

    #[test]
    fn a_drifted_payload_is_the_same_intent_in_other_words() {
        let workload = workload(Some("note"));
        let original = Payload::of(&workload, "a", "inv-a", PayloadVariant::Original);
        let drifted = Payload::of(&workload, "a", "inv-a", PayloadVariant::Drifted);
        let changed = Payload::of(&workload, "a", "inv-a", PayloadVariant::Changed);
        assert_ne!(original.fingerprint, drifted.fingerprint);
        assert_eq!(original.intent, drifted.intent);
        assert_ne!(original.intent, changed.intent);
        let text = String::from_utf8_lossy(&drifted.bytes);
        assert!(text.contains("\"amount_cents\":4999.0"), "{text}");
        assert!(
            text.contains("\"note\":\"Re: invoice inv-a, 1st notice\""),
            "{text}"
        );
    }

    #[test]
    fn without_a_free_text_field_the_payload_is_as_it_always_was() {
        let bytes = payload(&workload(None), "a", "inv-a", PayloadVariant::Original);
        assert_eq!(
            &bytes[..],
            br#"{"invoice":"inv-a","recipient":"billing@a.example","amount_cents":4999,"message":"Invoice inv-a is overdue."}"#
        );
        let plain = Payload::of(&workload(None), "a", "inv-a", PayloadVariant::Original);
        assert_eq!(plain.fingerprint, plain.intent);
    }

    #[test]
    fn equivalent_payloads_share_the_fingerprint_and_changed_ones_do_not() {
        let workload = workload(None);
        let original = payload(&workload, "a", "inv-a", PayloadVariant::Original);
        let equivalent = payload(&workload, "a", "inv-a", PayloadVariant::Equivalent);
        let changed = payload(&workload, "a", "inv-a", PayloadVariant::Changed);
        assert_ne!(original, equivalent);
        assert_eq!(
            payload_fingerprint(&original),
            payload_fingerprint(&equivalent)
        );
        assert_ne!(
            payload_fingerprint(&original),
            payload_fingerprint(&changed)
        );
    }

    #[test]
    fn a_namespace_makes_identities_fresh_and_leaves_the_seed_alone() {
        let scenario = crate::scenario::Scenario::parse(
            std::path::Path::new("s.toml"),
            "test = \"lost-response\"\ndescription = \"d\"\n[provider]\nprofile = \"keyed\"\n[[call]]\noperation = \"a\"\n",
        )
        .unwrap();
        let plain = Trial::new(&scenario, 7, Timing::live());
        let fresh = Trial::in_namespace(&scenario, 7, Timing::live(), Some("x1"));
        assert_eq!(plain.operations[0].key, "op-a-7");
        assert_eq!(fresh.operations[0].key, "op-a-7-x1");
        assert_eq!(fresh.operations[0].subject, "inv-a-7-x1");
        assert_eq!(fresh.tokens[0].1, "tok-7-x1");
        assert_eq!(plain.seed, fresh.seed);
    }

    #[test]
    fn payloads_are_json_with_the_subject() {
        let bytes = payload(&workload(None), "a", "inv-a-1", PayloadVariant::Equivalent);
        let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(value["invoice"], "inv-a-1");
    }
}
