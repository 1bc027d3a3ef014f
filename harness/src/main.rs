//! The `chaos` command: a thin layer of flags over the library.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

use chaos::exit::Exit;
use chaos::explore::{self, Stop};
use chaos::progress;
use chaos::report::{
    self, compare, json, junit, markdown, merge, table, Format, Payloads, Summary,
};
use chaos::runner::{self, Partition, Seeds, Sweep};
use chaos::scenario::{Scenario, TestKind};
use chaos::target_file;
use chaos::targets::{self, ReferenceTarget, Target};
use chaos_kit::protocol::ProviderProfile;

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
    /// Generate fault schedules nobody wrote; shrink a failure to a minimal scenario file.
    Explore(ExploreArgs),
    /// Combine the shard reports of a `--partition` run into the report of the whole run.
    Merge(MergeArgs),
    /// Show reports side by side (targets as columns, scenarios as rows) and
    /// the regressions between reports of the same target; exits 1 on a regression.
    Compare(CompareArgs),
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
    /// Run only shard K of N: every Nth (scenario, target, seed) trial from the
    /// Kth. `chaos merge` combines the N shard reports into the whole run's.
    #[arg(long, value_name = "K/N")]
    partition: Option<Partition>,
    /// Put payload bytes and the bearer token in the reports (redacted by default).
    #[arg(long)]
    include_payloads: bool,
    /// Keep the full record (history, ledger, timeline) of this many
    /// non-passing seeds per cell; the first failing seed is always kept.
    #[arg(long, value_name = "N", default_value_t = runner::FAILURES_KEPT_PER_CELL)]
    keep_failures: usize,
    #[command(flatten)]
    reports: ReportArgs,
}

/// Where the reports of a run (or a merge) go.
#[derive(Debug, clap::Args)]
struct ReportArgs {
    /// The folder the reports are written into.
    #[arg(long, default_value = "reports/latest")]
    out: PathBuf,
    /// Which reports to write into --out, comma-separated: json (report.json),
    /// junit (junit.xml), markdown (summary.md), html (report.html).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "json,junit,markdown,html"
    )]
    emit: Vec<Format>,
    /// Also write the JUnit XML report to this file.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// What goes to stdout: the table, or one report for piping (then the
    /// progress and summary lines go to stderr).
    #[arg(long, value_enum, default_value_t = Stdout::Table)]
    format: Stdout,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Stdout {
    Table,
    Json,
    Markdown,
}

#[derive(Debug, clap::Args)]
struct MergeArgs {
    /// Every shard's report.json, in any order.
    #[arg(required = true)]
    shards: Vec<PathBuf>,
    #[command(flatten)]
    reports: ReportArgs,
}

#[derive(Debug, clap::Args)]
struct CompareArgs {
    /// Reports to compare, oldest first: regressions are read from each
    /// report to the next one holding the same target.
    #[arg(required = true)]
    reports: Vec<PathBuf>,
    /// table (terminal), markdown (pull-request comment) or json.
    #[arg(long, value_enum, default_value_t = CompareFormat::Table)]
    format: CompareFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum CompareFormat {
    Table,
    Markdown,
    Json,
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
    /// Measure `chaos explore` instead, at the full counts: 10,000
    /// cases against ledger, 1,000 against each broken target per seed.
    #[arg(long)]
    explore: bool,
    /// With --explore: explore each broken target with seeds 0 to N-1.
    #[arg(long, default_value_t = 20, requires = "explore")]
    seeds: u64,
}

#[derive(Debug, clap::Args)]
struct ExploreArgs {
    /// The reference target to explore.
    #[arg(long, value_name = "NAME")]
    target: String,
    /// Only schedules against this provider profile. Default: all three.
    #[arg(long, value_name = "keyed|lookup|blind", value_parser = parse_profile)]
    provider: Option<ProviderProfile>,
    /// Run at most this many cases.
    #[arg(long, default_value_t = 1000)]
    cases: u64,
    /// Stop looking for failures after this long (e.g. 30s); a failure found is still shrunk.
    #[arg(long, value_name = "DUR", value_parser = humantime::parse_duration)]
    time_budget: Option<Duration>,
    /// Seeds the generator: the same seed explores the same cases. Default:
    /// taken from the clock, and printed.
    #[arg(long)]
    seed: Option<u64>,
    /// Keep exploring after a failure, for failures of other checks.
    #[arg(long)]
    keep_going: bool,
    /// Where to write the shrunk scenarios.
    #[arg(long, default_value = "reports/explored")]
    out: PathBuf,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let exit = match cli.command {
        Command::Run(args) => run(args),
        Command::List { scenarios, targets } => list(&scenarios, &targets),
        Command::Bench(args) => bench(args),
        Command::Explore(args) => explore(args),
        Command::Merge(args) => merge_reports(args),
        Command::Compare(args) => compare_reports(args),
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

    let sweep = Sweep {
        seeds,
        partition: args.partition,
        payloads: if args.include_payloads {
            Payloads::Included
        } else {
            Payloads::Redacted
        },
        failures_kept: args.keep_failures,
    };

    // The seed first, so a run that dies halfway can still be replayed.
    let shard = args
        .partition
        .map(|partition| format!("; shard {partition}"))
        .unwrap_or_default();
    say(
        &args.reports,
        format!(
            "chaos: {seeds}; {} scenario(s) x {} target(s){shard}",
            scenarios.len(),
            targets.len()
        ),
    );

    let cancel = cancel_on_ctrl_c(
        "interrupted: stopping (simulated trials in flight finish, live targets are ended); no report will be written",
    );

    let bar = progress::Bar::on_stderr("trials", None);
    let observer: &dyn runner::Progress = match &bar {
        Some(bar) => bar,
        None => &(),
    };
    let outcome = runner::run_targets(&scenarios, &targets, sweep, observer, &cancel);
    if let Some(bar) = &bar {
        bar.finish();
    }
    let Some(summary) = outcome else {
        eprintln!("interrupted: nothing was written");
        return Exit::Interrupted;
    };
    if summary.cells.is_empty() {
        eprintln!(
            "warning: shard {shard} holds no trials: there are fewer trials than shards",
            shard = args.partition.map(|p| p.to_string()).unwrap_or_default()
        );
    }
    present(&summary, &args.reports)
}

/// Prints a human line: on stdout with the table, on stderr when stdout
/// carries a report for piping.
fn say(reports: &ReportArgs, line: String) {
    if reports.format == Stdout::Table {
        println!("{line}");
    } else {
        eprintln!("{line}");
    }
}

/// Shows a summary, writes its reports and says how the run ended.
fn present(summary: &Summary, reports: &ReportArgs) -> Exit {
    let failures = table::render_failures(summary);
    match reports.format {
        Stdout::Table => {
            let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            println!("{}", table::render(summary, color));
            print!("{failures}");
        }
        Stdout::Json => {
            println!("{}", json::render(summary));
            eprint!("{failures}");
        }
        Stdout::Markdown => {
            print!("{}", markdown::render(summary));
            eprint!("{failures}");
        }
    }

    let written = match report::write(summary, &reports.out, &reports.emit) {
        Ok(written) => written,
        Err(error) => {
            return fail(
                format!(
                    "failed to write the reports into {}: {error}",
                    reports.out.display()
                ),
                Exit::BadInput,
            )
        }
    };
    for path in written {
        say(reports, format!("report: {}", path.display()));
    }
    if let Some(path) = &reports.junit {
        match json::write_atomically(path, junit::render(summary).as_bytes()) {
            Ok(path) => say(reports, format!("report: {}", path.display())),
            Err(error) => {
                return fail(
                    format!(
                        "failed to write the JUnit report {}: {error}",
                        path.display()
                    ),
                    Exit::BadInput,
                )
            }
        }
    }
    let exit = summary.exit();
    say(
        reports,
        format!("exit {}: {}", exit.code(), exit.describe()),
    );
    exit
}

/// Reads a report.json, checking its schema version first so an old or
/// foreign file gets a message saying what to do.
fn load_report(path: &Path) -> Result<Summary, Exit> {
    let text = std::fs::read_to_string(path).map_err(|error| {
        fail(
            format!("failed to read the report {}: {error}", path.display()),
            Exit::BadInput,
        )
    })?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|error| {
        fail(
            format!(
                "failed to read the report {}: it is not JSON ({error}); pass a report.json written by `chaos run`",
                path.display()
            ),
            Exit::BadInput,
        )
    })?;
    match value.get("schema_version").and_then(|version| version.as_u64()) {
        Some(version) if version == u64::from(report::SCHEMA_VERSION) => {}
        Some(version) => {
            return Err(fail(
                format!(
                    "failed to read the report {}: it has schema version {version}, this chaos reads version {}; regenerate it with this chaos",
                    path.display(),
                    report::SCHEMA_VERSION
                ),
                Exit::BadInput,
            ))
        }
        None => {
            return Err(fail(
                format!(
                    "failed to read the report {}: it has no schema_version, so it is not a chaos report.json",
                    path.display()
                ),
                Exit::BadInput,
            ))
        }
    }
    serde_json::from_value(value).map_err(|error| {
        fail(
            format!(
                "failed to read the report {}: {error} (see docs/report.schema.json)",
                path.display()
            ),
            Exit::BadInput,
        )
    })
}

fn merge_reports(args: MergeArgs) -> Exit {
    let mut shards = Vec::with_capacity(args.shards.len());
    for path in &args.shards {
        match load_report(path) {
            Ok(shard) => shards.push(shard),
            Err(exit) => return exit,
        }
    }
    let summary = match merge::merge(shards) {
        Ok(summary) => summary,
        Err(error) => {
            // The error numbers the reports in the order given.
            let numbered: Vec<String> = args
                .shards
                .iter()
                .enumerate()
                .map(|(index, path)| format!("{} = {}", index + 1, path.display()))
                .collect();
            return fail(
                format!("{error}\n  reports: {}", numbered.join(", ")),
                Exit::BadInput,
            );
        }
    };
    say(
        &args.reports,
        format!(
            "chaos: merged {} shard(s): {}; {} scenario(s) x {} target(s)",
            args.shards.len(),
            summary.seeds_label(),
            summary.scenarios.len(),
            summary.targets.len()
        ),
    );
    present(&summary, &args.reports)
}

fn compare_reports(args: CompareArgs) -> Exit {
    let paths: Vec<&Path> = args.reports.iter().map(PathBuf::as_path).collect();
    let labels = compare::labels(&paths);
    let mut reports = Vec::with_capacity(paths.len());
    for (path, label) in paths.iter().zip(labels) {
        match load_report(path) {
            Ok(summary) => reports.push((label, summary)),
            Err(exit) => return exit,
        }
    }
    let comparison = compare::compare(&reports);
    match args.format {
        CompareFormat::Table => {
            let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            print!("{}", compare::render_table(&comparison, color));
        }
        CompareFormat::Markdown => print!("{}", compare::render_markdown(&comparison)),
        CompareFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&comparison).expect("a comparison always serialises")
        ),
    }
    comparison.exit()
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
    if args.explore {
        return bench_explore(args.seeds);
    }
    if args.rounds == 0 {
        return fail("--rounds must be at least 1", Exit::BadInput);
    }
    let figures = chaos::bench::bench(&mix, &target, args.rounds, args.round_length);
    print!("{}", figures.render());
    Exit::Success
}

fn parse_profile(text: &str) -> Result<ProviderProfile, String> {
    ProviderProfile::parse(text).ok_or_else(|| {
        let choices: Vec<&str> = ProviderProfile::ALL.iter().map(|p| p.as_str()).collect();
        format!(
            "unknown provider '{text}'. Choose from: {}",
            choices.join(", ")
        )
    })
}

/// Sets the returned flag on Ctrl-C; a second Ctrl-C ends every live target
/// and exits at once.
fn cancel_on_ctrl_c(message: &'static str) -> Arc<AtomicBool> {
    let cancel = Arc::new(AtomicBool::new(false));
    let flag = cancel.clone();
    let handler = ctrlc::set_handler(move || {
        if flag.swap(true, Ordering::SeqCst) {
            // The user means it. Live targets go first: no orphans.
            chaos::live::end_all_targets();
            std::process::exit(i32::from(Exit::Interrupted.code()));
        }
        eprintln!("\n{message} (Ctrl-C again to quit now)");
    });
    if let Err(error) = handler {
        eprintln!("warning: Ctrl-C will not stop the run cleanly: {error}");
    }
    cancel
}

fn explore(args: ExploreArgs) -> Exit {
    let target = match targets::find(&args.target) {
        Ok(target) => target,
        Err(error) => return fail(error, Exit::BadInput),
    };
    if args.cases == 0 {
        return fail("--cases must be at least 1", Exit::BadInput);
    }
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos() as u64 % 1_000_000)
    });
    let settings = explore::Settings {
        provider: args.provider,
        cases: args.cases,
        time_budget: args.time_budget,
        seed,
        keep_going: args.keep_going,
    };
    let providers = match args.provider {
        Some(profile) => profile.to_string(),
        None => "keyed, lookup, blind".into(),
    };
    // The seed first, so an exploration that dies halfway can be repeated.
    println!(
        "chaos explore: target {}, seed {seed}, up to {} cases, provider {providers}",
        target.info.name, args.cases
    );

    let cancel = cancel_on_ctrl_c(
        "interrupted: a failure being shrunk is written as far as it got; nothing else is",
    );
    let progress = progress::Bar::on_stderr("cases", Some(args.cases));
    let observer: &dyn explore::Observer = match &progress {
        Some(progress) => progress,
        None => &(),
    };
    let exploration = explore::explore(&target, &settings, observer, &cancel);

    let mut exit = exploration.exit();
    for (index, found) in exploration.found.iter().enumerate() {
        let shrunk = &found.shrunk;
        println!("FAIL case {}: {}", found.case_number, found.original_reason);
        println!(
            "shrunk from {} fault(s) to {} in {} steps{}:",
            found.original.faults.len(),
            shrunk.case.faults.len(),
            shrunk.steps,
            if shrunk.complete { "" } else { " (cut short)" }
        );
        for fault in &shrunk.case.faults {
            println!("  - {fault}");
        }
        println!("  {}", found.reason());
        match explore::write::write(found, &target.info.name, &settings, &args.out, index) {
            Ok(written) => {
                println!("scenario: {}", written.path.display());
                println!("    rerun: {}", written.rerun);
            }
            Err(error) => {
                eprintln!(
                    "error: failed to write the scenario into {}: {error}",
                    args.out.display()
                );
                exit = Exit::BadInput;
            }
        }
    }
    if let Some((case, _, reason)) = &exploration.first_undecided {
        println!(
            "UNDECIDED case {case} (first of {}): {reason}",
            exploration.cases_undecided
        );
    }
    let stopped = match exploration.stop {
        Stop::Cases => "every case run",
        Stop::Failure => "stopped at the first failure",
        Stop::TimeBudget => "time budget spent",
        Stop::Interrupted => "interrupted",
    };
    println!(
        "summary: {} cases run in {:.1} s ({:.0} cases/s; {stopped}); {} failing, {} undecided; {} failure(s) found and shrunk in {} steps",
        exploration.cases_run,
        exploration.elapsed.as_secs_f64(),
        exploration.cases_per_second(),
        exploration.cases_failed,
        exploration.cases_undecided,
        exploration.found.len(),
        exploration.shrink_steps()
    );
    println!("exit {}: {}", exit.code(), exit.describe());
    exit
}

fn bench_explore(seeds: u64) -> Exit {
    let all = targets::reference_targets();
    let (ledger, broken): (Vec<ReferenceTarget>, Vec<ReferenceTarget>) = all
        .into_iter()
        .partition(|target| target.info.name == "ledger");
    let Some(ledger) = ledger.first() else {
        return fail("the ledger reference target is missing", Exit::BadInput);
    };
    let cancel = cancel_on_ctrl_c("interrupted: no figures will be printed");
    let figures = explore::bench::bench(ledger, &broken, seeds, &cancel);
    if cancel.load(Ordering::Relaxed) {
        return Exit::Interrupted;
    }
    print!("{}", figures.render());
    if figures.problems().is_empty() {
        Exit::Success
    } else {
        Exit::InvariantViolated
    }
}
