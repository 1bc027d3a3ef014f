//! `args-hash`: the key is a hash of the tool and its arguments, kept in memory.
//!
//! This is the `IdempotentStore` from the seed article "Your AI Agent Doesn't
//! Need to Be Smarter": it collapses plain retries onto the first call, and
//! looks right in a unit test. It has three flaws chaos should catch:
//!
//! 1. check-then-act: the "have I seen this?" check and the "remember it" write
//!    are separated by the provider call, so two concurrent attempts both miss
//!    and both dispatch (concurrent-attempts);
//! 2. the key is derived from the arguments, not from the operation: the same
//!    operation retried with a changed recipient is a new key, dispatched again,
//!    instead of a conflict (changed-payload);
//! 3. a stored result is replayed before authorization is checked, so a revoked
//!    caller still reads it (revoked-permission).
//!
//! And because the store is memory, a crash forgets everything.

use chaos_kit::sync::lock;
use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex};

use chaos_kit::canonical;
use chaos_kit::http::{self, Abort, Request, Response};
use chaos_kit::net::Listener;
use chaos_kit::protocol::{AnswerBody, Outcome};
use chaos_kit::target::{self, TargetInfo};
use chaos_kit::upstream::{self, Dispatch};
use chaos_kit::TargetEnv;

pub fn info() -> TargetInfo {
    TargetInfo {
        name: "args-hash".into(),
        summary: "key = hash(tool, args) in memory: check-then-act race, no conflict on changed payload, replays before authz".into(),
        retention: None,
        after_retention: chaos_kit::target::AfterRetention::NewOperation,
    }
}

#[derive(Clone)]
struct Stored {
    receipt: String,
    result: serde_json::Value,
}

struct State {
    env: TargetEnv,
    /// Lost on crash: this is process memory.
    results: Mutex<BTreeMap<String, Stored>>,
}

pub async fn serve(
    listener: impl Listener,
    shutdown: impl std::future::Future<Output = ()>,
    env: TargetEnv,
) -> io::Result<()> {
    let state = Arc::new(State {
        env,
        results: Mutex::new(BTreeMap::new()),
    });
    http::serve(
        listener,
        shutdown,
        http::handler(move |request| handle(state.clone(), request)),
    )
    .await
}

async fn handle(state: Arc<State>, request: Request) -> Result<Response, Abort> {
    if target::is_health_check(&request) {
        return Ok(Response::new(200));
    }
    let Some(tool) = target::tool_call(&request) else {
        return Ok(target::not_found());
    };
    let Some(args) = canonical::canonicalize(&request.body) else {
        return Ok(target::answer(
            AnswerBody::outcome(Outcome::Rejected).with_reason("arguments are not JSON"),
        ));
    };
    // The Idempotency-Key header is ignored: identity comes from the arguments.
    let key = canonical::fingerprint(&format!("{tool}\n{args}"));

    // FLAW 3: replay first, authorize later (or never).
    if let Some(stored) = lock(&state.results).get(&key).cloned() {
        return Ok(target::answer(
            AnswerBody::outcome(Outcome::Replayed)
                .with_receipt(stored.receipt)
                .with_result(stored.result),
        ));
    }

    let Some(token) = upstream::bearer_token(&request) else {
        return Ok(target::answer(AnswerBody::outcome(Outcome::Denied)));
    };
    match upstream::introspect(&state.env, token).await {
        Some(grant) if grant.allows(tool) => {}
        Some(_) => return Ok(target::answer(AnswerBody::outcome(Outcome::Denied))),
        None => {
            return Ok(target::answer(
                AnswerBody::outcome(Outcome::Unknown).with_reason("authority unreachable"),
            ))
        }
    }

    // FLAW 1: nothing was claimed before this await; a concurrent attempt with
    // the same arguments is dispatching right now too.
    let answer = match upstream::dispatch(&state.env, tool, &key, request.body.clone()).await {
        Dispatch::Accepted { receipt, .. } => {
            let result = target::tool_result(tool, &receipt);
            lock(&state.results).insert(
                key,
                Stored {
                    receipt: receipt.clone(),
                    result: result.clone(),
                },
            );
            AnswerBody::outcome(Outcome::Applied)
                .with_receipt(receipt)
                .with_result(result)
        }
        Dispatch::Refused { status } => AnswerBody::outcome(Outcome::Rejected)
            .with_reason(format!("provider refused with {status}")),
        Dispatch::Ambiguous(_) => {
            AnswerBody::outcome(Outcome::Unknown).with_reason("provider did not answer")
        }
    };
    Ok(target::answer(answer))
}
