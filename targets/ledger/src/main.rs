//! `file-ledger [--weak NAME] [--key FROM] [--after POLICY]`: the ledger
//! as a real process, its records in a directory of fsynced files (one per
//! operation), so a SIGKILL loses only what was in memory.
//!
//! Started by chaos (see `target.toml` beside this crate) with the `CHAOS_*`
//! environment; the state lives in `CHAOS_STATE_DIR`, or `./ledger-state` when
//! run by hand.

use std::sync::Arc;

use chaos_kit::disk::FileDisk;
use chaos_kit::process::{self, ProcessEnv};
use target_ledger::DiskStore;

fn main() -> std::process::ExitCode {
    // Its store has no weaknesses of its own; the shared logic's are all here.
    let tuning =
        match target_ledger::flags("file-ledger", std::env::args().skip(1), &[], |_| None::<()>) {
            Ok((_, tuning)) => tuning,
            Err(message) => {
                eprintln!("file-ledger: {message}");
                return std::process::ExitCode::from(2);
            }
        };
    process::run("file-ledger", move |env: ProcessEnv| async move {
        let dir = env
            .state_dir
            .clone()
            .unwrap_or_else(|| "ledger-state".into());
        let disk = Arc::new(FileDisk::open(&dir).map_err(|error| {
            format!(
                "failed to open the state directory {}: {error}",
                dir.display()
            )
        })?);
        let retention = env.retention.unwrap_or(target_ledger::RETENTION);
        let listener = env.listen().await?;
        let target_env = env.target_env(disk.clone());
        target_ledger::serve_with(
            listener,
            process::shutdown_signal(),
            target_env,
            DiskStore::new(disk),
            target_ledger::Options::new(retention).tuned(tuning),
        )
        .await?;
        Ok(())
    })
}
