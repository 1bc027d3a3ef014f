//! `chaos init-target [DIR]`: a commented target file for the service in DIR.

use std::path::PathBuf;

use super::stdout::outln;

use crate::error::Error;
use crate::exit::Exit;

#[derive(Debug, clap::Args)]
pub(super) struct InitTargetArgs {
    /// The service's folder.
    #[arg(default_value = ".")]
    dir: PathBuf,
    /// Where to write the target file (default: DIR/target.toml).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Write over an existing file.
    #[arg(long)]
    force: bool,
}

pub(super) fn init_target(args: InitTargetArgs) -> Result<Exit, Error> {
    let (path, detected) =
        crate::init_target::write(&args.dir, args.out, args.force).map_err(Error::Usage)?;
    outln!("wrote {}", path.display());
    match detected.from {
        Some(file) if detected.command_found => outln!(
            "  build and start commands suggested by {file}: `{}`",
            detected.command.join(" ")
        ),
        Some(file) => outln!(
            "  {file} has no start script and no entry file is here: write the service's start command into `command`"
        ),
        None => outln!("  no project file found: write the service's start command into it"),
    }
    if let Some((api, dependency)) = &detected.provider {
        outln!("  provider API: {api} (the service depends on `{dependency}`); [provider] and [env] are filled in for it");
    }
    outln!("next: edit [env] to point the service at chaos, then");
    outln!("  chaos probe --target {}", path.display());
    Ok(Exit::Success)
}
