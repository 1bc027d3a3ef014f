//! `[request]`: how a tool call is put to a service with an API shape of its
//! own (docs/target-protocol.md §1.2). Left out, chaos's protocol.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use crate::input::{Errors, FileError};
use crate::way_in::mapped::{BodyFormat, Place, RequestMapping, Template, TokenPlace};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct RequestFile {
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    operation_id: Option<PlaceFile>,
    #[serde(default)]
    token: Option<TokenFile>,
    #[serde(default)]
    body: Option<BodyFile>,
    #[serde(default)]
    fields: Option<BTreeMap<String, String>>,
    /// The suite's tool names, each to the service's own.
    #[serde(default)]
    tools: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct PlaceFile {
    #[serde(default)]
    header: Option<String>,
    #[serde(default)]
    body: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct TokenFile {
    #[serde(default)]
    header: Option<String>,
    #[serde(default)]
    value: Option<String>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum BodyFile {
    Json,
    Form,
}

/// Whether `name` can be a tool's name: it reaches a path, a field and the
/// authority's scope (space-separated), so letters, digits, `_`, `-`, `.`.
fn is_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b"_-.".contains(&byte))
}

/// The methods a tool call may be sent with.
const METHODS: [&str; 5] = ["POST", "PUT", "PATCH", "DELETE", "GET"];

/// Whether `name` is an HTTP header name (RFC 9110 token characters).
fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte))
}

pub(super) fn header_name(what: &str, name: &str) -> Result<String, String> {
    if is_header_name(name) {
        Ok(name.to_owned())
    } else {
        Err(format!(
            "{what} '{name}' is not an HTTP header name; use letters, digits and '-', e.g. \"Idempotency-Key\""
        ))
    }
}

fn template(what: &str, text: &str) -> Result<Template, String> {
    Template::parse(text).map_err(|why| format!("{what}: {why}"))
}

impl RequestFile {
    fn validate(self) -> Result<RequestMapping, String> {
        let default = RequestMapping::default();
        let method = match self.method {
            Some(method) if METHODS.contains(&method.as_str()) => method,
            Some(method) => {
                return Err(format!(
                    "request.method '{method}' is not one chaos sends. Choose from: {}",
                    METHODS.join(", ")
                ))
            }
            None => default.method,
        };
        let path = match self.path {
            Some(path) if path.starts_with('/') => template("request.path", &path)?,
            Some(path) => {
                return Err(format!(
                    "request.path '{path}' must start with '/', e.g. \"/v1/invoices/{{invoice}}/reminders\""
                ))
            }
            None => default.path,
        };
        let operation_id = match self.operation_id {
            Some(PlaceFile {
                header: Some(header),
                body: None,
            }) => Place::Header(header_name("request.operation-id header", &header)?),
            Some(PlaceFile {
                header: None,
                body: Some(field),
            }) if !field.is_empty() => Place::Body(field),
            Some(_) => {
                return Err("request.operation-id names one place: { header = \"Idempotency-Key\" } or { body = \"idempotency_key\" } (a top-level field of the body)".into())
            }
            None => default.operation_id,
        };
        let token = match self.token {
            Some(token) => TokenPlace {
                header: match token.header {
                    Some(header) => header_name("request.token header", &header)?,
                    None => TokenPlace::default().header,
                },
                value: match token.value {
                    Some(value) => template("request.token value", &value)?,
                    None => TokenPlace::default().value,
                },
            },
            None => default.token,
        };
        if !token.value.placeholders().any(|name| name == "token") {
            return Err("request.token value must carry the caller's token: put {token} in it, e.g. value = \"Bearer {token}\"".into());
        }
        let body = match self.body {
            Some(BodyFile::Json) | None => BodyFormat::Json,
            Some(BodyFile::Form) => BodyFormat::Form,
        };
        let fields = match self.fields {
            Some(fields) => {
                let mut templates = BTreeMap::new();
                for (name, text) in fields {
                    if let Place::Body(field) = &operation_id {
                        if *field == name {
                            return Err(format!("request.fields.{name}: the operation id goes in this field (request.operation-id); leave it out of the template"));
                        }
                    }
                    let value = template(&format!("request.fields.{name}"), &text)?;
                    templates.insert(name, value);
                }
                Some(templates)
            }
            None => None,
        };
        for (suite, own) in &self.tools {
            for name in [suite, own] {
                if !is_tool_name(name) {
                    return Err(format!(
                        "request.tools: '{}' is not a tool name; use letters, digits, '_', '-' and '.', e.g. send_reminder = \"remind_customer\"",
                        name.escape_debug()
                    ));
                }
            }
        }
        Ok(RequestMapping {
            method,
            path,
            operation_id,
            token,
            body,
            fields,
            tools: self.tools,
        })
    }
}

pub(super) fn validate(
    table: Option<Spanned<RequestFile>>,
    errors: &Errors<'_>,
) -> Result<Option<RequestMapping>, FileError> {
    let Some(request) = table else {
        return Ok(None);
    };
    let span = request.span();
    let request = request.into_inner().validate();
    request
        .map(Some)
        .map_err(|message| errors.at(span, message))
}
