//! `lose-request` and `lose-response`: a message that never arrives.
//!
//! A lost request never reaches the provider, which does nothing. A lost
//! response is lost *after the sender acted*: the provider committed, or the
//! target answered. That is the failure at the heart of the seed articles: the
//! caller cannot tell "nothing happened" from "it happened and the answer was
//! lost".

use std::fmt;

use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;
use serde::{Deserialize, Serialize};

use super::{check_nth, nth, Action, Declared, Event, Fault, Kind, Live, Role, Space};
use crate::simplify::lower_u32;

/// A one-way hop carrying an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Hop {
    /// The provider's answer to the target's Nth dispatch.
    ProviderToTarget,
    /// The target's answer to the agent's Nth attempt.
    TargetToAgent,
}

impl Hop {
    /// The event whose answer travels this hop.
    pub(crate) fn event(self, nth: u32) -> Event {
        match self {
            Hop::ProviderToTarget => Event::Dispatch(nth),
            Hop::TargetToAgent => Event::Answer(nth),
        }
    }

    /// Who never hears back (or hears back late).
    pub(crate) fn receiver(self) -> Role {
        match self {
            Hop::ProviderToTarget => Role::Target,
            Hop::TargetToAgent => Role::Agent,
        }
    }

    pub(crate) fn strategy() -> impl Strategy<Value = Hop> {
        prop_oneof![Just(Hop::ProviderToTarget), Just(Hop::TargetToAgent)]
    }
}

impl fmt::Display for Hop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Hop::ProviderToTarget => "provider-to-target",
            Hop::TargetToAgent => "target-to-agent",
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LossMode {
    /// Held past the caller's timeout: the caller sees a timeout.
    Hold,
    /// The connection is closed with no answer: the caller sees a reset.
    Reset,
}

impl LossMode {
    fn strategy() -> impl Strategy<Value = LossMode> {
        prop_oneof![Just(LossMode::Hold), Just(LossMode::Reset)]
    }

    /// A hold is the simpler loss: it reads as a plain timeout.
    fn simpler(self) -> Option<LossMode> {
        (self == LossMode::Reset).then_some(LossMode::Hold)
    }
}

impl fmt::Display for LossMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LossMode::Hold => "held",
            LossMode::Reset => "reset",
        })
    }
}

/// A loss one step simpler: an earlier message, or held rather than reset.
fn simpler(nth: u32, mode: LossMode, fault: impl Fn(u32, LossMode) -> Fault) -> Vec<Fault> {
    let earlier = lower_u32(nth, 1).into_iter().map(|nth| fault(nth, mode));
    let held = mode.simpler().map(|mode| fault(nth, mode));
    earlier.chain(held).collect()
}

/// The Nth dispatch never reaches the provider: nothing is committed, and
/// the target's connection is held (past its timeout) or reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoseRequest {
    pub nth: u32,
    pub mode: LossMode,
}

impl fmt::Display for LoseRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "dispatch {} lost before the provider ({})",
            self.nth, self.mode
        )
    }
}

impl Kind for LoseRequest {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn role(&self) -> Role {
        Role::Provider
    }

    fn verdict(&self, event: Event) -> Option<Action> {
        (event == Event::Dispatch(self.nth)).then_some(Action::LoseRequest(self.mode))
    }

    fn simpler(&self) -> Vec<Fault> {
        simpler(self.nth, self.mode, |nth, mode| {
            Fault::LoseRequest(LoseRequest { nth, mode })
        })
    }

    fn live(&self) -> Live {
        Live::AsSimulated
    }
}

impl Declared for LoseRequest {
    const NAME: &'static str = "lose-request";
    const WEIGHT: u32 = 2;
    type File = LoseRequest;

    fn from_file(file: LoseRequest, _calls: u32) -> Result<LoseRequest, String> {
        check_nth(Self::NAME, file.nth)?;
        Ok(file)
    }

    fn to_file(&self) -> LoseRequest {
        *self
    }

    fn strategy(space: Space) -> BoxedStrategy<LoseRequest> {
        (nth(space), LossMode::strategy())
            .prop_map(|(nth, mode)| LoseRequest { nth, mode })
            .boxed()
    }
}

/// The answer on `hop` to the Nth request is lost after the sender acted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoseResponse {
    pub hop: Hop,
    pub nth: u32,
    pub mode: LossMode,
}

impl fmt::Display for LoseResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "answer {} on {} lost ({})",
            self.nth, self.hop, self.mode
        )
    }
}

impl Kind for LoseResponse {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn role(&self) -> Role {
        self.hop.receiver()
    }

    fn verdict(&self, event: Event) -> Option<Action> {
        (event == self.hop.event(self.nth)).then_some(Action::LoseAnswer {
            hop: self.hop,
            mode: self.mode,
        })
    }

    fn simpler(&self) -> Vec<Fault> {
        let hop = self.hop;
        simpler(self.nth, self.mode, |nth, mode| {
            Fault::LoseResponse(LoseResponse { hop, nth, mode })
        })
    }

    fn live(&self) -> Live {
        Live::AsSimulated
    }
}

impl Declared for LoseResponse {
    const NAME: &'static str = "lose-response";
    const WEIGHT: u32 = 3;
    type File = LoseResponse;

    fn from_file(file: LoseResponse, _calls: u32) -> Result<LoseResponse, String> {
        check_nth(Self::NAME, file.nth)?;
        Ok(file)
    }

    fn to_file(&self) -> LoseResponse {
        *self
    }

    fn strategy(space: Space) -> BoxedStrategy<LoseResponse> {
        (Hop::strategy(), nth(space), LossMode::strategy())
            .prop_map(|(hop, nth, mode)| LoseResponse { hop, nth, mode })
            .boxed()
    }
}
