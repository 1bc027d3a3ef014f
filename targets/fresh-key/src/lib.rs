//! `fresh-key`: the executor that mints a new downstream key on every attempt.
//!
//! This is `executor_v1` from the seed article "A retry is not a replay": the
//! authorization is right, the status codes are right, every single request is
//! well-formed, and still every retry is a brand-new request at the provider,
//! because the key the provider deduplicates on changes with each attempt.
//!
//! chaos should catch it wherever a response is lost or attempts overlap:
//! lost-response, concurrent-attempts and worker-restart.

use std::io;
use std::sync::Arc;

use chaos_kit::http::{self, Abort, Request, Response};
use chaos_kit::net::Listener;
use chaos_kit::protocol::{AnswerBody, Outcome, ATTEMPT_ID};
use chaos_kit::target::{self, TargetInfo};
use chaos_kit::upstream::{self, Dispatch};
use chaos_kit::TargetEnv;

pub fn info() -> TargetInfo {
    TargetInfo {
        name: "fresh-key".into(),
        summary:
            "mints a new downstream key per attempt (executor_v1): every retry is a new effect"
                .into(),
        // It keeps nothing, but it never says so: no retention is declared, so
        // it is judged as promising what every idempotency layer promises.
        retention: None,
        after_retention: chaos_kit::target::AfterRetention::NewOperation,
    }
}

/// Serves tool calls on `listener` until `shutdown` completes.
pub async fn serve(
    listener: impl Listener,
    shutdown: impl std::future::Future<Output = ()>,
    env: TargetEnv,
) -> io::Result<()> {
    let env = Arc::new(env);
    http::serve(
        listener,
        shutdown,
        http::handler(move |request| handle(env.clone(), request)),
    )
    .await
}

async fn handle(env: Arc<TargetEnv>, request: Request) -> Result<Response, Abort> {
    if target::is_health_check(&request) {
        return Ok(Response::new(200));
    }
    let Some(tool) = target::tool_call(&request) else {
        return Ok(target::not_found());
    };

    // Authorization is checked on every attempt: this target's flaw is elsewhere.
    let Some(token) = upstream::bearer_token(&request) else {
        return Ok(target::answer(AnswerBody::outcome(Outcome::Denied)));
    };
    match upstream::introspect(&env, token).await {
        Some(grant) if grant.allows(tool) => {}
        Some(_) => return Ok(target::answer(AnswerBody::outcome(Outcome::Denied))),
        None => return Ok(target::answer(unknown("authority unreachable"))),
    }

    // THE BUG: the downstream key is the attempt's own id, so it is new on every
    // retry, and the provider's dedup never sees the same key twice.
    let downstream_key = format!(
        "fresh-{}",
        request.header_value(ATTEMPT_ID).unwrap_or("no-attempt-id")
    );
    let answer = match upstream::dispatch(&env, tool, &downstream_key, request.body.clone()).await {
        Dispatch::Accepted { receipt, .. } => AnswerBody::outcome(Outcome::Applied)
            .with_result(target::tool_result(tool, &receipt))
            .with_receipt(receipt),
        Dispatch::Refused { status } => AnswerBody::outcome(Outcome::Rejected)
            .with_reason(format!("provider refused with {status}")),
        Dispatch::Ambiguous(_) => unknown("provider did not answer"),
    };
    Ok(target::answer(answer))
}

fn unknown(reason: &str) -> AnswerBody {
    AnswerBody::outcome(Outcome::Unknown).with_reason(reason)
}
