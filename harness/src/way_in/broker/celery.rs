//! `format = "celery"`: each attempt is a Celery task message, as
//! `task.apply_async(kwargs=...)` publishes it, so a stock Celery worker
//! takes it from the run's queue; and its answer is the one Celery's `rpc://`
//! result backend publishes to the message's `reply_to`.
//!
//! Celery's message protocol v2 (docs.celeryq.dev, "Message Protocol"): the
//! task's name, id and lineage are headers (`lang`, `task`, `id`, `root_id`,
//! `parent_id`, `group`, `retries`, `timelimit`, ...), the properties carry
//! `correlation_id` (the task id), `content_type` and `content_encoding`, and
//! the body is `[args, kwargs, embed]` in JSON. Each attempt is a task of its
//! own (its id is the attempt id), as a producer that calls `apply_async`
//! again after a lost confirm makes one.
//!
//! The result message is `{"task_id", "status", "result", "traceback", ...}`:
//! a task that returned (`SUCCESS`) answers with its return value, read as
//! chaos's answer body when it is one (`{"outcome": ..., "receipt": ...}`),
//! else as `applied` with the value as the receipt; a task that raised
//! (`FAILURE`) or was revoked may have charged before it stopped: `unknown`.
//! Any other state (`STARTED`, `RETRY`: the task runs again) is not the end.

use serde_json::{json, Map, Value};

use super::Message;

/// The body and the typed headers of the task message for `kwargs`.
pub(super) fn task_message(
    task: &str,
    kwargs: &Map<String, Value>,
    id: &str,
) -> (Vec<u8>, Vec<(String, Value)>) {
    let body = json!([
        [],
        kwargs,
        {"callbacks": null, "errbacks": null, "chain": null, "chord": null}
    ]);
    let kwargs_repr = Value::Object(kwargs.clone()).to_string();
    let headers = vec![
        ("lang".to_owned(), json!("py")),
        ("task".to_owned(), json!(task)),
        ("id".to_owned(), json!(id)),
        ("shadow".to_owned(), Value::Null),
        ("eta".to_owned(), Value::Null),
        ("expires".to_owned(), Value::Null),
        ("group".to_owned(), Value::Null),
        ("group_index".to_owned(), Value::Null),
        ("retries".to_owned(), json!(0)),
        ("timelimit".to_owned(), json!([null, null])),
        ("root_id".to_owned(), json!(id)),
        ("parent_id".to_owned(), Value::Null),
        ("argsrepr".to_owned(), json!("()")),
        ("kwargsrepr".to_owned(), json!(kwargs_repr)),
        ("origin".to_owned(), json!("chaos")),
        ("ignore_result".to_owned(), json!(false)),
    ];
    (serde_json::to_vec(&body).unwrap_or_default(), headers)
}

/// What a result message says, read: `None` while the task is not done
/// (a state update), else chaos's answer body.
pub(super) fn result_body(result: &[u8]) -> Option<Vec<u8>> {
    let Ok(meta) = serde_json::from_slice::<Value>(result) else {
        // Not Celery's result shape: read as it came, which says why.
        return Some(result.to_vec());
    };
    let status = meta.get("status").and_then(Value::as_str).unwrap_or("");
    let value = meta.get("result").cloned().unwrap_or(Value::Null);
    let answer = match status {
        "SUCCESS" => match value {
            Value::Object(ref object) if object.contains_key("outcome") => value,
            Value::Null => json!({"outcome": "applied"}),
            Value::String(receipt) => json!({"outcome": "applied", "receipt": receipt}),
            other => json!({"outcome": "applied", "receipt": other.to_string()}),
        },
        "FAILURE" | "REVOKED" => {
            let why = [value.get("exc_type"), value.get("exc_message")]
                .into_iter()
                .flatten()
                .map(|part| match part {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                })
                .collect::<Vec<_>>()
                .join(": ");
            json!({
                "outcome": "unknown",
                "reason": format!("the Celery task ended {status} ({why}); it may have acted before it stopped"),
            })
        }
        _ => return None,
    };
    Some(serde_json::to_vec(&answer).unwrap_or_default())
}

/// The message's body and typed headers for Celery: the body the way in
/// built (the fields, or the call's arguments) becomes the task's kwargs.
pub(super) fn wrap(task: &str, message: &mut Message) {
    let kwargs = match serde_json::from_slice::<Value>(&message.body) {
        Ok(Value::Object(kwargs)) => kwargs,
        Ok(other) => Map::from_iter([("value".to_owned(), other)]),
        Err(_) => Map::new(),
    };
    let (body, headers) = task_message(task, &kwargs, &message.correlation);
    message.body = body.into();
    message.typed_headers = headers;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Answer;
    use chaos_kit::protocol::Outcome;

    /// An answer read from a result.
    fn read(result: &str) -> Option<Answer> {
        result_body(result.as_bytes())
            .map(|body| super::super::read_answer(super::super::Published::Answered(body)))
    }

    #[test]
    fn a_task_message_is_protocol_v2() {
        let kwargs = Map::from_iter([("invoice".to_owned(), json!("inv-1"))]);
        let (body, headers) = task_message("tasks.charge", &kwargs, "att-1");
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body[0], json!([]));
        assert_eq!(body[1], json!({"invoice": "inv-1"}));
        assert_eq!(body[2]["chain"], Value::Null);
        let header = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(header("task"), Some(json!("tasks.charge")));
        assert_eq!(header("id"), Some(json!("att-1")));
        assert_eq!(header("root_id"), Some(json!("att-1")));
        assert_eq!(header("lang"), Some(json!("py")));
        assert_eq!(header("timelimit"), Some(json!([null, null])));
    }

    #[test]
    fn a_result_is_read_as_the_task_ended() {
        let answer = read(r#"{"task_id":"a","status":"SUCCESS","result":{"outcome":"replayed","receipt":"pi_1"}}"#).unwrap();
        assert_eq!(answer.outcome, Outcome::Replayed);
        assert_eq!(answer.receipt.as_deref(), Some("pi_1"));
        let answer = read(r#"{"task_id":"a","status":"SUCCESS","result":"pi_2"}"#).unwrap();
        assert_eq!(
            (answer.outcome, answer.receipt.as_deref()),
            (Outcome::Applied, Some("pi_2"))
        );
        // A task that raised may have charged first.
        let answer = read(r#"{"task_id":"a","status":"FAILURE","result":{"exc_type":"Timeout","exc_message":["read timed out"]}}"#).unwrap();
        assert_eq!(answer.outcome, Outcome::Unknown);
        assert!(answer.reason.unwrap().contains("Timeout"));
        // A state on the way is not the end.
        assert!(read(r#"{"task_id":"a","status":"STARTED","result":null}"#).is_none());
    }
}
