//! NATS JetStream through `async-nats`: a stream and a durable pull
//! consumer chaos creates for the run (the consumer's `AckWait` shortened,
//! the stream's `duplicate_window` as the file says), each attempt
//! published with `Nats-Msg-Id` and its PubAck awaited, and the consumer's
//! answer read from a core NATS inbox named in the message's `Reply-To`
//! header (a JetStream message's own reply subject is its ack).
//!
//! JetStream has no stream that expires by itself: a run SIGKILLed before
//! it deleted its stream leaves it behind, and the next run that prepares a
//! JetStream target deletes every stream of chaos's whose process is gone
//! (the name ends with that process's id).

use std::time::Duration;

use async_nats::jetstream::{self, consumer, stream};
use async_nats::HeaderMap;
use chaos_kit::http::CallFailure;
use futures_util::StreamExt;

use super::{failure, named, rejected_after, remember_created, Broker, Message, Published, Sent};

/// How often the consumer chaos creates delivers a message before JetStream
/// gives up on it.
const MAX_DELIVER: i64 = 10;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The header that names the inbox the consumer answers on, and the one
/// its answer carries back (the attempt id).
pub(crate) const REPLY_TO: &str = "Reply-To";
pub(crate) const CORRELATION_ID: &str = "Correlation-Id";

async fn connect(broker: &Broker) -> Result<async_nats::Client, String> {
    async_nats::ConnectOptions::new()
        .connection_timeout(CONNECT_TIMEOUT)
        .connect(broker.url.as_str())
        .await
        .map_err(|error| {
            format!(
                "NATS at {} could not be reached: {error}; start it with JetStream (e.g. `nats-server -js`) or fix [broker] url",
                broker.address()
            )
        })
}

/// A stream chaos left behind in a run that was SIGKILLed: its name ends
/// with the id of a process that is no more.
fn orphaned(name: &str) -> bool {
    let Some((_, pid)) = name.rsplit_once("-chaos-").and_then(|(base, rest)| {
        rest.rsplit_once('-')
            .map(|(_, pid)| (base, pid.parse::<i32>().ok()))
    }) else {
        return false;
    };
    match pid {
        Some(pid) if pid as u32 != std::process::id() => {
            !std::path::Path::new(&format!("/proc/{pid}")).exists()
        }
        _ => false,
    }
}

pub(super) async fn prepare(broker: &Broker) -> Result<(), String> {
    let client = connect(broker).await?;
    let js = jetstream::new(client);
    if broker.create {
        let mut names = js.stream_names();
        let mut orphans = Vec::new();
        while let Some(Ok(name)) = names.next().await {
            if orphaned(&name) {
                orphans.push(name);
            }
        }
        for name in orphans {
            let _ = js.delete_stream(&name).await;
        }
        let stream = js
            .get_or_create_stream(stream::Config {
                name: broker.queue.clone(),
                subjects: vec![broker.subject()],
                duplicate_window: broker.duplicate_window,
                // JetStream refuses a window longer than the messages live.
                max_age: broker.expires.max(broker.duplicate_window),
                ..stream::Config::default()
            })
            .await
            .map_err(|error| {
                format!(
                    "NATS at {} refused to create stream '{}': {error} (is JetStream enabled? `nats-server -js`)",
                    broker.address(),
                    broker.queue
                )
            })?;
        remember_created(broker);
        // JetStream announces a message the consumer terminated (`term`:
        // rejected, never to be delivered again) only as an advisory on
        // core NATS: a stream of chaos's own keeps them for the trial's end.
        js.get_or_create_stream(stream::Config {
            name: terminated_stream(broker),
            subjects: vec![terminated_subject(broker)],
            max_age: broker.expires,
            ..stream::Config::default()
        })
        .await
        .map_err(|error| {
            format!(
                "NATS at {} refused to create stream '{}': {error}",
                broker.address(),
                terminated_stream(broker)
            )
        })?;
        stream
            .get_or_create_consumer(
                &broker.queue,
                consumer::pull::Config {
                    durable_name: Some(broker.queue.clone()),
                    ack_wait: broker.ack_wait,
                    // Bounded: a consumer that never acks does not take the
                    // message for ever.
                    max_deliver: MAX_DELIVER,
                    ..consumer::pull::Config::default()
                },
            )
            .await
            .map_err(|error| {
                format!(
                    "NATS at {} refused to create consumer '{}': {error}",
                    broker.address(),
                    broker.queue
                )
            })?;
        return Ok(());
    }
    match js.get_stream(&broker.queue).await {
        Ok(_) => Ok(()),
        Err(error) => {
            let mut names = js.stream_names();
            let mut existing = Vec::new();
            while let Some(Ok(name)) = names.next().await {
                existing.push(name);
            }
            Err(format!(
                "stream '{}' does not exist on NATS at {} ({error}); the streams there are: {}. Create it, or set create = true in [broker] to have chaos create one for each run",
                broker.queue,
                broker.address(),
                if existing.is_empty() { "none".to_owned() } else { existing.join(", ") }
            ))
        }
    }
}

/// The stream that keeps the run consumer's terminated-message advisories:
/// named so that it too ends with chaos's process id.
fn terminated_stream(broker: &Broker) -> String {
    format!("terminated-{}", broker.queue)
}

/// The advisory JetStream publishes when the run's consumer terminates a
/// message (nats-server's `JSAdvisoryConsumerMsgTerminatedPre`).
fn terminated_subject(broker: &Broker) -> String {
    format!(
        "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.{}.{}",
        broker.queue, broker.queue
    )
}

pub(super) async fn consuming(broker: &Broker) -> Result<(), String> {
    let client = connect(broker).await?;
    let js = jetstream::new(client);
    let stream = js
        .get_stream(&broker.queue)
        .await
        .map_err(|error| format!("stream '{}': {error}", broker.queue))?;
    let info = stream
        .consumer_info(&broker.queue)
        .await
        .map_err(|error| format!("consumer '{}': {error}", broker.queue))?;
    // A pull consumer takes messages by asking for them: one waiting pull
    // request is a consumer ready to take the next message.
    if info.num_waiting > 0 {
        Ok(())
    } else {
        Err(format!(
            "no pull request on consumer '{}' of stream '{}' yet",
            broker.queue, broker.queue
        ))
    }
}

/// Empties the run's stream, when it exists yet, of an earlier trial's
/// messages (and so of their redeliveries), before the next trial's
/// consumer starts.
pub(super) async fn purge(broker: &Broker) -> Result<(), String> {
    let client = connect(broker).await?;
    let js = jetstream::new(client);
    let Ok(stream) = js.get_stream(&broker.queue).await else {
        // Not made yet: the run's first trial.
        return Ok(());
    };
    // The advisories of an earlier trial's terminated messages, too.
    if let Ok(advisories) = js.get_stream(terminated_stream(broker)).await {
        let _ = advisories.purge().await;
    }
    stream.purge().await.map(drop).map_err(|error| {
        format!(
            "NATS at {} refused to purge stream '{}' before a trial: {error}",
            broker.address(),
            broker.queue
        )
    })
}

/// Sets the run's stream's `duplicate_window` for the next trial: the
/// declared one, or the one a clock jump is waited past, shortened as a
/// retention is (live/schedule.rs). Messages are kept at least as long.
pub(super) async fn set_duplicate_window(broker: &Broker, window: Duration) -> Result<(), String> {
    let client = connect(broker).await?;
    let js = jetstream::new(client);
    let refused = |error: &dyn std::fmt::Display| {
        format!(
            "NATS at {} refused to set the duplicate window of stream '{}' to {}: {error}",
            broker.address(),
            broker.queue,
            humantime::format_duration(window)
        )
    };
    let mut stream = js
        .get_stream(&broker.queue)
        .await
        .map_err(|error| refused(&error))?;
    let mut config = stream
        .info()
        .await
        .map_err(|error| refused(&error))?
        .config
        .clone();
    if config.duplicate_window == window {
        return Ok(());
    }
    config.duplicate_window = window;
    config.max_age = config.max_age.max(window);
    js.update_stream(config)
        .await
        .map(drop)
        .map_err(|error| refused(&error))
}

/// What the run's consumer still has delivered and not acked, from
/// JetStream's consumer info: `num_ack_pending` (delivered, not acked),
/// `num_redelivered` (of those, delivered more than once), and the stream
/// sequences past its ack floor, each message read from the stream for the
/// attempt that published it. A message that reached `max_deliver` is no
/// longer pending but stays past the floor: JetStream gave up on it.
///
/// A message the consumer terminated is read first, from the advisories
/// JetStream published (kept by the run's advisory stream).
pub(super) async fn unsettled(broker: &Broker, published: &[Sent]) -> Option<String> {
    let client = connect(broker).await.ok()?;
    let js = jetstream::new(client);
    let stream = js.get_stream(&broker.queue).await.ok()?;
    if let Some(terminated) = terminated(&js, &stream, broker, published).await {
        return Some(terminated);
    }
    let info = stream.consumer_info(&broker.queue).await.ok()?;
    let floor = info.ack_floor.stream_sequence;
    let last = info.delivered.stream_sequence;
    let mut messages = Vec::new();
    // Bounded: a trial publishes as many messages as its attempts.
    for sequence in (floor + 1..=last).take(50) {
        // Gone: purged with an earlier trial, or acked out of order.
        let Ok(message) = stream.get_raw_message(sequence).await else {
            continue;
        };
        let id = message
            .headers
            .get("x-attempt-id")
            .map(|id| id.as_str().to_owned());
        messages.push(format!(
            "{} at stream sequence {sequence}",
            named(id.as_deref(), published)
        ));
    }
    if messages.is_empty() {
        return None;
    }
    let consumer = format!("consumer '{}' of stream '{}'", broker.queue, broker.queue);
    let counts = format!(
        "num_ack_pending {}, num_redelivered {}",
        info.num_ack_pending, info.num_redelivered
    );
    let messages = messages.join(", ");
    if info.num_ack_pending == 0 {
        return Some(format!(
            "{messages} was never acked on JetStream: {consumer} delivered it {MAX_DELIVER} times (max_deliver) and gave up on it ({counts}, ack floor at stream sequence {floor})"
        ));
    }
    let again = if info.num_redelivered > 0 {
        "more than once"
    } else {
        "once"
    };
    Some(format!(
        "{messages} is still unacked on JetStream: {consumer} delivered it {again} ({counts}) and delivers it again each AckWait ({}), up to {MAX_DELIVER} deliveries",
        humantime::format_duration(broker.ack_wait)
    ))
}

/// The messages the run's consumer terminated, from JetStream's advisories:
/// each its stream sequence and delivery count, named by the attempt that
/// published it, and whether the provider saw a call made for it.
async fn terminated(
    js: &jetstream::Context,
    stream: &stream::Stream,
    broker: &Broker,
    published: &[Sent],
) -> Option<String> {
    let mut advisories = js.get_stream(terminated_stream(broker)).await.ok()?;
    let last = advisories.info().await.ok()?.state.last_sequence;
    let mut rejected = Vec::new();
    // Bounded: a trial publishes as many messages as its attempts.
    for sequence in last.saturating_sub(49).max(1)..=last {
        let Ok(advisory) = advisories.get_raw_message(sequence).await else {
            continue;
        };
        let Ok(advisory) = serde_json::from_slice::<serde_json::Value>(&advisory.payload) else {
            continue;
        };
        let Some(stream_seq) = advisory
            .get("stream_seq")
            .and_then(serde_json::Value::as_u64)
        else {
            continue;
        };
        let deliveries = advisory
            .get("deliveries")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(1);
        let id = match stream.get_raw_message(stream_seq).await {
            Ok(message) => message
                .headers
                .get("x-attempt-id")
                .map(|id| id.as_str().to_owned()),
            Err(_) => None,
        };
        let name = match &id {
            Some(id) => format!("message {id}"),
            None => format!("the message at stream sequence {stream_seq}"),
        };
        rejected.push(format!(
            "{name} (delivery {deliveries}){}: JetStream announced it terminated (stream sequence {stream_seq}, $JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED)",
            rejected_after(id.as_deref(), published),
        ));
    }
    if rejected.is_empty() {
        return None;
    }
    Some(format!("the consumer rejected {}", rejected.join("; ")))
}

pub(super) async fn delete(broker: &Broker) {
    let Ok(client) = connect(broker).await else {
        return;
    };
    let js = jetstream::new(client);
    let _ = js.delete_stream(&broker.queue).await;
    let _ = js.delete_stream(terminated_stream(broker)).await;
}

pub(super) async fn send(
    broker: &Broker,
    message: &Message,
    timeout: Duration,
) -> Result<Published, CallFailure> {
    let deadline = tokio::time::Instant::now() + timeout;
    let client = tokio::time::timeout_at(
        deadline,
        async_nats::ConnectOptions::new()
            .connection_timeout(timeout)
            .connect(broker.url.as_str()),
    )
    .await
    .map_err(|_| CallFailure::Timeout)?
    .map_err(|_| failure(true))?;
    tokio::time::timeout_at(deadline, publish(&client, broker, message))
        .await
        .unwrap_or(Err(CallFailure::Timeout))
}

async fn publish(
    client: &async_nats::Client,
    broker: &Broker,
    message: &Message,
) -> Result<Published, CallFailure> {
    let mut headers = HeaderMap::new();
    for (name, value) in &message.headers {
        headers.insert(name.as_str(), value.as_str());
    }
    if let Some(id) = &message.operation_id {
        headers.insert("Nats-Msg-Id", id.as_str());
    }
    headers.insert(CORRELATION_ID, message.correlation.as_str());
    let mut replies = None;
    if broker.reply {
        let inbox = client.new_inbox();
        replies = Some(
            client
                .subscribe(inbox.clone())
                .await
                .map_err(|_| failure(true))?,
        );
        headers.insert(REPLY_TO, inbox.as_str());
    }
    let js = jetstream::new(client.clone());
    let ack = js
        .publish_with_headers(broker.subject(), headers, message.body.clone())
        .await
        .map_err(|_| failure(true))?
        .await
        .map_err(|_| failure(false))?;
    if ack.duplicate {
        return Ok(Published::Duplicate);
    }
    let Some(mut replies) = replies else {
        return Ok(Published::Confirmed);
    };
    while let Some(reply) = replies.next().await {
        let ours = reply
            .headers
            .as_ref()
            .and_then(|headers| headers.get(CORRELATION_ID))
            .is_none_or(|id| id.as_str() == message.correlation);
        if ours {
            return Ok(Published::Answered(reply.payload.to_vec()));
        }
    }
    Err(failure(false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_stream_of_a_process_that_is_gone_is_orphaned() {
        assert!(!orphaned("charges"));
        assert!(!orphaned(&format!(
            "charges-chaos-t-{}",
            std::process::id()
        )));
        // Past the kernel's pid range: no such process.
        assert!(orphaned("charges-chaos-t-999999999"));
    }
}
