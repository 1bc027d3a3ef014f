//! Streamable HTTP resumption (MCP 2025-11-25, "Resumability and
//! Redelivery"): a server may give the events of a POST's SSE stream ids;
//! a client whose stream closed before it read the result reconnects with
//! `GET` and `Last-Event-ID`, the id of the last event it read, and a
//! server that kept the stream replays what followed, the result included.
//!
//! chaos reads every answer whole, so the cut is placed where it hurts: right
//! before the event carrying the `tools/call`'s response (the server acted,
//! the client has everything but the result). The resume point is the id
//! of the last event before it; none means the server offered no
//! resumption, and the answer is lost as over plain HTTP.

use std::time::Duration;

use chaos_kit::http::{Client, Request, Response};
use serde_json::Value;

use super::{lock, per_trial, read_message, Mcp, Read};
use crate::history::{Answer, Resumed};

/// How long the resuming `GET` may take: a server that kept the stream
/// replays what it holds at once; one that keeps the `GET` open with
/// nothing to send has nothing for this call.
const RESUME_TIMEOUT: Duration = Duration::from_secs(2);

/// Where a client whose stream was cut before the response to request
/// `id` would resume: the id of the last event it read before it. `None`
/// when the answer is no event stream, the events carry no ids (the
/// server offers no resumption) or no event holds the response.
pub(super) fn resume_point(response: &Response, id: u64) -> Option<String> {
    let stream = response
        .header_value("content-type")
        .is_some_and(|kind| kind.starts_with("text/event-stream"));
    if !stream {
        return None;
    }
    let text = String::from_utf8_lossy(&response.body);
    // The last event ID buffer (WHATWG HTML §9.2.6) as of the events read
    // whole, and the id line of the event being read.
    let mut read: Option<String> = None;
    let mut reading: Option<String> = None;
    let mut data: Vec<&str> = Vec::new();
    let lines = (text.split('\n'))
        .map(|line| line.strip_suffix('\r').unwrap_or(line))
        .chain(std::iter::once(""));
    for line in lines {
        if line.is_empty() {
            if responds(&data.join("\n"), id) {
                return read;
            }
            if let Some(event) = reading.take() {
                read = Some(event);
            }
            data.clear();
        } else if let Some(value) = field(line, "id") {
            reading = Some(value.to_owned());
        } else if let Some(value) = field(line, "data") {
            data.push(value);
        }
    }
    None
}

fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let value = line.strip_prefix(name)?.strip_prefix(':')?;
    Some(value.strip_prefix(' ').unwrap_or(value))
}

/// Whether an event's data is the response to request `id`.
fn responds(data: &str, id: u64) -> bool {
    serde_json::from_str::<Value>(data).is_ok_and(|message| {
        message.get("id").and_then(Value::as_u64) == Some(id)
            && (message.get("result").is_some() || message.get("error").is_some())
    })
}

impl Mcp {
    /// Resumes attempt `attempt`'s cut stream: its answer when the server
    /// replayed the response, recorded either way.
    pub(super) async fn resume_stream(
        &self,
        http: &Client,
        target: &str,
        attempt: &str,
    ) -> Option<Answer> {
        let sent = lock(&self.state.answered).remove(&per_trial(target, attempt))?;
        let Some(last) = sent.resume_from else {
            self.record(target, attempt, Resumed::NotOffered);
            return None;
        };
        let mut request = Request::get(&self.path)
            .header("accept", "text/event-stream")
            .header("mcp-protocol-version", sent.session.protocol.as_str())
            .header("last-event-id", last.as_str());
        if let Some(id) = &sent.session.id {
            request = request.header("mcp-session-id", id.as_str());
        }
        let why = match http.call(target, request, RESUME_TIMEOUT).await {
            Ok(response) if response.status == 200 => match read_message(&response, sent.id) {
                Read::Result(_) | Read::Error { .. } => {
                    self.record(target, attempt, Resumed::Replayed { from: last });
                    return Some(self.read_call(&response, sent.id));
                }
                Read::Unreadable(why) => why,
            },
            Ok(response) => format!("the GET was answered status {}", response.status),
            Err(failure) => format!("the GET: {failure}"),
        };
        self.record(target, attempt, Resumed::NotReplayed { from: last, why });
        None
    }

    fn record(&self, target: &str, attempt: &str, resumed: Resumed) {
        lock(&self.state.resumed).insert(per_trial(target, attempt), resumed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(body: &str) -> Response {
        Response::new(200)
            .header("content-type", "text/event-stream")
            .body(body.to_owned())
    }

    #[test]
    fn the_resume_point_is_the_last_event_read_before_the_result() {
        // rmcp's shape: a priming event with an id, then the response.
        let primed = stream(
            "id: 0/3\nretry: 3000\ndata: \n\nid: 1/3\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n",
        );
        assert_eq!(resume_point(&primed, 7).as_deref(), Some("0/3"));
        // A notification between them moves the point on.
        let notified = stream(
            "id: 4\ndata: \n\nid: 5\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\r\n\r\nid: 6\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":-1,\"message\":\"x\"}}",
        );
        assert_eq!(resume_point(&notified, 7).as_deref(), Some("5"));
        // No ids before the result: no resumption offered.
        let plain = stream("data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n");
        assert_eq!(resume_point(&plain, 7), None);
        // A JSON answer has no stream to resume; nor has one for another id.
        assert_eq!(
            resume_point(
                &Response::json(200, &serde_json::json!({"id": 7, "result": {}})),
                7
            ),
            None
        );
        assert_eq!(resume_point(&primed, 8), None);
    }
}
