//! The nemesis: holds the fault schedule and answers, at each protocol point,
//! "what goes wrong here?". Roles ask it; it never reaches into them.
//!
//! Faults that need the transport (a crash is a turmoil `crash` in the simulator
//! and a SIGKILL live) are queued as [`CrashRequest`]s for the driver to carry out.
//!
//! A clock jump is an offset on the harness clock in the simulator, where every
//! role reads that clock. A live target reads the machine's clock, which nobody
//! may move; there a jump becomes a wait ([`Nemesis::wait_out_clock_jumps`])
//! that the agent sits out before its next step, with retentions shortened so
//! the wait is seconds.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chaos_kit::clock::millis;

use crate::fault::{CrashPoint, Fault, Hop, LossMode, Trigger};
use crate::history::{FaultEvent, Ms};
use crate::roles::authority::Authority;
use crate::roles::clock::{HarnessClock, Timeline};

/// What happens to the provider's Nth dispatch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DispatchFaults {
    /// Do not act on it: crash the target, restart it this much later.
    pub crash_before: Option<Duration>,
    /// Do not act on it, and lose the connection.
    pub lose_request: Option<LossMode>,
    /// Act on it, then crash the target before it hears back.
    pub crash_after: Option<Duration>,
    /// Act on it, then lose the answer.
    pub lose_answer: Option<LossMode>,
    /// Act on it, then answer this late.
    pub delay_answer: Duration,
}

/// What happens to the Nth answer the agent receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerFault {
    Lose(LossMode),
    Delay(Duration),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrashRequest {
    pub restart_after: Duration,
}

pub struct Nemesis {
    faults: Vec<Fault>,
    timeline: Arc<dyn Timeline>,
    clock: Arc<HarnessClock>,
    authority: Arc<Authority>,
    /// The agent's token and the tool revocations apply to.
    token: String,
    tool: String,
    /// Live mode: clock jumps (by fault index) turned into real waits.
    clock_waits: BTreeMap<usize, ClockWait>,
    state: Mutex<NemesisState>,
}

/// How a clock jump is carried out live: a wait, and a note for the history
/// saying what it stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClockWait {
    pub wait: Duration,
    pub note: String,
}

#[derive(Default)]
struct NemesisState {
    events: Vec<FaultEvent>,
    crash_requests: VecDeque<CrashRequest>,
    answers_received: u32,
    /// Waits owed by the agent before its next step (live clock jumps).
    pending_wait: Duration,
}

impl Nemesis {
    pub fn new(
        faults: Vec<Fault>,
        timeline: Arc<dyn Timeline>,
        clock: Arc<HarnessClock>,
        authority: Arc<Authority>,
        token: String,
        tool: String,
    ) -> Nemesis {
        Nemesis {
            faults,
            timeline,
            clock,
            authority,
            token,
            tool,
            clock_waits: BTreeMap::new(),
            state: Mutex::new(NemesisState::default()),
        }
    }

    /// Live mode: the clock jumps with these fault indices are carried out as
    /// waits instead of clock offsets.
    pub fn wait_out_clock_jumps(mut self, waits: BTreeMap<usize, ClockWait>) -> Nemesis {
        self.clock_waits = waits;
        self
    }

    /// The wait the agent owes before its next step, if a live clock jump fired.
    /// Always `None` in the simulator.
    pub fn take_wait(&self) -> Option<Duration> {
        let mut state = lock(&self.state);
        let wait = std::mem::take(&mut state.pending_wait);
        (!wait.is_zero()).then_some(wait)
    }

    /// Called by the provider when its Nth dispatch arrives.
    pub fn dispatch_faults(&self, nth: u32) -> DispatchFaults {
        let mut planned = DispatchFaults::default();
        let mut applied = Vec::new();
        for (index, fault) in self.faults.iter().enumerate() {
            match *fault {
                Fault::CrashTarget {
                    at,
                    nth: n,
                    restart_after,
                } if n == nth => {
                    match at {
                        CrashPoint::BeforeDispatch => planned.crash_before = Some(restart_after),
                        CrashPoint::AfterCommit => planned.crash_after = Some(restart_after),
                    }
                    applied.push(index);
                }
                Fault::LoseRequest { nth: n, mode } if n == nth => {
                    planned.lose_request = Some(mode);
                    applied.push(index);
                }
                Fault::LoseResponse {
                    hop: Hop::ProviderToTarget,
                    nth: n,
                    mode,
                } if n == nth => {
                    planned.lose_answer = Some(mode);
                    applied.push(index);
                }
                Fault::Delay {
                    hop: Hop::ProviderToTarget,
                    nth: n,
                    by,
                } if n == nth => {
                    planned.delay_answer += by;
                    applied.push(index);
                }
                _ => {}
            }
        }
        // One thing happens to a dispatch: a crash outranks a loss, which
        // outranks a delay. Only what takes effect is recorded.
        applied.retain(|&index| match self.faults[index] {
            Fault::CrashTarget { .. } => true,
            Fault::LoseRequest { .. } => planned.crash_before.is_none(),
            Fault::LoseResponse { .. } => {
                planned.crash_before.is_none()
                    && planned.lose_request.is_none()
                    && planned.crash_after.is_none()
            }
            Fault::Delay { .. } => {
                planned.crash_before.is_none()
                    && planned.lose_request.is_none()
                    && planned.crash_after.is_none()
                    && planned.lose_answer.is_none()
            }
            _ => true,
        });
        if planned.crash_before.is_some() {
            planned.crash_after = None;
            planned.lose_request = None;
        }
        for index in applied {
            self.record(Some(index), self.faults[index].to_string());
        }
        if let Some(restart_after) = planned.crash_before.or(planned.crash_after) {
            self.request_crash(restart_after);
        }
        planned
    }

    /// Called by the provider right after it acted on its Nth dispatch.
    pub fn after_commit(&self, nth: u32) {
        self.fire(Trigger::AfterCommit(nth));
    }

    /// Called by the agent when its Nth call step has ended.
    pub fn after_call(&self, number: u32) {
        self.fire(Trigger::AfterCall(number));
    }

    /// Called by the agent for every answer it reads from the target.
    pub fn answer_fault(&self) -> Option<AnswerFault> {
        let nth = {
            let mut state = lock(&self.state);
            state.answers_received += 1;
            state.answers_received
        };
        let mut result = None;
        for (index, fault) in self.faults.iter().enumerate() {
            match *fault {
                Fault::LoseResponse {
                    hop: Hop::TargetToAgent,
                    nth: n,
                    mode,
                } if n == nth => {
                    result = Some((index, AnswerFault::Lose(mode)));
                    break;
                }
                Fault::Delay {
                    hop: Hop::TargetToAgent,
                    nth: n,
                    by,
                } if n == nth && result.is_none() => {
                    result = Some((index, AnswerFault::Delay(by)));
                }
                _ => {}
            }
        }
        let (index, fault) = result?;
        self.record(Some(index), self.faults[index].to_string());
        Some(fault)
    }

    fn fire(&self, trigger: Trigger) {
        for (index, fault) in self.faults.iter().enumerate() {
            if fault.trigger() != Some(trigger) {
                continue;
            }
            match *fault {
                Fault::AdvanceClock { .. } if self.clock_waits.contains_key(&index) => {
                    let live = &self.clock_waits[&index];
                    lock(&self.state).pending_wait += live.wait;
                    self.record(Some(index), format!("{fault} ({})", live.note));
                    continue;
                }
                Fault::AdvanceClock { by, .. } => self.clock.advance(millis(by)),
                Fault::Revoke { grant, .. } => {
                    self.authority.revoke(&self.token, grant, &self.tool)
                }
                _ => continue,
            }
            self.record(Some(index), fault.to_string());
        }
    }

    fn request_crash(&self, restart_after: Duration) {
        lock(&self.state)
            .crash_requests
            .push_back(CrashRequest { restart_after });
    }

    /// The next crash for the driver to carry out.
    pub fn take_crash_request(&self) -> Option<CrashRequest> {
        lock(&self.state).crash_requests.pop_front()
    }

    /// Records a consequence the driver carried out (a kill, a restart).
    pub fn record_at(&self, at: Ms, fault: Option<usize>, description: String) {
        lock(&self.state).events.push(FaultEvent {
            at,
            fault,
            description,
        });
    }

    fn record(&self, fault: Option<usize>, description: String) {
        self.record_at(self.timeline.now(), fault, description);
    }

    pub fn events(&self) -> Vec<FaultEvent> {
        lock(&self.state).events.clone()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Zero;
    impl Timeline for Zero {
        fn now(&self) -> Ms {
            0
        }
    }

    fn nemesis(faults: Vec<Fault>) -> Nemesis {
        let timeline: Arc<dyn Timeline> = Arc::new(Zero);
        let clock = Arc::new(HarnessClock::on_timeline(0, timeline.clone()));
        let authority = Arc::new(Authority::new(timeline.clone()));
        authority.grant("tok", "agent", "north", "send");
        Nemesis::new(
            faults,
            timeline,
            clock,
            authority,
            "tok".into(),
            "send".into(),
        )
    }

    #[test]
    fn a_crash_outranks_a_loss_on_the_same_dispatch() {
        let nemesis = nemesis(vec![
            Fault::LoseResponse {
                hop: Hop::ProviderToTarget,
                nth: 1,
                mode: LossMode::Hold,
            },
            Fault::CrashTarget {
                at: CrashPoint::AfterCommit,
                nth: 1,
                restart_after: Duration::from_millis(10),
            },
        ]);
        let planned = nemesis.dispatch_faults(1);
        assert_eq!(planned.crash_after, Some(Duration::from_millis(10)));
        assert_eq!(nemesis.events().len(), 1, "only the crash took effect");
        assert!(nemesis.take_crash_request().is_some());
        assert_eq!(nemesis.dispatch_faults(2), DispatchFaults::default());
    }

    #[test]
    fn answers_are_counted_across_attempts() {
        let nemesis = nemesis(vec![Fault::LoseResponse {
            hop: Hop::TargetToAgent,
            nth: 2,
            mode: LossMode::Reset,
        }]);
        assert_eq!(nemesis.answer_fault(), None);
        assert_eq!(
            nemesis.answer_fault(),
            Some(AnswerFault::Lose(LossMode::Reset))
        );
        assert_eq!(nemesis.answer_fault(), None);
    }

    #[test]
    fn live_clock_jumps_become_waits_and_leave_the_clock_alone() {
        let nemesis = nemesis(vec![Fault::AdvanceClock {
            by: Duration::from_secs(25 * 3_600),
            after_call: Some(1),
            after_commit: None,
        }])
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
        assert!(nemesis.events()[0]
            .description
            .ends_with("(live: waited 1.25s)"));
    }

    #[test]
    fn triggers_fire_once_at_their_point() {
        let nemesis = nemesis(vec![Fault::AdvanceClock {
            by: Duration::from_secs(3_600),
            after_call: Some(1),
            after_commit: None,
        }]);
        nemesis.after_commit(1);
        assert_eq!(nemesis.clock.offset_ms(), 0);
        nemesis.after_call(1);
        assert_eq!(nemesis.clock.offset_ms(), 3_600_000);
    }
}
