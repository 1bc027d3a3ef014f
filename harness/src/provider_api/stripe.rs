//! The provider as Stripe (`[provider] api = "stripe"` in a target file):
//! the subset of Stripe's v1 HTTP API a payments service uses for one-off
//! charges, so a service using the official Stripe SDK, its base URL pointed
//! here, runs unchanged.
//!
//! - `POST /v1/payment_intents` (with `confirm=true`, the intent succeeds),
//!   `POST /v1/charges`, `POST /v1/refunds`: form-encoded parameters
//!   (`metadata[invoice]=...`), each creating one object: an effect,
//!   attributed by `metadata[<subject field>]` (a refund without it by the
//!   metadata of the charge or intent it refunds);
//! - `GET /v1/{payment_intents,charges,refunds}/{id}`: the object, or `404`;
//!   `GET /v1/{…}/search?query=metadata['invoice']:'INV-1'`: the objects
//!   whose metadata match (clauses joined by ` AND `), at once (Stripe's own
//!   search may lag; this one is exact, the scenario's `lookup = "exact"`).
//!
//! This is a translation layer, not a second provider: a POST becomes the
//! generic provider's [`Incoming`] dispatch (the subject from the metadata,
//! the key from `Idempotency-Key`, the payload the parameters as JSON, so
//! their order does not matter), and its [`Answer`] becomes Stripe's JSON:
//! the object, or `{"error":{"type":...,"message":...}}`. The ledger, the
//! faults, the nemesis and every check are the generic provider's. What the
//! contract adds is Stripe v1's idempotency: the first answer saved and
//! replayed for the retention (a 500 included) with `Idempotent-Replayed:
//! true`, `400 idempotency_error` for the key with other parameters (or on
//! another endpoint), `409` while a request with the key executes (not a
//! dispatch: it never started), and a new request once the key is pruned.

use std::sync::Arc;
use std::time::Duration;

use chaos_kit::http::{Abort, Request, Response};
use chaos_kit::protocol::{
    LookupCapability, ProviderProfile, IDEMPOTENCY_KEY, IDEMPOTENT_REPLAYED,
};
use serde_json::{json, Map, Value};

use super::{declined_answer, error_answer, Answer, Answering, Api, Desk, Incoming};
use crate::fault::Fault;
use crate::scenario::Scenario;

pub(super) const NAME: &str = "stripe";

pub(super) struct Stripe;

/// Stripe's idempotency contract is fixed: keys kept 24 hours, every answer
/// saved (a 500 too), objects fetched by id. A scenario that declares
/// another provider would be judged against a contract the target never
/// met, so it is not run against a Stripe-shaped provider.
const STRIPE_RETENTION: Duration = Duration::from_secs(24 * 3600);

impl Api for Stripe {
    fn doc(&self) -> &'static str {
        "the subset of Stripe's v1 API a payments service uses for one-off charges, with Stripe's idempotency contract"
    }

    fn admit(&self, scenario: &Scenario, target: &str) -> Result<(), String> {
        let provider = &scenario.provider;
        let contradiction = if provider.profile != ProviderProfile::Keyed {
            format!(
                "it declares a '{}' provider, and Stripe deduplicates by Idempotency-Key (keyed)",
                provider.profile.as_str()
            )
        } else if provider.retention != Some(STRIPE_RETENTION) {
            format!(
                "it declares the provider keeps keys {}, and Stripe keeps them 24h",
                provider
                    .retention
                    .map_or("forever".to_owned(), |kept| humantime::format_duration(
                        kept
                    )
                    .to_string())
            )
        } else if matches!(provider.lookup, LookupCapability::Lagging(_)) {
            "it declares a lagging lookup, and Stripe's GET of an object by id is exact".into()
        } else if !provider.saves_errors
            && scenario
                .faults
                .iter()
                .any(|fault| matches!(fault, Fault::ProviderError(_)))
        {
            "its provider errors are not saved under the key (no saves-errors = true), and Stripe saves a 500 and replays it".into()
        } else {
            return Ok(());
        };
        Err(format!(
            "target '{target}' talks to a Stripe-shaped provider ([provider] api = \"stripe\"), and {contradiction}; run scenarios whose [provider] is profile = \"keyed\", retention = \"24h\" (and saves-errors = true with a provider-error fault)"
        ))
    }

    /// Stripe's contract saves every answer, errors included.
    fn saves_errors(&self) -> bool {
        true
    }

    fn binds_keys_to_endpoints(&self) -> bool {
        true
    }

    fn in_flight_answer(&self) -> Option<fn() -> Response> {
        Some(in_flight_answer)
    }

    fn route(&self, desk: Arc<dyn Desk>, request: Request) -> Option<Answering<'static>> {
        if request.path.starts_with("/v1/") {
            Some(Box::pin(handle(desk, request)))
        } else {
            super::chaos::effects_post(desk, request)
        }
    }

    fn answer(&self, desk: &dyn Desk, answer: Answer, key: Option<&str>) -> Response {
        self::answer(desk, answer, key)
    }
}

/// The kinds of object the profile creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resource {
    PaymentIntent,
    Charge,
    Refund,
}

impl Resource {
    const ALL: [Resource; 3] = [Resource::PaymentIntent, Resource::Charge, Resource::Refund];

    /// Its path under `/v1/`, which is also the dispatch's tool.
    fn collection(self) -> &'static str {
        match self {
            Resource::PaymentIntent => "payment_intents",
            Resource::Charge => "charges",
            Resource::Refund => "refunds",
        }
    }

    fn object_name(self) -> &'static str {
        match self {
            Resource::PaymentIntent => "payment_intent",
            Resource::Charge => "charge",
            Resource::Refund => "refund",
        }
    }

    /// Stripe's id prefix, then the provider's effect number: ids sort in
    /// creation order and stay unique within the trial's provider.
    pub(crate) fn id(self, effect: usize) -> String {
        let prefix = match self {
            Resource::PaymentIntent => "pi",
            Resource::Charge => "ch",
            Resource::Refund => "re",
        };
        format!("{prefix}_chaos{effect:06}")
    }

    /// The object a create of this kind made (see [`object`]).
    pub(crate) fn object(self, id: &str, params: &Value, now_ms: u64) -> Value {
        object(self, id, params, now_ms)
    }

    fn from_collection(collection: &str) -> Option<Resource> {
        Resource::ALL
            .into_iter()
            .find(|resource| resource.collection() == collection)
    }

    /// The parameter Stripe requires that is missing, if one is.
    fn missing_parameter(self, params: &Map<String, Value>) -> Option<&'static str> {
        match self {
            Resource::PaymentIntent | Resource::Charge => ["amount", "currency"]
                .into_iter()
                .find(|name| !params.contains_key(*name)),
            Resource::Refund => (!params.contains_key("charge")
                && !params.contains_key("payment_intent"))
            .then_some("charge"),
        }
    }
}

/// Serves a `/v1/...` request.
async fn handle(provider: Arc<dyn Desk>, request: Request) -> Result<Response, Abort> {
    let rest = request.path.trim_start_matches("/v1/");
    let (collection, id) = match rest.split_once('/') {
        Some((collection, id)) => (collection, Some(id)),
        None => (rest, None),
    };
    let Some(resource) = Resource::from_collection(collection) else {
        return Ok(unrecognized(&request));
    };
    if !request
        .header_value("authorization")
        .is_some_and(|value| value.starts_with("Bearer ") && value.len() > "Bearer ".len())
    {
        return Ok(error(
            401,
            "invalid_request_error",
            None,
            "You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY').".into(),
        ));
    }
    match (request.method.as_str(), id) {
        ("GET", Some("search")) => Ok(search(provider.as_ref(), resource, &request)),
        ("GET", Some(id)) => Ok(match provider.object(id) {
            Some(object) if object["object"] == resource.object_name() => {
                Response::json(200, &object)
            }
            _ => error(
                404,
                "invalid_request_error",
                Some("resource_missing"),
                format!("No such {}: '{id}'", resource.object_name()),
            ),
        }),
        ("POST", None) => {
            let incoming = incoming(provider.as_ref(), resource, request);
            provider.dispatch(incoming).await
        }
        _ => Ok(unrecognized(&request)),
    }
}

/// `GET /v1/{resource}/search?query=...`: metadata clauses only.
fn search(provider: &dyn Desk, resource: Resource, request: &Request) -> Response {
    let query = request
        .query_param("query")
        .map(decode)
        .transpose()
        .ok()
        .flatten()
        .unwrap_or_default();
    let Some(clauses) = metadata_clauses(&query) else {
        return error(
            400,
            "invalid_request_error",
            Some("parameter_invalid_string"),
            format!("This profile's search takes metadata clauses joined by AND, e.g. query=metadata['invoice']:'INV-1'; got \"{query}\"."),
        );
    };
    let data: Vec<Value> = provider
        .objects()
        .into_iter()
        .filter(|object| object["object"] == resource.object_name())
        .filter(|object| {
            clauses
                .iter()
                .all(|(name, value)| object["metadata"][name.as_str()] == value.as_str())
        })
        .collect();
    Response::json(
        200,
        &json!({"object": "search_result", "data": data, "has_more": false, "next_page": null, "url": request.path}),
    )
}

/// `metadata['a']:'x' AND metadata['b']:'y'` as (name, value) pairs.
fn metadata_clauses(query: &str) -> Option<Vec<(String, String)>> {
    query
        .split(" AND ")
        .map(|clause| {
            let rest = clause.trim().strip_prefix("metadata['")?;
            let (name, rest) = rest.split_once("']:'")?;
            let value = rest.strip_suffix('\'')?;
            Some((name.to_owned(), value.to_owned()))
        })
        .collect()
}

/// A create request as the generic provider's dispatch.
fn incoming(provider: &dyn Desk, resource: Resource, request: Request) -> Incoming {
    let payload = parse_form(&request.body).and_then(|params| {
        let map = params.as_object().cloned().unwrap_or_default();
        match resource.missing_parameter(&map) {
            Some(name) => Err(format!("Missing required param: {name}.")),
            None => Ok(params),
        }
    });
    let subject = payload.as_ref().ok().and_then(|params| {
        subject_of(params, provider.subject_field()).or_else(|| {
            // A refund says what it refunds; that object says whose it is.
            ["payment_intent", "charge"]
                .into_iter()
                .filter_map(|name| params.get(name)?.as_str())
                .find_map(|id| subject_of(&provider.object(id)?, provider.subject_field()))
        })
    });
    let payload = payload.and_then(|params| match resource {
        Resource::Refund => {
            let refunded = ["payment_intent", "charge"]
                .into_iter()
                .find_map(|name| Some((name, params.get(name)?.as_str()?.to_owned())));
            match refunded {
                Some((name, id)) if provider.object(&id).is_none() => {
                    Err(format!("No such {name}: '{id}'"))
                }
                _ => Ok(params),
            }
        }
        _ => Ok(params),
    });
    let delivery = super::delivery(&request);
    let message = super::message(&request);
    Incoming {
        tool: resource.collection().to_owned(),
        key: request.header_value(IDEMPOTENCY_KEY).map(str::to_owned),
        payload,
        raw: request.body,
        subject,
        // Which parameter carries the workload's free text, if any, is the
        // service's choice, and Stripe compares every parameter.
        free_text: Vec::new(),
        resource: Some(resource),
        delivery,
        message,
    }
}

fn subject_of(object: &Value, field: &str) -> Option<String> {
    Some(object.get("metadata")?.get(field)?.as_str()?.to_owned())
}

/// The object a create made, as Stripe returns it: the parameters it was
/// given, typed where Stripe types them, and its state.
fn object(resource: Resource, id: &str, params: &Value, now_ms: u64) -> Value {
    let mut object = params.as_object().cloned().unwrap_or_default();
    for name in ["amount", "application_fee_amount"] {
        if let Some(number) = object
            .get(name)
            .and_then(Value::as_str)
            .and_then(|text| text.parse::<i64>().ok())
        {
            object.insert(name.into(), number.into());
        }
    }
    object.remove("confirm");
    object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    object.insert("id".into(), id.into());
    object.insert("object".into(), resource.object_name().into());
    object.insert("created".into(), (now_ms / 1000).into());
    object.insert("livemode".into(), false.into());
    let confirmed = params.get("confirm").and_then(Value::as_str) == Some("true");
    let status = match resource {
        Resource::PaymentIntent if !confirmed => "requires_confirmation",
        _ => "succeeded",
    };
    object.insert("status".into(), status.into());
    if resource == Resource::Charge {
        object.insert("paid".into(), true.into());
        object.insert("captured".into(), true.into());
    }
    Value::Object(object)
}

/// The generic provider's answer, in Stripe's shape.
fn answer(provider: &dyn Desk, answer: Answer, key: Option<&str>) -> Response {
    let replayed = |response: Response, replayed: bool| match replayed {
        true => response.header(IDEMPOTENT_REPLAYED, "true"),
        false => response,
    };
    let found = |receipt: &str| match provider.object(receipt) {
        Some(object) => Response::json(200, &object),
        None => error_answer(500),
    };
    match answer {
        Answer::Created { receipt } => found(&receipt),
        Answer::Replayed { receipt } => replayed(found(&receipt), true),
        Answer::KeyConflict => error(
            400,
            "idempotency_error",
            None,
            format!(
                "Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '{}' if you meant to execute a different request.",
                key.unwrap_or_default()
            ),
        ),
        Answer::Declined { replayed: again } => replayed(declined_answer(), again),
        Answer::Error {
            status,
            replayed: again,
        } => replayed(error_answer(status), again),
        Answer::Malformed { why } => error(400, "invalid_request_error", None, why),
    }
}

/// Stripe's answer to a request whose key another request is executing.
fn in_flight_answer() -> Response {
    error(
        409,
        "invalid_request_error",
        Some("idempotency_key_in_use"),
        "There is currently another in-progress request using this Stripe API Key and Idempotency Key. Please try again later.".into(),
    )
}

fn unrecognized(request: &Request) -> Response {
    error(
        404,
        "invalid_request_error",
        None,
        format!(
            "Unrecognized request URL ({}: {}). This profile serves POST /v1/payment_intents, /v1/charges, /v1/refunds and GET of each by id.",
            request.method, request.path
        ),
    )
}

fn error(status: u16, kind: &str, code: Option<&str>, message: String) -> Response {
    let mut error = json!({ "type": kind, "message": message });
    if let Some(code) = code {
        error["code"] = code.into();
    }
    Response::json(status, &json!({ "error": error }))
}

/// Stripe's form encoding as JSON: `metadata[invoice]=x` is
/// `{"metadata":{"invoice":"x"}}`, `expand[]=a` (or `expand[0]=a`) an
/// array; every value a string, as Stripe receives it.
pub(crate) fn parse_form(body: &[u8]) -> Result<Value, String> {
    let text = std::str::from_utf8(body)
        .map_err(|_| "Invalid request: the body is not UTF-8 form data.".to_owned())?;
    let mut root = Value::Object(Map::new());
    for pair in text.split('&').filter(|pair| !pair.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let (name, value) = (decode(name)?, decode(value)?);
        let (head, mut rest) = match name.find('[') {
            Some(at) => (&name[..at], &name[at..]),
            None => (name.as_str(), ""),
        };
        let mut path = vec![head.to_owned()];
        while let Some(inner) = rest.strip_prefix('[') {
            let Some(end) = inner.find(']') else {
                return Err(format!("Invalid request: unbalanced brackets in '{name}'."));
            };
            path.push(inner[..end].to_owned());
            rest = &inner[end + 1..];
        }
        if head.is_empty() || !rest.is_empty() {
            return Err(format!(
                "Invalid request: malformed parameter name '{name}'."
            ));
        }
        insert(&mut root, &path, value)
            .map_err(|()| format!("Invalid request: parameter '{name}' conflicts with another."))?;
    }
    Ok(root)
}

/// Puts `value` at `path`: an empty or numeric segment is an array index.
fn insert(node: &mut Value, path: &[String], value: String) -> Result<(), ()> {
    let Some((segment, rest)) = path.split_first() else {
        return match node {
            Value::Null => {
                *node = Value::String(value);
                Ok(())
            }
            _ => Err(()),
        };
    };
    let indexed = segment.is_empty() || segment.bytes().all(|byte| byte.is_ascii_digit());
    if node.is_null() {
        *node = if indexed {
            Value::Array(Vec::new())
        } else {
            Value::Object(Map::new())
        };
    }
    match node {
        Value::Array(items) if indexed => {
            let at = match segment.parse::<usize>() {
                Ok(at) => at,
                Err(_) => items.len(),
            };
            // Stripe's SDKs number list items from 0 with no gaps.
            if at > items.len() {
                return Err(());
            }
            if at == items.len() {
                items.push(Value::Null);
            }
            insert(&mut items[at], rest, value)
        }
        Value::Object(fields) if !indexed || !segment.is_empty() => insert(
            fields.entry(segment.clone()).or_insert(Value::Null),
            rest,
            value,
        ),
        _ => Err(()),
    }
}

/// Percent-decoding of `application/x-www-form-urlencoded` (`+` is a space).
fn decode(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes
                    .get(at + 1..at + 3)
                    .and_then(|hex| std::str::from_utf8(hex).ok())
                    .and_then(|hex| u8::from_str_radix(hex, 16).ok())
                    .ok_or_else(|| format!("Invalid request: bad percent-encoding in '{text}'."))?;
                out.push(hex);
                at += 2;
            }
            byte => out.push(byte),
        }
        at += 1;
    }
    String::from_utf8(out)
        .map_err(|_| format!("Invalid request: '{text}' does not decode to UTF-8."))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::Path;
    use std::time::Duration;

    use chaos_kit::canonical::value_fingerprint;

    use super::*;
    use crate::history::{Disposition, Ledger};
    use crate::plan::{Timing, Trial};
    use crate::provider_api::ProviderApi;
    use crate::roles::clock::{HarnessClock, RealTimeline};
    use crate::roles::provider::Provider;
    use crate::roles::{Cast, LiveTimes, Setting};
    use crate::scenario::Scenario;

    pub(super) const KEYED: &str = r#"
test = "lost-response"
description = "d"
invariant = "i"
boundary = "accepted-request"

[provider]
profile = "keyed"
retention = "24h"
"#;

    const CALL: &str = r#"
[[call]]
operation = "charge"
attempts = 2
"#;

    /// The Stripe-shaped provider of a trial of [`KEYED`] with `extra`
    /// TOML: its first lines, up to a table, are the `[provider]`'s. Keys
    /// are kept for `retention`.
    pub(super) fn provider(extra: &str, retention: Duration) -> Arc<Provider> {
        let first_table = extra
            .match_indices('[')
            .map(|(at, _)| at)
            .find(|at| *at == 0 || extra.as_bytes()[at - 1] == b'\n');
        let (in_provider, tables) = extra.split_at(first_table.unwrap_or(extra.len()));
        let scenario = Scenario::parse(
            Path::new("scenarios/stripe.toml"),
            &format!("{KEYED}{in_provider}{CALL}{tables}"),
        )
        .unwrap();
        let trial = Trial::new(&scenario, 1, Timing::live());
        Cast::new(
            &trial,
            Setting {
                timeline: Arc::new(RealTimeline::start()),
                clock: Arc::new(HarnessClock::system()),
                api: ProviderApi::Stripe,
                live: Some(LiveTimes {
                    provider_retention: Some(retention),
                    clock_waits: BTreeMap::new(),
                    approval_expiries: &[],
                    earlier: BTreeMap::new(),
                    tool_names: BTreeMap::new(),
                }),
            },
        )
        .provider
    }

    fn post(path: &str, key: Option<&str>, form: &str) -> Request {
        let request =
            Request::post(path, form.to_owned()).header("authorization", "Bearer sk_test_chaos");
        match key {
            Some(key) => request.header(IDEMPOTENCY_KEY, key),
            None => request,
        }
    }

    fn send(provider: &Arc<Provider>, request: Request) -> Response {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime
            .block_on(provider.clone().handle(request))
            .expect("answered")
    }

    fn body(response: &Response) -> Value {
        serde_json::from_slice(&response.body).unwrap()
    }

    const CHARGE: &str =
        "amount=4999&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[invoice]=inv-1";
    const REORDERED: &str = "metadata%5Binvoice%5D=inv-1&payment_method=pm_card_visa&confirm=true&currency=usd&amount=4999";

    #[test]
    fn form_parameters_nest_by_brackets_and_decode() {
        let params = parse_form(b"a=1&metadata[invoice]=inv+1%2F2&expand[]=x&expand[]=y&items[0][price]=p&items[1][price]=q").unwrap();
        assert_eq!(
            params,
            json!({"a":"1","metadata":{"invoice":"inv 1/2"},"expand":["x","y"],"items":[{"price":"p"},{"price":"q"}]})
        );
        // The order of the parameters is not part of what they say.
        assert_eq!(
            value_fingerprint(&parse_form(CHARGE.as_bytes()).unwrap()),
            value_fingerprint(&parse_form(REORDERED.as_bytes()).unwrap())
        );
        for bad in ["a[b=1", "a=%zz", "[x]=1", "a=1&a[b]=2", "items[3]=x"] {
            assert!(parse_form(bad.as_bytes()).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_confirmed_payment_intent_is_one_effect_attributed_by_its_metadata() {
        let provider = provider("", Duration::from_secs(86_400));
        let response = send(&provider, post("/v1/payment_intents", Some("k-1"), CHARGE));
        assert_eq!(response.status, 200);
        assert_eq!(response.header_value(IDEMPOTENT_REPLAYED), None);
        let intent = body(&response);
        assert_eq!(intent["object"], "payment_intent");
        assert_eq!(intent["status"], "succeeded");
        assert_eq!(intent["amount"], 4999);
        assert_eq!(intent["currency"], "usd");
        assert_eq!(intent["metadata"], json!({"invoice": "inv-1"}));
        let id = intent["id"].as_str().unwrap().to_owned();
        assert!(id.starts_with("pi_"), "{id}");

        let Ledger {
            dispatches,
            effects,
            ..
        } = provider.ledger();
        assert_eq!(effects.len(), 1);
        assert_eq!(effects[0].receipt, id);
        assert_eq!(effects[0].subject.as_deref(), Some("inv-1"));
        assert_eq!(dispatches[0].tool, "payment_intents");
        assert_eq!(dispatches[0].key.as_deref(), Some("k-1"));
        assert!(dispatches[0].provider_shaped);

        let fetched = send(
            &provider,
            Request::get(&format!("/v1/payment_intents/{id}")).header("authorization", "Bearer sk"),
        );
        assert_eq!((fetched.status, body(&fetched)), (200, intent));
        let missing = send(
            &provider,
            Request::get("/v1/charges/ch_nope").header("authorization", "Bearer sk"),
        );
        assert_eq!(missing.status, 404);
        assert_eq!(body(&missing)["error"]["code"], "resource_missing");
    }

    #[test]
    fn the_first_answer_is_replayed_to_the_key_whatever_the_parameters_order() {
        let provider = provider("", Duration::from_secs(86_400));
        let first = send(&provider, post("/v1/payment_intents", Some("k-1"), CHARGE));
        let again = send(
            &provider,
            post("/v1/payment_intents", Some("k-1"), REORDERED),
        );
        assert_eq!(again.status, 200);
        assert_eq!(again.header_value(IDEMPOTENT_REPLAYED), Some("true"));
        assert_eq!(body(&again), body(&first));
        let ledger = provider.ledger();
        assert_eq!(ledger.effects.len(), 1);
        assert!(matches!(
            &ledger.dispatches[1].disposition,
            Disposition::Replayed { receipt } if *receipt == ledger.effects[0].receipt
        ));
    }

    #[test]
    fn the_key_with_other_parameters_or_on_another_endpoint_is_an_idempotency_error() {
        let provider = provider("", Duration::from_secs(86_400));
        send(&provider, post("/v1/payment_intents", Some("k-1"), CHARGE));
        for (path, form) in [
            ("/v1/payment_intents", CHARGE.replace("4999", "5000")),
            ("/v1/charges", CHARGE.to_owned()),
        ] {
            let response = send(&provider, post(path, Some("k-1"), &form));
            assert_eq!(response.status, 400, "{path}");
            let error = &body(&response)["error"];
            assert_eq!(error["type"], "idempotency_error");
            assert!(
                error["message"].as_str().unwrap().contains("'k-1'"),
                "{error}"
            );
        }
        let ledger = provider.ledger();
        assert_eq!(ledger.effects.len(), 1);
        assert_eq!(ledger.dispatches[1].disposition, Disposition::KeyConflict);
        assert_eq!(ledger.dispatches[2].disposition, Disposition::KeyConflict);
    }

    #[test]
    fn a_request_with_a_key_in_flight_is_refused_with_409_and_is_no_dispatch() {
        let provider = provider(
            "processing-delay = \"200ms\"\n",
            Duration::from_secs(86_400),
        );
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let (first, second) = runtime.block_on(async {
            let first = tokio::spawn(provider.clone().handle(post(
                "/v1/charges",
                Some("k-1"),
                CHARGE,
            )));
            tokio::time::sleep(Duration::from_millis(50)).await;
            let second = provider
                .clone()
                .handle(post("/v1/charges", Some("k-1"), CHARGE))
                .await;
            (first.await.unwrap().unwrap(), second.unwrap())
        });
        assert_eq!(first.status, 200);
        assert_eq!(second.status, 409);
        assert_eq!(body(&second)["error"]["code"], "idempotency_key_in_use");
        assert_eq!(provider.ledger().dispatches.len(), 1);
        // Once it finished, the key answers from its store.
        let later = send(&provider, post("/v1/charges", Some("k-1"), CHARGE));
        assert_eq!(later.header_value(IDEMPOTENT_REPLAYED), Some("true"));
    }

    #[test]
    fn a_500_is_saved_under_the_key_and_replayed_though_the_charge_exists() {
        let provider = provider(
            "[[fault]]\nkind = \"provider-error\"\nnth = 1\ncommitted = true\n",
            Duration::from_secs(86_400),
        );
        let first = send(&provider, post("/v1/charges", Some("k-1"), CHARGE));
        assert_eq!(first.status, 500);
        assert_eq!(body(&first)["error"]["type"], "api_error");
        let again = send(&provider, post("/v1/charges", Some("k-1"), CHARGE));
        assert_eq!(again.status, 500);
        assert_eq!(again.header_value(IDEMPOTENT_REPLAYED), Some("true"));
        let ledger = provider.ledger();
        assert_eq!(ledger.effects.len(), 1);
        assert_eq!(
            ledger.dispatches[1].disposition,
            Disposition::Failed {
                status: 500,
                replayed: true
            }
        );
    }

    #[test]
    fn a_pruned_key_is_a_new_request() {
        let provider = provider("", Duration::from_millis(50));
        let first = body(&send(&provider, post("/v1/charges", Some("k-1"), CHARGE)));
        std::thread::sleep(Duration::from_millis(80));
        let again = send(&provider, post("/v1/charges", Some("k-1"), CHARGE));
        assert_eq!(again.header_value(IDEMPOTENT_REPLAYED), None);
        assert_ne!(body(&again)["id"], first["id"]);
        assert_eq!(provider.ledger().effects.len(), 2);
    }

    #[test]
    fn search_finds_objects_by_their_metadata() {
        let provider = provider("", Duration::from_secs(86_400));
        let charge = body(&send(
            &provider,
            post("/v1/payment_intents", Some("k-1"), CHARGE),
        ));
        send(
            &provider,
            post(
                "/v1/payment_intents",
                Some("k-2"),
                &CHARGE.replace("inv-1", "inv-2"),
            ),
        );
        let search = |query: &str| {
            send(
                &provider,
                Request::get(&format!("/v1/payment_intents/search?query={query}"))
                    .header("authorization", "Bearer sk"),
            )
        };
        let found = body(&search("metadata%5B%27invoice%27%5D%3A%27inv-1%27"));
        assert_eq!(found["data"], json!([charge]));
        let none = body(&search(
            "metadata['invoice']:'inv-1'%20AND%20metadata['x']:'y'",
        ));
        assert_eq!(none["data"], json!([]));
        assert_eq!(search("amount>10").status, 400);
    }

    #[test]
    fn a_refund_belongs_to_the_invoice_of_what_it_refunds() {
        let provider = provider("", Duration::from_secs(86_400));
        let charge = body(&send(&provider, post("/v1/charges", Some("k-1"), CHARGE)));
        let refund = send(
            &provider,
            post(
                "/v1/refunds",
                Some("k-2"),
                &format!("charge={}", charge["id"].as_str().unwrap()),
            ),
        );
        assert_eq!(refund.status, 200);
        assert!(body(&refund)["id"].as_str().unwrap().starts_with("re_"));
        let ledger = provider.ledger();
        assert_eq!(ledger.effects[1].subject.as_deref(), Some("inv-1"));
        let unknown = send(
            &provider,
            post("/v1/refunds", Some("k-3"), "charge=ch_nope"),
        );
        assert_eq!(unknown.status, 400);
        assert!(body(&unknown)["error"]["message"]
            .as_str()
            .unwrap()
            .contains("No such charge"));
    }

    #[test]
    fn what_stripe_refuses_before_executing_says_why() {
        let provider = provider("", Duration::from_secs(86_400));
        let missing = send(&provider, post("/v1/charges", Some("k-1"), "currency=usd"));
        assert_eq!(missing.status, 400);
        assert_eq!(
            body(&missing)["error"]["message"],
            "Missing required param: amount."
        );
        assert_eq!(
            provider.ledger().dispatches[0].disposition,
            Disposition::Malformed
        );
        let anonymous = send(&provider, Request::post("/v1/charges", CHARGE));
        assert_eq!(anonymous.status, 401);
        let unknown = send(&provider, post("/v1/customers", None, "email=a"));
        assert_eq!(unknown.status, 404);
        assert!(body(&unknown)["error"]["message"]
            .as_str()
            .unwrap()
            .contains("POST /v1/payment_intents"));
        assert_eq!(provider.ledger().dispatches.len(), 1);
    }
}

/// The contract against the real official client: each case of
/// `examples/stripe-charges/contract.py` drives the `stripe` SDK (the
/// version `examples/stripe-charges/requirements.txt` pins, installed by its
/// `setup`) at this provider on a real port, and what the SDK saw is held
/// against the ledger (issue 13, item 2: "the Stripe profile's idempotency
/// behaviours each have a test against the real official client").
#[cfg(test)]
mod sdk {
    use std::path::PathBuf;
    use std::process::Command;
    use std::time::Duration;

    use chaos_kit::http;
    use serde_json::Value;

    use super::tests::provider;
    use crate::history::{Disposition, Ledger};

    const DAY: Duration = Duration::from_secs(86_400);

    fn example() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/stripe-charges")
    }

    /// The example's venv, made by its own `setup` when missing or stale: the
    /// test needs no step before it on a clean machine. The setup is cached
    /// (a no-op once requirements.txt is installed) and locked (tests running
    /// it at once wait for one another).
    fn venv_python() -> PathBuf {
        let setup = example().join("setup");
        let output = Command::new(&setup)
            .output()
            .unwrap_or_else(|error| panic!("{} did not start: {error}", setup.display()));
        assert!(
            output.status.success(),
            "{} failed ({}): {}",
            setup.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        let python = example().join(".venv/bin/python");
        assert!(
            python.is_file(),
            "{} made no {}",
            setup.display(),
            python.display()
        );
        python
    }

    /// Runs `case` against a provider for the scenario TOML `extra`.
    fn run(case: &str, extra: &str, retention: Duration, invoice: Option<&str>) -> (Value, Ledger) {
        let python = venv_python();
        let provider = provider(extra, retention);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serving = provider.clone();
        runtime.spawn(http::serve(
            listener,
            async move {
                let _ = stopped.await;
            },
            http::handler(move |request| serving.clone().handle(request)),
        ));
        let mut command = Command::new(&python);
        command
            .current_dir(example())
            .arg("contract.py")
            .arg(case)
            .arg(format!("http://{addr}"));
        if let Some(invoice) = invoice {
            command.arg(invoice);
        }
        let output = command.output().unwrap();
        let _ = stop.send(());
        runtime.shutdown_timeout(Duration::from_millis(200));
        assert!(
            output.status.success(),
            "contract.py {case}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let seen = serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
            panic!(
                "contract.py {case} printed no JSON ({error}): {}",
                String::from_utf8_lossy(&output.stdout)
            )
        });
        (seen, provider.ledger())
    }

    fn dispositions(ledger: &Ledger) -> Vec<Disposition> {
        ledger
            .dispatches
            .iter()
            .map(|dispatch| dispatch.disposition.clone())
            .collect()
    }

    #[test]
    fn the_sdk_gets_the_first_answer_replayed_with_idempotent_replayed() {
        let (seen, ledger) = run("replay", "", DAY, None);
        assert_eq!(seen["first"], seen["again"], "{seen}");
        assert_eq!(seen["first_replayed"], Value::Null, "{seen}");
        assert_eq!(seen["again_replayed"], "true", "{seen}");
        assert_eq!(seen["status"], "succeeded");
        assert_eq!(seen["amount"], 4999);
        assert_eq!(seen["metadata"]["invoice"], "inv-1");
        assert_eq!(ledger.effects.len(), 1);
        assert_eq!(ledger.effects[0].subject.as_deref(), Some("inv-1"));
        assert!(matches!(
            ledger.dispatches[1].disposition,
            Disposition::Replayed { .. }
        ));
    }

    #[test]
    fn the_sdk_retrying_a_500_gets_the_saved_500_though_the_charge_exists() {
        let (seen, ledger) = run(
            "saved-500",
            "[[fault]]\nkind = \"provider-error\"\nnth = 1\ncommitted = true\n",
            DAY,
            None,
        );
        assert_eq!(seen["raised"], "APIError", "{seen}");
        assert_eq!(seen["status"], 500, "{seen}");
        assert_eq!(seen["replayed"], "true", "{seen}");
        assert_eq!(ledger.effects.len(), 1);
        assert_eq!(
            dispositions(&ledger)[1..],
            [Disposition::Failed {
                status: 500,
                replayed: true
            }]
        );
    }

    #[test]
    fn the_sdk_raises_an_idempotency_error_for_the_key_with_changed_parameters() {
        let (seen, ledger) = run("changed-params", "", DAY, None);
        assert_eq!(seen["raised"], "IdempotencyError", "{seen}");
        assert_eq!(seen["status"], 400, "{seen}");
        assert_eq!(ledger.effects.len(), 1);
        assert_eq!(dispositions(&ledger)[1], Disposition::KeyConflict);
    }

    #[test]
    fn the_sdk_is_answered_409_while_the_key_is_in_flight_and_its_retry_gets_the_answer() {
        let (seen, ledger) = run("in-flight", "processing-delay = \"400ms\"\n", DAY, None);
        assert_eq!(seen["second"]["status"], 409, "{seen}");
        assert_eq!(seen["second"]["code"], "idempotency_key_in_use", "{seen}");
        assert_eq!(seen["retried"]["id"], seen["first"], "{seen}");
        assert_eq!(seen["retried"]["replayed"], "true", "{seen}");
        // The 409s never executed: one effect, and only executed requests
        // are dispatches.
        assert_eq!(ledger.effects.len(), 1);
        assert!(matches!(
            dispositions(&ledger)[..],
            [Disposition::Committed { .. }, Disposition::Replayed { .. }]
        ));
    }

    #[test]
    fn the_sdk_gets_a_new_charge_under_a_pruned_key() {
        let (seen, ledger) = run("pruned", "", Duration::from_millis(200), None);
        assert_ne!(seen["first"], seen["again"], "{seen}");
        assert_eq!(seen["again_replayed"], Value::Null, "{seen}");
        assert_eq!(ledger.effects.len(), 2);
    }

    #[test]
    fn the_sdk_recovers_a_lost_answer_by_re_sending_under_its_key() {
        let (seen, ledger) = run(
            "lost-answer",
            "[[fault]]\nkind = \"lose-response\"\nhop = \"provider-to-target\"\nnth = 1\nmode = \"hold\"\n",
            DAY,
            None,
        );
        assert_eq!(seen["replayed"], "true", "{seen}");
        assert_eq!(ledger.effects.len(), 1);
        assert_eq!(seen["id"], ledger.effects[0].receipt.as_str());
        assert!(matches!(
            dispositions(&ledger)[..],
            [Disposition::Committed { .. }, Disposition::Replayed { .. }]
        ));
    }

    #[test]
    fn the_sdk_raises_a_card_error_for_a_decline_and_again_from_the_store() {
        let scenario = "declines = [\"charge\"]\n";
        let provider_for_subject = provider(scenario, DAY);
        let trial_subject = provider_for_subject
            .config()
            .declined_subjects
            .iter()
            .next()
            .cloned()
            .expect("the declined operation's subject");
        let (seen, ledger) = run("declined", scenario, DAY, Some(&trial_subject));
        assert_eq!(seen["first"]["raised"], "CardError", "{seen}");
        assert_eq!(seen["first"]["status"], 402, "{seen}");
        assert_eq!(seen["again"]["raised"], "CardError", "{seen}");
        assert_eq!(seen["again"]["replayed"], "true", "{seen}");
        assert!(ledger.effects.is_empty());
        assert_eq!(
            dispositions(&ledger),
            [
                Disposition::Declined { replayed: false },
                Disposition::Declined { replayed: true }
            ]
        );
    }
}
