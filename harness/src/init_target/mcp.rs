//! `chaos init-target --mcp -- CMD...`: a target file for an MCP server,
//! written from what the server itself lists. chaos starts CMD the way a run
//! would (stdio, or Streamable HTTP on `{listen.addr}`), completes the
//! handshake, reads every page of `tools/list`, and writes:
//!
//! - every tool the server lists, as a comment: its annotations and its
//!   arguments (type, required), so the user sees what they are mapping;
//! - `[mcp.tools.<suite tool>]` for each tool the suite calls, mapped to the
//!   server tool whose name fits it best (never one declaring
//!   `readOnlyHint: true`: the suite's tools have effects), with the
//!   arguments its input schema asks for filled from the suite's arguments
//!   by name; a required argument nothing fits is written as an `EDIT` line,
//!   so the run's schema check names it rather than a guess hiding it;
//! - an argument that looks like an idempotency key becomes the file's
//!   `identity`, since that is where the server reads the call's identity.
//!
//! Everything the server sends is untrusted text: names and descriptions go
//! into comments with control characters and line breaks removed, and into
//! values only TOML-escaped; the file is parsed before it is written.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use rmcp::model::Tool;
use serde_json::Value;

use super::{destination, detect, provider_section, put, toml_list, Detected};
use crate::error::Error;
use crate::scenario::{builtin, Scenario};
use crate::target_file::TargetFile;

/// How chaos reaches the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Transport {
    /// chaos owns the server's stdin and stdout.
    Stdio,
    /// The server listens on `{listen.addr}`; its environment must say so
    /// (`--env`).
    StreamableHttp,
}

/// What the user asked for.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub dir: PathBuf,
    pub out: Option<PathBuf>,
    pub force: bool,
    pub transport: Transport,
    pub path: Option<String>,
    /// `NAME=VALUE` lines for `[env]`, placeholders allowed.
    pub env: Vec<(String, String)>,
    pub command: Vec<String>,
}

/// What was written, for the command's summary.
#[derive(Debug)]
pub(crate) struct Written {
    pub path: PathBuf,
    /// Each listed tool: its name and its declared hints, in one line.
    pub listed: Vec<String>,
    /// Suite tool -> server tool.
    pub mapped: BTreeMap<String, String>,
    /// Suite tools no listed tool fits.
    pub unmapped: Vec<String>,
    /// `(suite tool, argument)` the user must fill in.
    pub edits: Vec<(String, String)>,
    pub detected: Detected,
}

/// Starts the server, lists its tools and writes the target file. `Ok(None)`
/// when a signal cancelled it.
pub(crate) fn write(request: Request, cancel: &AtomicBool) -> Result<Option<Written>, Error> {
    if request.command.is_empty() {
        return Err(Error::Usage(
            "name the MCP server's command after --, e.g. chaos init-target --mcp -- npx -y @modelcontextprotocol/server-everything".into(),
        ));
    }
    let out =
        destination(&request.dir, request.out.clone(), request.force).map_err(Error::Usage)?;
    let detected = detect(&request.dir);
    let start = start_section(&request, &detected);
    // The same file without its tool map: what starts the server to list.
    let provisional = format!("{start}\n[mcp]\n{}", transport_lines(&request));
    let file = TargetFile::parse(&out, &provisional)
        .map_err(|error| Error::Usage(format!("the server cannot be started as given: {error}")))?;
    let tools = match crate::live::listing::mcp_tools(&file, cancel) {
        Ok(Some(tools)) => tools,
        Ok(None) => return Ok(None),
        Err(error) => {
            return Err(Error::TargetNotReady(format!(
                "could not list the MCP server's tools: {error}"
            )))
        }
    };
    let suite = suite_tools();
    let plan = Plan::of(&tools, &suite);
    let text = render(&request, &start, &tools, &plan);
    // Never write a file chaos itself would refuse.
    TargetFile::parse(&out, &text).map_err(|error| {
        Error::Usage(format!(
            "the target file written from the server's tools does not parse ({error}); please report this, with the server's tools/list"
        ))
    })?;
    put(&out, &text, request.force).map_err(Error::Usage)?;
    Ok(Some(Written {
        path: out,
        listed: tools.iter().map(listed_line).collect(),
        mapped: (plan.tools.iter())
            .map(|(suite, mapped)| (suite.clone(), mapped.server.clone()))
            .collect(),
        unmapped: plan.unmapped.clone(),
        edits: (plan.tools.iter())
            .flat_map(|(suite, mapped)| {
                (mapped.edits.iter()).map(move |(argument, _)| (suite.clone(), argument.clone()))
            })
            .collect(),
        detected,
    }))
}

/// The tools the built-in suite calls, with the arguments each gets.
fn suite_tools() -> BTreeMap<String, BTreeSet<String>> {
    let scenarios: Vec<Scenario> = builtin::suite()
        .filter_map(|(path, text)| Scenario::parse(Path::new(path), text).ok())
        .collect();
    crate::suite_tools::called(&scenarios)
        .into_iter()
        .map(|(tool, called)| (tool, called.arguments))
        .collect()
}

/// The top of the file: what starts the server, its environment, the
/// provider the folder's dependencies suggest.
fn start_section(request: &Request, detected: &Detected) -> String {
    let build = match &detected.build {
        Some(build) => format!("build = {}\n", toml_list(build)),
        None => String::new(),
    };
    let mut env = String::new();
    for (name, value) in &request.env {
        env.push_str(&format!("{} = {}\n", toml_key(name), quoted(value)));
    }
    let (provider, provider_env) = provider_section(detected);
    let listen_note = match request.transport {
        Transport::Stdio => "",
        Transport::StreamableHttp => {
            "# The server must listen where chaos says: {listen.host} and {listen.port}.\n"
        }
    };
    format!(
        "name = {name}\nsummary = {summary}\n{build}command = {command}\nready-timeout = \"20s\"\n\n\
         # Added to the server's environment. Placeholders are the run's facts:\n\
         # {{listen.port}}, {{provider.url}}, {{provider.host}}, {{provider.port}},\n\
         # {{authority.url}}, {{state_dir}}, ... (docs/target-protocol.md, section 1).\n\
         {listen_note}[env]\n{env}{provider_env}\n{provider}",
        name = quoted(&detected.name),
        summary = quoted(&format!(
            "{}: an MCP server (describe it in one line)",
            detected.name
        )),
        command = toml_list(&request.command),
    )
}

fn transport_lines(request: &Request) -> String {
    let mut lines = match request.transport {
        Transport::Stdio => "transport = \"stdio\"\n".to_owned(),
        Transport::StreamableHttp => "transport = \"streamable-http\"\n".to_owned(),
    };
    if let Some(path) = &request.path {
        lines.push_str(&format!("path = {}\n", quoted(path)));
    }
    lines
}

/// What the file maps.
#[derive(Debug, Default)]
struct Plan {
    tools: BTreeMap<String, Mapped>,
    unmapped: Vec<String>,
    /// The argument the server reads the call's identity from, if any tool
    /// has one that looks like an idempotency key.
    identity: Option<String>,
}

#[derive(Debug)]
struct Mapped {
    server: String,
    /// Argument -> template.
    arguments: BTreeMap<String, String>,
    /// Required arguments nothing fits: (argument, what the schema says).
    edits: Vec<(String, String)>,
    /// Other tools that fit as well or almost: named in a comment.
    others: Vec<String>,
}

/// Words that tell which suite tool a server tool is, by the suite tool.
const FITS: &[(&str, &[&str])] = &[
    (
        "charge_card",
        &[
            "charge", "charges", "payment", "payments", "pay", "card", "invoice", "bill",
            "purchase", "checkout", "intent", "refund",
        ],
    ),
    (
        "send_reminder",
        &[
            "send",
            "remind",
            "reminder",
            "email",
            "mail",
            "message",
            "notify",
            "notification",
            "sms",
            "reply",
        ],
    ),
    (
        "send_notification_to_self",
        &[
            "notify",
            "notification",
            "self",
            "send",
            "message",
            "email",
            "mail",
            "note",
        ],
    ),
];

/// Argument name words -> the suite argument (or literal) that fills it.
/// Ordered: the first whose word the argument's name has wins.
const ARGUMENTS: &[(&[&str], &str)] = &[
    (&["idempotency", "idempotent", "dedup", "dedupe"], ""),
    (
        &["amount", "cents", "total", "price", "value"],
        "{amount_cents}",
    ),
    (&["currency"], "usd"),
    (&["invoice", "reference", "ref", "order"], "{invoice}"),
    (
        &[
            "to",
            "recipient",
            "recipients",
            "email",
            "address",
            "customer",
            "receiver",
        ],
        "{recipient}",
    ),
    (&["subject", "title"], "Invoice {invoice}"),
    (
        &["memo", "description", "note", "notes", "statement"],
        "{memo}",
    ),
    (
        &["body", "text", "message", "content", "html", "plain"],
        "{message}",
    ),
];

/// The words of a name: `sendEmail`, `send_email` and `send-email` are
/// `send`, `email`.
fn words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        if !c.is_ascii_alphanumeric() {
            if !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
            previous_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && previous_lower && !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
        previous_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        word.push(c.to_ascii_lowercase());
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

fn read_only(tool: &Tool) -> bool {
    (tool.annotations.as_ref()).is_some_and(|hints| hints.read_only_hint == Some(true))
}

impl Plan {
    fn of(tools: &[Tool], suite: &BTreeMap<String, BTreeSet<String>>) -> Plan {
        let mut plan = Plan::default();
        for (suite_tool, suite_arguments) in suite {
            let fit: &[&str] = FITS
                .iter()
                .find(|(name, _)| name == suite_tool)
                .map_or(&[], |(_, fit)| fit);
            let mut scored: Vec<(usize, &Tool)> = tools
                .iter()
                .filter(|tool| !read_only(tool))
                .map(|tool| {
                    let name = words(&tool.name);
                    let score = name
                        .iter()
                        .filter(|word| fit.contains(&word.as_str()))
                        .count();
                    // The same name fits best of all.
                    let exact = usize::from(tool.name == suite_tool.as_str()) * 100;
                    (score + exact, tool)
                })
                .filter(|(score, _)| *score > 0)
                .collect();
            // Best first; among equals, the shorter (more general) name.
            scored.sort_by(|(a, at), (b, bt)| b.cmp(a).then(at.name.len().cmp(&bt.name.len())));
            let Some((best, tool)) = scored.first().copied() else {
                plan.unmapped.push(suite_tool.clone());
                continue;
            };
            let others = (scored.iter().skip(1))
                .filter(|(score, _)| *score + 1 >= best)
                .map(|(_, tool)| tool.name.to_string())
                .collect();
            let mut mapped = Mapped {
                server: tool.name.to_string(),
                arguments: BTreeMap::new(),
                edits: Vec::new(),
                others,
            };
            let schema = Value::Object((*tool.input_schema).clone());
            let required: BTreeSet<&str> = (schema["required"].as_array().into_iter().flatten())
                .filter_map(Value::as_str)
                .collect();
            let properties = schema["properties"]
                .as_object()
                .cloned()
                .unwrap_or_default();
            for (argument, property) in &properties {
                let kind = property["type"].as_str().unwrap_or("any");
                let is_required = required.contains(argument.as_str());
                match fill(argument, kind, suite_arguments, is_required) {
                    Some(Fill::Identity) => plan.identity = Some(argument.clone()),
                    Some(Fill::With(template)) => {
                        mapped.arguments.insert(argument.clone(), template);
                    }
                    None if is_required => {
                        let description = property["description"].as_str().unwrap_or("");
                        mapped.edits.push((
                            argument.clone(),
                            format!("{kind}, required{}", described(description)),
                        ));
                    }
                    None => {}
                }
            }
            plan.tools.insert(suite_tool.clone(), mapped);
        }
        plan
    }
}

enum Fill {
    /// Where the call's identity goes: `[mcp] identity = { argument = .. }`.
    Identity,
    With(String),
}

/// What fills `argument` (of JSON type `kind`) from the suite's arguments:
/// the suite's argument of the same name, else one whose meaning the name
/// gives away. An optional argument is left out rather than filled with a
/// stand-in: what the model did not send, the call should not carry.
fn fill(argument: &str, kind: &str, suite: &BTreeSet<String>, required: bool) -> Option<Fill> {
    let numeric = matches!(kind, "integer" | "number");
    if suite.contains(argument) && numeric == (argument == "amount_cents") {
        return Some(Fill::With(format!("{{{argument}}}")));
    }
    let name = words(argument);
    let identity_only = !required;
    for (fit, with) in ARGUMENTS {
        // An optional argument is only ever the call's identity by meaning.
        if identity_only && !with.is_empty() {
            continue;
        }
        if !name.iter().any(|word| fit.contains(&word.as_str())) {
            continue;
        }
        if with.is_empty() {
            return (kind == "string" || kind == "any").then_some(Fill::Identity);
        }
        let wants_number = *with == "{amount_cents}";
        if numeric != wants_number {
            // A number from a text, or text into a number: let the schema
            // check at the run name it rather than guess a conversion.
            continue;
        }
        if kind == "array" || kind == "object" || kind == "boolean" {
            return None;
        }
        // `{memo}` only where the suite's calls to this tool have one.
        let missing = crate::way_in::mapped::Template::parse(with)
            .map(|template| {
                template
                    .placeholders()
                    .any(|placeholder| !suite.contains(placeholder))
            })
            .unwrap_or(true);
        if missing {
            if *with == "{memo}" && suite.contains("message") {
                return Some(Fill::With("{message}".into()));
            }
            continue;
        }
        return Some(Fill::With((*with).to_owned()));
    }
    None
}

fn described(description: &str) -> String {
    let description = comment_text(description, 100);
    if description.is_empty() {
        String::new()
    } else {
        format!(": {description}")
    }
}

/// Untrusted text made safe for one comment line: control characters and
/// line breaks become spaces, and it is cut at `most` characters.
fn comment_text(text: &str, most: usize) -> String {
    let clean: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let clean = clean.split_whitespace().collect::<Vec<_>>().join(" ");
    if clean.chars().count() > most {
        format!("{}...", clean.chars().take(most).collect::<String>())
    } else {
        clean
    }
}

/// A TOML key: bare when it can be, quoted otherwise.
fn toml_key(key: &str) -> String {
    if !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        key.to_owned()
    } else {
        quoted(key)
    }
}

/// A one-line TOML basic string, whatever `text` holds: the `toml` crate
/// writes text with a line break as a multi-line string, which a key (and
/// an inline table) cannot be.
fn quoted(text: &str) -> String {
    let mut out = String::from('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A listed tool in one line: its name and the hints it declares.
fn listed_line(tool: &Tool) -> String {
    let mut hints = Vec::new();
    if let Some(annotations) = &tool.annotations {
        for (name, value) in [
            ("readOnlyHint", annotations.read_only_hint),
            ("destructiveHint", annotations.destructive_hint),
            ("idempotentHint", annotations.idempotent_hint),
            ("openWorldHint", annotations.open_world_hint),
        ] {
            if let Some(value) = value {
                hints.push(format!("{name}: {value}"));
            }
        }
    }
    let name = comment_text(&tool.name, 80);
    if hints.is_empty() {
        format!("{name} (declares no hints)")
    } else {
        format!("{name} ({})", hints.join(", "))
    }
}

/// The tool's arguments in one comment line.
fn arguments_line(tool: &Tool) -> String {
    let schema = Value::Object((*tool.input_schema).clone());
    let required: BTreeSet<&str> = (schema["required"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect();
    let arguments: Vec<String> = (schema["properties"].as_object().into_iter().flatten())
        .map(|(name, property)| {
            format!(
                "{} ({}{})",
                comment_text(name, 40),
                comment_text(property["type"].as_str().unwrap_or("any"), 20),
                if required.contains(name.as_str()) {
                    ", required"
                } else {
                    ""
                }
            )
        })
        .collect();
    if arguments.is_empty() {
        "no arguments".to_owned()
    } else {
        arguments.join(", ")
    }
}

fn render(request: &Request, start: &str, tools: &[Tool], plan: &Plan) -> String {
    let mut text = format!(
        "# A chaos target file for an MCP server, written by\n\
         #   chaos init-target --mcp -- {}\n\
         # from the tools the server listed. chaos is the MCP client; each attempt\n\
         # is a tools/call (docs/target-protocol.md, section 1.4). Check the tool\n\
         # map below, then:\n\
         #\n\
         #   chaos probe --target {out}\n\
         #   chaos run --target {out}\n\n",
        comment_text(&request.command.join(" "), 200),
        out = request
            .out
            .as_deref()
            .unwrap_or(Path::new("target.toml"))
            .display(),
    );
    text.push_str(start);
    text.push_str("\n[mcp]\n");
    text.push_str(&transport_lines(request));
    match &plan.identity {
        Some(argument) => text.push_str(&format!(
            "# The server takes an idempotency key in an argument: chaos puts the\n\
             # operation id there (a retry of one operation sends the same one).\n\
             identity = {{ argument = {} }}\n",
            quoted(argument)
        )),
        None => text.push_str(
            "# Where the call's identity goes: nowhere, as a plain MCP client does\n\
             # (a retry is a new tools/call the server cannot tell from a new one).\n\
             # identity = { argument = \"idempotency_key\" }   # or { meta = \"...\" }\n",
        ),
    }
    text.push_str(&format!("\n# The server lists {} tool(s):\n", tools.len()));
    for tool in tools {
        text.push_str(&format!("#   {}\n", listed_line(tool)));
        text.push_str(&format!("#     arguments: {}\n", arguments_line(tool)));
        if let Some(description) = &tool.description {
            let description = comment_text(description, 160);
            if !description.is_empty() {
                text.push_str(&format!("#     {description}\n"));
            }
        }
    }
    text.push_str(
        "\n# Each tool the suite calls, mapped to the server's tool that fits it\n\
         # best by name (`chaos list` shows the suite's tools and arguments).\n\
         # Arguments are templates over the call's arguments: {amount_cents},\n\
         # {invoice}, {recipient}, {message}, ...\n",
    );
    for (suite_tool, mapped) in &plan.tools {
        text.push_str(&format!("\n[mcp.tools.{suite_tool}]\n"));
        if !mapped.others.is_empty() {
            text.push_str(&format!(
                "# Also fits: {}\n",
                comment_text(&mapped.others.join(", "), 160)
            ));
        }
        text.push_str(&format!("name = {}\n", quoted(&mapped.server)));
        for (argument, why) in &mapped.edits {
            text.push_str(&format!(
                "# EDIT: required argument {} ({}) has no suite argument that fits;\n\
                 # add it to `arguments` below, or the run refuses the call by its schema.\n",
                comment_text(argument, 60),
                comment_text(why, 140),
            ));
        }
        let arguments: Vec<String> = (mapped.arguments.iter())
            .map(|(argument, template)| format!("{} = {}", toml_key(argument), quoted(template)))
            .collect();
        text.push_str(&format!("arguments = {{ {} }}\n", arguments.join(", ")));
    }
    for suite_tool in &plan.unmapped {
        text.push_str(&format!(
            "\n# No listed tool fits the suite's {suite_tool}: map it by hand, or leave\n\
             # it out (scenarios that call it then call a tool the server lacks).\n\
             # [mcp.tools.{suite_tool}]\n# name = \"...\"\n"
        ));
    }
    text.push_str(
        "\n# How a tool's result is read: JSON pointers into its structuredContent,\n\
         # or into the JSON of its first text content. Without [response], a\n\
         # result is applied and isError: true is failed.\n\
         # [response]\n# outcome = \"/status\"\n# receipt = \"/id\"\n\
         # [response.outcomes]\n# sent = \"applied\"\n",
    );
    text
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rmcp::model::ToolAnnotations;
    use serde_json::json;

    use super::*;

    fn tool(name: &str, schema: Value, read_only: Option<bool>) -> Tool {
        let Value::Object(schema) = schema else {
            panic!("a schema is an object")
        };
        let mut tool = Tool::new(name.to_owned(), "a tool", Arc::new(schema));
        if let Some(read_only) = read_only {
            let mut hints = ToolAnnotations::new();
            hints.read_only_hint = Some(read_only);
            tool.annotations = Some(hints);
        }
        tool
    }

    fn request(dir: &Path) -> Request {
        Request {
            dir: dir.to_owned(),
            out: None,
            force: false,
            transport: Transport::Stdio,
            path: None,
            env: vec![("SMTP_HOST".into(), "{provider.host}".into())],
            command: vec!["server".into(), "--stdio".into()],
        }
    }

    #[test]
    fn names_split_into_words_whatever_their_case() {
        assert_eq!(words("sendEmail"), ["send", "email"]);
        assert_eq!(words("send_email"), ["send", "email"]);
        assert_eq!(
            words("create-PaymentIntent"),
            ["create", "payment", "intent"]
        );
        assert_eq!(words("HTTPGet"), ["httpget"]);
    }

    #[test]
    fn each_suite_tool_gets_the_tool_that_fits_with_its_arguments() {
        let tools = [
            tool(
                "send_email",
                json!({"type": "object", "required": ["to", "subject", "body", "priority"],
                       "properties": {"to": {"type": "string"}, "subject": {"type": "string"},
                                      "body": {"type": "string"}, "priority": {"type": "integer"},
                                      "cc": {"type": "array"}}}),
                None,
            ),
            tool(
                "create_charge",
                json!({"type": "object", "required": ["amount", "currency"],
                       "properties": {"amount": {"type": "integer"}, "currency": {"type": "string"},
                                      "idempotency_key": {"type": "string"}}}),
                Some(false),
            ),
            // Read-only: never a suite tool's match, however well it is named.
            tool("list_charges", json!({"type": "object"}), Some(true)),
        ];
        let suite = suite_tools();
        let plan = Plan::of(&tools, &suite);
        let reminder = &plan.tools["send_reminder"];
        assert_eq!(reminder.server, "send_email");
        assert_eq!(reminder.arguments["to"], "{recipient}");
        assert_eq!(reminder.arguments["subject"], "Invoice {invoice}");
        assert_eq!(reminder.arguments["body"], "{message}");
        assert!(!reminder.arguments.contains_key("cc"), "{reminder:?}");
        assert_eq!(reminder.edits.len(), 1, "{reminder:?}");
        assert_eq!(reminder.edits[0].0, "priority");
        let charge = &plan.tools["charge_card"];
        assert_eq!(charge.server, "create_charge");
        assert_eq!(charge.arguments["amount"], "{amount_cents}");
        assert_eq!(charge.arguments["currency"], "usd");
        // Optional and no suite argument of its name: left out.
        assert!(!reminder.arguments.contains_key("cc"), "{reminder:?}");
        assert_eq!(plan.identity.as_deref(), Some("idempotency_key"));
        assert!(
            !(plan.tools.values()).any(|mapped| mapped.server == "list_charges"),
            "{plan:?}"
        );
    }

    #[test]
    fn a_server_with_no_fitting_tool_leaves_the_suite_tool_commented() {
        let tools = [tool("get_weather", json!({"type": "object"}), None)];
        let plan = Plan::of(&tools, &suite_tools());
        assert!(plan.tools.is_empty(), "{plan:?}");
        assert_eq!(plan.unmapped.len(), suite_tools().len());
    }

    #[test]
    fn hostile_names_and_descriptions_stay_in_their_comments_and_values() {
        let dir = std::env::temp_dir().join(format!("chaos-init-mcp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut hostile = tool(
            "send\"\n[env]\nEVIL = \"1",
            json!({"type": "object", "required": ["to\n[x]"],
                   "properties": {"to\n[x]": {"type": "string", "description": "a\n[agent]\nretry-for = \"9h\""}}}),
            None,
        );
        hostile.description = Some("line one\n[provider]\napi = \"smtp\"".into());
        let request = request(&dir);
        let detected = detect(&dir);
        let start = start_section(&request, &detected);
        let plan = Plan::of(std::slice::from_ref(&hostile), &suite_tools());
        let text = render(&request, &start, std::slice::from_ref(&hostile), &plan);
        let parsed = TargetFile::parse(&dir.join("target.toml"), &text)
            .unwrap_or_else(|error| panic!("{error}\n{text}"));
        // Nothing the server sent became a key of the file.
        assert!(!text.contains("\nEVIL"), "{text}");
        assert!(!text.contains("\n[provider]\napi = \"smtp\""), "{text}");
        assert!(!text.contains("\nretry-for"), "{text}");
        assert!(parsed.env.iter().all(|(name, _)| name != "EVIL"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_written_file_parses_and_maps_what_it_says() {
        let dir = std::env::temp_dir().join(format!("chaos-init-mcp-ok-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let tools = [tool(
            "send_email",
            json!({"type": "object", "required": ["to", "body"],
                   "properties": {"to": {"type": "string"}, "body": {"type": "string"}}}),
            Some(false),
        )];
        let request = request(&dir);
        let start = start_section(&request, &detect(&dir));
        let plan = Plan::of(&tools, &suite_tools());
        let text = render(&request, &start, &tools, &plan);
        let parsed = TargetFile::parse(&dir.join("target.toml"), &text)
            .unwrap_or_else(|error| panic!("{error}\n{text}"));
        assert_eq!(parsed.command, ["server", "--stdio"]);
        assert!(
            text.contains("[mcp.tools.send_reminder]\nname = \"send_email\""),
            "{text}"
        );
        assert!(text.contains("SMTP_HOST = \"{provider.host}\""), "{text}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
