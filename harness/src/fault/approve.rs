//! `double-approve`: a step approved twice. The approval UI rendered, the
//! user clicked approve twice, and the orchestrator executes the step twice,
//! nearly at once: two tool calls with distinct tool-use ids for one intent.

use std::fmt;
use std::time::Duration;

use proptest::strategy::{BoxedStrategy, Strategy};
use serde::{Deserialize, Serialize};

use super::{Action, Declared, Event, Fault, Kind, Live, Role, Space, Trigger};
use crate::simplify::lower_ms;

/// A call is approved twice; the second execution starts `gap` after the first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DoubleApprove {
    /// When the call it doubles starts (`Trigger::BeforeCall`).
    pub when: Trigger,
    pub gap: Duration,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct File {
    call: u32,
    #[serde(with = "humantime_serde", default)]
    gap: Duration,
}

impl DoubleApprove {
    fn call(&self) -> u32 {
        match self.when {
            Trigger::BeforeCall(call) | Trigger::AfterCall(call) => call,
            Trigger::AfterCommit(n) | Trigger::AfterAnswer(n) | Trigger::AfterIntrospection(n) => n,
        }
    }
}

impl fmt::Display for DoubleApprove {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "call {} approved twice: a second execution {} after the first",
            self.call(),
            humantime::format_duration(self.gap)
        )
    }
}

impl Kind for DoubleApprove {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn role(&self) -> Role {
        Role::Agent
    }

    fn verdict(&self, event: Event) -> Option<Action> {
        (event == Event::Moment(self.when)).then_some(Action::ApproveAgain { gap: self.gap })
    }

    fn trigger(&self) -> Option<Trigger> {
        Some(self.when)
    }

    fn trigger_mut(&mut self) -> Option<&mut Trigger> {
        Some(&mut self.when)
    }

    fn simpler(&self) -> Vec<Fault> {
        let earlier = self
            .when
            .simpler()
            .into_iter()
            .map(|when| DoubleApprove { when, ..*self });
        let sooner = lower_ms(self.gap, 0)
            .into_iter()
            .map(|gap| DoubleApprove { gap, ..*self });
        earlier.chain(sooner).map(Fault::DoubleApprove).collect()
    }

    fn live(&self) -> Live {
        Live::AsSimulated
    }

    fn re_plans(&self) -> bool {
        true
    }

    fn real_wait(&self) -> Option<(&'static str, Duration)> {
        Some(("gap", self.gap))
    }
}

impl Declared for DoubleApprove {
    const NAME: &'static str = "double-approve";
    const WEIGHT: u32 = 1;
    type File = File;

    fn from_file(file: File, calls: u32) -> Result<DoubleApprove, String> {
        if file.call == 0 || file.call > calls {
            return Err(format!(
                "double-approve: call = {} names no call: this scenario has calls 1 to {calls}",
                file.call
            ));
        }
        Ok(DoubleApprove {
            when: Trigger::BeforeCall(file.call),
            gap: file.gap,
        })
    }

    fn to_file(&self) -> File {
        File {
            call: self.call(),
            gap: self.gap,
        }
    }

    fn strategy(space: Space) -> BoxedStrategy<DoubleApprove> {
        (1..=space.calls, 0..=3u64)
            .prop_map(|(call, gap)| DoubleApprove {
                when: Trigger::BeforeCall(call),
                gap: Duration::from_millis(gap),
            })
            .boxed()
    }
}
