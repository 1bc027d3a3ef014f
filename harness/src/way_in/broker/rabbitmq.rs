//! RabbitMQ (AMQP 0-9-1) through `lapin`: the queue declared a quorum
//! queue with `x-expires`, each attempt published persistent on a confirmed channel
//! with `reply_to` set to an exclusive queue of the attempt's own
//! connection, and the consumer's answer read from it.
//!
//! A connection per attempt: attempts are few, a local connection takes a
//! few milliseconds, and an attempt's reply queue then dies with it, so a
//! late answer can never be read as the next attempt's.

use std::time::Duration;

use futures_util::StreamExt;
use lapin::options::{
    BasicConsumeOptions, BasicGetOptions, BasicPublishOptions, ConfirmSelectOptions,
    QueueDeclareOptions, QueueDeleteOptions, QueuePurgeOptions,
};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::Confirmation;
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};

use super::{
    failure, named, rejected_after, remember_created, Broker, Format, Message, Published, Sent,
};
use chaos_kit::http::CallFailure;

/// How long chaos waits to connect before it calls the broker down.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

async fn connect(broker: &Broker) -> Result<Connection, String> {
    let connecting = Connection::connect(&broker.url, ConnectionProperties::default());
    match tokio::time::timeout(CONNECT_TIMEOUT, connecting).await {
        Ok(Ok(connection)) => Ok(connection),
        Ok(Err(error)) => Err(format!(
            "RabbitMQ at {} could not be reached: {error}; start it (e.g. `rabbitmq-server -detached`) or fix [broker] url",
            broker.address()
        )),
        Err(_) => Err(format!(
            "RabbitMQ at {} did not answer within {}s; start it or fix [broker] url",
            broker.address(),
            CONNECT_TIMEOUT.as_secs()
        )),
    }
}

/// The arguments of a queue chaos creates: a quorum queue, which counts a
/// message's deliveries (`x-delivery-count`, the broker's own view of a
/// redelivery, which a consumer can pass on); gone by itself once unused
/// for `expires` (no consumer, no redeclare), so a SIGKILLed run leaves
/// nothing. A Celery worker's queue is a classic one, as Celery declares its
/// own by default: a worker that sees a quorum queue sets up its native
/// delayed delivery on the broker (28 queues and their exchanges), which
/// nobody would delete after the run.
fn created_arguments(broker: &Broker) -> FieldTable {
    let mut arguments = FieldTable::default();
    if broker.format == Format::Json {
        arguments.insert(
            "x-queue-type".into(),
            AMQPValue::LongString("quorum".into()),
        );
    }
    arguments.insert(
        "x-expires".into(),
        AMQPValue::LongLongInt(broker.expires.as_millis() as i64),
    );
    // A message the consumer rejects (`basic.reject`/`basic.nack` without
    // requeue) goes to the run's rejected queue, where chaos reads it.
    arguments.insert(
        "x-dead-letter-exchange".into(),
        AMQPValue::LongString("".into()),
    );
    arguments.insert(
        "x-dead-letter-routing-key".into(),
        AMQPValue::LongString(rejected_queue(broker).as_str().into()),
    );
    arguments
}

/// The queue of chaos's own that a created queue dead-letters into: its
/// name the run queue's, marked, so it also ends with chaos's process id.
fn rejected_queue(broker: &Broker) -> String {
    broker.queue.replacen(".chaos-", ".chaos-rejected-", 1)
}

/// The rejected queue's arguments: gone by itself once unused, as the run
/// queue is.
fn rejected_arguments(broker: &Broker) -> FieldTable {
    let mut arguments = FieldTable::default();
    arguments.insert(
        "x-expires".into(),
        AMQPValue::LongLongInt(broker.expires.as_millis() as i64),
    );
    arguments
}

pub(super) async fn prepare(broker: &Broker) -> Result<(), String> {
    let connection = connect(broker).await?;
    let channel = connection
        .create_channel()
        .await
        .map_err(|error| format!("RabbitMQ at {}: {error}", broker.address()));
    let declared = match channel {
        Ok(channel) if broker.create => declare(&channel, broker).await,
        Ok(channel) => passive(&channel, broker).await.map(drop),
        Err(error) => Err(error),
    };
    let _ = connection.close(200, "chaos: prepared".into()).await;
    declared?;
    if broker.create {
        remember_created(broker);
    }
    Ok(())
}

/// Declares the run's queue and its rejected queue with chaos's arguments:
/// made when missing, left as they are when there (a declare with the same
/// arguments changes nothing).
async fn declare(channel: &Channel, broker: &Broker) -> Result<(), String> {
    for (queue, arguments) in [
        (rejected_queue(broker), rejected_arguments(broker)),
        (broker.queue.clone(), created_arguments(broker)),
    ] {
        channel
            .queue_declare(
                queue.as_str().into(),
                QueueDeclareOptions {
                    durable: true,
                    ..QueueDeclareOptions::default()
                },
                arguments,
            )
            .await
            .map_err(|error| {
                format!(
                    "RabbitMQ at {} refused to create queue '{queue}': {error}",
                    broker.address(),
                )
            })?;
    }
    Ok(())
}

/// The queue as it is, without creating it.
async fn passive(channel: &Channel, broker: &Broker) -> Result<lapin::Queue, String> {
    look_up(channel, &broker.queue).await.map_err(|error| {
            format!(
                "queue '{}' does not exist on RabbitMQ at {} ({error}); create it, or set create = true in [broker] to have chaos create one for each run (`rabbitmqctl list_queues`, run where the broker is, lists those that exist: AMQP 0-9-1 has no method that lists queues)",
                broker.queue,
                broker.address()
            )
        })
}

/// The queue `name` as the broker has it (its message and consumer
/// counts), with a passive declare: it neither makes the queue nor renews
/// its lease.
async fn look_up(channel: &Channel, name: &str) -> Result<lapin::Queue, lapin::Error> {
    channel
        .queue_declare(
            name.into(),
            QueueDeclareOptions {
                passive: true,
                ..QueueDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
}

/// Whether a consumer is on the run's queue yet. On queues chaos created,
/// the wait also keeps them: `x-expires` counts a queue with no consumer as
/// unused, and of what a client can do only a `basic.get` renews a quorum
/// queue's lease (a passive or repeated declare, a purge, a publish do not),
/// so a consumer slower to start than `expires` would find the run's queue
/// gone, and the rejected queue, which nobody consumes, lapses `expires`
/// after its last renewal (each trial's purge declares both again, too).
/// The `get` is made only on a queue that held no message a
/// moment before: a message taken and put back would count as a delivery.
/// A queue that lapsed anyway (a restarted consumer slower than `expires`,
/// with a redelivered message waiting) is declared again, and the wait says
/// so.
pub(super) async fn consuming(broker: &Broker) -> Result<(), String> {
    let connection = connect(broker).await?;
    let checked = async {
        let channel = connection
            .create_channel()
            .await
            .map_err(|error| error.to_string())?;
        let queue = match passive(&channel, broker).await {
            Ok(queue) => queue,
            Err(missing) if !broker.create => return Err(missing),
            Err(_) => return Err(declare_again(&connection, broker).await),
        };
        if broker.create {
            if queue.message_count() == 0 {
                renew(&channel, &broker.queue).await;
            }
            renew_rejected(&connection, broker).await?;
        }
        if queue.consumer_count() > 0 {
            return Ok(());
        }
        Err(format!("no consumer on queue '{}' yet", broker.queue))
    };
    let checked = checked.await;
    let _ = connection.close(200, "chaos: probed".into()).await;
    checked
}

/// Declares chaos's queues again after one of them lapsed, and says why the
/// wait goes on.
async fn declare_again(connection: &Connection, broker: &Broker) -> String {
    // A failed passive declare closed the channel it was made on.
    let declared = match connection.create_channel().await {
        Ok(channel) => declare(&channel, broker).await,
        Err(error) => Err(error.to_string()),
    };
    match declared {
        Ok(()) => format!(
            "a queue of the run's went unused for its x-expires ({}s) and the broker deleted it; chaos declared it again (raise `expires` in [broker] if the consumer is slower to start)",
            broker.expires.as_secs_f64()
        ),
        Err(error) => error,
    }
}

/// The rejected queue's lease renewed while it is empty; declared again if
/// it lapsed.
async fn renew_rejected(connection: &Connection, broker: &Broker) -> Result<(), String> {
    let channel = connection
        .create_channel()
        .await
        .map_err(|error| error.to_string())?;
    let rejected = rejected_queue(broker);
    match look_up(&channel, &rejected).await {
        Ok(queue) if queue.message_count() == 0 => {
            renew(&channel, &rejected).await;
            Ok(())
        }
        Ok(_) => Ok(()),
        Err(_) => Err(declare_again(connection, broker).await),
    }
}

/// Renews an empty queue's `x-expires` lease with a `basic.get`, which
/// finds nothing. A message that came in between (nobody publishes while
/// chaos waits for a consumer) is put back unacked when the channel closes.
async fn renew(channel: &Channel, queue: &str) {
    let _ = channel
        .basic_get(queue.into(), BasicGetOptions { no_ack: false })
        .await;
}

/// Empties the run's queue of the messages no consumer holds: an earlier
/// trial's, before the next trial's consumer starts. The queue is declared
/// first, so one whose lease lapsed between trials is there again.
pub(super) async fn purge(broker: &Broker) -> Result<(), String> {
    let connection = connect(broker).await?;
    let purged = async {
        let channel = connection
            .create_channel()
            .await
            .map_err(|error| error.to_string())?;
        declare(&channel, broker).await?;
        // What the consumer rejected in an earlier trial, too.
        for queue in [broker.queue.clone(), rejected_queue(broker)] {
            channel
                .queue_purge(queue.as_str().into(), QueuePurgeOptions::default())
                .await
                .map_err(|error| error.to_string())?;
        }
        Ok::<(), String>(())
    };
    let purged = purged.await;
    let _ = connection.close(200, "chaos: purged".into()).await;
    purged.map_err(|error| {
        format!(
            "RabbitMQ at {} refused to purge queue '{}' before a trial: {error}",
            broker.address(),
            broker.queue
        )
    })
}

pub(super) async fn delete(broker: &Broker) {
    let Ok(connection) = connect(broker).await else {
        return;
    };
    if let Ok(channel) = connection.create_channel().await {
        let _ = channel
            .queue_delete(broker.queue.as_str().into(), QueueDeleteOptions::default())
            .await;
        let _ = channel
            .queue_delete(
                rejected_queue(broker).as_str().into(),
                QueueDeleteOptions::default(),
            )
            .await;
    }
    let _ = connection.close(200, "chaos: run over".into()).await;
}

/// What the run's queue still holds of a trial the consumer never answered,
/// read over AMQP once the consumer was stopped. AMQP 0-9-1 cannot show a
/// message another connection holds unacked (only the management plugin's
/// HTTP API can, and it is not enabled on a stock broker): but a message
/// delivered and never acked is put back by the broker when its consumer's
/// connection closes, marked redelivered (a quorum queue also counts its
/// deliveries in `x-delivery-count`). So chaos waits for the broker to count
/// no consumer, takes each ready message with `basic.get` and reads those
/// marks, then closes its channel unacked, which puts them back again.
///
/// A message the consumer rejected is read first, from the run's rejected
/// queue (dead-lettered there, with the broker's `x-death` record).
pub(super) async fn unsettled(broker: &Broker, published: &[Sent]) -> Option<String> {
    let connection = connect(broker).await.ok()?;
    let rejected = if broker.create {
        read_rejected(&connection, broker, published).await
    } else {
        None
    };
    let read = match rejected {
        Some(rejected) => Some(rejected),
        None => read_unsettled(&connection, broker, published).await,
    };
    let _ = connection.close(200, "chaos: read".into()).await;
    read
}

/// The messages the consumer rejected, as the broker dead-lettered them:
/// each named by the attempt that published it, its delivery (RabbitMQ
/// counts the earlier ones in `x-delivery-count`), the `x-death` reason,
/// and whether the provider saw a call made for it.
async fn read_rejected(
    connection: &Connection,
    broker: &Broker,
    published: &[Sent],
) -> Option<String> {
    let channel = connection.create_channel().await.ok()?;
    let queue = rejected_queue(broker);
    let mut rejected = Vec::new();
    // Bounded: a trial publishes as many messages as its attempts.
    for _ in 0..50 {
        let Ok(Some(got)) = channel
            .basic_get(queue.as_str().into(), BasicGetOptions { no_ack: false })
            .await
        else {
            break;
        };
        let headers = got.delivery.properties.headers().as_ref();
        let header = |name: &str| headers.and_then(|headers| headers.inner().get(name));
        let id = header("x-attempt-id")
            .or_else(|| header("id"))
            .and_then(text);
        let delivery = header("x-delivery-count")
            .and_then(integer)
            .map_or(1, |earlier| earlier + 1);
        let death = match header("x-death") {
            Some(AMQPValue::FieldArray(deaths)) => {
                deaths.as_slice().first().and_then(|death| match death {
                    AMQPValue::FieldTable(death) => death.inner().get("reason").and_then(text),
                    _ => None,
                })
            }
            _ => None,
        };
        let name = match &id {
            Some(id) => format!("message {id}"),
            None => "a message without an x-attempt-id header".to_owned(),
        };
        rejected.push(format!(
            "{name} (delivery {delivery}){}: RabbitMQ dead-lettered it (x-death reason '{}') to queue '{queue}'",
            rejected_after(id.as_deref(), published),
            death.as_deref().unwrap_or("unknown"),
        ));
    }
    if rejected.is_empty() {
        return None;
    }
    Some(format!("the consumer rejected {}", rejected.join("; ")))
}

async fn read_unsettled(
    connection: &Connection,
    broker: &Broker,
    published: &[Sent],
) -> Option<String> {
    let channel = connection.create_channel().await.ok()?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let ready = loop {
        let queue = passive(&channel, broker).await.ok()?;
        if queue.consumer_count() == 0 {
            break queue.message_count();
        }
        // Another consumer (of a queue chaos did not create) still holds
        // what it took: nothing can be read of it over AMQP.
        if tokio::time::Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut held = Vec::new();
    let mut never_taken = 0;
    // Bounded: a trial publishes as many messages as its attempts.
    for _ in 0..ready.min(50) {
        let got = channel
            .basic_get(
                broker.queue.as_str().into(),
                BasicGetOptions { no_ack: false },
            )
            .await
            .ok()??;
        let delivery = &got.delivery;
        let headers = delivery.properties.headers().as_ref();
        let header = |name: &str| headers.and_then(|headers| headers.inner().get(name));
        let id = header("x-attempt-id")
            .and_then(text)
            .or_else(|| {
                // A Celery task message names its task (the attempt) in `id`.
                header("id").and_then(text)
            })
            .or_else(|| {
                (delivery.properties.correlation_id().as_ref()).map(|id| id.as_str().to_owned())
            });
        if !delivery.redelivered {
            never_taken += 1;
            continue;
        }
        let deliveries = match header("x-delivery-count").and_then(integer) {
            Some(count) => format!("delivered {count} time(s) and never acked"),
            // A classic queue says only that it was delivered before.
            None => "delivered and never acked".to_owned(),
        };
        held.push(format!("{} {deliveries}", named(id.as_deref(), published)));
    }
    if held.is_empty() {
        return None;
    }
    let untaken = match never_taken {
        0 => String::new(),
        count => format!("; {count} more of its messages were never taken"),
    };
    Some(format!(
        "{} still unacked on RabbitMQ: {}, the broker put it back in queue '{}' when the consumer stopped{untaken} (read over AMQP: a passive queue.declare and basic.get)",
        if held.len() == 1 { "a message is" } else { "messages are" },
        held.join("; "),
        broker.queue,
    ))
}

/// A header's text.
fn text(value: &AMQPValue) -> Option<String> {
    match value {
        AMQPValue::LongString(text) => Some(String::from_utf8_lossy(text.as_bytes()).into_owned()),
        AMQPValue::ShortString(text) => Some(text.as_str().to_owned()),
        _ => None,
    }
}

/// A header's integer, however wide the broker sent it.
fn integer(value: &AMQPValue) -> Option<i64> {
    match *value {
        AMQPValue::ShortShortInt(n) => Some(n.into()),
        AMQPValue::ShortShortUInt(n) => Some(n.into()),
        AMQPValue::ShortInt(n) => Some(n.into()),
        AMQPValue::ShortUInt(n) => Some(n.into()),
        AMQPValue::LongInt(n) => Some(n.into()),
        AMQPValue::LongUInt(n) => Some(n.into()),
        AMQPValue::LongLongInt(n) => Some(n),
        _ => None,
    }
}

pub(super) async fn send(
    broker: &Broker,
    message: &Message,
    timeout: Duration,
) -> Result<Published, CallFailure> {
    let deadline = tokio::time::Instant::now() + timeout;
    let connection = tokio::time::timeout_at(
        deadline,
        Connection::connect(&broker.url, ConnectionProperties::default()),
    )
    .await
    .map_err(|_| CallFailure::Timeout)?
    .map_err(|_| failure(true))?;
    let published = tokio::time::timeout_at(deadline, publish(&connection, broker, message))
        .await
        .unwrap_or(Err(CallFailure::Timeout));
    let _ = connection.close(200, "chaos: attempt over".into()).await;
    published
}

async fn publish(
    connection: &Connection,
    broker: &Broker,
    message: &Message,
) -> Result<Published, CallFailure> {
    let channel = connection
        .create_channel()
        .await
        .map_err(|_| failure(true))?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .map_err(|_| failure(true))?;
    let mut replies = None;
    let mut properties = BasicProperties::default()
        .with_delivery_mode(2)
        .with_content_type("application/json".into())
        .with_content_encoding("utf-8".into())
        .with_correlation_id(message.correlation.as_str().into())
        .with_message_id(message.correlation.as_str().into());
    if broker.reply {
        // Exclusive, server-named: deleted with this connection.
        let queue = channel
            .queue_declare(
                ShortString::from(""),
                QueueDeclareOptions {
                    exclusive: true,
                    auto_delete: true,
                    ..QueueDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .map_err(|_| failure(true))?;
        let consumer = channel
            .basic_consume(
                queue.name().clone(),
                ShortString::from(""),
                BasicConsumeOptions {
                    no_ack: true,
                    ..BasicConsumeOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .map_err(|_| failure(true))?;
        properties = properties.with_reply_to(queue.name().clone());
        replies = Some(consumer);
    }
    let mut headers = FieldTable::default();
    for (name, value) in &message.headers {
        headers.insert(
            name.as_str().into(),
            AMQPValue::LongString(value.as_str().into()),
        );
    }
    for (name, value) in &message.typed_headers {
        headers.insert(name.as_str().into(), amqp_value(value));
    }
    let confirm = channel
        .basic_publish(
            ShortString::from(""),
            broker.queue.as_str().into(),
            // Mandatory: a message no queue takes (the run's queue gone)
            // comes back instead of being dropped under a confirm.
            BasicPublishOptions {
                mandatory: true,
                ..BasicPublishOptions::default()
            },
            &message.body,
            properties.with_headers(headers),
        )
        .await
        .map_err(|_| failure(true))?;
    match confirm.await {
        // Returned unroutable: no queue had it, nothing was delivered.
        Ok(Confirmation::Ack(Some(_))) => return Err(failure(true)),
        Ok(Confirmation::Ack(None) | Confirmation::NotRequested) => {}
        // The broker said it did not take it: nothing was delivered.
        Ok(Confirmation::Nack(_)) => return Err(failure(true)),
        Err(_) => return Err(failure(false)),
    }
    let Some(mut replies) = replies else {
        return Ok(Published::Confirmed);
    };
    while let Some(delivery) = replies.next().await {
        let Ok(delivery) = delivery else {
            return Err(failure(false));
        };
        // Only this attempt's answer: a consumer answering an older
        // delivery of another attempt to this queue cannot, the queue is
        // this attempt's; the check guards a consumer that echoes wrong.
        let ours = delivery
            .properties
            .correlation_id()
            .as_ref()
            .is_none_or(|id| id.as_str() == message.correlation);
        if !ours {
            continue;
        }
        if let Some(body) = broker.answer_body(delivery.data) {
            return Ok(Published::Answered(body));
        }
    }
    Err(failure(false))
}

/// A JSON value as the AMQP field value a client library would send for it
/// (a Celery task's headers: nulls, integers, a list).
fn amqp_value(value: &serde_json::Value) -> AMQPValue {
    use serde_json::Value;
    match value {
        Value::Null => AMQPValue::Void,
        Value::Bool(flag) => AMQPValue::Boolean(*flag),
        Value::Number(number) => match number.as_i64() {
            Some(integer) => AMQPValue::LongLongInt(integer),
            None => AMQPValue::Double(number.as_f64().unwrap_or_default()),
        },
        Value::String(text) => AMQPValue::LongString(text.as_str().into()),
        Value::Array(items) => {
            AMQPValue::FieldArray(items.iter().map(amqp_value).collect::<Vec<_>>().into())
        }
        Value::Object(fields) => {
            let mut table = FieldTable::default();
            for (name, value) in fields {
                table.insert(name.as_str().into(), amqp_value(value));
            }
            AMQPValue::FieldTable(table)
        }
    }
}
