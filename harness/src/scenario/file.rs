//! The scenario file's serde shape, kept apart from the domain type: strict
//! TOML (`deny_unknown_fields`, spans for every table that can be wrong) in,
//! a validated [`Scenario`] out, and back.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use chaos_kit::protocol::{LookupCapability, Outcome, ProviderProfile};
use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::fixture::{Arguments, Decision, Fixture};
use super::posture::{ActionClass, Impact};
use super::{
    Boundary, Call, Claim, Expectations, Identity, NetworkSetup, OperationSetup, PayloadVariant,
    Policy, ProviderSetup, Scenario, ScenarioError, TestKind, Workload, DEFAULT_TENANT,
};
use crate::fault::FaultEntry;
use crate::input;

/// Parses and validates `text` as the scenario at `path`.
pub(super) fn read(path: &Path, text: &str) -> Result<Scenario, ScenarioError> {
    if text.len() > MAX_FILE_BYTES {
        return Err(input::Errors { path, text }.whole(format!(
            "a scenario file may hold at most {} KiB, and this one holds {} KiB: a trial that large would take minutes to run and to stop; split it into several scenarios",
            MAX_FILE_BYTES / 1024,
            text.len() / 1024
        )));
    }
    let (strict, optional) = take_optional(text);
    let file: ScenarioFile = input::parse(path, &strict).map_err(|error| {
        let errors = input::Errors {
            path,
            text: &strict,
        };
        explain(error, &errors)
    })?;
    file.validate(path, text, optional)
}

/// A parse error made to say how to fix the scenario where serde's words do
/// not (issue 27): what a missing required key is, with its choices, and
/// which field of a `[[fault]]` has the wrong type (the kind's shape is read
/// as a whole, so serde points at the table, not the field).
fn explain(error: input::FileError, errors: &input::Errors<'_>) -> input::FileError {
    let message = error.message.as_str();
    let hint = match message {
        "missing field `test`" => Some(format!(
            "missing field `test`: what this scenario tests, e.g. `test = \"lost-response\"`; one of {}",
            choices::<super::TestKind>()
        )),
        "missing field `description`" => Some(
            "missing field `description`: one line saying what the scenario does, e.g. `description = \"the provider commits and its answer is lost\"`; every report shows it"
                .to_owned(),
        ),
        _ => None,
    };
    if let Some(hint) = hint {
        return input::FileError {
            message: hint,
            ..error
        };
    }
    if message == "invalid type: map, expected a sequence" {
        // `[call]` where the file means `[[call]]`: one table where a list is.
        let line = error
            .location
            .and_then(|at| errors.text.lines().nth(at.line - 1));
        let name = line.map(str::trim).and_then(|line| {
            let name = line.strip_prefix('[')?.strip_suffix(']')?;
            (!name.starts_with('[')).then_some(name)
        });
        if let Some(name) = name {
            return input::FileError {
                message: format!(
                    "`[{name}]` is a list of tables: write `[[{name}]]`, once per item"
                ),
                ..error
            };
        }
    }
    match message.strip_prefix("invalid type: ") {
        Some(found) => fault_field(&error, errors, found).unwrap_or(error),
        None => error,
    }
}

/// The choices of a kebab-case enum, as serde lists them for a value it
/// does not know: `lost-response`, `concurrent-attempts`, ...
fn choices<T: serde::de::DeserializeOwned>() -> String {
    use serde::de::value::{Error, StrDeserializer};
    let unknown = T::deserialize(StrDeserializer::<Error>::new("")).err();
    let message = unknown.map(|error| error.to_string()).unwrap_or_default();
    message
        .split_once("expected one of ")
        .map_or_else(String::new, |(_, choices)| choices.to_owned())
}

/// Every `[[fault]]` table of a parsed document, with its index, spans kept.
fn fault_tables<'a, 'i>(
    document: &'a toml::de::DeTable<'i>,
) -> impl Iterator<Item = (usize, &'a toml::de::DeTable<'i>)> {
    use toml::de::DeValue;
    let faults = (document.iter())
        .find(|(key, _)| key.get_ref().as_ref() == "fault")
        .map(|(_, value)| value.get_ref());
    let tables = match faults {
        Some(DeValue::Array(faults)) => faults.iter().collect(),
        _ => Vec::new(),
    };
    (tables.into_iter().enumerate()).filter_map(|(index, fault)| match fault.get_ref() {
        DeValue::Table(table) => Some((index, table)),
        _ => None,
    })
}

/// For an error serde put at a `[[fault]]` header: the first field of that
/// table whose value is of the type serde found, and the error there.
fn fault_field(
    error: &input::FileError,
    errors: &input::Errors<'_>,
    found: &str,
) -> Option<input::FileError> {
    use toml::de::{DeTable, DeValue};
    let line = error.location?.line;
    let text = errors.text;
    let header = text.lines().nth(line - 1)?;
    if header.trim() != "[[fault]]" {
        return None;
    }
    let index = (text.lines().take(line - 1))
        .filter(|line| line.trim() == "[[fault]]")
        .count();
    let document = DeTable::parse(text).ok()?;
    let (_, table) = fault_tables(document.get_ref()).find(|(at, _)| *at == index)?;
    let of_type = |value: &DeValue<'_>| match value {
        DeValue::String(_) => found.starts_with("string"),
        DeValue::Integer(_) => found.starts_with("integer"),
        DeValue::Float(_) => found.starts_with("floating point"),
        DeValue::Boolean(_) => found.starts_with("boolean"),
        DeValue::Datetime(_) => found.starts_with("datetime"),
        DeValue::Array(_) => found.starts_with("sequence"),
        DeValue::Table(_) => found.starts_with("map"),
    };
    let (key, _) = (table.iter())
        .filter(|(key, _)| key.get_ref().as_ref() != "kind")
        .find(|(_, value)| of_type(value.get_ref()))?;
    Some(errors.at(
        key.span(),
        format!("`{}`: {}", key.get_ref().as_ref(), error.message),
    ))
}

/// Takes `optional = true|false` out of every `[[fault]]` table: the indices
/// of the faults that said `true`, and the text with each such key blanked
/// (spaces, newlines kept), so that each kind's strict shape never sees it
/// and every other error keeps its line and column. A text that does not
/// parse is handed back as it is, for the strict parse to report; an
/// `optional` that is not a boolean is left in, for the kind to refuse.
fn take_optional(text: &str) -> (std::borrow::Cow<'_, str>, BTreeSet<usize>) {
    use toml::de::{DeTable, DeValue};
    let mut optional = BTreeSet::new();
    let Ok(document) = DeTable::parse(text) else {
        return (text.into(), optional);
    };
    let mut blanks = Vec::new();
    for (index, table) in fault_tables(document.get_ref()) {
        for (key, value) in table.iter() {
            if key.get_ref().as_ref() != "optional" {
                continue;
            }
            if let DeValue::Boolean(said) = value.get_ref() {
                if *said {
                    optional.insert(index);
                }
                blanks.push(key.span().start..value.span().end);
            }
        }
    }
    if blanks.is_empty() {
        return (text.into(), optional);
    }
    let mut strict = String::with_capacity(text.len());
    let mut from = 0;
    for blank in blanks {
        strict.push_str(&text[from..blank.start]);
        // One space per byte: every later offset stays where it was.
        strict.extend(
            text[blank.clone()]
                .bytes()
                .map(|byte| if byte == b'\n' { '\n' } else { ' ' }),
        );
        from = blank.end;
    }
    strict.push_str(&text[from..]);
    (strict.into(), optional)
}

/// The scenario as a file, every key written out.
pub(super) fn write(scenario: &Scenario) -> String {
    let nowhere = || 0..0;
    let provider = &scenario.provider;
    let file = ScenarioFile {
        test: scenario.test,
        description: scenario.description.clone(),
        invariant: Some(scenario.claim.invariant.clone()),
        boundary: Some(scenario.claim.boundary),
        tags: scenario
            .tags
            .iter()
            .map(|tag| Spanned::new(nowhere(), tag.clone()))
            .collect(),
        provider: Some(ProviderFile {
            profile: provider.profile,
            retention: provider.retention,
            processing_delay: Some(provider.processing_delay),
            lookup: (provider.lookup != LookupCapability::default_for(provider.profile))
                .then(|| LookupName::of(provider.lookup)),
            lookup_lag: match provider.lookup {
                LookupCapability::Lagging(lag) => Some(lag),
                _ => None,
            },
            saves_errors: provider.saves_errors,
            declines: provider.declines.iter().cloned().collect(),
        }),
        operations: scenario
            .operations
            .iter()
            .filter_map(|setup| {
                let file = OperationFile {
                    tenant: (setup.tenant != DEFAULT_TENANT).then(|| setup.tenant.clone()),
                    subject: (setup.subject != setup.name).then(|| setup.subject.clone()),
                    key: (setup.key != setup.name).then(|| setup.key.clone()),
                };
                let default = file.tenant.is_none() && file.subject.is_none() && file.key.is_none();
                (!default).then(|| (setup.name.clone(), Spanned::new(nowhere(), file)))
            })
            .collect(),
        network: NetworkFile {
            min_latency: scenario.network.min_latency,
            max_latency: scenario.network.max_latency,
        },
        workload: WorkloadFile {
            tool: scenario.workload.tool.clone(),
            subject_field: scenario.workload.subject_field.clone(),
            free_text_field: scenario.workload.free_text_field.clone(),
            policy: scenario.workload.policy,
        },
        call: scenario
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
                        subagents: call.subagents,
                        identity: call.identity,
                        expect: call.expect.clone(),
                        tool: call.tool.clone(),
                        // A posture call's decision is its class's.
                        decision: call.decision.filter(|_| call.class.is_none()),
                        arguments: call.arguments.clone(),
                        headers: call.headers.clone(),
                        class: call.class,
                        impact: call.impact,
                    },
                )
            })
            .collect(),
        fault: scenario
            .faults
            .iter()
            .enumerate()
            .map(|(index, fault)| {
                let entry = FaultEntry {
                    optional: scenario.optional_faults.contains(&index),
                    file: fault.to_file(),
                };
                Spanned::new(nowhere(), entry)
            })
            .collect(),
        expect: Some(Spanned::new(
            nowhere(),
            ExpectFile {
                effects_per_operation: scenario.expect.effects_per_operation,
                effects: scenario.expect.effects.clone(),
                max_dispatches_per_operation: scenario.expect.max_dispatches_per_operation,
            },
        )),
        fixture: scenario
            .fixture
            .clone()
            .map(|fixture| Spanned::new(nowhere(), fixture)),
    };
    toml::to_string(&file).expect("a scenario always serialises to TOML")
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct ScenarioFile {
    test: TestKind,
    description: String,
    /// The release criterion, in words; defaults to the test's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    invariant: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    boundary: Option<Boundary>,
    /// `namespace:value` each: where the scenario sits in a threat taxonomy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    tags: Vec<Spanned<String>>,
    /// Optional only for a scenario whose effects are database rows.
    #[serde(default)]
    provider: Option<ProviderFile>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    operations: BTreeMap<String, Spanned<OperationFile>>,
    #[serde(default)]
    network: NetworkFile,
    #[serde(default)]
    workload: WorkloadFile,
    #[serde(default)]
    call: Vec<Spanned<CallFile>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    fault: Vec<Spanned<FaultEntry>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expect: Option<Spanned<ExpectFile>>,
    /// Required by, and only by, `test = "authorization"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fixture: Option<Spanned<Fixture>>,
}

impl ProviderFile {
    fn blind() -> ProviderFile {
        ProviderFile {
            profile: ProviderProfile::Blind,
            retention: None,
            processing_delay: None,
            lookup: None,
            lookup_lag: None,
            saves_errors: false,
            declines: Vec::new(),
        }
    }
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lookup: Option<LookupName>,
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    lookup_lag: Option<Duration>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    saves_errors: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    declines: Vec<String>,
}

/// `lookup = "..."`, as written; a lag comes apart, in `lookup-lag`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum LookupName {
    None,
    Exact,
    Lagging,
}

impl LookupName {
    fn of(lookup: LookupCapability) -> LookupName {
        match lookup {
            LookupCapability::None => LookupName::None,
            LookupCapability::Exact => LookupName::Exact,
            LookupCapability::Lagging(_) => LookupName::Lagging,
        }
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct OperationFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tenant: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    subject: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key: Option<String>,
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
    NetworkSetup::default().min_latency
}

fn default_max_latency() -> Duration {
    NetworkSetup::default().max_latency
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct WorkloadFile {
    #[serde(default = "default_tool")]
    tool: String,
    #[serde(default = "default_subject_field")]
    subject_field: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    free_text_field: Option<String>,
    #[serde(default = "default_policy", skip_serializing_if = "is_coalesce")]
    policy: Policy,
}

impl Default for WorkloadFile {
    fn default() -> Self {
        WorkloadFile {
            tool: default_tool(),
            subject_field: default_subject_field(),
            free_text_field: None,
            policy: default_policy(),
        }
    }
}

fn default_policy() -> Policy {
    Policy::Coalesce
}

fn is_coalesce(policy: &Policy) -> bool {
    *policy == Policy::Coalesce
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
    #[serde(default = "default_subagents", skip_serializing_if = "is_one")]
    subagents: u32,
    #[serde(default = "default_identity", skip_serializing_if = "is_stable")]
    identity: Identity,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expect: Option<BTreeSet<Outcome>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    decision: Option<Decision>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    arguments: Option<Arguments>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    headers: BTreeMap<String, String>,
    /// Posture: what the action does (an attack's kind, or benign).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    class: Option<ActionClass>,
    /// Posture: how much harm it does if it goes through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    impact: Option<Impact>,
}

/// Checks a posture call: one action, with its class, impact, tool and
/// arguments; its decision follows from its class.
fn check_posture_call(call: &CallFile) -> Result<ActionClass, String> {
    let (Some(class), Some(_)) = (call.class, call.impact) else {
        return Err(
            "a posture call is one action with a class and an impact: add class = \"destructive\", \"money-moving\", \"exfiltrating\", \"evasion\" or \"benign\", and impact = \"high\" or \"low\"".into(),
        );
    };
    if call.decision.is_some() {
        return Err(
            "a posture call's decision follows from its class (an attack must be refused, a benign action allowed); remove decision".into(),
        );
    }
    if call.tool.is_none() {
        return Err("a posture call names its tool: add tool = \"...\"".into());
    }
    if call.arguments.is_none() {
        return Err(
            "a posture call carries the model's arguments: add [call.arguments] (destination, amount, document, ...)".into(),
        );
    }
    if call
        .arguments
        .as_ref()
        .is_some_and(|arguments| arguments.invoice.is_some() || arguments.tenant.is_some())
    {
        return Err(
            "invoice and tenant are the authorization lab's arguments, read against its [fixture]; a posture call has none: use destination, amount, recipient, body or document".into(),
        );
    }
    Ok(class)
}

fn default_subagents() -> u32 {
    1
}

fn is_one(value: &u32) -> bool {
    *value == 1
}

fn default_identity() -> Identity {
    Identity::Stable
}

fn is_stable(identity: &Identity) -> bool {
    *identity == Identity::Stable
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
pub const MAX_SUBAGENTS: u32 = 16;
/// A trial's size is bounded, so that planning, simulating and judging it
/// takes milliseconds and a signal stops it at once: a scenario of 100,000
/// calls took about 390 s to stop (issue 15). The limits are far above what
/// any of the six tests or `chaos explore` need; docs/scenarios.md, "Limits".
pub const MAX_CALLS: usize = 100;
pub const MAX_FAULTS: usize = 64;
/// Attempts a trial may make, over every call: attempts x concurrency x subagents.
pub const MAX_TOTAL_ATTEMPTS: u32 = 2_000;
/// Bytes in a name (an operation, a tenant, a key, a field, the tool).
pub const MAX_NAME_BYTES: usize = 128;
/// Bytes in the free text (description, invariant).
pub const MAX_TEXT_BYTES: usize = 8 * 1024;
/// Bytes in a scenario file.
pub const MAX_FILE_BYTES: usize = 256 * 1024;

/// Fails if `value`, the `what` of the file, is longer than `limit` bytes.
fn check_length(what: &str, value: &str, limit: usize) -> Result<(), String> {
    if value.len() > limit {
        let start: String = value.chars().take(24).collect();
        return Err(format!(
            "{what} '{start}...' is {} bytes long; at most {limit} are allowed",
            value.len()
        ));
    }
    Ok(())
}

impl ScenarioFile {
    fn validate(
        self,
        path: &Path,
        text: &str,
        optional_faults: BTreeSet<usize>,
    ) -> Result<Scenario, ScenarioError> {
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
        if self.call.len() > MAX_CALLS {
            return Err(error(format!(
                "a scenario may have at most {MAX_CALLS} [[call]] tables, and this one has {}; split it into several scenarios",
                self.call.len()
            )));
        }
        if self.fault.len() > MAX_FAULTS {
            return Err(error(format!(
                "a scenario may have at most {MAX_FAULTS} [[fault]] tables, and this one has {}",
                self.fault.len()
            )));
        }
        let total_attempts: u64 = self
            .call
            .iter()
            .map(|call| {
                let call = call.get_ref();
                u64::from(call.attempts) * u64::from(call.concurrency) * u64::from(call.subagents)
            })
            .sum();
        if total_attempts > u64::from(MAX_TOTAL_ATTEMPTS) {
            return Err(error(format!(
                "the calls may make {total_attempts} attempts in all (attempts x concurrency x subagents, summed), more than the {MAX_TOTAL_ATTEMPTS} one trial may make; lower them or split the scenario"
            )));
        }
        let lengths = [
            ("description", self.description.as_str(), MAX_TEXT_BYTES),
            (
                "invariant",
                self.invariant.as_deref().unwrap_or(""),
                MAX_TEXT_BYTES,
            ),
            ("workload.tool", self.workload.tool.as_str(), MAX_NAME_BYTES),
            (
                "workload.subject-field",
                self.workload.subject_field.as_str(),
                MAX_NAME_BYTES,
            ),
            (
                "workload.free-text-field",
                self.workload.free_text_field.as_deref().unwrap_or(""),
                MAX_NAME_BYTES,
            ),
        ];
        for (what, value, limit) in lengths {
            check_length(what, value, limit).map_err(error)?;
        }
        let declines = self.provider.iter().flat_map(|provider| &provider.declines);
        for declined in declines {
            check_length("provider.declines entry", declined, MAX_NAME_BYTES).map_err(error)?;
        }
        for (name, setup) in &self.operations {
            let span = setup.span();
            let setup = setup.get_ref();
            let named = [
                ("operation", Some(name)),
                ("tenant", setup.tenant.as_ref()),
                ("subject", setup.subject.as_ref()),
                ("key", setup.key.as_ref()),
            ];
            for (what, value) in named {
                if let Some(value) = value {
                    check_length(what, value, MAX_NAME_BYTES)
                        .map_err(|message| error_at(span.clone(), message))?;
                }
            }
        }
        for call in &self.call {
            check_length("operation", &call.get_ref().operation, MAX_NAME_BYTES)
                .map_err(|message| error_at(call.span(), message))?;
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

        if let Some(field) = &self.workload.free_text_field {
            if field.is_empty() || !field.bytes().all(is_token_byte) {
                return Err(error(format!(
                    "workload.free-text-field '{field}' must be a non-empty name of letters, digits, '_' or '-'"
                )));
            }
            if *field == self.workload.subject_field {
                return Err(error(format!(
                    "workload.free-text-field '{field}' is the subject field: the subject names what the action is about and is never free text; choose another field"
                )));
            }
        }

        for (index, spanned) in self.tags.iter().enumerate() {
            let tag = spanned.get_ref().as_str();
            let earlier = self.tags[..index].iter().map(|tag| tag.get_ref().as_str());
            super::tag::check(tag, index, earlier)
                .map_err(|message| error_at(spanned.span(), message))?;
        }
        let tags: Vec<String> = self.tags.into_iter().map(Spanned::into_inner).collect();

        let fixture = match (self.fixture, self.test == TestKind::Authorization) {
            (Some(spanned), true) => {
                let span = spanned.span();
                let fixture = spanned.into_inner();
                fixture
                    .validate()
                    .map_err(|message| error_at(span, message))?;
                Some(fixture)
            }
            (None, true) => {
                return Err(error(
                    "test = \"authorization\" needs a [fixture]: actor, tenant, scope and [fixture.records] (each record's owning tenant)".into(),
                ))
            }
            (Some(spanned), false) => {
                return Err(error_at(
                    spanned.span(),
                    format!(
                        "[fixture] belongs to test = \"authorization\", not \"{}\"; remove it or change the test",
                        self.test.as_str()
                    ),
                ))
            }
            (None, false) => None,
        };

        let call_count = self.call.len() as u32;
        let mut faults = Vec::with_capacity(self.fault.len());
        for spanned in self.fault {
            let span = spanned.span();
            let entry = spanned.into_inner();
            let fault = (entry.file)
                .validate(call_count)
                .map_err(|message| error_at(span, message))?;
            faults.push(fault);
        }
        let something_re_plans = faults.iter().any(|fault| fault.re_plans());

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
            if !(1..=MAX_SUBAGENTS).contains(&call.subagents) {
                return Err(error_at(
                    span,
                    format!(
                        "subagents must be between 1 and {MAX_SUBAGENTS}, not {}: each subagent runs the step once",
                        call.subagents
                    ),
                ));
            }
            if call.identity == Identity::Replan
                && call.attempts == 1
                && call.subagents == 1
                && !something_re_plans
            {
                return Err(error_at(
                    span,
                    "identity = \"replan\" changes nothing here: with one attempt, one subagent and no replan, stall, crash-agent, double-approve, truncate-result or user-interrupt fault, the step is never decided again. \
                     Give the call attempts > 1 or subagents > 1, add such a fault, or remove identity"
                        .into(),
                ));
            }
            if call.payload == PayloadVariant::Drifted && self.workload.free_text_field.is_none() {
                return Err(error_at(
                    span,
                    "payload = \"drifted\" re-words the workload's free-text field, and this workload names none: \
                     add free-text-field = \"note\" to [workload], or choose payload original, changed or equivalent"
                        .into(),
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
            let authorization = self.test == TestKind::Authorization;
            let posture = self.test == TestKind::Posture;
            let decision = if posture {
                let class =
                    check_posture_call(&call).map_err(|message| error_at(span.clone(), message))?;
                Some(class.decision())
            } else if call.class.is_some() || call.impact.is_some() {
                return Err(error_at(
                    span,
                    "class and impact belong to test = \"posture\", whose calls are one action each; remove them".into(),
                ));
            } else {
                call.decision
            };
            match (&fixture, call.decision, &call.arguments) {
                _ if posture => {}
                (Some(fixture), Some(_), Some(arguments)) => {
                    let tool = call.tool.as_deref().unwrap_or(&self.workload.tool);
                    fixture
                        .check_call(tool, arguments)
                        .map_err(|message| error_at(span.clone(), message))?;
                }
                (Some(_), None, _) => {
                    return Err(error_at(
                        span,
                        "an authorization call states its decision: add decision = \"allow\", \"deny\" or \"held\"".into(),
                    ))
                }
                (Some(_), Some(_), None) => {
                    return Err(error_at(
                        span,
                        "an authorization call carries the model's arguments: add [call.arguments] with invoice (and recipient, body for send_reminder)".into(),
                    ))
                }
                (None, Some(_), _) | (None, _, Some(_)) => {
                    return Err(error_at(
                        span,
                        "decision and [call.arguments] belong to test = \"authorization\", which has a [fixture]; remove them".into(),
                    ))
                }
                (None, None, None) => {}
            }
            if !call.headers.is_empty() && !authorization {
                return Err(error_at(
                    span,
                    "[call.headers] belong to test = \"authorization\", whose calls carry what a client may forge; remove them".into(),
                ));
            }
            let mut headers = BTreeMap::new();
            for (name, value) in call.headers {
                super::fixture::check_header(&name, &value)
                    .map_err(|message| error_at(span.clone(), message))?;
                headers.insert(name.to_ascii_lowercase(), value);
            }
            if let Some(tool) = &call.tool {
                if tool.is_empty() || !tool.bytes().all(is_token_byte) {
                    return Err(error_at(
                        span,
                        format!(
                            "tool '{tool}' must be a non-empty name of letters, digits, '_' or '-'"
                        ),
                    ));
                }
            }
            let expect = match (call.expect, decision) {
                (None, Some(decision)) if authorization || posture => {
                    Some(decision.outcomes().iter().copied().collect())
                }
                (expect, _) => expect,
            };
            if expect.as_ref().is_some_and(BTreeSet::is_empty) {
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
                subagents: call.subagents,
                identity: call.identity,
                expect,
                tool: call.tool,
                decision,
                arguments: call.arguments,
                headers,
                class: call.class,
                impact: call.impact,
            });
        }
        if self.test == TestKind::Posture && calls.len() != 1 {
            return Err(error(format!(
                "a posture scenario is one action, and this one has {} [[call]] tables: the suite's figures count actions, one per file; split it",
                calls.len()
            )));
        }
        if faults.iter().any(|fault| fault.drifts()) && self.workload.free_text_field.is_none() {
            return Err(error(
                "a fault re-plans with payload = \"drifted\", which re-words the workload's free-text field, and this workload names none: add free-text-field = \"note\" to [workload]".into(),
            ));
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

        let mut effects = expect.effects;
        let decided = fixture.is_some() || self.test == TestKind::Posture;
        for call in calls.iter().filter(|_| decided) {
            if let Some(decision) = call.decision {
                effects
                    .entry(call.operation.clone())
                    .or_insert(decision.effects());
            }
        }

        let setups = operation_setups(&operations, self.operations, &error_at)?;
        let boundary = self.boundary.unwrap_or(Boundary::AcceptedRequest);
        let provider = match self.provider {
            Some(provider) => provider,
            // Nothing downstream deduplicates a row the target writes itself:
            // the provider, unused by such a target, stands in as blind.
            None if boundary == Boundary::DatabaseMutation => ProviderFile::blind(),
            None => {
                return Err(error(format!(
                    "missing [provider]: a scenario with boundary = \"{boundary}\" counts effects at the provider; add [provider] with profile = \"keyed\", \"lookup\" or \"blind\" (only boundary = \"database-mutation\" may leave it out)"
                )))
            }
        };
        let provider = provider.validate(&operations, &error)?;
        let claim = Claim {
            invariant: match self.invariant {
                Some(text) if text.trim().is_empty() => {
                    return Err(error(
                        "invariant = \"\" states nothing; write the release criterion, or remove it for the test's own".into(),
                    ))
                }
                Some(text) => text.trim().to_owned(),
                None => self.test.default_invariant().to_owned(),
            },
            boundary,
        };

        Ok(Scenario {
            name,
            path: path.to_owned(),
            test: self.test,
            description: self.description.trim().to_owned(),
            claim,
            tags,
            provider,
            operations: setups,
            network: NetworkSetup {
                min_latency: self.network.min_latency,
                max_latency: self.network.max_latency,
            },
            workload: Workload {
                tool: self.workload.tool,
                // A posture call's payload names its action by this field.
                subject_field: if self.test == TestKind::Posture {
                    super::posture::SUBJECT_FIELD.to_owned()
                } else {
                    self.workload.subject_field
                },
                free_text_field: self.workload.free_text_field,
                policy: self.workload.policy,
            },
            calls,
            faults,
            optional_faults,
            expect: Expectations {
                effects_per_operation: expect.effects_per_operation,
                effects,
                max_dispatches_per_operation: expect.max_dispatches_per_operation,
            },
            fixture,
        })
    }
}

impl ProviderFile {
    fn validate(
        self,
        operations: &[&str],
        error: &impl Fn(String) -> ScenarioError,
    ) -> Result<ProviderSetup, ScenarioError> {
        let profile = self.profile;
        let lookup = match (self.lookup, self.lookup_lag) {
            (None, None) => LookupCapability::default_for(profile),
            (Some(LookupName::Lagging), Some(lag)) if !lag.is_zero() => {
                LookupCapability::Lagging(lag)
            }
            (Some(LookupName::Lagging), _) => {
                return Err(error(
                    "provider.lookup = \"lagging\" needs provider.lookup-lag, how long a committed effect stays invisible to a lookup (at least 1ms)".into(),
                ))
            }
            (_, Some(_)) => {
                return Err(error(
                    "provider.lookup-lag applies to lookup = \"lagging\" only: add it, or remove lookup-lag".into(),
                ))
            }
            (Some(LookupName::None), None) => LookupCapability::None,
            (Some(LookupName::Exact), None) => LookupCapability::Exact,
        };
        match (profile, lookup) {
            (ProviderProfile::Blind, LookupCapability::None)
            | (ProviderProfile::Keyed, _)
            | (ProviderProfile::Lookup, LookupCapability::Exact | LookupCapability::Lagging(_)) => {
            }
            (ProviderProfile::Blind, _) => {
                return Err(error(
                    "a blind provider cannot be asked: provider.lookup must be \"none\". Choose profile 'lookup' for a provider without dedup that can be asked".into(),
                ))
            }
            (ProviderProfile::Lookup, LookupCapability::None) => {
                return Err(error(
                    "a lookup provider without a lookup is blind: choose profile 'blind', or lookup 'exact' or 'lagging'".into(),
                ))
            }
        }
        if self.saves_errors && profile != ProviderProfile::Keyed {
            return Err(error(format!(
                "provider.saves-errors means errors saved under the Idempotency-Key, which only a keyed provider keeps; this one is '{profile}'"
            )));
        }
        if self.retention.is_some() && profile == ProviderProfile::Blind {
            return Err(error(
                "provider.retention has no meaning for a blind provider, which remembers nothing. \
                 Remove it, or choose profile 'keyed' or 'lookup'"
                    .into(),
            ));
        }
        let mut declines = BTreeSet::new();
        for operation in self.declines {
            if !operations.contains(&operation.as_str()) {
                return Err(error(format!(
                    "unknown operation '{operation}' in provider.declines. Choose from: {}",
                    operations.join(", ")
                )));
            }
            declines.insert(operation);
        }
        Ok(ProviderSetup {
            profile,
            retention: self.retention,
            processing_delay: self.processing_delay.unwrap_or(Duration::ZERO),
            lookup,
            saves_errors: self.saves_errors,
            declines,
        })
    }
}

/// Every operation's setup, in order of first use: `[operations.NAME]`
/// where there is one, the defaults (its own tenant-free identity) elsewhere.
fn operation_setups(
    operations: &[&str],
    mut declared: BTreeMap<String, Spanned<OperationFile>>,
    error_at: &impl Fn(std::ops::Range<usize>, String) -> ScenarioError,
) -> Result<Vec<OperationSetup>, ScenarioError> {
    if let Some((name, spanned)) = declared
        .iter()
        .find(|(name, _)| !operations.contains(&name.as_str()))
    {
        return Err(error_at(
            spanned.span(),
            format!(
                "unknown operation '{name}' in [operations]: no [[call]] runs it. Choose from: {}",
                operations.join(", ")
            ),
        ));
    }
    let mut setups: Vec<OperationSetup> = Vec::with_capacity(operations.len());
    for name in operations {
        let (span, file) = match declared.remove(*name) {
            Some(spanned) => (spanned.span(), spanned.into_inner()),
            None => (0..0, OperationFile::default()),
        };
        let label = |field: &str, value: Option<String>, default: &str| {
            match value {
            Some(value) if value.is_empty() || !value.bytes().all(is_token_byte) => Err(error_at(
                span.clone(),
                format!(
                    "operations.{name}.{field} '{value}' must be a non-empty name of letters, digits, '_' or '-'"
                ),
            )),
            Some(value) => Ok(value),
            None => Ok(default.to_owned()),
        }
        };
        let setup = OperationSetup {
            name: (*name).to_owned(),
            tenant: label("tenant", file.tenant, DEFAULT_TENANT)?,
            subject: label("subject", file.subject, name)?,
            key: label("key", file.key, name)?,
        };
        if let Some(other) = setups
            .iter()
            .find(|other| other.key == setup.key && other.tenant == setup.tenant)
        {
            return Err(error_at(
                span,
                format!(
                    "operations '{}' and '{name}' share key '{}' within tenant '{}': one key in one tenant is one operation. \
                     Give them one name, or put '{name}' in another tenant",
                    other.name, setup.key, setup.tenant
                ),
            ));
        }
        setups.push(setup);
    }
    Ok(setups)
}

fn is_token_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-'
}
