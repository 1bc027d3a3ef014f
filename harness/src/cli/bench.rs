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
    /// Timed rounds per figure; the median is reported. Default: 5, or 3
    /// with --live.
    #[arg(long)]
    rounds: Option<usize>,
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
    /// Measure a live target file instead (a name from `chaos list` or a
    /// path): the live suite timed with a process per trial, one at a time,
    /// and as the target file says (process reuse, its `parallel`), in
    /// alternating rounds, with the verdicts compared.
    #[arg(long, value_name = "NAME|FILE", conflicts_with = "explore")]
    live: Option<String>,
    /// With --live: trials per (scenario, target) cell.
    #[arg(long, default_value_t = 5, requires = "live", value_parser = super::parse_count)]
    trials: u64,
}

/// The live suite `--live` times: the six tests and their first variants,
/// the fifteen scenarios chaos had when the live speed was first measured
/// (issue 14: 60.8 s against python-replay-first).
const LIVE_SUITE: [&str; 15] = [
    "changed-payload-equivalent",
    "changed-payload",
    "concurrent-attempts-keyed",
    "concurrent-attempts",
    "expired-history-target",
    "expired-history",
    "lost-response-agent-hop",
    "lost-response-blind",
    "lost-response-keyed",
    "lost-response-lookup",
    "revoked-permission",
    "revoked-scope",
    "revoked-while-unknown",
    "worker-restart-before-dispatch",
    "worker-restart",
];

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
    if let Some(live) = &args.live {
        return bench_live(&args, live);
    }
    let target = target::find(&args.target).map_err(|error| Error::Usage(error.to_string()))?;
    let paths: Vec<PathBuf> = MIX
        .iter()
        .map(|name| args.scenarios.join(format!("{name}.toml")))
        .collect();
    let mix = load_scenarios(&paths)?;
    if args.explore {
        return bench_explore(args.seeds);
    }
    let rounds = args.rounds.unwrap_or(5);
    if rounds == 0 {
        return Err(Error::Usage("--rounds must be at least 1".into()));
    }
    let figures = crate::bench::bench(&mix, &target, rounds, args.round_length);
    out!("{}", figures.render());
    Ok(Exit::Success)
}

fn bench_live(args: &BenchArgs, live: &str) -> Result<Exit, Error> {
    let rounds = args.rounds.unwrap_or(3);
    if rounds == 0 || args.trials == 0 {
        return Err(Error::Usage(
            "--rounds and --trials must be at least 1".into(),
        ));
    }
    let file = match super::resolve_targets(&[live.to_owned()])?.pop() {
        Some(crate::Target::Live { file, .. }) => file,
        _ => {
            return Err(Error::Usage(format!(
                "--live takes a target file (a path, or a live target's name from `chaos list`); '{live}' is simulated: measure it with --target"
            )))
        }
    };
    let paths: Vec<PathBuf> = LIVE_SUITE
        .iter()
        .map(|name| args.scenarios.join(format!("{name}.toml")))
        .collect();
    let suite = load_scenarios(&paths)?;
    let cancel = cancel_on_signal("interrupted: no figures will be printed", InFlight::Abandon);
    let figures = crate::bench::bench_live(&suite, &file, live, args.trials, rounds, &cancel);
    let Some(figures) = figures.filter(|_| !cancel.load(Ordering::Relaxed)) else {
        return Err(Error::Interrupted(signal::received().unwrap_or("signal")));
    };
    out!("{}", figures.render());
    Ok(if figures.verdicts_differ.is_empty() {
        Exit::Success
    } else {
        Exit::InvariantViolated
    })
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
