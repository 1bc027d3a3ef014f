//! The authorization lab's fixture: who calls, which tenant owns which
//! record, which approvals trusted code recorded, and what each call carries.
//!
//! "Each fixture supplies a predefined tool call, trusted caller context,
//! and—where appropriate—an approval record. Document text is displayed as
//! untrusted context and is never parsed into permissions." So the caller's
//! tenant and scope go to the authority, record owners to the provider, and
//! approvals to the authority; the call's own arguments (a `tenant` label,
//! a `document`) are the model's, and a target may trust none of them.

use std::collections::BTreeMap;

use chaos_kit::protocol::Outcome;
use serde::{Deserialize, Serialize};

/// The tools of the lab. "The export tool is intentionally overbroad."
pub const TOOLS: [&str; 3] = ["read_invoice", "export_invoices", "send_reminder"];

/// The decision a call must get.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Decision {
    Allow,
    Deny,
    /// Held for human review: final, no effect.
    Held,
    /// Denied or held, whichever: what a posture must do with an attack.
    /// Never written in a file: a posture call's class implies it.
    #[serde(skip_deserializing)]
    Refuse,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
            Decision::Held => "held",
            Decision::Refuse => "refuse",
        }
    }

    /// The outcomes that carry this decision. `rejected` is a refusal too,
    /// but of bad input: a gate that refuses an authorized caller's call as
    /// malformed has not decided `deny`.
    pub fn outcomes(self) -> &'static [Outcome] {
        match self {
            Decision::Allow => &[Outcome::Applied, Outcome::Replayed],
            Decision::Deny => &[Outcome::Denied],
            Decision::Held => &[Outcome::Held],
            Decision::Refuse => &[Outcome::Denied, Outcome::Held],
        }
    }

    /// The decision an answer's outcome stands for (never `refuse`, which
    /// is two); `None` for an outcome that decides nothing (`unknown`,
    /// `rejected`, ...).
    pub fn of(outcome: Outcome) -> Option<Decision> {
        [Decision::Allow, Decision::Deny, Decision::Held]
            .into_iter()
            .find(|decision| decision.outcomes().contains(&outcome))
    }

    /// Effects the call may have.
    pub fn effects(self) -> u32 {
        u32::from(self == Decision::Allow)
    }
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `[fixture]`: the lab's trusted data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Fixture {
    /// The caller, as the authority introspects the agent's token (`sub`).
    #[serde(deserialize_with = "super::label::actor")]
    pub actor: String,
    /// The caller's tenant, as the authority tells it.
    #[serde(deserialize_with = "super::label::tenant")]
    pub tenant: String,
    /// The tools the caller's token is granted.
    pub scope: Vec<String>,
    /// Every record and the tenant that owns it, served at the provider's
    /// `GET /records/{id}`.
    pub records: BTreeMap<String, String>,
    /// Approvals recorded at the authority, served at `GET /approvals`.
    #[serde(default, rename = "approval", skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<Approval>,
}

/// One approval, exactly as a human gave it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Approval {
    pub actor: String,
    pub tool: String,
    pub invoice: String,
    pub recipient: String,
    pub body: String,
    /// How long after the run starts the approval holds; absent, for ever.
    #[serde(
        default,
        rename = "expires-after",
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    pub expires_after: Option<std::time::Duration>,
}

/// `[call.arguments]`: what the model put in the tool call, untrusted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Arguments {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invoice: Option<String>,
    /// A tenant label the model wrote: never where ownership comes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recipient: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// Untrusted document text (an invoice note) carried in the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document: Option<String>,
    /// Where the action sends something: a URL, an account, an address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination: Option<String>,
    /// What it pays or moves, in whole currency units (a payment cap reads it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount: Option<u64>,
}

impl Arguments {
    /// The call's JSON body, fields in a fixed order.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("arguments serialise")
    }

    /// The same, with `field` naming `subject`: a posture call's
    /// action, by which the provider attributes its effect.
    pub fn to_json_naming(&self, field: &str, subject: &str) -> String {
        let mut object = serde_json::Map::new();
        object.insert(field.to_owned(), subject.into());
        if let serde_json::Value::Object(rest) =
            serde_json::to_value(self).expect("arguments serialise")
        {
            object.extend(rest);
        }
        serde_json::Value::Object(object).to_string()
    }
}

/// Headers a scenario may not set: the protocol's own, which the agent
/// writes (a forged key or token is another test's business).
const PROTOCOL_HEADERS: [&str; 8] = [
    "authorization",
    "idempotency-key",
    "x-attempt-id",
    "x-run-id",
    "x-step-id",
    "x-tool-use-id",
    "traceparent",
    "content-type",
];

/// Checks one `[call.headers]` entry: a token name that is not the
/// protocol's, and a value of one printable line.
pub(crate) fn check_header(name: &str, value: &str) -> Result<(), String> {
    let token = |byte: u8| byte.is_ascii_alphanumeric() || byte == b'-';
    if name.is_empty() || name.len() > 64 || !name.bytes().all(token) {
        return Err(format!(
            "header '{name}' in [call.headers] must be 1 to 64 letters, digits or '-', e.g. X-Tenant"
        ));
    }
    if PROTOCOL_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
        return Err(format!(
            "header '{name}' is the protocol's own, which the agent sets; [call.headers] may add others, e.g. X-Tenant"
        ));
    }
    if value.len() > 256
        || !value
            .bytes()
            .all(|byte| byte == b' ' || byte.is_ascii_graphic())
    {
        return Err(format!(
            "the value of header '{name}' must be at most 256 printable ASCII characters on one line"
        ));
    }
    Ok(())
}

impl Fixture {
    /// Checks the fixture against itself; the message says what to change.
    pub(crate) fn validate(&self) -> Result<(), String> {
        let tool = |tool: &str, place: &str| {
            if TOOLS.contains(&tool) {
                Ok(())
            } else {
                Err(format!(
                    "unknown tool '{tool}' in {place}. Choose from: {}",
                    TOOLS.join(", ")
                ))
            }
        };
        for granted in &self.scope {
            tool(granted, "fixture.scope")?;
        }
        if self.records.is_empty() {
            return Err(
                "fixture.records is empty: add the records and their owning tenants, e.g. INV-A = \"north\"".into(),
            );
        }
        for approval in &self.approvals {
            tool(&approval.tool, "[[fixture.approval]]")?;
            self.record(&approval.invoice, "[[fixture.approval]]")?;
        }
        Ok(())
    }

    pub(crate) fn record(&self, invoice: &str, place: &str) -> Result<(), String> {
        if self.records.contains_key(invoice) {
            return Ok(());
        }
        let known: Vec<&str> = self.records.keys().map(String::as_str).collect();
        Err(format!(
            "unknown record '{invoice}' in {place}. Choose from: {}",
            known.join(", ")
        ))
    }

    /// Checks one call's tool and arguments against the fixture.
    pub(crate) fn check_call(&self, tool: &str, arguments: &Arguments) -> Result<(), String> {
        if !TOOLS.contains(&tool) {
            return Err(format!(
                "unknown tool '{tool}' for an authorization call. Choose from: {}",
                TOOLS.join(", ")
            ));
        }
        match (&arguments.invoice, tool) {
            (Some(invoice), _) => self.record(invoice, "call.arguments.invoice")?,
            (None, "export_invoices") => {}
            (None, _) => {
                return Err(format!(
                    "{tool} acts on one record: add invoice = \"...\" to [call.arguments]"
                ))
            }
        }
        if tool == "send_reminder" && (arguments.recipient.is_none() || arguments.body.is_none()) {
            return Err(
                "send_reminder sends a message: add recipient and body to [call.arguments]".into(),
            );
        }
        Ok(())
    }
}
