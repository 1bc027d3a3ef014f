//! `provider-error`: the provider answers the Nth dispatch with a 500, having
//! committed the effect first (`committed = true`: the charge exists, the
//! answer says error) or not. Stripe's API v1 saves that answer under the
//! key and replays it to every retry with it (`[provider] saves-errors`):
//! re-sending then teaches nothing, and a layer that takes the 500 for
//! "nothing happened" and sends under a new key charges twice.

use std::fmt;

use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;
use serde::{Deserialize, Serialize};

use super::{check_nth, nth, Action, Declared, Event, Fault, Kind, Live, Role, Space};
use crate::simplify::lower_u32;

/// The Nth dispatch is answered `500`, after the effect (`committed`) or
/// instead of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderError {
    pub nth: u32,
    pub committed: bool,
}

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = if self.committed {
            "after committing it"
        } else {
            "without acting on it"
        };
        write!(f, "dispatch {} answered 500 {what}", self.nth)
    }
}

impl Kind for ProviderError {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn role(&self) -> Role {
        Role::Provider
    }

    fn verdict(&self, event: Event) -> Option<Action> {
        (event == Event::Dispatch(self.nth)).then_some(Action::ProviderError {
            committed: self.committed,
        })
    }

    fn simpler(&self) -> Vec<Fault> {
        let earlier = lower_u32(self.nth, 1).into_iter().map(|nth| ProviderError {
            nth,
            committed: self.committed,
        });
        // Failing without acting is the simpler error: nothing to find.
        let uncommitted = self.committed.then_some(ProviderError {
            committed: false,
            ..*self
        });
        earlier
            .chain(uncommitted)
            .map(Fault::ProviderError)
            .collect()
    }

    fn live(&self) -> Live {
        Live::AsSimulated
    }
}

impl Declared for ProviderError {
    const NAME: &'static str = "provider-error";
    const WEIGHT: u32 = 1;
    type File = ProviderError;

    fn from_file(file: ProviderError, _calls: u32) -> Result<ProviderError, String> {
        check_nth(Self::NAME, file.nth)?;
        Ok(file)
    }

    fn to_file(&self) -> ProviderError {
        *self
    }

    fn strategy(space: Space) -> BoxedStrategy<ProviderError> {
        (nth(space), any::<bool>())
            .prop_map(|(nth, committed)| ProviderError { nth, committed })
            .boxed()
    }
}
