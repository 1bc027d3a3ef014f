//! `redeliver`: the Nth attempt is delivered twice. The target processes
//! it, and before its answer reaches the caller the same request (the same
//! bytes, key and attempt id) arrives again, as a second consumer would
//! receive it: Azure Service Bus in peek-lock mode, where "processing can
//! finish before settlement succeeds, leaving another consumer to receive
//! the message again". Producer-side duplicate detection does not help; only
//! an idempotent consumer does.

use std::fmt;

use proptest::strategy::{BoxedStrategy, Strategy};
use serde::{Deserialize, Serialize};

use super::{check_nth, nth, Action, Declared, Event, Fault, Kind, Live, Role, Space};
use crate::simplify::lower_u32;

/// The attempt whose answer is the Nth the agent reads is delivered again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Redeliver {
    pub nth: u32,
}

impl fmt::Display for Redeliver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "attempt of answer {} delivered again after it was processed, before its answer reached the agent",
            self.nth
        )
    }
}

impl Kind for Redeliver {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn role(&self) -> Role {
        Role::Target
    }

    fn verdict(&self, event: Event) -> Option<Action> {
        (event == Event::Answer(self.nth)).then_some(Action::Redeliver)
    }

    fn simpler(&self) -> Vec<Fault> {
        lower_u32(self.nth, 1)
            .into_iter()
            .map(|nth| Fault::Redeliver(Redeliver { nth }))
            .collect()
    }

    fn live(&self) -> Live {
        Live::AsSimulated
    }
}

impl Declared for Redeliver {
    const NAME: &'static str = "redeliver";
    const WEIGHT: u32 = 1;
    type File = Redeliver;

    fn from_file(file: Redeliver, _calls: u32) -> Result<Redeliver, String> {
        check_nth(Self::NAME, file.nth)?;
        Ok(file)
    }

    fn to_file(&self) -> Redeliver {
        *self
    }

    fn strategy(space: Space) -> BoxedStrategy<Redeliver> {
        nth(space).prop_map(|nth| Redeliver { nth }).boxed()
    }
}
