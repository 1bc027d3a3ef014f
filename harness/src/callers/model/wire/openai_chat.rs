//! OpenAI Chat Completions (`POST /v1/chat/completions`): the conversation is
//! `messages`; the model's tool calls are an assistant message's
//! `tool_calls` (`function.arguments` a JSON text), their results `role:
//! "tool"` messages naming `tool_call_id`. Streamed, the turn is
//! `chat.completion.chunk` events ending `data: [DONE]`.

use chaos_kit::http::Response;
use serde_json::{json, Value};

use super::{declared_tools, model_name, sse, text_of, Asked, Emitted, ToolResult, Turn};

pub(super) const NAME: &str = "openai-chat";
pub(super) const PATH: &str = "/chat/completions";
pub(super) const BASE_URL_SETTING: &str = "OPENAI_BASE_URL = \"{model.url}/v1\"";

pub(super) fn read(body: &Value) -> Result<Asked, String> {
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("a Chat Completions request has a `messages` array, and this one has none")?;
    let mut asked = Asked::of_request(body);
    for message in messages {
        let content = message.get("content").unwrap_or(&Value::Null);
        match message.get("role").and_then(Value::as_str).unwrap_or("") {
            "user" | "system" | "developer" => {
                asked.text.push_str(&text_of(content));
                asked.text.push('\n');
            }
            "assistant" => {
                for call in message
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let id = call.get("id").and_then(Value::as_str).unwrap_or("");
                    let name = call
                        .pointer("/function/name")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    asked.calls.push((id.into(), name.into()));
                }
            }
            "tool" => asked.results.push(ToolResult {
                id: message
                    .get("tool_call_id")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .into(),
                content: text_of(content),
                is_error: false,
            }),
            _ => {}
        }
    }
    asked.tools = declared_tools(body, |tool| {
        tool.pointer("/function/name").and_then(Value::as_str)
    });
    Ok(asked)
}

pub(super) fn answer(turn: &Turn, asked: &Asked, number: u64) -> Response {
    let id = format!("chatcmpl-chaos-{number}");
    let model = model_name(asked);
    let calls = |streamed: bool| -> Vec<Value> {
        match turn {
            Turn::Calls(calls) => calls
                .iter()
                .enumerate()
                .map(|(index, call)| tool_call(index, call, streamed))
                .collect(),
            Turn::Text(_) => Vec::new(),
        }
    };
    let (text, finish) = match turn {
        Turn::Calls(_) => (Value::Null, "tool_calls"),
        Turn::Text(text) => (Value::String(text.clone()), "stop"),
    };
    if asked.stream {
        let chunk = |delta: Value, finish: Value| {
            json!({
                "id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
                "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
            })
        };
        let mut delta = json!({"role": "assistant", "content": text});
        if matches!(turn, Turn::Calls(_)) {
            delta["tool_calls"] = Value::Array(calls(true));
        }
        let mut last = chunk(json!({}), Value::String(finish.into()));
        last["usage"] = usage();
        return sse(&[(None, chunk(delta, Value::Null)), (None, last)], true);
    }
    let mut message = json!({"role": "assistant", "content": text, "refusal": null});
    if matches!(turn, Turn::Calls(_)) {
        message["tool_calls"] = Value::Array(calls(false));
    }
    Response::json(
        200,
        &json!({
            "id": id, "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
            "usage": usage(),
        }),
    )
}

fn tool_call(index: usize, call: &Emitted, streamed: bool) -> Value {
    let mut value = json!({
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments.to_string()},
    });
    if streamed {
        value["index"] = json!(index);
    }
    value
}

fn usage() -> Value {
    json!({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0})
}

pub(super) fn error(status: u16, message: &str) -> Response {
    Response::json(
        status,
        &json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": null}}),
    )
}
