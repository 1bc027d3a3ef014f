//! `replan`: the planner decides a step again. One user message, one planner
//! turn, and the model emits the same tool call once more: after a timeout,
//! because an injected document says "the previous attempt failed" (MITRE
//! ATLAS AML.T0051.001), because a subagent crashed. It is not a retry: it is
//! a new tool call with a new tool-use id, and unless the orchestrator holds
//! the key, a new Idempotency-Key. The injection knob of the seed article
//! "A retry is not a replay".

use std::fmt;

use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;
use serde::{Deserialize, Serialize};

use super::{
    check_nth, check_times, nth, Action, Declared, Event, Fault, Kind, Live, Role, Space, Trigger,
};
use crate::simplify::lower_u32;

/// The most re-plans one fault asks for.
pub(crate) const MAX_TIMES: u32 = 8;

/// How a re-planned tool call words its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Wording {
    /// Exactly as the step was called.
    Same,
    /// The same intent re-worded: the amount spelled `4999.0`, the
    /// workload's free-text field rephrased (the seed article's "a memo
    /// string that drifts by one token").
    Drifted,
}

/// After the agent's Nth answer (lost or not), the planner re-issues that
/// answer's step `times` times, one after another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Replan {
    pub nth: u32,
    pub times: u32,
    #[serde(default = "same", rename = "payload")]
    pub wording: Wording,
    /// A human signs off each re-planned tool call at the authority before
    /// it is sent: the one bypass the tool policy `sign-off` allows (a
    /// re-plan so approved may make an effect of its own; one without
    /// coalesces).
    #[serde(default, rename = "signed-off", skip_serializing_if = "is_false")]
    pub signed_off: bool,
}

fn is_false(value: &bool) -> bool {
    !value
}

fn same() -> Wording {
    Wording::Same
}

impl fmt::Display for Replan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the planner re-issued the step of answer {} {} more time(s){}{}",
            self.nth,
            self.times,
            match self.wording {
                Wording::Same => "",
                Wording::Drifted => ", its arguments re-worded",
            },
            if self.signed_off {
                ", each signed off by a human at the authority"
            } else {
                ""
            }
        )
    }
}

impl Kind for Replan {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn role(&self) -> Role {
        Role::Agent
    }

    fn verdict(&self, event: Event) -> Option<Action> {
        (event == Event::Moment(Trigger::AfterAnswer(self.nth))).then_some(Action::Replan {
            times: self.times,
            wording: self.wording,
            signed_off: self.signed_off,
        })
    }

    fn simpler(&self) -> Vec<Fault> {
        let earlier = lower_u32(self.nth, 1)
            .into_iter()
            .map(|nth| Replan { nth, ..*self });
        let fewer = lower_u32(self.times, 1)
            .into_iter()
            .map(|times| Replan { times, ..*self });
        let verbatim = (self.wording == Wording::Drifted).then_some(Replan {
            wording: Wording::Same,
            ..*self
        });
        let unsigned = self.signed_off.then_some(Replan {
            signed_off: false,
            ..*self
        });
        earlier
            .chain(fewer)
            .chain(verbatim)
            .chain(unsigned)
            .map(Fault::Replan)
            .collect()
    }

    fn live(&self) -> Live {
        // The orchestrator is the harness: it re-plans the same way live.
        Live::AsSimulated
    }

    fn re_plans(&self) -> bool {
        true
    }

    fn drifts(&self) -> bool {
        self.wording == Wording::Drifted
    }
}

impl Declared for Replan {
    const NAME: &'static str = "replan";
    const WEIGHT: u32 = 2;
    type File = Replan;

    fn from_file(file: Replan, _calls: u32) -> Result<Replan, String> {
        check_nth(Self::NAME, file.nth)?;
        check_times(Self::NAME, "times", file.times, MAX_TIMES)?;
        Ok(file)
    }

    fn to_file(&self) -> Replan {
        *self
    }

    fn strategy(space: Space) -> BoxedStrategy<Replan> {
        let wording = prop_oneof![3 => Just(Wording::Same), 1 => Just(Wording::Drifted)];
        (nth(space), 1..=3u32, wording)
            // Never signed off: a sign-off only means something under the
            // policy that asks for one, which generated scenarios never take.
            .prop_map(|(nth, times, wording)| Replan {
                nth,
                times,
                wording,
                signed_off: false,
            })
            .boxed()
    }
}
