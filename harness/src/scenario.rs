//! Stage 1: scenario files. Strict TOML in, a validated [`Scenario`] out.
//!
//! Every key is checked (`deny_unknown_fields`), every enum value too, and every
//! error names the file, the line, and what would have been accepted.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use chaos_kit::protocol::{Outcome, ProviderProfile};
use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::fault::{Fault, Trigger};
use crate::input::{self, FileError};

/// Which of the six tests (or an explored schedule) a scenario belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TestKind {
    LostResponse,
    ConcurrentAttempts,
    ChangedPayload,
    WorkerRestart,
    ExpiredHistory,
    RevokedPermission,
    /// Written by `chaos explore`.
    Explored,
}

/// The arguments an attempt carries, relative to the operation's approved payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PayloadVariant {
    /// The payload the operation was approved with.
    Original,
    /// Same subject, different recipient: a different action under the same key.
    Changed,
    /// The original with keys reordered and whitespace added: the same action.
    Equivalent,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scenario {
    /// The file stem, e.g. `lost-response-keyed`.
    pub name: String,
    pub path: PathBuf,
    pub test: TestKind,
    pub description: String,
    pub provider: ProviderSetup,
    pub network: NetworkSetup,
    pub workload: Workload,
    pub calls: Vec<Call>,
    pub faults: Vec<Fault>,
    pub expect: Expectations,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProviderSetup {
    pub profile: ProviderProfile,
    /// How long the provider remembers keys (keyed) or receipts (lookup).
    pub retention: Option<Duration>,
    /// Time the provider spends before committing, to widen races.
    pub processing_delay: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NetworkSetup {
    pub min_latency: Duration,
    pub max_latency: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Workload {
    pub tool: String,
    /// The argument that names the business object; the provider attributes
    /// every effect to an operation by it.
    pub subject_field: String,
}

/// One step of the agent: attempts of one logical operation, retried until a
/// definitive answer or until the budget is spent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Call {
    pub operation: String,
    pub payload: PayloadVariant,
    /// Attempts per worker, the retry budget.
    pub attempts: u32,
    /// Workers released together on the same operation.
    pub concurrency: u32,
    /// The definitive outcomes this call may end with; `None` accepts any that
    /// the universal checks accept.
    pub expect: Option<BTreeSet<Outcome>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Expectations {
    pub effects_per_operation: u32,
    /// Per-operation overrides of `effects_per_operation`.
    pub effects: BTreeMap<String, u32>,
    pub max_dispatches_per_operation: Option<u32>,
}

impl Scenario {
    /// Operation names in order of first use.
    pub fn operations(&self) -> Vec<&str> {
        let mut seen = Vec::new();
        for call in &self.calls {
            if !seen.contains(&call.operation.as_str()) {
                seen.push(call.operation.as_str());
            }
        }
        seen
    }

    pub fn expected_effects(&self, operation: &str) -> u32 {
        self.expect
            .effects
            .get(operation)
            .copied()
            .unwrap_or(self.expect.effects_per_operation)
    }

    /// Parses and validates `text` as the scenario at `path`.
    pub fn parse(path: &Path, text: &str) -> Result<Scenario, ScenarioError> {
        let file: ScenarioFile = input::parse(path, text)?;
        file.validate(path, text)
    }

    /// The scenario as a file: every key written out, so that [`Scenario::parse`]
    /// of the text, at this scenario's path, gives back an equal scenario.
    pub fn to_toml(&self) -> String {
        let nowhere = || 0..0;
        let file = ScenarioFile {
            test: self.test,
            description: self.description.clone(),
            provider: ProviderFile {
                profile: self.provider.profile,
                retention: self.provider.retention,
                processing_delay: Some(self.provider.processing_delay),
            },
            network: NetworkFile {
                min_latency: self.network.min_latency,
                max_latency: self.network.max_latency,
            },
            workload: WorkloadFile {
                tool: self.workload.tool.clone(),
                subject_field: self.workload.subject_field.clone(),
            },
            call: self
                .calls
                .iter()
                .map(|call| {
                    Spanned::new(
                        nowhere(),
                        CallFile {
                            operation: call.operation.clone(),
                            payload: call.payload,
                            attempts: call.attempts,
                            concurrency: call.concurrency,
                            expect: call.expect.clone(),
                        },
                    )
                })
                .collect(),
            fault: self
                .faults
                .iter()
                .map(|fault| Spanned::new(nowhere(), fault.clone()))
                .collect(),
            expect: Some(Spanned::new(
                nowhere(),
                ExpectFile {
                    effects_per_operation: self.expect.effects_per_operation,
                    effects: self.expect.effects.clone(),
                    max_dispatches_per_operation: self.expect.max_dispatches_per_operation,
                },
            )),
        };
        toml::to_string(&file).expect("a scenario always serialises to TOML")
    }

    /// Reads, parses and validates the scenario file at `path`.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        Scenario::parse(path, &input::read(path, "scenario file")?)
    }
}

/// A scenario that could not be used, with where and why.
pub type ScenarioError = FileError;

// ---- the file format -------------------------------------------------------

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct ScenarioFile {
    test: TestKind,
    description: String,
    provider: ProviderFile,
    #[serde(default)]
    network: NetworkFile,
    #[serde(default)]
    workload: WorkloadFile,
    #[serde(default)]
    call: Vec<Spanned<CallFile>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    fault: Vec<Spanned<Fault>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expect: Option<Spanned<ExpectFile>>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct ProviderFile {
    profile: ProviderProfile,
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    retention: Option<Duration>,
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    processing_delay: Option<Duration>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct NetworkFile {
    #[serde(default = "default_min_latency", with = "humantime_serde")]
    min_latency: Duration,
    #[serde(default = "default_max_latency", with = "humantime_serde")]
    max_latency: Duration,
}

impl Default for NetworkFile {
    fn default() -> Self {
        NetworkFile {
            min_latency: default_min_latency(),
            max_latency: default_max_latency(),
        }
    }
}

fn default_min_latency() -> Duration {
    Duration::from_millis(1)
}

fn default_max_latency() -> Duration {
    Duration::from_millis(2)
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct WorkloadFile {
    #[serde(default = "default_tool")]
    tool: String,
    #[serde(default = "default_subject_field")]
    subject_field: String,
}

impl Default for WorkloadFile {
    fn default() -> Self {
        WorkloadFile {
            tool: default_tool(),
            subject_field: default_subject_field(),
        }
    }
}

fn default_tool() -> String {
    "send_reminder".into()
}

fn default_subject_field() -> String {
    "invoice".into()
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct CallFile {
    operation: String,
    #[serde(default = "default_payload")]
    payload: PayloadVariant,
    #[serde(default = "default_attempts")]
    attempts: u32,
    #[serde(default = "default_concurrency")]
    concurrency: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expect: Option<BTreeSet<Outcome>>,
}

fn default_payload() -> PayloadVariant {
    PayloadVariant::Original
}

fn default_attempts() -> u32 {
    6
}

fn default_concurrency() -> u32 {
    1
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct ExpectFile {
    #[serde(default = "default_effects")]
    effects_per_operation: u32,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    effects: BTreeMap<String, u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_dispatches_per_operation: Option<u32>,
}

fn default_effects() -> u32 {
    1
}

impl Default for ExpectFile {
    fn default() -> Self {
        ExpectFile {
            effects_per_operation: default_effects(),
            effects: BTreeMap::new(),
            max_dispatches_per_operation: None,
        }
    }
}

pub const MAX_ATTEMPTS: u32 = 64;
pub const MAX_CONCURRENCY: u32 = 32;

impl ScenarioFile {
    fn validate(self, path: &Path, text: &str) -> Result<Scenario, ScenarioError> {
        let errors = input::Errors { path, text };
        let error_at = |span, message| errors.at(span, message);
        let error = |message| errors.whole(message);

        let name = path
            .file_stem()
            .map(|stem| stem.to_string_lossy().into_owned())
            .ok_or_else(|| error("a scenario file needs a name".into()))?;

        if self.call.is_empty() {
            return Err(error(
                "a scenario needs at least one [[call]] table: the agent has nothing to do".into(),
            ));
        }
        if self.workload.tool.is_empty() || !self.workload.tool.bytes().all(is_token_byte) {
            return Err(error(format!(
                "workload.tool '{}' must be a non-empty name of letters, digits, '_' or '-'",
                self.workload.tool
            )));
        }
        if self.network.min_latency.is_zero() || self.network.min_latency > self.network.max_latency
        {
            return Err(error(
                "network.min-latency must be at least 1ms and at most network.max-latency".into(),
            ));
        }
        if self.provider.retention.is_some() && self.provider.profile == ProviderProfile::Blind {
            return Err(error(
                "provider.retention has no meaning for a blind provider, which remembers nothing. \
                 Remove it, or choose profile 'keyed' or 'lookup'"
                    .into(),
            ));
        }

        let mut calls = Vec::with_capacity(self.call.len());
        for spanned in self.call {
            let span = spanned.span();
            let call = spanned.into_inner();
            if !(1..=MAX_ATTEMPTS).contains(&call.attempts) {
                return Err(error_at(
                    span,
                    format!(
                        "attempts must be between 1 and {MAX_ATTEMPTS}, not {}",
                        call.attempts
                    ),
                ));
            }
            if !(1..=MAX_CONCURRENCY).contains(&call.concurrency) {
                return Err(error_at(
                    span,
                    format!(
                        "concurrency must be between 1 and {MAX_CONCURRENCY}, not {}",
                        call.concurrency
                    ),
                ));
            }
            if call.operation.is_empty() || !call.operation.bytes().all(is_token_byte) {
                return Err(error_at(
                    span,
                    format!(
                        "operation '{}' must be a non-empty name of letters, digits, '_' or '-'",
                        call.operation
                    ),
                ));
            }
            if call.expect.as_ref().is_some_and(BTreeSet::is_empty) {
                return Err(error_at(
                    span,
                    "expect = [] accepts nothing; remove it to accept any honest outcome".into(),
                ));
            }
            calls.push(Call {
                operation: call.operation,
                payload: call.payload,
                attempts: call.attempts,
                concurrency: call.concurrency,
                expect: call.expect,
            });
        }

        let call_count = calls.len() as u32;
        let mut faults = Vec::with_capacity(self.fault.len());
        for spanned in self.fault {
            let span = spanned.span();
            let fault = spanned.into_inner();
            validate_fault(&fault, call_count).map_err(|message| error_at(span, message))?;
            faults.push(fault);
        }

        let (expect_span, expect) = match self.expect {
            Some(spanned) => (spanned.span(), spanned.into_inner()),
            None => (0..0, ExpectFile::default()),
        };
        let mut operations: Vec<&str> = Vec::new();
        for call in &calls {
            if !operations.contains(&call.operation.as_str()) {
                operations.push(&call.operation);
            }
        }
        for operation in expect.effects.keys() {
            if !operations.contains(&operation.as_str()) {
                return Err(error_at(
                    expect_span.clone(),
                    format!(
                        "unknown operation '{operation}' in [expect.effects]. Choose from: {}",
                        operations.join(", ")
                    ),
                ));
            }
        }

        Ok(Scenario {
            name,
            path: path.to_owned(),
            test: self.test,
            description: self.description.trim().to_owned(),
            provider: ProviderSetup {
                profile: self.provider.profile,
                retention: self.provider.retention,
                processing_delay: self.provider.processing_delay.unwrap_or(Duration::ZERO),
            },
            network: NetworkSetup {
                min_latency: self.network.min_latency,
                max_latency: self.network.max_latency,
            },
            workload: Workload {
                tool: self.workload.tool,
                subject_field: self.workload.subject_field,
            },
            calls,
            faults,
            expect: Expectations {
                effects_per_operation: expect.effects_per_operation,
                effects: expect.effects,
                max_dispatches_per_operation: expect.max_dispatches_per_operation,
            },
        })
    }
}

fn validate_fault(fault: &Fault, call_count: u32) -> Result<(), String> {
    let nth = match fault {
        Fault::LoseRequest { nth, .. }
        | Fault::LoseResponse { nth, .. }
        | Fault::Delay { nth, .. }
        | Fault::CrashTarget { nth, .. } => Some(*nth),
        Fault::AdvanceClock { .. } | Fault::Revoke { .. } => None,
    };
    if nth == Some(0) {
        return Err(format!("{}: nth counts from 1, not 0", fault.kind()));
    }
    if let Fault::AdvanceClock { .. } | Fault::Revoke { .. } = fault {
        match fault.trigger() {
            None => {
                return Err(format!(
                    "{} needs exactly one of after-call = N or after-commit = N",
                    fault.kind()
                ))
            }
            Some(Trigger::AfterCall(call)) if call == 0 || call > call_count => {
                return Err(format!(
                    "after-call = {call} names no call: this scenario has calls 1 to {call_count}"
                ))
            }
            Some(Trigger::AfterCommit(0)) => {
                return Err("after-commit counts dispatches from 1, not 0".into())
            }
            Some(_) => {}
        }
    }
    Ok(())
}

fn is_token_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-'
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
test = "lost-response"
description = "minimal"

[provider]
profile = "keyed"
retention = "24h"

[[call]]
operation = "reminder"
"#;

    fn parse(text: &str) -> Result<Scenario, ScenarioError> {
        Scenario::parse(Path::new("scenarios/example.toml"), text)
    }

    #[test]
    fn a_minimal_scenario_gets_defaults() {
        let scenario = parse(MINIMAL).unwrap();
        assert_eq!(scenario.name, "example");
        assert_eq!(scenario.calls[0].attempts, 6);
        assert_eq!(scenario.calls[0].concurrency, 1);
        assert_eq!(scenario.workload.tool, "send_reminder");
        assert_eq!(scenario.expect.effects_per_operation, 1);
        assert_eq!(
            scenario.provider.retention,
            Some(Duration::from_secs(86_400))
        );
    }

    #[test]
    fn an_unknown_key_names_file_line_and_choices() {
        let text = MINIMAL.replace(
            "operation = \"reminder\"",
            "operation = \"reminder\"\nattempt = 3",
        );
        let message = parse(&text).unwrap_err().to_string();
        assert!(
            message.starts_with("scenarios/example.toml:11:"),
            "{message}"
        );
        assert!(message.contains("unknown field `attempt`"), "{message}");
        assert!(message.contains("attempts"), "{message}");
    }

    #[test]
    fn an_unknown_fault_kind_lists_the_kinds() {
        let text = format!("{MINIMAL}\n[[fault]]\nkind = \"crsh\"\nnth = 1\n");
        let message = parse(&text).unwrap_err().to_string();
        assert!(message.contains("crsh"), "{message}");
        for kind in Fault::KINDS {
            assert!(message.contains(kind), "{kind} missing from: {message}");
        }
    }

    #[test]
    fn an_unknown_profile_lists_the_profiles() {
        let text = MINIMAL.replace("\"keyed\"", "\"stripe\"");
        let message = parse(&text).unwrap_err().to_string();
        assert!(
            message.contains("keyed") && message.contains("lookup") && message.contains("blind"),
            "{message}"
        );
    }

    #[test]
    fn semantic_errors_point_at_the_table() {
        let text =
            format!("{MINIMAL}\n[[fault]]\nkind = \"revoke\"\ngrant = \"token\"\nafter-call = 4\n");
        let message = parse(&text).unwrap_err().to_string();
        // Line 12 is the `[[fault]]` header: MINIMAL opens with a newline.
        assert!(
            message.starts_with("scenarios/example.toml:12:"),
            "{message}"
        );
        assert!(message.contains("calls 1 to 1"), "{message}");
    }

    #[test]
    fn a_revoke_needs_exactly_one_trigger() {
        let text = format!(
            "{MINIMAL}\n[[fault]]\nkind = \"revoke\"\ngrant = \"token\"\nafter-call = 1\nafter-commit = 1\n"
        );
        assert!(parse(&text).unwrap_err().message.contains("exactly one"));
    }

    #[test]
    fn unknown_operations_in_expectations_are_named() {
        let text = format!("{MINIMAL}\n[expect.effects]\nreminde = 1\n");
        let message = parse(&text).unwrap_err().to_string();
        assert!(message.contains("unknown operation 'reminde'"), "{message}");
        assert!(message.contains("Choose from: reminder"), "{message}");
    }

    #[test]
    fn a_written_scenario_reads_back_equal() {
        // Issue 5: `chaos explore` writes what it found with `to_toml`, and
        // `chaos run` must read back exactly that schedule.
        let text = format!(
            "{MINIMAL}\n[[call]]\noperation = \"other\"\npayload = \"changed\"\nexpect = [\"conflict\"]\n\
             [[fault]]\nkind = \"crash-target\"\nat = \"after-commit\"\nnth = 2\nrestart-after = \"1s 5ms\"\n\
             [[fault]]\nkind = \"advance-clock\"\nby = \"25h\"\nafter-call = 1\n\
             [expect]\nmax-dispatches-per-operation = 2\n[expect.effects]\nother = 0\n"
        );
        let scenario = parse(&text).unwrap();
        let written = scenario.to_toml();
        assert_eq!(parse(&written).unwrap(), scenario, "{written}");
    }

    #[test]
    fn durations_are_humantime() {
        let text = MINIMAL.replace("\"24h\"", "\"a day\"");
        let message = parse(&text).unwrap_err().to_string();
        assert!(message.contains("scenarios/example.toml:7:"), "{message}");
    }
}
