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
    BasicConsumeOptions, BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions,
    QueueDeleteOptions, QueuePurgeOptions,
};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::Confirmation;
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};

use super::{failure, remember_created, Broker, Format, Message, Published};
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
    arguments
}

pub(super) async fn prepare(broker: &Broker) -> Result<(), String> {
    let connection = connect(broker).await?;
    let channel = connection
        .create_channel()
        .await
        .map_err(|error| format!("RabbitMQ at {}: {error}", broker.address()))?;
    let declared = if broker.create {
        channel
            .queue_declare(
                broker.queue.as_str().into(),
                QueueDeclareOptions {
                    durable: true,
                    ..QueueDeclareOptions::default()
                },
                created_arguments(broker),
            )
            .await
            .map_err(|error| {
                format!(
                    "RabbitMQ at {} refused to create queue '{}': {error}",
                    broker.address(),
                    broker.queue
                )
            })
    } else {
        passive(&channel, broker).await
    };
    let _ = connection.close(200, "chaos: prepared".into()).await;
    declared?;
    if broker.create {
        remember_created(broker);
    }
    Ok(())
}

/// The queue as it is, without creating it.
async fn passive(channel: &Channel, broker: &Broker) -> Result<lapin::Queue, String> {
    channel
        .queue_declare(
            broker.queue.as_str().into(),
            QueueDeclareOptions {
                passive: true,
                ..QueueDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .map_err(|error| {
            format!(
                "queue '{}' does not exist on RabbitMQ at {} ({error}); create it, or set create = true in [broker] to have chaos create one for each run (`rabbitmqctl list_queues` lists those that exist)",
                broker.queue,
                broker.address()
            )
        })
}

pub(super) async fn consuming(broker: &Broker) -> Result<(), String> {
    let connection = connect(broker).await?;
    let channel = connection
        .create_channel()
        .await
        .map_err(|error| error.to_string())?;
    let queue = passive(&channel, broker).await;
    let _ = connection.close(200, "chaos: probed".into()).await;
    match queue?.consumer_count() {
        0 => Err(format!("no consumer on queue '{}' yet", broker.queue)),
        _ => Ok(()),
    }
}

/// Empties the run's queue, when it exists yet, of the messages no consumer
/// holds: an earlier trial's, before the next trial's consumer starts.
pub(super) async fn purge(broker: &Broker) -> Result<(), String> {
    let connection = connect(broker).await?;
    let purged = match connection.create_channel().await {
        Ok(channel) => match passive(&channel, broker).await {
            // Not made yet: the run's first trial.
            Err(_) => Ok(()),
            Ok(_) => channel
                .queue_purge(broker.queue.as_str().into(), QueuePurgeOptions::default())
                .await
                .map(drop),
        },
        Err(error) => Err(error),
    };
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
    }
    let _ = connection.close(200, "chaos: run over".into()).await;
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
            BasicPublishOptions::default(),
            &message.body,
            properties.with_headers(headers),
        )
        .await
        .map_err(|_| failure(true))?;
    match confirm.await {
        Ok(Confirmation::Ack(_) | Confirmation::NotRequested) => {}
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
