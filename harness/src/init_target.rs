//! `chaos init-target`: a commented target file for a service that has
//! never heard of chaos. It asks nothing it can find out: a `package.json`,
//! `pyproject.toml` (or `requirements.txt`) or `Cargo.toml` in the folder
//! suggests the build and start commands, and every other section is
//! written out commented, with what it is for, so the user edits rather
//! than reads the protocol first. The file it writes always parses.

use std::path::{Path, PathBuf};

pub(crate) mod mcp;

/// What the folder says about how to build and start the service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Detected {
    /// Which file said so, for the comment at the top.
    pub from: Option<&'static str>,
    pub name: String,
    pub build: Option<Vec<String>>,
    pub command: Vec<String>,
    /// False when no start script or entry file was found: the command is
    /// then a placeholder the file says to replace (never a guessed file
    /// name that is not there).
    pub command_found: bool,
    /// The provider API a dependency gives away (`stripe`, `nodemailer`),
    /// with the dependency that said so.
    pub provider: Option<(&'static str, String)>,
}

/// The dependencies that tell which API the service speaks downstream: the
/// official Stripe SDKs and the common mail clients. Matched as whole
/// dependency names.
const PROVIDERS: &[(&str, &[&str])] = &[
    ("stripe", &["stripe", "async-stripe", "stripe-rust"]),
    (
        "smtp",
        &[
            "nodemailer",
            "emailjs",
            "aiosmtplib",
            "flask-mail",
            "fastapi-mail",
            "django-anymail",
            "lettre",
        ],
    ),
];

/// The provider API the dependency names point at, with the one that did.
fn provider_of<'a>(
    dependencies: impl IntoIterator<Item = &'a str>,
) -> Option<(&'static str, String)> {
    let dependencies: Vec<String> = dependencies
        .into_iter()
        .map(|name| name.trim().to_ascii_lowercase())
        .collect();
    PROVIDERS.iter().find_map(|(api, names)| {
        dependencies
            .iter()
            .find(|dependency| names.contains(&dependency.as_str()))
            .map(|dependency| (*api, dependency.clone()))
    })
}

/// The package names a requirements.txt or pyproject.toml lists: each
/// requirement's name, before any version, extra or marker.
fn python_dependencies(text: &str) -> Vec<String> {
    let name = |line: &str| -> Option<String> {
        let line = line
            .trim()
            .trim_matches(|c| c == '"' || c == '\'' || c == ',');
        let end = line
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'))
            .unwrap_or(line.len());
        let name = &line[..end];
        (!name.is_empty() && !line.starts_with('#')).then(|| name.to_owned())
    };
    text.lines().filter_map(name).collect()
}

/// Looks at `dir`'s project files.
pub(crate) fn detect(dir: &Path) -> Detected {
    let name = dir
        .canonicalize()
        .ok()
        .and_then(|dir| {
            dir.file_name()
                .map(|name| name.to_string_lossy().into_owned())
        })
        .map(|name| {
            name.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                        c
                    } else {
                        '-'
                    }
                })
                .collect::<String>()
        })
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "my-service".to_owned());
    let words = |words: &[&str]| {
        words
            .iter()
            .map(|word| word.to_string())
            .collect::<Vec<_>>()
    };
    let placeholder = words(&["./start-my-service"]);
    if let Ok(text) = std::fs::read_to_string(dir.join("package.json")) {
        let package: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        // `main` only when that file is there; else the usual entry files
        // that are.
        let entry = package["main"]
            .as_str()
            .into_iter()
            .chain(["index.js", "server.js", "app.js", "main.js"])
            .find(|entry| dir.join(entry).is_file());
        let (command, command_found) = if package["scripts"]["start"].is_string() {
            (words(&["npm", "start", "--silent"]), true)
        } else if let Some(entry) = entry {
            (words(&["node", entry]), true)
        } else {
            (placeholder, false)
        };
        let build = if dir.join("package-lock.json").exists() {
            words(&["npm", "ci", "--silent"])
        } else {
            words(&["npm", "install", "--silent"])
        };
        let dependencies = ["dependencies", "devDependencies"]
            .iter()
            .filter_map(|table| package[table].as_object())
            .flat_map(|table| table.keys().map(String::as_str))
            .collect::<Vec<_>>();
        return Detected {
            from: Some("package.json"),
            name,
            build: Some(build),
            command,
            command_found,
            provider: provider_of(dependencies),
        };
    }
    if let Ok(text) = std::fs::read_to_string(dir.join("Cargo.toml")) {
        let manifest: toml::Table = text.parse().unwrap_or_default();
        let dependencies = manifest
            .get("dependencies")
            .and_then(toml::Value::as_table)
            .map(|table| table.keys().cloned().collect::<Vec<_>>())
            .unwrap_or_default();
        return Detected {
            from: Some("Cargo.toml"),
            name,
            build: Some(words(&["cargo", "build", "--quiet", "--release"])),
            command: words(&["cargo", "run", "--quiet", "--release"]),
            command_found: true,
            provider: provider_of(dependencies.iter().map(String::as_str)),
        };
    }
    let python = ["pyproject.toml", "requirements.txt"]
        .into_iter()
        .find(|file| dir.join(file).exists());
    if let Some(file) = python {
        let entry = ["app.py", "main.py", "server.py"]
            .into_iter()
            .find(|entry| dir.join(entry).is_file());
        let build = if file == "requirements.txt" {
            words(&[
                "python3",
                "-m",
                "pip",
                "install",
                "--quiet",
                "-r",
                "requirements.txt",
            ])
        } else {
            words(&["python3", "-m", "pip", "install", "--quiet", "."])
        };
        let dependencies =
            python_dependencies(&std::fs::read_to_string(dir.join(file)).unwrap_or_default());
        return Detected {
            from: Some(file),
            name,
            build: Some(build),
            command: entry.map_or(placeholder, |entry| words(&["python3", entry])),
            command_found: entry.is_some(),
            provider: provider_of(dependencies.iter().map(String::as_str)),
        };
    }
    Detected {
        from: None,
        name,
        build: None,
        command: placeholder,
        command_found: false,
        provider: None,
    }
}

fn toml_list(words: &[String]) -> String {
    let quoted: Vec<String> = words
        .iter()
        .map(|word| toml::Value::String(word.clone()).to_string())
        .collect();
    format!("[{}]", quoted.join(", "))
}

/// The `[provider]` table and the `[env]` lines that point the service at
/// chaos's provider, for the detected API.
fn provider_section(detected: &Detected) -> (String, String) {
    match &detected.provider {
        Some(("stripe", dependency)) => (
            format!(
                "# `{dependency}` is a dependency: chaos's provider speaks Stripe's v1 API\n\
                 # (docs/target-protocol.md, section 4.2). Point the SDK's base URL at it.\n\
                 [provider]\napi = \"stripe\"\n"
            ),
            "# The Stripe SDK's base URL, under the name your service reads it from:\n\
             STRIPE_API_BASE = \"{provider.url}\"\n\
             STRIPE_SECRET_KEY = \"sk_test_chaos\"\n"
                .to_owned(),
        ),
        Some(("smtp", dependency)) => (
            format!(
                "# `{dependency}` is a dependency: chaos's provider is a mail server\n\
                 # (docs/target-protocol.md, section 4.1; no TLS, no AUTH).\n\
                 [provider]\napi = \"smtp\"\n"
            ),
            "# The mail client's server, under the names your service reads:\n\
             SMTP_HOST = \"{provider.host}\"\n\
             SMTP_PORT = \"{provider.port}\"\n"
                .to_owned(),
        ),
        _ => (
            "# The API chaos's provider speaks to the service: \"chaos\" (HTTP, the\n\
             # default), \"stripe\" (Stripe's v1 API) or \"smtp\" (a mail server).\n\
             # [provider]\n# api = \"stripe\"\n"
                .to_owned(),
            "# Point the service's downstream at chaos's provider:\n\
             # PAYMENTS_API_BASE = \"{provider.url}\"\n"
                .to_owned(),
        ),
    }
}

/// The target file's text for what was detected: every table a target file
/// can have, the ones the folder decided filled in, the rest commented with
/// what they are for, so the next step is an edit, not a read of the protocol.
pub(crate) fn render(detected: &Detected) -> String {
    let origin = match detected.from {
        Some(file) => format!("# The build and start commands below were suggested by {file}; check them.\n"),
        None => "# No package.json, pyproject.toml, requirements.txt or Cargo.toml here:\n# write the command that starts the service.\n".to_owned(),
    };
    let build = match &detected.build {
        Some(build) => format!("build = {}\n", toml_list(build)),
        None => "# build = [\"make\"]\n".to_owned(),
    };
    let command_note = if detected.command_found {
        String::new()
    } else {
        "# EDIT: no start script or entry file was found; replace this with the\n\
         # command that starts the service (e.g. [\"node\", \"server.js\"]).\n"
            .to_owned()
    };
    let (provider, provider_env) = provider_section(detected);
    format!(
        r#"# A chaos target file: how chaos starts this service and talks to it.
# Every key is documented in docs/target-protocol.md, section 1; unknown keys
# are errors. Try it in a few seconds with:
#
#   chaos probe --target target.toml
#
# then run the suite (built into chaos):
#
#   chaos run --target target.toml
#
{origin}
name = "{name}"
summary = "{name}: describe in one line what it is"
# Run once per `chaos run`, before the first start (optional).
{build}# Started for the trials; it must answer GET /healthz with 200 once ready.
{command_note}command = {command}
ready-timeout = "10s"
# One process serves many trials unless it keeps state that leaks between
# them (or keeps working after it answered); then start one per trial:
# fresh-process = true

# Added to the environment. Placeholders are the run's facts: {{listen.port}},
# {{listen.addr}}, {{provider.url}}, {{authority.url}}, {{state_dir}},
# {{retention.seconds}}, {{retention.ms}}, {{upstream_timeout.ms}}, ...
[env]
PORT = "{{listen.port}}"
{provider_env}# Its token check, at chaos's RFC 7662 introspection:
# INTROSPECTION_URL = "{{authority.url}}/introspect"
# DATA_DIR = "{{state_dir}}"

{provider}
# The service's own API shape (section 1.2). Without [request], chaos calls
# POST /tools/{{tool}} with the arguments as JSON and the operation id in
# Idempotency-Key (section 3).
# [request]
# method = "POST"
# path = "/v1/invoices/{{invoice}}/reminders"
# operation-id = {{ header = "Idempotency-Key" }}     # or {{ body = "idempotency_key" }}
# token = {{ header = "Authorization", value = "Bearer {{token}}" }}
# body = "json"                                     # or "form"
#
# The body's fields, from the call's arguments (default: the arguments as they are):
# [request.fields]
# to = "{{recipient}}"
# amount_cents = "{{amount_cents}}"
#
# The suite calls send_reminder, charge_card and send_notification_to_self
# (`chaos list` shows their arguments); if your service knows a tool by
# another name, map it: {{tool}} renders it, and the authority grants it by it.
# [request.tools]
# send_reminder = "remind_customer"

# How its answers are read (section 1.2): JSON pointers into the body.
# [response]
# outcome = "/status"
# receipt = "/id"
# replayed-header = "Idempotent-Replayed"
#
# Each value at `outcome` -> an outcome: applied, replayed, pending,
# conflict, rejected, failed, unknown.
# [response.outcomes]
# sent = "applied"
# in_progress = "pending"

# How to read a status whose body names no outcome (section 3). Never map a
# 4xx refusal to "applied": it would read every refusal as a success.
# [status]
# 409 = "pending"
# 417 = "conflict"

# How patient the agent is (section 1.3): raise retry-for when the service's
# own downstream timeout or stale-claim window is longer than a few seconds;
# `chaos probe` measures its slowest answer and says what to write.
# [agent]
# retry-for = "10s"
# timeout = "2.5s"
# backoff = "20ms..60ms"

# How long the service remembers an operation, if not forever. With
# shorten = true it must read its period from the environment, e.g.
# IDEMPOTENCY_TTL_SECONDS = "{{retention.seconds}}" above.
# [retention]
# period = "24h"                 # required in [retention]
# after = "new-operation"        # or "refuse", or "reconcile"
# shorten = true

# When the effect is a row in the service's own database rather than a
# provider request (section 1.1): the query that finds an operation's rows.
# [effects]
# database = "postgresql://postgres@127.0.0.1:5432/test"
# query = "SELECT id::text AS receipt, committed_at, payload::text AS payload, idempotency_key AS key FROM charges WHERE payload->>'invoice' = $1"

# If the service keeps its callers in its own store instead of asking an
# introspection endpoint, the commands that grant and revoke there (section 5.1).
# Pass each value as a psql variable read by a script (:'token' quotes it);
# never paste '{{token}}' into SQL by hand:
# [authority]
# grant = ["psql", "postgresql://postgres@127.0.0.1:5432/test", "-q", "-v", "ON_ERROR_STOP=1", "-v", "token={{token}}", "-v", "tenant={{tenant}}", "-v", "scope={{scope}}", "-f", "grant.sql"]
# revoke = ["psql", "postgresql://postgres@127.0.0.1:5432/test", "-q", "-v", "ON_ERROR_STOP=1", "-v", "token={{token}}", "-v", "active={{active}}", "-f", "revoke.sql"]
# with grant.sql:  INSERT INTO api_keys (token, tenant, scope) VALUES (:'token', :'tenant', :'scope');
# and revoke.sql:  UPDATE api_keys SET active = :'active'::boolean WHERE token = :'token';
"#,
        name = detected.name,
        command = toml_list(&detected.command),
    )
}

/// Writes the target file for `dir` to `out` (default `dir/target.toml`);
/// refuses to overwrite one unless `force`, and never writes through a
/// symbolic link, dangling or not: a link planted in a folder would send
/// the file anywhere the link points (issue 27).
pub(crate) fn write(
    dir: &Path,
    out: Option<PathBuf>,
    force: bool,
) -> Result<(PathBuf, Detected), String> {
    let out = destination(dir, out, force)?;
    let detected = detect(dir);
    put(&out, &render(&detected), force)?;
    Ok((out, detected))
}

/// Where the file goes, checked before anything is started or detected:
/// `dir` is a folder, `out` (default `dir/target.toml`) is no symbolic link
/// and, unless `force`, nothing is there yet.
pub(crate) fn destination(
    dir: &Path,
    out: Option<PathBuf>,
    force: bool,
) -> Result<PathBuf, String> {
    if !dir.is_dir() {
        return Err(format!(
            "{} is not a folder; name the service's folder, e.g. chaos init-target .",
            dir.display()
        ));
    }
    let out = out.unwrap_or_else(|| dir.join("target.toml"));
    let found = std::fs::symlink_metadata(&out).ok();
    if found
        .as_ref()
        .is_some_and(|found| found.file_type().is_symlink())
    {
        let points_to = std::fs::read_link(&out)
            .map(|to| format!(" (to {})", to.display()))
            .unwrap_or_default();
        return Err(format!(
            "{} is a symbolic link{points_to}; chaos never writes through one, --force or not. Remove the link, or name another file with --out",
            out.display()
        ));
    }
    if found.is_some() && !force {
        return Err(format!(
            "{} exists; edit it, or pass --force to write a new one over it",
            out.display()
        ));
    }
    Ok(out)
}

/// Writes `text` to `out`, checked by [`destination`].
pub(crate) fn put(out: &Path, text: &str, force: bool) -> Result<(), String> {
    let written = if force {
        // Replaced whole, by a rename that replaces a link itself, never its target.
        crate::fs::write_atomically(out, text.as_bytes()).map(drop)
    } else {
        // `create_new` fails on anything already there, a link planted since included.
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(out)
            .and_then(|mut file| std::io::Write::write_all(&mut file, text.as_bytes()))
    };
    written.map_err(|error| format!("failed to write {}: {error}", out.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target_file::TargetFile;

    fn folder(name: &str, files: &[(&str, &str)]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("chaos-init-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (file, text) in files {
            std::fs::write(dir.join(file), text).unwrap();
        }
        dir
    }

    #[test]
    fn each_project_file_suggests_its_commands_and_the_file_parses() {
        let cases = [
            (
                "node",
                vec![
                    ("package.json", r#"{"scripts":{"start":"node server.js"}}"#),
                    ("package-lock.json", "{}"),
                ],
                "npm start --silent",
                Some("npm ci --silent"),
            ),
            (
                "node-main",
                vec![("package.json", r#"{"main":"index.js"}"#), ("index.js", "")],
                "node index.js",
                Some("npm install --silent"),
            ),
            // `main` names a file that is not there: the entry file that is.
            (
                "node-entry",
                vec![
                    ("package.json", r#"{"main":"index.js"}"#),
                    ("server.js", ""),
                ],
                "node server.js",
                Some("npm install --silent"),
            ),
            // Nothing to start that exists: a placeholder, never a guess.
            (
                "node-none",
                vec![("package.json", r#"{"main":"index.js"}"#)],
                "./start-my-service",
                Some("npm install --silent"),
            ),
            (
                "python-none",
                vec![("requirements.txt", "flask")],
                "./start-my-service",
                Some("python3 -m pip install --quiet -r requirements.txt"),
            ),
            (
                "python",
                vec![("requirements.txt", "stripe==1"), ("server.py", "")],
                "python3 server.py",
                Some("python3 -m pip install --quiet -r requirements.txt"),
            ),
            (
                "rust",
                vec![("Cargo.toml", "[package]")],
                "cargo run --quiet --release",
                Some("cargo build --quiet --release"),
            ),
            ("nothing", vec![], "./start-my-service", None),
        ];
        for (name, files, command, build) in cases {
            let dir = folder(name, &files);
            let (path, detected) = write(&dir, None, false).unwrap();
            assert_eq!(detected.command.join(" "), command, "{name}");
            assert_eq!(
                detected.build.map(|b| b.join(" ")),
                build.map(str::to_owned),
                "{name}"
            );
            let file = TargetFile::load(&path).unwrap_or_else(|error| panic!("{name}: {error}"));
            assert_eq!(file.command.join(" "), command);
            assert!(file.name.starts_with("chaos-init-"), "{}", file.name);
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    // guards issue 26 item 5: the skeleton lacked [provider], [request],
    // [response] and [agent], suggested `node index.js` for a file that was
    // not there, and did not notice `stripe` or `nodemailer`
    #[test]
    fn the_skeleton_has_every_table_and_the_detected_provider_api() {
        let cases = [
            (
                "stripe-node",
                vec![(
                    "package.json",
                    r#"{"scripts":{"start":"node app.js"},"dependencies":{"stripe":"^17","express":"4"}}"#,
                )],
                Some("stripe"),
            ),
            (
                "mail-node",
                vec![
                    (
                        "package.json",
                        r#"{"dependencies":{"nodemailer":"6.9.16"}}"#,
                    ),
                    ("index.js", ""),
                ],
                Some("smtp"),
            ),
            (
                "stripe-python",
                vec![
                    (
                        "requirements.txt",
                        "# pinned\nstripe==11.4.1\nfastapi[all]>=0.1\n",
                    ),
                    ("app.py", ""),
                ],
                Some("stripe"),
            ),
            (
                "stripe-pyproject",
                vec![
                    (
                        "pyproject.toml",
                        "[project]\ndependencies = [\n  \"stripe>=10\",\n]\n",
                    ),
                    ("main.py", ""),
                ],
                Some("stripe"),
            ),
            (
                "mail-rust",
                vec![(
                    "Cargo.toml",
                    "[package]\nname = \"x\"\n[dependencies]\nlettre = \"0.11\"\n",
                )],
                Some("smtp"),
            ),
            // `stripe-mock` is not the SDK; names match whole.
            (
                "plain",
                vec![
                    ("package.json", r#"{"dependencies":{"stripe-mock":"1"}}"#),
                    ("index.js", ""),
                ],
                None,
            ),
        ];
        for (name, files, api) in cases {
            let dir = folder(name, &files);
            let (path, detected) = write(&dir, None, false).unwrap();
            assert_eq!(
                detected.provider.as_ref().map(|(api, _)| *api),
                api,
                "{name}"
            );
            let text = std::fs::read_to_string(&path).unwrap();
            for table in [
                "[env]",
                "[provider]",
                "[request]",
                "[request.fields]",
                "[request.tools]",
                "[response]",
                "[response.outcomes]",
                "[status]",
                "[agent]",
                "[retention]",
                "[effects]",
                "[authority]",
            ] {
                assert!(text.contains(table), "{name}: no {table} in\n{text}");
            }
            let file = TargetFile::load(&path).unwrap_or_else(|error| panic!("{name}: {error}"));
            assert_eq!(
                file.provider_api.as_str(),
                api.unwrap_or("chaos"),
                "{name}: the provider API is written uncommented"
            );
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    #[test]
    fn an_existing_file_is_kept_unless_forced() {
        let dir = folder("exists", &[("target.toml", "mine")]);
        let why = write(&dir, None, false).unwrap_err();
        assert!(why.contains("--force"), "{why}");
        assert_eq!(
            std::fs::read_to_string(dir.join("target.toml")).unwrap(),
            "mine"
        );
        write(&dir, None, true).unwrap();
        assert!(TargetFile::load(&dir.join("target.toml")).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }

    // guards: a dangling target.toml link was written through to a file
    // outside the folder, and with --force a link's target was overwritten
    // (issue 27)
    #[test]
    fn init_target_never_writes_through_a_symlink() {
        let dir = folder("symlink", &[]);
        let outside = folder("symlink-outside", &[("kept.toml", "mine")]);
        let link = dir.join("target.toml");
        for (points_to, force) in [
            (outside.join("dangling.toml"), false),
            (outside.join("dangling.toml"), true),
            (outside.join("kept.toml"), false),
            (outside.join("kept.toml"), true),
        ] {
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(&points_to, &link).unwrap();
            let why = write(&dir, None, force).unwrap_err();
            assert!(why.contains("is a symbolic link"), "{why}");
            assert!(why.contains("Remove the link"), "{why}");
            assert!(!outside.join("dangling.toml").exists(), "written through");
            assert_eq!(
                std::fs::read_to_string(outside.join("kept.toml")).unwrap(),
                "mine"
            );
            assert!(std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink());
        }
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(&outside);
    }
}
