//! `chaos run`: every scenario against every target, every seed judged.

use std::path::PathBuf;

use super::signal::{self, cancel_on_signal, InFlight};
use super::stdout::{errln, print_err};
use super::{check_writable, load_scenarios, present, resolve_targets, say, ReportArgs};
use crate::error::Error;
use crate::exit::Exit;
use crate::progress::{Bar, CellDone, Lines, Observer};
use crate::report::otlp::{Destination, Exporter};
use crate::scenario::Scenario;
use crate::sweep::{Partition, Payloads, Seeds, Sweep, FAILURES_KEPT_PER_CELL};
use crate::target::Target;
use crate::trial::Judged;

#[derive(Debug, clap::Args)]
pub(super) struct RunArgs {
    /// Scenario files (e.g. scenarios/*.toml). None: the suite built into
    /// chaos (the repository's scenarios/*.toml; `chaos scenarios export DIR`
    /// writes it out for editing).
    scenarios: Vec<PathBuf>,
    /// A target to run (repeatable): a reference target's name (simulated), a
    /// target file's path or its name from `chaos list` (live).
    /// Default: every reference target.
    #[arg(long = "target", value_name = "NAME|FILE")]
    targets: Vec<String>,
    /// Run this many seeds per (scenario, target), from --first-seed; live,
    /// this many trials. Default: 200, or 5 when a target runs live.
    #[arg(long, conflicts_with = "seed", value_parser = super::parse_count, allow_hyphen_values = true)]
    seeds: Option<u64>,
    /// The first seed of a sweep.
    #[arg(long, conflicts_with = "seed", default_value_t = 0, value_parser = super::parse_count, allow_hyphen_values = true)]
    first_seed: u64,
    /// Run exactly this seed (replays a failure).
    #[arg(long, value_parser = super::parse_count, allow_hyphen_values = true)]
    seed: Option<u64>,
    /// Run only shard K of N: every Nth (scenario, target, seed) trial from the
    /// Kth. `chaos merge` combines the N shard reports into the whole run's.
    #[arg(long, value_name = "K/N")]
    partition: Option<Partition>,
    /// Put payload bytes and the bearer token in the reports (redacted by default).
    #[arg(long)]
    include_payloads: bool,
    /// Keep the full record (history, ledger, timeline) of this many
    /// non-passing seeds per cell; the first failing seed is always kept.
    #[arg(long, value_name = "N", default_value_t = FAILURES_KEPT_PER_CELL)]
    keep_failures: usize,
    /// Live: try every cell of a target that never gets ready. By default,
    /// after it first fails to get ready its remaining cells are `unknown`
    /// (not run) at once.
    #[arg(long)]
    keep_trying: bool,
    /// `--deny warnings`: a cell whose seeds only warned fails (exit 1), the
    /// way clippy's `-D warnings` does. Warnings (a race the provider's key
    /// absorbed) never fail a cell otherwise.
    #[arg(long, value_name = "WHAT", value_parser = ["warnings"])]
    deny: Option<String>,
    /// Export each trial as an OpenTelemetry trace, in the trace its
    /// attempts' `traceparent` opened (a target's own spans join it): to an
    /// OTLP/HTTP collector (http://127.0.0.1:4318, protobuf; /v1/traces when
    /// the URL names no path) or, any other value, to a file of OTLP JSON
    /// lines. A failing collector is one warning, never a failed run.
    #[arg(long, value_name = "URL|FILE", value_parser = Destination::parse)]
    otlp: Option<Destination>,
    #[command(flatten)]
    reports: ReportArgs,
}

/// Live trials take real seconds each; simulated ones, microseconds.
fn default_seeds(targets: &[Target]) -> u64 {
    if targets
        .iter()
        .any(|target| matches!(target, Target::Live { .. }))
    {
        5
    } else {
        200
    }
}

pub(super) fn run(args: RunArgs) -> Result<Exit, Error> {
    let scenarios = load_scenarios(&args.scenarios)?;
    let targets = resolve_targets(&args.targets)?;
    let seeds = match args.seed {
        Some(seed) => Seeds::One(seed),
        None => seed_range(
            args.first_seed,
            args.seeds.unwrap_or(default_seeds(&targets)),
        )?,
    };
    check_writable(&args.reports)?;
    let sweep = Sweep {
        seeds,
        partition: args.partition,
        payloads: if args.include_payloads {
            Payloads::Included
        } else {
            Payloads::Redacted
        },
        failures_kept: args.keep_failures,
        keep_trying: args.keep_trying,
        deny_warnings: args.deny.is_some(),
    };

    // The seed first, so a run that dies halfway can still be replayed.
    let shard = args
        .partition
        .map(|partition| format!("; shard {partition}"))
        .unwrap_or_default();
    say(
        &args.reports,
        format!(
            "chaos: {seeds}; {} scenario(s){} x {} target(s){shard}",
            scenarios.len(),
            if args.scenarios.is_empty() {
                " (built in)"
            } else {
                ""
            },
            targets.len()
        ),
    );

    for warning in retention_warnings(&scenarios, &targets)
        .into_iter()
        .chain(ignored_field_warnings(&scenarios, &targets))
    {
        errln!("warning: {warning}");
    }

    let cancel = cancel_on_signal(
        "interrupted: stopping (trials in flight are abandoned, live targets are ended); no report will be written",
        InFlight::Abandon,
    );
    // A terminal gets the bar; a log (CI) a line per finished cell, in the
    // order cells finish, so a long live run is never silent.
    let bar = Bar::on_stderr("trials", None);
    let lines = Lines::on_stderr(print_err);
    let observer: &dyn Observer = match (&bar, &lines) {
        (Some(bar), _) => bar,
        (None, Some(lines)) => lines,
        (None, None) => &(),
    };
    // Traces start before the run, so a file that cannot be written is said
    // before any trial.
    let exporter = args
        .otlp
        .map(|destination| {
            Exporter::start(
                destination,
                targets.iter().map(Target::transport).collect(),
                |warning| errln!("warning: {warning}"),
            )
        })
        .transpose()
        .map_err(Error::Usage)?;
    let traced;
    let observer: &dyn Observer = match &exporter {
        Some(exporter) => {
            traced = Traced { observer, exporter };
            &traced
        }
        None => observer,
    };
    let summary = crate::run(&scenarios, &targets, sweep, observer, &cancel);
    observer.finished();
    // Every trace sent (or given up on) before the table, so a warning
    // about them is not lost below it.
    if let Some(exporter) = &exporter {
        exporter.finish();
    }
    // A signal that came before this point said nothing would be written.
    let summary = summary
        .filter(|_| signal::begin_writing())
        .ok_or_else(|| Error::Interrupted(signal::received().unwrap_or("signal")))?;
    if summary.cells.is_empty() && summary.excluded.is_empty() {
        errln!(
            "warning: shard {} holds no trials: there are fewer trials than shards",
            args.partition.map(|p| p.to_string()).unwrap_or_default()
        );
    }
    present(&summary, &args.reports)
}

/// The most seeds one cell may run: past it a typo (an extra zero or three)
/// would run for days rather than fail at once.
pub(crate) const MAX_SEEDS: u64 = 100_000_000;

/// `count` seeds from `first`, every one of them a u64: a range past
/// u64::MAX used to wrap around to 0 (issue 15).
fn seed_range(first: u64, count: u64) -> Result<Seeds, Error> {
    if count == 0 {
        return Err(Error::Usage("--seeds must be at least 1".into()));
    }
    if count > MAX_SEEDS {
        return Err(Error::Usage(format!(
            "--seeds {count} is more than the {MAX_SEEDS} one run may take per cell; split it with --first-seed, or across machines with --partition"
        )));
    }
    if first.checked_add(count - 1).is_none() {
        return Err(Error::Usage(format!(
            "--first-seed {first} with --seeds {count} runs past the last seed, {}; lower --first-seed to at most {}",
            u64::MAX,
            u64::MAX - (count - 1)
        )));
    }
    Ok(Seeds::Range { first, count })
}

/// A scenario field the live transport does not carry out, named: a huge
/// `max-latency` failed simulated and passed live with nothing said (issue 15).
fn ignored_field_warnings(scenarios: &[Scenario], targets: &[Target]) -> Vec<String> {
    let live: Vec<&str> = targets
        .iter()
        .filter(|target| matches!(target, Target::Live { .. }))
        .map(Target::name)
        .collect();
    if live.is_empty() {
        return Vec::new();
    }
    let default = crate::scenario::NetworkSetup::default();
    scenarios
        .iter()
        .filter(|scenario| scenario.network != default)
        .map(|scenario| {
            format!(
                "{}: [network] min-latency = \"{}\" and max-latency = \"{}\" apply only in the simulator; live ({}) the latency is loopback's own, so a simulated and a live verdict of this scenario may differ",
                scenario.path.display(),
                humantime::format_duration(scenario.network.min_latency),
                humantime::format_duration(scenario.network.max_latency),
                live.join(", ")
            )
        })
        .collect()
}

/// A target whose declared retention is no longer than a scenario's provider
/// keeps its keys adds no protection past the provider's window: a clock
/// jump that crosses one crosses both, and the cell's expectation moves. Said
/// once per target, before anything runs.
fn retention_warnings(scenarios: &[Scenario], targets: &[Target]) -> Vec<String> {
    targets
        .iter()
        .filter_map(|target| {
            let retention = target.info().retention?;
            let shorter: Vec<&str> = scenarios
                .iter()
                .filter(|scenario| {
                    scenario
                        .provider
                        .retention
                        .is_some_and(|provider| retention <= provider)
                })
                .map(|scenario| scenario.name.as_str())
                .collect();
            (!shorter.is_empty()).then(|| {
                format!(
                    "{} declares a {} retention, no longer than the provider's in {}: past the provider's window this layer adds no protection, and a retry there may be allowed a new effect",
                    target.name(),
                    humantime::format_duration(retention),
                    shorter.join(", ")
                )
            })
        })
        .collect()
}

/// The run's observer, with each judged trial's trace exported (`--otlp`).
struct Traced<'a> {
    observer: &'a dyn Observer,
    exporter: &'a Exporter,
}

impl Observer for Traced<'_> {
    fn started(&self, total: u64) {
        self.observer.started(total);
    }
    fn progressed(&self, done: u64) {
        self.observer.progressed(done);
    }
    fn note(&self, message: String) {
        self.observer.note(message);
    }
    fn cell_finished(&self, done: &CellDone<'_>) {
        self.observer.cell_finished(done);
    }
    fn judged(&self, column: usize, target: &str, judged: &Judged<'_>) {
        self.exporter.add(column, target, judged);
    }
    fn finished(&self) {
        self.observer.finished();
    }
}
