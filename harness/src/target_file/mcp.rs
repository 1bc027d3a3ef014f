//! `[mcp]`: the target is an MCP server, chaos its client
//! (docs/target-protocol.md §1.4).
//!
//! ```toml
//! [mcp]
//! transport = "streamable-http"          # the server listens on {listen.addr}
//! path = "/mcp"                          # optional: where it answers MCP
//! identity = { meta = "io.example/idempotency-key" }   # optional: "nowhere" (default),
//!                                        # { argument = "..." }, { meta = "..." } or { param = "..." }
//! sessions = "shared"                    # optional: or "per-attempt", a session per tools/call
//! [mcp.tools.charge_card]                # optional, per scenario tool
//! name = "create_charge"                 # the server's tool
//! arguments = { amount = "{amount_cents}", memo = "for {invoice}", to = ["{recipient}"] }
//! ```
//!
//! `[response]` reads the tool's result (its `structuredContent`, or the
//! JSON in its first text content); `[request]` and `[status]` are HTTP's
//! and are refused beside it.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use crate::input::{Errors, FileError};
use crate::way_in::mapped::{ResponseMapping, Template};
use crate::way_in::mcp::{IdentityPlace, ToolMapping};
use crate::way_in::Mcp;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct McpFile {
    transport: Transport,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    identity: Option<IdentityFile>,
    #[serde(default)]
    tools: BTreeMap<String, ToolFile>,
    #[serde(default)]
    sessions: Option<SessionsFile>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum SessionsFile {
    Shared,
    PerAttempt,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Transport {
    StreamableHttp,
    Stdio,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum IdentityFile {
    Word(String),
    Place(PlaceFile),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlaceFile {
    #[serde(default)]
    argument: Option<String>,
    #[serde(default)]
    meta: Option<String>,
    #[serde(default)]
    param: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolFile {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<BTreeMap<String, ArgumentFile>>,
}

/// One argument's template, or a list of them (sent as a JSON array).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ArgumentFile {
    One(String),
    List(Vec<String>),
}

const IDENTITY_CHOICES: &str = "identity = \"nowhere\" (a plain MCP client), { argument = \"idempotency_key\" }, { meta = \"io.example/idempotency-key\" } or { param = \"idempotencyKey\" } (SEP-3182's field)";

impl McpFile {
    fn validate(self, response: Option<ResponseMapping>) -> Result<Mcp, String> {
        let transport = match self.transport {
            Transport::StreamableHttp => crate::way_in::mcp::Transport::StreamableHttp,
            Transport::Stdio => crate::way_in::mcp::Transport::Stdio,
        };
        if let (Transport::Stdio, Some(path)) = (self.transport, &self.path) {
            return Err(format!("mcp.path '{path}' is where a Streamable HTTP server answers, and a stdio server has none: remove it"));
        }
        let sessions = match (self.sessions, self.transport) {
            (None | Some(SessionsFile::Shared), _) => crate::way_in::mcp::Sessions::Shared,
            (Some(SessionsFile::PerAttempt), Transport::StreamableHttp) => {
                crate::way_in::mcp::Sessions::PerAttempt
            }
            (Some(SessionsFile::PerAttempt), Transport::Stdio) => {
                return Err("mcp.sessions \"per-attempt\" opens a session per tools/call, and a stdio server has one: its pipes. Use \"shared\" (the default) with transport = \"stdio\", or serve Streamable HTTP".to_owned())
            }
        };
        let path = match self.path {
            Some(path) if path.starts_with('/') => path,
            Some(path) => {
                return Err(format!(
                    "mcp.path '{path}' must start with '/', e.g. \"/mcp\""
                ))
            }
            None => "/mcp".to_owned(),
        };
        let named = |what: &str, name: String| {
            if name.trim().is_empty() {
                Err(format!(
                    "mcp.identity {what} must name one; {IDENTITY_CHOICES}"
                ))
            } else {
                Ok(name)
            }
        };
        let identity = match self.identity {
            None => IdentityPlace::Nowhere,
            Some(IdentityFile::Word(word)) if word == "nowhere" => IdentityPlace::Nowhere,
            Some(IdentityFile::Word(word)) => {
                return Err(format!(
                    "mcp.identity \"{word}\" is not a place; {IDENTITY_CHOICES}"
                ))
            }
            Some(IdentityFile::Place(PlaceFile {
                argument: Some(name),
                meta: None,
                param: None,
            })) => IdentityPlace::Argument(named("argument", name)?),
            Some(IdentityFile::Place(PlaceFile {
                argument: None,
                meta: Some(name),
                param: None,
            })) => IdentityPlace::Meta(named("meta", name)?),
            Some(IdentityFile::Place(PlaceFile {
                argument: None,
                meta: None,
                param: Some(name),
            })) => {
                if ["name", "arguments", "_meta"].contains(&name.as_str()) {
                    return Err(format!("mcp.identity param '{name}' is one of tools/call's own params; name another, e.g. \"idempotencyKey\""));
                }
                IdentityPlace::Param(named("param", name)?)
            }
            Some(IdentityFile::Place(_)) => {
                return Err(format!("mcp.identity names one place; {IDENTITY_CHOICES}"))
            }
        };
        let mut tools = BTreeMap::new();
        for (tool, file) in self.tools {
            let mut lists = BTreeMap::new();
            let arguments = match file.arguments {
                Some(arguments) => {
                    let mut templates = BTreeMap::new();
                    for (name, argument) in arguments {
                        if let IdentityPlace::Argument(key) = &identity {
                            if *key == name {
                                return Err(format!("mcp.tools.{tool}.arguments.{name}: the operation id goes in this argument (mcp.identity); leave it out of the template"));
                            }
                        }
                        let parse = |text: &str| {
                            Template::parse(text)
                                .map_err(|why| format!("mcp.tools.{tool}.arguments.{name}: {why}"))
                        };
                        match argument {
                            ArgumentFile::One(text) => {
                                let template = parse(&text)?;
                                templates.insert(name, template);
                            }
                            ArgumentFile::List(texts) => {
                                let items = texts.iter().map(|text| parse(text));
                                let items = items.collect::<Result<Vec<_>, _>>()?;
                                lists.insert(name, items);
                            }
                        }
                    }
                    Some(templates)
                }
                None => None,
            };
            let name = match file.name {
                Some(name) if name.trim().is_empty() => {
                    return Err(format!(
                        "mcp.tools.{tool}.name is empty; name the server's tool, or leave it out to call '{tool}'"
                    ))
                }
                Some(name) => name,
                None => tool.clone(),
            };
            tools.insert(
                tool,
                ToolMapping {
                    name,
                    arguments,
                    lists,
                },
            );
        }
        Ok(Mcp::new(
            transport,
            path,
            identity,
            tools,
            response.unwrap_or_default(),
        )
        .with_sessions(sessions))
    }
}

/// The MCP way in, when the file has an `[mcp]` table. `request` and
/// `status` say whether the file has those HTTP tables too.
pub(super) fn validate(
    table: Option<Spanned<McpFile>>,
    response: Option<ResponseMapping>,
    request: bool,
    status: bool,
    errors: &Errors<'_>,
) -> Result<Option<Mcp>, FileError> {
    let Some(mcp) = table else {
        return Ok(None);
    };
    let span = mcp.span();
    if request {
        return Err(errors.at(span, "[mcp] and [request] both say how a call reaches the target: an MCP server is called with tools/call, so remove [request] (map the tools' arguments in [mcp.tools.<tool>] instead)".into()));
    }
    if status {
        return Err(errors.at(span, "[status] reads HTTP statuses, and an MCP tool's answer has none: remove [status], and read the result's outcome with [response] outcome and [response.outcomes]".into()));
    }
    mcp.into_inner()
        .validate(response)
        .map(Some)
        .map_err(|message| errors.at(span, message))
}
