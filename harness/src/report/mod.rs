//! Stage 5: the summary of a run, and its renderings. Every reporter reads the
//! one [`Summary`] type; each format is its own module.
//!
//! - [`table`]: the comfy-table matrix printed on the terminal;
//! - [`json`]: `report.json`, the versioned machine-readable report.

pub mod json;
pub mod table;

use serde::{Deserialize, Serialize};

use crate::check::{Finding, Liveness, OperationSummary, Status, Verdict};
use crate::exit::Exit;
use crate::runner::Seeds;
use crate::scenario::{Scenario, TestKind};
use crate::targets::ReferenceTarget;

/// Version of the JSON report's schema; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub schema_version: u32,
    pub chaos_version: String,
    pub transport: String,
    pub seeds: SeedsRun,
    pub scenarios: Vec<ScenarioMeta>,
    pub targets: Vec<TargetMeta>,
    /// One per (scenario, target), scenario-major, in the order given.
    pub cells: Vec<CellSummary>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedsRun {
    pub first: u64,
    pub count: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScenarioMeta {
    pub name: String,
    pub path: String,
    pub test: TestKind,
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetMeta {
    pub name: String,
    pub summary: String,
    pub retention: Option<String>,
    /// `sim` or `live`.
    #[serde(default = "sim_transport")]
    pub transport: String,
}

fn sim_transport() -> String {
    "sim".into()
}

impl TargetMeta {
    pub fn of(info: &chaos_kit::target::TargetInfo, transport: &str) -> TargetMeta {
        TargetMeta {
            name: info.name.clone(),
            summary: info.summary.clone(),
            retention: info
                .retention
                .map(|retention| humantime::format_duration(retention).to_string()),
            transport: transport.into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CellSummary {
    pub scenario: String,
    pub scenario_path: String,
    pub target: String,
    pub verdict: Status,
    pub safety: Status,
    pub liveness: Liveness,
    pub seeds_run: u64,
    pub seeds_failed: u64,
    pub seeds_unknown: u64,
    pub first_failing_seed: Option<u64>,
    pub first_undecided_seed: Option<u64>,
    /// The exact command that reruns the first failing (or undecided) seed.
    pub rerun: Option<String>,
    /// The reason of the first failing (or undecided) seed, one line.
    pub reason: Option<String>,
    /// The most effects the scenario allows for any one operation.
    pub effects_expected: u32,
    /// The most effects any one operation had, over all seeds.
    pub effects_observed_max: u32,
    /// Detail of the first failing or undecided seeds.
    pub failures: Vec<SeedFailure>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedFailure {
    pub seed: u64,
    pub verdict: Status,
    pub reason: String,
    pub findings: Vec<Finding>,
    pub operations: Vec<OperationSummary>,
}

impl SeedFailure {
    pub fn new(seed: u64, verdict: Verdict) -> SeedFailure {
        SeedFailure {
            seed,
            verdict: verdict.status,
            reason: verdict.reason().unwrap_or_default(),
            findings: verdict.findings,
            operations: verdict.operations,
        }
    }
}

impl CellSummary {
    pub fn new(scenario: &Scenario, target: &str, effects_expected: u32) -> CellSummary {
        CellSummary {
            scenario: scenario.name.clone(),
            scenario_path: scenario.path.display().to_string(),
            target: target.to_owned(),
            verdict: Status::Pass,
            safety: Status::Pass,
            liveness: Liveness::NotApplicable,
            seeds_run: 0,
            seeds_failed: 0,
            seeds_unknown: 0,
            first_failing_seed: None,
            first_undecided_seed: None,
            rerun: None,
            reason: None,
            effects_expected,
            effects_observed_max: 0,
            failures: Vec::new(),
        }
    }

    /// Derives the verdict, first seeds, reason and rerun command from the
    /// counts and kept failures.
    pub fn settle(&mut self) {
        self.verdict = if self.seeds_failed > 0 {
            Status::Fail
        } else if self.seeds_unknown > 0 || self.seeds_run == 0 {
            Status::Unknown
        } else {
            Status::Pass
        };
        self.first_failing_seed = self
            .failures
            .iter()
            .find(|failure| failure.verdict == Status::Fail)
            .map(|failure| failure.seed);
        self.first_undecided_seed = self
            .failures
            .iter()
            .find(|failure| failure.verdict == Status::Unknown)
            .map(|failure| failure.seed);
        let shown = self
            .failures
            .iter()
            .find(|failure| failure.verdict == Status::Fail)
            .or_else(|| self.failures.first());
        self.reason = shown.map(|failure| failure.reason.clone());
        self.rerun =
            shown.map(|failure| rerun_command(&self.scenario_path, &self.target, failure.seed));
    }
}

/// The command that replays one trial exactly.
pub fn rerun_command(scenario_path: &str, target: &str, seed: u64) -> String {
    format!("chaos run {scenario_path} --target {target} --seed {seed}")
}

impl Summary {
    pub fn new(
        scenarios: &[Scenario],
        targets: &[ReferenceTarget],
        seeds: Seeds,
        cells: Vec<CellSummary>,
    ) -> Summary {
        let metas = targets
            .iter()
            .map(|target| TargetMeta::of(&target.info, "sim"))
            .collect();
        Summary::for_targets(scenarios, metas, seeds, cells)
    }

    /// A summary of targets of any transport; its `transport` is `sim`, `live`
    /// or `sim+live`.
    pub fn for_targets(
        scenarios: &[Scenario],
        targets: Vec<TargetMeta>,
        seeds: Seeds,
        cells: Vec<CellSummary>,
    ) -> Summary {
        let (first, count) = match seeds {
            Seeds::Range { first, count } => (first, count),
            Seeds::One(seed) => (seed, 1),
        };
        let mut transports: Vec<&str> = targets
            .iter()
            .map(|target| target.transport.as_str())
            .collect();
        transports.sort_unstable_by_key(|transport| *transport != "sim");
        transports.dedup();
        Summary {
            schema_version: SCHEMA_VERSION,
            chaos_version: env!("CARGO_PKG_VERSION").to_owned(),
            transport: if transports.is_empty() {
                "sim".into()
            } else {
                transports.join("+")
            },
            seeds: SeedsRun { first, count },
            scenarios: scenarios
                .iter()
                .map(|scenario| ScenarioMeta {
                    name: scenario.name.clone(),
                    path: scenario.path.display().to_string(),
                    test: scenario.test,
                    description: scenario.description.clone(),
                })
                .collect(),
            targets,
            cells,
        }
    }

    /// The exit code this summary calls for: a failure dominates an undecided cell.
    pub fn exit(&self) -> Exit {
        if self.cells.iter().any(|cell| cell.verdict == Status::Fail) {
            Exit::InvariantViolated
        } else if self
            .cells
            .iter()
            .any(|cell| cell.verdict == Status::Unknown)
        {
            Exit::Undecided
        } else {
            Exit::Success
        }
    }

    pub fn cell(&self, scenario: &str, target: &str) -> Option<&CellSummary> {
        self.cells
            .iter()
            .find(|cell| cell.scenario == scenario && cell.target == target)
    }
}
