//! chaos's own orchestrator as the caller: it runs the trial's script (each
//! planned call, with its attempts, concurrency, subagents and the faults'
//! re-plans) through [`crate::roles::agent`].

use super::{Caller, Calling, Staged};
use crate::plan::Trial;
use crate::roles::agent::{self, AgentEnv, Script};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Agent;

pub(super) const NAME: &str = "agent";
pub(super) const DOC: &str =
    "chaos's own orchestrator: each planned call with its retries, re-plans and crashes";

impl Caller for Agent {
    fn call(&self, trial: &Trial<'_>, env: AgentEnv, _staged: &Staged) -> Calling {
        // The script is decided from the plan before the run starts, so the
        // run owns nothing of the trial.
        Box::pin(agent::run(Script::from_trial(trial), env))
    }
}
