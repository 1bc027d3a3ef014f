//! `delay`: an answer that arrives, late. Past the receiver's timeout it is
//! as good as lost; inside it, it only widens a race.

use std::fmt;
use std::time::Duration;

use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;
use serde::{Deserialize, Serialize};

use super::{check_nth, nth, Action, Declared, Event, Fault, Hop, Kind, Live, Role, Space};
use crate::simplify::{lower_ms, lower_u32};

/// `chaos explore` delays an answer at most this long: past the agent's
/// timeout of the slowest network it explores (72 ms).
pub(crate) const MAX_DELAY_MS: u64 = 80;

/// The answer on `hop` to the Nth request arrives `by` late.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Delay {
    pub hop: Hop,
    pub nth: u32,
    #[serde(with = "humantime_serde")]
    pub by: Duration,
}

impl fmt::Display for Delay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "answer {} on {} delayed {}",
            self.nth,
            self.hop,
            humantime::format_duration(self.by)
        )
    }
}

impl Kind for Delay {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn role(&self) -> Role {
        self.hop.receiver()
    }

    fn verdict(&self, event: Event) -> Option<Action> {
        (event == self.hop.event(self.nth)).then_some(Action::DelayAnswer {
            hop: self.hop,
            by: self.by,
        })
    }

    fn simpler(&self) -> Vec<Fault> {
        let nths = lower_u32(self.nth, 1)
            .into_iter()
            .map(|nth| Delay { nth, ..*self });
        let shorter = lower_ms(self.by, 1)
            .into_iter()
            .map(|by| Delay { by, ..*self });
        nths.chain(shorter).map(Fault::Delay).collect()
    }

    fn live(&self) -> Live {
        Live::AsSimulated
    }

    fn real_wait(&self) -> Option<(&'static str, Duration)> {
        Some(("by", self.by))
    }
}

impl Declared for Delay {
    const NAME: &'static str = "delay";
    const WEIGHT: u32 = 1;
    type File = Delay;

    fn from_file(file: Delay, _calls: u32) -> Result<Delay, String> {
        check_nth(Self::NAME, file.nth)?;
        Ok(file)
    }

    fn to_file(&self) -> Delay {
        *self
    }

    fn strategy(space: Space) -> BoxedStrategy<Delay> {
        (Hop::strategy(), nth(space), 1..=MAX_DELAY_MS)
            .prop_map(|(hop, nth, by)| Delay {
                hop,
                nth,
                by: Duration::from_millis(by),
            })
            .boxed()
    }
}
