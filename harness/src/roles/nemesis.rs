//! The nemesis: holds the fault schedule and answers, at each protocol point,
//! "what goes wrong here?". Roles ask it; it never reaches into them.
//!
//! Every fault is a rule ([`crate::fault`]): at an exchange (the provider's
//! Nth dispatch, the agent's Nth answer) the winning verdict decides its
//! fate; at a moment (after a call, after a commit) every rule due acts.
//!
//! Faults that need the transport (a crash is a turmoil `crash` in the
//! simulator and a SIGKILL live) are queued for the driver, whose side of
//! them is [`Crashes`].
//!
//! A clock jump is an offset on the harness clock in the simulator, where every
//! role reads that clock. A live target reads the machine's clock, which nobody
//! may move; there a jump becomes a wait ([`Nemesis::wait_out_clock_jumps`])
//! that the agent sits out before its next step, with retentions shortened so
//! the wait is seconds.

use chaos_kit::sync::lock;
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chaos_kit::clock::millis;
use tokio::sync::watch;

use crate::fault::{self, Action, Event, Fault, Trigger, Wording};
use crate::history::{FaultEvent, Happened, Ms};
use crate::roles::clock::{HarnessClock, Timeline};
use crate::roles::grants::{Grants, Introspections};

pub(crate) struct Nemesis {
    faults: Vec<Fault>,
    timeline: Arc<dyn Timeline>,
    clock: Arc<HarnessClock>,
    /// The callers' grants, which revocations take away.
    grants: Grants,
    /// The callers' tokens (one per tenant) and the tool revocations apply to.
    tokens: Vec<String>,
    tool: String,
    /// Live mode: clock jumps (by fault index) turned into real waits.
    clock_waits: BTreeMap<usize, ClockWait>,
    state: Mutex<NemesisState>,
    /// How many times the agent (the orchestrator) has crashed: its workers
    /// watch it, to forget what they were waiting for.
    agent_crashes: watch::Sender<u64>,
    /// How many times the user has said "try again" mid-call: the agent's
    /// workers watch it, to drop the attempt they wait on and decide again.
    interrupts: watch::Sender<u64>,
}

/// What happened to an answer the agent read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct AnswerFate {
    /// The exchange's fate: lost or delayed on its way to the agent.
    pub action: Option<Action>,
    /// Re-plans of the answer's step the planner makes next, one entry per fault.
    pub replans: Vec<Replans>,
}

/// One fault's re-plans of a step, as the planner makes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Replans {
    pub times: u32,
    pub wording: Wording,
    /// The fault (by index) whose human signs off each of them at the
    /// authority before it is sent, when one does.
    pub signed_off_by: Option<usize>,
}

/// A re-planned tool call a human signs off, as the agent decided it.
pub(crate) struct SignOff<'a> {
    /// The fault that has it signed off.
    pub fault: usize,
    /// The caller's bearer token: the authority knows the caller by it.
    pub token: &'a str,
    pub tool: &'a str,
    pub call: u32,
    pub decision: u32,
    pub tool_use_id: &'a str,
    /// What the call asks: invoice, recipient and body, empty where absent.
    pub action: [&'a str; 3],
}

/// What the planner does at a moment, handed back to the agent, which asked.
#[derive(Default)]
struct ForThePlanner {
    /// One entry per re-planning fault.
    replans: Vec<Replans>,
    /// The gaps after which the step is executed again, one per second approval.
    second_approvals: Vec<Duration>,
}

/// How a clock jump is carried out live: a wait, and a note for the history
/// saying what it stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClockWait {
    pub wait: Duration,
    pub note: String,
}

#[derive(Default)]
struct NemesisState {
    events: Vec<FaultEvent>,
    /// Restart delays of the crashes the driver has yet to carry out.
    crash_requests: VecDeque<Duration>,
    answers_received: u32,
    introspections: u32,
    /// Waits owed by the agent before its next step (live clock jumps).
    pending_wait: Duration,
    /// Stalled dispatches whose re-plan no worker has made yet.
    stalls: u32,
    /// How long the agent stays down after its last crash.
    agent_restart_after: Duration,
    /// A crash after a call ended: the agent replays that call on restart.
    replay_after_call: Option<Duration>,
}

impl Nemesis {
    /// `grants` are the callers' grants its revocations take away: the
    /// authority's, given as the authority itself or as its grants.
    pub(crate) fn new(
        faults: Vec<Fault>,
        timeline: Arc<dyn Timeline>,
        clock: Arc<HarnessClock>,
        grants: Grants,
        tokens: Vec<String>,
        tool: String,
    ) -> Nemesis {
        Nemesis {
            faults,
            timeline,
            clock,
            grants,
            tokens,
            tool,
            clock_waits: BTreeMap::new(),
            state: Mutex::new(NemesisState::default()),
            agent_crashes: watch::Sender::new(0),
            interrupts: watch::Sender::new(0),
        }
    }

    /// Live mode: the clock jumps with these fault indices are carried out as
    /// waits instead of clock offsets.
    pub(crate) fn wait_out_clock_jumps(mut self, waits: BTreeMap<usize, ClockWait>) -> Nemesis {
        self.clock_waits = waits;
        self
    }

    /// The wait the agent owes before its next step, if a live clock jump fired.
    /// Always `None` in the simulator.
    pub(crate) fn take_wait(&self) -> Option<Duration> {
        let mut state = lock(&self.state);
        let wait = std::mem::take(&mut state.pending_wait);
        (!wait.is_zero()).then_some(wait)
    }

    /// The provider's Nth dispatch arrived: what happens to it, if anything.
    pub(crate) fn dispatch(&self, nth: u32) -> Option<Action> {
        self.exchange(Event::Dispatch(nth))
    }

    /// The agent read an answer from the target: what happens to it, and
    /// what the planner does after it.
    pub(crate) fn answer(&self) -> AnswerFate {
        let nth = {
            let mut state = lock(&self.state);
            state.answers_received += 1;
            state.answers_received
        };
        let action = self.exchange(Event::Answer(nth));
        let replans = self.moment(Trigger::AfterAnswer(nth)).replans;
        AnswerFate { action, replans }
    }

    /// The agent's Nth call is about to start: the gaps after which it is
    /// executed again, once per second approval.
    pub(crate) fn before_call(&self, number: u32) -> Vec<Duration> {
        self.moment(Trigger::BeforeCall(number)).second_approvals
    }

    /// Whether a stalled dispatch still waits for the agent to decide again;
    /// the first worker to ask makes that re-plan.
    pub(crate) fn take_stall(&self) -> bool {
        let mut state = lock(&self.state);
        let stalled = state.stalls > 0;
        state.stalls = state.stalls.saturating_sub(1);
        stalled
    }

    /// The agent's crashes, as a count its workers watch.
    pub(crate) fn agent_crashes(&self) -> watch::Receiver<u64> {
        self.agent_crashes.subscribe()
    }

    /// The user's interrupts, as a count the agent's workers watch.
    pub(crate) fn interrupts(&self) -> watch::Receiver<u64> {
        self.interrupts.subscribe()
    }

    /// How long the agent stays down after its last crash.
    pub(crate) fn agent_restart_after(&self) -> Duration {
        lock(&self.state).agent_restart_after
    }

    /// A crash that came after a call ended: how long until the agent,
    /// restarted, replays that call.
    pub(crate) fn take_replay(&self) -> Option<Duration> {
        lock(&self.state).replay_after_call.take()
    }

    /// A human signs off a re-planned tool call at the authority, as the
    /// fault `sign_off.fault` has it: recorded where the target reads
    /// approvals, and in the history, before the tool call is sent.
    pub(crate) fn sign_off(&self, sign_off: SignOff<'_>) {
        let SignOff {
            fault,
            token,
            tool,
            call,
            decision,
            tool_use_id,
            action,
        } = sign_off;
        if self.grants.sign_off(token, tool, tool_use_id, action) {
            self.record(
                Happened::SignedOff {
                    index: fault,
                    call,
                    decision,
                },
                format!(
                    "a human signed off tool call {tool_use_id} (decision {decision} of call {call}) at the authority"
                ),
            );
        }
    }

    /// Called by the provider right after it acted on its Nth dispatch.
    pub(crate) fn after_commit(&self, nth: u32) {
        self.moment(Trigger::AfterCommit(nth));
    }

    /// Called by the agent when its Nth call step has ended.
    pub(crate) fn after_call(&self, number: u32) {
        self.moment(Trigger::AfterCall(number));
    }

    /// One thing happens to an exchange: the winning verdict, alone recorded.
    /// The role that asked carries it out; what is left here is what others
    /// must hear of it later (the driver, a crash; the agent, a stall).
    fn exchange(&self, event: Event) -> Option<Action> {
        let (index, action) = fault::winner(&self.faults, event)?;
        self.record(
            Happened::Fault { index, action },
            self.faults[index].to_string(),
        );
        match action {
            Action::CrashBeforeDispatch { restart_after }
            | Action::CrashAfterCommit { restart_after } => {
                lock(&self.state).crash_requests.push_back(restart_after);
            }
            Action::Stall => lock(&self.state).stalls += 1,
            Action::LoseRequest(_)
            | Action::LoseAnswer { .. }
            | Action::DelayAnswer { .. }
            | Action::ProviderError { .. }
            | Action::Redeliver
            | Action::AuthorityDown
            | Action::TruncateResult => {}
            // A rule that waits for a moment has no verdict on an exchange.
            Action::AdvanceClock(_)
            | Action::Revoke(_)
            | Action::Replan { .. }
            | Action::CrashAgent { .. }
            | Action::ApproveAgain { .. }
            | Action::Interrupt => {}
        }
        Some(action)
    }

    /// Every rule due at a moment acts, in the scenario's order. What the
    /// world suffers (a clock jump, a revocation, the agent's crash) happens
    /// here; what the planner does (a re-plan, a second approval) is handed
    /// back to the agent, which asked.
    fn moment(&self, trigger: Trigger) -> ForThePlanner {
        let mut for_the_planner = ForThePlanner::default();
        for (index, fault) in self.faults.iter().enumerate() {
            let Some(action) = fault.verdict(Event::Moment(trigger)) else {
                continue;
            };
            match action {
                Action::AdvanceClock(by) => match self.clock_waits.get(&index) {
                    Some(live) => {
                        lock(&self.state).pending_wait += live.wait;
                        let what = Happened::ClockWaited {
                            index,
                            by,
                            waited: live.wait,
                        };
                        self.record(what, format!("{fault} ({})", live.note));
                        continue;
                    }
                    None => self.clock.advance(millis(by)),
                },
                Action::Revoke(grant) => {
                    for token in &self.tokens {
                        self.grants.revoke(token, grant, &self.tool);
                    }
                }
                Action::CrashAgent { restart_after } => {
                    let mut state = lock(&self.state);
                    state.agent_restart_after = restart_after;
                    if matches!(trigger, Trigger::AfterCall(_)) {
                        // Nothing is in flight: on restart, the agent replays
                        // the call it had finished but not recorded.
                        state.replay_after_call = Some(restart_after);
                    } else {
                        drop(state);
                        self.agent_crashes.send_modify(|crashes| *crashes += 1);
                    }
                }
                Action::Replan {
                    times,
                    wording,
                    signed_off,
                } => for_the_planner.replans.push(Replans {
                    times,
                    wording,
                    signed_off_by: signed_off.then_some(index),
                }),
                Action::ApproveAgain { gap } => for_the_planner.second_approvals.push(gap),
                Action::Interrupt => self.interrupts.send_modify(|interrupts| *interrupts += 1),
                // A rule that acts on exchanges has no verdict at a moment.
                Action::CrashBeforeDispatch { .. }
                | Action::LoseRequest(_)
                | Action::CrashAfterCommit { .. }
                | Action::LoseAnswer { .. }
                | Action::Stall
                | Action::DelayAnswer { .. }
                | Action::ProviderError { .. }
                | Action::Redeliver
                | Action::AuthorityDown
                | Action::TruncateResult => continue,
            }
            self.record(Happened::Fault { index, action }, fault.to_string());
        }
        for_the_planner
    }

    /// The restart delay of the next crash for the driver to carry out.
    fn take_crash_request(&self) -> Option<Duration> {
        lock(&self.state).crash_requests.pop_front()
    }

    /// Records what the driver carried out (a kill, a restart).
    pub(crate) fn record_at(&self, at: Ms, what: Happened, description: String) {
        lock(&self.state).events.push(FaultEvent {
            at,
            what,
            description,
        });
    }

    fn record(&self, what: Happened, description: String) {
        self.record_at(self.timeline.now(), what, description);
    }

    pub(crate) fn events(&self) -> Vec<FaultEvent> {
        lock(&self.state).events.clone()
    }
}

/// The authority asks through its grants, so that it needs no nemesis.
impl Introspections for Nemesis {
    fn introspection(&self) -> Option<Action> {
        let nth = {
            let mut state = lock(&self.state);
            state.introspections += 1;
            state.introspections
        };
        self.exchange(Event::Introspection(nth))
    }

    fn after_introspection(&self) {
        let nth = lock(&self.state).introspections;
        self.moment(Trigger::AfterIntrospection(nth));
    }
}

/// The driver's side of crashes, the same for both drivers: when to kill the
/// target and when to start it again, and what the history says of both.
/// Only the two verbs differ: `sim.crash`/`sim.bounce` in the simulator, a
/// SIGKILL of the process group and a new process live.
#[derive(Debug, Default)]
pub(crate) struct Crashes {
    restart_at: Option<Ms>,
}

/// What the driver must do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Due {
    Kill,
    Restart,
}

impl Crashes {
    /// The next thing to carry out at run time `now`, if any: every crash the
    /// nemesis asked for kills the target (a second one while it is down
    /// pushes the restart out), and the restart comes when its delay is over.
    pub(crate) fn due(&mut self, nemesis: &Nemesis, now: Ms) -> Option<Due> {
        if let Some(restart_after) = nemesis.take_crash_request() {
            self.restart_at = Some(now + millis(restart_after));
            return Some(Due::Kill);
        }
        if self.restart_at.is_some_and(|at| now >= at) {
            self.restart_at = None;
            return Some(Due::Restart);
        }
        None
    }

    /// Whether the target is down, waiting for its restart.
    pub(crate) fn down(&self) -> bool {
        self.restart_at.is_some()
    }

    /// The history's record of a kill the driver carried out; `how` is its words.
    pub(crate) fn killed(&self, nemesis: &Nemesis, at: Ms, how: &str) {
        nemesis.record_at(at, Happened::TargetKilled, how.to_owned());
    }

    pub(crate) fn restarted(&self, nemesis: &Nemesis, at: Ms) {
        nemesis.record_at(at, Happened::TargetRestarted, "target restarted".into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::{AdvanceClock, CrashPoint, CrashTarget, Hop, LoseResponse, LossMode};

    struct Zero;
    impl Timeline for Zero {
        fn now(&self) -> Ms {
            0
        }
    }

    fn nemesis(faults: Vec<Fault>) -> Nemesis {
        let timeline: Arc<dyn Timeline> = Arc::new(Zero);
        let clock = Arc::new(HarnessClock::on_timeline(0, timeline.clone()));
        let grants = Grants::default();
        grants.grant("tok", "agent", "north", "send");
        Nemesis::new(
            faults,
            timeline,
            clock,
            grants,
            vec!["tok".into()],
            "send".into(),
        )
    }

    fn clock_jump(by: Duration) -> Fault {
        Fault::AdvanceClock(AdvanceClock {
            by,
            when: Trigger::AfterCall(1),
        })
    }

    #[test]
    fn a_crash_outranks_a_loss_on_the_same_dispatch() {
        let nemesis = nemesis(vec![
            Fault::LoseResponse(LoseResponse {
                hop: Hop::ProviderToTarget,
                nth: 1,
                mode: LossMode::Hold,
            }),
            Fault::CrashTarget(CrashTarget {
                at: CrashPoint::AfterCommit,
                nth: 1,
                restart_after: Duration::from_millis(10),
            }),
        ]);
        assert_eq!(
            nemesis.dispatch(1),
            Some(Action::CrashAfterCommit {
                restart_after: Duration::from_millis(10)
            })
        );
        assert_eq!(nemesis.events().len(), 1, "only the crash took effect");
        let mut crashes = Crashes::default();
        assert_eq!(crashes.due(&nemesis, 5), Some(Due::Kill));
        assert!(crashes.down());
        assert_eq!(crashes.due(&nemesis, 14), None);
        assert_eq!(crashes.due(&nemesis, 15), Some(Due::Restart));
        assert!(!crashes.down());
        assert_eq!(nemesis.dispatch(2), None);
    }

    #[test]
    fn answers_are_counted_across_attempts() {
        let nemesis = nemesis(vec![Fault::LoseResponse(LoseResponse {
            hop: Hop::TargetToAgent,
            nth: 2,
            mode: LossMode::Reset,
        })]);
        assert_eq!(nemesis.answer().action, None);
        assert_eq!(
            nemesis.answer().action,
            Some(Action::LoseAnswer {
                hop: Hop::TargetToAgent,
                mode: LossMode::Reset
            })
        );
        assert_eq!(nemesis.answer().action, None);
    }

    #[test]
    fn live_clock_jumps_become_waits_and_leave_the_clock_alone() {
        let nemesis = nemesis(vec![clock_jump(Duration::from_secs(25 * 3_600))])
            .wait_out_clock_jumps(BTreeMap::from([(
                0,
                ClockWait {
                    wait: Duration::from_millis(1_250),
                    note: "live: waited 1.25s".into(),
                },
            )]));
        assert_eq!(nemesis.take_wait(), None);
        nemesis.after_call(1);
        assert_eq!(nemesis.clock.offset_ms(), 0);
        assert_eq!(nemesis.take_wait(), Some(Duration::from_millis(1_250)));
        assert_eq!(nemesis.take_wait(), None, "a wait is owed once");
        let event = &nemesis.events()[0];
        assert!(event.description.ends_with("(live: waited 1.25s)"));
        assert_eq!(event.clock_jump(), Some(Duration::from_secs(25 * 3_600)));
    }

    #[test]
    fn triggers_fire_once_at_their_point() {
        let nemesis = nemesis(vec![clock_jump(Duration::from_secs(3_600))]);
        nemesis.after_commit(1);
        assert_eq!(nemesis.clock.offset_ms(), 0);
        nemesis.after_call(1);
        assert_eq!(nemesis.clock.offset_ms(), 3_600_000);
        assert_eq!(nemesis.events()[0].fault(), Some(0));
    }
}
