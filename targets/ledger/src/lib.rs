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

use chaos_kit::sync::lock;
use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chaos_kit::canonical;
use chaos_kit::clock::millis;
use chaos_kit::http::{self, Abort, CallFailure, Request, Response};
use chaos_kit::net::Listener;
use chaos_kit::protocol::{AnswerBody, Outcome, ProviderProfile};
use chaos_kit::target::{self, AfterRetention, TargetInfo};
use chaos_kit::upstream::{self, AmbiguousDispatch, Dispatch, Lookup};
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
        after_retention: chaos_kit::target::AfterRetention::NewOperation,
    }
}

/// A deliberate weakness of the shared logic, whatever the store
/// (`--weak NAME` on every ledger binary, a sim variant each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weakness {
    /// A key reused with another payload is answered from the stored record
    /// instead of with `conflict`, as many idempotency middlewares do.
    IgnorePayload,
    /// Records are scoped by (tool, key) without the tenant: a second
    /// tenant's caller reusing a key is answered with the first's result.
    Tenantless,
    /// An expired record is taken for no record, without the atomic claim:
    /// every concurrent retry past the retention dispatches.
    ExpiryRace,
    /// A lookup's `404` is taken as proof the effect never happened, even
    /// from a provider whose lookup lags behind its commits.
    TrustsMissing,
    /// A connection the provider reset is taken for a request it never
    /// processed (a timeout stays ambiguous): the record is dropped and the
    /// answer is `failed`, so the retry sends again.
    ResetIsFailure,
    /// A provider that never answered is taken to have acted: a timeout is
    /// recorded and answered as `applied`, so a request lost on its way is
    /// never sent again (the operation silently never happens).
    AssumesDelivered,
    /// Past the retention, an operation is arbitrated in the process's
    /// memory, not by the store's claim: one attempt per process dispatches,
    /// the others are told `pending` with `Retry-After: 1`. Run as two
    /// replicas behind a round-robin balancer ([`serve_replica_guard`]),
    /// a concurrent burst dispatches once per replica. Its knowledge of who
    /// works on an operation is each replica's too: a claim the other one
    /// holds looks abandoned, and is reconciled. Simulator only: one
    /// process alone is its own single replica, and holds.
    ReplicaGuard,
}

impl Weakness {
    pub const NAMES: [&'static str; 6] = [
        "ignore-payload",
        "tenantless",
        "expiry-race",
        "trusts-missing",
        "reset-is-failure",
        "assumes-delivered",
    ];

    pub fn parse(name: &str) -> Option<Weakness> {
        match name {
            "ignore-payload" => Some(Weakness::IgnorePayload),
            "tenantless" => Some(Weakness::Tenantless),
            "expiry-race" => Some(Weakness::ExpiryRace),
            "trusts-missing" => Some(Weakness::TrustsMissing),
            "reset-is-failure" => Some(Weakness::ResetIsFailure),
            "assumes-delivered" => Some(Weakness::AssumesDelivered),
            // Not a flag: its weakness needs two replicas (the simulator's).
            _ => None,
        }
    }
}

/// What every ledger binary's flags set besides its store's own weaknesses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tuning {
    pub weakness: Option<Weakness>,
    pub key_from: KeyFrom,
    pub after_retention: AfterRetention,
}

/// The flags every ledger binary takes: `--weak NAME` (one of its store's
/// `store_weaknesses`, read by `parse`, or a [`Weakness`] of the shared
/// logic), `--key caller|structure|subject|trace` and `--after
/// new-operation|refuse|reconcile`.
pub fn flags<W>(
    program: &str,
    args: impl Iterator<Item = String>,
    store_weaknesses: &[&str],
    parse: impl Fn(&str) -> Option<W>,
) -> Result<(Option<W>, Tuning), String> {
    let weaknesses: Vec<&str> = store_weaknesses
        .iter()
        .copied()
        .chain(Weakness::NAMES)
        .collect();
    let policies: Vec<&str> = AfterRetention::ALL
        .iter()
        .map(|policy| policy.as_str())
        .collect();
    let given = chaos_kit::process::flags(
        program,
        args,
        &[
            chaos_kit::process::Flag {
                name: "--weak",
                values: &weaknesses,
            },
            chaos_kit::process::Flag {
                name: "--key",
                values: &KeyFrom::NAMES,
            },
            chaos_kit::process::Flag {
                name: "--after",
                values: &policies,
            },
        ],
    )?;
    let weak = given.get("--weak");
    let tuning = Tuning {
        weakness: weak.and_then(|name| Weakness::parse(name)),
        key_from: given
            .get("--key")
            .and_then(|name| KeyFrom::parse(name))
            .unwrap_or(KeyFrom::Caller),
        after_retention: given
            .get("--after")
            .and_then(|name| AfterRetention::parse(name))
            .unwrap_or_default(),
    };
    Ok((weak.and_then(|name| parse(name)), tuning))
}

/// The same ledger, agent-idempotent: the key is derived from the run's
/// structure (`executor_v2`), so a re-planned step is the same operation.
pub fn runtime_info() -> TargetInfo {
    TargetInfo {
        name: "runtime-ledger".into(),
        summary: "the ledger keyed by (run, step, tool, business scope) and bound by intent (executor_v2): one effect per intent across re-plans".into(),
        retention: Some(RETENTION),
        after_retention: chaos_kit::target::AfterRetention::NewOperation,
    }
}

/// How a ledger process is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// How long an operation is remembered.
    pub retention: Duration,
    /// What a retry past the retention gets.
    pub after_retention: AfterRetention,
    /// Where an operation's identity comes from.
    pub key_from: KeyFrom,
    /// A deliberate weakness, if this is a weakened variant.
    pub weakness: Option<Weakness>,
    /// The tool policy `refuse`: a step decided again (another tool call
    /// for an operation already claimed) is answered `rejected`.
    pub refuse_replans: bool,
    /// The tool policy `sign-off`: a step decided again is executed as an
    /// action of its own only when a human signed that tool call off at the
    /// authority (`GET /approvals`); otherwise it coalesces.
    pub sign_off_replans: bool,
}

impl Options {
    pub fn new(retention: Duration) -> Options {
        Options {
            retention,
            after_retention: AfterRetention::NewOperation,
            key_from: KeyFrom::Caller,
            weakness: None,
            refuse_replans: false,
            sign_off_replans: false,
        }
    }

    /// These options, as a binary's flags tune them.
    pub fn tuned(self, tuning: Tuning) -> Options {
        Options {
            after_retention: tuning.after_retention,
            key_from: tuning.key_from,
            weakness: tuning.weakness,
            ..self
        }
    }
}

struct Ledger<S> {
    env: TargetEnv,
    store: S,
    retention: Duration,
    after_retention: AfterRetention,
    weakness: Option<Weakness>,
    key_from: KeyFrom,
    refuse_replans: bool,
    sign_off_replans: bool,
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

/// Declares the ledger's variants that run in the simulator: each its name,
/// what it is, and the options it serves with, on the environment's disk.
macro_rules! variants {
    ($($serve:ident, $info:ident: $name:literal, $summary:literal, $after:expr, $options:expr;)+) => {
        $(
            pub fn $info() -> TargetInfo {
                TargetInfo {
                    name: $name.into(),
                    summary: $summary.into(),
                    retention: Some(RETENTION),
                    after_retention: $after,
                }
            }

            pub async fn $serve(
                listener: impl Listener,
                shutdown: impl std::future::Future<Output = ()>,
                env: TargetEnv,
            ) -> io::Result<()> {
                let store = DiskStore::new(env.disk.clone());
                let options: Options = $options;
                serve_with(listener, shutdown, env, store, options).await
            }
        )+
    };
}

variants! {
    serve_refusing, refusing_info: "refusing-ledger",
        "the ledger whose policy past its retention is to refuse a retry (rejected, no dispatch)",
        AfterRetention::Refuse,
        Options { after_retention: AfterRetention::Refuse, ..Options::new(RETENTION) };
    serve_reconciling, reconciling_info: "reconciling-ledger",
        "the ledger that, past its retention, looks the key up at the provider before sending anything",
        AfterRetention::Reconcile,
        Options { after_retention: AfterRetention::Reconcile, ..Options::new(RETENTION) };
    serve_subject_key, subject_key_info: "subject-key",
        "WEAK: the ledger keyed by tool and invoice alone: a second reminder for one invoice is never sent",
        AfterRetention::NewOperation,
        Options { key_from: KeyFrom::Subject, ..Options::new(RETENTION) };
    serve_trace_key, trace_key_info: "trace-key",
        "WEAK: the ledger keyed by the conversation's trace id: every action after a conversation's first is merged into it",
        AfterRetention::NewOperation,
        Options { key_from: KeyFrom::Trace, ..Options::new(RETENTION) };
    serve_tenantless, tenantless_info: "tenantless",
        "WEAK: the ledger scoping records by (tool, key) without the tenant: one tenant's key answers another's",
        AfterRetention::NewOperation,
        Options { weakness: Some(Weakness::Tenantless), ..Options::new(RETENTION) };
    serve_expiry_race, expiry_race_info: "expiry-race",
        "WEAK: the ledger whose claim ignores expiry: every concurrent retry past the retention dispatches",
        AfterRetention::NewOperation,
        Options { weakness: Some(Weakness::ExpiryRace), ..Options::new(RETENTION) };
    serve_trusts_missing, trusts_missing_info: "trusts-missing",
        "WEAK: the ledger that takes a lagging lookup's 404 for proof the effect never happened",
        AfterRetention::NewOperation,
        Options { weakness: Some(Weakness::TrustsMissing), ..Options::new(RETENTION) };
    serve_reset_is_failure, reset_is_failure_info: "reset-is-failure",
        "WEAK: the ledger that takes a provider's reset for a request never processed (a timeout stays unknown) and sends again",
        AfterRetention::NewOperation,
        Options { weakness: Some(Weakness::ResetIsFailure), ..Options::new(RETENTION) };
    serve_refuses_replans, refuses_replans_info: "refuses-replans",
        "runtime-ledger under the tool policy refuse: a step decided again (a new tool call for an executed step) is answered rejected, naming the first call, never executed nor replayed",
        AfterRetention::NewOperation,
        Options { key_from: KeyFrom::Structure, refuse_replans: true, ..Options::new(RETENTION) };
    serve_signs_off_replans, signs_off_replans_info: "signs-off-replans",
        "runtime-ledger under the tool policy sign-off: a step decided again is executed as an action of its own only if a human signed that tool call off at the authority (GET /approvals), and coalesces into the first call's result otherwise",
        AfterRetention::NewOperation,
        Options { key_from: KeyFrom::Structure, sign_off_replans: true, ..Options::new(RETENTION) };
    serve_assumes_delivered, assumes_delivered_info: "assumes-delivered",
        "WEAK: the ledger that takes a provider's silence for success: a request lost on its way is answered applied and never sent again",
        AfterRetention::NewOperation,
        Options { weakness: Some(Weakness::AssumesDelivered), ..Options::new(RETENTION) };
}

/// Serves the ledger over any record store.
pub async fn serve_with<S: RecordStore>(
    listener: impl Listener,
    shutdown: impl std::future::Future<Output = ()>,
    env: TargetEnv,
    store: S,
    options: Options,
) -> io::Result<()> {
    let ledger = Arc::new(Ledger::new(env, store, options));
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

/// What `replica-guard` declares it remembers an operation for: the
/// retention a test shortens it to, as a live run shortens a library's to
/// seconds. Shorter than the wait its `Retry-After` asks for (which the
/// simulated agent caps at its attempt timeout, 56 ms), longer than one
/// concurrent burst. Its records keep their 7 days: it remembers longer
/// than it promises, which any layer may.
pub const REPLICA_GUARD_RETENTION: Duration = Duration::from_millis(20);

/// `replica-guard`: `runtime-ledger` run as two replicas on one store, behind a
/// round-robin balancer, each arbitrating an operation past its retention
/// in its own memory ([`Weakness::ReplicaGuard`]). Issue 22's shape, seen
/// live: a burst of concurrent retries past the retention makes two effects
/// (one per replica) in one epoch; the attempts held off are told to come
/// back after `Retry-After: 1`, and the retry the agent makes after that
/// wait lands past the declared retention, opening an epoch that commits
/// nothing (it is answered from the record). Judged by `expected x epochs`
/// the three effects passed as `3/3`; judged epoch by epoch they fail.
pub fn replica_guard_info() -> TargetInfo {
    TargetInfo {
        name: "replica-guard".into(),
        summary: "WEAK: runtime-ledger as two replicas, each guarding an operation past its retention in its own memory (409 + Retry-After: 1 to the rest): a concurrent burst dispatches once per replica".into(),
        retention: Some(REPLICA_GUARD_RETENTION),
        after_retention: AfterRetention::NewOperation,
    }
}

/// Serves `replica-guard` on the environment's disk: the simulator's entry point.
pub async fn serve_replica_guard(
    listener: impl Listener,
    shutdown: impl std::future::Future<Output = ()>,
    env: TargetEnv,
) -> io::Result<()> {
    let store = DiskStore::new(env.disk.clone());
    // Keyed as `runtime-ledger` is, so that a re-plan inside its short
    // declared retention coalesces: the one weakness is past it.
    let options = Options {
        weakness: Some(Weakness::ReplicaGuard),
        key_from: KeyFrom::Structure,
        ..Options::new(RETENTION)
    };
    let replicas = [
        Arc::new(Ledger::new(env.clone(), store.clone(), options)),
        Arc::new(Ledger::new(env, store, options)),
    ];
    // The balancer: tool calls go to each replica in turn, so a burst of
    // concurrent attempts is split between them whatever their timing.
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    http::serve(
        listener,
        shutdown,
        http::handler(move |request| {
            let turn = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let ledger = replicas[turn % replicas.len()].clone();
            async move { Ok::<_, Abort>(ledger.handle(request).await) }
        }),
    )
    .await
}

/// The ledger as an in-process handler of chaos-protocol requests, for a
/// process that fronts it with another protocol: the MCP reference server
/// (`targets/mcp-ledger`) hands each `tools/call` to it as the request the
/// tool call would be over HTTP, so the claim, the reconcile and the honest
/// states are this file's, not a second copy.
pub struct Handler<S>(Arc<Ledger<S>>);

impl<S> Clone for Handler<S> {
    fn clone(&self) -> Self {
        Handler(self.0.clone())
    }
}

impl<S: RecordStore> Handler<S> {
    pub fn new(env: TargetEnv, store: S, options: Options) -> Handler<S> {
        Handler(Arc::new(Ledger::new(env, store, options)))
    }

    /// Answers one request as the ledger's HTTP server would.
    pub async fn handle(&self, request: Request) -> Response {
        self.0.handle(request).await
    }
}

impl<S> Ledger<S> {
    fn new(env: TargetEnv, store: S, options: Options) -> Ledger<S> {
        Ledger {
            env,
            store,
            retention: options.retention,
            after_retention: options.after_retention,
            weakness: options.weakness,
            key_from: options.key_from,
            refuse_replans: options.refuse_replans,
            sign_off_replans: options.sign_off_replans,
            at_work: Mutex::new(BTreeMap::new()),
        }
    }
}

impl<S: RecordStore> Ledger<S> {
    async fn handle(&self, request: Request) -> Response {
        if target::is_health_check(&request) {
            return Response::new(200);
        }
        let Some(tool) = target::tool_call(&request) else {
            return target::not_found();
        };
        let answer = self.tool_call(tool, &request).await;
        let held_off = answer.outcome == Some(Outcome::Pending);
        let response = target::answer(answer);
        if held_off && self.weakness == Some(Weakness::ReplicaGuard) {
            // An attempt held off is asked to wait a second: longer than the
            // retention it declares, as in the library that showed issue 22.
            return response.header("Retry-After", "1");
        }
        response
    }

    async fn tool_call(&self, tool: &str, request: &Request) -> AnswerBody {
        // 1. Authorization, every attempt, before anything is read or replayed.
        let Some(token) = upstream::bearer_token(request) else {
            return AnswerBody::outcome(Outcome::Denied);
        };
        let grant = match upstream::introspect(&self.env, token).await {
            Some(grant) if grant.allows(tool) => grant,
            Some(_) => return AnswerBody::outcome(Outcome::Denied),
            // Not a denial: nothing is known about the caller, and nothing is
            // done. Not `failed` either: without the caller's tenant there is
            // no record to read, and an earlier attempt may have done it.
            None => {
                return unknown(
                    "the authority did not answer; nothing was done by this attempt, and without it the operation's record cannot be read",
                )
            }
        };

        // 2. Scope and payload binding.
        let Ok(arguments) = serde_json::from_slice::<serde_json::Value>(&request.body) else {
            return rejected("arguments are not JSON");
        };
        let key = match self.key_from.key(tool, request, &arguments) {
            Ok(key) => key,
            Err(why) => return rejected(&why),
        };
        let actor = grant.sub.clone().unwrap_or_default();
        let tenant = match self.weakness {
            // WEAK: one tenant's key is every tenant's.
            Some(Weakness::Tenantless) => String::new(),
            _ => grant.tenant.unwrap_or_default(),
        };
        let scope = Scope {
            tenant,
            tool: tool.to_owned(),
            key,
        };
        let tool_call = request.header_value(chaos_kit::protocol::TOOL_USE_ID);
        // The tool policy `sign-off`: a step decided again that a human
        // signed off is an action of its own, under a key of its own, where
        // that tool call's retries find it; unsigned, it coalesces below.
        let scope = match (self.sign_off_replans, tool_call) {
            (true, Some(this)) => match self.signed_off_scope(scope, &actor, this).await {
                Ok(scope) => scope,
                Err(answer) => return answer,
            },
            _ => scope,
        };
        let now = self.env.clock.now_ms();

        // 3. The atomic claim: the store alone decides which attempt creates the
        // record, whether the others run in this process or in another one.
        let fingerprint = self.key_from.fingerprint(&arguments);
        let payload = canonical::canonical_json(&arguments);
        let mut fresh = Record::pending(&scope.to_string(), &payload, fingerprint, now);
        if self.refuse_replans || self.sign_off_replans {
            fresh.tool_use_id = tool_call.map(str::to_owned);
        }
        let mut attempt = self.begin(&scope);
        let claim = match self.expired(&scope, now).await {
            Ok(None) => self.store.claim(&scope, &fresh).await,
            Ok(Some(expired)) => match (self.after_retention, self.weakness) {
                (AfterRetention::Refuse, _) => {
                    return rejected(&format!(
                        "this operation is past the {} this layer remembers operations for, and its policy is to refuse such a retry; start a new operation if it is meant",
                        humantime_like(self.retention)
                    ))
                }
                (AfterRetention::Reconcile, _) => {
                    return self
                        .reconcile_expired(tool, &scope, expired, fresh, &mut attempt)
                        .await
                }
                (AfterRetention::NewOperation, Some(Weakness::ReplicaGuard)) => {
                    // WEAK: this process's memory arbitrates, not the store:
                    // an attempt another replica works on is not seen here.
                    // The expired record stays until the dispatch is over, so
                    // every attempt here meanwhile reads it and is held off.
                    if !attempt.guard() {
                        return in_flight();
                    }
                    return self
                        .dispatch_then_record(tool, &scope, expired.created_at_ms, fresh)
                        .await;
                }
                (AfterRetention::NewOperation, Some(Weakness::ExpiryRace)) => {
                    // WEAK: it read "expired", took that for "absent", and
                    // acts on the read: dispatch first, record after. Every
                    // retry that read before the first one recorded sends.
                    attempt.won();
                    return self
                        .dispatch_then_record(tool, &scope, expired.created_at_ms, fresh)
                        .await;
                }
                (AfterRetention::NewOperation, _) => {
                    match self.store.forget(&scope, expired.created_at_ms).await {
                        Ok(()) => self.store.claim(&scope, &fresh).await,
                        Err(error) => Err(error),
                    }
                }
            },
            Err(error) => Err(error),
        };
        let existing = match claim {
            Ok(Claim::Won) => {
                attempt.won();
                return self.dispatch(tool, &scope, fresh).await;
            }
            Ok(Claim::Taken(existing)) => existing,
            // The store could not say whether an earlier attempt claimed it.
            Err(error) => {
                return unknown(&format!(
                    "the record store failed ({error}); nothing was done by this attempt"
                ))
            }
        };
        if let Some(conflict) = self.payload_conflict(&existing, &fresh) {
            return conflict;
        }
        // The tool policy `refuse`: another tool call for a step already
        // claimed is the planner deciding again, refused in words the agent
        // reads; its own retries (the same tool call) are served as usual.
        if let (true, Some(first), Some(this)) = (
            self.refuse_replans,
            existing.tool_use_id.as_deref(),
            tool_call,
        ) {
            if first != this {
                return rejected(&format!(
                    "this step was already decided as tool call {first}; the tool's policy refuses a step decided again, and nothing was done for tool call {this}"
                ));
            }
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

    /// The scope tool call `this` works under, by the policy `sign-off`:
    /// the operation's own, unless its record was claimed by another tool
    /// call (this one is the step decided again) and a human signed this
    /// one off at the authority; then a scope of its own. Unknown when the
    /// approvals cannot be read: nothing is done on a guess.
    async fn signed_off_scope(
        &self,
        scope: Scope,
        actor: &str,
        this: &str,
    ) -> Result<Scope, AnswerBody> {
        let first = match self.store.load(&scope).await {
            Ok(Some(record)) => record.tool_use_id,
            Ok(None) => None,
            Err(error) => {
                return Err(unknown(&format!(
                    "the record store failed ({error}); nothing was done by this attempt"
                )))
            }
        };
        if first.is_none() || first.as_deref() == Some(this) {
            return Ok(scope);
        }
        let Some(approvals) = upstream::approvals(&self.env, actor).await else {
            return Err(unknown(
                "the approvals could not be read: whether a human signed this re-plan off is unknown, and nothing was done by this attempt",
            ));
        };
        let signed = approvals.iter().any(|approval| {
            approval.tool_call.as_deref() == Some(this) && approval.tool == scope.tool
        });
        Ok(match signed {
            true => Scope {
                key: format!("{}/signed-off/{this}", scope.key),
                ..scope
            },
            false => scope,
        })
    }

    /// `conflict` when the key was first used with another payload (unless the
    /// ledger was weakened to ignore payloads).
    fn payload_conflict(&self, existing: &Record, fresh: &Record) -> Option<AnswerBody> {
        let ignores_payload = self.weakness == Some(Weakness::IgnorePayload);
        (existing.fingerprint != fresh.fingerprint && !ignores_payload).then(|| {
            AnswerBody::outcome(Outcome::Conflict)
                .with_reason("this Idempotency-Key was used with a different payload")
        })
    }

    /// Step 4: dispatch under the scope's downstream key and record what came back.
    async fn dispatch(&self, tool: &str, scope: &Scope, mut record: Record) -> AnswerBody {
        let result = upstream::dispatch(
            &self.env,
            tool,
            &record.downstream_key,
            record.payload.clone().into(),
        )
        .await;
        record.dispatch_ended_at_ms = Some(self.env.clock.now_ms());
        self.settle(tool, scope, record, result).await
    }

    /// The weak variants' way past the retention: send first, then replace
    /// the expired record with the new one, so nothing claimed the operation
    /// while it was sent.
    async fn dispatch_then_record(
        &self,
        tool: &str,
        scope: &Scope,
        expired_at_ms: u64,
        fresh: Record,
    ) -> AnswerBody {
        let result = upstream::dispatch(
            &self.env,
            tool,
            &fresh.downstream_key,
            fresh.payload.clone().into(),
        )
        .await;
        let _ = self.store.forget(scope, expired_at_ms).await;
        let _ = self.store.claim(scope, &fresh).await;
        self.settle(tool, scope, fresh, result).await
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
            // WEAK: a reset read as "not processed", which it need not be.
            Dispatch::Ambiguous(AmbiguousDispatch::Call(CallFailure::Reset))
                if self.weakness == Some(Weakness::ResetIsFailure) =>
            {
                let _ = self.store.forget(scope, record.created_at_ms).await;
                return failed("the provider dropped the connection; nothing was done");
            }
            // WEAK: silence read as "done", which it need not be.
            Dispatch::Ambiguous(AmbiguousDispatch::Call(CallFailure::Timeout))
                if self.weakness == Some(Weakness::AssumesDelivered) =>
            {
                let receipt = format!("assumed-{}", record.created_at_ms);
                record.state = RecordState::Succeeded {
                    receipt: receipt.clone(),
                };
                AnswerBody::outcome(Outcome::Applied)
                    .with_result(target::tool_result(tool, &receipt))
                    .with_receipt(receipt)
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
        // Re-sending to a provider that saved its error under the key only
        // brings the error back: only a lookup can tell (Stripe API v1).
        let ask = contract.profile == ProviderProfile::Lookup
            || (contract.saves_errors && contract.lookup.is_available());
        match contract.profile {
            _ if ask => {
                // A lookup only proves absence while the provider still keeps
                // receipts: past its retention, "not found" is forgetting, not
                // evidence, and re-sending would do the effect twice (issue 5).
                if !self.inside_provider_retention(&record) {
                    return unknown(
                        "the provider no longer keeps receipts that old; the outcome cannot be learned",
                    );
                }
                // The lag counts to when the question was asked, not to when
                // its answer came back: the provider searched at some
                // moment in between (explore found the difference).
                let asked_at = self.env.clock.now_ms();
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
                    // A lagging lookup does not see a recent effect: its
                    // "not found" is proof only once the lag has passed.
                    Lookup::NotFound if !self.lag_had_passed(&record, asked_at) => unknown(&format!(
                        "the provider's lookup lags by {} behind its commits, and the earlier dispatch is more recent: not found proves nothing yet; retry later",
                        humantime_like(contract.lookup.lag())
                    )),
                    // The earlier dispatch never took effect: doing it now is
                    // the first time. Said durably before it is sent, so that
                    // a lookup after this process dies mid-send waits out the
                    // lag from this send, not from the earlier one.
                    Lookup::NotFound => {
                        let resend = Record {
                            resent_at_ms: Some(self.env.clock.now_ms()),
                            dispatch_ended_at_ms: None,
                            ..record
                        };
                        match self.store.settle(scope, &resend).await {
                            Ok(true) => self.dispatch(tool, scope, resend).await,
                            Ok(false) => unknown(
                                "the operation's record changed under this attempt; retry to learn its outcome",
                            ),
                            Err(error) => unknown(&format!(
                                "the record store failed ({error}); nothing was sent again"
                            )),
                        }
                    }
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
            ProviderProfile::Lookup | ProviderProfile::Blind => unknown(
                "the provider offers no way to learn whether the earlier dispatch took effect",
            ),
        }
    }

    /// Whether a lookup asked at `asked_at` that answered "not found"
    /// proves the dispatch of `record` never took effect: the provider's
    /// lookup lag had passed since the dispatch ended when it was asked.
    fn lag_had_passed(&self, record: &Record, asked_at: u64) -> bool {
        let lag = millis(self.env.provider_contract.lookup.lag());
        // Without the time (a store that keeps no such column), the worst
        // case: the dispatch ran its whole upstream timeout after it began.
        // A re-send that never ended (its process died) may have committed
        // up to its own timeout after it started.
        let started_at = record.resent_at_ms.unwrap_or(record.created_at_ms);
        let ended_at = record
            .dispatch_ended_at_ms
            .unwrap_or_else(|| started_at + millis(self.env.upstream_timeout));
        self.weakness == Some(Weakness::TrustsMissing) || asked_at.saturating_sub(ended_at) >= lag
    }

    /// Past the retention, under the policy `reconcile`: the provider is
    /// asked about the operation's downstream key before anything is sent.
    /// Found, the operation happened, and the retry is its replay; not
    /// found (the provider forgot too, or it never happened), it is a new
    /// operation, claimed and dispatched as one.
    async fn reconcile_expired(
        &self,
        tool: &str,
        scope: &Scope,
        expired: Record,
        fresh: Record,
        attempt: &mut Attempt<'_, S>,
    ) -> AnswerBody {
        match upstream::lookup(&self.env, &expired.downstream_key).await {
            Lookup::Found { receipt } => AnswerBody::outcome(Outcome::Replayed)
                .with_result(target::tool_result(tool, &receipt))
                .with_receipt(receipt),
            Lookup::NotFound => {
                let claim = match self.store.forget(scope, expired.created_at_ms).await {
                    Ok(()) => self.store.claim(scope, &fresh).await,
                    Err(error) => Err(error),
                };
                match claim {
                    Ok(Claim::Won) => {
                        attempt.won();
                        self.dispatch(tool, scope, fresh).await
                    }
                    Ok(Claim::Taken(_)) => in_flight(),
                    Err(error) => unknown(&format!(
                        "the record store failed ({error}); nothing was done by this attempt"
                    )),
                }
            }
            Lookup::Unsupported | Lookup::Failed => unknown(
                "this operation is past this layer's retention, and the provider could not be asked about it",
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

    /// The record of `scope`, if it is older than the retention: past it,
    /// the declared policy decides what a retry gets.
    ///
    /// A claim this process is still working on is live work, not history,
    /// however old its clock says it is: treating it as expired would let a
    /// second claim dispatch beside it, and its worker would then overwrite
    /// that claim when it settles (found by `chaos explore`, issue 5: a clock
    /// jump while a dispatch was in flight). Who works on it is looked at
    /// again after the read, because the read may wait on a database while
    /// another attempt takes the operation over.
    async fn expired(&self, scope: &Scope, now: u64) -> Result<Option<Record>, StoreError> {
        // WEAK (expiry-race, replica-guard): what it read decides, live
        // work or not (replica-guard then consults its memory alone).
        let racy = matches!(
            self.weakness,
            Some(Weakness::ExpiryRace | Weakness::ReplicaGuard)
        );
        let worked_on = || {
            !racy
                && lock(&self.at_work)
                    .get(scope)
                    .is_some_and(|work| work.owners > 0)
        };
        if worked_on() {
            return Ok(None);
        }
        Ok(self.store.load(scope).await?.filter(|record| {
            now.saturating_sub(record.created_at_ms) >= millis(self.retention) && !worked_on()
        }))
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

    /// Past the retention, under `replica-guard`: this attempt owns the
    /// operation unless another attempt of this process already does.
    fn guard(&mut self) -> bool {
        let mut at_work = lock(&self.ledger.at_work);
        let work = at_work.entry(self.scope.clone()).or_default();
        work.claiming -= 1;
        if work.owners == 0 {
            work.owners += 1;
            self.role = Role::Owner;
            true
        } else {
            self.role = Role::Done;
            false
        }
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

fn failed(reason: &str) -> AnswerBody {
    AnswerBody::outcome(Outcome::Failed).with_reason(reason)
}

/// A duration as a reason reads it (`7days`, `50ms`).
fn humantime_like(duration: Duration) -> String {
    let ms = millis(duration);
    match ms {
        ms if ms % 86_400_000 == 0 => format!("{}days", ms / 86_400_000),
        ms if ms % 3_600_000 == 0 => format!("{}h", ms / 3_600_000),
        ms if ms % 1_000 == 0 => format!("{}s", ms / 1_000),
        ms => format!("{ms}ms"),
    }
}

fn unknown(reason: &str) -> AnswerBody {
    AnswerBody::outcome(Outcome::Unknown).with_reason(reason)
}
