//! The mapped way in: how the agent's tool call is put to a service that
//! has an API shape of its own (a path with the invoice in it, the operation
//! id under another header or in the body, a form body), and how that
//! service's answer is read back into a chaos outcome. A target file's
//! `[request]` and `[response]` tables describe it (docs/target-protocol.md
//! §1.2); their defaults are chaos's protocol ([`super::protocol`]), byte
//! for byte, so the protocol is this mapping with nothing said.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use chaos_kit::http::{Client, Request, Response};
use chaos_kit::protocol::{AnswerBody, Outcome, IDEMPOTENT_REPLAYED};
use serde_json::Value;

use super::{over_http, CallArguments, CallValues, Outgoing, Sending, Way};
use crate::braces::{self, Piece};
use crate::history::Answer;

/// The placeholders every template may use besides the call's arguments.
pub(crate) const BUILT_IN: [&str; 3] = ["tool", "operation-id", "token"];

/// A target's API shape, both ways.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Mapping {
    pub request: RequestMapping,
    pub response: ResponseMapping,
}

/// How one tool call becomes an HTTP request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestMapping {
    pub method: String,
    pub path: Template,
    pub operation_id: Place,
    pub token: TokenPlace,
    pub body: BodyFormat,
    /// The body's fields, each a template; `None` sends the arguments as
    /// they are.
    pub fields: Option<BTreeMap<String, Template>>,
    /// `[request.tools]`: a suite tool's name -> the service's own name for
    /// it, which `{tool}` renders and the authority grants (a tool left out
    /// keeps its name).
    pub tools: BTreeMap<String, String>,
}

/// Where the operation id (the logical operation's key) goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    Header(String),
    /// A top-level field of the body.
    Body(String),
}

/// Where the caller's bearer token goes: a header, and its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenPlace {
    pub header: String,
    pub value: Template,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFormat {
    Json,
    /// `application/x-www-form-urlencoded`, one pair per top-level field.
    Form,
}

impl Default for RequestMapping {
    fn default() -> RequestMapping {
        RequestMapping {
            method: "POST".into(),
            path: Template::parse("/tools/{tool}").expect("the protocol's path is a template"),
            operation_id: Place::Header("Idempotency-Key".into()),
            token: TokenPlace::default(),
            body: BodyFormat::Json,
            fields: None,
            tools: BTreeMap::new(),
        }
    }
}

impl Default for TokenPlace {
    fn default() -> TokenPlace {
        TokenPlace {
            header: "Authorization".into(),
            value: Template::parse("Bearer {token}").expect("the protocol's token is a template"),
        }
    }
}

impl CallValues<'_> {
    /// The model's arguments as a JSON object; none when they are not one.
    pub(super) fn arguments_object(&self) -> serde_json::Map<String, Value> {
        match serde_json::from_slice::<Value>(self.arguments) {
            Ok(Value::Object(map)) => map,
            _ => serde_json::Map::new(),
        }
    }

    /// Each of `templates` filled from `arguments` (this call's, as
    /// [`CallValues::arguments_object`] reads them) and the built-ins: a
    /// body's or a tool call's fields, by name.
    pub(super) fn fill(
        &self,
        templates: &BTreeMap<String, Template>,
        arguments: &serde_json::Map<String, Value>,
    ) -> serde_json::Map<String, Value> {
        templates
            .iter()
            .map(|(name, template)| {
                (
                    name.clone(),
                    template.value(|name| self.lookup(arguments, name)),
                )
            })
            .collect()
    }

    pub(super) fn lookup(
        &self,
        arguments: &serde_json::Map<String, Value>,
        name: &str,
    ) -> Option<Value> {
        match name {
            "tool" => Some(Value::String(self.tool.to_owned())),
            "operation-id" => Some(Value::String(self.operation_id.to_owned())),
            "token" => Some(Value::String(self.token.to_owned())),
            _ => arguments.get(name).cloned(),
        }
    }
}

impl Mapping {
    pub(super) const NAME: &'static str = "mapped";
    pub(super) const DOC: &'static str =
        "a service's own HTTP API shape: [request] and [response] in its target file";
}

impl Way for Mapping {
    fn tool_names(&self) -> &BTreeMap<String, String> {
        &self.request.tools
    }

    fn reads_its_own_outcomes(&self) -> bool {
        self.response.outcome.is_some()
    }

    fn admit(&self, calls: &[CallArguments], target: &str) -> Result<(), String> {
        check_arguments(&self.request, target, calls)
    }

    fn send<'a>(
        &'a self,
        http: &'a Client,
        target: &'a str,
        outgoing: &'a Outgoing<'a>,
    ) -> Sending<'a> {
        Box::pin(over_http(
            http,
            target,
            outgoing,
            |values, headers| self.request.build(values, headers),
            |response| self.response.interpret(response),
        ))
    }
}

impl RequestMapping {
    /// Whether this is today's protocol: then the arguments go out as the
    /// bytes the model wrote (an equivalent payload stays byte-different).
    fn is_default(&self) -> bool {
        let shape = RequestMapping {
            tools: BTreeMap::new(),
            ..self.clone()
        };
        shape == RequestMapping::default()
    }

    /// The service's name for the suite's tool `tool`.
    pub(crate) fn service_tool<'a>(&'a self, tool: &'a str) -> &'a str {
        self.tools.get(tool).map_or(tool, String::as_str)
    }

    /// Every placeholder a template of this mapping uses that is neither a
    /// built-in nor one of `arguments`: a scenario whose calls lack one
    /// cannot be run against this target.
    pub(crate) fn missing_placeholders(&self, arguments: &[String]) -> Vec<String> {
        let mut used: Vec<&str> = Vec::new();
        used.extend(self.path.placeholders());
        used.extend(self.token.value.placeholders());
        for template in self.fields.iter().flat_map(BTreeMap::values) {
            used.extend(template.placeholders());
        }
        let mut missing: Vec<String> = used
            .into_iter()
            .filter(|name| !BUILT_IN.contains(name) && !arguments.iter().any(|have| have == name))
            .map(str::to_owned)
            .collect();
        missing.dedup();
        missing
    }

    /// The request for one attempt, before the chaos headers. A placeholder
    /// the arguments lack was refused before the run
    /// ([`RequestMapping::missing_placeholders`]); here it would be empty.
    pub(crate) fn build(
        &self,
        values: &CallValues<'_>,
        scenario_headers: &BTreeMap<String, String>,
    ) -> Request {
        let values = &CallValues {
            tool: self.service_tool(values.tool),
            ..*values
        };
        let arguments = values.arguments_object();
        let text = |template: &Template| template.render(|name| values.lookup(&arguments, name));
        let path = self
            .path
            .render_with(|name| values.lookup(&arguments, name), encode_path_segment);
        let (body, content_type) = if self.is_default() {
            (values.arguments.clone(), "application/json")
        } else {
            let mut fields: serde_json::Map<String, Value> = match &self.fields {
                Some(fields) => values.fill(fields, &arguments),
                None => arguments.clone(),
            };
            if let Place::Body(field) = &self.operation_id {
                fields.insert(field.clone(), Value::String(values.operation_id.to_owned()));
            }
            match self.body {
                BodyFormat::Json => (
                    Bytes::from(serde_json::to_vec(&Value::Object(fields)).unwrap_or_default()),
                    "application/json",
                ),
                BodyFormat::Form => {
                    let mut form = form_urlencoded::Serializer::new(String::new());
                    for (name, value) in &fields {
                        form.append_pair(name, &plain_text(value));
                    }
                    (
                        Bytes::from(form.finish()),
                        "application/x-www-form-urlencoded",
                    )
                }
            }
        };
        let mut request = Request::post(path, body);
        request.method = self.method.clone();
        for (name, value) in scenario_headers {
            request = request.header(name, value.as_str());
        }
        if let Place::Header(header) = &self.operation_id {
            request = request.header(header, values.operation_id);
        }
        request
            .header(&self.token.header, text(&self.token.value))
            .header("content-type", content_type)
    }
}

/// Refuses a trial whose calls lack an argument a placeholder of `mapping`
/// names: the error names the placeholder, the call and the arguments it
/// has. Only the scenario knows the arguments, so this is checked per
/// cell before its trials run, not when the target file is read.
fn check_arguments(
    mapping: &RequestMapping,
    target: &str,
    calls: &[CallArguments],
) -> Result<(), String> {
    for call in calls {
        if let Some(name) = mapping.missing_placeholders(&call.arguments).first() {
            let list = |names: &mut dyn Iterator<Item = &str>| {
                names
                    .map(|name| format!("{{{name}}}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            return Err(format!(
                "target '{target}' [request] uses {{{name}}}, and call {} (operation '{}', tool '{}') has no argument '{name}': its arguments are {}, and every call has {}. Fix the placeholder in the target file, or run a scenario whose calls have it",
                call.call,
                call.operation,
                call.tool,
                list(&mut call.arguments.iter().map(String::as_str)),
                list(&mut BUILT_IN.into_iter()),
            ));
        }
    }
    Ok(())
}

/// A path segment's value, percent-encoded: an argument with a `/` or a
/// space in it must not change which resource the path names.
fn encode_path_segment(text: &str) -> String {
    const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~');
    percent_encoding::utf8_percent_encode(text, SEGMENT).to_string()
}

/// A JSON value as text in a path, header or form: strings as they are,
/// anything else as its JSON.
fn plain_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Text with `{name}` placeholders; `{{` and `}}` are literal braces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template(Vec<Piece<String>>);

impl Template {
    /// Reads `text`; the error says what is wrong with its braces.
    pub(crate) fn parse(text: &str) -> Result<Template, String> {
        let pieces = braces::parse(text, |name| {
            if name.is_empty() || name.contains('{') {
                return Err(format!(
                    "'{{{name}}}' in \"{text}\" is not a placeholder; name an argument of the call, or one of {}",
                    built_ins()
                ));
            }
            Ok(name.to_owned())
        })?;
        Ok(Template(pieces))
    }

    pub(crate) fn placeholders(&self) -> impl Iterator<Item = &str> {
        self.0.iter().filter_map(|piece| match piece {
            Piece::Placeholder(name) => Some(name.as_str()),
            Piece::Text(_) => None,
        })
    }

    pub(super) fn render(&self, lookup: impl Fn(&str) -> Option<Value>) -> String {
        self.render_with(lookup, str::to_owned)
    }

    fn render_with(
        &self,
        lookup: impl Fn(&str) -> Option<Value>,
        encode: impl Fn(&str) -> String,
    ) -> String {
        self.0
            .iter()
            .map(|piece| match piece {
                Piece::Text(text) => text.clone(),
                Piece::Placeholder(name) => {
                    encode(&lookup(name).as_ref().map(plain_text).unwrap_or_default())
                }
            })
            .collect()
    }

    /// Whether it renders text: anything but one placeholder alone, which
    /// keeps the argument's JSON type ([`Template::value`]).
    pub(crate) fn is_text(&self) -> bool {
        !matches!(self.0.as_slice(), [Piece::Placeholder(_)])
    }

    /// A body field's value: a template that is one placeholder alone keeps
    /// the argument's JSON type (`"{amount_cents}"` stays a number).
    pub(super) fn value(&self, lookup: impl Fn(&str) -> Option<Value>) -> Value {
        match self.0.as_slice() {
            [Piece::Placeholder(name)] => lookup(name).unwrap_or(Value::Null),
            _ => Value::String(self.render(lookup)),
        }
    }
}

fn built_ins() -> String {
    BUILT_IN
        .iter()
        .map(|name| format!("{{{name}}}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// How a service's answers are read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseMapping {
    /// `[status]`: what single statuses mean.
    pub status: BTreeMap<u16, Outcome>,
    /// A JSON pointer to the value naming the outcome.
    pub outcome: Option<String>,
    /// What each value at `outcome` means; empty reads chaos's own names.
    pub outcomes: BTreeMap<String, Outcome>,
    /// A JSON pointer to the effect's reference (the receipt).
    pub receipt: Option<String>,
    /// The header that says `true` on a replayed answer.
    pub replayed_header: String,
}

impl Default for ResponseMapping {
    fn default() -> ResponseMapping {
        ResponseMapping {
            status: BTreeMap::new(),
            outcome: None,
            outcomes: BTreeMap::new(),
            receipt: None,
            replayed_header: IDEMPOTENT_REPLAYED.into(),
        }
    }
}

impl ResponseMapping {
    /// Today's protocol with `[status]` overrides.
    pub(crate) fn with_status(status: BTreeMap<u16, Outcome>) -> ResponseMapping {
        ResponseMapping {
            status,
            ..ResponseMapping::default()
        }
    }

    /// The answer as the agent reads it. One the mapping cannot read is
    /// `unknown` with why (never a guess): the report then blames the
    /// mapping, not the target.
    pub(crate) fn interpret(&self, response: &Response) -> Answer {
        let body: AnswerBody = serde_json::from_slice(&response.body).unwrap_or_default();
        let json: Option<Value> = serde_json::from_slice(&response.body).ok();
        let replayed = response
            .header_value(&self.replayed_header.to_ascii_lowercase())
            .is_some_and(|value| value.eq_ignore_ascii_case("true"));
        let by_status = || {
            self.status
                .get(&response.status)
                .copied()
                .unwrap_or_else(|| Outcome::from_status(response.status, replayed))
        };
        let mut unread = None;
        let outcome = match &self.outcome {
            None => body.outcome.unwrap_or_else(by_status),
            Some(pointer) => match self.read_outcome(pointer, json.as_ref()) {
                Ok(Outcome::Applied) if replayed => Outcome::Replayed,
                Ok(outcome) => outcome,
                // A status the file names says what it means whatever the
                // body; so does an error status by the protocol's table,
                // since an error answer rarely has the success body's shape.
                Err(_) if self.status.contains_key(&response.status) => by_status(),
                Err(Unreadable::Absent(_)) if response.status >= 400 => by_status(),
                Err(why) => {
                    unread = Some(why.to_string(response.status));
                    Outcome::Unknown
                }
            },
        };
        let receipt = match &self.receipt {
            None => body.receipt,
            Some(pointer) => json
                .as_ref()
                .and_then(|json| json.pointer(pointer))
                .and_then(|value| match value {
                    Value::String(text) => Some(text.clone()),
                    Value::Number(number) => Some(number.to_string()),
                    _ => None,
                }),
        };
        let records = released_records(body.result.as_ref());
        Answer {
            status: response.status,
            outcome,
            receipt,
            disclosed_result: body.result.is_some(),
            records,
            reason: body.reason,
            unread,
        }
    }

    fn read_outcome(&self, pointer: &str, json: Option<&Value>) -> Result<Outcome, Unreadable> {
        let Some(json) = json else {
            return Err(Unreadable::Absent(format!(
                "its body is not JSON, so the outcome pointer {pointer} matches nothing"
            )));
        };
        let value = match json.pointer(pointer) {
            Some(Value::String(text)) => text.clone(),
            Some(Value::Number(number)) => number.to_string(),
            Some(Value::Bool(flag)) => flag.to_string(),
            Some(other) => {
                return Err(Unreadable::Value(format!(
                    "the outcome pointer {pointer} names {other}, not a string"
                )))
            }
            None => {
                return Err(Unreadable::Absent(format!(
                    "the outcome pointer {pointer} matches nothing in its body"
                )))
            }
        };
        if self.outcomes.is_empty() {
            return Outcome::parse(&value).ok_or_else(|| {
                Unreadable::Value(format!(
                    "the value \"{value}\" at {pointer} is no outcome (choose from: {}), and [response.outcomes] says nothing of it",
                    Outcome::ALL.map(Outcome::as_str).join(", ")
                ))
            });
        }
        // A key ending in `*` names every value that starts with what comes
        // before it: servers that answer in prose ("Email sent successfully
        // to ...") vary the rest. An exact key wins, then the longest prefix.
        let prefixed = || {
            (self.outcomes.iter())
                .filter_map(|(key, outcome)| Some((key.strip_suffix('*')?, outcome)))
                .filter(|(prefix, _)| value.starts_with(prefix))
                .max_by_key(|(prefix, _)| prefix.len())
                .map(|(_, outcome)| *outcome)
        };
        (self.outcomes.get(&value).copied())
            .or_else(prefixed)
            .ok_or_else(|| {
                Unreadable::Value(format!(
                "the value \"{value}\" at {pointer} is not in [response.outcomes] (it names {})",
                self.outcomes
                    .keys()
                    .map(|key| format!("\"{key}\""))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
            })
    }
}

/// Why the mapping could not read an answer.
enum Unreadable {
    /// The pointer matched nothing.
    Absent(String),
    /// It matched a value the mapping has no outcome for.
    Value(String),
}

impl Unreadable {
    fn to_string(&self, status: u16) -> String {
        let (Unreadable::Absent(why) | Unreadable::Value(why)) = self;
        format!("the mapping could not read this answer (status {status}): {why}; say what it means in the target file's [response.outcomes] or [status]")
    }
}

/// How long an answer asks the agent to wait before it asks again
/// (`Retry-After` in delay-seconds, RFC 9110 §10.2.3). An HTTP-date is not
/// read: services answering a claim in flight give seconds.
/// The ids of the records a tool result released (`records: [{"id": ..}]`,
/// as an export answers): what reached the caller, whatever the answer's
/// outcome, for the disclosure check to hold against their owners.
fn released_records(result: Option<&Value>) -> Vec<String> {
    result
        .and_then(|result| result.get("records"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|record| record.get("id").and_then(Value::as_str))
        .map(str::to_owned)
        .collect()
}

pub(crate) fn retry_after(response: &Response) -> Option<Duration> {
    let value = response.header_value("retry-after")?.trim();
    value.parse::<u64>().ok().map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values<'a>(arguments: &'a Bytes) -> CallValues<'a> {
        CallValues {
            tool: "send_reminder",
            operation_id: "op-1",
            token: "tok-1",
            arguments,
        }
    }

    const ARGUMENTS: &str =
        r#"{"invoice":"inv 1/a","recipient":"billing@a.example","amount_cents":4999}"#;

    #[test]
    fn the_default_mapping_is_the_protocol_byte_for_byte() {
        let arguments = Bytes::from_static(b"{\n  \"invoice\" : \"inv-1\"\n}");
        let request = RequestMapping::default().build(&values(&arguments), &BTreeMap::new());
        assert_eq!(request.method, "POST");
        assert_eq!(request.path, "/tools/send_reminder");
        assert_eq!(request.body, arguments);
        assert_eq!(request.header_value("idempotency-key"), Some("op-1"));
        assert_eq!(request.header_value("authorization"), Some("Bearer tok-1"));
        assert_eq!(
            request.header_value("content-type"),
            Some("application/json")
        );
    }

    #[test]
    fn a_mapped_request_fills_path_headers_and_fields() {
        let mapping = RequestMapping {
            method: "PUT".into(),
            path: Template::parse("/v1/invoices/{invoice}/reminders").unwrap(),
            operation_id: Place::Header("X-Request-Key".into()),
            token: TokenPlace {
                header: "X-Api-Key".into(),
                value: Template::parse("{token}").unwrap(),
            },
            body: BodyFormat::Json,
            fields: Some(BTreeMap::from([
                ("to".to_owned(), Template::parse("{recipient}").unwrap()),
                (
                    "cents".to_owned(),
                    Template::parse("{amount_cents}").unwrap(),
                ),
                (
                    "note".to_owned(),
                    Template::parse("for {invoice} {{x}}").unwrap(),
                ),
            ])),
            tools: BTreeMap::new(),
        };
        let arguments = Bytes::from_static(ARGUMENTS.as_bytes());
        let headers = BTreeMap::from([("X-Tenant".to_owned(), "south".to_owned())]);
        let request = mapping.build(&values(&arguments), &headers);
        assert_eq!(request.method, "PUT");
        assert_eq!(request.path, "/v1/invoices/inv%201%2Fa/reminders");
        assert_eq!(request.header_value("x-request-key"), Some("op-1"));
        assert_eq!(request.header_value("x-api-key"), Some("tok-1"));
        assert_eq!(request.header_value("x-tenant"), Some("south"));
        assert_eq!(request.header_value("idempotency-key"), None);
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"to": "billing@a.example", "cents": 4999, "note": "for inv 1/a {x}"})
        );
    }

    /// `[request.tools]`: `{tool}` is the service's own name for the
    /// suite's tool, in the path and the fields; a tool left out keeps its
    /// name, and the protocol's body stays the model's bytes.
    #[test]
    fn request_tools_rename_the_tool_wherever_it_is_rendered() {
        let tools = BTreeMap::from([("send_reminder".to_owned(), "remind_customer".to_owned())]);
        let mapping = RequestMapping {
            tools: tools.clone(),
            fields: Some(BTreeMap::from([(
                "action".to_owned(),
                Template::parse("{tool}").unwrap(),
            )])),
            ..RequestMapping::default()
        };
        let arguments = Bytes::from_static(ARGUMENTS.as_bytes());
        let request = mapping.build(&values(&arguments), &BTreeMap::new());
        assert_eq!(request.path, "/tools/remind_customer");
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        assert_eq!(body, serde_json::json!({"action": "remind_customer"}));
        let other = CallValues {
            tool: "charge_card",
            ..values(&arguments)
        };
        assert_eq!(
            mapping.build(&other, &BTreeMap::new()).path,
            "/tools/charge_card"
        );
        let only_renamed = RequestMapping {
            tools,
            ..RequestMapping::default()
        };
        let request = only_renamed.build(&values(&arguments), &BTreeMap::new());
        assert_eq!(request.path, "/tools/remind_customer");
        assert_eq!(
            request.body, arguments,
            "the protocol's body is the model's bytes"
        );
    }

    #[test]
    fn an_operation_id_in_a_form_body_is_one_more_pair() {
        let mapping = RequestMapping {
            operation_id: Place::Body("idempotency_key".into()),
            body: BodyFormat::Form,
            ..RequestMapping::default()
        };
        let arguments = Bytes::from_static(ARGUMENTS.as_bytes());
        let request = mapping.build(&values(&arguments), &BTreeMap::new());
        assert_eq!(
            std::str::from_utf8(&request.body).unwrap(),
            "amount_cents=4999&idempotency_key=op-1&invoice=inv+1%2Fa&recipient=billing%40a.example"
        );
        assert_eq!(
            request.header_value("content-type"),
            Some("application/x-www-form-urlencoded")
        );
        assert_eq!(request.header_value("idempotency-key"), None);
    }

    #[test]
    fn placeholders_the_call_has_no_argument_for_are_named() {
        let mapping = RequestMapping {
            path: Template::parse("/v1/{customer}/{invoice}/{tool}").unwrap(),
            fields: Some(BTreeMap::from([(
                "k".to_owned(),
                Template::parse("{operation-id} {order}").unwrap(),
            )])),
            ..RequestMapping::default()
        };
        let have = ["invoice".to_owned()];
        assert_eq!(mapping.missing_placeholders(&have), ["customer", "order"]);
    }

    #[test]
    fn broken_braces_are_refused_with_the_fix() {
        assert!(Template::parse("/a/{b")
            .unwrap_err()
            .contains("never closes"));
        assert!(Template::parse("/a/b}").unwrap_err().contains("lone '}'"));
        assert!(Template::parse("/a/{}")
            .unwrap_err()
            .contains("{operation-id}"));
        assert_eq!(
            Template::parse("{{{x}}}")
                .unwrap()
                .placeholders()
                .collect::<Vec<_>>(),
            ["x"]
        );
    }

    fn mapped() -> ResponseMapping {
        ResponseMapping {
            outcome: Some("/status".into()),
            outcomes: BTreeMap::from([
                ("sent".to_owned(), Outcome::Applied),
                ("in_progress".to_owned(), Outcome::Pending),
            ]),
            receipt: Some("/id".into()),
            ..ResponseMapping::default()
        }
    }

    #[test]
    fn the_pointers_read_outcome_and_receipt_and_the_header_a_replay() {
        let answer = mapped().interpret(&Response::json(
            200,
            &serde_json::json!({"status": "sent", "id": "rem_1"}),
        ));
        assert_eq!(answer.outcome, Outcome::Applied);
        assert_eq!(answer.receipt.as_deref(), Some("rem_1"));
        assert_eq!(answer.unread, None);
        let replay = mapped().interpret(
            &Response::json(200, &serde_json::json!({"status": "sent", "id": 7}))
                .header("Idempotent-Replayed", "true"),
        );
        assert_eq!(replay.outcome, Outcome::Replayed);
        assert_eq!(replay.receipt.as_deref(), Some("7"));
    }

    // guards: a tool that answers in prose (mcp-email-server's send_email)
    // is read by the start of its text, the longest prefix first
    #[test]
    fn an_outcome_key_ending_in_a_star_matches_values_by_their_start() {
        let mapping = ResponseMapping {
            outcome: Some("/result".into()),
            outcomes: BTreeMap::from([
                ("Email sent successfully*".to_owned(), Outcome::Applied),
                ("Email delivery [*".to_owned(), Outcome::Failed),
                ("Email delivery [unknown*".to_owned(), Outcome::Unknown),
                ("Email delivery [".to_owned(), Outcome::Rejected),
            ]),
            ..ResponseMapping::default()
        };
        let read = |text: &str| {
            mapping
                .interpret(&Response::json(200, &serde_json::json!({"result": text})))
                .outcome
        };
        assert_eq!(
            read("Email sent successfully to a@b.example"),
            Outcome::Applied
        );
        assert_eq!(
            read("Email delivery [unknown: a@b.example]"),
            Outcome::Unknown
        );
        assert_eq!(
            read("Email delivery [failed: a@b.example]"),
            Outcome::Failed
        );
        // An exact key wins over a prefix of it.
        assert_eq!(read("Email delivery ["), Outcome::Rejected);
        let unread = mapping.interpret(&Response::json(
            200,
            &serde_json::json!({"result": "Email queued"}),
        ));
        assert_eq!(unread.outcome, Outcome::Unknown);
        assert!(unread
            .unread
            .unwrap()
            .contains("not in [response.outcomes]"));
    }

    #[test]
    fn an_answer_the_mapping_cannot_read_is_unknown_and_says_why() {
        let answer = mapped().interpret(&Response::json(
            200,
            &serde_json::json!({"status": "queued"}),
        ));
        assert_eq!(answer.outcome, Outcome::Unknown);
        let why = answer.unread.unwrap();
        assert!(why.starts_with("the mapping could not read this answer (status 200): the value \"queued\" at /status is not in [response.outcomes] (it names \"in_progress\", \"sent\")"), "{why}");

        let answer = mapped().interpret(&Response::json(201, &serde_json::json!({"id": "x"})));
        assert_eq!(answer.outcome, Outcome::Unknown);
        assert!(answer.unread.unwrap().contains("matches nothing"));

        let answer = mapped().interpret(&Response::new(200).body("sent"));
        assert!(answer.unread.unwrap().contains("not JSON"));
    }

    #[test]
    fn an_error_status_or_a_mapped_one_is_read_without_the_pointer() {
        let answer =
            mapped().interpret(&Response::json(409, &serde_json::json!({"error": "busy"})));
        assert_eq!((answer.outcome, answer.unread), (Outcome::Pending, None));
        let mut mapping = mapped();
        mapping.status.insert(202, Outcome::Pending);
        let answer = mapping.interpret(&Response::json(
            202,
            &serde_json::json!({"status": "queued"}),
        ));
        assert_eq!((answer.outcome, answer.unread), (Outcome::Pending, None));
    }

    /// An export's result names the records it released; the history keeps
    /// their ids for the disclosure check, and nothing else of the result.
    #[test]
    fn the_records_a_result_released_are_read_by_id() {
        let answer = ResponseMapping::default().interpret(&Response::json(
            200,
            &serde_json::json!({"outcome": "applied", "result": {"records": [
                {"id": "INV-A", "tenant": "north"}, {"id": "INV-B"}, {"name": "no id"}
            ]}}),
        ));
        assert_eq!(answer.records, ["INV-A", "INV-B"]);
        let bare = ResponseMapping::default().interpret(&Response::json(
            200,
            &serde_json::json!({"outcome": "applied", "result": {"records": "INV-B"}}),
        ));
        assert!(bare.records.is_empty());
    }

    #[test]
    fn without_an_outcomes_table_the_value_is_a_chaos_outcome() {
        let mapping = ResponseMapping {
            outcome: Some("/result/state".into()),
            ..ResponseMapping::default()
        };
        let answer = mapping.interpret(&Response::json(
            200,
            &serde_json::json!({"result": {"state": "conflict"}}),
        ));
        assert_eq!(answer.outcome, Outcome::Conflict);
    }

    #[test]
    fn today_s_reading_is_unchanged() {
        let answer = ResponseMapping::default()
            .interpret(&Response::json(503, &AnswerBody::outcome(Outcome::Pending)));
        assert_eq!(answer.outcome, Outcome::Pending);
        let mut mapping = ResponseMapping::default();
        mapping.status.insert(417, Outcome::Conflict);
        assert_eq!(
            mapping.interpret(&Response::new(417)).outcome,
            Outcome::Conflict
        );
        assert_eq!(
            ResponseMapping::default()
                .interpret(&Response::new(417))
                .outcome,
            Outcome::Rejected
        );
        let replay = Response::new(200).header(IDEMPOTENT_REPLAYED, "true");
        assert_eq!(
            ResponseMapping::default().interpret(&replay).outcome,
            Outcome::Replayed
        );
    }

    #[test]
    fn retry_after_is_read_in_seconds() {
        assert_eq!(
            retry_after(&Response::new(409).header("Retry-After", "2")),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            retry_after(&Response::new(409).header("Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT")),
            None
        );
        assert_eq!(retry_after(&Response::new(409)), None);
    }
}
