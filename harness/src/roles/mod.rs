//! The harness's own roles, the same code in the simulator and in live mode:
//!
//! - [`agent`]: plays the orchestrator: sends tool calls, times out, retries,
//!   releases concurrent attempts, records every attempt;
//! - [`provider`]: the downstream side-effect service; its ledger is the
//!   ground truth; the shape it speaks is a [`crate::provider_api`] unit;
//! - [`authority`]: token introspection, answered from the callers'
//!   [`grants`], which the nemesis revokes (neither role knows the other);
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
pub(crate) mod nemesis;
pub(crate) mod provider;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chaos_kit::clock::Clock;

use crate::history::{Attempt, EarlierTrial, History, Ms, RunOutput};
use crate::plan::Trial;
use crate::provider_api::ProviderApi;
use crate::way_in::WayIn;
use agent::AgentEnv;
use authority::Authority;
use clock::{HarnessClock, Timeline};
use nemesis::{ClockWait, Nemesis};
use provider::{Provider, ProviderConfig};

/// Where a trial's roles play: its timeline and wall clock, the API the
/// provider speaks, and what a live run puts in place of the scenario's
/// declared times.
pub(crate) struct Setting<'a> {
    pub timeline: Arc<dyn Timeline>,
    pub clock: Arc<HarnessClock>,
    pub api: ProviderApi,
    /// `None` in the simulator, where a clock jump is an offset and every
    /// period is as declared.
    pub live: Option<LiveTimes<'a>>,
}

/// The times of a live run that differ from the scenario's.
pub(crate) struct LiveTimes<'a> {
    /// The provider's retention, shortened when the run jumps the clock.
    pub provider_retention: Option<Duration>,
    /// The clock jumps, by fault index, as waits.
    pub clock_waits: BTreeMap<usize, ClockWait>,
    /// How long each fixture approval holds, in the fixture's order.
    pub approval_expiries: &'a [Option<Duration>],
    /// The subjects of the trials the target's process served before this
    /// one: their requests are their trials' late work.
    pub earlier: BTreeMap<String, EarlierTrial>,
    /// The service's own names for the suite's tools (`[request.tools]`).
    pub tool_names: BTreeMap<String, String>,
}

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
    pub(crate) fn new(trial: &Trial<'_>, setting: Setting<'_>) -> Cast {
        let Setting {
            timeline,
            clock,
            api,
            live,
        } = setting;
        let (provider_retention, clock_waits, approval_expiries, earlier, tool_names) = match live {
            Some(live) => (
                live.provider_retention,
                live.clock_waits,
                Some(live.approval_expiries),
                live.earlier,
                live.tool_names,
            ),
            None => (
                trial.scenario.provider.retention,
                BTreeMap::new(),
                None,
                BTreeMap::new(),
                BTreeMap::new(),
            ),
        };
        let scenario = trial.scenario;
        let authority = Arc::new(Authority::new(timeline.clone()));
        authority.name_tools(tool_names);
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
                authority.grants(),
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
                saves_errors: scenario.provider.saves_errors || api.saves_errors(),
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
                earlier,
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

    /// What the agent runs against: `http` reaches the target at `target`,
    /// the way `way_in` says.
    pub(crate) fn agent_env(
        &self,
        http: chaos_kit::http::Client,
        target: String,
        way_in: WayIn,
    ) -> AgentEnv {
        AgentEnv {
            http,
            target,
            timeline: self.timeline.clone(),
            clock: self.clock.clone(),
            nemesis: self.nemesis.clone(),
            way_in,
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
                mcp: None,
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
