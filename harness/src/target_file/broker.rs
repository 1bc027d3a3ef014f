//! `[broker]`: a target that is a consumer on a real broker's queue
//! (docs/brokers.md). The agent's calls are published there; the answer is
//! the consumer's, on the reply queue.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::input::{Errors, FileError};
use crate::way_in::broker::{Broker, BrokerKind, Format};
use crate::way_in::mapped::Template;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct BrokerFile {
    kind: String,
    #[serde(default)]
    url: Option<String>,
    queue: String,
    #[serde(default = "yes")]
    create: bool,
    #[serde(default)]
    operation_id: Option<String>,
    #[serde(default = "yes")]
    reply: bool,
    #[serde(default)]
    format: Option<String>,
    #[serde(default)]
    task: Option<String>,
    #[serde(default, with = "humantime_serde")]
    expires: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    ack_wait: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    duplicate_window: Option<Duration>,
    #[serde(default)]
    fields: Option<BTreeMap<String, String>>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

fn yes() -> bool {
    true
}

/// Long enough to outlast a trial's pauses (a consumer restarting), short
/// enough that a SIGKILLed run's queue is gone within a minute.
const EXPIRES: Duration = Duration::from_secs(60);
/// JetStream's consumer: an unacked message is delivered again this long
/// after it was handed out. Shortened from JetStream's 30 s default as a
/// retention is shortened live: a consumer killed before its ack is
/// redelivered within the agent's patience.
const ACK_WAIT: Duration = Duration::from_secs(2);
/// JetStream's own default `duplicate_window`.
const DUPLICATE_WINDOW: Duration = Duration::from_secs(120);

fn template(what: &str, text: &str) -> Result<Template, String> {
    Template::parse(text).map_err(|why| format!("{what}: {why}"))
}

fn is_task_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 200
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b"_.:".contains(&byte))
}

fn is_queue_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 200
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b"-_.:".contains(&byte))
}

impl BrokerFile {
    fn validate(self, target: &str) -> Result<Broker, String> {
        let Some(kind) = BrokerKind::parse(&self.kind) else {
            return Err(format!(
                "broker.kind '{}' is not a broker chaos drives. Choose from: {}",
                self.kind,
                BrokerKind::NAMES.join(", ")
            ));
        };
        if !is_queue_name(&self.queue) {
            return Err(format!(
                "broker.queue '{}' must be a name of letters, digits, '-', '_', '.' or ':', e.g. queue = \"charges\"",
                self.queue
            ));
        }
        let url = self.url.unwrap_or_else(|| kind.default_url().to_owned());
        if !kind.schemes().iter().any(|scheme| url.starts_with(scheme)) {
            return Err(format!(
                "broker.url '{}' must be a {} URL for kind = \"{}\", e.g. \"{}\" (the default)",
                crate::way_in::broker::redact_url(&url),
                kind.schemes().join(" or "),
                self.kind,
                kind.default_url()
            ));
        }
        let jetstream_only = |key: &str, set: bool| {
            if set && kind != BrokerKind::JetStream {
                Err(format!("broker.{key} is JetStream's; RabbitMQ's consumer timeout is the server's own (consumer_timeout), and it has no duplicate window: leave it out"))
            } else {
                Ok(())
            }
        };
        jetstream_only("ack-wait", self.ack_wait.is_some())?;
        jetstream_only("duplicate-window", self.duplicate_window.is_some())?;
        let ack_wait = self.ack_wait.unwrap_or(ACK_WAIT);
        if ack_wait < Duration::from_millis(100) {
            return Err("broker.ack-wait must be at least 100ms: a consumer needs that long to ack what it took".into());
        }
        let duplicate_window = self.duplicate_window.unwrap_or(DUPLICATE_WINDOW);
        if duplicate_window < Duration::from_millis(100) {
            return Err(
                "broker.duplicate-window must be at least 100ms (JetStream's floor)".into(),
            );
        }
        let format = match (self.format.as_deref().unwrap_or("json"), self.task) {
            ("json", None) => Format::Json,
            ("json", Some(_)) => {
                return Err("broker.task names a Celery task: set format = \"celery\" too, or leave task out".into())
            }
            ("celery", _) if kind != BrokerKind::RabbitMq => {
                return Err("broker.format = \"celery\" is a Celery task message over AMQP: use it with kind = \"rabbitmq\"".into())
            }
            ("celery", Some(task)) if is_task_name(&task) => Format::Celery { task },
            ("celery", Some(task)) => {
                return Err(format!("broker.task '{task}' must be a Celery task's registered name, letters, digits, '_', '.' and ':', e.g. task = \"tasks.charge\""))
            }
            ("celery", None) => {
                return Err("broker.format = \"celery\" needs task = the Celery task's registered name, e.g. task = \"tasks.charge\"".into())
            }
            (other, _) => {
                return Err(format!(
                    "broker.format '{other}' is not a message format chaos sends. Choose from: {}",
                    Format::NAMES.join(", ")
                ))
            }
        };
        let operation_id = match self.operation_id {
            None => Some("Idempotency-Key".to_owned()),
            Some(header) if header.is_empty() => None,
            Some(header) => Some(super::request::header_name("broker.operation-id", &header)?),
        };
        let expires = self.expires.unwrap_or(EXPIRES);
        if expires < Duration::from_secs(1) {
            return Err("broker.expires must be at least 1s: the broker deletes an unused queue after it, and a consumer restarting leaves it unused a moment".into());
        }
        let fields = match self.fields {
            Some(fields) => Some(
                fields
                    .iter()
                    .map(|(name, text)| {
                        Ok((
                            name.clone(),
                            template(&format!("broker.fields.{name}"), text)?,
                        ))
                    })
                    .collect::<Result<BTreeMap<_, _>, String>>()?,
            ),
            None => None,
        };
        let mut headers = BTreeMap::new();
        for (name, text) in &self.headers {
            let name = super::request::header_name("broker.headers", name)?;
            headers.insert(
                name.clone(),
                template(&format!("broker.headers.{name}"), text)?,
            );
        }
        let queue = if self.create {
            Broker::run_queue(kind, &self.queue, target)
        } else {
            self.queue
        };
        Ok(Broker {
            kind,
            url,
            queue,
            create: self.create,
            operation_id,
            fields,
            headers,
            reply: self.reply,
            format,
            expires,
            ack_wait,
            duplicate_window,
        })
    }
}

pub(super) fn validate(
    table: Option<Spanned<BrokerFile>>,
    target: &str,
    errors: &Errors<'_>,
) -> Result<Option<Broker>, FileError> {
    let Some(broker) = table else {
        return Ok(None);
    };
    let span = broker.span();
    broker
        .into_inner()
        .validate(target)
        .map(Some)
        .map_err(|message| errors.at(span, message))
}
