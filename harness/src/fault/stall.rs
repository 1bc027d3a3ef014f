//! `stall`: the provider commits, and holds its answer past the agent's
//! timeout. The agent, having heard nothing in time, does not retry: it
//! decides again. The stall knob of the seed article "A retry is not a
//! replay": "the call reaches the backend, the backend commits the side
//! effect, and the response is withheld just past the harness timeout".

use std::fmt;

use proptest::strategy::{BoxedStrategy, Strategy};
use serde::{Deserialize, Serialize};

use super::{check_nth, nth, Action, Declared, Event, Fault, Kind, Live, Role, Space};
use crate::simplify::lower_u32;

/// The Nth dispatch is stalled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stall {
    pub nth: u32,
}

impl fmt::Display for Stall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "dispatch {} stalled: committed, answered only after the agent's timeout; the agent re-plans",
            self.nth
        )
    }
}

impl Kind for Stall {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn role(&self) -> Role {
        Role::Provider
    }

    fn verdict(&self, event: Event) -> Option<Action> {
        (event == Event::Dispatch(self.nth)).then_some(Action::Stall)
    }

    fn simpler(&self) -> Vec<Fault> {
        lower_u32(self.nth, 1)
            .into_iter()
            .map(|nth| Fault::Stall(Stall { nth }))
            .collect()
    }

    fn live(&self) -> Live {
        Live::AsSimulated
    }

    fn re_plans(&self) -> bool {
        true
    }
}

impl Declared for Stall {
    const NAME: &'static str = "stall";
    const WEIGHT: u32 = 1;
    type File = Stall;

    fn from_file(file: Stall, _calls: u32) -> Result<Stall, String> {
        check_nth(Self::NAME, file.nth)?;
        Ok(file)
    }

    fn to_file(&self) -> Stall {
        *self
    }

    fn strategy(space: Space) -> BoxedStrategy<Stall> {
        nth(space).prop_map(|nth| Stall { nth }).boxed()
    }
}
