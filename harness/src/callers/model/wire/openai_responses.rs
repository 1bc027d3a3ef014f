//! OpenAI Responses (`POST /v1/responses`): the conversation is `input` (a
//! text, or items: messages, the model's `function_call`s and their
//! `function_call_output`s by `call_id`), with `instructions` beside it.
//! The turn is a `response` whose `output` holds `function_call` items or
//! one assistant `message`; streamed, the same response in
//! `response.created` .. `response.completed` events.

use chaos_kit::http::Response;
use serde_json::{json, Value};

use super::{declared_tools, model_name, sse, text_of, Asked, ToolResult, Turn};

pub(super) const NAME: &str = "openai-responses";
pub(super) const PATH: &str = "/responses";
pub(super) const BASE_URL_SETTING: &str = "OPENAI_BASE_URL = \"{model.url}/v1\"";

pub(super) fn read(body: &Value) -> Result<Asked, String> {
    let mut asked = Asked::of_request(body);
    if let Some(instructions) = body.get("instructions").and_then(Value::as_str) {
        asked.text.push_str(instructions);
        asked.text.push('\n');
    }
    match body.get("input") {
        Some(Value::String(text)) => asked.text.push_str(text),
        Some(Value::Array(items)) => {
            for item in items {
                let kind = item
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("message");
                let field = |name: &str| item.get(name).and_then(Value::as_str).unwrap_or("");
                match kind {
                    "message" if field("role") != "assistant" => {
                        asked
                            .text
                            .push_str(&text_of(item.get("content").unwrap_or(&Value::Null)));
                        asked.text.push('\n');
                    }
                    "function_call" => asked
                        .calls
                        .push((field("call_id").into(), field("name").into())),
                    "function_call_output" => asked.results.push(ToolResult {
                        id: field("call_id").into(),
                        content: match item.get("output") {
                            Some(Value::String(text)) => text.clone(),
                            Some(other) => text_of(other),
                            None => String::new(),
                        },
                        is_error: false,
                    }),
                    _ => {}
                }
            }
        }
        _ => return Err(
            "a Responses request has an `input` (a text or a list of items), and this one has none"
                .into(),
        ),
    }
    asked.tools = declared_tools(body, |tool| {
        (tool.get("type").and_then(Value::as_str) == Some("function"))
            .then(|| tool.get("name").and_then(Value::as_str))
            .flatten()
    });
    Ok(asked)
}

pub(super) fn answer(turn: &Turn, asked: &Asked, number: u64) -> Response {
    let id = format!("resp_chaos_{number}");
    let output: Vec<Value> = match turn {
        Turn::Calls(calls) => calls
            .iter()
            .map(|call| {
                json!({
                    "type": "function_call", "id": format!("fc_{}", call.id), "call_id": call.id,
                    "name": call.name, "arguments": call.arguments.to_string(), "status": "completed",
                })
            })
            .collect(),
        Turn::Text(text) => vec![json!({
            "type": "message", "id": format!("msg_chaos_{number}"), "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        })],
    };
    let response = |status: &str, output: Vec<Value>| {
        json!({
            "id": id, "object": "response", "created_at": 0, "status": status, "model": model_name(asked),
            "output": output, "parallel_tool_calls": true, "tool_choice": "auto", "tools": [],
            "error": null, "incomplete_details": null, "instructions": null, "metadata": {},
            "temperature": 1.0, "top_p": 1.0, "text": {"format": {"type": "text"}}, "truncation": "disabled",
            "usage": {
                "input_tokens": 0, "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 0, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 0,
            },
        })
    };
    if !asked.stream {
        return Response::json(200, &response("completed", output));
    }
    let mut events = vec![(
        Some("response.created"),
        json!({"type": "response.created", "sequence_number": 0, "response": response("in_progress", Vec::new())}),
    )];
    for (index, item) in output.iter().enumerate() {
        events.push((
            Some("response.output_item.added"),
            json!({"type": "response.output_item.added", "sequence_number": events.len(), "output_index": index, "item": item}),
        ));
        events.push((
            Some("response.output_item.done"),
            json!({"type": "response.output_item.done", "sequence_number": events.len(), "output_index": index, "item": item}),
        ));
    }
    events.push((
        Some("response.completed"),
        json!({"type": "response.completed", "sequence_number": events.len(), "response": response("completed", output)}),
    ));
    sse(&events, false)
}

pub(super) fn error(status: u16, message: &str) -> Response {
    Response::json(
        status,
        &json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": null}}),
    )
}
