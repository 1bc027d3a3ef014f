//! `truncate-result`: the tool result arrives cut. The target acted and
//! answered; on its way back the answer is truncated (a proxy's size cap, a
//! stream cut mid-body, a garbled encoding), so the agent cannot parse it.
//! With no outcome to read, the planner does not retry the call it cannot
//! judge: it decides the step again, a new tool call with a new tool-use id
//! (and, unless the orchestrator holds the key, a new Idempotency-Key). A
//! re-plan trigger of the first seed article, beside the timeout (`stall`)
//! and the injected document (`replan`). The answer the target gave is kept
//! in the history (as a lost answer's is) and judged as what it said.

use std::fmt;

use proptest::strategy::{BoxedStrategy, Strategy};
use serde::{Deserialize, Serialize};

use super::{check_nth, nth, Action, Declared, Event, Fault, Kind, Live, Role, Space};
use crate::simplify::lower_u32;

/// The agent's Nth answer arrives truncated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TruncateResult {
    pub nth: u32,
}

impl fmt::Display for TruncateResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "answer {} arrived truncated: the agent could not parse it, and the planner decided the step again",
            self.nth
        )
    }
}

impl Kind for TruncateResult {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn role(&self) -> Role {
        Role::Agent
    }

    fn verdict(&self, event: Event) -> Option<Action> {
        (event == Event::Answer(self.nth)).then_some(Action::TruncateResult)
    }

    fn simpler(&self) -> Vec<Fault> {
        lower_u32(self.nth, 1)
            .into_iter()
            .map(|nth| Fault::TruncateResult(TruncateResult { nth }))
            .collect()
    }

    fn live(&self) -> Live {
        // The agent is the harness: it cuts the answer it read the same way
        // live, after the target's process answered in full.
        Live::AsSimulated
    }

    fn re_plans(&self) -> bool {
        true
    }
}

impl Declared for TruncateResult {
    const NAME: &'static str = "truncate-result";
    const WEIGHT: u32 = 1;
    type File = TruncateResult;

    fn from_file(file: TruncateResult, _calls: u32) -> Result<TruncateResult, String> {
        check_nth(Self::NAME, file.nth)?;
        Ok(file)
    }

    fn to_file(&self) -> TruncateResult {
        *self
    }

    fn strategy(space: Space) -> BoxedStrategy<TruncateResult> {
        nth(space).prop_map(|nth| TruncateResult { nth }).boxed()
    }
}
