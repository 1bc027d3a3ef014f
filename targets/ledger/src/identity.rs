//! Where an operation's identity comes from, and what binds it.
//!
//! A layer that takes the caller's Idempotency-Key is *tool*-idempotent: it
//! is exactly as good as the key the caller holds. An agent does not always
//! hold one: when the planner decides a step again (after a timeout, an
//! injected "the previous attempt failed", a replay after a crash, a double
//! click on approve), the framework sends a new tool call, often with a new
//! key. The seed article "A retry is not a replay" asks the runtime to own
//! the key instead, derived from the run's structure, `(run_id, step_id,
//! tool_name, business_scope)`, and never from anything the model emitted:
//! its arguments drift ("the amount rounded differently, a memo string that
//! drifts by one token") and its tool-use id is new on every re-plan.

use chaos_kit::canonical;
use chaos_kit::http::Request;
use chaos_kit::protocol::{IDEMPOTENCY_KEY, RUN_ID, STEP_ID, TOOL_USE_ID, TRACEPARENT};
use serde_json::Value;

/// The arguments of this ledger's tools that are free text the model may
/// re-word: part of the payload, not of what the action is.
pub const FREE_TEXT: [&str; 2] = ["note", "memo"];

/// The argument naming the business object a step acts on.
pub const BUSINESS_SCOPE: &str = "invoice";

/// Tools whose every call is its own effect (a notification to oneself):
/// the runtime's per-tool policy is to allow, not coalesce.
pub const ALLOW_EVERY_CALL: [&str; 1] = ["send_notification_to_self"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyFrom {
    /// The caller's Idempotency-Key, and the payload bound byte-for-meaning
    /// (canonical JSON): `ledger`, `file-ledger`, `postgres-ledger`.
    Caller,
    /// The run's structure: run, step, tool and business scope, and the
    /// payload bound by its intent (numbers by value, free text left out):
    /// `runtime-ledger`. A caller that sends no run structure (protocol v1)
    /// is keyed by its Idempotency-Key.
    Structure,
    /// WEAK (`subject-key`): the tool and the business subject alone, "only
    /// an invoice ID". An invoice may legitimately receive several
    /// reminders: the second is taken for a retry of the first and never sent.
    Subject,
    /// WEAK (`trace-key`): the conversation's trace id. One conversation
    /// holds several distinct actions; all but the first become replays.
    Trace,
}

impl KeyFrom {
    pub const NAMES: [&'static str; 4] = ["caller", "structure", "subject", "trace"];

    pub fn parse(name: &str) -> Option<KeyFrom> {
        match name {
            "caller" => Some(KeyFrom::Caller),
            "structure" => Some(KeyFrom::Structure),
            "subject" => Some(KeyFrom::Subject),
            "trace" => Some(KeyFrom::Trace),
            _ => None,
        }
    }

    /// The operation's key within (tenant, tool), or why the call has none.
    pub fn key(self, tool: &str, request: &Request, arguments: &Value) -> Result<String, String> {
        let caller_key = || {
            request
                .header_value(IDEMPOTENCY_KEY)
                .map(str::to_owned)
                .ok_or_else(|| "an Idempotency-Key header is required".to_owned())
        };
        let scope = || {
            arguments
                .get(BUSINESS_SCOPE)
                .and_then(Value::as_str)
                .unwrap_or("")
        };
        match self {
            KeyFrom::Subject => return Ok(format!("{tool}/{}", scope())),
            KeyFrom::Trace => {
                // `00-<trace id>-<span id>-01`: the trace id alone.
                return match request
                    .header_value(TRACEPARENT)
                    .and_then(|trace| trace.split('-').nth(1))
                {
                    Some(trace) => Ok(format!("trace/{trace}")),
                    None => caller_key(),
                };
            }
            KeyFrom::Caller | KeyFrom::Structure => {}
        }
        let (KeyFrom::Structure, Some(run), Some(step)) = (
            self,
            request.header_value(RUN_ID),
            request.header_value(STEP_ID),
        ) else {
            return caller_key();
        };
        if ALLOW_EVERY_CALL.contains(&tool) {
            // Each tool call is its own intent: its id is part of the key.
            return match request.header_value(TOOL_USE_ID) {
                Some(tool_use) => Ok(format!("{run}/{step}/{tool_use}")),
                None => caller_key(),
            };
        }
        Ok(format!("{run}/{step}/{}", scope()))
    }

    /// What an operation is bound to: a later call under its key with
    /// another fingerprint is a conflict.
    pub fn fingerprint(self, arguments: &Value) -> String {
        match self {
            KeyFrom::Caller | KeyFrom::Subject | KeyFrom::Trace => {
                canonical::value_fingerprint(arguments)
            }
            KeyFrom::Structure => canonical::intent_fingerprint(arguments, &FREE_TEXT),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(headers: &[(&str, &str)]) -> Request {
        headers.iter().fold(
            Request::post("/tools/charge_card", ""),
            |request, (name, value)| request.header(name, *value),
        )
    }

    #[test]
    fn a_re_plan_keeps_the_structural_key_whatever_the_model_sent() {
        let first = request(&[
            (IDEMPOTENCY_KEY, "key-tu-1"),
            (RUN_ID, "run-7"),
            (STEP_ID, "step-charge"),
            (TOOL_USE_ID, "tu-1"),
        ]);
        let replan = request(&[
            (IDEMPOTENCY_KEY, "key-tu-2"),
            (RUN_ID, "run-7"),
            (STEP_ID, "step-charge"),
            (TOOL_USE_ID, "tu-2"),
        ]);
        let approved =
            serde_json::json!({"invoice": "inv-1", "amount_cents": 4999, "note": "first"});
        let drifted =
            serde_json::json!({"invoice": "inv-1", "amount_cents": 4999.0, "note": "1st"});
        let structure = KeyFrom::Structure;
        assert_eq!(
            structure.key("charge_card", &first, &approved),
            structure.key("charge_card", &replan, &drifted)
        );
        assert_eq!(
            structure.fingerprint(&approved),
            structure.fingerprint(&drifted)
        );
        // The caller's key is new on the re-plan: a new operation.
        assert_ne!(
            KeyFrom::Caller.key("charge_card", &first, &approved),
            KeyFrom::Caller.key("charge_card", &replan, &drifted)
        );
        assert_ne!(
            KeyFrom::Caller.fingerprint(&approved),
            KeyFrom::Caller.fingerprint(&drifted)
        );
    }

    #[test]
    fn every_call_of_an_allowed_tool_is_its_own_operation() {
        let call = |tool_use| {
            request(&[
                (RUN_ID, "run-7"),
                (STEP_ID, "step-notify"),
                (TOOL_USE_ID, tool_use),
            ])
        };
        let arguments = serde_json::json!({"invoice": "inv-1"});
        let structure = KeyFrom::Structure;
        assert_ne!(
            structure.key("send_notification_to_self", &call("tu-1"), &arguments),
            structure.key("send_notification_to_self", &call("tu-2"), &arguments)
        );
    }

    #[test]
    fn without_run_structure_the_callers_key_is_used() {
        let v1 = request(&[(IDEMPOTENCY_KEY, "op-1")]);
        let arguments = serde_json::json!({"invoice": "inv-1"});
        assert_eq!(
            KeyFrom::Structure.key("charge_card", &v1, &arguments),
            Ok("op-1".to_owned())
        );
        assert!(KeyFrom::Structure
            .key("charge_card", &request(&[]), &arguments)
            .is_err());
    }
}
