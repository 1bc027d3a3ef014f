//! chaos's own orchestrator as the caller: it runs the trial's script (each
//! planned call, with its attempts, concurrency, subagents and the faults'
//! re-plans) through [`crate::roles::agent`].

use super::{Caller, Calling};
use crate::plan::Trial;
use crate::roles::agent::{self, AgentEnv, Script};

pub(super) struct Agent;

impl Caller for Agent {
    fn name(&self) -> &'static str {
        "agent"
    }

    fn doc(&self) -> &'static str {
        "chaos's own orchestrator: each planned call with its retries, re-plans and crashes"
    }

    fn call(&self, trial: &Trial<'_>, env: AgentEnv) -> Calling {
        // The script is decided from the plan before the run starts, so the
        // run owns nothing of the trial.
        Box::pin(agent::run(Script::from_trial(trial), env))
    }
}
