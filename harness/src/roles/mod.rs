//! The harness's own roles, the same code in the simulator and in live mode:
//!
//! - [`agent`]: plays the orchestrator: sends tool calls, times out, retries,
//!   releases concurrent attempts, records every attempt;
//! - [`provider`]: the downstream side-effect service; its ledger is the
//!   ground truth; [`stripe`] is its Stripe-shaped API;
//! - [`authority`]: token introspection, where revocation happens;
//! - [`nemesis`]: the fault schedule, consulted by the others at protocol
//!   points, and the drivers' side of crashes;
//! - [`clock`]: the run's timeline and the wall clock that can jump.
//!
//! None of them knows which transport carries its bytes. [`Cast`] sets up a
//! trial's roles the same way for both drivers and assembles what they saw
//! into the run's output.

pub(crate) mod agent;
pub(crate) mod authority;
pub(crate) mod clock;
pub(crate) mod grants;
pub(crate) mod mapping;
pub(crate) mod nemesis;
pub(crate) mod provider;
pub(crate) mod stripe;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chaos_kit::clock::Clock;

use crate::history::{Attempt, History, Ms, RunOutput};
use crate::plan::Trial;
use agent::AgentEnv;
use authority::Authority;
use clock::{HarnessClock, Timeline};
use mapping::Mapping;
use nemesis::{ClockWait, Nemesis};
use provider::{Provider, ProviderConfig};

use crate::target_file::ProviderApi;

/// The harness's side of one trial: the authority (with the agent's token
/// granted), the nemesis with the scenario's faults, the provider, and the
/// record of the agent's attempts. Both drivers (simulated and live) cast the
/// same roles; only their time and their network differ.
pub(crate) struct Cast {
    pub timeline: Arc<dyn Timeline>,
    pub clock: Arc<HarnessClock>,
    pub authority: Arc<Authority>,
    pub nemesis: Arc<Nemesis>,
    pub provider: Arc<Provider>,
    attempts: Arc<Mutex<Vec<Attempt>>>,
}

impl Cast {
    /// `provider_retention` is the scenario's, or the shortened one of a live
    /// run; `clock_waits` are the clock jumps a live run waits out (none in
    /// the simulator, where a jump is an offset); `approval_expiries`, the
    /// shortened expiries of the fixture's approvals live (`None`: as
    /// declared); `api` the provider's API shape (live targets may talk Stripe).
    pub(crate) fn new(
        trial: &Trial<'_>,
        timeline: Arc<dyn Timeline>,
        clock: Arc<HarnessClock>,
        provider_retention: Option<Duration>,
        clock_waits: BTreeMap<usize, ClockWait>,
        approval_expiries: Option<&[Option<Duration>]>,
        api: ProviderApi,
    ) -> Cast {
        let scenario = trial.scenario;
        let authority = Arc::new(Authority::new(timeline.clone()));
        for (tenant, token) in &trial.tokens {
            let (actor, tenant) = trial.caller(tenant);
            authority.grant(token, &actor, &tenant, &trial.scope());
        }
        if let Some(fixture) = &scenario.fixture {
            let declared: Vec<Option<Duration>> = fixture
                .approvals
                .iter()
                .map(|approval| approval.expires_after)
                .collect();
            authority.record_approvals(
                &fixture.approvals,
                approval_expiries.unwrap_or(&declared),
                clock.now_ms(),
            );
        }
        let nemesis = Arc::new(
            Nemesis::new(
                scenario.faults.clone(),
                timeline.clone(),
                clock.clone(),
                authority.clone(),
                trial
                    .tokens
                    .iter()
                    .map(|(_, token)| token.clone())
                    .collect(),
                scenario.workload.tool.clone(),
            )
            .wait_out_clock_jumps(clock_waits),
        );
        authority.watched_by(&nemesis);
        let provider = Arc::new(Provider::new(
            ProviderConfig {
                profile: scenario.provider.profile,
                lookup: scenario.provider.lookup,
                // Stripe's contract saves every answer, errors included.
                saves_errors: scenario.provider.saves_errors || api == ProviderApi::Stripe,
                declined_subjects: trial
                    .operations
                    .iter()
                    .filter(|operation| scenario.provider.declines.contains(&operation.name))
                    .map(|operation| operation.subject.clone())
                    .collect(),
                retention: provider_retention,
                processing_delay: scenario.provider.processing_delay,
                subject_field: scenario.workload.subject_field.clone(),
                free_text_field: scenario.workload.free_text_field.clone(),
                hold: trial.timing.hold,
                records: scenario
                    .fixture
                    .as_ref()
                    .map(|fixture| fixture.records.clone())
                    .unwrap_or_default(),
                api,
            },
            clock.clone(),
            timeline.clone(),
            nemesis.clone(),
        ));
        Cast {
            timeline,
            clock,
            authority,
            nemesis,
            provider,
            attempts: Arc::default(),
        }
    }

    /// What the agent runs against: `http` reaches the target at `target`.
    pub(crate) fn agent_env(
        &self,
        http: chaos_kit::http::Client,
        target: String,
        mapping: Mapping,
    ) -> AgentEnv {
        AgentEnv {
            http,
            target,
            timeline: self.timeline.clone(),
            clock: self.clock.clone(),
            nemesis: self.nemesis.clone(),
            mapping,
            attempts: self.attempts.clone(),
        }
    }

    /// The run's output: what the agent saw, what the nemesis did, what the
    /// authority answered and what the provider committed, as of `ended_at`.
    /// `error` says why the run could not complete, when it could not.
    pub(crate) fn finish(&self, ended_at: Ms, error: Option<String>) -> RunOutput {
        let attempts = std::mem::take(
            &mut *self
                .attempts
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
        RunOutput {
            history: History {
                attempts,
                faults: self.nemesis.events(),
                authorizations: self.authority.decisions(),
                ended_at,
            },
            ledger: self.provider.ledger(),
            error,
        }
    }

    /// The attempts recorded so far (live: to tell a hanging target).
    pub(crate) fn attempts(&self) -> Vec<Attempt> {
        self.attempts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}
