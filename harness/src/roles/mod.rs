//! The harness's own roles, the same code in the simulator and in live mode:
//!
//! - [`agent`]: plays the orchestrator: sends tool calls, times out, retries,
//!   releases concurrent attempts, records every attempt;
//! - [`provider`]: the downstream side-effect service; its ledger is the
//!   ground truth;
//! - [`authority`]: token introspection, where revocation happens;
//! - [`nemesis`]: the fault schedule, consulted by the others at protocol points;
//! - [`clock`]: the run's timeline and the wall clock that can jump.
//!
//! None of them knows which transport carries its bytes; [`Cast`] sets up a
//! trial's authority, nemesis and provider the same way for both drivers.

pub mod agent;
pub mod authority;
pub mod clock;
pub mod nemesis;
pub mod provider;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::plan::{Trial, ACTOR, TENANT};
use authority::Authority;
use clock::{HarnessClock, Timeline};
use nemesis::{ClockWait, Nemesis};
use provider::{Provider, ProviderConfig};

/// The harness's side of one trial: the authority (with the agent's token
/// granted), the nemesis with the scenario's faults, and the provider. Both
/// drivers (simulated and live) cast the same roles; only their time differs.
pub struct Cast {
    pub authority: Arc<Authority>,
    pub nemesis: Arc<Nemesis>,
    pub provider: Arc<Provider>,
}

impl Cast {
    /// `provider_retention` is the scenario's, or the shortened one of a live
    /// run; `clock_waits` are the clock jumps a live run waits out (none in
    /// the simulator, where a jump is an offset).
    pub fn new(
        trial: &Trial<'_>,
        timeline: Arc<dyn Timeline>,
        clock: Arc<HarnessClock>,
        provider_retention: Option<Duration>,
        clock_waits: BTreeMap<usize, ClockWait>,
    ) -> Cast {
        let scenario = trial.scenario;
        let authority = Arc::new(Authority::new(timeline.clone()));
        authority.grant(&trial.token, ACTOR, TENANT, &trial.scope());
        let nemesis = Arc::new(
            Nemesis::new(
                scenario.faults.clone(),
                timeline.clone(),
                clock.clone(),
                authority.clone(),
                trial.token.clone(),
                scenario.workload.tool.clone(),
            )
            .wait_out_clock_jumps(clock_waits),
        );
        let provider = Arc::new(Provider::new(
            ProviderConfig {
                profile: scenario.provider.profile,
                retention: provider_retention,
                processing_delay: scenario.provider.processing_delay,
                subject_field: scenario.workload.subject_field.clone(),
                hold: trial.timing.hold,
            },
            clock,
            timeline,
            nemesis.clone(),
        ));
        Cast {
            authority,
            nemesis,
            provider,
        }
    }
}
