//! The provider: the downstream side-effect service (mail, payments). Its
//! ledger is the ground truth every verdict rests on.
//!
//! Effects are attributed to logical operations by the workload's subject field
//! (e.g. `invoice`), not by the target's key, so a target that invents a new key
//! per attempt is still caught.
//!
//! Its contract is composed, as real providers' are: it deduplicates by
//! `Idempotency-Key` or not at all (the profile), it can be asked about a key
//! exactly, with a lag, or not at all (`lookup`), it may save an error
//! answer under the key and replay it (`saves-errors`, Stripe API v1), and it
//! may refuse some payloads for good (`declines`, a `402 card_declined`).
//!
//! It speaks the API the target file chose ([`crate::provider_api`]: chaos's
//! own `POST /effects/{tool}`, Stripe's, a mail server): a request in any
//! shape becomes one [`Incoming`] dispatch, decided, recorded and faulted by
//! the same code here, and its [`Answer`] is written back in the shape it
//! came in by the API's unit, which sees this core only as a [`Desk`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chaos_kit::canonical::{intent_fingerprint, payload_fingerprint, value_fingerprint};
use chaos_kit::clock::{millis, Clock};
use chaos_kit::http::{Abort, Request, Response};
use chaos_kit::protocol::{LookupCapability, ProviderProfile, Receipt};

use crate::fault::{Action, LossMode};
use crate::history::{
    Dispatch, Disposition, EarlierTrial, Effect, LateEffect, Ledger, LookupRecord,
};
use crate::provider_api::{Answer, Answering, Desk, Incoming, ProviderApi, Resource};
use crate::roles::clock::Timeline;
use crate::roles::nemesis::Nemesis;

#[derive(Debug, Clone)]
pub(crate) struct ProviderConfig {
    pub profile: ProviderProfile,
    pub lookup: LookupCapability,
    pub saves_errors: bool,
    /// Subjects whose payloads it refuses for good.
    pub declined_subjects: BTreeSet<String>,
    pub retention: Option<Duration>,
    pub processing_delay: Duration,
    pub subject_field: String,
    /// The argument a payload's intent leaves out (the workload's free text).
    pub free_text_field: Option<String>,
    /// How long a held answer is held.
    pub hold: Duration,
    /// The lab's records and their owning tenants, for `GET /records/{id}`
    /// and the bulk `GET /records`.
    pub records: BTreeMap<String, String>,
    /// The API it speaks: chaos's own, or Stripe's.
    pub api: ProviderApi,
    /// Live, on a reused process: the subjects of the trials it served
    /// before this one. A request carrying one is that trial's work, done
    /// late: recorded apart ([`Ledger::late`]), never this trial's dispatch.
    pub earlier: BTreeMap<String, EarlierTrial>,
}

pub(crate) struct Provider {
    config: ProviderConfig,
    clock: Arc<dyn Clock>,
    timeline: Arc<dyn Timeline>,
    nemesis: Arc<Nemesis>,
    state: Mutex<ProviderState>,
    /// Requests to act it has not finished answering (held, delayed, being
    /// executed): a process with one open is still working on this trial.
    open: Arc<AtomicUsize>,
}

#[derive(Default)]
struct ProviderState {
    ledger: Ledger,
    /// Keyed: the first answer under each key, replayed to every retry with
    /// it. Every profile that can be asked: the effect under each key.
    keys: BTreeMap<String, StoredKey>,
    /// Stripe: the objects it created, by id, as `GET /v1/{resource}/{id}`
    /// and a replay return them.
    objects: BTreeMap<String, serde_json::Value>,
    /// Stripe: the keys of requests being executed now; another request
    /// with one of them is answered 409.
    in_flight: BTreeSet<String>,
}

#[derive(Clone)]
struct StoredKey {
    fingerprint: String,
    /// Where it was used: Stripe refuses a key reused on another endpoint.
    tool: String,
    /// The answer a keyed provider replays under this key.
    answer: Stored,
    /// The effect committed under it, for lookups: (receipt, the provider's
    /// wall clock at commit). A lookup's lag is measured on the wall clock,
    /// as its retention is: a clock jump is time passing, and an eventually
    /// consistent search has caught up a minute later.
    effect: Option<(String, u64)>,
    stored_at_wall_ms: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stored {
    Receipt,
    Declined,
    Error(u16),
}

/// What the provider decided to do with a dispatch, before any answer fault.
enum Decision {
    Commit,
    Replay(StoredKey),
    KeyConflict,
    Decline,
}

/// What the nemesis's verdict on a dispatch has the provider do, at each of
/// its steps. Read from the verdict in one place, [`Fate::of`], so that a
/// new verdict is placed there or does not build.
struct Fate {
    before: Before,
    fails: Option<Fails>,
    answer: Delivery,
}

/// Before acting on the dispatch.
enum Before {
    Act,
    /// The target is killed holding the connection.
    Crash,
    /// The dispatch never arrives.
    Lose(LossMode),
}

/// A `500` answered instead of acting, or after.
enum Fails {
    Instead,
    AfterCommit,
}

/// The answer, once the provider acted.
enum Delivery {
    Now,
    /// The target is killed before it hears back.
    Crash,
    /// Held past the agent's patience, then sent.
    Held,
    Lose(LossMode),
    Late(Duration),
}

impl Fate {
    const UNHARMED: Fate = Fate {
        before: Before::Act,
        fails: None,
        answer: Delivery::Now,
    };

    fn of(verdict: Option<Action>) -> Fate {
        let Some(action) = verdict else {
            return Fate::UNHARMED;
        };
        match action {
            Action::CrashBeforeDispatch { .. } => Fate {
                before: Before::Crash,
                ..Fate::UNHARMED
            },
            Action::LoseRequest(mode) => Fate {
                before: Before::Lose(mode),
                ..Fate::UNHARMED
            },
            Action::ProviderError { committed } => Fate {
                fails: Some(match committed {
                    true => Fails::AfterCommit,
                    false => Fails::Instead,
                }),
                ..Fate::UNHARMED
            },
            Action::CrashAfterCommit { .. } => Fate {
                answer: Delivery::Crash,
                ..Fate::UNHARMED
            },
            Action::Stall => Fate {
                answer: Delivery::Held,
                ..Fate::UNHARMED
            },
            Action::LoseAnswer { mode, .. } => Fate {
                answer: Delivery::Lose(mode),
                ..Fate::UNHARMED
            },
            Action::DelayAnswer { by, .. } => Fate {
                answer: Delivery::Late(by),
                ..Fate::UNHARMED
            },
            // Verdicts on the agent's answers, on introspections, or at
            // moments: none is given on a dispatch.
            Action::Redeliver
            | Action::AuthorityDown
            | Action::AdvanceClock(_)
            | Action::Revoke(_)
            | Action::Replan { .. }
            | Action::CrashAgent { .. }
            | Action::ApproveAgain { .. }
            | Action::TruncateResult
            | Action::Interrupt => Fate::UNHARMED,
        }
    }
}

impl Provider {
    pub(crate) fn new(
        config: ProviderConfig,
        clock: Arc<dyn Clock>,
        timeline: Arc<dyn Timeline>,
        nemesis: Arc<Nemesis>,
    ) -> Provider {
        Provider {
            config,
            clock,
            timeline,
            nemesis,
            state: Mutex::new(ProviderState::default()),
            open: Arc::default(),
        }
    }

    /// How many requests to act are still open: received, not yet answered
    /// (an answer held past the trial's end counts until it is sent or its
    /// connection is dropped).
    pub(crate) fn open_requests(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    pub(crate) fn ledger(&self) -> Ledger {
        self.lock().ledger.clone()
    }

    /// Any request: the protocol's shared routes (readiness, lookups, the
    /// lab's records), then the API's own.
    pub(crate) async fn handle(self: Arc<Self>, request: Request) -> Result<Response, Abort> {
        match (request.method.as_str(), request.path.as_str()) {
            ("GET", "/healthz") => Ok(Response::new(200)),
            ("GET", "/effects") => Ok(self.lookup(&request)),
            // The bulk route, overbroad as the lab's export is: every
            // record, whoever asks; scoping it is the target's job.
            ("GET", "/records") => {
                let all: Vec<chaos_kit::protocol::Record> = self
                    .config
                    .records
                    .iter()
                    .map(|(id, tenant)| chaos_kit::protocol::Record {
                        id: id.clone(),
                        tenant: tenant.clone(),
                    })
                    .collect();
                Ok(Response::json(200, &all))
            }
            ("GET", path) if path.starts_with("/records/") => {
                let id = path.trim_start_matches("/records/");
                Ok(match self.config.records.get(id) {
                    Some(tenant) => Response::json(
                        200,
                        &chaos_kit::protocol::Record {
                            id: id.to_owned(),
                            tenant: tenant.clone(),
                        },
                    ),
                    None => Response::new(404),
                })
            }
            _ => match self.config.api.route(self.clone(), request) {
                Some(answering) => answering.await,
                None => Ok(Response::new(404)),
            },
        }
    }

    /// `GET /effects?key=`: what the contract's lookup can tell, recorded.
    fn lookup(&self, request: &Request) -> Response {
        if !self.config.lookup.is_available() {
            return Response::new(501);
        }
        let Some(key) = request.query_param("key") else {
            return Response::new(400);
        };
        let (now, wall) = (self.timeline.now(), self.clock.now_ms());
        let lag = millis(self.config.lookup.lag());
        let mut state = self.lock();
        let found = state
            .keys
            .get(key)
            .filter(|stored| self.retained(stored, wall))
            .and_then(|stored| stored.effect.clone())
            // An eventually consistent search does not see it yet.
            .filter(|(_, committed_at)| wall.saturating_sub(*committed_at) >= lag)
            .map(|(receipt, _)| receipt);
        state.ledger.lookups.push(LookupRecord {
            at: now,
            key: key.to_owned(),
            found: found.clone(),
        });
        match found {
            Some(receipt) => Response::json(200, &Receipt { receipt }),
            None => Response::new(404),
        }
    }

    #[cfg(test)]
    pub(crate) fn config(&self) -> &ProviderConfig {
        &self.config
    }

    /// Stripe: an object this provider created, by id.
    pub(crate) fn object(&self, id: &str) -> Option<serde_json::Value> {
        self.lock().objects.get(id).cloned()
    }

    /// Stripe: every object it created, in creation order.
    pub(crate) fn objects(&self) -> Vec<serde_json::Value> {
        self.lock().objects.values().cloned().collect()
    }

    pub(crate) async fn dispatch(&self, incoming: Incoming) -> Result<Response, Abort> {
        // Counted until answered or dropped with its connection.
        let _open = Open::count(&self.open);
        if let Some(of) =
            (incoming.subject.as_ref()).and_then(|subject| self.config.earlier.get(subject))
        {
            return Ok(self.late(incoming, of.clone()));
        }
        let api = self.config.api;
        let body = incoming.payload.as_ref().ok();
        let fingerprint = match body {
            Some(value) => value_fingerprint(value),
            None => payload_fingerprint(&incoming.raw),
        };
        let free_text: Vec<&str> = incoming.free_text.iter().map(String::as_str).collect();
        let intent_fingerprint = body
            .map(|value| intent_fingerprint(value, &free_text))
            .filter(|intent| *intent != fingerprint);

        let mut record = Dispatch {
            number: 0,
            at: self.timeline.now(),
            tool: incoming.tool.clone(),
            subject: incoming.subject.clone(),
            key: incoming.key.clone(),
            payload_fingerprint: fingerprint,
            intent_fingerprint,
            provider_shaped: incoming.resource.is_some(),
            delivery: incoming.delivery,
            message: incoming.message.clone(),
            disposition: Disposition::Dropped,
        };
        // An API may refuse a key while a request with it executes (Stripe
        // does); such a request never starts executing, so it is no dispatch.
        let in_flight = match (api.in_flight_answer(), &incoming.key) {
            (Some(refusal), Some(key)) => Some((key.clone(), refusal)),
            _ => None,
        };
        // Take the number and the slot together: concurrent dispatches must
        // not share one, nor two requests with one key both start.
        let number = {
            let mut state = self.lock();
            if let Some((key, refusal)) = &in_flight {
                if !state.in_flight.insert(key.clone()) {
                    return Ok(refusal());
                }
            }
            record.number = state.ledger.dispatches.len() as u32 + 1;
            state.ledger.dispatches.push(record.clone());
            record.number
        };
        let finished = || {
            if let Some((key, _)) = &in_flight {
                self.lock().in_flight.remove(key);
            }
        };

        let fate = Fate::of(self.nemesis.dispatch(number));
        match fate.before {
            Before::Act => {}
            Before::Crash => {
                finished();
                // The target dies holding this connection; the answer never matters.
                tokio::time::sleep(self.config.hold).await;
                return Err(Abort);
            }
            Before::Lose(mode) => {
                finished();
                return self.lose(mode).await;
            }
        }
        if !self.config.processing_delay.is_zero() {
            tokio::time::sleep(self.config.processing_delay).await;
        }

        let answer = match (&incoming.payload, fate.fails) {
            (Err(why), _) => {
                record.disposition = Disposition::Malformed;
                Answer::Malformed { why: why.clone() }
            }
            // The provider fails before acting: nothing happens, and a
            // provider that saves errors will answer this key so from now on.
            (Ok(_), Some(Fails::Instead)) => self.fail(&mut record),
            (Ok(payload), Some(Fails::AfterCommit)) => {
                let committed = self.commit(&mut record, payload, incoming.resource);
                match record.disposition {
                    Disposition::Committed { .. } => self.save_error(&record),
                    // Nothing was executed now (a replay, a refusal): the
                    // error has nothing to hide, and the answer stands.
                    _ => committed,
                }
            }
            (Ok(payload), None) => self.commit(&mut record, payload, incoming.resource),
        };
        self.lock().ledger.dispatches[number as usize - 1] = record;
        finished();
        self.nemesis.after_commit(number);
        let response = api.answer(self, answer, incoming.key.as_deref());

        match fate.answer {
            Delivery::Now => Ok(response),
            Delivery::Crash => {
                tokio::time::sleep(self.config.hold).await;
                Err(Abort)
            }
            // Committed; the answer comes, but only after the agent stopped
            // waiting for the attempt that asked.
            Delivery::Held => {
                tokio::time::sleep(self.config.hold).await;
                Ok(response)
            }
            Delivery::Lose(mode) => self.lose(mode).await,
            Delivery::Late(by) => {
                tokio::time::sleep(by).await;
                Ok(response)
            }
        }
    }

    /// A request of an earlier trial's operation: done (a real provider
    /// would), recorded as that trial's late effect, and answered plainly;
    /// it takes no dispatch number, so this trial's faults act on this
    /// trial's requests only.
    fn late(&self, incoming: Incoming, of: EarlierTrial) -> Response {
        let mut state = self.lock();
        let number = state.ledger.late.len() + 1;
        // Apart from this trial's ids, and an object as a create makes one
        // (Stripe answers with it).
        let receipt = match (incoming.resource, &incoming.payload) {
            (Some(resource), Ok(payload)) => {
                let id = format!("{}late", resource.id(number));
                let object = resource.object(&id, payload, self.clock.now_ms());
                state.objects.insert(id.clone(), object);
                id
            }
            _ => format!("late-{number}"),
        };
        state.ledger.late.push(LateEffect {
            of,
            at: self.timeline.now(),
            tool: incoming.tool,
            subject: incoming.subject.unwrap_or_default(),
            receipt: receipt.clone(),
        });
        drop(state);
        self.config
            .api
            .answer(self, Answer::Created { receipt }, incoming.key.as_deref())
    }

    /// Decides and records what the dispatch does to the world.
    fn commit(
        &self,
        record: &mut Dispatch,
        payload: &serde_json::Value,
        resource: Option<Resource>,
    ) -> Answer {
        let now = self.clock.now_ms();
        let mut state = self.lock();

        let declined = record
            .subject
            .as_ref()
            .is_some_and(|subject| self.config.declined_subjects.contains(subject));
        let decision = match (&self.config.profile, &record.key) {
            (ProviderProfile::Keyed, Some(key)) => match state.keys.get(key) {
                Some(stored) if self.retained(stored, now) => {
                    let same_endpoint =
                        !self.config.api.binds_keys_to_endpoints() || stored.tool == record.tool;
                    if stored.fingerprint == record.payload_fingerprint && same_endpoint {
                        Decision::Replay(stored.clone())
                    } else {
                        Decision::KeyConflict
                    }
                }
                _ if declined => Decision::Decline,
                _ => Decision::Commit,
            },
            _ if declined => Decision::Decline,
            _ => Decision::Commit,
        };

        match decision {
            Decision::Replay(stored) => match (stored.answer, stored.effect) {
                (Stored::Receipt, Some((receipt, _))) => {
                    record.disposition = Disposition::Replayed {
                        receipt: receipt.clone(),
                    };
                    Answer::Replayed { receipt }
                }
                (Stored::Declined, _) => {
                    record.disposition = Disposition::Declined { replayed: true };
                    Answer::Declined { replayed: true }
                }
                (answer, _) => {
                    let status = match answer {
                        Stored::Error(status) => status,
                        _ => 500,
                    };
                    record.disposition = Disposition::Failed {
                        status,
                        replayed: true,
                    };
                    Answer::Error {
                        status,
                        replayed: true,
                    }
                }
            },
            Decision::KeyConflict => {
                record.disposition = Disposition::KeyConflict;
                Answer::KeyConflict
            }
            Decision::Decline => {
                // Stripe saves a refusal under the key like any other answer.
                if let (ProviderProfile::Keyed, Some(key)) = (&self.config.profile, &record.key) {
                    state.keys.insert(
                        key.clone(),
                        StoredKey {
                            fingerprint: record.payload_fingerprint.clone(),
                            tool: record.tool.clone(),
                            answer: Stored::Declined,
                            effect: None,
                            stored_at_wall_ms: now,
                        },
                    );
                }
                record.disposition = Disposition::Declined { replayed: false };
                Answer::Declined { replayed: false }
            }
            Decision::Commit => {
                let number = state.ledger.effects.len() + 1;
                let receipt = match resource {
                    Some(resource) => {
                        let id = resource.id(number);
                        let object = resource.object(&id, payload, now);
                        state.objects.insert(id.clone(), object);
                        id
                    }
                    None => format!("rcpt-{number}"),
                };
                let at = self.timeline.now();
                state.ledger.effects.push(Effect {
                    at,
                    dispatch: record.number,
                    subject: record.subject.clone(),
                    receipt: receipt.clone(),
                    payload_fingerprint: record.payload_fingerprint.clone(),
                    wall_clock_ms: now,
                });
                let remembers = self.config.profile == ProviderProfile::Keyed
                    || self.config.lookup.is_available();
                if let (true, Some(key)) = (remembers, &record.key) {
                    state.keys.insert(
                        key.clone(),
                        StoredKey {
                            fingerprint: record.payload_fingerprint.clone(),
                            tool: record.tool.clone(),
                            answer: Stored::Receipt,
                            effect: Some((receipt.clone(), now)),
                            stored_at_wall_ms: now,
                        },
                    );
                }
                record.disposition = Disposition::Committed {
                    receipt: receipt.clone(),
                };
                Answer::Created { receipt }
            }
        }
    }

    /// A 500 before anything was done; saved under the key when the
    /// contract says errors are.
    fn fail(&self, record: &mut Dispatch) -> Answer {
        record.disposition = Disposition::Failed {
            status: 500,
            replayed: false,
        };
        if let (true, Some(key)) = (self.saves_errors(), &record.key) {
            let now = self.clock.now_ms();
            self.lock().keys.insert(
                key.clone(),
                StoredKey {
                    fingerprint: record.payload_fingerprint.clone(),
                    tool: record.tool.clone(),
                    answer: Stored::Error(500),
                    effect: None,
                    stored_at_wall_ms: now,
                },
            );
        }
        Answer::Error {
            status: 500,
            replayed: false,
        }
    }

    /// A 500 for a dispatch that was committed: the effect exists (a lookup
    /// finds it), but the answer says error, and a provider that saves
    /// errors says so to every retry with the key.
    fn save_error(&self, record: &Dispatch) -> Answer {
        if let (true, Some(key)) = (self.saves_errors(), &record.key) {
            if let Some(stored) = self.lock().keys.get_mut(key) {
                stored.answer = Stored::Error(500);
            }
        }
        Answer::Error {
            status: 500,
            replayed: false,
        }
    }

    fn saves_errors(&self) -> bool {
        self.config.saves_errors && self.config.profile == ProviderProfile::Keyed
    }

    async fn lose(&self, mode: LossMode) -> Result<Response, Abort> {
        if mode == LossMode::Hold {
            tokio::time::sleep(self.config.hold).await;
        }
        Err(Abort)
    }

    fn retained(&self, stored: &StoredKey, now: u64) -> bool {
        self.config.retention.is_none_or(|retention| {
            now.saturating_sub(stored.stored_at_wall_ms) < millis(retention)
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ProviderState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// One open request to act, counted while it lives.
struct Open(Arc<AtomicUsize>);

impl Open {
    fn count(open: &Arc<AtomicUsize>) -> Open {
        open.fetch_add(1, Ordering::SeqCst);
        Open(open.clone())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Desk for Provider {
    fn handle(self: Arc<Self>, request: Request) -> Answering<'static> {
        Box::pin(Provider::handle(self, request))
    }

    fn dispatch(&self, incoming: Incoming) -> Answering<'_> {
        Box::pin(Provider::dispatch(self, incoming))
    }

    fn object(&self, id: &str) -> Option<serde_json::Value> {
        Provider::object(self, id)
    }

    fn objects(&self) -> Vec<serde_json::Value> {
        Provider::objects(self)
    }

    fn subject_field(&self) -> &str {
        &self.config.subject_field
    }

    fn free_text_field(&self) -> Option<&str> {
        self.config.free_text_field.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::history::EarlierTrial;
    use crate::plan::{Timing, Trial};
    use crate::roles::clock::{HarnessClock, RealTimeline};
    use crate::roles::{Cast, LiveTimes, Setting};
    use crate::scenario::Scenario;

    fn scenario(name: &str) -> Scenario {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
        Scenario::load(&root.join(format!("{name}.toml"))).unwrap()
    }

    /// The live provider of `trial`, told that `earlier` subjects belong to
    /// trials its process served before.
    fn provider(trial: &Trial<'_>, earlier: &[&str]) -> Arc<Provider> {
        let earlier = (earlier.iter())
            .map(|subject| {
                let of = EarlierTrial {
                    scenario: "before".into(),
                    seed: 7,
                };
                ((*subject).to_owned(), of)
            })
            .collect();
        Cast::new(
            trial,
            Setting {
                timeline: Arc::new(RealTimeline::start()),
                clock: Arc::new(HarnessClock::system()),
                api: ProviderApi::Chaos,
                live: Some(LiveTimes {
                    provider_retention: trial.scenario.provider.retention,
                    clock_waits: BTreeMap::new(),
                    approval_expiries: &[],
                    earlier,
                    tool_names: BTreeMap::new(),
                }),
            },
        )
        .provider
    }

    fn incoming(tool: &str, subject: &str, key: &str) -> Incoming {
        let body = serde_json::json!({ "invoice": subject });
        Incoming {
            tool: tool.to_owned(),
            key: Some(key.to_owned()),
            raw: bytes::Bytes::from(body.to_string()),
            payload: Ok(body),
            subject: Some(subject.to_owned()),
            free_text: Vec::new(),
            resource: None,
            delivery: None,
            message: None,
        }
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// A request of an earlier trial is that trial's late effect: recorded
    /// apart, answered, and never this trial's dispatch, so the fault this
    /// trial's first dispatch is owed still acts on it.
    #[test]
    fn an_earlier_trials_request_is_its_late_effect_and_takes_no_fault() {
        let lost = scenario("lost-response-keyed-reset");
        let trial = Trial::new(&lost, 1, Timing::live());
        let provider = provider(&trial, &["inv-earlier"]);
        let tool = &lost.workload.tool;
        let subject = trial.operations[0].subject.clone();
        runtime().block_on(async {
            let late = provider
                .dispatch(incoming(tool, "inv-earlier", "k-old"))
                .await
                .expect("answered");
            assert_eq!(late.status, 201);
            // This trial's own first dispatch still meets its fault (a reset).
            let own = provider.dispatch(incoming(tool, &subject, "k-new")).await;
            assert!(own.is_err(), "the reset meant for dispatch 1 did not act");
        });
        let ledger = provider.ledger();
        assert_eq!(ledger.late.len(), 1);
        assert_eq!(ledger.late[0].subject, "inv-earlier");
        assert_eq!(ledger.late[0].of.seed, 7);
        assert_eq!(ledger.dispatches.len(), 1, "{:?}", ledger.dispatches);
        assert_eq!(ledger.dispatches[0].number, 1);
        assert_eq!(ledger.effects.len(), 1);
        assert_eq!(ledger.effects[0].subject.as_deref(), Some(subject.as_str()));
    }

    /// A request whose answer is held is open until it is answered or its
    /// connection dropped: what keeps a process from serving the next trial.
    #[test]
    fn a_held_request_is_open_until_answered_or_dropped() {
        let held = scenario("lost-response-keyed");
        let trial = Trial::new(&held, 1, Timing::live());
        let provider = provider(&trial, &[]);
        let tool = held.workload.tool.clone();
        let subject = trial.operations[0].subject.clone();
        runtime().block_on(async {
            assert_eq!(provider.open_requests(), 0);
            let holding = {
                let provider = provider.clone();
                tokio::spawn(async move { provider.dispatch(incoming(&tool, &subject, "k")).await })
            };
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert_eq!(
                provider.open_requests(),
                1,
                "the held request is not counted"
            );
            holding.abort();
            let _ = holding.await;
            assert_eq!(
                provider.open_requests(),
                0,
                "a dropped request still counts"
            );
        });
        assert_eq!(
            provider.ledger().effects.len(),
            1,
            "committed before it was held"
        );
    }
}
