//! Provider APIs: what chaos's provider speaks to the target, one file each.
//!
//! The provider's core ([`crate::roles::provider`]) decides, records and
//! faults every request to act the same way whatever shape it came in: its
//! contract is the scenario's (`[provider] profile`, keyed | lookup | blind,
//! with its lookup, saved errors and declines). An API is the *shape* of the
//! wire around that core, chosen by the target file's `[provider] api`: chaos's
//! own HTTP API, the subset of Stripe's v1 a payments service uses, or a mail
//! server. A unit owns everything that differs between them:
//!
//! - its name (`NAME`, as `[provider] api` says it) and docs line, and what the
//!   target file may not combine it with ([`Api::validate`]);
//! - `admit`: which scenarios it can play honestly, decided once per cell
//!   before anything runs (SMTP deduplicates nothing, Stripe keeps keys 24 h);
//! - `serve` and `route`: how a request reaches the core as an [`Incoming`]
//!   dispatch, and `answer`: how the core's [`Answer`] is said back;
//! - what its contract adds to the scenario's (`saves_errors`, a key refused
//!   while in flight, a key bound to its endpoint), and the URL the target is
//!   told.
//!
//! This module sits below the target file and the roles: a unit sees the
//! provider only as a [`Desk`], which the core implements. Adding an API is
//! its file, one line in [`apis!`] below, a section of
//! `docs/target-protocol.md` §4, an example and a test.

mod chaos;
mod smtp;
mod stripe;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use chaos_kit::http::{Abort, Request, Response};
use serde::Deserialize;
use tokio::sync::watch;

use crate::scenario::Scenario;

pub(crate) use stripe::Resource;

/// What a unit's futures are: the core answers on the trial's runtime.
pub(crate) type Answering<'a> = Pin<Box<dyn Future<Output = Result<Response, Abort>> + Send + 'a>>;

/// Declares every API: its variant of [`ProviderApi`] (as the target file
/// names it) and the unit that carries it out. The order is the order error
/// messages list the choices in.
macro_rules! apis {
    ($($variant:ident($module:ident::$unit:ident),)+) => {
        /// `[provider] api`: the shape of the wire around chaos's provider.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
        #[serde(rename_all = "kebab-case")]
        pub enum ProviderApi {
            #[default]
            $($variant,)+
        }

        impl ProviderApi {
            /// Every API, as a target file names it.
            pub const NAMES: &'static [&'static str] = &[$($module::NAME,)+];
            /// Every API, in the order a target file's error lists them.
            pub(crate) const ALL: &'static [ProviderApi] = &[$(ProviderApi::$variant,)+];

            fn unit(self) -> &'static dyn Api {
                match self {
                    $(ProviderApi::$variant => &$module::$unit,)+
                }
            }
        }
    };
}

apis! {
    Chaos(chaos::Chaos),
    Smtp(smtp::Smtp),
    Stripe(stripe::Stripe),
}

/// One provider API. Object-safe: the provider and the live driver hold
/// whichever the target file chose.
pub(crate) trait Api: Sync {
    /// One line for `chaos list` and the docs' table of APIs.
    fn doc(&self) -> &'static str;
    /// The scheme of the URL the target is told (`CHAOS_PROVIDER_URL`).
    fn scheme(&self) -> &'static str {
        "http"
    }
    /// What the rest of the target file may not say with it.
    fn validate(&self, _file: &FileFacts) -> Result<(), String> {
        Ok(())
    }
    /// Whether it can play `scenario`'s provider honestly; the reason when
    /// not. Asked once per cell, before any trial runs.
    fn admit(&self, _scenario: &Scenario, _target: &str) -> Result<(), String> {
        Ok(())
    }
    /// Whether it can play only a blind provider (no key, no lookup): `chaos
    /// probe` then probes with one.
    fn blind_only(&self) -> bool {
        false
    }
    /// Whether its contract saves every answer under the key, errors too,
    /// whatever the scenario says.
    fn saves_errors(&self) -> bool {
        false
    }
    /// Whether a key is bound to the endpoint it was first used on (another
    /// endpoint with it is a conflict, as Stripe has it).
    fn binds_keys_to_endpoints(&self) -> bool {
        false
    }
    /// How to answer a request whose key another request is executing,
    /// when the contract refuses those rather than running them side by
    /// side; built only when a request is refused.
    fn in_flight_answer(&self) -> Option<fn() -> Response> {
        None
    }
    /// Serves its own requests on `desk`'s behalf: `None` for a request
    /// that is not its own (the core answers the protocol's shared ones:
    /// `/healthz`, lookups, records).
    fn route(&self, desk: Arc<dyn Desk>, request: Request) -> Option<Answering<'static>>;
    /// The core's answer to a dispatch, in this API's shape.
    fn answer(&self, desk: &dyn Desk, answer: Answer, key: Option<&str>) -> Response;
    /// Serves the provider on `listener` until `stopped` ends, on the
    /// trial's runtime (its connections end with the trial). HTTP unless the
    /// API is not.
    fn serve(
        &self,
        listener: tokio::net::TcpListener,
        desk: Arc<dyn Desk>,
        _sent: Sent,
        mut stopped: watch::Receiver<()>,
    ) {
        let handler = chaos_kit::http::handler(move |request| {
            let desk = desk.clone();
            async move { desk.handle(request).await }
        });
        tokio::spawn(chaos_kit::http::serve(
            listener,
            async move {
                // Completes when the sender is dropped: the trial is over.
                while stopped.changed().await.is_ok() {}
            },
            handler,
        ));
    }
}

impl ProviderApi {
    pub fn as_str(self) -> &'static str {
        ProviderApi::NAMES[self as usize]
    }

    pub fn doc(self) -> &'static str {
        self.unit().doc()
    }

    pub(crate) fn scheme(self) -> &'static str {
        self.unit().scheme()
    }

    pub(crate) fn validate(self, file: &FileFacts) -> Result<(), String> {
        self.unit().validate(file)
    }

    pub(crate) fn admit(self, scenario: &Scenario, target: &str) -> Result<(), String> {
        self.unit().admit(scenario, target)
    }

    pub(crate) fn blind_only(self) -> bool {
        self.unit().blind_only()
    }

    pub(crate) fn saves_errors(self) -> bool {
        self.unit().saves_errors()
    }

    pub(crate) fn binds_keys_to_endpoints(self) -> bool {
        self.unit().binds_keys_to_endpoints()
    }

    pub(crate) fn in_flight_answer(self) -> Option<fn() -> Response> {
        self.unit().in_flight_answer()
    }

    pub(crate) fn route(self, desk: Arc<dyn Desk>, request: Request) -> Option<Answering<'static>> {
        self.unit().route(desk, request)
    }

    pub(crate) fn answer(self, desk: &dyn Desk, answer: Answer, key: Option<&str>) -> Response {
        self.unit().answer(desk, answer, key)
    }

    pub(crate) fn serve(
        self,
        listener: tokio::net::TcpListener,
        desk: Arc<dyn Desk>,
        sent: Sent,
        stopped: watch::Receiver<()>,
    ) {
        self.unit().serve(listener, desk, sent, stopped)
    }
}

/// What a unit sees of the rest of a target file, to refuse a combination.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FileFacts {
    /// The file counts effects as rows in its database (`[effects]`).
    pub effects_in_database: bool,
}

/// The provider's core, as an API sees it.
pub(crate) trait Desk: Send + Sync {
    /// Any request: the protocol's shared routes, then the API's own.
    fn handle(self: Arc<Self>, request: Request) -> Answering<'static>;
    /// One request to act: decided, recorded, faulted, answered.
    fn dispatch(&self, incoming: Incoming) -> Answering<'_>;
    /// An object this provider created, by id (Stripe's GET).
    fn object(&self, id: &str) -> Option<serde_json::Value>;
    /// Every object it created, in creation order (Stripe's search).
    fn objects(&self) -> Vec<serde_json::Value>;
    /// The workload's subject field (e.g. `invoice`).
    fn subject_field(&self) -> &str;
    /// The argument a payload's intent leaves out (the free text), if any.
    fn free_text_field(&self) -> Option<&str>;
}

/// One request to act, whatever API it came in: what the provider decides
/// on, records and lets the nemesis fault.
pub(crate) struct Incoming {
    pub tool: String,
    pub key: Option<String>,
    /// The payload as JSON, or why it is not one the API takes.
    pub payload: Result<serde_json::Value, String>,
    /// The bytes as sent, fingerprinted when there is no payload.
    pub raw: Bytes,
    pub subject: Option<String>,
    /// The payload's fields a reworded intent may differ in.
    pub free_text: Vec<String>,
    /// Stripe: the kind of object it creates.
    pub resource: Option<Resource>,
    /// The delivery of a broker's message the consumer acted on, from
    /// [`DELIVERY`].
    pub delivery: Option<u32>,
    /// Which published message the consumer acted on, from [`MESSAGE`].
    pub message: Option<String>,
}

/// The header a consumer on a broker may send its provider request with:
/// which delivery of the message it acts on (1 the first; RabbitMQ's
/// `x-delivery-count` plus one). Read by every API, never required.
pub(crate) const DELIVERY: &str = "x-chaos-delivery";

/// The header a consumer on a broker may send with [`DELIVERY`]: which
/// published message it acts on, the message's own `x-attempt-id` (the
/// agent's attempt that published it). Two effects of one operation from two
/// messages are a producer's second publish (its confirm was lost), not the
/// broker's redelivery. Read by every API, never required.
pub(crate) const MESSAGE: &str = "x-chaos-message";

/// The [`MESSAGE`] header of `request`, when it names one.
pub(crate) fn message(request: &chaos_kit::http::Request) -> Option<String> {
    request
        .header_value(MESSAGE)
        .map(str::trim)
        .filter(|message| !message.is_empty() && message.len() <= 200)
        .map(str::to_owned)
}

/// The [`DELIVERY`] header of `request`, when it is a positive number.
pub(crate) fn delivery(request: &chaos_kit::http::Request) -> Option<u32> {
    request
        .header_value(DELIVERY)
        .and_then(|value| value.trim().parse().ok())
        .filter(|delivery| *delivery > 0)
}

/// What the provider answers a dispatch, before it is written in the API's
/// shape.
pub(crate) enum Answer {
    Created { receipt: String },
    Replayed { receipt: String },
    KeyConflict,
    Declined { replayed: bool },
    Error { status: u16, replayed: bool },
    Malformed { why: String },
}

/// What a trial sends, for an API that must attribute what reaches it
/// without a key or a subject field of its own (a mail message).
#[derive(Debug, Clone, Default)]
pub(crate) struct Sent {
    pub tool: String,
    pub subject_field: String,
    pub free_text_field: Option<String>,
    /// Every operation's subject.
    pub subjects: Vec<String>,
    /// (subject, arguments as sent) of every payload the trial sends.
    pub payloads: Vec<(String, Bytes)>,
}

/// What a decline answers: Stripe's shape for a refused card.
const DECLINED_STATUS: u16 = 402;
const DECLINED_BODY: &str =
    r#"{"error":{"type":"card_error","code":"card_declined","message":"Your card was declined."}}"#;
const ERROR_BODY: &str =
    r#"{"error":{"type":"api_error","message":"An error occurred while processing the request."}}"#;

pub(crate) fn declined_answer() -> Response {
    Response::new(DECLINED_STATUS)
        .header("content-type", "application/json")
        .body(DECLINED_BODY)
}

pub(crate) fn error_answer(status: u16) -> Response {
    Response::new(status)
        .header("content-type", "application/json")
        .body(ERROR_BODY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_api_is_named_as_a_file_names_it() {
        for (index, name) in ProviderApi::NAMES.iter().enumerate() {
            // The unit's NAME and the name serde reads must be one.
            let parsed: ProviderApi =
                serde_json::from_value(serde_json::Value::String((*name).into())).unwrap();
            assert_eq!(ProviderApi::ALL[index], parsed);
            assert_eq!(parsed.as_str(), *name);
            assert!(!parsed.doc().is_empty(), "{name} has no docs line");
        }
        assert_eq!(ProviderApi::default(), ProviderApi::Chaos);
    }
}
