//! `ledger`: the idempotency layer done right, as the seed articles describe it.
//!
//! For every tool call it:
//!
//! 1. re-checks authorization at the authority on every attempt, replays
//!    included, and takes tenant and actor from there, never from arguments;
//! 2. scopes the operation by (tenant, tool, Idempotency-Key) and binds it to a
//!    fingerprint of the canonical payload, so a changed payload is a conflict
//!    and a reordered one is the same operation;
//! 3. claims the operation atomically on durable storage *before* dispatching,
//!    so concurrent attempts cannot both dispatch, and a crash leaves evidence;
//! 4. dispatches with a downstream key derived from the scope, the same on
//!    every attempt and after every restart;
//! 5. records outcomes honestly: `pending` while in flight, `unknown` when the
//!    provider's answer was lost, `succeeded`/`rejected` when known;
//! 6. reconciles an unknown outcome using what the provider's contract allows
//!    (lookup by key, or a keyed re-send inside the provider's retention), and
//!    otherwise keeps saying `unknown` rather than guessing.
//!
//! Step 2's key is the caller's Idempotency-Key by default: this layer is
//! *tool*-idempotent, as good as the key the orchestrator holds. It is
//! `runtime-ledger` when the key comes from the agent run's structure instead
//! ([`KeyFrom::Structure`]: run, step, tool and business scope, the payload
//! bound by its intent), and then it is *agent*-idempotent: a step the
//! planner decides again, under a new tool-use id and a new key, is still the
//! same operation. Everything else is the same code.
//!
//! Records live in a [`RecordStore`]: the simulator's disk, a directory of
//! fsynced files (`file-ledger`), PostgreSQL (`postgres-ledger`) or Redis
//! (`redis-ledger`); the logic above is this file, the same for all four. The
//! set of attempts in flight is process memory and is lost in a crash, which
//! is exactly how a stale claim left by a dead worker is recognised.

mod identity;
mod record;
pub mod store;

use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chaos_kit::canonical;
use chaos_kit::clock::millis;
use chaos_kit::http::{self, Abort, Request, Response};
use chaos_kit::net::Listener;
use chaos_kit::protocol::{AnswerBody, Outcome, ProviderProfile};
use chaos_kit::target::{self, TargetInfo};
use chaos_kit::upstream::{self, Dispatch, Lookup};
use chaos_kit::TargetEnv;

pub use identity::KeyFrom;
pub use record::{Record, RecordState};
pub use store::{Claim, DiskStore, RecordStore, Scope, StoreError};

/// How long an operation is remembered. Past it, a retry is a new operation.
pub const RETENTION: Duration = Duration::from_secs(7 * 24 * 60 * 60);

pub fn info() -> TargetInfo {
    TargetInfo {
        name: "ledger".into(),
        summary: "durable claim per (tenant, tool, key), payload fingerprint, honest states, reconcile, authz on every attempt".into(),
        retention: Some(RETENTION),
    }
}

/// The flags every ledger binary takes: `--weak NAME` (one of `weaknesses`,
/// read by `parse`) and `--key caller|structure`.
pub fn flags<W>(
    program: &str,
    args: impl Iterator<Item = String>,
    weaknesses: &'static [&'static str],
    parse: impl Fn(&str) -> Option<W>,
) -> Result<(Option<W>, KeyFrom), String> {
    let given = chaos_kit::process::flags(
        program,
        args,
        &[
            chaos_kit::process::Flag {
                name: "--weak",
                values: weaknesses,
            },
            chaos_kit::process::Flag {
                name: "--key",
                values: &KeyFrom::NAMES,
            },
        ],
    )?;
    let weakness = given.get("--weak").and_then(|name| parse(name));
    let key_from = given
        .get("--key")
        .and_then(|name| KeyFrom::parse(name))
        .unwrap_or(KeyFrom::Caller);
    Ok((weakness, key_from))
}

/// The same ledger, agent-idempotent: the key is derived from the run's
/// structure (`executor_v2`), so a re-planned step is the same operation.
pub fn runtime_info() -> TargetInfo {
    TargetInfo {
        name: "runtime-ledger".into(),
        summary: "the ledger keyed by (run, step, tool, business scope) and bound by intent (executor_v2): one effect per intent across re-plans".into(),
        retention: Some(RETENTION),
    }
}

/// How a ledger process is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// How long an operation is remembered; past it a retry is a new operation.
    pub retention: Duration,
    /// Deliberately weakened (`file-ledger --weak ignore-payload`): a key
    /// reused with another payload is answered from the stored record instead
    /// of with `conflict`, as many idempotency middlewares do. The agent gets
    /// the old result for arguments that were never approved.
    pub ignore_payload: bool,
    /// Where an operation's identity comes from.
    pub key_from: KeyFrom,
}

impl Options {
    pub fn new(retention: Duration) -> Options {
        Options {
            retention,
            ignore_payload: false,
            key_from: KeyFrom::Caller,
        }
    }
}

struct Ledger<S> {
    env: TargetEnv,
    store: S,
    retention: Duration,
    ignore_payload: bool,
    key_from: KeyFrom,
    /// What the attempts in this process are doing with each operation now.
    at_work: Mutex<BTreeMap<Scope, Work>>,
}

/// Serves the ledger with its records on the environment's disk, keeping them
/// for [`RETENTION`]: the simulator's entry point.
pub async fn serve(
    listener: impl Listener,
    shutdown: impl std::future::Future<Output = ()>,
    env: TargetEnv,
) -> io::Result<()> {
    let store = DiskStore::new(env.disk.clone());
    serve_with(listener, shutdown, env, store, Options::new(RETENTION)).await
}

/// Serves `runtime-ledger` (keys from the run's structure) on the
/// environment's disk: the simulator's entry point.
pub async fn serve_runtime(
    listener: impl Listener,
    shutdown: impl std::future::Future<Output = ()>,
    env: TargetEnv,
) -> io::Result<()> {
    let store = DiskStore::new(env.disk.clone());
    let options = Options {
        key_from: KeyFrom::Structure,
        ..Options::new(RETENTION)
    };
    serve_with(listener, shutdown, env, store, options).await
}

/// Serves the ledger over any record store.
pub async fn serve_with<S: RecordStore>(
    listener: impl Listener,
    shutdown: impl std::future::Future<Output = ()>,
    env: TargetEnv,
    store: S,
    options: Options,
) -> io::Result<()> {
    let ledger = Arc::new(Ledger {
        env,
        store,
        retention: options.retention,
        ignore_payload: options.ignore_payload,
        key_from: options.key_from,
        at_work: Mutex::new(BTreeMap::new()),
    });
    http::serve(
        listener,
        shutdown,
        http::handler(move |request| {
            let ledger = ledger.clone();
            async move { Ok::<_, Abort>(ledger.handle(request).await) }
        }),
    )
    .await
}

impl<S: RecordStore> Ledger<S> {
    async fn handle(&self, request: Request) -> Response {
        if target::is_health_check(&request) {
            return Response::new(200);
        }
        let Some(tool) = target::tool_call(&request) else {
            return target::not_found();
        };
        target::answer(self.tool_call(tool, &request).await)
    }

    async fn tool_call(&self, tool: &str, request: &Request) -> AnswerBody {
        // 1. Authorization, every attempt, before anything is read or replayed.
        let Some(token) = upstream::bearer_token(request) else {
            return AnswerBody::outcome(Outcome::Denied);
        };
        let grant = match upstream::introspect(&self.env, token).await {
            Some(grant) if grant.allows(tool) => grant,
            Some(_) => return AnswerBody::outcome(Outcome::Denied),
            // Not a denial: nothing is known about the caller. Nothing is done either.
            None => return unknown("authority unreachable; nothing was done"),
        };

        // 2. Scope and payload binding.
        let Ok(arguments) = serde_json::from_slice::<serde_json::Value>(&request.body) else {
            return rejected("arguments are not JSON");
        };
        let key = match self.key_from.key(tool, request, &arguments) {
            Ok(key) => key,
            Err(why) => return rejected(&why),
        };
        let scope = Scope {
            tenant: grant.tenant.unwrap_or_default(),
            tool: tool.to_owned(),
            key,
        };
        let now = self.env.clock.now_ms();

        // 3. The atomic claim: the store alone decides which attempt creates the
        // record, whether the others run in this process or in another one.
        let fingerprint = self.key_from.fingerprint(&arguments);
        let payload = canonical::canonical_json(&arguments);
        let fresh = Record::pending(&scope.to_string(), &payload, fingerprint, now);
        let mut attempt = self.begin(&scope);
        let claim = match self.forget_if_expired(&scope, now).await {
            Ok(()) => self.store.claim(&scope, &fresh).await,
            Err(error) => Err(error),
        };
        let existing = match claim {
            Ok(Claim::Won) => {
                attempt.won();
                return self.dispatch(tool, &scope, fresh).await;
            }
            Ok(Claim::Taken(existing)) => existing,
            Err(error) => {
                return unknown(&format!(
                    "the record store failed ({error}); nothing was done"
                ))
            }
        };
        if let Some(conflict) = self.payload_conflict(&existing, &fresh) {
            return conflict;
        }
        match &existing.state {
            RecordState::Succeeded { .. } | RecordState::Rejected { .. } => {
                answer_from(tool, &existing)
            }
            RecordState::Pending | RecordState::Unknown => {
                if !attempt.take_over() {
                    return in_flight();
                }
                // Nobody here is working on it: its worker died (or lost the
                // provider's answer), so learn what became of it. Read it again:
                // the copy from the claim may predate a settle by an attempt of
                // this process that has finished since.
                match self.store.load(&scope).await {
                    Ok(Some(current))
                        if current.created_at_ms == existing.created_at_ms
                            && current.state.is_open() =>
                    {
                        self.reconcile(tool, &scope, current).await
                    }
                    Ok(Some(current)) if current.created_at_ms == existing.created_at_ms => {
                        answer_from(tool, &current)
                    }
                    Ok(_) => unknown(
                        "the operation's record changed under this attempt; retry to learn its outcome",
                    ),
                    Err(error) => unknown(&format!(
                        "the record store failed ({error}); nothing was done"
                    )),
                }
            }
        }
    }

    /// `conflict` when the key was first used with another payload (unless the
    /// ledger was weakened to ignore payloads).
    fn payload_conflict(&self, existing: &Record, fresh: &Record) -> Option<AnswerBody> {
        (existing.fingerprint != fresh.fingerprint && !self.ignore_payload).then(|| {
            AnswerBody::outcome(Outcome::Conflict)
                .with_reason("this Idempotency-Key was used with a different payload")
        })
    }

    /// Step 4: dispatch under the scope's downstream key and record what came back.
    async fn dispatch(&self, tool: &str, scope: &Scope, record: Record) -> AnswerBody {
        let result = upstream::dispatch(
            &self.env,
            tool,
            &record.downstream_key,
            record.payload.clone().into(),
        )
        .await;
        self.settle(tool, scope, record, result).await
    }

    async fn settle(
        &self,
        tool: &str,
        scope: &Scope,
        mut record: Record,
        result: Dispatch,
    ) -> AnswerBody {
        let answer = match result {
            Dispatch::Accepted { receipt, replayed } => {
                record.state = RecordState::Succeeded {
                    receipt: receipt.clone(),
                };
                let outcome = if replayed {
                    Outcome::Replayed
                } else {
                    Outcome::Applied
                };
                AnswerBody::outcome(outcome)
                    .with_result(target::tool_result(tool, &receipt))
                    .with_receipt(receipt)
            }
            Dispatch::Refused { status } => {
                let reason = format!("the provider refused the effect with status {status}");
                record.state = RecordState::Rejected {
                    reason: reason.clone(),
                };
                rejected(&reason)
            }
            // 5. The provider may have acted: say so, and reconcile on the next attempt.
            Dispatch::Ambiguous(_) => {
                record.state = RecordState::Unknown;
                unknown("the provider's answer was lost; the effect may have happened")
            }
        };
        match self.store.settle(scope, &record).await {
            Ok(true) => answer,
            // Someone settled this operation first (or it expired and was claimed
            // anew): what is stored is the truth, not what this attempt saw.
            Ok(false) => match self.store.load(scope).await {
                Ok(Some(stored))
                    if stored.created_at_ms == record.created_at_ms && !stored.state.is_open() =>
                {
                    answer_from(tool, &stored)
                }
                _ => unknown(
                    "the operation's record changed under this attempt; retry to learn its outcome",
                ),
            },
            // The outcome is not recorded: the record still says pending, and the
            // next attempt reconciles. This answer must not claim more than that.
            Err(error) => unknown(&format!(
                "the outcome could not be recorded ({error}); the effect may have happened"
            )),
        }
    }

    /// Step 6: learn the outcome of a dispatch whose answer was lost (or whose worker
    /// died), using only what the provider's contract makes safe.
    async fn reconcile(&self, tool: &str, scope: &Scope, record: Record) -> AnswerBody {
        let contract = self.env.provider_contract;
        match contract.profile {
            ProviderProfile::Lookup => {
                // A lookup only proves absence while the provider still keeps
                // receipts: past its retention, "not found" is forgetting, not
                // evidence, and re-sending would do the effect twice (issue 5).
                if !self.inside_provider_retention(&record) {
                    return unknown(
                        "the provider no longer keeps receipts that old; the outcome cannot be learned",
                    );
                }
                match upstream::lookup(&self.env, &record.downstream_key).await {
                    Lookup::Found { receipt } => {
                        self.settle(
                            tool,
                            scope,
                            record,
                            Dispatch::Accepted {
                                receipt,
                                replayed: true,
                            },
                        )
                        .await
                    }
                    // The earlier dispatch never took effect: doing it now is the first time.
                    Lookup::NotFound => self.dispatch(tool, scope, record).await,
                    Lookup::Unsupported | Lookup::Failed => {
                        unknown("the provider could not be asked about the earlier dispatch")
                    }
                }
            }
            ProviderProfile::Keyed => {
                if self.inside_provider_retention(&record) {
                    // Re-sending under the same key inside the provider's retention is
                    // the provider's documented way to learn the first answer.
                    self.dispatch(tool, scope, record).await
                } else {
                    unknown(
                        "the provider no longer remembers the key; the outcome cannot be learned",
                    )
                }
            }
            ProviderProfile::Blind => unknown(
                "the provider offers no way to learn whether the earlier dispatch took effect",
            ),
        }
    }

    /// Whether the provider still remembers what was sent for `record`. The
    /// record was claimed before the dispatch it covers, so its age is at
    /// least the age of anything the provider stored for it.
    fn inside_provider_retention(&self, record: &Record) -> bool {
        let age = self.env.clock.now_ms().saturating_sub(record.created_at_ms);
        self.env
            .provider_contract
            .retention
            .is_none_or(|retention| age < millis(retention))
    }

    /// Drops a record older than the retention: past it, the declared policy is
    /// that a retry is a new operation.
    ///
    /// A claim this process is still working on is live work, not history,
    /// however old its clock says it is: forgetting it would let a second
    /// claim dispatch beside it, and its worker would then overwrite that
    /// claim when it settles (found by `chaos explore`, issue 5: a clock jump
    /// while a dispatch was in flight). Who works on it is looked at again
    /// after the read, right before the removal, because the read may wait on
    /// a database while another attempt takes the operation over.
    async fn forget_if_expired(&self, scope: &Scope, now: u64) -> Result<(), StoreError> {
        let worked_on = || {
            lock(&self.at_work)
                .get(scope)
                .is_some_and(|work| work.owners > 0)
        };
        if worked_on() {
            return Ok(());
        }
        if let Some(record) = self.store.load(scope).await? {
            let expired = now.saturating_sub(record.created_at_ms) >= millis(self.retention);
            if expired && !worked_on() {
                self.store.forget(scope, record.created_at_ms).await?;
            }
        }
        Ok(())
    }

    /// Counts an attempt as claiming `scope` until it learns how its claim went.
    fn begin(&self, scope: &Scope) -> Attempt<'_, S> {
        lock(&self.at_work)
            .entry(scope.clone())
            .or_default()
            .claiming += 1;
        Attempt {
            ledger: self,
            scope: scope.clone(),
            role: Role::Claiming,
        }
    }
}

/// What this process's attempts are doing with one operation.
///
/// A `pending` record tells no one whether its worker is alive; inside one
/// process, this does. An open record is taken over (reconciled) only when no
/// attempt here owns it and none is still waiting on a claim: a claim that
/// was won may not be durable yet, and until it is its winner is not an owner.
/// Counting the claimers closes that gap, in which a second attempt once took a
/// fresh claim for a dead worker's, found nothing at the provider and
/// dispatched beside the winner (stop 6's CI run: `file-ledger`, whose claim
/// waits for an fsync, at concurrent-attempts).
///
/// Every attempt still goes to the store for its claim, so the store stays the
/// arbiter between attempts, here and in any other worker: a store that fails
/// to arbitrate (`postgres-ledger --weak check-then-insert`) shows as two
/// winners, both of which dispatch.
#[derive(Debug, Default)]
struct Work {
    /// Attempts that asked the store for the claim and have not acted on its answer.
    claiming: usize,
    /// Attempts dispatching or reconciling: one, unless the store let two win.
    owners: usize,
}

enum Role {
    Claiming,
    Owner,
    Done,
}

/// One attempt's part in [`Work`], withdrawn when dropped.
struct Attempt<'a, S> {
    ledger: &'a Ledger<S>,
    scope: Scope,
    role: Role,
}

impl<S> Attempt<'_, S> {
    /// The claim was won: this attempt created the record and dispatches.
    fn won(&mut self) {
        let mut at_work = lock(&self.ledger.at_work);
        let work = at_work.entry(self.scope.clone()).or_default();
        work.claiming -= 1;
        work.owners += 1;
        self.role = Role::Owner;
    }

    /// The record was there, still open: this attempt takes it over only if
    /// nobody else here owns it or may have just created it.
    fn take_over(&mut self) -> bool {
        let mut at_work = lock(&self.ledger.at_work);
        let work = at_work.entry(self.scope.clone()).or_default();
        work.claiming -= 1;
        if work.owners == 0 && work.claiming == 0 {
            work.owners += 1;
            self.role = Role::Owner;
            true
        } else {
            self.role = Role::Done;
            false
        }
    }
}

impl<S> Drop for Attempt<'_, S> {
    fn drop(&mut self) {
        let mut at_work = lock(&self.ledger.at_work);
        if let Some(work) = at_work.get_mut(&self.scope) {
            match self.role {
                Role::Claiming => work.claiming -= 1,
                Role::Owner => work.owners -= 1,
                Role::Done => {}
            }
            if work.claiming == 0 && work.owners == 0 {
                at_work.remove(&self.scope);
            }
        }
    }
}

/// The answer a settled record gives to a retry: its stored result, told as a replay.
fn answer_from(tool: &str, record: &Record) -> AnswerBody {
    match &record.state {
        RecordState::Succeeded { receipt } => AnswerBody::outcome(Outcome::Replayed)
            .with_result(target::tool_result(tool, receipt))
            .with_receipt(receipt.clone()),
        RecordState::Rejected { reason } => rejected(reason),
        RecordState::Pending | RecordState::Unknown => {
            unknown("the operation's outcome is not known yet")
        }
    }
}

fn in_flight() -> AnswerBody {
    AnswerBody::outcome(Outcome::Pending)
        .with_reason("another attempt of this operation is in flight")
}

fn rejected(reason: &str) -> AnswerBody {
    AnswerBody::outcome(Outcome::Rejected).with_reason(reason)
}

fn unknown(reason: &str) -> AnswerBody {
    AnswerBody::outcome(Outcome::Unknown).with_reason(reason)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
