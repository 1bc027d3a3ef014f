//! `gate --variant NAME`: the authorization lab's gate, one of its variants
//! or one of the posture benchmark's postures, as a real process.
//!
//! Started by chaos (see the `*.target.toml` files beside this crate) with
//! the `CHAOS_*` environment. The gate keeps no durable state: the
//! approvals it has used are in memory, so a restart forgets them (the
//! reference's stated limit; a production gate consumes them at the
//! authority).

use std::sync::Arc;

use chaos_kit::disk::MemoryDisk;
use chaos_kit::process::{self, Flag, ProcessEnv};

fn main() -> std::process::ExitCode {
    let mut names: Vec<String> = target_gate::variants()
        .into_iter()
        .map(|(info, _)| info.name)
        .collect();
    names.extend(
        target_gate::posture::postures()
            .into_iter()
            .map(|(info, _)| info.name),
    );
    let values: Vec<&str> = names.iter().map(String::as_str).collect();
    let known = [Flag {
        name: "--variant",
        values: &values,
    }];
    let name = match process::flags("gate", std::env::args().skip(1), &known) {
        Ok(given) => given
            .get("--variant")
            .cloned()
            .unwrap_or_else(|| "gate".into()),
        Err(message) => {
            eprintln!("gate: {message}");
            return std::process::ExitCode::from(2);
        }
    };
    process::run("gate", move |env: ProcessEnv| async move {
        let listener = env.listen().await?;
        let target_env = env.target_env(Arc::new(MemoryDisk::new()));
        match target_gate::variant(&name) {
            Some((_, controls)) => {
                target_gate::serve(listener, process::shutdown_signal(), target_env, controls)
                    .await?
            }
            None => {
                let (_, posture) =
                    target_gate::posture::posture(&name).expect("a flag value is a name");
                target_gate::posture::serve(
                    listener,
                    process::shutdown_signal(),
                    target_env,
                    posture,
                )
                .await?
            }
        }
        Ok(())
    })
}
