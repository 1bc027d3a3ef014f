//! `chaos bench`: simulations per second, or `--explore`'s figures.

use super::stdout::out;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::load_scenarios;
use super::signal::{self, cancel_on_signal, InFlight};
use crate::error::Error;
use crate::exit::Exit;
use crate::sim::SimTarget;
use crate::{explore, target};

#[derive(Debug, clap::Args)]
pub(super) struct BenchArgs {
    /// The target to measure.
    #[arg(long, default_value = "runtime-ledger")]
    target: String,
    /// Timed rounds per figure; the median is reported.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Length of one round.
    #[arg(long, default_value = "1s", value_parser = super::parse_duration, allow_hyphen_values = true)]
    round_length: Duration,
    /// Where the six tests' scenarios are.
    #[arg(long, default_value = "scenarios")]
    scenarios: PathBuf,
    /// Measure `chaos explore` instead, at full counts: 10,000 cases against
    /// runtime-ledger, 1,000 against each broken target per seed.
    #[arg(long)]
    explore: bool,
    /// With --explore: explore each broken target with seeds 0 to N-1.
    #[arg(long, default_value_t = 20, requires = "explore")]
    seeds: u64,
}

/// The scenario of each of the six tests, and a re-plan, that the benchmark mixes.
const MIX: [&str; 7] = [
    "lost-response-keyed",
    "concurrent-attempts",
    "changed-payload",
    "worker-restart",
    "expired-history",
    "revoked-permission",
    "three-charges",
];

pub(super) fn bench(args: BenchArgs) -> Result<Exit, Error> {
    let target = target::find(&args.target).map_err(|error| Error::Usage(error.to_string()))?;
    let paths: Vec<PathBuf> = MIX
        .iter()
        .map(|name| args.scenarios.join(format!("{name}.toml")))
        .collect();
    let mix = load_scenarios(&paths)?;
    if args.explore {
        return bench_explore(args.seeds);
    }
    if args.rounds == 0 {
        return Err(Error::Usage("--rounds must be at least 1".into()));
    }
    let figures = crate::bench::bench(&mix, &target, args.rounds, args.round_length);
    out!("{}", figures.render());
    Ok(Exit::Success)
}

fn bench_explore(seeds: u64) -> Result<Exit, Error> {
    let (correct, broken): (Vec<SimTarget>, Vec<SimTarget>) = target::reference_targets()
        .into_iter()
        .partition(|target| target.info.name == explore::bench::CORRECT);
    let correct = correct.first().ok_or_else(|| {
        Error::Usage(format!(
            "the {} reference target is missing",
            explore::bench::CORRECT
        ))
    })?;
    let cancel = cancel_on_signal("interrupted: no figures will be printed", InFlight::Abandon);
    let figures = explore::bench::bench(correct, &broken, seeds, &cancel);
    if cancel.load(Ordering::Relaxed) {
        return Err(Error::Interrupted(signal::received().unwrap_or("signal")));
    }
    out!("{}", figures.render());
    Ok(if figures.problems().is_empty() {
        Exit::Success
    } else {
        Exit::InvariantViolated
    })
}
