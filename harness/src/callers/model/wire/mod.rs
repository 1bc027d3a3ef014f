//! The wire formats a runtime speaks to its model, one file each: what
//! chaos reads from a model request and how it writes its turn back.
//!
//! - [`openai_chat`]: OpenAI Chat Completions, `POST /v1/chat/completions`
//!   (tool calls in `choices[0].message.tool_calls`), streamed or not;
//! - [`openai_responses`]: OpenAI Responses, `POST /v1/responses`
//!   (`function_call` output items), streamed or not;
//! - [`anthropic`]: Anthropic Messages, `POST /v1/messages` (`tool_use`
//!   content blocks), streamed or not.
//!
//! Each reads a request into an [`Asked`] (the conversation as the model
//! needs it: the user's text, the tools declared, the tool calls already in
//! it and their results) and writes a [`Turn`] (tool calls, or a final
//! text) in its own shape. Nothing here decides anything: the desk does.
//! Adding a format is its file, one line in [`wires!`] and its name in the
//! docs (docs/runtimes.md).

mod anthropic;
mod openai_chat;
mod openai_responses;

use chaos_kit::http::Response;
use serde_json::Value;

/// Declares every wire format: its variant of [`Api`], its file's unit.
macro_rules! wires {
    ($($variant:ident($module:ident),)+) => {
        /// The wire format a runtime speaks to its model, as `[model] api` names it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum Api {
            $($variant,)+
        }

        impl Api {
            pub(crate) const ALL: &'static [Api] = &[$(Api::$variant,)+];

            pub(crate) fn name(self) -> &'static str {
                match self {
                    $(Api::$variant => $module::NAME,)+
                }
            }

            /// The path its requests are sent to, below the model's base URL.
            pub(crate) fn path(self) -> &'static str {
                match self {
                    $(Api::$variant => $module::PATH,)+
                }
            }

            /// The base URL variable its official SDK reads, and the value
            /// to give it: what a message tells a user who forgot it.
            pub(crate) fn base_url_setting(self) -> &'static str {
                match self {
                    $(Api::$variant => $module::BASE_URL_SETTING,)+
                }
            }

            pub(crate) fn read(self, body: &[u8]) -> Result<Asked, String> {
                let value: Value = serde_json::from_slice(body)
                    .map_err(|error| format!("the request body is not JSON ({error})"))?;
                match self {
                    $(Api::$variant => $module::read(&value),)+
                }
            }

            /// `turn` as this format's answer to `asked`; `number` tells
            /// this answer's ids from the run's others.
            pub(crate) fn answer(self, turn: &Turn, asked: &Asked, number: u64) -> Response {
                match self {
                    $(Api::$variant => $module::answer(turn, asked, number),)+
                }
            }

            /// An error in this format's shape, which its SDK raises with
            /// the message.
            pub(crate) fn error(self, status: u16, message: &str) -> Response {
                match self {
                    $(Api::$variant => $module::error(status, message),)+
                }
            }
        }
    };
}

wires! {
    OpenAiChat(openai_chat),
    OpenAiResponses(openai_responses),
    Anthropic(anthropic),
}

impl Api {
    pub(crate) fn parse(name: &str) -> Option<Api> {
        Api::ALL.iter().copied().find(|api| api.name() == name)
    }

    /// The format whose requests go to `path` (the SDKs put their version
    /// prefix on the base URL, so the path ends the same either way).
    pub(crate) fn at(path: &str) -> Option<Api> {
        Api::ALL
            .iter()
            .copied()
            .find(|api| path.ends_with(api.path()))
    }
}

/// A model request, read.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Asked {
    /// Every text the user and the system put in the conversation, joined:
    /// where the run's marker is.
    pub text: String,
    /// The tools the runtime declared, by name.
    pub tools: Vec<String>,
    /// Tool calls already in the conversation (the model's earlier turns):
    /// id and tool name.
    pub calls: Vec<(String, String)>,
    /// Tool results in the conversation: the call's id and the result as
    /// text, with whether the runtime marked it an error.
    pub results: Vec<ToolResult>,
    /// Whether the runtime asked for a stream of events.
    pub stream: bool,
    /// The model it asked for, echoed back.
    pub model: String,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolResult {
    pub id: String,
    pub content: String,
    pub is_error: bool,
}

/// What the model says next.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Turn {
    /// Tool calls, in one turn (several when subagents run the step at once).
    Calls(Vec<Emitted>),
    /// The final answer to the user.
    Text(String),
}

/// One tool call the model emits.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Emitted {
    pub id: String,
    pub name: String,
    /// The arguments, a JSON object.
    pub arguments: Value,
}

impl Asked {
    /// What every format's request says the same way: whether it asks for
    /// a stream, and the model it names.
    pub(super) fn of_request(body: &Value) -> Asked {
        Asked {
            stream: body.get("stream").and_then(Value::as_bool).unwrap_or(false),
            model: body
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or("")
                .into(),
            ..Asked::default()
        }
    }
}

/// The names of the tools a request declares (`tools[]`), as `name` reads
/// each entry in the format's own shape.
pub(super) fn declared_tools(body: &Value, name: impl Fn(&Value) -> Option<&str>) -> Vec<String> {
    (body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten())
    .filter_map(name)
    .map(str::to_owned)
    .collect()
}

/// A text that is a string, or a list of content blocks whose `text` parts
/// are joined: every format allows both.
pub(super) fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|block| match block {
                Value::String(text) => Some(text.as_str()),
                block => block.get("text").and_then(Value::as_str),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// A server-sent events body from `(event name, data)` pairs.
pub(super) fn sse(events: &[(Option<&str>, Value)], done: bool) -> Response {
    let mut body = String::new();
    for (event, data) in events {
        if let Some(event) = event {
            body.push_str(&format!("event: {event}\n"));
        }
        body.push_str(&format!("data: {data}\n\n"));
    }
    if done {
        body.push_str("data: [DONE]\n\n");
    }
    Response::new(200)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(body)
}

/// The name the SDKs show for chaos's scripted model.
pub(super) fn model_name(asked: &Asked) -> String {
    if asked.model.is_empty() {
        "chaos-scripted".into()
    } else {
        asked.model.clone()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::process::Command;
    use std::sync::{Arc, Mutex};

    use chaos_kit::http;
    use serde_json::json;

    use super::*;

    #[test]
    fn each_format_is_found_by_its_name_and_its_path() {
        for api in Api::ALL {
            assert_eq!(Api::parse(api.name()), Some(*api));
            assert_eq!(Api::at(&format!("/v1{}", api.path())), Some(*api));
        }
        assert_eq!(Api::at("/v1/embeddings"), None);
        assert_eq!(Api::parse("gemini"), None);
    }

    #[test]
    fn a_body_that_is_not_json_or_has_no_conversation_is_named() {
        assert!(Api::OpenAiChat.read(b"{").unwrap_err().contains("not JSON"));
        for api in Api::ALL {
            let error = api.read(b"{}").unwrap_err();
            assert!(error.contains("has none"), "{}: {error}", api.name());
        }
    }

    /// The official SDKs (examples/sdk-agent, exact pins), each format
    /// streamed and not, run one agent loop against these formats: what
    /// each SDK really sends is captured here and read, and what chaos
    /// answers must come out of the SDK as the tool call and text it was.
    #[test]
    fn the_official_sdks_round_trip_a_tool_call_and_its_result_in_every_format() {
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/sdk-agent");
        let setup = Command::new("bash")
            .arg(example.join("setup"))
            .status()
            .expect("bash runs the example's setup");
        assert!(setup.success(), "examples/sdk-agent/setup failed");
        let arguments = json!({"invoice": "inv-rt-1", "amount_cents": 4999, "recipient": "a@b.example", "message": "Invoice due"});
        for api in Api::ALL {
            for stream in [false, true] {
                let captured = Arc::new(Mutex::new(Vec::<Asked>::new()));
                let runtime = tokio::runtime::Runtime::new().unwrap();
                let listener = runtime
                    .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
                    .unwrap();
                let addr = listener.local_addr().unwrap();
                let (stop, mut stopped) = tokio::sync::watch::channel(());
                let handler = {
                    let (captured, arguments, api) = (captured.clone(), arguments.clone(), *api);
                    http::handler(move |request: http::Request| {
                        let asked = api.read(&request.body).unwrap_or_else(|why| {
                            panic!("{} sent what chaos cannot read: {why}", api.name())
                        });
                        let mut seen = captured.lock().unwrap();
                        let turn = if asked.results.is_empty() {
                            Turn::Calls(vec![Emitted {
                                id: "tu-rt-1".into(),
                                name: "charge_card".into(),
                                arguments: arguments.clone(),
                            }])
                        } else {
                            Turn::Text("Done: charged.".into())
                        };
                        let answer = api.answer(&turn, &asked, seen.len() as u64 + 1);
                        seen.push(asked);
                        std::future::ready(Ok(answer))
                    })
                };
                runtime.spawn(http::serve(
                    listener,
                    async move { while stopped.changed().await.is_ok() {} },
                    handler,
                ));
                let output = Command::new(example.join(".venv/bin/python"))
                    .arg(example.join("roundtrip.py"))
                    .arg("Please charge inv-rt-1. [chaos-run run-rt-c1]")
                    .env("MODEL_API", api.name())
                    .env("MODEL_STREAM", if stream { "1" } else { "0" })
                    .env("OPENAI_BASE_URL", format!("http://{addr}/v1"))
                    .env("OPENAI_API_KEY", "chaos")
                    .env("ANTHROPIC_BASE_URL", format!("http://{addr}"))
                    .env("ANTHROPIC_API_KEY", "chaos")
                    .output()
                    .unwrap();
                drop(stop);
                let case = format!("{} (stream: {stream})", api.name());
                assert!(
                    output.status.success(),
                    "{case}: {}",
                    String::from_utf8_lossy(&output.stderr)
                );
                let seen: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
                assert_eq!(seen["calls"][0]["tool"], "charge_card", "{case}: {seen}");
                assert_eq!(seen["calls"][0]["arguments"], arguments, "{case}: {seen}");
                assert_eq!(seen["final"], "Done: charged.", "{case}: {seen}");

                let asked = captured.lock().unwrap();
                assert_eq!(asked.len(), 2, "{case}: {asked:?}");
                let (first, second) = (&asked[0], &asked[1]);
                assert!(
                    first.text.contains("[chaos-run run-rt-c1]"),
                    "{case}: {first:?}"
                );
                assert!(
                    first.tools.contains(&"charge_card".to_owned()),
                    "{case}: {first:?}"
                );
                assert!(
                    first.calls.is_empty() && first.results.is_empty(),
                    "{case}: {first:?}"
                );
                assert_eq!(first.stream, stream, "{case}");
                assert_eq!(
                    second.calls,
                    vec![("tu-rt-1".to_owned(), "charge_card".to_owned())],
                    "{case}"
                );
                assert_eq!(second.results.len(), 1, "{case}: {second:?}");
                assert_eq!(second.results[0].id, "tu-rt-1", "{case}");
                let result: serde_json::Value =
                    serde_json::from_str(&second.results[0].content).unwrap();
                assert_eq!(result["status"], "applied", "{case}: {second:?}");
                assert!(second.text.contains("[chaos-run run-rt-c1]"), "{case}");
            }
        }
    }
}
