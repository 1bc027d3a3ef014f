//! `crash-agent`: the orchestrator dies and starts again. Whatever it held
//! in memory is gone: the attempts it had in flight are forgotten (their
//! answers, if any come, reach nobody), and on restart it replays each step
//! it was running, and the last one it finished, as a new tool call. A
//! runtime that persisted the step's key before the call replays under that
//! key (`identity = "stable"`); one that did not mints a new one. Live, the
//! orchestrator is the harness, which forgets the same way.

use std::fmt;
use std::time::Duration;

use proptest::strategy::{BoxedStrategy, Strategy};
use serde::{Deserialize, Serialize};

use super::{Action, Declared, Event, Fault, Kind, Live, Role, Space, Trigger};
use crate::simplify::lower_ms;

/// `chaos explore` restarts the agent at most this long after its crash.
pub(crate) const MAX_RESTART_MS: u64 = 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrashAgent {
    pub when: Trigger,
    pub restart_after: Duration,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(crate) struct File {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    after_call: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    after_commit: Option<u32>,
    #[serde(with = "humantime_serde")]
    restart_after: Duration,
}

impl fmt::Display for CrashAgent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the agent crashed {}, and replayed its step {} later",
            self.when,
            humantime::format_duration(self.restart_after)
        )
    }
}

impl Kind for CrashAgent {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn role(&self) -> Role {
        Role::Agent
    }

    fn verdict(&self, event: Event) -> Option<Action> {
        (event == Event::Moment(self.when)).then_some(Action::CrashAgent {
            restart_after: self.restart_after,
        })
    }

    fn trigger(&self) -> Option<Trigger> {
        Some(self.when)
    }

    fn trigger_mut(&mut self) -> Option<&mut Trigger> {
        Some(&mut self.when)
    }

    fn simpler(&self) -> Vec<Fault> {
        let earlier = self
            .when
            .simpler()
            .into_iter()
            .map(|when| CrashAgent { when, ..*self });
        let sooner = lower_ms(self.restart_after, 1)
            .into_iter()
            .map(|restart_after| CrashAgent {
                restart_after,
                ..*self
            });
        earlier.chain(sooner).map(Fault::CrashAgent).collect()
    }

    fn live(&self) -> Live {
        Live::AsSimulated
    }

    fn re_plans(&self) -> bool {
        true
    }

    fn real_wait(&self) -> Option<(&'static str, Duration)> {
        Some(("restart-after", self.restart_after))
    }
}

impl Declared for CrashAgent {
    const NAME: &'static str = "crash-agent";
    const WEIGHT: u32 = 1;
    type File = File;

    fn from_file(file: File, calls: u32) -> Result<CrashAgent, String> {
        Ok(CrashAgent {
            when: Trigger::from_file(Self::NAME, file.after_call, file.after_commit, calls)?,
            restart_after: file.restart_after,
        })
    }

    fn to_file(&self) -> File {
        let (after_call, after_commit) = self.when.to_file();
        File {
            after_call,
            after_commit,
            restart_after: self.restart_after,
        }
    }

    fn strategy(space: Space) -> BoxedStrategy<CrashAgent> {
        (Trigger::strategy(space), 1..=MAX_RESTART_MS)
            .prop_map(|(when, restart)| CrashAgent {
                when,
                restart_after: Duration::from_millis(restart),
            })
            .boxed()
    }
}
