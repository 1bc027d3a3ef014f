//! `chaos explore`: fault schedules nobody wrote, each failure shrunk and
//! written as a scenario `chaos run` replays.

use super::stdout::outln;
use std::path::PathBuf;
use std::time::Duration;

use chaos_kit::protocol::ProviderProfile;

use super::signal::{cancel_on_signal, InFlight};
use crate::error::Error;
use crate::exit::Exit;
use crate::explore::{self, write, Stop};
use crate::progress::{Bar, Observer};
use crate::target;

#[derive(Debug, clap::Args)]
pub(super) struct ExploreArgs {
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
    #[arg(long, value_name = "DUR", value_parser = super::parse_duration, allow_hyphen_values = true)]
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

fn parse_profile(text: &str) -> Result<ProviderProfile, String> {
    ProviderProfile::parse(text).ok_or_else(|| {
        let choices: Vec<&str> = ProviderProfile::ALL.iter().map(|p| p.as_str()).collect();
        format!(
            "unknown provider '{text}'. Choose from: {}",
            choices.join(", ")
        )
    })
}

pub(super) fn explore(args: ExploreArgs) -> Result<Exit, Error> {
    let target = target::find(&args.target).map_err(|error| Error::Usage(error.to_string()))?;
    if args.cases == 0 {
        return Err(Error::Usage("--cases must be at least 1".into()));
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
    outln!(
        "chaos explore: target {}, seed {seed}, up to {} cases, provider {providers}",
        target.info.name,
        args.cases
    );

    let cancel = cancel_on_signal(
        "interrupted: a failure being shrunk is written as far as it got; nothing else is",
        InFlight::Finish,
    );
    let bar = Bar::on_stderr("cases", Some(args.cases));
    let observer: &dyn Observer = match &bar {
        Some(bar) => bar,
        None => &(),
    };
    let exploration = explore::explore(&target, &settings, observer, &cancel);

    let mut unwritten = None;
    for (index, found) in exploration.found.iter().enumerate() {
        let shrunk = &found.shrunk;
        outln!("FAIL case {}: {}", found.case_number, found.original_reason);
        outln!(
            "shrunk from {} fault(s) to {} in {} steps{}:",
            found.original.faults.len(),
            shrunk.case.faults.len(),
            shrunk.steps,
            if shrunk.complete { "" } else { " (cut short)" }
        );
        for fault in &shrunk.case.faults {
            outln!("  - {fault}");
        }
        outln!("  {}", found.reason());
        match write::write(found, &target.info.name, &settings, &args.out, index) {
            Ok(written) => {
                outln!("scenario: {}", written.path.display());
                outln!("    rerun: {}", written.rerun);
            }
            Err(source) => {
                unwritten.get_or_insert(Error::Write {
                    what: "the scenario into",
                    path: args.out.clone(),
                    source,
                });
            }
        }
    }
    if let Some((case, _, reason)) = &exploration.first_unknown {
        outln!(
            "UNKNOWN case {case} (first of {}): {reason}",
            exploration.cases_unknown
        );
    }
    let stopped = match exploration.stop {
        Stop::Cases => "every case run",
        Stop::Failure => "stopped at the first failure",
        Stop::TimeBudget => "time budget spent",
        Stop::Interrupted => "interrupted",
    };
    outln!(
        "summary: {} cases run in {:.1} s ({:.0} cases/s; {stopped}); {} failing, {} unknown, {} skipped (a fault never acted); {} failure(s) found and shrunk in {} steps",
        exploration.cases_run,
        exploration.elapsed.as_secs_f64(),
        exploration.cases_per_second(),
        exploration.cases_failed,
        exploration.cases_unknown,
        exploration.cases_idle,
        exploration.found.len(),
        exploration.shrink_steps()
    );
    if let Some(error) = unwritten {
        return Err(error);
    }
    let exit = exploration.exit();
    outln!("exit {}: {}", exit.code(), exit.describe());
    Ok(exit)
}
