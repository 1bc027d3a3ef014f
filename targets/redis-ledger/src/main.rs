//! `redis-ledger [--weak NAME] [--key FROM] [--after POLICY]`: the ledger as a process, its records
//! in Redis (`REDIS_URL`, by default the machine's Redis on 127.0.0.1:6379).
//! Started by chaos from `target.toml` beside this crate.

use chaos_kit::process::{self, ProcessEnv};
use target_redis_ledger::{RedisStore, Weakness};

const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379/";

fn main() -> std::process::ExitCode {
    let (weakness, tuning) = match target_ledger::flags(
        "redis-ledger",
        std::env::args().skip(1),
        &Weakness::NAMES,
        Weakness::parse,
    ) {
        Ok(flags) => flags,
        Err(message) => {
            eprintln!("redis-ledger: {message}");
            return std::process::ExitCode::from(2);
        }
    };
    process::run("redis-ledger", move |env: ProcessEnv| async move {
        let url = std::env::var("REDIS_URL").unwrap_or_else(|_| DEFAULT_REDIS_URL.into());
        let retention = env.retention.unwrap_or(target_ledger::RETENTION);
        let store =
            RedisStore::connect(&url, weakness, retention, env.provider_contract.retention).await?;
        let listener = env.listen().await?;
        // Records are in Redis, so the kit's disk is never used.
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
