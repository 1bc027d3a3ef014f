//! The broker way in: the agent's tool call becomes a message published to
//! the target's queue, and the target is a consumer process (any language)
//! that performs the effect at chaos's provider and then acks. A target
//! file's `[broker]` table selects it (docs/brokers.md): RabbitMQ
//! ([`rabbitmq`]) or NATS JetStream ([`jetstream`]), a file each.
//!
//! What an attempt's answer is, honestly: the broker's publish confirm
//! (RabbitMQ's publisher confirm, JetStream's PubAck) only says the broker
//! took the message, never that the effect happened. So the agent waits for
//! the consumer's own answer on a reply queue (`reply_to` and
//! `correlation_id`, the RPC pattern every AMQP client has; JetStream: an
//! inbox named in a header), read as chaos's answer body; a consumer
//! that cannot answer (`reply = false`) leaves the agent with the confirm
//! alone, which it reads as `pending`: accepted, outcome not known.
//!
//! A RabbitMQ queue chaos creates is this run's only (its name ends with the
//! target's name and chaos's process id), is deleted when the run ends or
//! is cancelled, and carries `x-expires`: after a SIGKILL of chaos (which
//! also kills the consumer, its parent-death signal) the broker deletes it
//! itself once it has been unused that long.

mod celery;
mod jetstream;
mod rabbitmq;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use chaos_kit::http::{CallFailure, Client, Response};
use serde_json::Value;

use super::mapped::{ResponseMapping, Template, BUILT_IN};
use super::{
    CallArguments, Outgoing, Preparing, Reading, Ready, Readying, Reply, Sending, Sent, Way,
};
use crate::history::{Answer, Attempt, AttemptEnd};

/// Which broker, and how chaos reaches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BrokerKind {
    /// AMQP 0-9-1 through `lapin`.
    RabbitMq,
    /// NATS JetStream through `async-nats`.
    JetStream,
}

impl BrokerKind {
    pub(crate) const NAMES: [&'static str; 2] = ["rabbitmq", "jetstream"];

    pub(crate) fn parse(name: &str) -> Option<BrokerKind> {
        match name {
            "rabbitmq" => Some(BrokerKind::RabbitMq),
            "jetstream" => Some(BrokerKind::JetStream),
            _ => None,
        }
    }

    pub(crate) fn default_url(self) -> &'static str {
        match self {
            BrokerKind::RabbitMq => "amqp://guest:guest@127.0.0.1:5672/%2f",
            BrokerKind::JetStream => "nats://127.0.0.1:4222",
        }
    }

    /// The URL schemes its client takes.
    pub(crate) fn schemes(self) -> &'static [&'static str] {
        match self {
            BrokerKind::RabbitMq => &["amqp://"],
            BrokerKind::JetStream => &["nats://"],
        }
    }
}

/// What a message looks like on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Format {
    /// A JSON body (the fields, or the call's arguments) and string headers.
    Json,
    /// A Celery task message (protocol v2) for the task of that name, its
    /// kwargs the JSON body's fields; the answer is the `rpc://` result
    /// backend's ([`celery`]). RabbitMQ only.
    Celery { task: String },
}

impl Format {
    pub(crate) const NAMES: [&'static str; 2] = ["json", "celery"];
}

/// A target reached through a broker: the `[broker]` table, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Broker {
    pub kind: BrokerKind,
    pub url: String,
    /// The queue messages go to: this run's own when `create`.
    pub queue: String,
    /// chaos declares the queue before the consumer starts and deletes it
    /// after the run; otherwise it must already exist.
    pub create: bool,
    /// The header that carries the operation id; `None`: the message
    /// carries none (a consumer that dedups on something else, or nothing).
    pub operation_id: Option<String>,
    /// The body's fields, each a template; `None` sends the arguments.
    pub fields: Option<BTreeMap<String, Template>>,
    /// Headers of the message, each a template.
    pub headers: BTreeMap<String, Template>,
    /// Whether the consumer answers on the reply queue.
    pub reply: bool,
    /// The message's shape: JSON, or a Celery task's.
    pub format: Format,
    /// How long the broker keeps a created queue nobody uses (after a
    /// SIGKILL of chaos); JetStream: how long the stream keeps a message.
    pub expires: Duration,
    /// JetStream: the consumer's `AckWait`, after which an unacked message
    /// is delivered again (RabbitMQ's consumer timeout is the server's).
    pub ack_wait: Duration,
    /// JetStream: the stream's `duplicate_window`, inside which a message
    /// with a `Nats-Msg-Id` seen before is dropped by the broker.
    pub duplicate_window: Duration,
}

impl Broker {
    pub(super) const NAME: &'static str = "broker";
    pub(super) const DOC: &'static str =
        "a message on a queue of a real broker (RabbitMQ, NATS JetStream), taken by a consumer process: [broker] in its target file";

    /// The name of the queue (stream) a run of chaos creates for `target`:
    /// a JetStream stream's name may hold no '.'.
    pub(crate) fn run_queue(kind: BrokerKind, base: &str, target: &str) -> String {
        let pid = std::process::id();
        match kind {
            BrokerKind::RabbitMq => format!("{base}.chaos-{target}-{pid}"),
            BrokerKind::JetStream => format!("{}-chaos-{target}-{pid}", base.replace('.', "-")),
        }
    }

    /// JetStream: the subject the stream takes, its own name.
    pub(crate) fn subject(&self) -> String {
        self.queue.clone()
    }

    /// What the consumer is told, besides the `CHAOS_*` variables every
    /// target gets.
    pub(crate) fn env(&self) -> Vec<(String, String)> {
        let mut env = vec![
            (BROKER_URL.into(), self.url.clone()),
            (BROKER_QUEUE.into(), self.queue.clone()),
        ];
        if self.kind == BrokerKind::JetStream {
            env.push((BROKER_SUBJECT.into(), self.subject()));
            env.push((BROKER_CONSUMER.into(), self.queue.clone()));
        }
        env
    }

    /// The URL without its password, for messages.
    pub(crate) fn address(&self) -> String {
        redact_url(&self.url)
    }

    /// Declares the run's queue (when the file says chaos creates it) or
    /// checks that it exists; the error says how to fix the file or the
    /// broker. Called before the consumer is started.
    pub(crate) async fn prepare(&self) -> Result<(), String> {
        match self.kind {
            BrokerKind::RabbitMq => rabbitmq::prepare(self).await,
            BrokerKind::JetStream => jetstream::prepare(self).await,
        }
    }

    /// Whether a consumer is taking messages from the queue: the consumer's
    /// readiness, as `GET /healthz` is an HTTP target's.
    pub(crate) async fn consuming(&self) -> Result<(), String> {
        match self.kind {
            BrokerKind::RabbitMq => rabbitmq::consuming(self).await,
            BrokerKind::JetStream => jetstream::consuming(self).await,
        }
    }

    /// The message for one attempt: its body and headers.
    fn message(&self, outgoing: &Outgoing<'_>) -> Message {
        let values = outgoing.values;
        let arguments = values.arguments_object();
        let lookup = |name: &str| values.lookup(&arguments, name);
        let body = match &self.fields {
            None => values.arguments.clone(),
            Some(fields) => Bytes::from(
                serde_json::to_vec(&Value::Object(values.fill(fields, &arguments)))
                    .unwrap_or_default(),
            ),
        };
        let mut headers: Vec<(String, String)> = outgoing
            .identities
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect();
        headers.extend(
            outgoing
                .headers
                .iter()
                .map(|(name, value)| (name.clone(), value.clone())),
        );
        headers.extend(
            self.headers
                .iter()
                .map(|(name, template)| (name.clone(), template.render(lookup))),
        );
        if let Some(header) = &self.operation_id {
            headers.push((header.clone(), values.operation_id.to_owned()));
        }
        let mut message = Message {
            body,
            headers,
            typed_headers: Vec::new(),
            operation_id: self
                .operation_id
                .as_ref()
                .map(|_| values.operation_id.to_owned()),
            correlation: outgoing
                .identities
                .iter()
                .find(|(name, _)| *name == chaos_kit::protocol::ATTEMPT_ID)
                .map(|(_, id)| (*id).to_owned())
                .unwrap_or_default(),
        };
        if let Format::Celery { task } = &self.format {
            celery::wrap(task, &mut message);
        }
        message
    }

    /// The consumer's answer as chaos's answer body; `None` while it is
    /// not the last word (a Celery task's state on the way).
    fn answer_body(&self, answer: Vec<u8>) -> Option<Vec<u8>> {
        match self.format {
            Format::Json => Some(answer),
            Format::Celery { .. } => celery::result_body(&answer),
        }
    }
}

/// One attempt as a message.
pub(crate) struct Message {
    pub body: Bytes,
    pub headers: Vec<(String, String)>,
    /// Headers whose values are not strings (a Celery task's `retries`,
    /// `timelimit`, its nulls), sent as the AMQP types of their JSON.
    pub typed_headers: Vec<(String, Value)>,
    /// The operation id, when the message carries one: JetStream's
    /// `Nats-Msg-Id`, by which the broker drops a message it saw inside
    /// the stream's duplicate window.
    pub operation_id: Option<String>,
    /// The attempt id: what the consumer's answer names.
    pub correlation: String,
}

/// What the consumer is told: the broker's URL and the queue to consume.
pub(crate) const BROKER_URL: &str = "CHAOS_BROKER_URL";
pub(crate) const BROKER_QUEUE: &str = "CHAOS_BROKER_QUEUE";
/// JetStream: the subject to publish to and the durable consumer to bind.
pub(crate) const BROKER_SUBJECT: &str = "CHAOS_BROKER_SUBJECT";
pub(crate) const BROKER_CONSUMER: &str = "CHAOS_BROKER_CONSUMER";

/// The queues this process created and has not deleted yet, with the
/// broker each is on: deleted at the end of the run ([`delete_created`]).
static CREATED: Mutex<Vec<Broker>> = Mutex::new(Vec::new());

fn created() -> std::sync::MutexGuard<'static, Vec<Broker>> {
    CREATED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn remember_created(broker: &Broker) {
    let mut created = created();
    if !created.contains(broker) {
        created.push(broker.clone());
    }
}

/// Deletes the queues this run created (`only`'s, or every one): at the
/// end of a target's run, and on a Ctrl-C that quits at once. Blocking; a broker gone meanwhile leaves the queue to its
/// `x-expires`.
pub(crate) fn delete_created(only: Option<&Broker>) {
    let brokers: Vec<Broker> = {
        let mut created = created();
        let (these, others) = std::mem::take(&mut *created)
            .into_iter()
            .partition(|broker| only.is_none_or(|only| only == broker));
        *created = others;
        these
    };
    if brokers.is_empty() {
        return;
    }
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    runtime.block_on(async {
        for broker in brokers {
            let deleted = match broker.kind {
                BrokerKind::RabbitMq => Box::pin(rabbitmq::delete(&broker))
                    as std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>,
                BrokerKind::JetStream => Box::pin(jetstream::delete(&broker)),
            };
            // Bounded: a broker that stopped answering must not hold the exit.
            let _ = tokio::time::timeout(Duration::from_secs(5), deleted).await;
        }
    });
}

impl Way for Broker {
    /// Ready once the broker counts a consumer on the run's queue, as an
    /// HTTP target is once `GET /healthz` answers.
    fn ready<'a>(
        &'a self,
        _http: &'a Client,
        _target: &'a str,
        _timeout: Duration,
        _new_process: bool,
    ) -> Readying<'a> {
        Box::pin(async move {
            match self.consuming().await {
                Ok(()) => Ready::Yes,
                Err(last) => Ready::NotYet(last),
            }
        })
    }

    fn readiness(&self, _addr: &str) -> String {
        format!(
            "start consuming queue '{}' on {}",
            self.queue,
            self.address()
        )
    }

    fn env(&self) -> Vec<(String, String)> {
        Broker::env(self)
    }

    fn prepare(&self) -> Preparing<'_> {
        Box::pin(Broker::prepare(self))
    }

    fn take_down(&self) {
        delete_created(Some(self));
    }

    /// JetStream's `duplicate_window`, on a stream chaos creates (a stream
    /// of the user's own is never changed). RabbitMQ has none: a message
    /// published twice is two messages.
    fn duplicate_window(&self) -> Option<Duration> {
        (self.kind == BrokerKind::JetStream && self.create).then_some(self.duplicate_window)
    }

    /// The run's queue emptied of an earlier trial's messages (an agent's
    /// retries published while a slow consumer restarted are that trial's
    /// work, not this one's). A queue chaos did not create is left as it is.
    fn before_trial(&self) -> Preparing<'_> {
        Box::pin(async move {
            if !self.create {
                return Ok(());
            }
            match self.kind {
                BrokerKind::RabbitMq => rabbitmq::purge(self).await,
                BrokerKind::JetStream => jetstream::purge(self).await,
            }
        })
    }

    fn set_duplicate_window(&self, window: Duration) -> Preparing<'_> {
        Box::pin(async move {
            match self.kind {
                BrokerKind::JetStream if self.create => {
                    jetstream::set_duplicate_window(self, window).await
                }
                _ => Ok(()),
            }
        })
    }

    fn listens(&self) -> bool {
        false
    }

    fn settles(&self) -> bool {
        true
    }

    /// Bounded: a broker that stopped answering leaves the trial's own
    /// reason as it was.
    fn unsettled<'a>(&'a self, published: &'a [Sent]) -> Reading<'a> {
        Box::pin(async move {
            let read = async {
                match self.kind {
                    BrokerKind::RabbitMq => rabbitmq::unsettled(self, published).await,
                    BrokerKind::JetStream => jetstream::unsettled(self, published).await,
                }
            };
            tokio::time::timeout(Duration::from_secs(15), read)
                .await
                .ok()
                .flatten()
        })
    }

    fn admit(&self, calls: &[CallArguments], target: &str) -> Result<(), String> {
        let templates = self
            .fields
            .iter()
            .flat_map(BTreeMap::iter)
            .map(|(name, template)| (format!("[broker.fields] {name}"), template))
            .chain(
                self.headers
                    .iter()
                    .map(|(name, template)| (format!("[broker.headers] {name}"), template)),
            );
        for (place, template) in templates {
            for name in template.placeholders() {
                if BUILT_IN.contains(&name) {
                    continue;
                }
                if let Some(call) = calls
                    .iter()
                    .find(|call| !call.arguments.iter().any(|have| have == name))
                {
                    return Err(format!(
                        "target '{target}' {place} uses {{{name}}}, and call {} (operation '{}', tool '{}') has no argument '{name}': its arguments are {}. Fix the placeholder in the target file, or run a scenario whose calls have it",
                        call.call,
                        call.operation,
                        call.tool,
                        call.arguments.join(", "),
                    ));
                }
            }
        }
        Ok(())
    }

    fn send<'a>(
        &'a self,
        _http: &'a Client,
        _target: &'a str,
        outgoing: &'a Outgoing<'a>,
    ) -> Sending<'a> {
        Box::pin(async move {
            let message = self.message(outgoing);
            let published = match self.kind {
                BrokerKind::RabbitMq => rabbitmq::send(self, &message, outgoing.timeout).await,
                BrokerKind::JetStream => jetstream::send(self, &message, outgoing.timeout).await,
            }?;
            Ok(Reply {
                answer: read_answer(published),
                retry_after: None,
            })
        })
    }
}

/// What came back of one published message.
pub(crate) enum Published {
    /// The broker confirmed it, and the file expects no answer.
    Confirmed,
    /// The consumer's answer on the reply queue.
    Answered(Vec<u8>),
    /// JetStream took it as a duplicate of a message with the same
    /// `Nats-Msg-Id` inside the duplicate window: nobody will take it.
    Duplicate,
}

/// The consumer's answer read as chaos's answer body; the confirm alone is
/// `pending`: the broker has it, nobody has said what came of it.
fn read_answer(published: Published) -> Answer {
    match published {
        Published::Answered(body) => ResponseMapping::default().interpret(&Response {
            status: 200,
            headers: BTreeMap::new(),
            body: Bytes::from(body),
        }),
        Published::Confirmed => pending(
            "accepted by the broker (publish confirmed); the consumer's outcome is not read (reply = false)",
        ),
        Published::Duplicate => pending(DROPPED_AS_DUPLICATE),
    }
}

/// The reason of an attempt JetStream dropped as a duplicate.
const DROPPED_AS_DUPLICATE: &str = "dropped by the broker as a duplicate of an earlier message with the same Nats-Msg-Id, inside the stream's duplicate window: no consumer will take it";

/// Whether no consumer answered `attempt`: it timed out waiting, or the
/// broker dropped it as a duplicate of one (which nobody answered either).
pub(crate) fn unanswered(attempt: &Attempt) -> bool {
    match &attempt.end {
        AttemptEnd::Failed {
            failure: CallFailure::Timeout,
        } => true,
        AttemptEnd::Answered(answer) => answer.reason.as_deref() == Some(DROPPED_AS_DUPLICATE),
        _ => false,
    }
}

/// A message on the broker as a sentence names it: by the attempt that
/// published it (its `x-attempt-id`) and how long ago that was.
fn named(id: Option<&str>, published: &[Sent]) -> String {
    let Some(id) = id else {
        return "a message without an x-attempt-id header".into();
    };
    match published.iter().find(|sent| sent.id == id) {
        Some(sent) => format!(
            "message {id} (published {:.1}s ago)",
            sent.ago.as_secs_f64()
        ),
        None => format!("message {id}"),
    }
}

/// What the provider saw of a message the consumer rejected, as the words
/// that follow its name in the trial's reason: a consumer that charged and
/// then rejected is not one that refused the input.
fn rejected_after(id: Option<&str>, published: &[Sent]) -> &'static str {
    let acted = id
        .and_then(|id| published.iter().find(|sent| sent.id == id))
        .is_some_and(|sent| sent.acted);
    if acted {
        ", after the provider saw a call for it"
    } else {
        " without acting on it"
    }
}

/// An answer that says the broker has (or had) the message, and nothing of
/// what came of it.
fn pending(reason: &str) -> Answer {
    Answer {
        status: 200,
        outcome: chaos_kit::protocol::Outcome::Pending,
        receipt: None,
        disclosed_result: false,
        records: Vec::new(),
        reason: Some(reason.into()),
        unread: None,
    }
}

/// A broker error as the attempt's failure: a broker that refused the
/// connection never had the message; anything later may have.
fn failure(refused: bool) -> CallFailure {
    if refused {
        CallFailure::Refused
    } else {
        CallFailure::Reset
    }
}

/// `scheme://user:password@host...` with the password masked.
pub(crate) fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    match rest.split_once('@') {
        Some((user, host)) => {
            let user = user.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}:***@{host}")
        }
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::way_in::CallValues;

    fn broker() -> Broker {
        Broker {
            kind: BrokerKind::RabbitMq,
            url: BrokerKind::RabbitMq.default_url().into(),
            queue: "charges".into(),
            create: true,
            operation_id: Some("Idempotency-Key".into()),
            fields: Some(BTreeMap::from([
                ("invoice".into(), Template::parse("{invoice}").unwrap()),
                ("amount".into(), Template::parse("{amount_cents}").unwrap()),
            ])),
            headers: BTreeMap::from([("X-Tool".into(), Template::parse("{tool}").unwrap())]),
            reply: true,
            format: Format::Json,
            expires: Duration::from_secs(60),
            ack_wait: Duration::from_secs(2),
            duplicate_window: Duration::from_secs(120),
        }
    }

    #[test]
    fn a_rejected_message_says_whether_the_provider_saw_a_call_for_it() {
        let sent = |id: &str, acted| Sent {
            id: id.into(),
            ago: Duration::from_millis(1500),
            acted,
        };
        let published = [sent("att-1", false), sent("att-2", true)];
        assert_eq!(
            rejected_after(Some("att-1"), &published),
            " without acting on it"
        );
        assert_eq!(
            rejected_after(Some("att-2"), &published),
            ", after the provider saw a call for it"
        );
        // A message chaos never published, or one without the header.
        assert_eq!(
            rejected_after(Some("att-9"), &published),
            " without acting on it"
        );
        assert_eq!(rejected_after(None, &published), " without acting on it");
        assert_eq!(
            named(Some("att-1"), &published),
            "message att-1 (published 1.5s ago)"
        );
        assert_eq!(
            named(None, &published),
            "a message without an x-attempt-id header"
        );
    }

    #[test]
    fn a_message_carries_the_fields_the_operation_id_and_the_identities() {
        let arguments = Bytes::from_static(br#"{"invoice":"inv-1","amount_cents":4999}"#);
        let values = CallValues {
            tool: "charge",
            operation_id: "op-1",
            token: "t",
            arguments: &arguments,
        };
        let identities = [(chaos_kit::protocol::ATTEMPT_ID, "att-1")];
        let outgoing = Outgoing {
            values: &values,
            headers: &BTreeMap::new(),
            identities: &identities,
            timeout: Duration::from_secs(1),
        };
        let message = broker().message(&outgoing);
        let body: Value = serde_json::from_slice(&message.body).unwrap();
        // A template that is one placeholder keeps the argument's JSON type.
        assert_eq!(
            body,
            serde_json::json!({"invoice": "inv-1", "amount": 4999})
        );
        assert!(message
            .headers
            .contains(&("Idempotency-Key".into(), "op-1".into())));
        assert!(message
            .headers
            .contains(&("X-Tool".into(), "charge".into())));
        assert!(message
            .headers
            .contains(&("x-attempt-id".into(), "att-1".into())));
        assert_eq!(message.correlation, "att-1");
    }

    #[test]
    fn a_missing_argument_is_refused_before_the_run() {
        let calls = [CallArguments {
            call: 1,
            operation: "reminder".into(),
            tool: "charge".into(),
            arguments: vec!["invoice".into()],
        }];
        let message = broker().admit(&calls, "t").unwrap_err();
        assert!(
            message.contains("[broker.fields] amount uses {amount_cents}"),
            "{message}"
        );
    }

    #[test]
    fn the_confirm_alone_is_pending_and_an_answer_is_read_as_the_protocol_s() {
        assert_eq!(
            read_answer(Published::Confirmed).outcome,
            chaos_kit::protocol::Outcome::Pending
        );
        let answer = read_answer(Published::Answered(
            br#"{"outcome":"applied","receipt":"ch_1"}"#.to_vec(),
        ));
        assert_eq!(answer.outcome, chaos_kit::protocol::Outcome::Applied);
        assert_eq!(answer.receipt.as_deref(), Some("ch_1"));
    }

    #[test]
    fn a_url_s_password_is_masked() {
        assert_eq!(
            redact_url("amqp://guest:guest@127.0.0.1:5672/%2f"),
            "amqp://guest:***@127.0.0.1:5672/%2f"
        );
        assert_eq!(redact_url("nats://127.0.0.1:4222"), "nats://127.0.0.1:4222");
    }
}
