//! What a run covers besides its scenarios and targets: the seeds, the shard,
//! what the reports may show, how many failing seeds keep their record, and
//! the command that replays one trial. The runner reads these settings and
//! the report folds by them; neither knows the other.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

/// How many failing seeds per cell keep their full detail in the report, by
/// default (`--keep-failures`).
pub const FAILURES_KEPT_PER_CELL: usize = 5;

/// The seeds of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seeds {
    /// `count` consecutive seeds from `first`.
    Range { first: u64, count: u64 },
    /// Exactly one seed (a rerun).
    One(u64),
}

impl Seeds {
    pub fn iter(self) -> impl Iterator<Item = u64> {
        let (first, count) = self.first_and_count();
        (0..count).map(move |offset| first.wrapping_add(offset))
    }

    pub fn count(self) -> u64 {
        self.first_and_count().1
    }

    pub fn first(self) -> u64 {
        self.first_and_count().0
    }

    pub(crate) fn first_and_count(self) -> (u64, u64) {
        match self {
            Seeds::Range { first, count } => (first, count),
            Seeds::One(seed) => (seed, 1),
        }
    }
}

impl fmt::Display for Seeds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Seeds::One(seed) => write!(f, "seed {seed}"),
            Seeds::Range { first, count } => {
                write!(
                    f,
                    "seeds {first}..={} ({count} per cell)",
                    first.wrapping_add(count.saturating_sub(1))
                )
            }
        }
    }
}

/// One shard of a run: `--partition K/N` takes every Nth trial of the
/// (scenario, target, seed) list, starting with the Kth. Round-robin spreads
/// every cell over every shard, so shards take about the same time; the same
/// command with 1/N to N/N covers every trial exactly once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Partition {
    /// 1-based.
    pub index: u64,
    pub total: u64,
}

impl Partition {
    /// Whether the trial at `position` (0-based, in run order) is this shard's.
    pub fn contains(self, position: u64) -> bool {
        position % self.total == self.index - 1
    }

    /// How many of `trials` positions are this shard's: those `p` with
    /// `p % N == K - 1`.
    pub(crate) fn share_of(self, trials: u64) -> u64 {
        trials.saturating_add(self.total - self.index) / self.total
    }
}

impl fmt::Display for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.total)
    }
}

impl std::str::FromStr for Partition {
    type Err = String;

    fn from_str(text: &str) -> Result<Partition, String> {
        let usage = || format!("bad partition '{text}': write K/N with 1 <= K <= N, e.g. 2/4");
        let (index, total) = text.split_once('/').ok_or_else(usage)?;
        let index: u64 = index.trim().parse().map_err(|_| usage())?;
        let total: u64 = total.trim().parse().map_err(|_| usage())?;
        if index == 0 || total == 0 || index > total {
            return Err(usage());
        }
        Ok(Partition { index, total })
    }
}

/// Whether payload bytes and tokens appear in the report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Payloads {
    /// Payload bytes and the token are left out (`null`); the default.
    #[default]
    Redacted,
    /// Asked for with `--include-payloads`.
    Included,
}

/// What a run covers, beyond its scenarios and targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sweep {
    pub seeds: Seeds,
    /// Run only this shard's trials.
    pub partition: Option<Partition>,
    /// Whether failing seeds' records carry payload bytes and the token.
    pub payloads: Payloads,
    /// How many non-passing seeds per cell keep their full record (the first
    /// failing and first unknown seeds always do).
    pub failures_kept: usize,
    /// Try every cell of a live target that never got ready, instead of
    /// giving up on the rest after the first (`--keep-trying`).
    pub keep_trying: bool,
    /// `--deny warnings`: a cell whose seeds only warned fails.
    pub deny_warnings: bool,
}

impl Sweep {
    pub fn new(seeds: Seeds) -> Sweep {
        Sweep {
            seeds,
            partition: None,
            payloads: Payloads::Redacted,
            failures_kept: FAILURES_KEPT_PER_CELL,
            keep_trying: false,
            deny_warnings: false,
        }
    }
}

/// What carries a target's trials.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    /// The deterministic simulation: every role a host, time simulated.
    Sim,
    /// A real process on 127.0.0.1, real time.
    Live,
}

impl Transport {
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Sim => "sim",
            Transport::Live => "live",
        }
    }

    pub(crate) fn is_sim(&self) -> bool {
        *self == Transport::Sim
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The transports of a run's targets, written `sim`, `live` or `sim+live`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Transports(BTreeSet<Transport>);

impl Transports {
    pub fn of(transports: impl IntoIterator<Item = Transport>) -> Transports {
        Transports(transports.into_iter().collect())
    }
}

impl fmt::Display for Transports {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str(Transport::Sim.as_str());
        }
        let names: Vec<&str> = self.0.iter().map(|transport| transport.as_str()).collect();
        f.write_str(&names.join("+"))
    }
}

impl Serialize for Transports {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Transports {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.split('+')
            .map(|name| match name {
                "sim" => Ok(Transport::Sim),
                "live" => Ok(Transport::Live),
                other => Err(serde::de::Error::custom(format!(
                    "unknown transport '{other}'. Choose from: sim, live, sim+live"
                ))),
            })
            .collect::<Result<BTreeSet<_>, _>>()
            .map(Transports)
    }
}

/// The command that replays one trial exactly.
pub fn rerun_command(scenario_path: &str, target: &str, seed: u64) -> String {
    format!("chaos run {scenario_path} --target {target} --seed {seed}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transports_read_back_as_written() {
        for text in ["sim", "live", "sim+live"] {
            let transports: Transports = serde_json::from_value(text.into()).unwrap();
            assert_eq!(transports.to_string(), text);
        }
        assert!(serde_json::from_value::<Transports>("warp".into()).is_err());
    }

    #[test]
    fn a_shard_counts_its_own_positions() {
        let shard = Partition { index: 2, total: 3 };
        let mine = (0..10).filter(|&position| shard.contains(position)).count();
        assert_eq!(shard.share_of(10), mine as u64);
    }
}
