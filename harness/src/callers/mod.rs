//! Drivers of the caller: what plays the side that makes the tool calls, one
//! file each.
//!
//! - [`agent`]: chaos's own orchestrator ([`crate::roles::agent`]), which
//!   sends each planned call, times out, retries, re-plans and crashes as the
//!   scenario's faults say.
//!
//! A driver is handed the trial and the roles' environment and runs to the
//! trial's end, in the simulator and live alike; it records every attempt it
//! makes, and never judges. The next driver plays the model behind a real
//! agent runtime instead of the agent itself. Adding one is its file, one
//! line in [`drivers!`] below, the target-file table that selects it, a
//! section of the protocol doc, an example and a test.

mod agent;

use std::future::Future;
use std::pin::Pin;

use crate::plan::Trial;
use crate::roles::agent::AgentEnv;

/// A caller's run: it ends when the trial's calls are over.
pub(crate) type Calling = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Declares every driver of the caller: its variant of [`CallerDriver`] and
/// its unit.
macro_rules! drivers {
    ($($variant:ident($module:ident::$unit:ident),)+) => {
        /// Who makes a trial's calls.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub(crate) enum CallerDriver {
            #[default]
            $($variant,)+
        }

        impl CallerDriver {
            fn unit(self) -> &'static dyn Caller {
                match self {
                    $(CallerDriver::$variant => &$module::$unit,)+
                }
            }

            /// Every driver: its name and docs line, for `chaos list`.
            pub(crate) fn every() -> Vec<(&'static str, &'static str)> {
                vec![$(($module::$unit.name(), $module::$unit.doc()),)+]
            }
        }
    };
}

drivers! {
    Agent(agent::Agent),
}

/// One driver of the caller. Object-safe.
pub(crate) trait Caller: Sync {
    /// How reports and messages name it.
    fn name(&self) -> &'static str;
    /// One line for `chaos list` and the docs.
    fn doc(&self) -> &'static str;
    /// The trial's calls, made against `env`, to their end. Every wait is
    /// bounded, so this always ends.
    fn call(&self, trial: &Trial<'_>, env: AgentEnv) -> Calling;
}

impl CallerDriver {
    pub(crate) fn call(self, trial: &Trial<'_>, env: AgentEnv) -> Calling {
        self.unit().call(trial, env)
    }
}
