//! The space `chaos explore` searches: a [`Case`] is a fault schedule (provider,
//! network, the agent's calls, the faults) plus the seed of its simulation.
//! proptest generates cases from [`cases`] and shrinks them.
//!
//! Shrinking order is built into the strategy's shape: proptest shrinks a tuple
//! one element at a time, and a `Vec` by deleting elements before shrinking
//! them, so the faults come first (fewest faults), then the calls, then the
//! setup; every value shrinks toward the simplest choice (the first of a
//! `prop_oneof!`, the low end of a range). [`Case::simpler`] lists the moves of
//! the post-pass that makes the result 1-minimal.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use chaos_kit::protocol::{LookupCapability, ProviderProfile};
use proptest::collection::vec;
use proptest::prelude::*;

use crate::fault::{self, Fault, Space, Trigger};
use crate::scenario::{
    Boundary, Call, Claim, Expectations, Identity, NetworkSetup, OperationSetup, PayloadVariant,
    Policy, ProviderSetup, Scenario, TestKind, Workload,
};
use crate::simplify::{lower_ms, lower_u32};

/// At most this many faults in one schedule. Each kind bounds its own values
/// (`fault::*`): the clock jumps it makes, the longest delay, the slowest restart.
pub const MAX_FAULTS: usize = 4;
/// At most this many call steps.
pub const MAX_CALLS: usize = 4;
/// Faults act on one of the first this-many dispatches or answers: later ones
/// seldom exist in a run of a few calls.
pub const MAX_NTH: u32 = 6;
/// Attempts per worker, the agent's retry budget.
pub const MAX_ATTEMPTS: u32 = 8;
/// Workers released together (the issue asks for 1 to 8).
pub const MAX_CONCURRENCY: u32 = 8;
/// Subagents running one step at once.
pub const MAX_SUBAGENTS: u32 = 3;
/// The free-text field of the explored workload, which drifted payloads re-word.
pub const FREE_TEXT_FIELD: &str = "note";
/// The logical operations a run's calls choose from.
pub const OPERATIONS: [&str; 3] = ["a", "b", "c"];
/// Provider retentions, the usual first.
pub const RETENTIONS: [Option<Duration>; 3] = [
    Some(Duration::from_secs(24 * 3_600)),
    None,
    Some(Duration::from_secs(3_600)),
];
/// The provider's processing delay widens races, and stays a few milliseconds:
/// far inside the time a target takes to give up on a dispatch and come back
/// with a retry's lookup or re-send. A provider that silently commits after
/// that would make every reconcile unsound, for any target; a late commit is
/// what a `delay` or `lose-response` fault says openly.
pub const MAX_PROCESSING_DELAY_MS: u64 = 3;
/// A lagging lookup hides a commit for at most this long: a few agent
/// retries' worth, so a reconciler meets the lag and can still outwait it.
pub const MAX_LOOKUP_LAG_MS: u64 = 200;
/// Latencies: at least 1 ms (the validator's floor), at most this.
pub const MAX_LATENCY_MS: u64 = 3;

/// One explored case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    pub provider: ProviderSetup,
    pub network: NetworkSetup,
    pub calls: Vec<Call>,
    pub faults: Vec<Fault>,
    /// The simulation's seed: what `chaos run --seed` replays.
    pub seed: u64,
}

/// Every case, or every case against one provider profile.
pub fn cases(profile: Option<ProviderProfile>) -> impl Strategy<Value = Case> {
    (
        vec(fault::strategy(SPACE), 0..=MAX_FAULTS),
        vec(call(), 1..=MAX_CALLS),
        provider(profile),
        network(),
        // The seed is not shrunk: a smaller seed is not a simpler schedule.
        any::<u32>().no_shrink(),
    )
        .prop_map(|(faults, calls, provider, network, seed)| {
            Case {
                provider,
                network,
                calls,
                faults,
                seed: u64::from(seed),
            }
            .normalized()
        })
}

/// The part of the fault space cases draw from.
const SPACE: Space = Space {
    calls: MAX_CALLS as u32,
    nth: MAX_NTH,
};

fn call() -> impl Strategy<Value = Call> {
    (
        prop_oneof![3 => Just(0usize), 2 => Just(1), 1 => Just(2)],
        prop_oneof![
            6 => Just(PayloadVariant::Original),
            1 => Just(PayloadVariant::Equivalent),
            1 => Just(PayloadVariant::Changed),
            1 => Just(PayloadVariant::Drifted),
        ],
        1..=MAX_ATTEMPTS,
        prop_oneof![3 => Just(1u32), 1 => 2..=MAX_CONCURRENCY],
        prop_oneof![4 => Just(1u32), 1 => 2..=MAX_SUBAGENTS],
        prop_oneof![3 => Just(Identity::Stable), 1 => Just(Identity::Replan)],
    )
        .prop_map(
            |(operation, payload, attempts, concurrency, subagents, identity)| Call {
                operation: OPERATIONS[operation].to_owned(),
                payload,
                attempts,
                concurrency,
                subagents,
                identity,
                expect: None,
                tool: None,
                decision: None,
                arguments: None,
                headers: BTreeMap::new(),
                class: None,
                impact: None,
            },
        )
}

fn provider(profile: Option<ProviderProfile>) -> impl Strategy<Value = ProviderSetup> {
    let profile = match profile {
        Some(profile) => Just(profile).boxed(),
        None => prop_oneof![
            Just(ProviderProfile::Keyed),
            Just(ProviderProfile::Lookup),
            Just(ProviderProfile::Blind),
        ]
        .boxed(),
    };
    // The contract's capabilities apart from the profile: mostly what the
    // profile always offered, sometimes a lookup that lags or none at all,
    // sometimes saved errors. `normalized` drops what a profile cannot have.
    let lookup = prop_oneof![
        4 => Just(None),
        1 => (1..=MAX_LOOKUP_LAG_MS)
            .prop_map(|lag| Some(LookupCapability::Lagging(Duration::from_millis(lag)))),
        1 => Just(Some(LookupCapability::None)),
    ];
    (
        profile,
        prop_oneof![3 => Just(0usize), 1 => Just(1), 1 => Just(2)],
        prop_oneof![3 => Just(0u64), 1 => 1..=MAX_PROCESSING_DELAY_MS],
        lookup,
        prop_oneof![3 => Just(false), 1 => Just(true)],
    )
        .prop_map(
            |(profile, retention, delay, lookup, saves_errors)| ProviderSetup {
                profile,
                retention: RETENTIONS[retention],
                processing_delay: Duration::from_millis(delay),
                lookup: lookup.unwrap_or(LookupCapability::default_for(profile)),
                saves_errors,
                declines: Default::default(),
            },
        )
}

fn network() -> impl Strategy<Value = NetworkSetup> {
    (1..=MAX_LATENCY_MS, 0..=MAX_LATENCY_MS).prop_map(|(min, spread)| NetworkSetup {
        min_latency: Duration::from_millis(min),
        max_latency: Duration::from_millis((min + spread).min(MAX_LATENCY_MS)),
    })
}

impl Case {
    /// The same case made valid by construction, so that shrinking (which
    /// deletes calls under the faults that name them) never yields a schedule
    /// the validator refuses: an `after-call` past the last call fires after
    /// the last call, and a blind provider remembers nothing, so has no retention.
    pub fn normalized(mut self) -> Case {
        let calls = self.calls.len().max(1) as u32;
        for fault in &mut self.faults {
            if let Some(Trigger::AfterCall(call) | Trigger::BeforeCall(call)) = fault.trigger_mut()
            {
                *call = (*call).clamp(1, calls);
            }
        }
        let provider = &mut self.provider;
        match provider.profile {
            ProviderProfile::Blind => {
                provider.retention = None;
                provider.lookup = LookupCapability::None;
            }
            // A lookup provider that cannot be asked is blind: keep it askable.
            ProviderProfile::Lookup if provider.lookup == LookupCapability::None => {
                provider.lookup = LookupCapability::Exact;
            }
            _ => {}
        }
        if provider.profile != ProviderProfile::Keyed {
            provider.saves_errors = false;
        }
        // A call the planner never decides again has nothing for its
        // identity to say: it is stable (the validator refuses otherwise).
        let something_re_plans = self.faults.iter().any(Fault::re_plans);
        for call in &mut self.calls {
            if call.attempts == 1 && call.subagents == 1 && !something_re_plans {
                call.identity = Identity::Stable;
            }
        }
        self
    }

    /// The case as a scenario named `name` at `path`.
    pub fn scenario(&self, name: &str, path: PathBuf, description: String) -> Scenario {
        Scenario {
            name: name.to_owned(),
            path,
            test: TestKind::Explored,
            description,
            claim: Claim {
                invariant: TestKind::Explored.default_invariant().to_owned(),
                boundary: Boundary::AcceptedRequest,
            },
            tags: Vec::new(),
            provider: self.provider.clone(),
            operations: {
                let mut names: Vec<&str> = Vec::new();
                for call in &self.calls {
                    if !names.contains(&call.operation.as_str()) {
                        names.push(&call.operation);
                    }
                }
                names.into_iter().map(OperationSetup::alone).collect()
            },
            network: self.network,
            workload: Workload {
                tool: "send_reminder".into(),
                subject_field: "invoice".into(),
                free_text_field: Some(FREE_TEXT_FIELD.into()),
                policy: Policy::Coalesce,
            },
            calls: self.calls.clone(),
            faults: self.faults.clone(),
            // Explored faults are the point: each must act.
            optional_faults: Default::default(),
            expect: Expectations {
                effects_per_operation: 1,
                effects: Default::default(),
                max_dispatches_per_operation: None,
            },
            fixture: None,
        }
    }

    /// Simpler neighbours, most promising first: each fault removed, each call
    /// removed, then every value lowered to its simplest, then one step toward
    /// it. A case none of whose neighbours still fails is 1-minimal.
    pub fn simpler(&self) -> Vec<Case> {
        let mut candidates = Vec::new();
        for index in 0..self.faults.len() {
            let mut case = self.clone();
            case.faults.remove(index);
            candidates.push(case);
        }
        if self.calls.len() > 1 {
            for index in 0..self.calls.len() {
                let mut case = self.clone();
                case.calls.remove(index);
                let removed = index as u32 + 1;
                for fault in &mut case.faults {
                    if let Some(Trigger::AfterCall(call) | Trigger::BeforeCall(call)) =
                        fault.trigger_mut()
                    {
                        if *call > removed {
                            *call -= 1;
                        }
                    }
                }
                candidates.push(case);
            }
        }
        // Operations named in order of first use: "a", then "b".
        let mut used: Vec<&str> = Vec::new();
        for call in &self.calls {
            if !used.contains(&call.operation.as_str()) {
                used.push(&call.operation);
            }
        }
        let mut renamed = self.clone();
        for call in &mut renamed.calls {
            let rank = used
                .iter()
                .position(|name| *name == call.operation)
                .unwrap_or(0);
            call.operation = OPERATIONS[rank].to_owned();
        }
        candidates.push(renamed);
        for (index, fault) in self.faults.iter().enumerate() {
            for simpler in fault.simpler() {
                let mut case = self.clone();
                case.faults[index] = simpler;
                candidates.push(case);
            }
        }
        for (index, call) in self.calls.iter().enumerate() {
            for simpler in simpler_call(call) {
                let mut case = self.clone();
                case.calls[index] = simpler;
                candidates.push(case);
            }
        }
        for provider in simpler_provider(&self.provider) {
            let mut case = self.clone();
            case.provider = provider;
            candidates.push(case);
        }
        for network in simpler_network(&self.network) {
            let mut case = self.clone();
            case.network = network;
            candidates.push(case);
        }
        let mut seen = vec![self.clone()];
        candidates
            .into_iter()
            .map(Case::normalized)
            .filter(|case| {
                let new = !seen.contains(case);
                if new {
                    seen.push(case.clone());
                }
                new
            })
            .collect()
    }
}

fn simpler_call(call: &Call) -> Vec<Call> {
    let mut simpler = Vec::new();
    if call.operation != OPERATIONS[0] {
        simpler.push(Call {
            operation: OPERATIONS[0].to_owned(),
            ..call.clone()
        });
    }
    if call.payload != PayloadVariant::Original {
        simpler.push(Call {
            payload: PayloadVariant::Original,
            ..call.clone()
        });
    }
    if call.identity != Identity::Stable {
        simpler.push(Call {
            identity: Identity::Stable,
            ..call.clone()
        });
    }
    for subagents in lower_u32(call.subagents, 1) {
        simpler.push(Call {
            subagents,
            ..call.clone()
        });
    }
    for concurrency in lower_u32(call.concurrency, 1) {
        simpler.push(Call {
            concurrency,
            ..call.clone()
        });
    }
    for attempts in lower_u32(call.attempts, 1) {
        simpler.push(Call {
            attempts,
            ..call.clone()
        });
    }
    simpler
}

fn simpler_provider(provider: &ProviderSetup) -> Vec<ProviderSetup> {
    let mut simpler = Vec::new();
    for delay in lower_ms(provider.processing_delay, 0) {
        simpler.push(ProviderSetup {
            processing_delay: delay,
            ..provider.clone()
        });
    }
    if provider.profile != ProviderProfile::Blind && provider.retention != RETENTIONS[0] {
        simpler.push(ProviderSetup {
            retention: RETENTIONS[0],
            ..provider.clone()
        });
    }
    // What the profile always offered is simpler than any other capability.
    let usual = LookupCapability::default_for(provider.profile);
    if provider.lookup != usual {
        simpler.push(ProviderSetup {
            lookup: usual,
            ..provider.clone()
        });
    }
    if provider.saves_errors {
        simpler.push(ProviderSetup {
            saves_errors: false,
            ..provider.clone()
        });
    }
    simpler
}

fn simpler_network(network: &NetworkSetup) -> Vec<NetworkSetup> {
    let mut simpler = Vec::new();
    for max in lower_ms(network.max_latency, network.min_latency.as_millis() as u64) {
        simpler.push(NetworkSetup {
            max_latency: max,
            ..*network
        });
    }
    for min in lower_ms(network.min_latency, 1) {
        simpler.push(NetworkSetup {
            min_latency: min,
            ..*network
        });
    }
    simpler
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, TestRunner};

    use super::*;

    proptest! {
        #![proptest_config(Config::with_cases(300))]

        /// Issue 5: every generated schedule is one the validator accepts, and
        /// the file written for it reads back as the same schedule.
        #[test]
        fn every_case_is_a_valid_scenario_that_round_trips(case in cases(None)) {
            let path = Path::new("reports/explored/case.toml");
            let scenario = case.scenario("case", path.to_owned(), "a case".into());
            let parsed = Scenario::parse(path, &scenario.to_toml());
            prop_assert_eq!(parsed, Ok(scenario));
        }

        #[test]
        fn simpler_neighbours_are_valid_too(case in cases(None)) {
            let path = Path::new("reports/explored/case.toml");
            for simpler in case.simpler() {
                prop_assert_ne!(&simpler, &case);
                let scenario = simpler.scenario("case", path.to_owned(), "a case".into());
                prop_assert!(Scenario::parse(path, &scenario.to_toml()).is_ok());
            }
        }
    }

    #[test]
    fn a_fixed_profile_is_kept() {
        let mut runner = TestRunner::deterministic();
        for _ in 0..50 {
            let case = cases(Some(ProviderProfile::Lookup))
                .new_tree(&mut runner)
                .unwrap()
                .current();
            assert_eq!(case.provider.profile, ProviderProfile::Lookup);
        }
    }

    /// Issue 11: explore reaches the provider's contracts, not only its
    /// profiles: lagging and absent lookups and saved errors are drawn.
    #[test]
    fn the_contracts_capabilities_are_drawn_too() {
        let mut runner = TestRunner::deterministic();
        let (mut lagging, mut no_lookup, mut saves_errors) = (0, 0, 0);
        for _ in 0..400 {
            let case = cases(Some(ProviderProfile::Keyed))
                .new_tree(&mut runner)
                .unwrap()
                .current();
            match case.provider.lookup {
                LookupCapability::Lagging(lag) => {
                    assert!(lag.as_millis() as u64 <= MAX_LOOKUP_LAG_MS);
                    lagging += 1;
                }
                LookupCapability::None => no_lookup += 1,
                LookupCapability::Exact => {}
            }
            saves_errors += u32::from(case.provider.saves_errors);
        }
        assert!(lagging > 0 && no_lookup > 0 && saves_errors > 0);
    }

    #[test]
    fn a_profile_never_gets_a_capability_it_cannot_have() {
        let mut runner = TestRunner::deterministic();
        for _ in 0..200 {
            let blind = cases(Some(ProviderProfile::Blind))
                .new_tree(&mut runner)
                .unwrap()
                .current();
            assert_eq!(blind.provider.lookup, LookupCapability::None);
            assert!(!blind.provider.saves_errors);
            let lookup = cases(Some(ProviderProfile::Lookup))
                .new_tree(&mut runner)
                .unwrap()
                .current();
            assert_ne!(lookup.provider.lookup, LookupCapability::None);
            assert!(!lookup.provider.saves_errors);
        }
    }
}
