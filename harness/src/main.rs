//! The `chaos` command: a thin layer of flags over the library.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};

use chaos::exit::Exit;
use chaos::report::{json, table};
use chaos::runner::{self, Seeds};
use chaos::scenario::{Scenario, TestKind};
use chaos::target_file;
use chaos::targets::{self, Target};

// A simulation allocates and frees thousands of small buffers (segments,
// headers, JSON); mimalloc measurably shortens that path (see README, Performance).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(
    name = "chaos",
    version,
    about = "Proves whether an idempotency layer holds, by driving it through faults and counting real effects",
    after_help = EXIT_CODES
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

const EXIT_CODES: &str = "Exit codes:\n  0  every invariant held\n  1  an invariant was violated\n  2  bad input or usage\n  3  a verdict could not be reached (target error, run cut short)\n  130 interrupted; no report written";

#[derive(Debug, Subcommand)]
enum Command {
    /// Run scenarios against targets and judge every seed.
    Run(RunArgs),
    /// List the targets (reference targets and target files) and the scenarios.
    List {
        /// Where to look for scenarios.
        #[arg(long, default_value = "scenarios")]
        scenarios: PathBuf,
        /// Where to look for target files (DIR/*/target.toml, DIR/*/*.target.toml).
        #[arg(long, default_value = "targets")]
        targets: PathBuf,
    },
    /// Measure simulations per second: the six-test mix against a no-fault run.
    Bench(BenchArgs),
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// Scenario files (e.g. scenarios/*.toml).
    #[arg(required = true)]
    scenarios: Vec<PathBuf>,
    /// A target to run (repeatable): a reference target's name (simulated), a
    /// target file's path or its name from `chaos list` (live).
    /// Default: every reference target.
    #[arg(long = "target", value_name = "NAME|FILE")]
    targets: Vec<String>,
    /// Run this many seeds per (scenario, target), from --first-seed; live,
    /// this many trials. Default: 200, or 5 when a target runs live.
    #[arg(long, conflicts_with = "seed")]
    seeds: Option<u64>,
    /// The first seed of a sweep.
    #[arg(long, conflicts_with = "seed", default_value_t = 0)]
    first_seed: u64,
    /// Run exactly this seed (replays a failure).
    #[arg(long)]
    seed: Option<u64>,
    /// Where to write report.json.
    #[arg(long, default_value = "reports/latest")]
    out: PathBuf,
}

#[derive(Debug, clap::Args)]
struct BenchArgs {
    /// The target to measure.
    #[arg(long, default_value = "ledger")]
    target: String,
    /// Timed rounds per figure; the median is reported.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Length of one round.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    round_length: Duration,
    /// Where the six tests' scenarios are.
    #[arg(long, default_value = "scenarios")]
    scenarios: PathBuf,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let exit = match cli.command {
        Command::Run(args) => run(args),
        Command::List { scenarios, targets } => list(&scenarios, &targets),
        Command::Bench(args) => bench(args),
    };
    exit.into()
}

fn fail(message: impl std::fmt::Display, exit: Exit) -> Exit {
    eprintln!("error: {message}");
    exit
}

fn load_scenarios(paths: &[PathBuf]) -> Result<Vec<Scenario>, Exit> {
    let mut scenarios = Vec::with_capacity(paths.len());
    let mut failed = false;
    for path in paths {
        match Scenario::load(path) {
            Ok(scenario) => scenarios.push(scenario),
            Err(error) => {
                eprintln!("error: {error}");
                failed = true;
            }
        }
    }
    let mut names: Vec<&str> = scenarios
        .iter()
        .map(|scenario| scenario.name.as_str())
        .collect();
    names.sort_unstable();
    if let Some(pair) = names.windows(2).find(|pair| pair[0] == pair[1]) {
        eprintln!(
            "error: two scenario files are both named '{}'; scenario names must be unique",
            pair[0]
        );
        failed = true;
    }
    if failed {
        Err(Exit::BadInput)
    } else {
        Ok(scenarios)
    }
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

/// Where `--target NAME` looks for target files.
const TARGETS_DIR: &str = "targets";

fn resolve_targets(args: &[String]) -> Result<Vec<Target>, Exit> {
    if args.is_empty() {
        return Ok(targets::reference_targets()
            .into_iter()
            .map(Target::Sim)
            .collect());
    }
    let mut resolved = Vec::with_capacity(args.len());
    let mut failed = false;
    for arg in args {
        match targets::resolve(arg, Path::new(TARGETS_DIR)) {
            Ok(target) => resolved.push(target),
            Err(error) => {
                eprintln!("error: {error}");
                failed = true;
            }
        }
    }
    let mut names: Vec<&str> = resolved.iter().map(Target::name).collect();
    names.sort_unstable();
    if let Some(pair) = names.windows(2).find(|pair| pair[0] == pair[1]) {
        eprintln!(
            "error: two targets of this run are both named '{}'; each column needs its own name",
            pair[0]
        );
        failed = true;
    }
    if failed {
        Err(Exit::BadInput)
    } else {
        Ok(resolved)
    }
}

fn run(args: RunArgs) -> Exit {
    let scenarios = match load_scenarios(&args.scenarios) {
        Ok(scenarios) => scenarios,
        Err(exit) => return exit,
    };
    let targets = match resolve_targets(&args.targets) {
        Ok(targets) => targets,
        Err(exit) => return exit,
    };
    let seeds = match args.seed {
        Some(seed) => Seeds::One(seed),
        None if args.seeds == Some(0) => return fail("--seeds must be at least 1", Exit::BadInput),
        None => Seeds::Range {
            first: args.first_seed,
            count: args.seeds.unwrap_or(default_seeds(&targets)),
        },
    };

    // The seed first, so a run that dies halfway can still be replayed.
    println!(
        "chaos: {seeds}; {} scenario(s) x {} target(s)",
        scenarios.len(),
        targets.len()
    );

    let cancel = Arc::new(AtomicBool::new(false));
    {
        let cancel = cancel.clone();
        let handler = ctrlc::set_handler(move || {
            if cancel.swap(true, Ordering::SeqCst) {
                // A second Ctrl-C: the user means it. Live targets go first.
                chaos::live::end_all_targets();
                std::process::exit(i32::from(Exit::Interrupted.code()));
            }
            eprintln!("\ninterrupted: finishing the trials in flight; no report will be written (Ctrl-C again to quit now)");
        });
        if let Err(error) = handler {
            eprintln!("warning: Ctrl-C will not stop the run cleanly: {error}");
        }
    }

    let Some(summary) = runner::run_targets(&scenarios, &targets, seeds, &(), &cancel) else {
        eprintln!("interrupted: nothing was written");
        return Exit::Interrupted;
    };

    let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    println!("{}", table::render(&summary, color));
    print!("{}", table::render_failures(&summary));

    match json::write(&summary, &args.out) {
        Ok(path) => println!("report: {}", path.display()),
        Err(error) => {
            return fail(
                format!(
                    "failed to write the report into {}: {error}",
                    args.out.display()
                ),
                Exit::BadInput,
            )
        }
    }
    let exit = summary.exit();
    println!("exit {}: {}", exit.code(), exit.describe());
    exit
}

fn list(dir: &Path, targets_dir: &Path) -> Exit {
    let mut exit = Exit::Success;
    let retention = |retention: Option<Duration>| {
        retention.map_or_else(
            || "forever".into(),
            |retention| humantime::format_duration(retention).to_string(),
        )
    };
    println!("targets (run with --target NAME):");
    for target in targets::reference_targets() {
        println!(
            "  {:<34} sim   {} (retention: {})",
            target.info.name,
            target.info.summary,
            retention(target.info.retention)
        );
    }
    for found in target_file::discover(targets_dir) {
        match found {
            Ok(file) => println!(
                "  {:<34} live  {} (retention: {}) [{}]",
                file.name,
                file.summary,
                retention(file.info().retention),
                file.path.display()
            ),
            Err(error) => {
                eprintln!("error: {error}");
                exit = Exit::BadInput;
            }
        }
    }
    let mut paths: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
            .collect(),
        Err(error) => {
            return fail(
                format!("failed to read {}: {error}", dir.display()),
                Exit::BadInput,
            )
        }
    };
    paths.sort();
    println!("scenarios in {}:", dir.display());
    for path in paths {
        match Scenario::load(&path) {
            Ok(scenario) => println!(
                "  {:<32} {:<20} {}",
                scenario.name,
                test_name(scenario.test),
                scenario.description.lines().next().unwrap_or("")
            ),
            Err(error) => {
                eprintln!("error: {error}");
                exit = Exit::BadInput;
            }
        }
    }
    exit
}

fn test_name(test: TestKind) -> String {
    serde_json::to_value(test)
        .ok()
        .and_then(|value| value.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The scenario of each of the six tests that the benchmark mixes.
const MIX: [&str; 6] = [
    "lost-response-keyed",
    "concurrent-attempts",
    "changed-payload",
    "worker-restart",
    "expired-history",
    "revoked-permission",
];

fn bench(args: BenchArgs) -> Exit {
    let target = match targets::find(&args.target) {
        Ok(target) => target,
        Err(error) => return fail(error, Exit::BadInput),
    };
    let paths: Vec<PathBuf> = MIX
        .iter()
        .map(|name| args.scenarios.join(format!("{name}.toml")))
        .collect();
    let mix = match load_scenarios(&paths) {
        Ok(mix) => mix,
        Err(exit) => return exit,
    };
    if args.rounds == 0 {
        return fail("--rounds must be at least 1", Exit::BadInput);
    }
    let figures = chaos::bench::bench(&mix, &target, args.rounds, args.round_length);
    print!("{}", figures.render());
    Exit::Success
}
