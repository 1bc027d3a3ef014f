//! `postgres-inbox [--weak two-transactions]`: a `send_reminder` whose effect
//! is a row in PostgreSQL (`DATABASE_URL`, by default the machine's `test`
//! database), not a request to a provider. Started by chaos from
//! `target.toml` beside this crate; chaos counts the rows with the target
//! file's `[effects]` query.

use chaos_kit::process::{self, Flag, ProcessEnv};
use target_postgres_inbox::{Inbox, Weakness};

const DEFAULT_DATABASE_URL: &str = "postgresql://postgres@127.0.0.1:5432/test";

fn main() -> std::process::ExitCode {
    let known = [Flag {
        name: "--weak",
        values: &Weakness::NAMES,
    }];
    let weakness = match process::flags("postgres-inbox", std::env::args().skip(1), &known) {
        Ok(given) => given.get("--weak").and_then(|name| Weakness::parse(name)),
        Err(message) => {
            eprintln!("postgres-inbox: {message}");
            return std::process::ExitCode::from(2);
        }
    };
    process::run("postgres-inbox", move |env: ProcessEnv| async move {
        let url = std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_DATABASE_URL.into());
        let inbox = Inbox::open(&url, weakness).await?;
        let listener = env.listen().await?;
        let target_env = env.target_env(std::sync::Arc::new(chaos_kit::disk::MemoryDisk::new()));
        target_postgres_inbox::serve(listener, process::shutdown_signal(), target_env, inbox)
            .await?;
        Ok(())
    })
}
