//! `authority-outage`: the authority does not answer `times` introspections
//! from the Nth on (a `503`). A target that cannot tell who is asking must
//! not act, and has done nothing: its honest answer is `failed` (not done,
//! safe to retry), never `unknown`, which says the effect may have happened.

use std::fmt;

use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;
use serde::{Deserialize, Serialize};

use super::{check_nth, check_times, nth, Action, Declared, Event, Fault, Kind, Live, Role, Space};
use crate::simplify::lower_u32;

/// Most introspections one outage spans.
const MAX_TIMES: u32 = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthorityOutage {
    pub nth: u32,
    pub times: u32,
}

impl fmt::Display for AuthorityOutage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.times {
            1 => write!(f, "authority down for introspection {}", self.nth),
            times => write!(
                f,
                "authority down for introspections {} to {}",
                self.nth,
                self.nth + times - 1
            ),
        }
    }
}

impl Kind for AuthorityOutage {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn role(&self) -> Role {
        Role::Authority
    }

    fn verdict(&self, event: Event) -> Option<Action> {
        match event {
            Event::Introspection(n) if (self.nth..self.nth + self.times).contains(&n) => {
                Some(Action::AuthorityDown)
            }
            _ => None,
        }
    }

    fn simpler(&self) -> Vec<Fault> {
        let earlier = lower_u32(self.nth, 1)
            .into_iter()
            .map(|nth| AuthorityOutage { nth, ..*self });
        let shorter = lower_u32(self.times, 1)
            .into_iter()
            .map(|times| AuthorityOutage { times, ..*self });
        earlier.chain(shorter).map(Fault::AuthorityOutage).collect()
    }

    fn live(&self) -> Live {
        Live::AsSimulated
    }
}

impl Declared for AuthorityOutage {
    const NAME: &'static str = "authority-outage";
    const WEIGHT: u32 = 1;
    type File = AuthorityOutage;

    fn from_file(file: AuthorityOutage, _calls: u32) -> Result<AuthorityOutage, String> {
        check_nth(Self::NAME, file.nth)?;
        check_times(Self::NAME, "times", file.times, MAX_TIMES)?;
        Ok(file)
    }

    fn to_file(&self) -> AuthorityOutage {
        *self
    }

    fn strategy(space: Space) -> BoxedStrategy<AuthorityOutage> {
        (nth(space), 1..=3u32)
            .prop_map(|(nth, times)| AuthorityOutage { nth, times })
            .boxed()
    }
}
