//! Anthropic Messages (`POST /v1/messages`): the conversation is `messages`
//! (content a text or blocks) with `system` beside it; the model's tool
//! calls are `tool_use` blocks (`input` an object), their results
//! `tool_result` blocks in the next user message naming `tool_use_id`.
//! Streamed, the turn is `message_start` .. `message_stop` events, a tool's
//! input sent as one `input_json_delta`.

use chaos_kit::http::Response;
use serde_json::{json, Value};

use super::{declared_tools, model_name, sse, text_of, Asked, ToolResult, Turn};

pub(super) const NAME: &str = "anthropic";
pub(super) const PATH: &str = "/messages";
pub(super) const BASE_URL_SETTING: &str = "ANTHROPIC_BASE_URL = \"{model.url}\"";

pub(super) fn read(body: &Value) -> Result<Asked, String> {
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("a Messages request has a `messages` array, and this one has none")?;
    let mut asked = Asked::of_request(body);
    if let Some(system) = body.get("system") {
        asked.text.push_str(&text_of(system));
        asked.text.push('\n');
    }
    for message in messages {
        let role = message.get("role").and_then(Value::as_str).unwrap_or("");
        let content = message.get("content").unwrap_or(&Value::Null);
        let Value::Array(blocks) = content else {
            if role == "user" {
                asked.text.push_str(&text_of(content));
                asked.text.push('\n');
            }
            continue;
        };
        for block in blocks {
            let field = |name: &str| block.get(name).and_then(Value::as_str).unwrap_or("");
            match (role, field("type")) {
                ("user", "text") => {
                    asked.text.push_str(field("text"));
                    asked.text.push('\n');
                }
                ("user", "tool_result") => asked.results.push(ToolResult {
                    id: field("tool_use_id").into(),
                    content: text_of(block.get("content").unwrap_or(&Value::Null)),
                    is_error: block
                        .get("is_error")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                }),
                ("assistant", "tool_use") => {
                    asked.calls.push((field("id").into(), field("name").into()))
                }
                _ => {}
            }
        }
    }
    asked.tools = declared_tools(body, |tool| tool.get("name").and_then(Value::as_str));
    Ok(asked)
}

pub(super) fn answer(turn: &Turn, asked: &Asked, number: u64) -> Response {
    let id = format!("msg_chaos_{number}");
    let (content, stop): (Vec<Value>, &str) = match turn {
        Turn::Calls(calls) => (
            calls
                .iter()
                .map(|call| json!({"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}))
                .collect(),
            "tool_use",
        ),
        Turn::Text(text) => (vec![json!({"type": "text", "text": text})], "end_turn"),
    };
    let usage = json!({"input_tokens": 0, "output_tokens": 0});
    let message = |content: Vec<Value>, stop: Value| {
        json!({
            "id": id, "type": "message", "role": "assistant", "model": model_name(asked),
            "content": content, "stop_reason": stop, "stop_sequence": null, "usage": usage,
        })
    };
    if !asked.stream {
        return Response::json(200, &message(content, Value::String(stop.into())));
    }
    let mut events = vec![(
        Some("message_start"),
        json!({"type": "message_start", "message": message(Vec::new(), Value::Null)}),
    )];
    for (index, block) in content.iter().enumerate() {
        let (start, delta) = match block.get("type").and_then(Value::as_str) {
            Some("tool_use") => (
                json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
            ),
            _ => (
                json!({"type": "text", "text": ""}),
                json!({"type": "text_delta", "text": block["text"]}),
            ),
        };
        events.push((
            Some("content_block_start"),
            json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        events.push((
            Some("content_block_delta"),
            json!({"type": "content_block_delta", "index": index, "delta": delta}),
        ));
        events.push((
            Some("content_block_stop"),
            json!({"type": "content_block_stop", "index": index}),
        ));
    }
    events.push((
        Some("message_delta"),
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 0}}),
    ));
    events.push((Some("message_stop"), json!({"type": "message_stop"})));
    sse(&events, false)
}

pub(super) fn error(status: u16, message: &str) -> Response {
    Response::json(
        status,
        &json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}}),
    )
}
