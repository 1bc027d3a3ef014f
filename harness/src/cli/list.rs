//! `chaos list`: the targets a run can name and the scenarios it can run.

use super::stdout::outln;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::callers::CallerDriver;
use crate::error::Error;
use crate::exit::Exit;
use crate::provider_api::ProviderApi;
use crate::scenario::{builtin, Scenario};
use crate::target;
use crate::target_file;
use crate::way_in::WayIn;

#[derive(Debug, clap::Args)]
pub(super) struct ListArgs {
    /// Where to look for scenarios. Default: `scenarios` when there is such
    /// a folder here, else the suite built into chaos.
    #[arg(long)]
    scenarios: Option<PathBuf>,
    /// Where to look for target files (DIR/*/target.toml, DIR/*/*.target.toml).
    #[arg(long, default_value = "targets")]
    targets: PathBuf,
}

/// Lists everything that parses; every file that does not is an error after.
pub(super) fn list(args: ListArgs) -> Result<Exit, Error> {
    let mut broken = Vec::new();
    let retention = |retention: Option<Duration>| {
        retention.map_or_else(
            || "forever".into(),
            |retention| humantime::format_duration(retention).to_string(),
        )
    };
    outln!("targets (run with --target NAME):");
    for target in target::sim_targets()
        .into_iter()
        .chain(target::gate_targets())
    {
        outln!(
            "  {:<34} sim   {} (retention: {})",
            target.info.name,
            target.info.summary,
            retention(target.info.retention)
        );
    }
    for found in target_file::discover(&args.targets) {
        match found {
            Ok(file) => outln!(
                "  {:<34} live  {} (retention: {}) [{}]",
                file.name,
                file.summary,
                retention(file.info().retention),
                file.path.display()
            ),
            Err(error) => broken.push(error),
        }
    }
    let folder = args
        .scenarios
        .clone()
        .unwrap_or_else(|| PathBuf::from("scenarios"));
    let parsed: Vec<Result<Scenario, crate::FileError>> = if args.scenarios.is_none()
        && !folder.is_dir()
    {
        outln!("scenarios built into chaos (run with no paths; `chaos scenarios export DIR` writes them out):");
        builtin::suite()
            .map(|(path, text)| Scenario::parse(Path::new(path), text))
            .collect()
    } else {
        let mut paths = scenario_files(&folder)?;
        paths.sort();
        outln!("scenarios in {}:", folder.display());
        paths.iter().map(|path| Scenario::load(path)).collect()
    };
    let mut loaded = Vec::new();
    for parsed in parsed {
        match parsed {
            Ok(scenario) => {
                outln!(
                    "  {:<32} {:<20} {}",
                    scenario.name,
                    scenario.test.as_str(),
                    scenario.description.lines().next().unwrap_or("")
                );
                loaded.push(scenario);
            }
            Err(error) => broken.push(error),
        }
    }
    // A service that checks its caller's scope refuses a tool it does not
    // know: what these scenarios call is what it must accept.
    outln!("tools these scenarios call (a service must accept each, with these arguments):");
    for (name, tool) in crate::suite_tools::called(&loaded) {
        outln!("  {}", tool.line(&name));
    }
    // What a target file can choose, each with its docs line: the
    // registries' own, so this list cannot fall behind them.
    outln!("provider APIs ([provider] api = NAME in a target file):");
    for api in ProviderApi::ALL {
        outln!("  {:<34} {}", api.as_str(), api.doc());
    }
    outln!("ways in (how the calls reach a live target):");
    for (name, doc) in WayIn::every() {
        outln!("  {name:<34} {doc}");
    }
    outln!("callers (what makes the calls):");
    for (name, doc) in CallerDriver::every() {
        outln!("  {name:<34} {doc}");
    }
    if broken.is_empty() {
        Ok(Exit::Success)
    } else {
        Err(Error::Files(broken))
    }
}

fn scenario_files(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let entries = std::fs::read_dir(dir)
        .map_err(|error| Error::Usage(format!("failed to read {}: {error}", dir.display())))?;
    Ok(entries
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .collect())
}
