//! `advance-clock`: every wall clock jumps forward, past a provider's key
//! retention or a target's own. In the simulator a jump is an offset on the
//! harness clock (25 hours cost nothing); live, nobody may move a real
//! clock, so retentions are shortened and the jump is waited out.

use std::fmt;
use std::time::Duration;

use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;
use serde::{Deserialize, Serialize};

use super::{Action, Declared, Event, Fault, Kind, Live, Role, Space, Trigger};
use crate::simplify::lower;

/// The jumps `chaos explore` makes, smallest first. Each crosses a retention
/// boundary the others do not: 1h (a provider's short retention), 24h (its
/// usual one), 7 days (ledger's own). No sum of up to four of them lands
/// within a minute of one of those boundaries, where the order of a claim and
/// a commit in the same millisecond would decide the verdict.
pub(crate) const CLOCK_JUMPS: [Duration; 5] = [
    Duration::from_secs(60),
    Duration::from_secs(2 * 3_600),
    Duration::from_secs(25 * 3_600),
    Duration::from_secs(8 * 86_400),
    Duration::from_secs(400 * 86_400),
];

/// Move every wall clock forward (provider retention, target retention).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdvanceClock {
    pub by: Duration,
    pub when: Trigger,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(crate) struct File {
    #[serde(with = "humantime_serde")]
    by: Duration,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    after_call: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    after_commit: Option<u32>,
}

impl fmt::Display for AdvanceClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "clock advanced {} {}",
            humantime::format_duration(self.by),
            self.when
        )
    }
}

impl Kind for AdvanceClock {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn role(&self) -> Role {
        Role::Clock
    }

    fn verdict(&self, event: Event) -> Option<Action> {
        (event == Event::Moment(self.when)).then_some(Action::AdvanceClock(self.by))
    }

    fn trigger(&self) -> Option<Trigger> {
        Some(self.when)
    }

    fn trigger_mut(&mut self) -> Option<&mut Trigger> {
        Some(&mut self.when)
    }

    fn simpler(&self) -> Vec<Fault> {
        let level = CLOCK_JUMPS
            .iter()
            .position(|jump| *jump == self.by)
            .unwrap_or(0);
        let smaller = lower(level as u64, 0)
            .into_iter()
            .map(|level| AdvanceClock {
                by: CLOCK_JUMPS[level as usize],
                ..*self
            });
        let earlier = self
            .when
            .simpler()
            .into_iter()
            .map(|when| AdvanceClock { when, ..*self });
        smaller.chain(earlier).map(Fault::AdvanceClock).collect()
    }

    fn live(&self) -> Live {
        Live::ClockJump(self.by)
    }
}

impl Declared for AdvanceClock {
    const NAME: &'static str = "advance-clock";
    const WEIGHT: u32 = 2;
    type File = File;

    fn from_file(file: File, calls: u32) -> Result<AdvanceClock, String> {
        Ok(AdvanceClock {
            by: file.by,
            when: Trigger::from_file(Self::NAME, file.after_call, file.after_commit, calls)?,
        })
    }

    fn to_file(&self) -> File {
        let (after_call, after_commit) = self.when.to_file();
        File {
            by: self.by,
            after_call,
            after_commit,
        }
    }

    fn strategy(space: Space) -> BoxedStrategy<AdvanceClock> {
        (0..CLOCK_JUMPS.len(), Trigger::strategy(space))
            .prop_map(|(jump, when)| AdvanceClock {
                by: CLOCK_JUMPS[jump],
                when,
            })
            .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_sum_of_clock_jumps_lands_on_a_retention_boundary() {
        let boundaries_ms: Vec<u64> = [3_600u64, 86_400, 7 * 86_400]
            .iter()
            .map(|seconds| seconds * 1_000)
            .collect();
        let jumps: Vec<u64> = CLOCK_JUMPS
            .iter()
            .map(|jump| jump.as_millis() as u64)
            .collect();
        let mut sums = vec![0u64];
        // Up to four faults in an explored case (explore::schedule::MAX_FAULTS).
        for _ in 0..4 {
            let next: Vec<u64> = sums
                .iter()
                .flat_map(|sum| jumps.iter().map(move |jump| sum + jump))
                .collect();
            sums.extend(next);
        }
        for sum in sums {
            for boundary in &boundaries_ms {
                assert!(
                    sum.abs_diff(*boundary) > 60_000,
                    "{sum} ms is near {boundary} ms"
                );
            }
        }
    }
}
