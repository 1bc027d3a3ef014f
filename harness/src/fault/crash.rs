//! `crash-target`: the target dies at a protocol point of a dispatch and is
//! started again later, with its durable state and without its memory. In
//! the simulator that is `sim.crash` and `sim.bounce`; live, a SIGKILL of the
//! target's process group and the same command started again.

use std::fmt;
use std::time::Duration;

use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;
use serde::{Deserialize, Serialize};

use super::{check_nth, nth, Action, Declared, Event, Fault, Kind, Live, Role, Space};
use crate::simplify::{lower_ms, lower_u32};

/// `chaos explore` restarts a target at most this long after a crash.
pub(crate) const MAX_RESTART_MS: u64 = 60;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CrashPoint {
    /// The dispatch reached the provider, which did not act on it.
    BeforeDispatch,
    /// The provider committed the effect; the target never hears back.
    AfterCommit,
}

/// Kill the target at a protocol point of the Nth dispatch, and start it
/// again `restart-after` later (with its durable state, without its memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CrashTarget {
    pub at: CrashPoint,
    pub nth: u32,
    #[serde(with = "humantime_serde", rename = "restart-after")]
    pub restart_after: Duration,
}

impl fmt::Display for CrashTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let point = match self.at {
            CrashPoint::BeforeDispatch => "before dispatch",
            CrashPoint::AfterCommit => "after commit",
        };
        write!(
            f,
            "target crashed {point} of dispatch {}, restarted {} later",
            self.nth,
            humantime::format_duration(self.restart_after)
        )
    }
}

impl Kind for CrashTarget {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn role(&self) -> Role {
        Role::Target
    }

    fn verdict(&self, event: Event) -> Option<Action> {
        let restart_after = self.restart_after;
        (event == Event::Dispatch(self.nth)).then_some(match self.at {
            CrashPoint::BeforeDispatch => Action::CrashBeforeDispatch { restart_after },
            CrashPoint::AfterCommit => Action::CrashAfterCommit { restart_after },
        })
    }

    fn simpler(&self) -> Vec<Fault> {
        let nths = lower_u32(self.nth, 1)
            .into_iter()
            .map(|nth| CrashTarget { nth, ..*self });
        let sooner = lower_ms(self.restart_after, 1)
            .into_iter()
            .map(|restart_after| CrashTarget {
                restart_after,
                ..*self
            });
        nths.chain(sooner).map(Fault::CrashTarget).collect()
    }

    fn live(&self) -> Live {
        Live::Restarts
    }

    fn real_wait(&self) -> Option<(&'static str, Duration)> {
        Some(("restart-after", self.restart_after))
    }
}

impl Declared for CrashTarget {
    const NAME: &'static str = "crash-target";
    const WEIGHT: u32 = 2;
    type File = CrashTarget;

    fn from_file(file: CrashTarget, _calls: u32) -> Result<CrashTarget, String> {
        check_nth(Self::NAME, file.nth)?;
        Ok(file)
    }

    fn to_file(&self) -> CrashTarget {
        *self
    }

    fn strategy(space: Space) -> BoxedStrategy<CrashTarget> {
        let at = prop_oneof![
            Just(CrashPoint::AfterCommit),
            Just(CrashPoint::BeforeDispatch)
        ];
        (at, nth(space), 1..=MAX_RESTART_MS)
            .prop_map(|(at, nth, restart)| CrashTarget {
                at,
                nth,
                restart_after: Duration::from_millis(restart),
            })
            .boxed()
    }
}
