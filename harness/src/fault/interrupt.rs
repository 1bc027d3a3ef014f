//! `user-interrupt`: mid-call, the user says "try again". The agent drops
//! the call in flight (whatever answer comes for it reaches nobody) and
//! the planner decides the step again at once, a new tool call, while the
//! first one may still complete at the target: the provider has acted on
//! it by then (the interrupt comes right after the Nth dispatch was
//! committed). Unlike `crash-agent`, the orchestrator is alive and forgets
//! nothing: only the user's word makes it decide again, without a restart.
//! A re-plan trigger of the first seed article.

use std::fmt;

use proptest::strategy::{BoxedStrategy, Strategy};
use serde::{Deserialize, Serialize};

use super::{nth, Action, Declared, Event, Fault, Kind, Live, Role, Space, Trigger};

/// Right after the provider committed its Nth dispatch, the user interrupts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserInterrupt {
    /// Always [`Trigger::AfterCommit`]: mid-call is while a dispatch of
    /// the call is done and its answer still on its way.
    pub when: Trigger,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(crate) struct File {
    after_commit: u32,
}

impl fmt::Display for UserInterrupt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the user said \"try again\" {}: the agent dropped the call in flight and decided the step again",
            self.when
        )
    }
}

impl Kind for UserInterrupt {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn role(&self) -> Role {
        Role::Agent
    }

    fn verdict(&self, event: Event) -> Option<Action> {
        (event == Event::Moment(self.when)).then_some(Action::Interrupt)
    }

    fn trigger(&self) -> Option<Trigger> {
        Some(self.when)
    }

    fn trigger_mut(&mut self) -> Option<&mut Trigger> {
        Some(&mut self.when)
    }

    fn simpler(&self) -> Vec<Fault> {
        self.when
            .simpler()
            .into_iter()
            .map(|when| Fault::UserInterrupt(UserInterrupt { when }))
            .collect()
    }

    fn live(&self) -> Live {
        // The agent and the provider are the harness's, live too: the
        // moment after a commit is the same, and so is dropping the call.
        Live::AsSimulated
    }

    fn re_plans(&self) -> bool {
        true
    }
}

impl Declared for UserInterrupt {
    const NAME: &'static str = "user-interrupt";
    const WEIGHT: u32 = 1;
    type File = File;

    fn from_file(file: File, _calls: u32) -> Result<UserInterrupt, String> {
        // `Trigger::from_file` words the one mistake there is to make.
        let when = Trigger::from_file(Self::NAME, None, Some(file.after_commit), 0)?;
        Ok(UserInterrupt { when })
    }

    fn to_file(&self) -> File {
        let (_, after_commit) = self.when.to_file();
        File {
            // Only ever read from `after-commit`, so only ever written so.
            after_commit: after_commit.unwrap_or(1),
        }
    }

    fn strategy(space: Space) -> BoxedStrategy<UserInterrupt> {
        nth(space)
            .prop_map(|nth| UserInterrupt {
                when: Trigger::AfterCommit(nth),
            })
            .boxed()
    }
}
