//! Drivers of the caller: what plays the side that makes the tool calls, one
//! file each.
//!
//! - [`agent`]: chaos's own orchestrator ([`crate::roles::agent`]), which
//!   sends each planned call, times out, retries, re-plans and crashes as the
//!   scenario's faults say.
//! - [`model`]: chaos plays the model behind a real agent runtime, which is
//!   the target and makes the tool calls itself; the target file's
//!   `[model]` table (docs/runtimes.md).
//!
//! A driver is handed the trial and the roles' environment and runs to the
//! trial's end; it records every tool call it makes or sees made, and never
//! judges. One that serves something for the trial (the model's endpoint)
//! is staged first ([`CallerDriver::stage`]). Adding one is its file, one
//! line in [`drivers!`] below, the target-file table that selects it, a
//! doc page, an example and a test.

mod agent;
pub(crate) mod model;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::watch;

use crate::plan::Trial;
use crate::roles::agent::AgentEnv;

/// A caller's run: it ends when the trial's calls are over.
pub(crate) type Calling = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Declares every driver of the caller: its variant of [`CallerDriver`],
/// carrying the unit's configuration as the target file gave it.
macro_rules! drivers {
    ($($variant:ident($module:ident::$unit:ident),)+) => {
        /// Who makes a trial's calls.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub(crate) enum CallerDriver {
            $($variant($module::$unit),)+
        }

        impl CallerDriver {
            fn unit(&self) -> &dyn Caller {
                match self {
                    $(CallerDriver::$variant(unit) => unit,)+
                }
            }

            /// Every driver: its name and docs line, for `chaos list`.
            pub(crate) fn every() -> Vec<(&'static str, &'static str)> {
                vec![$(($module::NAME, $module::DOC),)+]
            }
        }
    };
}

drivers! {
    Agent(agent::Agent),
    Model(model::Model),
}

impl Default for CallerDriver {
    fn default() -> Self {
        CallerDriver::Agent(agent::Agent)
    }
}

/// One driver of the caller. Object-safe; each unit's module also has a
/// `NAME` and a `DOC` line of its own.
pub(crate) trait Caller: Send + Sync {
    /// Whether it can play `trial`'s scenario; why not, as the cell's
    /// reason. Asked once per cell, before any trial runs.
    fn admit(&self, _trial: &Trial<'_>) -> Result<(), String> {
        Ok(())
    }
    /// Serves what the driver needs for `trial` on `listener` until
    /// `stopped` changes (the trial is over). Nothing, unless it serves
    /// something (the model's endpoint).
    fn stage(
        &self,
        _trial: &Trial<'_>,
        _env: &AgentEnv,
        _listener: tokio::net::TcpListener,
        _stopped: watch::Receiver<()>,
    ) -> Staged {
        Staged::default()
    }
    /// The wire format of the model it plays (`{model.api}` in `[env]`);
    /// empty unless it plays one.
    fn model_api(&self) -> &'static str {
        ""
    }
    /// The trial's calls, made against `env`, to their end. Every wait is
    /// bounded, so this always ends.
    fn call(&self, trial: &Trial<'_>, env: AgentEnv, staged: &Staged) -> Calling;
}

/// What a driver set up for one trial before its calls: the scripted
/// model's desk, served on the trial's model port, when it plays the model.
#[derive(Default)]
pub(crate) struct Staged {
    pub(crate) desk: Option<Arc<model::desk::Desk>>,
}

impl Staged {
    /// Why the trial was no trial of the target, when the driver found out
    /// (a runtime that never asked the model, a request it could not read).
    pub(crate) fn problem(&self) -> Option<String> {
        self.desk.as_ref().and_then(|desk| desk.problem_text())
    }

    /// Why the trial's calls did not all end (a run that never completed),
    /// when the driver found out: the run is incomplete, and still judged.
    pub(crate) fn incomplete(&self) -> Option<String> {
        self.desk.as_ref().and_then(|desk| desk.incomplete_text())
    }
}

impl CallerDriver {
    pub(crate) fn model_api(&self) -> &'static str {
        self.unit().model_api()
    }

    pub(crate) fn admit(&self, trial: &Trial<'_>) -> Result<(), String> {
        self.unit().admit(trial)
    }

    pub(crate) fn stage(
        &self,
        trial: &Trial<'_>,
        env: &AgentEnv,
        listener: tokio::net::TcpListener,
        stopped: watch::Receiver<()>,
    ) -> Staged {
        self.unit().stage(trial, env, listener, stopped)
    }

    pub(crate) fn call(&self, trial: &Trial<'_>, env: AgentEnv, staged: &Staged) -> Calling {
        self.unit().call(trial, env, staged)
    }
}
