//! `mcp-ledger [--variant naive|correct]`: the reference MCP server, on the
//! official Rust SDK (rmcp), serving Streamable HTTP on `CHAOS_LISTEN_ADDR`
//! at `/mcp` (and `GET /healthz`). Its tools are the ones the suite calls
//! (`charge_card`, `send_reminder`, `send_notification_to_self`); each
//! charges chaos's provider over HTTP, as an MCP server fronting a payment
//! API does.
//!
//! - `naive` (the default, or `MCP_LEDGER_VARIANT=naive`): a new downstream
//!   idempotency key on every `tools/call`, while its tools declare
//!   `idempotentHint: true`, as many real servers do. A retried call after
//!   a lost answer charges again.
//! - `correct`: every `tools/call` goes through the ledger
//!   (`target_ledger::Handler`, keys from the run's structure): the
//!   operation is claimed in fsynced files under `CHAOS_STATE_DIR` before
//!   the effect, keyed by the caller's run and step (the `X-Run-Id` and
//!   `X-Step-Id` headers of its HTTP requests) or, without them, by the
//!   operation id the client puts in `_meta` under
//!   `chaos/idempotency-key`; a retry, a restart or a re-plan is answered
//!   from the record.
//!
//! The answer is chaos's answer body (`outcome`, `receipt`, `result`) as the
//! tool's `structuredContent`.
//!
//! `--stdio` serves MCP over its stdin and stdout instead (one JSON-RPC
//! message per line), listening nowhere: the caller's token and the run's
//! structure, which HTTP requests carry as headers, come under the
//! `chaos/headers` key of each call's `_meta` (docs/target-protocol.md §1.4).
//!
//! `--resumable` (Streamable HTTP only) keeps every stream's events
//! (`resume.rs`): a client whose stream closed before it read a result
//! resumes it with `Last-Event-ID` and is sent the result, so the call
//! acted once. Without it the events are numbered (the server offers
//! resumption) and a resume after the result finds nothing.
//!
//! `--stranger-ids` (Streamable HTTP only) is a broken server for chaos's
//! bad-input tests: every `tools/call` is acted on as the variant does, and
//! its response then goes out under a JSON-RPC id the client never sent
//! (the request's id plus [`STRANGER_OFFSET`]).

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use chaos_kit::disk::FileDisk;
use chaos_kit::http::Request;
use chaos_kit::process::{self, ProcessEnv};
use chaos_kit::protocol::{AnswerBody, Outcome, IDEMPOTENCY_KEY};
use chaos_kit::target;
use chaos_kit::upstream::{self, Dispatch};
use chaos_kit::TargetEnv;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{json, Value};
use target_ledger::store::DiskStore;
use target_ledger::{Handler, KeyFrom, Options};
use tower_service::Service as _;

mod resume;

/// The `_meta` key the correct variant reads the caller's operation id from.
const META_KEY: &str = "chaos/idempotency-key";

/// The `_meta` key a stdio call carries its would-be HTTP headers under.
const HEADERS_META: &str = "chaos/headers";

/// The tools it serves: the suite's, each with whether repeating it with the
/// same arguments is (declared) harmless.
const TOOLS: [(&str, &str, bool); 3] = [
    ("charge_card", "Charge a card for an invoice.", true),
    (
        "send_reminder",
        "Email a payment reminder for an invoice.",
        true,
    ),
    (
        "send_notification_to_self",
        "Send a notification to yourself; every call is its own.",
        false,
    ),
];

#[derive(Clone)]
enum Variant {
    Naive {
        env: Arc<TargetEnv>,
        /// Numbers the calls of this process: with its start time, the
        /// naive downstream key, new on every call.
        calls: Arc<AtomicU64>,
        started: u128,
    },
    Correct(Handler<DiskStore>),
}

#[derive(Clone)]
struct Server {
    variant: Variant,
}

fn main() -> std::process::ExitCode {
    let Flags {
        variant,
        stdio,
        resumable,
        stranger_ids,
    } = match flags() {
        Ok(flags) => flags,
        Err(message) => {
            eprintln!("mcp-ledger: {message}");
            return std::process::ExitCode::from(2);
        }
    };
    process::run("mcp-ledger", move |env: ProcessEnv| async move {
        let dir = env
            .state_dir
            .clone()
            .unwrap_or_else(|| "mcp-ledger-state".into());
        let disk = Arc::new(FileDisk::open(&dir).map_err(|error| {
            format!(
                "failed to open the state directory {}: {error}",
                dir.display()
            )
        })?);
        let target_env = env.target_env(disk.clone());
        let variant = match variant {
            "correct" => {
                let retention = env.retention.unwrap_or(target_ledger::RETENTION);
                let options = Options {
                    key_from: KeyFrom::Structure,
                    ..Options::new(retention)
                };
                Variant::Correct(Handler::new(target_env, DiskStore::new(disk), options))
            }
            _ => Variant::Naive {
                env: Arc::new(target_env),
                calls: Arc::default(),
                started: std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |since| since.as_nanos()),
            },
        };
        let server = Server { variant };
        if stdio {
            use rmcp::ServiceExt as _;
            // Its stdin and stdout are the transport: nothing else may be
            // written to stdout.
            let running = server
                .serve((tokio::io::stdin(), tokio::io::stdout()))
                .await?;
            running.waiting().await?;
            return Ok(());
        }
        serve(env.listen().await?, server, resumable, stranger_ids).await?;
        Ok(())
    })
}

const USAGE: &str =
    "usage: mcp-ledger [--variant naive|correct] [--stdio | --resumable | --stranger-ids]";

/// What `--stranger-ids` adds to a `tools/call`'s id in its response.
const STRANGER_OFFSET: u64 = 1_000_000;

/// The command line, read.
struct Flags {
    variant: &'static str,
    stdio: bool,
    resumable: bool,
    stranger_ids: bool,
}

/// `--variant NAME` (or `MCP_LEDGER_VARIANT`; `naive` when neither),
/// `--stdio` and `--stranger-ids`.
fn flags() -> Result<Flags, String> {
    let mut args = std::env::args().skip(1);
    let mut named = std::env::var("MCP_LEDGER_VARIANT").unwrap_or_else(|_| "naive".into());
    let mut stdio = false;
    let mut stranger_ids = false;
    let mut resumable = false;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--stdio" => stdio = true,
            "--stranger-ids" => stranger_ids = true,
            "--resumable" => resumable = true,
            "--variant" => {
                named = args
                    .next()
                    .ok_or_else(|| format!("--variant needs a name; {USAGE}"))?;
            }
            other => return Err(format!("unknown argument '{other}'; {USAGE}")),
        }
    }
    if stdio && (stranger_ids || resumable) {
        return Err(format!(
            "--stranger-ids and --resumable are about Streamable HTTP answers, and --stdio has none: give one of them; {USAGE}"
        ));
    }
    let variant = match named.as_str() {
        "naive" => "naive",
        "correct" => "correct",
        other => {
            return Err(format!(
                "unknown variant '{other}'; choose naive or correct"
            ))
        }
    };
    Ok(Flags {
        variant,
        stdio,
        resumable,
        stranger_ids,
    })
}

/// Serves MCP at `/mcp` and the readiness probe at `/healthz` until
/// SIGTERM.
async fn serve(
    listener: tokio::net::TcpListener,
    server: Server,
    resumable: bool,
    stranger_ids: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut sessions = LocalSessionManager::default();
    if resumable {
        sessions = sessions.with_event_store(Arc::new(resume::Events::default()));
    }
    let mcp = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(sessions),
        StreamableHttpServerConfig::default(),
    );
    let shutdown = process::shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => continue,
            },
            () = &mut shutdown => return Ok(()),
        };
        let mcp = mcp.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request: http::Request<hyper::body::Incoming>| {
                let mut mcp = mcp.clone();
                async move {
                    let path = request.uri().path();
                    if request.method() == http::Method::GET && path == "/healthz" {
                        return Ok::<_, Infallible>(http::Response::new(
                            Full::new(Bytes::new()).boxed(),
                        ));
                    }
                    if path != "/mcp" {
                        let mut response = http::Response::new(Full::new(Bytes::new()).boxed());
                        *response.status_mut() = http::StatusCode::NOT_FOUND;
                        return Ok(response);
                    }
                    if stranger_ids && request.method() == http::Method::POST {
                        return Ok(answer_stranger_id(&mut mcp, request).await);
                    }
                    mcp.call(request).await
                }
            });
            // A connection ends when the client goes; nothing to report.
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

type Answer = http::Response<http_body_util::combinators::BoxBody<Bytes, Infallible>>;

/// `--stranger-ids`: the POST is served as usual (a `tools/call` acts), and
/// the response to a `tools/call` is rewritten to an id its client never
/// sent. Other requests (`initialize`, `tools/list`) are left alone, so the
/// session opens and the fault meets the calls only.
async fn answer_stranger_id(
    mcp: &mut StreamableHttpService<Server, LocalSessionManager>,
    request: http::Request<hyper::body::Incoming>,
) -> Answer {
    let (parts, body) = request.into_parts();
    let Ok(body) = body.collect().await.map(|body| body.to_bytes()) else {
        let mut response = http::Response::new(Full::new(Bytes::new()).boxed());
        *response.status_mut() = http::StatusCode::BAD_REQUEST;
        return response;
    };
    let call_id = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|message| {
            (message.get("method")? == "tools/call").then(|| message.get("id")?.as_u64())?
        });
    let Ok(response) = mcp
        .call(http::Request::from_parts(parts, Full::new(body)))
        .await;
    let Some(id) = call_id else {
        return response;
    };
    let (parts, body) = response.into_parts();
    // The stream ends once the response is sent: read whole, then rewritten.
    let text = match body.collect().await {
        Ok(body) => String::from_utf8_lossy(&body.to_bytes()).into_owned(),
        Err(never) => match never {},
    };
    let rewritten: Vec<String> = text
        .split('\n')
        .map(|line| stranger(line, id).unwrap_or_else(|| line.to_owned()))
        .collect();
    let mut parts = parts;
    parts.headers.remove(http::header::CONTENT_LENGTH);
    http::Response::from_parts(parts, Full::new(Bytes::from(rewritten.join("\n"))).boxed())
}

/// A line of the answer (an SSE `data:` line, or a JSON body) holding the
/// response to request `id`, under the stranger id instead.
fn stranger(line: &str, id: u64) -> Option<String> {
    let (prefix, json) = match line.strip_prefix("data:") {
        Some(data) => ("data: ", data.trim_start()),
        None => ("", line),
    };
    let mut message: Value = serde_json::from_str(json).ok()?;
    let is_response = message.get("result").is_some() || message.get("error").is_some();
    if !is_response || message.get("id").and_then(Value::as_u64) != Some(id) {
        return None;
    }
    message["id"] = json!(id + STRANGER_OFFSET);
    Some(format!("{prefix}{message}"))
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = json!({
            "type": "object",
            "properties": {
                "invoice": {"type": "string"},
                "amount_cents": {"type": "integer"},
                "recipient": {"type": "string"},
                "message": {"type": "string"},
                "memo": {"type": "string"},
                "note": {"type": "string"},
            },
            "required": ["invoice"],
        });
        let Value::Object(schema) = schema else {
            unreachable!("a JSON object literal")
        };
        let schema = Arc::new(schema);
        Ok(ListToolsResult::with_all_items(
            TOOLS
                .iter()
                .map(|(name, description, idempotent)| {
                    Tool::new(*name, *description, schema.clone()).with_annotations(
                        ToolAnnotations::new()
                            .read_only(false)
                            .destructive(false)
                            .idempotent(*idempotent)
                            .open_world(true),
                    )
                })
                .collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let tool = request.name.to_string();
        if !TOOLS.iter().any(|(name, _, _)| *name == tool) {
            return Err(ErrorData::invalid_params(
                format!("unknown tool '{tool}'"),
                None,
            ));
        }
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        // The HTTP request that carried the call: its headers hold the
        // caller's bearer token and the run's structure.
        let parts = context.extensions.get::<http::request::Parts>();
        let metas = || {
            (request.meta.as_ref().map(|meta| &meta.0 .0))
                .into_iter()
                .chain(std::iter::once(&context.meta.0 .0))
        };
        // Over stdio there are no HTTP headers: the caller put them in `_meta`.
        let headers: Vec<(String, String)> = match parts {
            Some(parts) => (parts.headers.iter())
                .filter_map(|(name, value)| {
                    Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
                })
                .collect(),
            None => metas()
                .find_map(|meta| meta.get(HEADERS_META).and_then(Value::as_object))
                .map(|headers| {
                    (headers.iter())
                        .filter_map(|(name, value)| {
                            Some((name.clone(), value.as_str()?.to_owned()))
                        })
                        .collect()
                })
                .unwrap_or_default(),
        };
        let header = |name: &str| {
            (headers.iter())
                .find(|(key, _)| key.eq_ignore_ascii_case(name))
                .map(|(_, value)| value.clone())
        };
        let body = Bytes::from(serde_json::to_vec(&arguments).unwrap_or_default());
        let answer = match &self.variant {
            Variant::Naive {
                env,
                calls,
                started,
            } => {
                let call = calls.fetch_add(1, Ordering::Relaxed);
                naive(env, &tool, header("authorization"), started, call, body).await
            }
            Variant::Correct(ledger) => {
                let mut http = Request::post(format!("/tools/{tool}"), body)
                    .header("content-type", "application/json");
                for (name, value) in &headers {
                    http = http.header(name.as_str(), value.as_str());
                }
                let meta = metas().find_map(|meta| meta.get(META_KEY).and_then(Value::as_str));
                if let Some(key) = meta {
                    http = http.header(IDEMPOTENCY_KEY, key);
                }
                let response = ledger.handle(http).await;
                serde_json::from_slice(&response.body).unwrap_or_else(|_| {
                    AnswerBody::outcome(Outcome::Unknown)
                        .with_reason(format!("the ledger answered {}", response.status))
                })
            }
        };
        let structured = serde_json::to_value(&answer).unwrap_or_default();
        let mut result = CallToolResult::structured(structured.clone());
        if result.content.is_empty() {
            result.content = vec![ContentBlock::text(structured.to_string())];
        }
        Ok(result.into())
    }
}

/// The naive server's tool call: authorized, then charged under a key of
/// its own making, new on every call.
async fn naive(
    env: &TargetEnv,
    tool: &str,
    authorization: Option<String>,
    started: &u128,
    call: u64,
    body: Bytes,
) -> AnswerBody {
    let token = authorization
        .as_deref()
        .and_then(|value| value.strip_prefix("Bearer "));
    let Some(token) = token else {
        return AnswerBody::outcome(Outcome::Denied);
    };
    match upstream::introspect(env, token).await {
        Some(grant) if grant.allows(tool) => {}
        Some(_) => return AnswerBody::outcome(Outcome::Denied),
        None => return AnswerBody::outcome(Outcome::Unknown).with_reason("authority unreachable"),
    }
    // THE BUG: a downstream key per tools/call, so a retry is a new charge.
    let key = format!("mcp-{started:x}-{call}");
    match upstream::dispatch(env, tool, &key, body).await {
        Dispatch::Accepted { receipt, .. } => AnswerBody::outcome(Outcome::Applied)
            .with_result(target::tool_result(tool, &receipt))
            .with_receipt(receipt),
        Dispatch::Refused { status } => AnswerBody::outcome(Outcome::Rejected)
            .with_reason(format!("provider refused with {status}")),
        Dispatch::Ambiguous(_) => {
            AnswerBody::outcome(Outcome::Unknown).with_reason("provider did not answer")
        }
    }
}
