//! Small pieces every Rust target repeats: routing a tool call, answering with an
//! outcome, describing itself to the harness.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::http::{Request, Response};
use crate::protocol::{AnswerBody, Outcome, IDEMPOTENT_REPLAYED};

/// What a target tells the harness about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetInfo {
    pub name: String,
    /// One line: what this target is and where it is meant to be weak.
    pub summary: String,
    /// How long the target promises to remember an operation. `None` promises
    /// forever.
    pub retention: Option<Duration>,
    /// What a retry past `retention` gets.
    #[serde(default)]
    pub after_retention: AfterRetention,
}

/// A target's declared policy for a retry of an operation it no longer
/// remembers (past its retention).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum AfterRetention {
    /// The retry is a new operation: one new effect is allowed.
    #[default]
    NewOperation,
    /// The retry is refused (`rejected`), with no dispatch.
    Refuse,
    /// The target looks the key up at the provider before any dispatch, and
    /// answers from what it finds; only a key the provider does not know is
    /// dispatched anew.
    Reconcile,
}

impl AfterRetention {
    pub const ALL: [AfterRetention; 3] = [
        AfterRetention::NewOperation,
        AfterRetention::Refuse,
        AfterRetention::Reconcile,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AfterRetention::NewOperation => "new-operation",
            AfterRetention::Refuse => "refuse",
            AfterRetention::Reconcile => "reconcile",
        }
    }

    pub fn parse(text: &str) -> Option<AfterRetention> {
        AfterRetention::ALL
            .into_iter()
            .find(|policy| policy.as_str() == text)
    }
}

impl std::fmt::Display for AfterRetention {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The tool named by a `POST /tools/{tool}` request.
pub fn tool_call(request: &Request) -> Option<&str> {
    if request.method != "POST" {
        return None;
    }
    let tool = request.path.strip_prefix("/tools/")?;
    (!tool.is_empty() && !tool.contains('/')).then_some(tool)
}

/// Whether this is the readiness probe, `GET /healthz`.
pub fn is_health_check(request: &Request) -> bool {
    request.method == "GET" && request.path == "/healthz"
}

/// Answers with `body`, its default status, and `Idempotent-Replayed: true` for
/// a replay.
pub fn answer(body: AnswerBody) -> Response {
    let outcome = body.outcome.unwrap_or(Outcome::Unknown);
    let response = Response::json(outcome.default_status(), &body);
    if outcome == Outcome::Replayed {
        response.header(IDEMPOTENT_REPLAYED, "true")
    } else {
        response
    }
}

/// The tool result a reference target returns to an authorized caller.
pub fn tool_result(tool: &str, receipt: &str) -> serde_json::Value {
    serde_json::json!({ "tool": tool, "status": "done", "receipt": receipt })
}

pub fn not_found() -> Response {
    Response::new(404)
}
