//! An MCP server started once, outside any trial, and asked what tools it
//! has: what `chaos init-target --mcp` writes a target file from.
//!
//! It goes through the same steps a trial's start does (the build, the
//! command with the run's `CHAOS_*` environment and `[env]`, the stdio
//! bridge, the handshake as readiness), so a server that lists its tools
//! here starts the same way in a run, and one that cannot says why in the
//! same words a run would.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use rmcp::model::Tool;

use crate::plan::{Timing, Trial};
use crate::scenario::Scenario;
use crate::target_file::TargetFile;
use crate::way_in::WayIn;

use super::error::{Error, Result};
use super::slot::Slot;
use super::start::{self, Addrs};

/// The scenario the environment is made from: one call, no fault. Nothing
/// is called; it only fills the facts a run would give (timeouts, the
/// provider's profile).
const LISTING: &str =
    "test = \"lost-response\"\ndescription = \"init-target: list the server's tools\"\n\
    [provider]\nprofile = \"keyed\"\nretention = \"24h\"\n\
    [[call]]\noperation = \"reminder\"\n[expect]\neffects-per-operation = 1\n";

/// Builds and starts `target` (an `[mcp]` target file), completes the
/// handshake and returns every tool the server listed; the process is
/// ended before this returns. `Ok(None)` when cancelled.
pub(crate) fn mcp_tools(target: &TargetFile, cancel: &AtomicBool) -> Result<Option<Vec<Tool>>> {
    let WayIn::Mcp(mcp) = &target.way_in else {
        return Err(Box::new(Error::Untestable {
            target: target.name.clone(),
            why: "it has no [mcp] table: only an MCP server lists tools".into(),
        }));
    };
    start::build(target, cancel)?;
    let scenario = Scenario::parse(Path::new("init-target/listing.toml"), LISTING)
        .unwrap_or_else(|error| panic!("the listing's own scenario: {error}"));
    let trial = Trial::new(&scenario, 0, Timing::live());
    let time = super::schedule::live_time(
        &scenario,
        target.retention,
        target.way_in.duplicate_window(),
    )
    .map_err(|why| Error::NotLive {
        scenario: scenario.name.clone(),
        why,
    })?;
    let mut slot = Slot::open()?;
    let dir = slot.new_process_dir().map_err(Error::StateDir)?;
    let local = |listener: &std::net::TcpListener| {
        listener
            .local_addr()
            .map(|addr| addr.to_string())
            .map_err(|error| Box::new(Error::Listen(error)))
    };
    let addrs = Addrs {
        target: slot.target_addr.clone(),
        provider: local(&slot.provider)?,
        authority: local(&slot.authority)?,
        model: local(&slot.model)?,
    };
    let launch = start::launch(target, &trial, &time, &dir, &addrs);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Error::Runtime)?;
    let started = runtime.block_on(start::start(&launch, &addrs.target, target, cancel));
    let Some(mut process) = started? else {
        return Ok(None);
    };
    let tools = mcp.listed();
    process.kill();
    Ok(Some(tools))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listings_own_scenario_parses() {
        Scenario::parse(Path::new("init-target/listing.toml"), LISTING).unwrap();
    }
}
