//! `[authority]` in a target file: a service that keeps its callers in its
//! own store (a users table, an API-key file) is told each grant and each
//! revocation by a command the user writes, run at the fault's protocol
//! point, instead of (or as well as) asking chaos's RFC 7662 introspection.
//!
//! ```toml
//! [authority]
//! grant = ["psql", "postgresql://postgres@127.0.0.1:5432/test", "-v", "ON_ERROR_STOP=1",
//!          "-v", "token={token}", "-v", "tenant={tenant}", "-v", "scope={scope}", "-f", "grant.sql"]
//! revoke = ["psql", "postgresql://postgres@127.0.0.1:5432/test", "-v", "ON_ERROR_STOP=1",
//!           "-v", "token={token}", "-v", "active={active}", "-v", "scope={scope}", "-f", "revoke.sql"]
//! timeout = "10s"
//! ```
//!
//! Each value is an argument of its own, read by the script as `:'token'`:
//! chaos never builds a shell line or a statement from a value.
//!
//! A revocation is done when its command has exited 0: the fault's protocol
//! point (after a commit, between introspection and dispatch) waits for it,
//! so the target can never see the old grant after the moment the history
//! says it went. A command that fails or outlives `timeout` leaves the run
//! unjudgeable: its cell is `unknown`, naming the command and its stderr.

use std::os::unix::process::CommandExt;
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
    /// Whether a failing command is quoted with its values filled in
    /// (`--include-payloads`); otherwise as written, with `{token}` and the
    /// rest unfilled, so no token reaches a report.
    pub quote_values: bool,
}

impl CommandAdapter {
    fn run(&self, what: &str, template: &[String], facts: &[(&str, String)]) -> Result<(), String> {
        let args: Vec<String> = template.iter().map(|arg| fill(arg, facts)).collect();
        let shown = if self.quote_values { &args } else { template }.join(" ");
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

/// Fills in every known `{name}` of `arg` in one pass, left to right: a
/// value is never read again, so a value that holds `{token}` stays as it is
/// instead of being expanded by the next placeholder's turn. The result is
/// one argument of its own; chaos never hands it to a shell.
fn fill(arg: &str, facts: &[(&str, String)]) -> String {
    let mut filled = String::with_capacity(arg.len());
    let mut rest = arg;
    while let Some(open) = rest.find('{') {
        filled.push_str(&rest[..open]);
        let tail = &rest[open..];
        let known = facts.iter().find(|(name, _)| {
            tail[1..].starts_with(name) && tail[1 + name.len()..].starts_with('}')
        });
        match known {
            Some((name, value)) => {
                filled.push_str(value);
                rest = &tail[name.len() + 2..];
            }
            None => {
                filled.push('{');
                rest = &tail[1..];
            }
        }
    }
    filled.push_str(rest);
    filled
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
            // Its own group: a timeout ends whatever the command started too.
            .process_group(0)
            .spawn()
            .map_err(|error| format!("could not start: {error}"))?;
        let stderr = child.stderr.take().map(StderrTail::read);
        let group = nix::unistd::Pid::from_raw(child.id() as i32);
        // Whatever the command left in its group ends with it.
        let end_group = || {
            let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        };
        let deadline = Instant::now() + timeout;
        loop {
            match child.try_wait() {
                Ok(Some(status)) if status.success() => {
                    end_group();
                    return Ok(());
                }
                Ok(Some(status)) => {
                    end_group();
                    let said = stderr.map(StderrTail::text).unwrap_or_default();
                    return Err(format!("ended with {status}: {}", said.trim()));
                }
                Ok(None) if Instant::now() >= deadline => {
                    end_group();
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

/// The last bytes of a command's stderr, read as they come on a thread of
/// their own: bounded however much the command writes, and never a wait on
/// a pipe that a process the command started still holds open.
struct StderrTail {
    kept: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    reader: std::thread::JoinHandle<()>,
}

/// How much of a failing command's stderr is kept for its message.
const STDERR_TAIL_BYTES: usize = 4_000;

impl StderrTail {
    fn read(mut pipe: std::process::ChildStderr) -> StderrTail {
        let kept = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let filling = kept.clone();
        let reader = std::thread::spawn(move || {
            let mut chunk = [0u8; 8192];
            while let Ok(read @ 1..) = std::io::Read::read(&mut pipe, &mut chunk) {
                let mut kept = filling
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                kept.extend_from_slice(&chunk[..read]);
                let over = kept.len().saturating_sub(STDERR_TAIL_BYTES);
                kept.drain(..over);
            }
        });
        StderrTail { kept, reader }
    }

    /// What was kept, once the pipe closed or after a moment.
    fn text(self) -> String {
        for _ in 0..40 {
            if self.reader.is_finished() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let kept = self
            .kept
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        String::from_utf8_lossy(&kept).into_owned()
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
            quote_values: false,
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
        // Endless stderr is kept as its tail, and a pipe held open by a
        // grandchild is no reason to wait.
        let loud = adapter(&[
            "sh",
            "-c",
            "sleep 30 & yes no-such-table | head -c 10000000 >&2; exit 4",
        ]);
        let started = Instant::now();
        let why = loud.revoke(&alex(), Grant::Token, "t").unwrap_err();
        assert!(why.contains("ended with exit status: 4"), "{why}");
        assert!(why.len() < 2 * STDERR_TAIL_BYTES, "{} bytes", why.len());
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "it did not wait"
        );
        let missing = adapter(&["chaos-no-such-program"]);
        let why = missing.revoke(&alex(), Grant::Token, "t").unwrap_err();
        assert!(why.contains("could not start"), "{why}");
    }

    #[test]
    fn a_value_holding_a_placeholder_is_not_expanded_again() {
        let facts = [
            ("token", "tok-1".to_owned()),
            ("actor", "{token}".to_owned()),
            ("tenant", "north".to_owned()),
        ];
        assert_eq!(fill("{actor}/{tenant}", &facts), "{token}/north");
        assert_eq!(
            fill("{\"a\": {token}} {nope} {", &facts),
            "{\"a\": tok-1} {nope} {"
        );
    }

    /// The psql template of docs/target-protocol.md §5.1: values go in as
    /// psql variables (`-v`) read by a script (`:'actor'`), so even a value
    /// the scenario's alphabet would refuse is stored as text, never run.
    #[test]
    fn the_documented_psql_template_is_safe_with_hostile_values() {
        let database = "postgresql://postgres@127.0.0.1:5432/test";
        let psql = |sql: &str| {
            Command::new("psql")
                .args([database, "-qtAc", sql])
                .output()
                .ok()
                .filter(|output| output.status.success())
                .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned())
        };
        if psql("SELECT 1").is_none() {
            eprintln!("skipped: no PostgreSQL at {database} (.ci/run starts one)");
            return;
        }
        let id = std::process::id();
        let (keys, victim) = (format!("house_keys_{id}"), format!("house_victim_{id}"));
        psql(&format!(
            "DROP TABLE IF EXISTS {keys}, {victim}; \
             CREATE TABLE {keys} (token text, actor text, tenant text, scope text, active boolean DEFAULT true); \
             CREATE TABLE {victim} (x int)"
        ))
        .unwrap();
        let workdir = std::env::temp_dir().join(format!("chaos-psql-template-{id}"));
        std::fs::create_dir_all(&workdir).unwrap();
        std::fs::write(
            workdir.join("grant.sql"),
            format!("INSERT INTO {keys} (token, actor, tenant, scope) VALUES (:'token', :'actor', :'tenant', :'scope');\n"),
        )
        .unwrap();
        std::fs::write(
            workdir.join("revoke.sql"),
            format!("UPDATE {keys} SET active = :'active'::boolean, scope = :'scope' WHERE token = :'token';\n"),
        )
        .unwrap();
        let template = |script: &str, vars: &[&str]| {
            let mut args: Vec<String> = ["psql", database, "-q", "-v", "ON_ERROR_STOP=1"]
                .map(String::from)
                .to_vec();
            for var in vars {
                args.extend(["-v".to_owned(), format!("{var}={{{var}}}")]);
            }
            args.extend(["-f".to_owned(), script.to_owned()]);
            args
        };
        let adapter = CommandAdapter {
            commands: AuthorityCommands::new(
                Some(template(
                    "grant.sql",
                    &["token", "actor", "tenant", "scope"],
                )),
                template("revoke.sql", &["token", "active", "scope"]),
                Duration::from_secs(10),
            )
            .unwrap(),
            workdir: workdir.clone(),
            env: Vec::new(),
            quote_values: false,
        };
        let hostile = format!("a', 'b', 'c'); DROP TABLE {victim}; --");
        let grant = GrantFacts {
            actor: hostile.clone(),
            tenant: "north'; DROP TABLE x; -- {token}".into(),
            ..alex()
        };
        let granted = adapter.grant(&grant);
        // What is left after a token revocation: the grant, inactive.
        let left = GrantFacts {
            active: false,
            ..grant.clone()
        };
        let revoked = adapter.revoke(&left, Grant::Token, "read_invoice");
        let stored = psql(&format!(
            "SELECT actor || '|' || tenant || '|' || active FROM {keys}"
        ));
        let survived = psql(&format!("SELECT count(*) FROM {victim}"));
        psql(&format!("DROP TABLE IF EXISTS {keys}, {victim}"));
        let _ = std::fs::remove_dir_all(&workdir);
        granted.unwrap();
        revoked.unwrap();
        assert_eq!(survived.as_deref(), Some("0"), "the victim table survived");
        assert_eq!(
            stored.unwrap(),
            format!("{hostile}|north'; DROP TABLE x; -- {{token}}|false")
        );
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
