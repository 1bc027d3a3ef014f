//! Stage 5: the summary of a run, and its renderings. Every reporter reads the
//! one [`Summary`] type; each format is its own module.
//!
//! - [`table`]: the comfy-table matrix printed on the terminal;
//! - [`json`]: `report.json`, the versioned machine-readable report
//!   (schema: `docs/report.schema.json`);
//! - [`junit`]: `junit.xml`, one test case per (scenario, target), for CI;
//! - [`markdown`]: `summary.md`, fit for a pull-request comment;
//! - [`html`]: `report.html`, self-contained, with a timeline per failing case;
//! - [`decisions`]: the authorization lab's decision matrix (case x control
//!   variant, decisions matched n/7 beside the published figures), in the
//!   table, `summary.md`, and `authorization.md` (`--emit decisions`);
//! - [`posture`]: the posture benchmark's rates (`posture.md`, `--emit posture`);
//! - [`replan`]: the re-plan matrix and the IdempotentStore demo
//!   (`replan.md`, `--emit replan`);
//! - [`compare`]: several reports side by side, and the regressions between them;
//! - [`merge`]: shard reports of one partitioned run, combined into one.
//!
//! [`fold`] folds judged trials into the cells of a [`Summary`] as they
//! come; [`record`] is the per-seed record the detailed formats draw from;
//! [`tally`] and [`faults`] are what a cell counts over its seeds.

pub mod compare;
pub mod decisions;
pub mod faults;
pub(crate) mod fold;
pub mod html;
pub mod json;
pub mod junit;
pub mod markdown;
pub mod merge;
pub(crate) mod otlp;
pub mod posture;
pub mod record;
pub mod replan;
pub mod sarif;
pub mod table;
pub mod tally;

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::check::{Liveness, Status, Verdict};
use crate::exit::Exit;
use crate::scenario::{Boundary, Scenario, TestKind};
use crate::sweep::{Partition, Seeds, Transport, Transports, FAILURES_KEPT_PER_CELL};
use chaos_kit::target::AfterRetention;

pub use crate::sweep::Payloads;
pub use faults::{ActCount, FaultTally};
pub use record::SeedFailure;
pub use tally::{CheckCount, DispatchBin, Dispatches, NotRun};

/// Version of the JSON report's schema; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub schema_version: u32,
    pub chaos_version: String,
    pub transport: Transports,
    pub seeds: SeedsRun,
    /// The shard this report covers (`--partition K/N`); `null` for a whole run.
    pub partition: Option<Partition>,
    pub payloads: Payloads,
    /// How many non-passing seeds per cell keep their full record (besides
    /// the first failing and the first undecided seed, which always do).
    pub failures_kept_per_cell: usize,
    /// `--deny warnings`: a cell whose only findings are warnings fails.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub warnings_denied: bool,
    pub scenarios: Vec<ScenarioMeta>,
    pub targets: Vec<TargetMeta>,
    /// One per (scenario, target), scenario-major, in the order given. A shard
    /// holds only the cells it ran at least one trial of. A pairing
    /// excluded before running has no cell: it is in `excluded`.
    pub cells: Vec<CellSummary>,
    /// The (scenario, target) pairings not run because the target cannot
    /// play the scenario (its provider API, its way in, where it counts its
    /// effects), decided once per pairing before any trial, with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excluded: Vec<Exclusion>,
}

/// A pairing excluded before running: every seed would say the same, so it
/// is one line, not a cell of `unknown`s.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exclusion {
    pub scenario: String,
    pub target: String,
    pub reason: String,
}

impl Exclusion {
    /// `excluded: changed-payload x t: <why>`, one line.
    pub fn line(&self) -> String {
        format!(
            "excluded: {} x {}: {}",
            self.scenario, self.target, self.reason
        )
    }
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
    /// The release criterion the scenario states.
    #[serde(default)]
    pub invariant: String,
    /// Where its effects are counted.
    #[serde(default = "accepted_request")]
    pub boundary: Boundary,
    /// Where it sits in a threat taxonomy (`atlas:AML.T0051.001`); left
    /// out when it has none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// A posture scenario's action: what it does, and how much harm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<crate::scenario::ActionClass>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub impact: Option<crate::scenario::Impact>,
}

fn accepted_request() -> Boundary {
    Boundary::AcceptedRequest
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetMeta {
    pub name: String,
    pub summary: String,
    pub retention: Option<String>,
    /// What a retry past the retention gets, by the target's own policy.
    #[serde(default, skip_serializing_if = "is_new_operation")]
    pub after_retention: AfterRetention,
    /// `sim` or `live`. Written only for live targets, so the reports of
    /// simulated runs read as they always did.
    #[serde(default = "sim_transport", skip_serializing_if = "Transport::is_sim")]
    pub transport: Transport,
    /// A live target's agent retry budget in force. Absent for reference
    /// targets, so their reports read as they always did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentMeta>,
}

/// The live agent's retry budget, as `[agent]` in a target file sets it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentMeta {
    /// How long a call whose answer is not final is retried past its
    /// attempts; `None`: its attempts alone bound it.
    pub retry_for: Option<String>,
    /// `MIN..MAX`, the pause between attempts.
    pub backoff: String,
    /// How long one attempt waits for its answer.
    pub timeout: String,
}

impl AgentMeta {
    pub(crate) fn of(timing: &crate::plan::Timing) -> AgentMeta {
        let show = |duration| humantime::format_duration(duration).to_string();
        AgentMeta {
            retry_for: timing.retry_for.map(show),
            backoff: format!("{}..{}", show(timing.backoff_min), show(timing.backoff_max)),
            timeout: show(timing.agent_timeout),
        }
    }

    /// One line for a report.
    pub fn describe(&self) -> String {
        let past = match &self.retry_for {
            Some(retry_for) => {
                format!("retried for {retry_for} past its attempts while the answer is not final")
            }
            None => "no retry-for: its attempts alone".to_owned(),
        };
        format!(
            "each call's attempts, {past}; backoff {}; {} per attempt; Retry-After honoured",
            self.backoff, self.timeout
        )
    }
}

fn is_zero(count: &u64) -> bool {
    *count == 0
}

fn is_new_operation(policy: &AfterRetention) -> bool {
    *policy == AfterRetention::NewOperation
}

fn sim_transport() -> Transport {
    Transport::Sim
}

impl TargetMeta {
    pub fn of(info: &chaos_kit::target::TargetInfo, transport: Transport) -> TargetMeta {
        TargetMeta {
            name: info.name.clone(),
            summary: info.summary.clone(),
            retention: info
                .retention
                .map(|retention| humantime::format_duration(retention).to_string()),
            after_retention: info.after_retention,
            transport,
            agent: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellSummary {
    pub scenario: String,
    pub scenario_path: String,
    pub target: String,
    pub verdict: Status,
    pub safety: Status,
    pub liveness: Liveness,
    /// Seeds whose trial ran; a trial that never ran is counted in `not_run`.
    pub seeds_run: u64,
    pub seeds_failed: u64,
    pub seeds_unknown: u64,
    pub first_failing_seed: Option<u64>,
    #[serde(rename = "first_undecided_seed")]
    pub first_unknown_seed: Option<u64>,
    /// The exact command that reruns the first failing (or undecided) seed.
    pub rerun: Option<String>,
    /// The reason of the first failing (or undecided) seed, one line.
    pub reason: Option<String>,
    /// The most effects the scenario allows for any one operation, past the
    /// target's retention included.
    pub effects_expected: u32,
    /// The most the scenario file allows, before any retention: when
    /// `effects_expected` is more, the target's policy allowed the rest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effects_scenario: Option<u32>,
    /// The most effects any one operation had, over all seeds.
    pub effects_observed_max: u32,
    /// The most effects one intent had for each it was allowed, over all
    /// seeds: `3` is a customer charged three times for one purchase.
    #[serde(default = "one")]
    pub amplification_max: f64,
    /// The most effects one operation lacked on a seed where it was judged
    /// `missing-effect` (two real actions merged into one): the maximum in
    /// `effects X/Y` hides it, so the cell shows `, N missing`.
    #[serde(default)]
    pub effects_missing_max: u32,
    /// Every check that fired, with how many of the seeds run it fired on,
    /// most specific first: the whole story, where `reason` is one seed's.
    #[serde(default)]
    pub checks: Vec<CheckCount>,
    /// The provider's dispatches per seed run, passing seeds too.
    #[serde(default)]
    pub dispatches: Dispatches,
    /// The trials that never ran, and why; `null` when every trial ran.
    #[serde(default)]
    pub not_run: Option<NotRun>,
    /// Warnings: checks that fired on seeds without failing them (a race
    /// the provider absorbed), each with its seeds and its first seed.
    #[serde(default)]
    pub warnings: Vec<CellWarning>,
    /// Each fault the scenario declares: on how many seeds it acted, and
    /// what it did.
    #[serde(default)]
    pub faults: Vec<FaultTally>,
    /// Seeds run in which every fault that must act acted. None of them in
    /// a cell with such faults: the cell is vacuous, nothing was tested.
    #[serde(default)]
    pub seeds_all_faults_acted: u64,
    /// An MCP target: each tool the cell called, as its server declared it
    /// in `tools/list` (over every seed run, once each).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub declared_tools: Vec<crate::history::DeclaredTool>,
    /// An MCP target: the `tools/call` requests chaos cancelled with
    /// `notifications/cancelled` when the agent's timeout passed, over every
    /// seed run.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub mcp_cancelled: u64,
    /// An MCP target: the most sessions the attempts of one seed went on
    /// (1 when they shared one; each attempt's own with `sessions =
    /// "per-attempt"`, and a new one after a restart).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub mcp_sessions_max: u64,
    /// An MCP target: what resuming the streams cut before their result
    /// came to (`replayed`, `not-replayed`, `not-offered`), counted over
    /// every seed run.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mcp_resumed: BTreeMap<String, u64>,
    /// The full record of the first non-passing seeds, in seed order: the
    /// first `failures_kept_per_cell`, plus the first failing and the first
    /// undecided one when they come later.
    pub failures: Vec<SeedFailure>,
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
            first_unknown_seed: None,
            rerun: None,
            reason: None,
            effects_expected,
            // Under `policy = "allow"` every tool call is owed its own
            // effect: the file states no one figure a retention could move.
            effects_scenario: (scenario.workload.policy == crate::scenario::Policy::Coalesce)
                .then_some(effects_expected),
            effects_observed_max: 0,
            amplification_max: 1.0,
            effects_missing_max: 0,
            checks: Vec::new(),
            dispatches: Dispatches::default(),
            not_run: None,
            warnings: Vec::new(),
            faults: faults::declared(scenario),
            seeds_all_faults_acted: 0,
            declared_tools: Vec::new(),
            mcp_cancelled: 0,
            mcp_sessions_max: 0,
            mcp_resumed: BTreeMap::new(),
            failures: Vec::new(),
        }
    }

    /// Folds in what an MCP server declared in one seed's run.
    pub(crate) fn declare(&mut self, tools: &[crate::history::DeclaredTool]) {
        for tool in tools {
            if !self.declared_tools.contains(tool) {
                self.declared_tools.push(tool.clone());
            }
        }
        self.declared_tools.sort();
    }

    /// One line per declared fault: on how many seeds it acted, and what it did.
    pub fn faults_lines(&self) -> Vec<String> {
        (self.faults.iter())
            .map(|fault| fault.text(self.seeds_run))
            .collect()
    }

    /// Whether this cell fails only because `--deny warnings` made its
    /// warnings fail.
    pub fn warnings_denied(&self) -> bool {
        self.verdict == Status::Fail && self.seeds_failed == 0 && !self.warnings.is_empty()
    }

    /// Makes the cell's warnings fail it (`--deny warnings`), the way clippy
    /// does: its reason and rerun become its first warning's.
    pub fn deny_warnings(&mut self) {
        if self.verdict == Status::Fail || self.warnings.is_empty() {
            return;
        }
        let first = &self.warnings[0];
        self.verdict = Status::Fail;
        self.first_failing_seed = Some(first.first_seed);
        self.reason = Some(format!("{} (denied): {}", first.check, first.message));
        self.rerun = Some(format!("{} --deny warnings", first.rerun));
    }

    /// Whether no seed run had all its faults act: nothing was tested.
    pub fn vacuous(&self) -> bool {
        self.seeds_run > 0
            && self.seeds_all_faults_acted == 0
            && self.faults.iter().any(|fault| !fault.optional)
    }

    /// Counts one judged seed whose trial ran and made `dispatches`, with
    /// the faults' `acts` (neither known when the driver itself failed).
    /// Its detail is kept apart, by [`Self::keep`].
    pub fn add(
        &mut self,
        verdict: &Verdict,
        dispatches: Option<u32>,
        acts: Option<&[crate::history::FaultEvent]>,
    ) {
        self.seeds_run += 1;
        if let Some(dispatches) = dispatches {
            self.dispatches.add(dispatches);
        }
        if acts.is_some_and(|acts| faults::count_seed(&mut self.faults, acts)) {
            self.seeds_all_faults_acted += 1;
        }
        let checks = (verdict.findings.iter())
            .map(|finding| finding.check)
            .filter(|check| !check.is_warning());
        tally::count_checks(&mut self.checks, checks.collect());
        let most_effects = verdict
            .operations
            .iter()
            .map(|operation| operation.effects)
            .max()
            .unwrap_or(0);
        self.effects_observed_max = self.effects_observed_max.max(most_effects);
        let amplification = verdict
            .operations
            .iter()
            .map(|operation| {
                f64::from(operation.effects) / f64::from(operation.expected_effects_max.max(1))
            })
            .fold(1.0, f64::max);
        self.amplification_max = self.amplification_max.max(amplification);
        let abandoned = (verdict.findings.iter())
            .any(|finding| finding.check == crate::check::Check::MissingEffect);
        if abandoned {
            let missing = (verdict.operations.iter())
                .map(|operation| {
                    operation
                        .expected_effects_min
                        .saturating_sub(operation.effects)
                })
                .max()
                .unwrap_or(0);
            self.effects_missing_max = self.effects_missing_max.max(missing);
        }
        // Calls past the target's declared retention may add effects: show the
        // most this cell ever allowed, not only the scenario's base expectation.
        let most_allowed = verdict
            .operations
            .iter()
            .map(|operation| operation.expected_effects_max)
            .max()
            .unwrap_or(0);
        self.effects_expected = self.effects_expected.max(most_allowed);
        match verdict.status {
            Status::Pass => {}
            Status::Unknown => self.seeds_unknown += 1,
            Status::Fail => self.seeds_failed += 1,
        }
        self.safety = self.safety.max(verdict.safety);
        self.liveness = self.liveness.max(verdict.liveness);
    }

    /// Counts the warnings of `seed`'s verdict; `rerun` replays the seed.
    pub(crate) fn warn(
        &mut self,
        seed: u64,
        first_seed: u64,
        verdict: &Verdict,
        rerun: impl Fn() -> String,
    ) {
        for finding in verdict.warnings() {
            let warning = CellWarning {
                check: finding.check,
                seeds: 1,
                first_seed: seed,
                message: finding.message.clone(),
                rerun: rerun(),
            };
            CellWarning::absorb(&mut self.warnings, warning, first_seed);
        }
    }

    /// Counts one seed whose trial never ran, for `reason`: it observed
    /// nothing, so neither its effects nor its checks are counted, and the
    /// cell cannot pass.
    pub fn add_not_run(&mut self, seed: u64, reason: &str, first_seed: u64) {
        let not_run = NotRun {
            seeds: 1,
            first_seed: seed,
            reason: reason.to_owned(),
        };
        NotRun::absorb(&mut self.not_run, not_run, first_seed);
        self.safety = self.safety.max(Status::Unknown);
        self.liveness = self.liveness.max(Liveness::Unknown);
    }

    /// Whether the detail of a non-passing `seed` would be kept; lets a runner
    /// skip building records that would be dropped. `first_seed` orders seeds.
    pub fn wants(&self, seed: u64, status: Status, first_seed: u64, limit: usize) -> bool {
        let order = seed.wrapping_sub(first_seed);
        let earlier = |failure: &&SeedFailure| failure.seed.wrapping_sub(first_seed) < order;
        self.failures.iter().filter(earlier).count() < limit
            || !self
                .failures
                .iter()
                .filter(earlier)
                .any(|failure| failure.verdict == status)
    }

    /// Keeps the detail of a non-passing seed if it is among the first `limit`,
    /// or the first failing or first undecided one. Seeds may arrive in any
    /// order (trials run in parallel, shards merge in any order): what is kept
    /// depends only on the set of seeds seen.
    pub fn keep(&mut self, failure: SeedFailure, first_seed: u64, limit: usize) {
        if self.failures.iter().any(|kept| kept.seed == failure.seed) {
            return;
        }
        self.failures.push(failure);
        self.failures
            .sort_by_key(|failure| failure.seed.wrapping_sub(first_seed));
        let first_failing = self
            .failures
            .iter()
            .position(|failure| failure.verdict == Status::Fail);
        let first_undecided = self
            .failures
            .iter()
            .position(|failure| failure.verdict == Status::Unknown);
        let mut index = 0;
        self.failures.retain(|_| {
            let kept =
                index < limit || Some(index) == first_failing || Some(index) == first_undecided;
            index += 1;
            kept
        });
    }

    /// Folds in the same cell of another shard of the same run.
    pub fn absorb(&mut self, other: CellSummary, first_seed: u64, limit: usize) {
        self.seeds_run += other.seeds_run;
        self.seeds_failed += other.seeds_failed;
        self.seeds_unknown += other.seeds_unknown;
        self.effects_expected = self.effects_expected.max(other.effects_expected);
        self.effects_scenario = self.effects_scenario.max(other.effects_scenario);
        self.effects_observed_max = self.effects_observed_max.max(other.effects_observed_max);
        self.amplification_max = self.amplification_max.max(other.amplification_max);
        self.effects_missing_max = self.effects_missing_max.max(other.effects_missing_max);
        tally::absorb_checks(&mut self.checks, other.checks);
        self.dispatches.absorb(other.dispatches);
        faults::absorb(&mut self.faults, other.faults);
        for warning in other.warnings {
            CellWarning::absorb(&mut self.warnings, warning, first_seed);
        }
        self.seeds_all_faults_acted += other.seeds_all_faults_acted;
        self.declare(&other.declared_tools);
        self.mcp_cancelled += other.mcp_cancelled;
        self.mcp_sessions_max = self.mcp_sessions_max.max(other.mcp_sessions_max);
        for (resumed, count) in other.mcp_resumed {
            *self.mcp_resumed.entry(resumed).or_default() += count;
        }
        if let Some(not_run) = other.not_run {
            NotRun::absorb(&mut self.not_run, not_run, first_seed);
        }
        self.safety = self.safety.max(other.safety);
        self.liveness = self.liveness.max(other.liveness);
        for failure in other.failures {
            self.keep(failure, first_seed, limit);
        }
        self.settle();
    }

    /// Derives the verdict, first seeds, reason and rerun command from the
    /// counts and kept failures.
    pub fn settle(&mut self) {
        self.verdict = if self.seeds_failed > 0 {
            Status::Fail
        } else if self.seeds_unknown > 0 || self.seeds_run == 0 || self.not_run.is_some() {
            Status::Unknown
        } else {
            Status::Pass
        };
        self.first_failing_seed = self
            .failures
            .iter()
            .find(|failure| failure.verdict == Status::Fail)
            .map(|failure| failure.seed);
        self.first_unknown_seed = self
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
        // The seed's own command: it names the target as the run did (a live
        // target file may have been given by its path).
        self.rerun = shown.map(|failure| failure.rerun.clone());
    }
}

impl Summary {
    /// Each tool an MCP target declared, once per target, in target order:
    /// what `annotation-contradicted` held to the ledger.
    pub fn declared_tools(&self) -> Vec<(&str, &crate::history::DeclaredTool)> {
        let mut declared: Vec<(&str, &crate::history::DeclaredTool)> = Vec::new();
        for target in &self.targets {
            for cell in (self.cells.iter()).filter(|cell| cell.target == target.name) {
                for tool in &cell.declared_tools {
                    if !declared.contains(&(target.name.as_str(), tool)) {
                        declared.push((target.name.as_str(), tool));
                    }
                }
            }
        }
        declared
    }

    /// A summary of targets of any transport; its `transport` is `sim`, `live`
    /// or `sim+live`.
    pub fn for_targets(
        scenarios: &[Scenario],
        targets: Vec<TargetMeta>,
        seeds: Seeds,
        cells: Vec<CellSummary>,
    ) -> Summary {
        let (first, count) = seeds.first_and_count();
        Summary {
            schema_version: SCHEMA_VERSION,
            chaos_version: env!("CARGO_PKG_VERSION").to_owned(),
            transport: Transports::of(targets.iter().map(|target| target.transport)),
            seeds: SeedsRun { first, count },
            partition: None,
            payloads: Payloads::Redacted,
            failures_kept_per_cell: FAILURES_KEPT_PER_CELL,
            warnings_denied: false,
            scenarios: scenarios
                .iter()
                .map(|scenario| ScenarioMeta {
                    name: scenario.name.clone(),
                    path: scenario.path.display().to_string(),
                    test: scenario.test,
                    description: scenario.description.clone(),
                    invariant: scenario.claim.invariant.clone(),
                    boundary: scenario.claim.boundary,
                    tags: scenario.tags.clone(),
                    class: scenario.calls.iter().find_map(|call| call.class),
                    impact: scenario.calls.iter().find_map(|call| call.impact),
                })
                .collect(),
            targets,
            cells,
            excluded: Vec::new(),
        }
    }

    /// `--deny warnings`: every cell's warnings fail it.
    pub fn deny_warnings(&mut self) {
        self.warnings_denied = true;
        for cell in &mut self.cells {
            cell.deny_warnings();
        }
    }

    /// The exit code this summary calls for: a failure dominates an undecided
    /// cell; a run whose every pairing was excluded tested nothing, which is
    /// no success (3).
    pub fn exit(&self) -> Exit {
        if self.nothing_tested() {
            return Exit::Unknown;
        }
        if self.cells.iter().any(|cell| cell.verdict == Status::Fail) {
            Exit::InvariantViolated
        } else if self
            .cells
            .iter()
            .any(|cell| cell.verdict == Status::Unknown)
        {
            Exit::Unknown
        } else {
            Exit::Success
        }
    }

    /// Whether every pairing of the run was excluded before running.
    pub fn nothing_tested(&self) -> bool {
        self.cells.is_empty() && !self.excluded.is_empty()
    }

    /// Why `scenario` was not run against `target`, if it was excluded.
    pub fn exclusion(&self, scenario: &str, target: &str) -> Option<&Exclusion> {
        (self.excluded.iter())
            .find(|excluded| excluded.scenario == scenario && excluded.target == target)
    }

    pub fn scenario(&self, name: &str) -> Option<&ScenarioMeta> {
        self.scenarios.iter().find(|scenario| scenario.name == name)
    }

    pub fn target(&self, name: &str) -> Option<&TargetMeta> {
        self.targets.iter().find(|target| target.name == name)
    }

    /// Every cell whose expectation moved past the scenario file's, with why.
    pub fn expectation_notes(&self) -> Vec<String> {
        self.cells
            .iter()
            .filter_map(|cell| cell.expectation_note(self.target(&cell.target)?))
            .collect()
    }

    pub fn cell(&self, scenario: &str, target: &str) -> Option<&CellSummary> {
        self.cells
            .iter()
            .find(|cell| cell.scenario == scenario && cell.target == target)
    }

    /// How many cells passed, failed and could not be decided.
    pub fn totals(&self) -> Totals {
        let count = |status| {
            self.cells
                .iter()
                .filter(|cell| cell.verdict == status)
                .count()
        };
        Totals {
            cells: self.cells.len(),
            passed: count(Status::Pass),
            failed: count(Status::Fail),
            unknown: count(Status::Unknown),
        }
    }

    /// One line saying which seeds ran, for headers.
    pub fn seeds_label(&self) -> String {
        let SeedsRun { first, count } = self.seeds;
        let seeds = if count == 1 {
            format!("seed {first}")
        } else {
            format!(
                "seeds {first}..={} ({count} per cell)",
                first.wrapping_add(count.saturating_sub(1))
            )
        };
        match self.partition {
            Some(partition) => format!("{seeds}, shard {partition}"),
            None => seeds,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    pub cells: usize,
    pub passed: usize,
    pub failed: usize,
    pub unknown: usize,
}

fn one() -> f64 {
    1.0
}

/// How a cell's effects read: `effects 3/1 ×3` is one intent charged three
/// times (the amplification shows only when an intent had more than allowed).
pub fn effects_text(observed: u32, allowed: u32, amplification: f64) -> String {
    if amplification > 1.0 {
        let times = (amplification * 10.0).round() / 10.0;
        format!("effects {observed}/{allowed} ×{times}")
    } else {
        format!("effects {observed}/{allowed}")
    }
}

impl CellSummary {
    /// This cell's effects, as [`effects_text`] writes them.
    pub fn effects_text(&self) -> String {
        let text = effects_text(
            self.effects_observed_max,
            self.effects_expected,
            self.amplification_max,
        );
        match self.effects_missing_max {
            0 => text,
            missing => format!("{text}, {missing} missing"),
        }
    }

    /// Whether no trial of the cell ran: then it observed nothing, and its
    /// effects and seeds would read as if it had.
    pub fn never_ran(&self) -> bool {
        self.seeds_run == 0 && self.not_run.is_some()
    }

    /// `3/40 seeds` (did not pass / ran), with `, 2 not run` when some never ran.
    pub fn seeds_text(&self) -> String {
        let mut text = format!(
            "{}/{} seeds",
            self.seeds_failed + self.seeds_unknown,
            self.seeds_run
        );
        if let Some(not_run) = &self.not_run {
            text.push_str(&format!(", {} not run", not_run.seeds));
        }
        text
    }

    /// What the cell observed, in the matrix: `not run: <reason>` when no
    /// trial ran, else its effects and its seeds.
    pub fn observed(&self) -> Vec<String> {
        match &self.not_run {
            Some(not_run) if self.seeds_run == 0 => vec![not_run.text()],
            _ => vec![self.effects_text(), self.seeds_text()],
        }
    }

    /// `duplicate-effect 29/40, stale-applied 40/40`: every check that fired.
    pub fn checks_text(&self) -> String {
        tally::checks_text(&self.checks, self.seeds_run)
    }

    /// One line on why the cell did not pass: every check that fired with
    /// its seeds when there are several (the first seed's reason alone hid
    /// the others), the reason when one check says it all, or why nothing ran.
    pub fn headline(&self) -> String {
        if self.never_ran() {
            return self.not_run.as_ref().map(NotRun::text).unwrap_or_default();
        }
        let mut line = if self.checks.len() > 1 {
            self.checks_text()
        } else {
            self.reason
                .clone()
                .unwrap_or_else(|| "no reason recorded".into())
        };
        if let Some(not_run) = &self.not_run {
            line.push_str(&format!("; {} seed(s) {}", not_run.seeds, not_run.text()));
        }
        line
    }
}

impl CellSummary {
    /// Why the cell allows more effects than its scenario file says, if it
    /// does: the target's declared retention was crossed, and its policy
    /// lets a retry past it be a new operation.
    pub fn expectation_note(&self, target: &TargetMeta) -> Option<String> {
        let scenario = self.effects_scenario?;
        let more = self
            .effects_expected
            .checked_sub(scenario)
            .filter(|more| *more > 0)?;
        let retention = match target.retention.as_deref() {
            Some(retention) => format!("declared {retention} retention"),
            None => "declared retention".to_owned(),
        };
        Some(format!(
            "{} x {}: the scenario allows {scenario} effect(s) per operation; past the target's {retention} {more} more allowed by its policy {}",
            self.scenario, self.target, target.after_retention
        ))
    }
}

/// The words a verdict is shown with: `FAIL (stuck)` when only liveness failed.
pub fn verdict_label(cell: &CellSummary) -> String {
    let label = match (cell.verdict, cell.liveness, cell.safety) {
        (Status::Fail, _, _) if cell.warnings_denied() => "FAIL (warnings denied)",
        (Status::Fail, Liveness::Fail, Status::Pass) => "FAIL (stuck)",
        (Status::Fail, _, _) => "FAIL",
        (Status::Unknown, _, _) if cell.vacuous() => "UNKNOWN (vacuous)",
        (Status::Unknown, _, _) => "UNKNOWN",
        (Status::Pass, _, _) => "pass",
    };
    // What a pass hides; a failure says more already.
    match cell.warnings.len() {
        _ if cell.verdict != Status::Pass => label.to_owned(),
        0 => label.to_owned(),
        1 => format!("{label} (1 warning)"),
        many => format!("{label} ({many} warnings)"),
    }
}

/// A warning over a cell's seeds: a check that fired without failing them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CellWarning {
    pub check: crate::check::Check,
    /// Of the seeds run, how many it fired on.
    pub seeds: u64,
    /// The first of them, in seed order, with its message and rerun command.
    pub first_seed: u64,
    pub message: String,
    pub rerun: String,
}

impl CellWarning {
    /// Folds `warning` in; the first seed's message is kept, whatever order
    /// seeds (or shards) come in.
    fn absorb(warnings: &mut Vec<CellWarning>, warning: CellWarning, first_seed: u64) {
        let Some(kept) = (warnings.iter_mut()).find(|kept| kept.check == warning.check) else {
            warnings.push(warning);
            warnings.sort_by_key(|warning| warning.check);
            return;
        };
        kept.seeds += warning.seeds;
        if tally::earlier(warning.first_seed, kept.first_seed, first_seed) {
            kept.first_seed = warning.first_seed;
            kept.message = warning.message;
            kept.rerun = warning.rerun;
        }
    }

    /// `race-absorbed-by-provider on 14/20 seeds`.
    pub fn text(&self, seeds_run: u64) -> String {
        format!("{} on {}/{seeds_run} seeds", self.check, self.seeds)
    }
}

/// The files a run writes into its `--out` folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Format {
    Json,
    Junit,
    Markdown,
    Html,
    /// The authorization lab's write-up, `authorization.md`.
    Decisions,
    /// The posture benchmark's write-up, `posture.md`.
    Posture,
    /// The re-plan matrix and the IdempotentStore demo, `replan.md`.
    Replan,
    /// SARIF 2.1.0 for code scanning, `report.sarif`.
    Sarif,
}

impl Format {
    pub const ALL: [Format; 8] = [
        Format::Json,
        Format::Junit,
        Format::Markdown,
        Format::Html,
        Format::Decisions,
        Format::Posture,
        Format::Replan,
        Format::Sarif,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::Junit => "junit",
            Format::Markdown => "markdown",
            Format::Html => "html",
            Format::Decisions => "decisions",
            Format::Posture => "posture",
            Format::Replan => "replan",
            Format::Sarif => "sarif",
        }
    }

    pub fn file_name(self) -> &'static str {
        match self {
            Format::Json => "report.json",
            Format::Junit => "junit.xml",
            Format::Markdown => "summary.md",
            Format::Html => "report.html",
            Format::Decisions => "authorization.md",
            Format::Posture => "posture.md",
            Format::Replan => "replan.md",
            Format::Sarif => "report.sarif",
        }
    }

    pub fn render(self, summary: &Summary) -> String {
        match self {
            Format::Json => json::render(summary),
            Format::Junit => junit::render(summary),
            Format::Markdown => markdown::render(summary),
            Format::Html => html::render(summary),
            Format::Decisions => decisions::render_document(summary),
            Format::Posture => posture::render_document(summary),
            Format::Replan => replan::render_document(summary),
            Format::Sarif => sarif::render(summary),
        }
    }
}

impl std::str::FromStr for Format {
    type Err = String;

    fn from_str(text: &str) -> Result<Format, String> {
        Format::ALL
            .into_iter()
            .find(|format| format.name() == text)
            .ok_or_else(|| {
                let choices: Vec<&str> = Format::ALL.iter().map(|format| format.name()).collect();
                format!(
                    "unknown report format '{text}'. Choose from: {}",
                    choices.join(", ")
                )
            })
    }
}

/// Writes `formats` into `dir`. Everything is rendered before anything is
/// written, and each file appears whole or not at all.
pub fn write(summary: &Summary, dir: &Path, formats: &[Format]) -> io::Result<Vec<PathBuf>> {
    let rendered: Vec<(PathBuf, String)> = formats
        .iter()
        .map(|format| (dir.join(format.file_name()), format.render(summary)))
        .collect();
    rendered
        .iter()
        .map(|(path, text)| crate::fs::write_atomically(path, text.as_bytes()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{Check, Verdict};

    fn failure(seed: u64, status: Status) -> SeedFailure {
        let mut verdict = Verdict::unknown(format!("seed {seed}"));
        verdict.status = status;
        SeedFailure::new(
            seed,
            verdict,
            format!("rerun {seed}"),
            None,
            Payloads::Redacted,
        )
    }

    fn kept(order: &[u64], limit: usize) -> Vec<u64> {
        let scenario = Scenario::parse(
            Path::new("scenarios/x.toml"),
            "test = \"lost-response\"\ndescription = \"x\"\n[provider]\nprofile = \"keyed\"\n[[call]]\noperation = \"a\"\n",
        )
        .unwrap();
        let mut cell = CellSummary::new(&scenario, "t", 1);
        // Seeds 10 and 11 are undecided; 15 is the first failing one.
        for &seed in order {
            let status = if seed < 12 {
                Status::Unknown
            } else {
                Status::Fail
            };
            if cell.wants(seed, status, 10, limit) {
                cell.keep(failure(seed, status), 10, limit);
            }
        }
        cell.settle();
        assert_eq!(cell.first_failing_seed, Some(12));
        cell.failures.iter().map(|failure| failure.seed).collect()
    }

    fn verdict(status: Status, checks: &[Check]) -> Verdict {
        let mut verdict = Verdict::unknown(String::new());
        verdict.status = status;
        verdict.findings = checks
            .iter()
            .map(|&check| crate::check::Finding {
                check,
                operation: None,
                message: format!("{check} happened"),
            })
            .collect();
        verdict
    }

    fn cell() -> CellSummary {
        let scenario = Scenario::parse(
            Path::new("scenarios/x.toml"),
            "test = \"lost-response\"\ndescription = \"x\"\n[provider]\nprofile = \"keyed\"\n[[call]]\noperation = \"a\"\n",
        )
        .unwrap();
        CellSummary::new(&scenario, "t", 1)
    }

    /// Issue 14, item 5: with several checks firing, the headline says each
    /// with its seeds, not the first seed's reason alone; passing seeds count
    /// their dispatches too.
    #[test]
    fn a_cell_tells_every_check_and_the_dispatches_of_every_seed() {
        let mut cell = cell();
        let seeds = [
            (
                Status::Fail,
                vec![Check::StaleApplied, Check::DuplicateEffect],
                2,
            ),
            (Status::Fail, vec![Check::StaleApplied], 1),
            (Status::Pass, vec![], 1),
            (
                Status::Fail,
                vec![Check::StaleApplied, Check::DuplicateEffect],
                2,
            ),
        ];
        for (seed, (status, checks, dispatches)) in seeds.into_iter().enumerate() {
            let verdict = verdict(status, &checks);
            cell.add(&verdict, Some(dispatches), None);
            if status != Status::Pass {
                cell.keep(
                    SeedFailure::new(
                        seed as u64,
                        verdict,
                        "rerun".into(),
                        None,
                        Payloads::Redacted,
                    ),
                    0,
                    5,
                );
            }
        }
        cell.settle();
        assert_eq!(cell.verdict, Status::Fail);
        assert_eq!(cell.headline(), "stale-applied 3/4, duplicate-effect 2/4");
        assert_eq!(
            cell.reason.as_deref(),
            Some("stale-applied: stale-applied happened")
        );
        assert_eq!(
            cell.dispatches.text().unwrap(),
            "1..2 (1: 2 seeds, 2: 2 seeds)"
        );

        // One check: its reason says it all.
        let mut single = self::cell();
        let verdict = verdict(Status::Fail, &[Check::DuplicateEffect]);
        single.add(&verdict, Some(2), None);
        single.keep(
            SeedFailure::new(0, verdict, "rerun".into(), None, Payloads::Redacted),
            0,
            5,
        );
        single.settle();
        assert_eq!(
            single.headline(),
            "duplicate-effect: duplicate-effect happened"
        );
        assert_eq!(single.checks_text(), "duplicate-effect 1/1");
    }

    /// Issue 14, item 6: a cell whose trials never ran says so, counts no
    /// seed as run, and cannot pass; safety is not claimed either.
    #[test]
    fn a_cell_that_never_ran_says_not_run_and_why() {
        let mut cell = cell();
        cell.add_not_run(0, "target 't' did not answer GET /healthz\nits stderr", 0);
        cell.settle();
        assert_eq!(cell.seeds_run, 0);
        assert_eq!(cell.verdict, Status::Unknown);
        assert_eq!(cell.safety, Status::Unknown);
        assert!(cell.never_ran());
        assert_eq!(
            cell.observed(),
            ["not run: target 't' did not answer GET /healthz"]
        );
        assert_eq!(
            cell.headline(),
            "not run: target 't' did not answer GET /healthz"
        );

        // Some seeds ran before the rest could not: both are said.
        let mut partly = self::cell();
        partly.add(&verdict(Status::Pass, &[]), Some(1), None);
        partly.add_not_run(1, "exited before it was ready", 0);
        partly.settle();
        assert_eq!(partly.verdict, Status::Unknown);
        assert_eq!(partly.observed(), ["effects 0/1", "0/1 seeds, 1 not run"]);
    }

    /// Issue #4, item 5: which failing seeds keep their record depends only on
    /// the seeds seen, never on the order they finished in (threads, shards);
    /// and the first failing seed is kept even past the limit.
    #[test]
    fn kept_failures_do_not_depend_on_arrival_order() {
        let ascending = [10, 11, 12, 13, 14, 15];
        let shuffled = [14, 12, 15, 10, 13, 11];
        assert_eq!(kept(&ascending, 5), [10, 11, 12, 13, 14]);
        assert_eq!(kept(&shuffled, 5), [10, 11, 12, 13, 14]);
        assert_eq!(kept(&ascending, 1), [10, 12]);
        assert_eq!(kept(&shuffled, 1), [10, 12]);
        assert_eq!(kept(&shuffled, 0), [10, 12]);
    }
}
