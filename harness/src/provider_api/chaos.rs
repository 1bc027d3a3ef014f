//! chaos's own provider API (`[provider] api = "chaos"`, the default):
//! `POST /effects/{tool}` with the arguments as JSON and the target's key in
//! `Idempotency-Key`, answered `201 {"receipt": ...}`, a replay `200` with
//! `Idempotent-Replayed: true` (docs/target-protocol.md §4).

use std::sync::Arc;

use chaos_kit::http::{Request, Response};
use chaos_kit::protocol::{Receipt, IDEMPOTENCY_KEY, IDEMPOTENT_REPLAYED};

use super::{declined_answer, error_answer, Answer, Answering, Api, Desk, Incoming};

pub(super) const NAME: &str = "chaos";

pub(super) struct Chaos;

impl Api for Chaos {
    fn doc(&self) -> &'static str {
        "chaos's own HTTP API: POST /effects/{tool}, JSON, Idempotency-Key (the default)"
    }

    fn route(&self, desk: Arc<dyn Desk>, request: Request) -> Option<Answering<'static>> {
        effects_post(desk, request)
    }

    fn answer(&self, _desk: &dyn Desk, answer: Answer, _key: Option<&str>) -> Response {
        let replayed = |response: Response, replayed: bool| match replayed {
            true => response.header(IDEMPOTENT_REPLAYED, "true"),
            false => response,
        };
        match answer {
            Answer::Created { receipt } => Response::json(201, &Receipt { receipt }),
            Answer::Replayed { receipt } => {
                replayed(Response::json(200, &Receipt { receipt }), true)
            }
            Answer::KeyConflict => Response::new(422),
            Answer::Declined { replayed: again } => replayed(declined_answer(), again),
            Answer::Error {
                status,
                replayed: again,
            } => replayed(error_answer(status), again),
            Answer::Malformed { .. } => Response::new(400),
        }
    }
}

/// `POST /effects/{tool}` as a dispatch; `None` for any other request. The
/// mail server hands its messages over in this shape too.
pub(super) fn effects_post(desk: Arc<dyn Desk>, request: Request) -> Option<Answering<'static>> {
    if request.method != "POST" || !request.path.starts_with("/effects/") {
        return None;
    }
    let tool = request.path.trim_start_matches("/effects/").to_owned();
    let payload = serde_json::from_slice::<serde_json::Value>(&request.body)
        .map_err(|error| format!("the body is not JSON: {error}"));
    let subject = payload
        .as_ref()
        .ok()
        .and_then(|body| body.get(desk.subject_field())?.as_str().map(str::to_owned));
    let delivery = super::delivery(&request);
    let message = super::message(&request);
    let incoming = Incoming {
        tool,
        key: request.header_value(IDEMPOTENCY_KEY).map(str::to_owned),
        payload,
        raw: request.body,
        subject,
        free_text: desk
            .free_text_field()
            .map(str::to_owned)
            .into_iter()
            .collect(),
        resource: None,
        delivery,
        message,
    };
    Some(Box::pin(async move { desk.dispatch(incoming).await }))
}
