//! The command line: flags (clap) over the library's verbs. Each command's
//! presenter is its own file; this one holds the flags and what every
//! command shares: loading scenarios and targets, printing a summary and
//! writing its reports, and stopping cleanly on Ctrl-C.
//!
//! Presenters return an [`Exit`] for how the run ended, or an [`Error`] for
//! what stopped it; the binary prints errors, in one place.

mod bench;
mod compare;
mod explain;
mod explore;
mod init_target;
mod list;
mod merge;
mod probe;
mod run;
mod scenarios;
mod signal;
pub(crate) mod stdout;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand, ValueEnum};

use crate::error::Error;
use crate::exit::Exit;
use crate::report::{self, json, junit, markdown, table, Format, Summary};
use crate::scenario::{builtin, Scenario};
use crate::target::{self, Target};
use stdout::{err, errln, out, outln};

#[derive(Debug, Parser)]
#[command(
    name = "chaos",
    version,
    about = "Proves whether an idempotency layer holds, by driving it through faults and counting real effects",
    after_help = EXIT_CODES
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

const EXIT_CODES: &str = "Exit codes:\n  0  every invariant held\n  1  an invariant was violated\n  2  bad input or usage\n  3  a verdict could not be reached (target error, run cut short)\n  4  the run finished, but its reports could not be written\n  130 interrupted; no report written";

#[derive(Debug, Subcommand)]
enum Command {
    /// Run scenarios against targets and judge every seed.
    Run(run::RunArgs),
    /// List the targets (reference targets and target files) and the scenarios.
    List(list::ListArgs),
    /// Measure simulations per second: the six tests and a re-plan, mixed, against a no-fault run.
    Bench(bench::BenchArgs),
    /// Generate fault schedules nobody wrote; shrink a failure to a minimal scenario file.
    Explore(explore::ExploreArgs),
    /// Combine the shard reports of a `--partition` run into the report of the whole run.
    Merge(merge::MergeArgs),
    /// Show reports side by side (targets as columns, scenarios as rows) and
    /// the regressions between reports of the same target; exits 1 on a regression.
    Compare(compare::CompareArgs),
    /// Walk one call of each kind (first call, identical retry, changed
    /// payload, revoked caller) against a live target, and say what it did.
    Probe(probe::ProbeArgs),
    /// Write a commented target file for the service in a folder.
    InitTarget(init_target::InitTargetArgs),
    /// The scenarios built into chaos: `chaos scenarios export DIR` writes them out.
    Scenarios(scenarios::ScenariosArgs),
    /// A check's page: what its finding means, an example history, how to fix the layer.
    Explain(explain::ExplainArgs),
}

/// Runs the command the flags name.
pub fn run(cli: Cli) -> Result<Exit, Error> {
    match cli.command {
        Command::Run(args) => run::run(args),
        Command::List(args) => list::list(args),
        Command::Bench(args) => bench::bench(args),
        Command::Explore(args) => explore::explore(args),
        Command::Merge(args) => merge::merge(args),
        Command::Compare(args) => compare::compare(args),
        Command::Probe(args) => probe::probe(args),
        Command::InitTarget(args) => init_target::init_target(args),
        Command::Scenarios(args) => scenarios::scenarios(args),
        Command::Explain(args) => explain::explain(args),
    }
}

/// Where the reports of a run (or a merge) go.
#[derive(Debug, clap::Args)]
struct ReportArgs {
    /// The folder the reports are written into.
    #[arg(long, default_value = "reports/latest")]
    out: PathBuf,
    /// Which reports to write into --out, comma-separated: json (report.json),
    /// junit (junit.xml), markdown (summary.md), html (report.html),
    /// decisions (authorization.md, the authorization lab's matrix), posture
    /// (posture.md, the posture benchmark's figures), replan (replan.md, the
    /// re-plan matrix and the IdempotentStore demo), sarif (report.sarif,
    /// SARIF 2.1.0 for code scanning).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "json,junit,markdown,html"
    )]
    emit: Vec<Format>,
    /// Also write the JUnit XML report to this file: a regular file is
    /// replaced whole; `-` or /dev/stdout writes it to stdout, a FIFO is
    /// written through; a symbolic link or a device is refused (exit 2).
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Also write the SARIF 2.1.0 report (for code scanning) to this file,
    /// as --junit writes its report.
    #[arg(long, value_name = "FILE")]
    sarif: Option<PathBuf>,
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

/// A duration flag (`30s`, `2m`). A negative one used to meet clap's
/// "unexpected argument '-1'" (issue 15): such flags take hyphen values and
/// are refused here, with the reason.
fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    if text.trim_start().starts_with('-') {
        return Err(format!(
            "a duration cannot be negative: '{text}'; write one like 30s or 2m"
        ));
    }
    humantime::parse_duration(text)
        .map_err(|error| format!("'{text}' is not a duration ({error}); write one like 30s or 2m"))
}

/// A seed or a count flag: as with durations, a negative one is refused with
/// the reason rather than clap's "unexpected argument '-1'".
fn parse_count(text: &str) -> Result<u64, String> {
    if text.trim_start().starts_with('-') {
        return Err(format!(
            "it cannot be negative: '{text}'; write a whole number from 0 to {}",
            u64::MAX
        ));
    }
    text.parse()
        .map_err(|_| format!("'{text}' is not a whole number from 0 to {}", u64::MAX))
}

/// Where `--target NAME` looks for target files.
const TARGETS_DIR: &str = "targets";

/// Every scenario file, parsed; every error in them at once.
///
/// No paths is the suite built into the binary (`scenarios/*.toml` of the
/// repository it was built from), so an installed `chaos` runs from any
/// directory. A path that is not on disk but names a built-in scenario
/// (`scenarios/three-charges.toml`, as every rerun command prints it) is
/// read from the binary, and said so once: a rerun command works on a
/// machine without a clone, and a file on disk always wins, so an edited
/// scenario is the one that runs.
fn load_scenarios(paths: &[PathBuf]) -> Result<Vec<Scenario>, Error> {
    let mut scenarios = Vec::with_capacity(paths.len().max(1));
    let mut errors = Vec::new();
    if paths.is_empty() {
        for (path, text) in builtin::suite() {
            match Scenario::parse(Path::new(path), text) {
                Ok(scenario) => scenarios.push(scenario),
                Err(error) => errors.push(error),
            }
        }
        if scenarios.is_empty() && errors.is_empty() {
            return Err(Error::Usage(
                "no scenario files given, and this chaos was built without the repository's scenarios/ folder; name scenario files (e.g. scenarios/*.toml)".into(),
            ));
        }
    }
    let mut built_in = Vec::new();
    for path in paths {
        let loaded = match builtin::get(path) {
            Some(text) if std::fs::symlink_metadata(path).is_err() => {
                built_in.push(path.display().to_string());
                Scenario::parse(path, text)
            }
            _ => Scenario::load(path),
        };
        match loaded {
            Ok(scenario) => scenarios.push(scenario),
            Err(error) => errors.push(error),
        }
    }
    if !built_in.is_empty() {
        errln!(
            "note: {} not on disk here; using the copy built into chaos (`chaos scenarios export DIR` writes them out)",
            built_in.join(", ")
        );
    }
    if !errors.is_empty() {
        return Err(Error::Files(errors));
    }
    // Both paths, so the user knows which file to rename (the name is the
    // file's stem unless the file says `name = ...`).
    for (index, scenario) in scenarios.iter().enumerate() {
        if let Some(earlier) = (scenarios[..index].iter()).find(|other| other.name == scenario.name)
        {
            return Err(Error::Usage(format!(
                "two scenario files are both named '{}': {} and {}; a scenario is named by its file, so rename one of them",
                scenario.name,
                earlier.path.display(),
                scenario.path.display()
            )));
        }
    }
    Ok(scenarios)
}

/// Every `--target`, resolved (every reference target when none is given).
fn resolve_targets(args: &[String]) -> Result<Vec<Target>, Error> {
    if args.is_empty() {
        return Ok(target::reference_targets()
            .into_iter()
            .map(Target::Sim)
            .collect());
    }
    let mut resolved = Vec::with_capacity(args.len());
    let mut errors = Vec::new();
    for arg in args {
        match target::resolve(arg, Path::new(TARGETS_DIR)) {
            Ok(target) => resolved.push(target),
            Err(error) => errors.push(error),
        }
    }
    if !errors.is_empty() {
        return Err(Error::Targets(errors));
    }
    let mut names: Vec<&str> = resolved.iter().map(Target::name).collect();
    names.sort_unstable();
    if let Some(pair) = names.windows(2).find(|pair| pair[0] == pair[1]) {
        return Err(Error::Usage(format!(
            "two targets of this run are both named '{}'; each column needs its own name",
            pair[0]
        )));
    }
    Ok(resolved)
}

/// Prints a human line: on stdout with the table, on stderr when stdout
/// carries a report for piping.
fn say(reports: &ReportArgs, line: String) {
    if reports.format == Stdout::Table {
        outln!("{line}");
    } else {
        errln!("{line}");
    }
}

/// Fails, before any trial runs, unless the reports can be written where
/// the flags say: an existing file named as `--out`, or a folder chaos may
/// not write into, was found only after the whole sweep (issue 15).
fn check_writable(reports: &ReportArgs) -> Result<(), Error> {
    crate::fs::check_writable_dir(&reports.out).map_err(|source| Error::Unwritable {
        what: "the reports into",
        flag: "--out",
        path: reports.out.clone(),
        source,
    })?;
    for format in &reports.emit {
        let path = reports.out.join(format.file_name());
        crate::fs::check_writable_file(&path).map_err(|source| Error::Unwritable {
            what: "a report to",
            flag: "--out",
            path,
            source,
        })?;
    }
    for (path, what, flag) in [
        (&reports.junit, "the JUnit report to", "--junit"),
        (&reports.sarif, "the SARIF report to", "--sarif"),
    ] {
        if let Some(path) = path {
            crate::fs::check_writable_file(path).map_err(|source| Error::Unwritable {
                what,
                flag,
                path: path.clone(),
                source,
            })?;
        }
    }
    Ok(())
}

/// Writes a summary's reports, then shows it and says how the run ended.
/// The reports go first: a reader that closes stdout early (`| head -1`)
/// must not cost them (issue 15).
fn present(summary: &Summary, reports: &ReportArgs) -> Result<Exit, Error> {
    let mut written =
        report::write(summary, &reports.out, &reports.emit).map_err(|source| Error::Write {
            what: "the reports into",
            path: reports.out.clone(),
            source,
        })?;
    if let Some(path) = &reports.junit {
        crate::fs::write_atomically(path, junit::render(summary).as_bytes()).map_err(|source| {
            Error::Write {
                what: "the JUnit report",
                path: path.clone(),
                source,
            }
        })?;
        written.push(path.clone());
    }
    if let Some(path) = &reports.sarif {
        crate::fs::write_atomically(path, report::sarif::render(summary).as_bytes()).map_err(
            |source| Error::Write {
                what: "the SARIF report",
                path: path.clone(),
                source,
            },
        )?;
        written.push(path.clone());
    }

    let failures = table::render_failures(summary);
    let excluded = table::render_excluded(summary);
    match reports.format {
        Stdout::Table => {
            let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            // What was not run, then the table of what was.
            out!("{excluded}");
            if !summary.nothing_tested() {
                outln!("{}", table::render(summary, color));
            }
            for matrix in report::decisions::Matrix::all(summary) {
                out!("{}", matrix.render_text());
            }
            let postures = report::posture::figures(summary);
            if !postures.is_empty() {
                out!("{}", report::posture::render_text(&postures));
            }
            out!("{failures}");
        }
        Stdout::Json => {
            outln!("{}", json::render(summary));
            err!("{excluded}{failures}");
        }
        Stdout::Markdown => {
            out!("{}", markdown::render(summary));
            err!("{excluded}{failures}");
        }
    }
    let html = (written.iter()).find(|path| path.extension().is_some_and(|ext| ext == "html"));
    let next = table::render_next(summary, html.map(PathBuf::as_path));
    for path in &written {
        say(reports, format!("report: {}", path.display()));
    }
    if let Some(next) = next {
        say(reports, next);
    }
    let exit = summary.exit();
    say(
        reports,
        format!("exit {}: {}", exit.code(), exit.describe()),
    );
    Ok(exit)
}
