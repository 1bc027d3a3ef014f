//! chaos's own target protocol (docs/target-protocol.md §3): `POST
//! /tools/{tool}` with the arguments as the model wrote them, the operation
//! id in `Idempotency-Key`, the caller's token as a bearer, and the outcome
//! in the answer's body (`[status]` overrides may read a bare status). It is
//! the mapped way in with nothing mapped: one builder, so the two cannot
//! drift apart.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use chaos_kit::http::Client;
use chaos_kit::protocol::Outcome;

use super::mapped::{RequestMapping, ResponseMapping};
use super::{over_http, Outgoing, Sending, Way};

/// The protocol, with the target file's `[status]` overrides.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Protocol {
    response: ResponseMapping,
}

impl Protocol {
    pub(super) const NAME: &'static str = "protocol";
    pub(super) const DOC: &'static str =
        "chaos's target protocol: POST /tools/{tool}, Idempotency-Key, the outcome in the body (no [request] or [response])";

    pub(crate) fn with_status(status: BTreeMap<u16, Outcome>) -> Protocol {
        Protocol {
            response: ResponseMapping::with_status(status),
        }
    }
}

impl Way for Protocol {
    fn send<'a>(
        &'a self,
        http: &'a Client,
        target: &'a str,
        outgoing: &'a Outgoing<'a>,
    ) -> Sending<'a> {
        // Parsed once: every attempt of every trial builds with it.
        static PROTOCOL: LazyLock<RequestMapping> = LazyLock::new(RequestMapping::default);
        Box::pin(over_http(
            http,
            target,
            outgoing,
            |values, headers| PROTOCOL.build(values, headers),
            |response| self.response.interpret(response),
        ))
    }
}
