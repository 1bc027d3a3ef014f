//! `[authority]` in a target file: a service that keeps its callers in its
//! own store (a users table, an API-key file) is told each grant and each
//! revocation by a command the user writes, run at the fault's protocol
//! point, instead of (or as well as) asking chaos's RFC 7662 introspection.
//!
//! ```toml
//! [authority]
//! grant = ["psql", "postgresql://postgres@127.0.0.1:5432/test", "-qc",
//!          "INSERT INTO api_keys (token, tenant, scope) VALUES ('{token}', '{tenant}', '{scope}')"]
//! revoke = ["psql", "postgresql://postgres@127.0.0.1:5432/test", "-qc",
//!           "UPDATE api_keys SET active = {active}, scope = '{scope}' WHERE token = '{token}'"]
//! timeout = "10s"
//! ```
//!
//! A revocation is done when its command has exited 0: the fault's protocol
//! point (after a commit, between introspection and dispatch) waits for it,
//! so the target can never see the old grant after the moment the history
//! says it went. A command that fails or outlives `timeout` leaves the run
//! unjudgeable: its cell is `unknown`, naming the command and its stderr.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::fault::Grant;
use crate::roles::grants::{Adapter, GrantFacts};
use crate::target_file::AuthorityCommands;

/// The commands of one trial, run in the target's working directory with
/// its environment.
pub(crate) struct CommandAdapter {
    pub commands: AuthorityCommands,
    pub workdir: PathBuf,
    pub env: Vec<(String, String)>,
}

impl CommandAdapter {
    fn run(&self, what: &str, template: &[String], facts: &[(&str, String)]) -> Result<(), String> {
        let args: Vec<String> = template.iter().map(|arg| fill(arg, facts)).collect();
        let shown = args.join(" ");
        let outcome = run_bounded(&args, &self.workdir, &self.env, self.commands.timeout);
        outcome.map_err(|why| format!("[authority] {what} `{shown}` {why}"))
    }
}

impl Adapter for CommandAdapter {
    fn grant(&self, grant: &GrantFacts) -> Result<(), String> {
        match &self.commands.grant {
            Some(template) => self.run("grant", template, &facts(grant, "", "")),
            None => Ok(()),
        }
    }

    fn revoke(&self, grant: &GrantFacts, taken: Grant, tool: &str) -> Result<(), String> {
        let taken = match taken {
            Grant::Token => "token",
            Grant::Scope => "scope",
        };
        self.run("revoke", &self.commands.revoke, &facts(grant, tool, taken))
    }
}

fn facts<'a>(grant: &GrantFacts, tool: &str, taken: &str) -> Vec<(&'a str, String)> {
    vec![
        ("token", grant.token.clone()),
        ("actor", grant.actor.clone()),
        ("tenant", grant.tenant.clone()),
        ("scope", grant.scope.clone()),
        ("active", grant.active.to_string()),
        ("tool", tool.to_owned()),
        ("grant", taken.to_owned()),
    ]
}

fn fill(arg: &str, facts: &[(&str, String)]) -> String {
    facts.iter().fold(arg.to_owned(), |arg, (name, value)| {
        arg.replace(&format!("{{{name}}}"), value)
    })
}

/// Runs `args` to its end within `timeout`. The protocol point it serves
/// waits for it, on a runtime thread: `block_in_place` lets the runtime's
/// other tasks (the harness's servers) go on meanwhile.
fn run_bounded(
    args: &[String],
    workdir: &Path,
    env: &[(String, String)],
    timeout: Duration,
) -> Result<(), String> {
    let work = || {
        let mut child = Command::new(&args[0])
            .args(&args[1..])
            .current_dir(workdir)
            .envs(env.iter().map(|(name, value)| (name, value)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|error| format!("could not start: {error}"))?;
        let deadline = Instant::now() + timeout;
        loop {
            match child.try_wait() {
                Ok(Some(status)) if status.success() => return Ok(()),
                Ok(Some(status)) => {
                    let mut stderr = String::new();
                    if let Some(mut pipe) = child.stderr.take() {
                        let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
                    }
                    return Err(format!("ended with {status}: {}", stderr.trim()));
                }
                Ok(None) if Instant::now() >= deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!(
                        "did not end within {} (authority.timeout); it was killed",
                        humantime::format_duration(timeout)
                    ));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                Err(error) => return Err(format!("could not be waited for: {error}")),
            }
        }
    };
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adapter(revoke: &[&str]) -> CommandAdapter {
        CommandAdapter {
            commands: AuthorityCommands::new(
                None,
                revoke.iter().map(|arg| arg.to_string()).collect(),
                Duration::from_secs(2),
            )
            .unwrap(),
            workdir: std::env::temp_dir(),
            env: vec![("WHERE_TO".into(), "env-reached".into())],
        }
    }

    fn alex() -> GrantFacts {
        GrantFacts {
            token: "tok-1".into(),
            actor: "alex".into(),
            tenant: "north".into(),
            scope: "read_invoice".into(),
            active: true,
        }
    }

    #[test]
    fn a_revocation_fills_in_what_is_left_of_the_grant() {
        let out = std::env::temp_dir().join(format!("chaos-revoke-{}", std::process::id()));
        let script = format!(
            "printf '%s' \"$WHERE_TO {{token}} {{tenant}} [{{scope}}] {{active}} {{tool}} {{grant}}\" > {}",
            out.display()
        );
        let adapter = adapter(&["sh", "-c", &script]);
        adapter
            .revoke(&alex(), Grant::Scope, "send_reminder")
            .unwrap();
        let written = std::fs::read_to_string(&out).unwrap();
        let _ = std::fs::remove_file(&out);
        assert_eq!(
            written,
            "env-reached tok-1 north [read_invoice] true send_reminder scope"
        );
    }

    #[test]
    fn a_failing_or_hanging_command_says_which_and_why() {
        let failing = adapter(&["sh", "-c", "echo 'no such table: api_keys' >&2; exit 3"]);
        let why = failing.revoke(&alex(), Grant::Token, "t").unwrap_err();
        assert!(why.contains("[authority] revoke `sh -c"), "{why}");
        assert!(why.contains("no such table: api_keys"), "{why}");
        let mut hanging = adapter(&["sleep", "5"]);
        hanging.commands.timeout = Duration::from_millis(100);
        let started = Instant::now();
        let why = hanging.revoke(&alex(), Grant::Token, "t").unwrap_err();
        assert!(why.contains("did not end within 100ms"), "{why}");
        assert!(started.elapsed() < Duration::from_secs(4), "it was killed");
        let missing = adapter(&["chaos-no-such-program"]);
        let why = missing.revoke(&alex(), Grant::Token, "t").unwrap_err();
        assert!(why.contains("could not start"), "{why}");
    }

    #[test]
    fn an_unknown_placeholder_names_the_choices() {
        let why = AuthorityCommands::new(
            None,
            vec!["psql".into(), "{tokn}".into()],
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert!(why.contains("unknown placeholder '{tokn}'"), "{why}");
        assert!(why.contains("Choose from: {token}, {actor}"), "{why}");
        // JSON in a statement is text, not a placeholder.
        AuthorityCommands::new(
            None,
            vec![
                "psql".into(),
                "-c".into(),
                "SELECT '{\"a\": 1}'::jsonb, '{token}'".into(),
            ],
            Duration::from_secs(1),
        )
        .unwrap();
        let why =
            AuthorityCommands::new(None, vec![String::new()], Duration::from_secs(1)).unwrap_err();
        assert!(why.contains("must name a program"), "{why}");
    }
}
