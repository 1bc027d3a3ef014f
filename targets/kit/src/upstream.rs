//! Typed calls from a target to the harness's provider and authority.

use crate::http::{CallFailure, Request};
use crate::protocol::{
    Approval, Introspection, Receipt, Record, IDEMPOTENCY_KEY, IDEMPOTENT_REPLAYED,
};
use crate::TargetEnv;

/// What a dispatch to the provider came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dispatch {
    /// The provider accepted the effect. `replayed` is true when a keyed provider
    /// answered from its idempotency store: the effect happened on an earlier call.
    Accepted { receipt: String, replayed: bool },
    /// The provider refused definitively (status 4xx): no effect.
    Refused { status: u16 },
    /// No usable answer: the effect may or may not have happened.
    Ambiguous(AmbiguousDispatch),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmbiguousDispatch {
    Call(CallFailure),
    ServerError(u16),
}

/// `POST /effects/{tool}` with the target's downstream key.
pub async fn dispatch(
    env: &TargetEnv,
    tool: &str,
    downstream_key: &str,
    body: bytes::Bytes,
) -> Dispatch {
    let request = Request::post(format!("/effects/{tool}"), body)
        .header(IDEMPOTENCY_KEY, downstream_key)
        .header("content-type", "application/json");
    match env
        .http
        .call(&env.provider, request, env.upstream_timeout)
        .await
    {
        Err(CallFailure::Refused) => {
            Dispatch::Ambiguous(AmbiguousDispatch::Call(CallFailure::Refused))
        }
        Err(failure) => Dispatch::Ambiguous(AmbiguousDispatch::Call(failure)),
        Ok(response) if (200..300).contains(&response.status) => {
            match serde_json::from_slice::<Receipt>(&response.body) {
                Ok(Receipt { receipt }) => Dispatch::Accepted {
                    receipt,
                    replayed: response.header_value(IDEMPOTENT_REPLAYED) == Some("true"),
                },
                Err(_) => Dispatch::Ambiguous(AmbiguousDispatch::ServerError(response.status)),
            }
        }
        Ok(response) if (400..500).contains(&response.status) => Dispatch::Refused {
            status: response.status,
        },
        Ok(response) => Dispatch::Ambiguous(AmbiguousDispatch::ServerError(response.status)),
    }
}

/// What a receipt lookup by downstream key came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    Found {
        receipt: String,
    },
    /// The provider holds no effect under that key.
    NotFound,
    /// The provider offers no lookup (a `blind` provider answers 501).
    Unsupported,
    /// No usable answer.
    Failed,
}

/// `GET /effects?key=<downstream key>`.
pub async fn lookup(env: &TargetEnv, downstream_key: &str) -> Lookup {
    let request = Request::get(&format!("/effects?key={downstream_key}"));
    match env
        .http
        .call(&env.provider, request, env.upstream_timeout)
        .await
    {
        Ok(response) if response.status == 200 => {
            match serde_json::from_slice::<Receipt>(&response.body) {
                Ok(Receipt { receipt }) => Lookup::Found { receipt },
                Err(_) => Lookup::Failed,
            }
        }
        Ok(response) if response.status == 404 => Lookup::NotFound,
        Ok(response) if response.status == 501 || response.status == 405 => Lookup::Unsupported,
        _ => Lookup::Failed,
    }
}

/// `POST /introspect` with `token=...`. `None` when the authority could not be
/// reached: a target must then refuse to act, never assume.
pub async fn introspect(env: &TargetEnv, token: &str) -> Option<Introspection> {
    let request = Request::post("/introspect", format!("token={token}"))
        .header("content-type", "application/x-www-form-urlencoded");
    let response = env
        .http
        .call(&env.authority, request, env.upstream_timeout)
        .await
        .ok()?;
    if response.status != 200 {
        return None;
    }
    serde_json::from_slice(&response.body).ok()
}

/// What asking the provider for a record's owner came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    Found(Record),
    /// The provider holds no such record.
    NoSuchRecord,
    /// No usable answer: ownership is unknown, so nothing may be done.
    Failed,
}

/// `GET /records/{id}` at the provider.
pub async fn record(env: &TargetEnv, id: &str) -> Owner {
    let request = Request::get(&format!("/records/{id}"));
    match env
        .http
        .call(&env.provider, request, env.upstream_timeout)
        .await
    {
        Ok(response) if response.status == 200 => serde_json::from_slice(&response.body)
            .map(Owner::Found)
            .unwrap_or(Owner::Failed),
        Ok(response) if response.status == 404 => Owner::NoSuchRecord,
        _ => Owner::Failed,
    }
}

/// `GET /records` at the provider: every record with its owner, whoever
/// asks (the bulk route an export reads). `None` when no usable answer came.
pub async fn records(env: &TargetEnv) -> Option<Vec<Record>> {
    let response = env
        .http
        .call(
            &env.provider,
            Request::get("/records"),
            env.upstream_timeout,
        )
        .await
        .ok()?;
    if response.status != 200 {
        return None;
    }
    serde_json::from_slice(&response.body).ok()
}

/// `GET /approvals?actor=` at the authority: every approval recorded for
/// `actor`. `None` when the authority could not be reached.
pub async fn approvals(env: &TargetEnv, actor: &str) -> Option<Vec<Approval>> {
    let request = Request::get(&format!("/approvals?actor={actor}"));
    let response = env
        .http
        .call(&env.authority, request, env.upstream_timeout)
        .await
        .ok()?;
    if response.status != 200 {
        return None;
    }
    serde_json::from_slice(&response.body).ok()
}

/// The bearer token of an inbound request, if any.
pub fn bearer_token(request: &Request) -> Option<&str> {
    request
        .header_value(crate::protocol::AUTHORIZATION)?
        .strip_prefix("Bearer ")
}
