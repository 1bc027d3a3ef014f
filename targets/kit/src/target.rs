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
    /// forever. A retry after this window may be treated as a new operation:
    /// that is the only post-retention policy protocol v1 knows.
    pub retention: Option<Duration>,
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
