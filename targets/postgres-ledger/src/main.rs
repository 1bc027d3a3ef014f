//! `postgres-ledger [--weak NAME] [--key FROM] [--after POLICY]`: the ledger as a process, its
//! records in PostgreSQL (`DATABASE_URL`, by default the machine's `test`
//! database). Started by chaos from `target.toml` beside this crate.

use chaos_kit::process::{self, ProcessEnv};
use target_postgres_ledger::{PgStore, Weakness};

const DEFAULT_DATABASE_URL: &str = "postgresql://postgres@127.0.0.1:5432/test";

fn main() -> std::process::ExitCode {
    let (weakness, tuning) = match target_ledger::flags(
        "postgres-ledger",
        std::env::args().skip(1),
        &Weakness::NAMES,
        Weakness::parse,
    ) {
        Ok(flags) => flags,
        Err(message) => {
            eprintln!("postgres-ledger: {message}");
            return std::process::ExitCode::from(2);
        }
    };
    process::run("postgres-ledger", move |env: ProcessEnv| async move {
        let url = std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_DATABASE_URL.into());
        let retention = env.retention.unwrap_or(target_ledger::RETENTION);
        let store = PgStore::connect(&url, weakness, retention).await?;
        let listener = env.listen().await?;
        // Records are in the database, so the kit's disk is never used.
        let target_env = env.target_env(std::sync::Arc::new(chaos_kit::disk::MemoryDisk::new()));
        target_ledger::serve_with(
            listener,
            process::shutdown_signal(),
            target_env,
            store,
            target_ledger::Options::new(retention).tuned(tuning),
        )
        .await?;
        Ok(())
    })
}
