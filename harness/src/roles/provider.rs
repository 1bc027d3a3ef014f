//! The provider: the downstream side-effect service (mail, payments). Its
//! ledger is the ground truth every verdict rests on.
//!
//! Effects are attributed to logical operations by the workload's subject field
//! (e.g. `invoice`), not by the target's key, so a target that invents a new key
//! per attempt is still caught.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chaos_kit::canonical::{intent_fingerprint, payload_fingerprint, value_fingerprint};
use chaos_kit::clock::{millis, Clock};
use chaos_kit::http::{Abort, Request, Response};
use chaos_kit::protocol::{ProviderProfile, Receipt, IDEMPOTENCY_KEY, IDEMPOTENT_REPLAYED};

use crate::fault::{Action, LossMode};
use crate::history::{Dispatch, Disposition, Effect, Ledger};
use crate::roles::clock::Timeline;
use crate::roles::nemesis::Nemesis;

#[derive(Debug, Clone)]
pub(crate) struct ProviderConfig {
    pub profile: ProviderProfile,
    pub retention: Option<Duration>,
    pub processing_delay: Duration,
    pub subject_field: String,
    /// The argument a payload's intent leaves out (the workload's free text).
    pub free_text_field: Option<String>,
    /// How long a held answer is held.
    pub hold: Duration,
}

pub(crate) struct Provider {
    config: ProviderConfig,
    clock: Arc<dyn Clock>,
    timeline: Arc<dyn Timeline>,
    nemesis: Arc<Nemesis>,
    state: Mutex<ProviderState>,
}

#[derive(Default)]
struct ProviderState {
    ledger: Ledger,
    /// keyed: the first answer under each key; lookup: the receipt under each key.
    keys: BTreeMap<String, StoredKey>,
}

#[derive(Clone)]
struct StoredKey {
    fingerprint: String,
    receipt: String,
    stored_at_wall_ms: u64,
}

/// What the provider decided to do with a dispatch, before any answer fault.
enum Decision {
    Commit,
    Replay { receipt: String },
    KeyConflict,
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
        }
    }

    pub(crate) fn ledger(&self) -> Ledger {
        self.lock().ledger.clone()
    }

    pub(crate) async fn handle(self: Arc<Self>, request: Request) -> Result<Response, Abort> {
        match (request.method.as_str(), request.path.as_str()) {
            ("GET", "/healthz") => Ok(Response::new(200)),
            ("GET", "/effects") => Ok(self.lookup(&request)),
            ("POST", path) if path.starts_with("/effects/") => {
                let tool = path.trim_start_matches("/effects/").to_owned();
                self.dispatch(tool, request).await
            }
            _ => Ok(Response::new(404)),
        }
    }

    fn lookup(&self, request: &Request) -> Response {
        if self.config.profile != ProviderProfile::Lookup {
            return Response::new(501);
        }
        let Some(key) = request.query_param("key") else {
            return Response::new(400);
        };
        let now = self.clock.now_ms();
        match self.lock().keys.get(key) {
            Some(stored) if self.retained(stored, now) => Response::json(
                200,
                &Receipt {
                    receipt: stored.receipt.clone(),
                },
            ),
            _ => Response::new(404),
        }
    }

    async fn dispatch(&self, tool: String, request: Request) -> Result<Response, Abort> {
        let key = request.header_value(IDEMPOTENCY_KEY).map(str::to_owned);
        let body = serde_json::from_slice::<serde_json::Value>(&request.body).ok();
        let subject = body.as_ref().and_then(|body| {
            body.get(&self.config.subject_field)?
                .as_str()
                .map(str::to_owned)
        });
        let fingerprint = match &body {
            Some(value) => value_fingerprint(value),
            None => payload_fingerprint(&request.body),
        };
        let free_text: Vec<&str> = self.config.free_text_field.as_deref().into_iter().collect();
        let intent_fingerprint = body
            .as_ref()
            .map(|value| intent_fingerprint(value, &free_text))
            .filter(|intent| *intent != fingerprint);

        let mut record = Dispatch {
            number: 0,
            at: self.timeline.now(),
            tool,
            subject,
            key,
            payload_fingerprint: fingerprint,
            intent_fingerprint,
            disposition: Disposition::Dropped,
        };
        // Take the number and the slot together: concurrent dispatches must not share one.
        let number = {
            let mut state = self.lock();
            record.number = state.ledger.dispatches.len() as u32 + 1;
            state.ledger.dispatches.push(record.clone());
            record.number
        };

        let fate = self.nemesis.dispatch(number);
        match fate {
            Some(Action::CrashBeforeDispatch { .. }) => {
                // The target dies holding this connection; the answer never matters.
                tokio::time::sleep(self.config.hold).await;
                return Err(Abort);
            }
            Some(Action::LoseRequest(mode)) => return self.lose(mode).await,
            _ => {}
        }
        if !self.config.processing_delay.is_zero() {
            tokio::time::sleep(self.config.processing_delay).await;
        }

        let response = if body.is_some() {
            self.commit(&mut record)
        } else {
            record.disposition = Disposition::Malformed;
            Response::new(400)
        };
        self.lock().ledger.dispatches[number as usize - 1] = record;
        self.nemesis.after_commit(number);

        match fate {
            Some(Action::CrashAfterCommit { .. }) => {
                tokio::time::sleep(self.config.hold).await;
                Err(Abort)
            }
            // Committed; the answer comes, but only after the agent stopped
            // waiting for the attempt that asked.
            Some(Action::Stall) => {
                tokio::time::sleep(self.config.hold).await;
                Ok(response)
            }
            Some(Action::LoseAnswer { mode, .. }) => self.lose(mode).await,
            Some(Action::DelayAnswer { by, .. }) => {
                tokio::time::sleep(by).await;
                Ok(response)
            }
            _ => Ok(response),
        }
    }

    /// Decides and records what the dispatch does to the world.
    fn commit(&self, record: &mut Dispatch) -> Response {
        let now = self.clock.now_ms();
        let mut state = self.lock();

        let decision = match (&self.config.profile, &record.key) {
            (ProviderProfile::Keyed, Some(key)) => match state.keys.get(key) {
                Some(stored) if self.retained(stored, now) => {
                    if stored.fingerprint == record.payload_fingerprint {
                        Decision::Replay {
                            receipt: stored.receipt.clone(),
                        }
                    } else {
                        Decision::KeyConflict
                    }
                }
                _ => Decision::Commit,
            },
            _ => Decision::Commit,
        };

        match decision {
            Decision::Replay { receipt } => {
                record.disposition = Disposition::Replayed {
                    receipt: receipt.clone(),
                };
                Response::json(200, &Receipt { receipt }).header(IDEMPOTENT_REPLAYED, "true")
            }
            Decision::KeyConflict => {
                record.disposition = Disposition::KeyConflict;
                Response::new(422)
            }
            Decision::Commit => {
                let receipt = format!("rcpt-{}", state.ledger.effects.len() + 1);
                state.ledger.effects.push(Effect {
                    at: self.timeline.now(),
                    dispatch: record.number,
                    subject: record.subject.clone(),
                    receipt: receipt.clone(),
                    payload_fingerprint: record.payload_fingerprint.clone(),
                    wall_clock_ms: now,
                });
                let remembers = matches!(
                    self.config.profile,
                    ProviderProfile::Keyed | ProviderProfile::Lookup
                );
                if let (true, Some(key)) = (remembers, &record.key) {
                    state.keys.insert(
                        key.clone(),
                        StoredKey {
                            fingerprint: record.payload_fingerprint.clone(),
                            receipt: receipt.clone(),
                            stored_at_wall_ms: now,
                        },
                    );
                }
                record.disposition = Disposition::Committed {
                    receipt: receipt.clone(),
                };
                Response::json(201, &Receipt { receipt })
            }
        }
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
