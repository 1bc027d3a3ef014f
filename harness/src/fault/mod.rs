//! Faults as rules: what a scenario declares and what `chaos explore` generates.
//!
//! Every fault names *when* it acts in protocol terms (the Nth dispatch, the
//! Nth answer, after the Nth call), never in wall-clock terms, so the same
//! schedule means the same thing in the simulator and against a real process.
//!
//! A fault is a rule (turmoil-net's `Rule` is the model): the nemesis shows
//! every rule each [`Event`] of the run, and a rule passes or gives a verdict,
//! an [`Action`]. An exchange (a dispatch, an answer) can suffer one thing:
//! of the verdicts on it, the one that leaves the least to happen wins (a
//! crash before a loss before a delay), and among equals the first rule in
//! the scenario. A moment (after a call, after a commit) is not an exchange:
//! every rule due then acts, in order.
//!
//! One file per kind. A kind owns its file shape and validation, its
//! description, its rule, its role, how `chaos explore` generates and shrinks
//! it, and what live mode does with it. Adding a kind is its file, one line
//! in [`kinds!`] below, a scenario that uses it and a row in docs/scenarios.md's
//! table of kinds; the compiler asks for the rest inside the kind's file.

mod approve;
mod authority_outage;
mod clock;
mod crash;
mod crash_agent;
mod delay;
mod interrupt;
mod lose;
mod provider_error;
mod redeliver;
mod replan;
mod revoke;
mod stall;
mod truncate;

use std::fmt;
use std::time::Duration;

use proptest::prelude::*;
use proptest::strategy::{BoxedStrategy, Union};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

pub use approve::DoubleApprove;
pub use authority_outage::AuthorityOutage;
pub use clock::AdvanceClock;
pub use crash::{CrashPoint, CrashTarget};
pub use crash_agent::CrashAgent;
pub use delay::Delay;
pub use interrupt::UserInterrupt;
pub use lose::{Hop, LoseRequest, LoseResponse, LossMode};
pub use provider_error::ProviderError;
pub use redeliver::Redeliver;
pub use replan::{Replan, Wording};
pub use revoke::{Grant, Revoke};
pub use stall::Stall;
pub use truncate::TruncateResult;

/// Declares every kind: its variant of [`Fault`] and of the file shape, and
/// its place in the registry. The order is the order error messages list the
/// kinds in and the order `chaos explore` draws from.
macro_rules! kinds {
    ($($variant:ident($kind:ty),)+) => {
        /// One fault of a schedule.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum Fault {
            $($variant($kind),)+
        }

        /// A `[[fault]]` table as written: the kind names its shape.
        #[derive(Debug, Serialize, Deserialize)]
        #[serde(tag = "kind", rename_all = "kebab-case")]
        pub(crate) enum FaultFile {
            $($variant(<$kind as Declared>::File),)+
        }

        impl Fault {
            /// Every kind, as written in a scenario.
            pub const KINDS: &'static [&'static str] = &[$(<$kind as Declared>::NAME,)+];

            fn rule(&self) -> &dyn Kind {
                match self {
                    $(Fault::$variant(fault) => fault,)+
                }
            }

            fn rule_mut(&mut self) -> &mut dyn Kind {
                match self {
                    $(Fault::$variant(fault) => fault,)+
                }
            }

            /// The fault as its `[[fault]]` table.
            pub(crate) fn to_file(&self) -> FaultFile {
                match self {
                    $(Fault::$variant(fault) => FaultFile::$variant(fault.to_file()),)+
                }
            }
        }

        impl FaultFile {
            /// Checks what the file shape cannot say, for a scenario of `calls` calls.
            pub(crate) fn validate(self, calls: u32) -> Result<Fault, String> {
                match self {
                    $(FaultFile::$variant(file) => {
                        <$kind as Declared>::from_file(file, calls).map(Fault::$variant)
                    })+
                }
            }
        }

        /// Every fault `chaos explore` may draw, in `space`.
        pub(crate) fn strategy(space: Space) -> impl Strategy<Value = Fault> {
            Union::new_weighted(vec![
                $((
                    <$kind as Declared>::WEIGHT,
                    <$kind as Declared>::strategy(space).prop_map(Fault::$variant).boxed(),
                ),)+
            ])
        }
    };
}

kinds! {
    LoseResponse(LoseResponse),
    LoseRequest(LoseRequest),
    Delay(Delay),
    CrashTarget(CrashTarget),
    AdvanceClock(AdvanceClock),
    Revoke(Revoke),
    Replan(Replan),
    Stall(Stall),
    CrashAgent(CrashAgent),
    DoubleApprove(DoubleApprove),
    ProviderError(ProviderError),
    Redeliver(Redeliver),
    AuthorityOutage(AuthorityOutage),
    TruncateResult(TruncateResult),
    UserInterrupt(UserInterrupt),
}

/// What a fault does, whatever its kind. Object-safe: the nemesis, the
/// reports and the live driver hold faults of every kind.
pub(crate) trait Kind: fmt::Display {
    fn name(&self) -> &'static str;
    /// The role that feels it (the one that never hears back, or the one
    /// killed, revoked or moved in time).
    fn role(&self) -> Role;
    /// The rule: its verdict on `event`, or `None` to let it pass.
    fn verdict(&self, event: Event) -> Option<Action>;
    /// Its moment, if it waits for one (most kinds act on exchanges instead).
    fn trigger(&self) -> Option<Trigger> {
        None
    }
    /// The same, to renumber it when shrinking removes calls.
    fn trigger_mut(&mut self) -> Option<&mut Trigger> {
        None
    }
    /// Each way to make it one step simpler, for shrinking.
    fn simpler(&self) -> Vec<Fault>;
    /// What live mode does with it.
    fn live(&self) -> Live;
    /// Whether it makes the agent decide a step again (a new tool call).
    fn re_plans(&self) -> bool {
        false
    }
    /// Whether what it re-plans re-words the workload's free-text field.
    fn drifts(&self) -> bool {
        false
    }
    /// The key and length of a wait it makes a live run sit through in real
    /// time; a simulated one passes it for free.
    fn real_wait(&self) -> Option<(&'static str, Duration)> {
        None
    }
}

/// How a kind is written, read back and generated.
pub(crate) trait Declared: Kind + Sized {
    const NAME: &'static str;
    /// How often `chaos explore` draws it, relative to the other kinds.
    const WEIGHT: u32;
    /// Its `[[fault]]` table (serde, strict).
    type File: Serialize + DeserializeOwned;
    fn from_file(file: Self::File, calls: u32) -> Result<Self, String>;
    fn to_file(&self) -> Self::File;
    fn strategy(space: Space) -> BoxedStrategy<Self>;
}

impl Fault {
    /// The kebab-case kind, as written in a scenario.
    pub fn kind(&self) -> &'static str {
        self.rule().name()
    }

    pub fn role(&self) -> Role {
        self.rule().role()
    }

    pub(crate) fn verdict(&self, event: Event) -> Option<Action> {
        self.rule().verdict(event)
    }

    /// When it fires, for a fault that waits for a moment.
    pub fn trigger(&self) -> Option<Trigger> {
        self.rule().trigger()
    }

    pub(crate) fn trigger_mut(&mut self) -> Option<&mut Trigger> {
        self.rule_mut().trigger_mut()
    }

    pub(crate) fn simpler(&self) -> Vec<Fault> {
        self.rule().simpler()
    }

    pub(crate) fn live(&self) -> Live {
        self.rule().live()
    }

    /// Whether it acts on a dispatch to the provider (so it needs one).
    pub(crate) fn acts_on_dispatches(&self) -> bool {
        self.dispatch_verdicts().next().is_some()
    }

    /// What it does to any dispatch it acts on. Asked of the rule itself,
    /// so a new kind needs no entry anywhere; nth counts past a scenario's
    /// size are never reached anyway.
    pub(crate) fn dispatch_verdicts(&self) -> impl Iterator<Item = Action> + '_ {
        const DISPATCHES_ASKED: u32 = 4096;
        (1..=DISPATCHES_ASKED).filter_map(|nth| self.verdict(Event::Dispatch(nth)))
    }

    pub(crate) fn re_plans(&self) -> bool {
        self.rule().re_plans()
    }

    pub(crate) fn real_wait(&self) -> Option<(&'static str, Duration)> {
        self.rule().real_wait()
    }

    pub(crate) fn drifts(&self) -> bool {
        self.rule().drifts()
    }
}

/// A `[[fault]]` table as written, with what every kind may say besides
/// its own fields: `optional = true`, for a fault whose acting is not the
/// point (a crash on a second dispatch that a layer holding never makes).
/// Any other declared fault that never acts in a trial leaves that trial
/// `unknown`: nothing was tested.
///
/// Read as the kind's own strict shape: the scenario reader takes the key
/// out of the text first (`scenario::file`), so every error keeps its line.
#[derive(Debug)]
pub(crate) struct FaultEntry {
    pub optional: bool,
    pub file: FaultFile,
}

impl<'de> Deserialize<'de> for FaultEntry {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let file = FaultFile::deserialize(deserializer)?;
        Ok(FaultEntry {
            optional: false,
            file,
        })
    }
}

impl Serialize for FaultEntry {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::Error;
        if !self.optional {
            return self.file.serialize(serializer);
        }
        let mut table = toml::Table::try_from(&self.file).map_err(S::Error::custom)?;
        table.insert("optional".into(), toml::Value::Boolean(true));
        table.serialize(serializer)
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.rule().fmt(f)
    }
}

/// Which role a fault acts on; `clock` jumps move every role's wall clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    Agent,
    Target,
    Provider,
    Authority,
    Clock,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Agent => "agent",
            Role::Target => "target",
            Role::Provider => "provider",
            Role::Authority => "authority",
            Role::Clock => "clock",
        }
    }
}

/// A protocol point the nemesis shows every rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// The provider received its Nth dispatch (1-based).
    Dispatch(u32),
    /// The agent read the target's Nth answer (1-based, over the whole run).
    Answer(u32),
    /// The authority received its Nth introspection (1-based).
    Introspection(u32),
    /// A moment: see [`Trigger`].
    Moment(Trigger),
}

/// When a moment's fault (a clock jump, a revocation, a re-plan) fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Trigger {
    /// After the agent's Nth call step has ended (1-based).
    AfterCall(u32),
    /// Right after the provider acted on its Nth dispatch.
    AfterCommit(u32),
    /// Right after the agent read its Nth answer (1-based over the run),
    /// whether a fault then loses it or not.
    AfterAnswer(u32),
    /// When the agent's Nth call step is about to start.
    BeforeCall(u32),
    /// Right after the authority answered its Nth introspection, before the
    /// target acts on the answer: a grant that flips in flight.
    AfterIntrospection(u32),
}

impl Trigger {
    /// Reads `after-call = N` / `after-commit = N`: exactly one, naming a call
    /// of a scenario with `calls` calls, or a dispatch.
    pub(crate) fn from_file(
        kind: &str,
        after_call: Option<u32>,
        after_commit: Option<u32>,
        calls: u32,
    ) -> Result<Trigger, String> {
        match (after_call, after_commit) {
            (Some(call), None) if call == 0 || call > calls => Err(format!(
                "after-call = {call} names no call: this scenario has calls 1 to {calls}"
            )),
            (Some(call), None) => Ok(Trigger::AfterCall(call)),
            (None, Some(0)) => Err("after-commit counts dispatches from 1, not 0".into()),
            (None, Some(dispatch)) => Ok(Trigger::AfterCommit(dispatch)),
            _ => Err(format!(
                "{kind} needs exactly one of after-call = N or after-commit = N"
            )),
        }
    }

    /// `(after-call, after-commit)`, as written; a trigger only the harness
    /// sets (an answer, a call's start) is never written this way.
    pub(crate) fn to_file(self) -> (Option<u32>, Option<u32>) {
        match self {
            Trigger::AfterCall(call) => (Some(call), None),
            Trigger::AfterCommit(dispatch) => (None, Some(dispatch)),
            Trigger::AfterAnswer(_) | Trigger::BeforeCall(_) | Trigger::AfterIntrospection(_) => {
                (None, None)
            }
        }
    }

    /// One step simpler: an earlier call, dispatch or answer.
    pub(crate) fn simpler(self) -> Vec<Trigger> {
        let (n, same): (u32, fn(u32) -> Trigger) = match self {
            Trigger::AfterCall(call) => (call, Trigger::AfterCall),
            Trigger::AfterCommit(dispatch) => (dispatch, Trigger::AfterCommit),
            Trigger::AfterAnswer(answer) => (answer, Trigger::AfterAnswer),
            Trigger::BeforeCall(call) => (call, Trigger::BeforeCall),
            Trigger::AfterIntrospection(nth) => (nth, Trigger::AfterIntrospection),
        };
        crate::simplify::lower_u32(n, 1)
            .into_iter()
            .map(same)
            .collect()
    }

    pub(crate) fn strategy(space: Space) -> impl Strategy<Value = Trigger> {
        prop_oneof![
            (1..=space.calls).prop_map(Trigger::AfterCall),
            nth(space).prop_map(Trigger::AfterCommit),
        ]
    }
}

impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Trigger::AfterCall(n) => write!(f, "after call {n}"),
            Trigger::AfterCommit(n) => write!(f, "after dispatch {n} was committed"),
            Trigger::AfterAnswer(n) => write!(f, "after answer {n}"),
            Trigger::BeforeCall(n) => write!(f, "when call {n} starts"),
            Trigger::AfterIntrospection(n) => write!(f, "right after introspection {n}"),
        }
    }
}

/// A rule's verdict: what goes wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// The provider does not act on the dispatch; the target is killed
    /// holding it, and restarted this much later.
    CrashBeforeDispatch { restart_after: Duration },
    /// The provider does not act on the dispatch; the connection is held or reset.
    LoseRequest(LossMode),
    /// The provider acts, then the target is killed before it hears back.
    CrashAfterCommit { restart_after: Duration },
    /// The answer on `hop` is lost after the sender acted.
    LoseAnswer { hop: Hop, mode: LossMode },
    /// The provider acts, then holds its answer past the agent's timeout;
    /// the agent, having heard nothing, re-plans instead of retrying.
    Stall,
    /// The answer on `hop` arrives this late.
    DelayAnswer { hop: Hop, by: Duration },
    /// The provider answers `500`, after committing the effect or instead.
    ProviderError { committed: bool },
    /// The attempt is delivered to the target again, after it was processed
    /// and before its answer reaches the agent.
    Redeliver,
    /// The authority does not answer this introspection (`503`).
    AuthorityDown,
    /// Every wall clock jumps forward.
    AdvanceClock(Duration),
    /// The caller loses this grant.
    Revoke(Grant),
    /// The planner decides the step of the answer just read again, `times`
    /// times: a new tool call each (an injected "the previous attempt failed").
    Replan {
        times: u32,
        wording: Wording,
        /// Each re-planned tool call is signed off by a human at the
        /// authority before it is sent.
        signed_off: bool,
    },
    /// The orchestrator dies: its attempts in flight are forgotten, and after
    /// `restart_after` it replays each step it was running.
    CrashAgent { restart_after: Duration },
    /// The step about to start is approved twice: one more execution of it,
    /// `gap` after the first.
    ApproveAgain { gap: Duration },
    /// The target's answer reaches the agent cut short: unreadable, so the
    /// planner decides the step again instead of retrying it.
    TruncateResult,
    /// The user says "try again" mid-call: the agent drops its attempts in
    /// flight and the planner decides their step again at once.
    Interrupt,
}

impl Action {
    /// What it did, in a few words, for the reports' `faults` block. Every
    /// verdict by name: a new one must say what it does.
    pub fn what(&self) -> String {
        let took = |duration: &Duration| humantime::format_duration(*duration).to_string();
        match self {
            Action::CrashBeforeDispatch { .. } => "killed the target before a dispatch".into(),
            Action::LoseRequest(mode) => format!("lost a request ({mode})"),
            Action::CrashAfterCommit { .. } => "killed the target after a commit".into(),
            Action::LoseAnswer { hop, mode } => format!("lost an answer {hop} ({mode})"),
            Action::Stall => "stalled a dispatch past the agent's timeout".into(),
            Action::DelayAnswer { hop, by } => format!("delayed an answer {hop} by {}", took(by)),
            Action::ProviderError { committed: true } => "answered 500 after committing".into(),
            Action::ProviderError { committed: false } => "answered 500 without committing".into(),
            Action::Redeliver => "delivered an attempt again".into(),
            Action::AuthorityDown => "kept the authority from answering".into(),
            Action::AdvanceClock(by) => format!("moved every clock {}", took(by)),
            Action::Revoke(Grant::Token) => "revoked the caller's token".into(),
            Action::Revoke(Grant::Scope) => "removed the tool from the caller's scope".into(),
            Action::Replan {
                times,
                signed_off: false,
                ..
            } => format!("made the planner decide again x{times}"),
            Action::Replan {
                times,
                signed_off: true,
                ..
            } => format!("made the planner decide again x{times}, signed off"),
            Action::CrashAgent { .. } => "crashed the agent".into(),
            Action::ApproveAgain { .. } => "approved a step again".into(),
            Action::TruncateResult => "truncated an answer to the agent".into(),
            Action::Interrupt => "interrupted the agent mid-call".into(),
        }
    }

    /// Of two verdicts on one exchange, the lower wins: it leaves less to happen.
    fn precedence(self) -> u8 {
        match self {
            Action::CrashBeforeDispatch { .. } => 0,
            Action::LoseRequest(_) | Action::AuthorityDown => 1,
            Action::CrashAfterCommit { .. } => 2,
            // A truncated answer is an answer lost to the agent, read or not.
            Action::LoseAnswer { .. } | Action::ProviderError { .. } | Action::TruncateResult => 3,
            Action::Stall => 4,
            Action::Redeliver => 5,
            Action::DelayAnswer { .. } => 6,
            Action::AdvanceClock(_)
            | Action::Revoke(_)
            | Action::Replan { .. }
            | Action::CrashAgent { .. }
            | Action::ApproveAgain { .. }
            | Action::Interrupt => 7,
        }
    }
}

/// The verdict that wins an exchange among `faults`' verdicts on `event`,
/// with the index of the fault that gave it.
pub(crate) fn winner(faults: &[Fault], event: Event) -> Option<(usize, Action)> {
    faults
        .iter()
        .enumerate()
        .filter_map(|(index, fault)| Some((index, fault.verdict(event)?)))
        .min_by_key(|(index, action)| (action.precedence(), *index))
}

/// What live mode does with a fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Live {
    /// The same as the simulator, over real sockets.
    AsSimulated,
    /// The same, and it costs a restart of the target process.
    Restarts,
    /// A clock jump of this much: nobody may move a real clock, so it is
    /// waited out, with retentions shortened (`live::schedule`).
    ClockJump(Duration),
}

/// Checks a count a fault repeats something by: it counts from 1.
pub(crate) fn check_times(kind: &str, field: &str, times: u32, most: u32) -> Result<(), String> {
    if !(1..=most).contains(&times) {
        return Err(format!(
            "{kind}: {field} must be between 1 and {most}, not {times}"
        ));
    }
    Ok(())
}

/// The part of the fault space `chaos explore` draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Space {
    /// Calls per case: an `after-call` names one of them.
    pub calls: u32,
    /// Faults act on one of the first this-many dispatches or answers.
    pub nth: u32,
}

pub(crate) fn nth(space: Space) -> impl Strategy<Value = u32> {
    1..=space.nth
}

/// Checks a fault's `nth`: it counts from 1.
pub(crate) fn check_nth(kind: &str, nth: u32) -> Result<(), String> {
    if nth == 0 {
        return Err(format!("{kind}: nth counts from 1, not 0"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, calls: u32) -> Result<Fault, String> {
        let file: FaultFile = toml::from_str(text).map_err(|error| error.to_string())?;
        file.validate(calls)
    }

    #[test]
    fn every_kind_reads_back_what_it_writes() {
        let faults = [
            "kind = \"lose-response\"\nhop = \"target-to-agent\"\nnth = 2\nmode = \"reset\"",
            "kind = \"lose-request\"\nnth = 1\nmode = \"hold\"",
            "kind = \"delay\"\nhop = \"provider-to-target\"\nnth = 1\nby = \"5ms\"",
            "kind = \"crash-target\"\nat = \"after-commit\"\nnth = 1\nrestart-after = \"10ms\"",
            "kind = \"advance-clock\"\nby = \"25h\"\nafter-call = 1",
            "kind = \"revoke\"\ngrant = \"scope\"\nafter-commit = 2",
            "kind = \"revoke\"\ngrant = \"token\"\nafter-introspection = 1",
            "kind = \"replan\"\nnth = 1\ntimes = 2\npayload = \"drifted\"",
            "kind = \"stall\"\nnth = 1",
            "kind = \"crash-agent\"\nafter-commit = 1\nrestart-after = \"5ms\"",
            "kind = \"double-approve\"\ncall = 1\ngap = \"1ms\"",
            "kind = \"provider-error\"\nnth = 1\ncommitted = true",
            "kind = \"redeliver\"\nnth = 2",
            "kind = \"authority-outage\"\nnth = 1\ntimes = 2",
            "kind = \"truncate-result\"\nnth = 1",
            "kind = \"user-interrupt\"\nafter-commit = 1",
        ];
        let mut seen = Vec::new();
        for text in faults {
            let fault = parse(text, 1).unwrap_or_else(|error| panic!("{text}: {error}"));
            let written = toml::to_string(&fault.to_file()).unwrap();
            assert_eq!(parse(&written, 1), Ok(fault.clone()), "{written}");
            seen.push(fault.kind());
        }
        seen.dedup();
        assert_eq!(seen, Fault::KINDS, "a kind without a case here");
    }

    #[test]
    fn counts_that_repeat_start_at_one() {
        let error = parse("kind = \"replan\"\nnth = 1\ntimes = 0", 1).unwrap_err();
        assert!(
            error.contains("times must be between 1 and 8, not 0"),
            "{error}"
        );
        let error = parse("kind = \"double-approve\"\ncall = 2", 1).unwrap_err();
        assert!(error.contains("call = 2 names no call"), "{error}");
    }

    #[test]
    fn a_user_interrupt_comes_mid_call_only() {
        let error = parse("kind = \"user-interrupt\"\nafter-commit = 0", 1).unwrap_err();
        assert!(
            error.contains("after-commit counts dispatches from 1"),
            "{error}"
        );
        let error = parse("kind = \"user-interrupt\"\nafter-call = 1", 1).unwrap_err();
        assert!(error.contains("unknown field `after-call`"), "{error}");
        let error = parse("kind = \"truncate-result\"\nnth = 0", 1).unwrap_err();
        assert!(
            error.contains("truncate-result: nth counts from 1"),
            "{error}"
        );
    }

    #[test]
    fn a_kind_rejects_a_field_it_does_not_have() {
        let error = parse(
            "kind = \"lose-request\"\nnth = 1\nmode = \"hold\"\nhop = \"target-to-agent\"",
            1,
        )
        .unwrap_err();
        assert!(error.contains("unknown field `hop`"), "{error}");
    }

    #[test]
    fn a_crash_outranks_a_loss_which_outranks_a_delay() {
        let lose = parse(
            "kind = \"lose-response\"\nhop = \"provider-to-target\"\nnth = 1\nmode = \"hold\"",
            1,
        )
        .unwrap();
        let delay = parse(
            "kind = \"delay\"\nhop = \"provider-to-target\"\nnth = 1\nby = \"5ms\"",
            1,
        )
        .unwrap();
        let crash = parse(
            "kind = \"crash-target\"\nat = \"after-commit\"\nnth = 1\nrestart-after = \"10ms\"",
            1,
        )
        .unwrap();
        let faults = [delay.clone(), lose.clone(), crash];
        let (index, action) = winner(&faults, Event::Dispatch(1)).unwrap();
        assert_eq!(index, 2);
        assert!(matches!(action, Action::CrashAfterCommit { .. }));
        let (index, _) = winner(&faults[..2], Event::Dispatch(1)).unwrap();
        assert_eq!(index, 1, "a loss outranks a delay written before it");
        assert_eq!(winner(&faults, Event::Dispatch(2)), None);
        assert_eq!(
            winner(&[delay.clone(), delay], Event::Dispatch(1))
                .unwrap()
                .0,
            0
        );
    }

    #[test]
    fn a_kind_says_what_live_waits_out_in_real_time() {
        let waits = [
            (
                "kind = \"crash-target\"\nat = \"after-commit\"\nnth = 1\nrestart-after = \"10ms\"",
                Some(("restart-after", 10)),
            ),
            (
                "kind = \"crash-agent\"\nafter-commit = 1\nrestart-after = \"5ms\"",
                Some(("restart-after", 5)),
            ),
            (
                "kind = \"delay\"\nhop = \"provider-to-target\"\nnth = 1\nby = \"7ms\"",
                Some(("by", 7)),
            ),
            (
                "kind = \"double-approve\"\ncall = 1\ngap = \"3ms\"",
                Some(("gap", 3)),
            ),
            ("kind = \"stall\"\nnth = 1", None),
            (
                "kind = \"advance-clock\"\nby = \"25h\"\nafter-call = 1",
                None,
            ),
        ];
        for (text, wait) in waits {
            let fault = parse(text, 1).unwrap();
            let wait = wait.map(|(key, ms)| (key, Duration::from_millis(ms)));
            assert_eq!(fault.real_wait(), wait, "{text}");
        }
    }

    #[test]
    fn triggers_name_exactly_one_moment() {
        assert_eq!(
            Trigger::from_file("revoke", Some(1), None, 2),
            Ok(Trigger::AfterCall(1))
        );
        assert!(Trigger::from_file("revoke", Some(3), None, 2)
            .unwrap_err()
            .contains("calls 1 to 2"));
        assert!(Trigger::from_file("revoke", None, Some(0), 2)
            .unwrap_err()
            .contains("from 1"));
        for (call, commit) in [(None, None), (Some(1), Some(1))] {
            assert!(Trigger::from_file("revoke", call, commit, 2)
                .unwrap_err()
                .contains("exactly one"));
        }
    }
}
