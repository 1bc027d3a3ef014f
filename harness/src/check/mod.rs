//! Stage 4: the checkers. History + ledger in, a [`Verdict`] out.
//!
//! Ground truth is the provider's ledger; the target's answers are claims to
//! be checked against it. Every finding names the operation, the counts and
//! the attempt that broke it.
//!
//! [`view`] builds, once per run, what every checker reads: each operation's
//! attempts in order, its slice of the ledger, and its life split by the
//! target's retention. Then one checker per family, each in its own file:
//!
//! - [`effects`]: how many effects and dispatches each operation had;
//! - [`honesty`]: whether each answer told the truth about the ledger;
//! - [`payload`]: whether a changed payload was refused and an equal one replayed;
//! - [`disclosure`]: whether a receipt or result reached a caller who may not see it;
//! - [`liveness`]: whether each call ended as its scenario expects, and was not stuck;
//! - [`authorization`]: whether each lab call got its stated decision, with
//!   no effect for a denied or held one;
//! - [`policy`]: whether a per-tool runtime policy beyond coalesce and
//!   allow held (`refuse`: a step decided again refused explicitly);
//! - [`faults`]: whether every declared fault acted (a trial that tested
//!   nothing is `unknown`);
//! - [`annotations`]: whether an MCP tool's declared hints
//!   (`idempotentHint`, `readOnlyHint`) held against the ledger;
//! - [`race`]: warnings, which never fail a trial unless denied: a race the
//!   provider's idempotency key absorbed.
//!
//! They compose as in Jepsen: a failure dominates, a run that could not
//! finish is `unknown` unless what it recorded already fails, and a checker
//! that errors makes the verdict `unknown`, never a pass.

mod annotations;
mod authorization;
mod disclosure;
mod effects;
pub(crate) mod explain;
mod faults;
mod honesty;
mod liveness;
mod payload;
mod policy;
mod race;
mod retention;
pub(crate) mod view;

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};

use chaos_kit::target::TargetInfo;
use serde::{Deserialize, Serialize};

use crate::history::RunOutput;
use crate::plan::Trial;
use view::RunView;

/// pass / unknown / fail, ordered so that the worst is the greatest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Pass,
    Unknown,
    Fail,
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Status::Pass => "pass",
            Status::Unknown => "unknown",
            Status::Fail => "fail",
        })
    }
}

/// Liveness is judged apart from safety: a stuck target is safe, and still broken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Liveness {
    /// No call in this run could be judged (e.g. a blind provider).
    NotApplicable,
    Pass,
    Unknown,
    Fail,
}

/// Which invariant a finding is about. Declared from the most specific to
/// the least: the reason shown for a failing seed is its most specific
/// finding (a changed payload that was sent explains the duplicate effect it
/// caused, not the other way round).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Check {
    /// Authorization: a call did not get the decision its case states, or a
    /// call that had to be denied or held left an effect.
    WrongDecision,
    /// A receipt or result shown to a caller who may not see it: in a `denied`
    /// or `conflict` answer, or in any answer after the caller was revoked.
    Disclosure,
    /// A payload different from the approved one reached the provider.
    ChangedPayloadDispatched,
    /// The old result returned for a different payload.
    ReplayForChangedPayload,
    /// `conflict` for a payload equal to the approved one.
    FalseConflict,
    /// `denied` although the attempt dispatched.
    DeniedButDispatched,
    /// A dispatch made for an attempt sent after the caller's permission was
    /// revoked, whatever the attempt was answered.
    DispatchedAfterRevocation,
    /// A stored answer replayed without saying so (a plain `201`, no
    /// `Idempotent-Replayed`): the agent reads an old effect as a new one.
    UnmarkedReplay,
    /// `applied` for an effect committed before the attempt: a replay told as new.
    StaleApplied,
    /// `applied`/`replayed` with no effect in the ledger.
    ClaimWithoutEffect,
    /// `rejected` although the ledger holds the operation's effect.
    RejectedWithEffect,
    /// `held` (for human review, nothing done) although the ledger holds
    /// the operation's effect: the review would approve what already happened.
    HeldWithEffect,
    /// `failed` ("not done") although the ledger holds the operation's effect.
    FailedWithEffect,
    /// A receipt that is not in the ledger for this operation.
    ReceiptMismatch,
    /// Past its declared retention, a target whose policy is `refuse`
    /// dispatched or claimed an effect instead of answering `rejected`.
    ExpiredNotRefused,
    /// Past its declared retention, a target whose policy is `reconcile`
    /// dispatched without looking the key up first, or despite finding it.
    ExpiredNotReconciled,
    /// An MCP tool declared a hint the ledger contradicts: `idempotentHint:
    /// true` and a second effect for an identical retried call, or
    /// `readOnlyHint: true` and any effect.
    AnnotationContradicted,
    /// More effects than the operation may have.
    DuplicateEffect,
    /// Fewer effects than expected: the operation was abandoned.
    MissingEffect,
    /// More dispatches than the scenario allows.
    ExtraDispatch,
    /// An effect no operation of the run accounts for.
    UnattributedEffect,
    /// A tool call that decided an intent again was answered without the
    /// effect reference the target had already given for it.
    MissingReference,
    /// Under the tool policy `refuse`, a step decided again was executed
    /// or answered with the first call's result instead of being refused
    /// explicitly (`rejected` or `conflict`).
    ReplanNotRefused,
    /// A call ended with an outcome its scenario does not accept.
    UnexpectedOutcome,
    /// Liveness: the agent never learned the outcome it could have learned.
    Stuck,
    /// A declared fault never acted in the trial: nothing was tested, so the
    /// trial is `unknown` unless something else failed.
    FaultNeverActed,
    /// The run could not complete (or a checker failed), so some invariants
    /// could not be judged.
    RunIncomplete,
    /// A warning: concurrent attempts reached a keyed provider and its
    /// idempotency store, not the layer, kept them to one effect.
    RaceAbsorbedByProvider,
    /// A warning, live: an effect of this trial's operation reached the
    /// provider during a later trial on the same process (the process kept
    /// working after answering). Counted here, never as the later trial's
    /// `unattributed-effect`.
    LateEffect,
}

impl Check {
    /// Every check with its name, most specific first: the one table names
    /// come from (reports, the schema's enum, the README).
    pub const ALL: [(Check, &'static str); 29] = [
        (Check::WrongDecision, "wrong-decision"),
        (Check::Disclosure, "disclosure"),
        (
            Check::ChangedPayloadDispatched,
            "changed-payload-dispatched",
        ),
        (Check::ReplayForChangedPayload, "replay-for-changed-payload"),
        (Check::FalseConflict, "false-conflict"),
        (Check::DeniedButDispatched, "denied-but-dispatched"),
        (
            Check::DispatchedAfterRevocation,
            "dispatched-after-revocation",
        ),
        (Check::UnmarkedReplay, "unmarked-replay"),
        (Check::StaleApplied, "stale-applied"),
        (Check::ClaimWithoutEffect, "claim-without-effect"),
        (Check::RejectedWithEffect, "rejected-with-effect"),
        (Check::HeldWithEffect, "held-with-effect"),
        (Check::FailedWithEffect, "failed-with-effect"),
        (Check::ReceiptMismatch, "receipt-mismatch"),
        (Check::ExpiredNotRefused, "expired-not-refused"),
        (Check::ExpiredNotReconciled, "expired-not-reconciled"),
        (Check::AnnotationContradicted, "annotation-contradicted"),
        (Check::DuplicateEffect, "duplicate-effect"),
        (Check::MissingEffect, "missing-effect"),
        (Check::ExtraDispatch, "extra-dispatch"),
        (Check::UnattributedEffect, "unattributed-effect"),
        (Check::MissingReference, "missing-reference"),
        (Check::ReplanNotRefused, "replan-not-refused"),
        (Check::UnexpectedOutcome, "unexpected-outcome"),
        (Check::Stuck, "stuck"),
        (Check::FaultNeverActed, "fault-never-acted"),
        (Check::RunIncomplete, "run-incomplete"),
        (Check::RaceAbsorbedByProvider, "race-absorbed-by-provider"),
        (Check::LateEffect, "late-effect"),
    ];

    /// A warning: shown under a cell that still passes, failing only under
    /// `--deny warnings`.
    pub fn is_warning(self) -> bool {
        matches!(self, Check::RaceAbsorbedByProvider | Check::LateEffect)
    }

    /// How serious a finding of this check is to the people charged or
    /// mailed, lower first: a side effect done twice, shown to the wrong
    /// caller, or done against orders; then one lost; then an answer that
    /// lies about the ledger; then a stuck agent; then what was not judged.
    pub fn seriousness(self) -> u8 {
        match self {
            Check::DuplicateEffect
            | Check::Disclosure
            | Check::ChangedPayloadDispatched
            | Check::DispatchedAfterRevocation
            | Check::DeniedButDispatched
            | Check::WrongDecision
            | Check::HeldWithEffect
            | Check::AnnotationContradicted => 0,
            Check::MissingEffect
            | Check::ExpiredNotRefused
            | Check::ExpiredNotReconciled
            | Check::UnattributedEffect
            | Check::ExtraDispatch => 1,
            Check::StaleApplied
            | Check::ClaimWithoutEffect
            | Check::ReceiptMismatch
            | Check::RejectedWithEffect
            | Check::FailedWithEffect
            | Check::UnmarkedReplay
            | Check::ReplayForChangedPayload
            | Check::FalseConflict
            | Check::MissingReference
            | Check::ReplanNotRefused
            | Check::UnexpectedOutcome => 2,
            Check::Stuck => 3,
            Check::RunIncomplete | Check::FaultNeverActed => 4,
            Check::RaceAbsorbedByProvider | Check::LateEffect => 5,
        }
    }

    /// Lower is more specific.
    pub fn specificity(self) -> u8 {
        self as u8
    }

    pub fn as_str(self) -> &'static str {
        Check::ALL[self as usize].1
    }

    pub fn parse(name: &str) -> Option<Check> {
        Check::ALL
            .iter()
            .find(|(_, known)| *known == name)
            .map(|(check, _)| *check)
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Check {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Check {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        Check::parse(&name).ok_or_else(|| {
            let names: Vec<&str> = Check::ALL.iter().map(|(_, name)| *name).collect();
            serde::de::Error::custom(format!(
                "unknown check '{name}'. Choose from: {}",
                names.join(", ")
            ))
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub check: Check,
    pub operation: Option<String>,
    /// One line: the operation, the counts, the attempt.
    pub message: String,
}

/// What one operation came to in one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperationSummary {
    pub name: String,
    pub effects: u32,
    pub expected_effects_min: u32,
    pub expected_effects_max: u32,
    pub dispatches: u32,
    /// What each attempt ended with, in the order they were sent.
    pub outcomes: Vec<String>,
    pub receipts: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub status: Status,
    pub safety: Status,
    pub liveness: Liveness,
    pub findings: Vec<Finding>,
    pub operations: Vec<OperationSummary>,
}

impl Verdict {
    /// The finding that decided the verdict: the most specific one.
    pub fn decisive(&self) -> Option<&Finding> {
        // A run cut short explains a fault that never acted, not the other
        // way round: its reason comes first.
        self.findings.iter().min_by_key(|finding| {
            (
                finding.check.is_warning(),
                finding.check == Check::FaultNeverActed,
                finding.check.specificity(),
            )
        })
    }

    /// The warnings found, each a finding that does not change the status.
    pub fn warnings(&self) -> impl Iterator<Item = &Finding> {
        (self.findings.iter()).filter(|finding| finding.check.is_warning())
    }

    /// The check that decided a failing verdict; `None` unless it failed.
    pub fn failed_check(&self) -> Option<Check> {
        (self.status == Status::Fail)
            .then(|| self.decisive().map(|finding| finding.check))
            .flatten()
    }

    /// The first finding that decided the verdict, as a one-line reason.
    pub fn reason(&self) -> Option<String> {
        let decisive = self.decisive()?;
        Some(format!("{}: {}", decisive.check, decisive.message))
    }

    /// Whether the trial is undecided only because a declared fault never
    /// acted: it ran to its end and tested nothing.
    pub fn vacuous(&self) -> bool {
        self.status == Status::Unknown
            && (self.findings.iter()).any(|finding| finding.check == Check::FaultNeverActed)
            && (self.findings.iter()).all(|finding| {
                finding.check == Check::FaultNeverActed || finding.check.is_warning()
            })
    }

    /// A verdict for a trial that could not be judged at all.
    pub fn unknown(message: String) -> Verdict {
        Verdict {
            status: Status::Unknown,
            safety: Status::Unknown,
            liveness: Liveness::Unknown,
            findings: vec![Finding {
                check: Check::RunIncomplete,
                operation: None,
                message,
            }],
            operations: Vec::new(),
        }
    }
}

/// Where a finding belongs in the verdict. Findings are listed run-level
/// first, then operation by operation (its counts, then attempt by attempt in
/// the order they were sent), then call by call, then why the run was cut
/// short: the order a reader follows the run in, whichever checker found them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Anchor {
    Run,
    /// An operation's counts; `slot` orders the checks about them.
    Operation {
        index: usize,
        slot: u8,
    },
    /// One attempt of an operation (its position in the view's order).
    Attempt {
        operation: usize,
        position: usize,
        slot: u8,
    },
    Call(u32),
    Incomplete,
}

/// What the checkers found, in the making.
#[derive(Debug, Default)]
pub(crate) struct Findings {
    found: Vec<(Anchor, Finding)>,
    /// Whether any call's liveness could be judged.
    liveness_judged: bool,
    /// Why a checker could not finish, if one could not.
    errors: Vec<String>,
}

impl Findings {
    pub(crate) fn fail(
        &mut self,
        anchor: Anchor,
        check: Check,
        operation: Option<&str>,
        message: String,
    ) {
        self.found.push((
            anchor,
            Finding {
                check,
                operation: operation.map(str::to_owned),
                message,
            },
        ));
    }

    pub(crate) fn liveness_judged(&mut self) {
        self.liveness_judged = true;
    }

    /// The findings in reading order (see [`Anchor`]).
    fn into_sorted(mut self) -> Vec<Finding> {
        self.found.sort_by_key(|(anchor, _)| *anchor);
        self.found.into_iter().map(|(_, finding)| finding).collect()
    }
}

/// One family of checks.
type Checker = fn(&RunView<'_>, &mut Findings);

/// Every family, in the order they run (the order of findings is the
/// [`Anchor`]'s, not this one).
const CHECKERS: [(&str, Checker); 11] = [
    ("authorization", authorization::check),
    ("effects", effects::check),
    ("payload", payload::check),
    ("honesty", honesty::check),
    ("policy", policy::check),
    ("disclosure", disclosure::check),
    ("retention", retention::check),
    ("liveness", liveness::check),
    ("faults", faults::check),
    ("annotations", annotations::check),
    ("race", race::check),
];

/// Judges one run of `trial` against `target`.
pub(crate) fn check(trial: &Trial<'_>, target: &TargetInfo, run: &RunOutput) -> Verdict {
    let view = RunView::new(trial, target, run);
    let mut findings = Findings::default();
    for (name, checker) in CHECKERS {
        // A checker that panics judged nothing: what the others found stands,
        // and the verdict cannot be a pass.
        let mut own = Findings::default();
        match catch_unwind(AssertUnwindSafe(|| checker(&view, &mut own))) {
            Ok(()) => {
                findings.found.extend(own.found);
                findings.liveness_judged |= own.liveness_judged;
            }
            Err(_) => findings.errors.push(format!(
                "the {name} checker failed; its checks were not judged"
            )),
        }
    }
    if let Some(error) = &run.error {
        findings.fail(
            Anchor::Incomplete,
            Check::RunIncomplete,
            None,
            error.clone(),
        );
    }
    for error in std::mem::take(&mut findings.errors) {
        findings.fail(Anchor::Incomplete, Check::RunIncomplete, None, error);
    }
    compose(findings, view.summaries())
}

/// Jepsen's composition: a failure dominates, then an incomplete judgement,
/// then a pass. Safety and liveness are judged apart.
fn compose(findings: Findings, operations: Vec<OperationSummary>) -> Verdict {
    let liveness_judged = findings.liveness_judged;
    let findings = findings.into_sorted();
    let incomplete = findings
        .iter()
        .any(|finding| finding.check == Check::RunIncomplete);
    // A fault that never acted leaves the safety claim untested; liveness
    // was still judged on what happened.
    let vacuous = findings
        .iter()
        .any(|finding| finding.check == Check::FaultNeverActed);
    let safety_failed = findings.iter().any(|finding| {
        !finding.check.is_warning()
            && !matches!(
                finding.check,
                Check::Stuck | Check::RunIncomplete | Check::FaultNeverActed
            )
    });
    let stuck = findings.iter().any(|finding| finding.check == Check::Stuck);
    let safety = match (safety_failed, incomplete || vacuous) {
        (true, _) => Status::Fail,
        (false, true) => Status::Unknown,
        (false, false) => Status::Pass,
    };
    let liveness = match (stuck, incomplete, liveness_judged) {
        (true, _, _) => Liveness::Fail,
        (false, true, _) => Liveness::Unknown,
        (false, false, true) => Liveness::Pass,
        (false, false, false) => Liveness::NotApplicable,
    };
    let status = if safety == Status::Fail || liveness == Liveness::Fail {
        Status::Fail
    } else if incomplete || vacuous {
        Status::Unknown
    } else {
        Status::Pass
    };
    Verdict {
        status,
        safety,
        liveness,
        findings,
        operations,
    }
}

#[cfg(test)]
pub(crate) mod tests;
