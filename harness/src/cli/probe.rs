//! `chaos probe --target FILE`: four calls against a live target, and what
//! it did with each (see `crate::probe`).

use super::signal::{self, cancel_on_signal, InFlight};
use super::stdout::out;

use crate::check::Status;
use crate::error::Error;
use crate::exit::Exit;
use crate::target::Target;

#[derive(Debug, clap::Args)]
pub(super) struct ProbeArgs {
    /// The live target: a target file's path, or the name of one under targets/.
    #[arg(long)]
    target: String,
}

pub(super) fn probe(args: ProbeArgs) -> Result<Exit, Error> {
    let mut targets = super::resolve_targets(std::slice::from_ref(&args.target))?;
    let target = targets.remove(0);
    if !matches!(target, Target::Live { .. }) {
        return Err(Error::Usage(format!(
            "'{}' is a simulated reference target; probe a live one: a target file's path, e.g. chaos probe --target targets/python-replay-first/target.toml",
            args.target
        )));
    }
    let cancel = cancel_on_signal(
        "interrupted: stopping the probe (the target is ended)",
        InFlight::Abandon,
    );
    let report = crate::probe::probe(&target, &cancel)
        .ok_or_else(|| Error::Interrupted(signal::received().unwrap_or("signal")))?;
    out!("{}", report.render());
    Ok(match report.status() {
        Status::Pass => Exit::Success,
        Status::Fail => Exit::InvariantViolated,
        Status::Unknown => Exit::Unknown,
    })
}
