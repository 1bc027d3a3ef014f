//! The MCP way in: chaos is the MCP client, the target an MCP server over
//! Streamable HTTP (MCP 2025-11-25, "Transports"), selected by a target
//! file's `[mcp]` table (docs/target-protocol.md §1.4).
//!
//! Per server process, one session: `initialize` (and its `initialized`
//! notification), then `tools/list`, whose tools and annotations are kept
//! for the run's history; again when the server no longer knows the session
//! (`404` after a restart). With `sessions = "per-attempt"` each attempt
//! opens a session of its own instead, as separate clients (subagents,
//! workers) would; the history records the session of every attempt.
//!
//! Each attempt is one `tools/call` with a JSON-RPC id of its own, mapped
//! from the scenario's tool call by `[mcp.tools]` with the templates
//! `[request.fields]` uses, and read back with `[response]`'s pointers into
//! `structuredContent` (or the JSON in its first text content). A stream
//! cut before its result is resumed with `Last-Event-ID` where the server
//! offers it (`mcp/resume.rs`).
//!
//! It speaks JSON-RPC over chaos's own HTTP [`Client`], with rmcp (the
//! official Rust SDK) giving the protocol's types. rmcp's client service is
//! not used: it owns request ids, timeouts and reconnection in a worker task
//! of its own, and chaos needs every attempt to be one request on the
//! trial's client (gated while the target is down, timed by the agent, its
//! failure recorded as the agent saw it), so the agent's faults act on MCP
//! calls as they act on HTTP ones.

use chaos_kit::sync::lock;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use chaos_kit::http::{CallFailure, Client, Request, Response};
use chaos_kit::protocol::{Outcome, ATTEMPT_ID};
use rmcp::model::{CallToolResult, ListToolsResult, ProtocolVersion, Tool};
use serde_json::{json, Value};

mod resume;

use super::mapped::{ResponseMapping, Template};
use super::{
    CallArguments, CallValues, Cancelling, Outgoing, Ready, Readying, Reply, Resuming, Sending, Way,
};
use crate::history::{Answer, DeclaredTool, McpSeen, Resumed};

/// The `[mcp]` table, read.
#[derive(Debug, Clone)]
pub(crate) struct Mcp {
    /// How the server speaks MCP.
    pub transport: Transport,
    /// Where the server answers MCP on its `{listen.addr}`.
    pub path: String,
    /// Where the call's identity (the operation id) goes.
    pub identity: IdentityPlace,
    /// Scenario tool -> the MCP tool and its arguments; a tool not named
    /// here is called by its own name with the arguments as the model wrote them.
    pub tools: BTreeMap<String, ToolMapping>,
    pub response: ResponseMapping,
    /// Which session each attempt's `tools/call` goes on.
    pub sessions: Sessions,
    /// Scenario tool -> the server's tool, for the tools `[mcp.tools]`
    /// renames: the authority grants and lists them by the server's names,
    /// as a server that checks its caller's scope knows only its own.
    names: BTreeMap<String, String>,
    /// What the run learns from the servers: shared by every trial's copy.
    state: Arc<State>,
}

/// Config equality: the state is what the run learned, not the file.
impl PartialEq for Mcp {
    fn eq(&self, other: &Mcp) -> bool {
        (
            self.transport,
            &self.path,
            &self.identity,
            &self.tools,
            &self.response,
            self.sessions,
        ) == (
            other.transport,
            &other.path,
            &other.identity,
            &other.tools,
            &other.response,
            other.sessions,
        )
    }
}

impl Eq for Mcp {}

/// How the server speaks MCP (MCP 2025-11-25, "Transports").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transport {
    /// Streamable HTTP on its `{listen.addr}`.
    StreamableHttp,
    /// Its stdin and stdout, one JSON-RPC message per line: chaos pipes
    /// them to a bridge of its own on the target's `{listen.addr}`
    /// (`live/stdio.rs`), so every attempt still goes over the trial's
    /// HTTP client and meets the agent's faults unchanged.
    Stdio,
}

/// Which MCP session each attempt's `tools/call` goes on: the choice that
/// decides whether calls of one operation in flight at once (`concurrency`,
/// `subagents`) share a session, which a server may key its work by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Sessions {
    /// One session per server process, every attempt of every trial on it:
    /// one MCP client (an agent's host) holds one session per server.
    #[default]
    Shared,
    /// A session of its own for every attempt (`initialize`, `initialized`),
    /// as separate clients calling one server would.
    PerAttempt,
}

/// The `_meta` key under which a call to a stdio server carries what an
/// HTTP one gets as headers: chaos's identities of the attempt and the
/// caller's `authorization`, by their header names.
pub(crate) const STDIO_HEADERS_META: &str = "chaos/headers";

/// Where the operation id of a call goes. MCP has no place for it: the
/// proposal for one (SEP-3182, an `idempotencyKey` field of `tools/call`'s
/// params with a `tools.idempotency` capability) was closed unmerged, so
/// servers that take a key take it where they chose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum IdentityPlace {
    /// Nowhere: a plain MCP client, the common case.
    Nowhere,
    /// An argument of the tool, by name.
    Argument(String),
    /// A key of the request's `_meta`.
    Meta(String),
    /// A field of `tools/call`'s params, as SEP-3182 had it (`idempotencyKey`).
    Param(String),
}

/// One scenario tool, as the server names and takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToolMapping {
    pub name: String,
    /// The arguments, each a template; `None` passes the model's on.
    pub arguments: Option<BTreeMap<String, Template>>,
    /// The arguments the file gives as a list of templates, sent as a JSON
    /// array: a tool taking `recipients: list[str]` (mcp-email-server's
    /// `send_email`) refuses one string.
    pub lists: BTreeMap<String, Vec<Template>>,
}

#[derive(Debug, Default)]
struct State {
    /// The live session of each server address.
    sessions: Mutex<HashMap<String, Session>>,
    /// JSON-RPC ids: one per request, never reused in a run.
    next_id: AtomicU64,
    /// The tools the server listed last, by name.
    listed: Mutex<BTreeMap<String, Tool>>,
    /// `initialize` handshakes completed.
    initialized: AtomicU64,
    /// The attempts whose `tools/call` chaos cancelled (its own timeout),
    /// with `notifications/cancelled`: by attempt id.
    cancelled: Mutex<Vec<String>>,
    /// The request id and session of each answered attempt, by attempt id,
    /// until the agent says whether it waited for it: a fault may hold the
    /// answer past its timeout, and then the call is cancelled.
    answered: Mutex<HashMap<String, SentCall>>,
    /// What resuming each attempt's cut stream came to, by attempt id.
    resumed: Mutex<HashMap<String, Resumed>>,
    /// The session each attempt's `tools/call` went on, by attempt id.
    session_of: Mutex<HashMap<String, String>>,
}

/// One `tools/call` the server answered: what a cancel or a resumption of
/// it needs.
#[derive(Debug, Clone)]
struct SentCall {
    /// Its JSON-RPC id.
    id: u64,
    session: Session,
    /// The id of the last SSE event before its response, when the server
    /// numbered its events (`resume.rs`).
    resume_from: Option<String>,
}

/// Most answered attempts remembered for a cancel: a run's attempts are
/// judged as they end, so only the latest few can still be timed out.
const MOST_ANSWERED: usize = 4096;

#[derive(Debug, Clone)]
struct Session {
    /// `Mcp-Session-Id`, when the server gave one.
    id: Option<String>,
    protocol: String,
    /// Which `initialize` of the run opened it, counted from 1: names the
    /// session in the history when the server gives it no id.
    number: u64,
}

impl Session {
    fn label(&self) -> String {
        match &self.id {
            Some(id) => id.clone(),
            None => format!("initialize #{}", self.number),
        }
    }
}

/// The protocol chaos asks for: the newest with an `initialize` handshake.
fn protocol() -> ProtocolVersion {
    ProtocolVersion::LATEST_WITH_INITIALIZE
}

/// How long the `notifications/cancelled` for a timed-out call may take: it
/// is a courtesy, and the agent is waiting.
const CANCEL_TIMEOUT: Duration = Duration::from_millis(500);

/// Most `tools/list` pages read: a server that pages forever is cut off.
const MOST_PAGES: usize = 32;

impl Mcp {
    pub(super) const NAME: &'static str = "mcp";
    pub(super) const DOC: &'static str =
        "an MCP server over Streamable HTTP: chaos is the client, each attempt a tools/call ([mcp] in its target file; live only)";

    pub(crate) fn new(
        transport: Transport,
        path: String,
        identity: IdentityPlace,
        tools: BTreeMap<String, ToolMapping>,
        response: ResponseMapping,
    ) -> Mcp {
        let names = (tools.iter())
            .filter(|(tool, mapping)| **tool != mapping.name)
            .map(|(tool, mapping)| (tool.clone(), mapping.name.clone()))
            .collect();
        Mcp {
            transport,
            path,
            identity,
            tools,
            response,
            names,
            sessions: Sessions::Shared,
            state: Arc::default(),
        }
    }

    /// The same way in, its attempts on the sessions `sessions` says.
    pub(crate) fn with_sessions(self, sessions: Sessions) -> Mcp {
        Mcp { sessions, ..self }
    }

    fn tool_name<'a>(&'a self, tool: &'a str) -> &'a str {
        self.tools
            .get(tool)
            .map_or(tool, |mapping| mapping.name.as_str())
    }

    /// The `tools/call` params for one attempt.
    fn call_params(&self, values: &CallValues<'_>) -> Value {
        let model = values.arguments_object();
        let mut arguments = match self
            .tools
            .get(values.tool)
            .and_then(|mapping| mapping.arguments.as_ref())
        {
            Some(templates) => values.fill(templates, &model),
            None => model.clone(),
        };
        if let Some(mapping) = self.tools.get(values.tool) {
            for (name, templates) in &mapping.lists {
                let items = (templates.iter())
                    .map(|template| template.value(|name| values.lookup(&model, name)))
                    .collect();
                arguments.insert(name.clone(), Value::Array(items));
            }
        }
        let key = Value::String(values.operation_id.to_owned());
        let mut params = serde_json::Map::new();
        match &self.identity {
            IdentityPlace::Nowhere => {}
            IdentityPlace::Argument(name) => {
                arguments.insert(name.clone(), key);
            }
            IdentityPlace::Meta(name) => {
                params.insert("_meta".into(), json!({ name: key }));
            }
            IdentityPlace::Param(name) => {
                params.insert(name.clone(), key);
            }
        }
        params.insert("name".into(), self.tool_name(values.tool).into());
        params.insert("arguments".into(), Value::Object(arguments));
        Value::Object(params)
    }

    fn request(&self, body: &Value, session: Option<&Session>) -> Request {
        let mut request = Request::post(
            self.path.clone(),
            Bytes::from(serde_json::to_vec(body).unwrap_or_default()),
        )
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
        if let Some(session) = session {
            request = request.header("mcp-protocol-version", session.protocol.as_str());
            if let Some(id) = &session.id {
                request = request.header("mcp-session-id", id.as_str());
            }
        }
        request
    }

    fn id(&self) -> u64 {
        self.state.next_id.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The session with the server at `target`: the one it has, or a new
    /// one (`initialize`, `initialized`, `tools/list`).
    async fn session(
        &self,
        http: &Client,
        target: &str,
        timeout: Duration,
    ) -> Result<Session, Handshake> {
        if let Some(session) = lock(&self.state.sessions).get(target) {
            return Ok(session.clone());
        }
        let session = self.handshake(http, target, timeout, true).await?;
        lock(&self.state.sessions).insert(target.to_owned(), session.clone());
        Ok(session)
    }

    /// The session one attempt's `tools/call` goes on: the process's own,
    /// or with `sessions = "per-attempt"` a new one (its tools were listed
    /// when the process became ready, and a client of the same server
    /// would find the same list).
    async fn session_for_attempt(
        &self,
        http: &Client,
        target: &str,
        timeout: Duration,
    ) -> Result<Session, Handshake> {
        match self.sessions {
            Sessions::Shared => self.session(http, target, timeout).await,
            Sessions::PerAttempt => self.handshake(http, target, timeout, false).await,
        }
    }

    /// `initialize` and `initialized`, then `tools/list` when `list`.
    async fn handshake(
        &self,
        http: &Client,
        target: &str,
        timeout: Duration,
        list: bool,
    ) -> Result<Session, Handshake> {
        let id = self.id();
        let initialize = json!({
            "jsonrpc": "2.0", "id": id, "method": "initialize",
            "params": {
                "protocolVersion": protocol().to_string(),
                "capabilities": {},
                "clientInfo": {"name": "chaos", "version": env!("CARGO_PKG_VERSION")},
            }
        });
        let response = http
            .call(target, self.request(&initialize, None), timeout)
            .await
            .map_err(Handshake::Transport)?;
        let result = match read_message(&response, id) {
            Read::Result(result) => result,
            Read::Error { code, message } => {
                return Err(Handshake::Refused(format!(
                    "initialize was answered with JSON-RPC error {code}: {message}"
                )))
            }
            Read::Unreadable(why) => {
                return Err(Handshake::Refused(format!("initialize: {why}")));
            }
        };
        let session = Session {
            id: response.header_value("mcp-session-id").map(str::to_owned),
            protocol: result
                .get("protocolVersion")
                .and_then(Value::as_str)
                .unwrap_or(protocol().as_str())
                .to_owned(),
            number: self.state.initialized.load(Ordering::Relaxed) + 1,
        };
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let answer = http
            .call(target, self.request(&initialized, Some(&session)), timeout)
            .await
            .map_err(Handshake::Transport)?;
        if answer.status >= 400 {
            return Err(Handshake::Refused(format!(
                "the initialized notification was answered with status {}",
                answer.status
            )));
        }
        if list {
            self.list_tools(http, target, &session, timeout).await?;
        }
        self.state.initialized.fetch_add(1, Ordering::Relaxed);
        Ok(session)
    }

    /// Reads every page of `tools/list` into the state.
    async fn list_tools(
        &self,
        http: &Client,
        target: &str,
        session: &Session,
        timeout: Duration,
    ) -> Result<(), Handshake> {
        let mut listed = BTreeMap::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MOST_PAGES {
            let id = self.id();
            let params = match &cursor {
                Some(cursor) => json!({ "cursor": cursor }),
                None => json!({}),
            };
            let body =
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params});
            let response = http
                .call(target, self.request(&body, Some(session)), timeout)
                .await
                .map_err(Handshake::Transport)?;
            let page: ListToolsResult = match read_message(&response, id) {
                Read::Result(result) => serde_json::from_value(result).map_err(|error| {
                    Handshake::Refused(format!(
                        "tools/list answered a result that is not a tool list: {error}"
                    ))
                })?,
                Read::Error { code, message } => {
                    return Err(Handshake::Refused(format!(
                        "tools/list was answered with JSON-RPC error {code}: {message}"
                    )))
                }
                Read::Unreadable(why) => {
                    return Err(Handshake::Refused(format!("tools/list: {why}")))
                }
            };
            for tool in page.tools {
                listed.insert(tool.name.to_string(), tool);
            }
            match page.next_cursor {
                Some(next) if !next.is_empty() => cursor = Some(next.to_string()),
                _ => break,
            }
        }
        *lock(&self.state.listed) = listed;
        Ok(())
    }

    /// Whether every tool the file maps is one the server lists; why not.
    fn check_listed(&self) -> Result<(), String> {
        let listed = lock(&self.state.listed);
        let missing: Vec<&str> = (self.tools.values())
            .map(|mapping| mapping.name.as_str())
            .filter(|name| !listed.contains_key(*name))
            .collect();
        if missing.is_empty() {
            return self.check_templates(&listed);
        }
        Err(format!(
            "[mcp.tools] maps to {}, which the server does not list; it lists {}. Fix the tool names in the target file's [mcp.tools]",
            quoted(missing.iter().copied()),
            if listed.is_empty() {
                "no tools".to_owned()
            } else {
                quoted(listed.keys().map(String::as_str))
            }
        ))
    }

    /// Why the input schema the server lists for the tool rejects the
    /// arguments of `params` (a `tools/call`'s), when it does: the
    /// `[mcp.tools]` templates, or the scenario's arguments, do not fit the
    /// tool. A schema that does not compile is the server's to fix, and
    /// checks nothing here.
    fn schema_rejects(&self, tool: &str, params: &Value) -> Option<String> {
        let name = self.tool_name(tool);
        let schema = {
            let listed = lock(&self.state.listed);
            Value::Object((*listed.get(name)?.input_schema).clone())
        };
        let validator = jsonschema::validator_for(&schema).ok()?;
        let arguments = params.get("arguments").cloned().unwrap_or(json!({}));
        let error = validator.validate(&arguments).err()?;
        let at = error.instance_path().to_string();
        Some(format!(
            "the input schema tool '{name}' lists rejects the arguments chaos would send for {tool}: {error}{}; their values: {}. Fix the templates in the target file's [mcp.tools.{tool}] arguments (they were not sent)",
            if at.is_empty() { String::new() } else { format!(" (at {at})") },
            first_line(&arguments.to_string())
        ))
    }

    /// Whether each argument template fits the type the tool's input schema
    /// gives the argument: a template that renders text where the schema
    /// takes no string is refused before any call (each call would be).
    fn check_templates(&self, listed: &BTreeMap<String, Tool>) -> Result<(), String> {
        for (tool, mapping) in &self.tools {
            let (Some(templates), Some(listed)) = (&mapping.arguments, listed.get(&mapping.name))
            else {
                continue;
            };
            let properties = listed
                .input_schema
                .get("properties")
                .and_then(Value::as_object);
            for (name, _) in templates.iter().filter(|(_, template)| template.is_text()) {
                let Some(kind) = properties
                    .and_then(|properties| properties.get(name))
                    .and_then(|property| property.get("type"))
                else {
                    continue;
                };
                let takes_text = match kind {
                    Value::String(kind) => kind == "string",
                    Value::Array(kinds) => kinds.iter().any(|kind| kind == "string"),
                    _ => true,
                };
                if !takes_text {
                    return Err(format!(
                        "[mcp.tools.{tool}] arguments.{name} renders text, and the input schema tool '{}' lists gives {name} the type {kind}: make the template one placeholder alone (\"{{amount_cents}}\" keeps the argument's type) or map another argument. Fix the target file's [mcp.tools.{tool}]",
                        mapping.name
                    ));
                }
            }
        }
        Ok(())
    }

    /// Tells the server chaos gave up on request `id` (MCP's own cancel).
    async fn cancel(&self, http: &Client, target: &str, session: &Session, id: u64, attempt: &str) {
        let body = json!({
            "jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": id, "reason": "chaos: the agent's timeout passed"}
        });
        // Recorded whether or not the server took it: the client sent it.
        lock(&self.state.cancelled).push(per_trial(target, attempt));
        let _ = http
            .call(target, self.request(&body, Some(session)), CANCEL_TIMEOUT)
            .await;
    }

    async fn call(
        &self,
        http: &Client,
        target: &str,
        outgoing: &Outgoing<'_>,
    ) -> Result<Reply, CallFailure> {
        let deadline = tokio::time::Instant::now() + outgoing.timeout;
        let left = || deadline.saturating_duration_since(tokio::time::Instant::now());
        let attempt = outgoing
            .identities
            .iter()
            .find(|(name, _)| *name == ATTEMPT_ID)
            .map_or("", |(_, value)| *value);
        // A server that lost the session (restarted) says 404: a new
        // session, and the call once more, which it never processed.
        for _ in 0..2 {
            let session = match self.session_for_attempt(http, target, left()).await {
                Ok(session) => session,
                Err(Handshake::Transport(failure)) => return Err(failure),
                Err(Handshake::Refused(why)) => return Ok(unknown(200, why)),
            };
            let id = self.id();
            let mut params = self.call_params(outgoing.values);
            if self.transport == Transport::Stdio {
                // No headers on a pipe: what they carry goes in `_meta`.
                let mut headers = serde_json::Map::new();
                for (name, value) in outgoing.identities {
                    headers.insert(name.to_ascii_lowercase(), Value::from(*value));
                }
                headers.insert(
                    "authorization".into(),
                    format!("Bearer {}", outgoing.values.token).into(),
                );
                let meta = params
                    .as_object_mut()
                    .map(|params| params.entry("_meta").or_insert_with(|| json!({})));
                if let Some(Value::Object(meta)) = meta {
                    meta.insert(STDIO_HEADERS_META.into(), Value::Object(headers));
                }
            }
            if let Some(why) = self.schema_rejects(outgoing.values.tool, &params) {
                // Not sent: a call the server must refuse tests nothing.
                return Ok(Reply {
                    answer: Answer {
                        status: 0,
                        outcome: Outcome::Unknown,
                        receipt: None,
                        disclosed_result: false,
                        records: Vec::new(),
                        reason: None,
                        unread: Some(why),
                    },
                    retry_after: None,
                });
            }
            let body = json!({
                "jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": params,
            });
            let mut request = self.request(&body, Some(&session));
            for (name, value) in outgoing.headers {
                request = request.header(name, value.as_str());
            }
            for (name, value) in outgoing.identities {
                request = request.header(name, *value);
            }
            request = request.header("authorization", format!("Bearer {}", outgoing.values.token));
            // Recorded when sent: a call whose answer is lost went on it too.
            lock(&self.state.session_of).insert(per_trial(target, attempt), session.label());
            let response = match http.call(target, request, left()).await {
                Ok(response) => response,
                Err(CallFailure::Timeout) => {
                    self.cancel(http, target, &session, id, attempt).await;
                    return Err(CallFailure::Timeout);
                }
                Err(failure) => {
                    if failure == CallFailure::Refused {
                        // Nobody listens: whatever comes up next is a new process.
                        lock(&self.state.sessions).remove(target);
                    }
                    return Err(failure);
                }
            };
            if response.status == 404 && session.id.is_some() {
                lock(&self.state.sessions).remove(target);
                continue;
            }
            {
                let mut answered = lock(&self.state.answered);
                if answered.len() >= MOST_ANSWERED {
                    answered.clear();
                }
                answered.insert(
                    per_trial(target, attempt),
                    SentCall {
                        id,
                        session: session.clone(),
                        resume_from: resume::resume_point(&response, id),
                    },
                );
            }
            return Ok(Reply {
                answer: self.read_call(&response, id),
                retry_after: super::mapped::retry_after(&response),
            });
        }
        Ok(unknown(
            404,
            "the server answered 404 for a session it had just opened".into(),
        ))
    }

    /// The answer to `tools/call` request `id`.
    fn read_call(&self, response: &Response, id: u64) -> Answer {
        let result = match read_message(response, id) {
            Read::Result(result) => result,
            Read::Error { code, message } => return by_code(response.status, code, message),
            Read::Unreadable(why) => return unknown(response.status, why).answer,
        };
        let result: CallToolResult = match serde_json::from_value(result) {
            Ok(result) => result,
            Err(error) => {
                return unknown(
                    response.status,
                    format!("its tools/call result is not a CallToolResult: {error}"),
                )
                .answer
            }
        };
        let text = (result.content.iter())
            .find_map(|content| content.as_text().map(|text| text.text.clone()));
        if result.is_error == Some(true) {
            return Answer {
                status: response.status,
                outcome: Outcome::Failed,
                receipt: None,
                disclosed_result: false,
                records: Vec::new(),
                reason: Some(format!(
                    "the tool answered isError: true{}",
                    text.map(|text| format!(": {}", first_line(&text)))
                        .unwrap_or_default()
                )),
                unread: None,
            };
        }
        // What `[response]` reads: the structured content, or the JSON in
        // the first text content (servers written before structured output).
        let body = match (&result.structured_content, &text) {
            (Some(structured), _) => serde_json::to_vec(structured).unwrap_or_default(),
            (None, Some(text)) if serde_json::from_str::<Value>(text).is_ok() => {
                text.clone().into_bytes()
            }
            (None, _) => b"{}".to_vec(),
        };
        self.response
            .interpret(&Response::new(200).body(Bytes::from(body)))
    }

    /// The suite's tools the file maps (`[mcp.tools]`), sorted.
    pub(crate) fn mapped_tools(&self) -> Vec<String> {
        self.tools.keys().cloned().collect()
    }

    /// Every tool the server listed at its last handshake, by name: what
    /// `chaos init-target --mcp` writes a target file from.
    pub(crate) fn listed(&self) -> Vec<Tool> {
        lock(&self.state.listed).values().cloned().collect()
    }

    /// What the server declared of the tools `called` (scenario tools).
    fn declared(&self, called: &BTreeSet<String>) -> Vec<DeclaredTool> {
        let listed = lock(&self.state.listed);
        called
            .iter()
            .filter_map(|tool| {
                let name = self.tool_name(tool);
                let listed = listed.get(name)?;
                let hints = listed.annotations.clone().unwrap_or_default();
                Some(DeclaredTool {
                    tool: tool.clone(),
                    mcp_tool: name.to_owned(),
                    read_only: hints.read_only_hint,
                    destructive: hints.destructive_hint,
                    idempotent: hints.idempotent_hint,
                    open_world: hints.open_world_hint,
                })
            })
            .collect()
    }
}

impl Way for Mcp {
    fn tool_names(&self) -> &BTreeMap<String, String> {
        &self.names
    }

    fn reads_its_own_outcomes(&self) -> bool {
        self.response.outcome.is_some()
    }

    fn admit(&self, _calls: &[CallArguments], _target: &str) -> Result<(), String> {
        let placeholders = |mapping: &ToolMapping| -> Vec<String> {
            (mapping.arguments.iter().flat_map(BTreeMap::values))
                .chain(mapping.lists.values().flatten())
                .flat_map(Template::placeholders)
                .filter(|name| !super::mapped::BUILT_IN.contains(name))
                .map(str::to_owned)
                .collect()
        };
        for call in _calls {
            let Some(mapping) = self.tools.get(&call.tool) else {
                continue;
            };
            if let Some(name) = placeholders(mapping)
                .into_iter()
                .find(|name| !call.arguments.contains(name))
            {
                return Err(format!(
                    "target '{_target}' [mcp.tools.{}] uses {{{name}}}, and call {} (operation '{}') has no argument '{name}': its arguments are {}. Fix the placeholder in the target file, or run a scenario whose calls have it",
                    call.tool,
                    call.call,
                    call.operation,
                    call.arguments
                        .iter()
                        .map(|name| format!("{{{name}}}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        Ok(())
    }

    fn send<'a>(
        &'a self,
        http: &'a Client,
        target: &'a str,
        outgoing: &'a Outgoing<'a>,
    ) -> Sending<'a> {
        Box::pin(self.call(http, target, outgoing))
    }

    fn ready<'a>(
        &'a self,
        http: &'a Client,
        target: &'a str,
        timeout: Duration,
        new_process: bool,
    ) -> Readying<'a> {
        Box::pin(async move {
            // A new process: a new session, and its tools listed anew.
            if new_process {
                lock(&self.state.sessions).remove(target);
            }
            match self.session(http, target, timeout).await {
                Ok(_) => match self.check_listed() {
                    Ok(()) => Ready::Yes,
                    Err(why) => Ready::Refused(why),
                },
                Err(Handshake::Transport(failure)) => {
                    Ready::NotYet(format!("initialize: {failure}"))
                }
                Err(Handshake::Refused(why)) => Ready::NotYet(why),
            }
        })
    }

    fn timed_out<'a>(
        &'a self,
        http: &'a Client,
        target: &'a str,
        attempt: &'a str,
    ) -> Cancelling<'a> {
        Box::pin(async move {
            let answered = lock(&self.state.answered).remove(&per_trial(target, attempt));
            if let Some(sent) = answered {
                self.cancel(http, target, &sent.session, sent.id, attempt)
                    .await;
            }
        })
    }

    fn resume<'a>(&'a self, http: &'a Client, target: &'a str, attempt: &'a str) -> Resuming<'a> {
        Box::pin(self.resume_stream(http, target, attempt))
    }

    fn readiness(&self, addr: &str) -> String {
        match self.transport {
            Transport::StreamableHttp => format!(
                "complete MCP initialize and tools/list at http://{addr}{}",
                self.path
            ),
            Transport::Stdio => {
                "complete MCP initialize and tools/list over its stdin and stdout".to_owned()
            }
        }
    }

    fn stdio(&self) -> bool {
        self.transport == Transport::Stdio
    }

    fn listens(&self) -> bool {
        // Over stdio, chaos's bridge holds the port, not the server.
        self.transport == Transport::StreamableHttp
    }

    fn seen(
        &self,
        target: &str,
        called: &BTreeSet<String>,
        attempts: &BTreeSet<&str>,
    ) -> Option<McpSeen> {
        // Taken out: the trial has ended, and the run's maps stay small.
        let take = |map: &Mutex<HashMap<String, String>>| {
            let mut map = lock(map);
            (attempts.iter())
                .filter_map(|attempt| {
                    let value = map.remove(&per_trial(target, attempt))?;
                    Some(((*attempt).to_owned(), value))
                })
                .collect()
        };
        Some(McpSeen {
            tools: self.declared(called),
            cancelled: {
                let mut cancelled = lock(&self.state.cancelled);
                let (ours, others): (Vec<String>, Vec<String>) = std::mem::take(&mut *cancelled)
                    .into_iter()
                    .partition(|key| {
                        attempts
                            .iter()
                            .any(|attempt| *key == per_trial(target, attempt))
                    });
                *cancelled = others;
                (ours.iter())
                    .filter_map(|key| key.split_once(' ').map(|(_, attempt)| attempt.to_owned()))
                    .collect()
            },
            sessions: self.state.initialized.load(Ordering::Relaxed),
            resumed: {
                let mut resumed = lock(&self.state.resumed);
                (attempts.iter())
                    .filter_map(|attempt| {
                        let resumed = resumed.remove(&per_trial(target, attempt))?;
                        Some(((*attempt).to_owned(), resumed))
                    })
                    .collect()
            },
            session_of: take(&self.state.session_of),
        })
    }
}

/// The key of an attempt in the run's maps: its id with the address of the
/// process it went to. Attempt ids repeat across trials of the same seed,
/// and with `parallel` such trials run at once, each on a process (and
/// port) of its own.
pub(super) fn per_trial(target: &str, attempt: &str) -> String {
    format!("{target} {attempt}")
}

/// How a handshake failed.
enum Handshake {
    /// No answer: the server is not up (yet), or went away.
    Transport(CallFailure),
    /// An answer chaos cannot go on with.
    Refused(String),
}

/// One JSON-RPC response, read.
enum Read {
    Result(Value),
    Error { code: i64, message: String },
    Unreadable(String),
}

/// The header chaos's stdio bridge marks its answers with: the body is a
/// line the server wrote to its stdout.
pub(crate) const STDIO_LINE: &str = "x-chaos-stdio-line";

/// The JSON-RPC response to request `id` in an answer: a JSON body, or an
/// SSE stream (`text/event-stream`) whose events carry JSON-RPC messages,
/// of which the one with our id is the response (others are the server's
/// notifications and requests, which chaos does not take up).
fn read_message(response: &Response, id: u64) -> Read {
    // chaos's stdio bridge answers with the line the server wrote.
    let from = if response.header_value(STDIO_LINE).is_some() {
        "the line on its stdout".to_owned()
    } else {
        format!("the answer (status {})", response.status)
    };
    if response.status >= 400 && response.body.is_empty() {
        return Read::Unreadable(format!(
            "the server answered status {} with no body",
            response.status
        ));
    }
    let stream = response
        .header_value("content-type")
        .is_some_and(|kind| kind.starts_with("text/event-stream"));
    let messages: Vec<Value> = if stream {
        sse_data(&response.body)
            .iter()
            .filter_map(|data| serde_json::from_str(data).ok())
            .collect()
    } else {
        match serde_json::from_slice::<Value>(&response.body) {
            Ok(Value::Array(batch)) => batch,
            Ok(message) => vec![message],
            Err(_) => {
                return Read::Unreadable(format!(
                    "{from} is not JSON-RPC: {}",
                    first_line(&String::from_utf8_lossy(&response.body))
                ))
            }
        }
    };
    let ours = messages
        .iter()
        .find(|message| message.get("id").and_then(Value::as_u64) == Some(id));
    let Some(message) = ours else {
        let others: Vec<String> = messages
            .iter()
            .filter(|message| message.get("result").is_some() || message.get("error").is_some())
            .filter_map(|message| message.get("id").map(Value::to_string))
            .collect();
        return Read::Unreadable(if others.is_empty() {
            format!("{from} holds no response to request {id}")
        } else {
            format!(
                "the server answered request id {} and never request {id}: a result for an id it was never sent",
                others.join(", ")
            )
        });
    };
    if let Some(result) = message.get("result") {
        return Read::Result(result.clone());
    }
    match message.get("error") {
        Some(error) => Read::Error {
            code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
            message: error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
        },
        None => Read::Unreadable(format!(
            "the response to request {id} has neither result nor error"
        )),
    }
}

/// The `data` of each event of an SSE stream (WHATWG HTML §9.2.6): lines
/// starting `data:` joined by newlines, events ended by a blank line. The
/// body arrives whole (the stream ends with the response), so there is no
/// incremental parser to feed.
fn sse_data(body: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(body);
    let mut events = Vec::new();
    let mut data: Vec<&str> = Vec::new();
    for line in text
        .split('\n')
        .map(|line| line.strip_suffix('\r').unwrap_or(line))
    {
        if line.is_empty() {
            if !data.is_empty() {
                events.push(data.join("\n"));
                data.clear();
            }
        } else if let Some(value) = line.strip_prefix("data:") {
            data.push(value.strip_prefix(' ').unwrap_or(value));
        }
    }
    if !data.is_empty() {
        events.push(data.join("\n"));
    }
    events
}

/// A JSON-RPC error to `tools/call`, read by its code (JSON-RPC 2.0 §5.1):
/// the request was malformed, named no method or had params the server
/// refused (an unknown tool, arguments its input schema rejects) and was
/// not processed: `rejected`; any other error may come after the tool
/// acted: `unknown`.
fn by_code(status: u16, code: i64, message: String) -> Answer {
    let outcome = match code {
        -32700 | -32600 | -32601 | -32602 => Outcome::Rejected,
        _ => Outcome::Unknown,
    };
    Answer {
        status,
        outcome,
        receipt: None,
        disclosed_result: false,
        records: Vec::new(),
        reason: Some(format!("JSON-RPC error {code}: {}", first_line(&message))),
        unread: None,
    }
}

fn unknown(status: u16, why: String) -> Reply {
    Reply {
        answer: Answer {
            status,
            outcome: Outcome::Unknown,
            receipt: None,
            disclosed_result: false,
            records: Vec::new(),
            reason: None,
            unread: Some(format!("chaos could not read the MCP answer: {why}")),
        },
        retry_after: None,
    }
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or("").trim();
    line.chars().take(200).collect()
}

fn quoted<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names
        .map(|name| format!("'{name}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mcp(identity: IdentityPlace) -> Mcp {
        Mcp::new(
            Transport::StreamableHttp,
            "/mcp".into(),
            identity,
            BTreeMap::from([(
                "charge_card".to_owned(),
                ToolMapping {
                    name: "create_charge".into(),
                    arguments: Some(BTreeMap::from([
                        (
                            "amount".to_owned(),
                            Template::parse("{amount_cents}").unwrap(),
                        ),
                        ("note".to_owned(), Template::parse("for {invoice}").unwrap()),
                    ])),
                    lists: BTreeMap::from([(
                        "to".to_owned(),
                        vec![Template::parse("{recipient}").unwrap()],
                    )]),
                },
            )]),
            ResponseMapping {
                outcome: Some("/status".into()),
                outcomes: BTreeMap::from([("succeeded".to_owned(), Outcome::Applied)]),
                receipt: Some("/id".into()),
                ..ResponseMapping::default()
            },
        )
    }

    fn values(arguments: &Bytes) -> CallValues<'_> {
        CallValues {
            tool: "charge_card",
            operation_id: "op-1",
            token: "tok",
            arguments,
        }
    }

    const ARGUMENTS: &[u8] =
        br#"{"invoice":"inv-1","amount_cents":4999,"recipient":"billing@a.example"}"#;

    #[test]
    fn a_call_is_mapped_and_its_identity_goes_where_the_file_says() {
        let arguments = Bytes::from_static(ARGUMENTS);
        let plain = mcp(IdentityPlace::Nowhere).call_params(&values(&arguments));
        assert_eq!(
            plain,
            json!({"name": "create_charge", "arguments": {
                "amount": 4999, "note": "for inv-1", "to": ["billing@a.example"]}})
        );
        let argument =
            mcp(IdentityPlace::Argument("idempotency_key".into())).call_params(&values(&arguments));
        assert_eq!(argument["arguments"]["idempotency_key"], "op-1");
        let meta = mcp(IdentityPlace::Meta("io.example/idempotency-key".into()))
            .call_params(&values(&arguments));
        assert_eq!(meta["_meta"], json!({"io.example/idempotency-key": "op-1"}));
        assert_eq!(meta["arguments"].as_object().unwrap().len(), 3);
        let param =
            mcp(IdentityPlace::Param("idempotencyKey".into())).call_params(&values(&arguments));
        assert_eq!(param["idempotencyKey"], "op-1");
        // A tool the file does not map goes by its own name, arguments as written.
        let other = CallValues {
            tool: "send_reminder",
            ..values(&arguments)
        };
        assert_eq!(
            mcp(IdentityPlace::Nowhere).call_params(&other),
            json!({"name": "send_reminder", "arguments": {
                "invoice": "inv-1", "amount_cents": 4999, "recipient": "billing@a.example"}})
        );
    }

    #[test]
    fn a_renamed_tool_goes_to_the_authority_by_the_servers_name() {
        let mut renamed = mcp(IdentityPlace::Nowhere);
        assert_eq!(
            Way::tool_names(&renamed),
            &BTreeMap::from([("charge_card".to_owned(), "create_charge".to_owned())])
        );
        // A tool mapped to its own name renames nothing.
        renamed = Mcp::new(
            Transport::StreamableHttp,
            "/mcp".into(),
            IdentityPlace::Nowhere,
            BTreeMap::from([(
                "send_reminder".to_owned(),
                ToolMapping {
                    name: "send_reminder".into(),
                    arguments: None,
                    lists: BTreeMap::new(),
                },
            )]),
            ResponseMapping::default(),
        );
        assert!(Way::tool_names(&renamed).is_empty());
    }

    fn answer(body: Value) -> Answer {
        mcp(IdentityPlace::Nowhere).read_call(&Response::json(200, &body), 7)
    }

    #[test]
    fn structured_content_text_json_and_is_error_are_read() {
        let structured = answer(json!({"jsonrpc": "2.0", "id": 7, "result": {
            "content": [], "structuredContent": {"status": "succeeded", "id": "ch_1"}}}));
        assert_eq!(
            (structured.outcome, structured.receipt.as_deref()),
            (Outcome::Applied, Some("ch_1"))
        );
        let text = answer(json!({"jsonrpc": "2.0", "id": 7, "result": {
            "content": [{"type": "text", "text": "{\"status\": \"succeeded\", \"id\": 9}"}]}}));
        assert_eq!(
            (text.outcome, text.receipt.as_deref()),
            (Outcome::Applied, Some("9"))
        );
        let error = answer(json!({"jsonrpc": "2.0", "id": 7, "result": {
            "content": [{"type": "text", "text": "card declined"}], "isError": true}}));
        assert_eq!(error.outcome, Outcome::Failed);
        assert_eq!(
            error.reason.as_deref(),
            Some("the tool answered isError: true: card declined")
        );
    }

    #[test]
    fn json_rpc_errors_are_read_by_code_and_a_stranger_id_is_unknown() {
        let invalid = answer(
            json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32602, "message": "amount: must be an integer"}}),
        );
        assert_eq!(invalid.outcome, Outcome::Rejected);
        assert!(invalid
            .reason
            .unwrap()
            .contains("-32602: amount: must be an integer"));
        let internal = answer(
            json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32603, "message": "boom"}}),
        );
        assert_eq!(internal.outcome, Outcome::Unknown);
        let stranger = answer(json!({"jsonrpc": "2.0", "id": 99, "result": {"content": []}}));
        assert_eq!(stranger.outcome, Outcome::Unknown);
        assert!(stranger
            .unread
            .unwrap()
            .contains("answered request id 99 and never request 7"));
        let garbage = mcp(IdentityPlace::Nowhere).read_call(&Response::new(200).body("hello"), 7);
        assert!(garbage.unread.unwrap().contains("not JSON-RPC: hello"));
    }

    #[test]
    fn an_event_stream_is_read_for_the_response_with_our_id() {
        let body = "id: 0\nretry: 3000\ndata: \n\n: keep-alive\n\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":\r\ndata: {\"structuredContent\":{\"status\":\"succeeded\",\"id\":\"ch_2\"},\"content\":[]}}\r\n\r\n";
        let response = Response::new(200)
            .header("content-type", "text/event-stream")
            .body(body);
        let answer = mcp(IdentityPlace::Nowhere).read_call(&response, 7);
        assert_eq!(
            (answer.outcome, answer.receipt.as_deref()),
            (Outcome::Applied, Some("ch_2")),
            "{answer:?}"
        );
    }
}
