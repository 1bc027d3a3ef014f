//! `chaos init-target [DIR]`: a commented target file for the service in DIR;
//! with `--mcp -- CMD...`, for the MCP server CMD starts, from its own tool
//! list (`crate::init_target::mcp`).

use std::path::PathBuf;

use super::signal::{self, cancel_on_signal, InFlight};
use super::stdout::outln;

use crate::error::Error;
use crate::exit::Exit;
use crate::init_target::mcp::{self, Transport};

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
    /// The service is an MCP server: start it (the command after --), list
    /// its tools and map the suite's tools onto them.
    #[arg(long)]
    mcp: bool,
    /// How chaos reaches the MCP server.
    #[arg(long, value_enum, default_value = "stdio", requires = "mcp")]
    transport: Transport,
    /// Where a Streamable HTTP server answers MCP (default /mcp).
    #[arg(long, requires = "mcp")]
    path: Option<String>,
    /// NAME=VALUE for the server's environment, placeholders allowed (e.g.
    /// --env PORT={listen.port}); repeatable.
    #[arg(long = "env", value_name = "NAME=VALUE", value_parser = env_pair, requires = "mcp")]
    env: Vec<(String, String)>,
    /// The MCP server's command, after --.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

fn env_pair(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_owned(), value.to_owned())),
        _ => Err(format!(
            "'{text}' is not NAME=VALUE; e.g. --env SMTP_HOST={{provider.host}}"
        )),
    }
}

pub(super) fn init_target(args: InitTargetArgs) -> Result<Exit, Error> {
    if args.mcp {
        return init_mcp(args);
    }
    if !args.command.is_empty() {
        return Err(Error::Usage(format!(
            "a command after -- ({}) is for an MCP server: add --mcp, or write the service's command into the target file",
            args.command.join(" ")
        )));
    }
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

fn init_mcp(args: InitTargetArgs) -> Result<Exit, Error> {
    let cancel = cancel_on_signal(
        "interrupted: stopping the MCP server (nothing was written)",
        InFlight::Abandon,
    );
    let request = mcp::Request {
        dir: args.dir,
        out: args.out,
        force: args.force,
        transport: args.transport,
        path: args.path,
        env: args.env,
        command: args.command,
    };
    let written = mcp::write(request, &cancel)?
        .ok_or_else(|| Error::Interrupted(signal::received().unwrap_or("signal")))?;
    outln!("wrote {}", written.path.display());
    outln!("  the server lists {} tool(s):", written.listed.len());
    for line in &written.listed {
        outln!("    {line}");
    }
    for (suite, server) in &written.mapped {
        outln!("  mapped the suite's {suite} to {server}");
    }
    for (suite, argument) in &written.edits {
        outln!("  EDIT: {suite}'s required argument '{argument}' has no suite argument that fits: fill it in the file");
    }
    for suite in &written.unmapped {
        outln!("  no listed tool fits the suite's {suite}: map it by hand, or leave it");
    }
    if let Some((api, dependency)) = &written.detected.provider {
        outln!("  provider API: {api} (the folder depends on `{dependency}`)");
    }
    outln!("next: point the server's downstream at chaos in [env] ({{provider.url}}, or {{provider.host}} and {{provider.port}} for mail), then");
    outln!("  chaos probe --target {}", written.path.display());
    Ok(Exit::Success)
}
