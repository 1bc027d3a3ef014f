//! `chaos init-target`: a commented target file for a service that has
//! never heard of chaos. It asks nothing it can find out: a `package.json`,
//! `pyproject.toml` (or `requirements.txt`) or `Cargo.toml` in the folder
//! suggests the build and start commands, and every other section is
//! written out commented, with what it is for, so the user edits rather
//! than reads the protocol first. The file it writes always parses.

use std::path::{Path, PathBuf};

/// What the folder says about how to build and start the service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Detected {
    /// Which file said so, for the comment at the top.
    pub from: Option<&'static str>,
    pub name: String,
    pub build: Option<Vec<String>>,
    pub command: Vec<String>,
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
    if let Ok(text) = std::fs::read_to_string(dir.join("package.json")) {
        let package: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        let command = if package["scripts"]["start"].is_string() {
            words(&["npm", "start", "--silent"])
        } else {
            let main = package["main"].as_str().unwrap_or("server.js");
            words(&["node", main])
        };
        let build = if dir.join("package-lock.json").exists() {
            words(&["npm", "ci", "--silent"])
        } else {
            words(&["npm", "install", "--silent"])
        };
        return Detected {
            from: Some("package.json"),
            name,
            build: Some(build),
            command,
        };
    }
    if dir.join("Cargo.toml").exists() {
        return Detected {
            from: Some("Cargo.toml"),
            name,
            build: Some(words(&["cargo", "build", "--quiet", "--release"])),
            command: words(&["cargo", "run", "--quiet", "--release"]),
        };
    }
    let python = ["pyproject.toml", "requirements.txt"]
        .into_iter()
        .find(|file| dir.join(file).exists());
    if let Some(file) = python {
        let entry = ["app.py", "main.py", "server.py"]
            .into_iter()
            .find(|entry| dir.join(entry).exists())
            .unwrap_or("app.py");
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
        return Detected {
            from: Some(file),
            name,
            build: Some(build),
            command: words(&["python3", entry]),
        };
    }
    Detected {
        from: None,
        name,
        build: None,
        command: words(&["./start-my-service"]),
    }
}

fn toml_list(words: &[String]) -> String {
    let quoted: Vec<String> = words
        .iter()
        .map(|word| toml::Value::String(word.clone()).to_string())
        .collect();
    format!("[{}]", quoted.join(", "))
}

/// The target file's text for what was detected.
pub(crate) fn render(detected: &Detected) -> String {
    let origin = match detected.from {
        Some(file) => format!("# The build and start commands below were suggested by {file}; check them.\n"),
        None => "# No package.json, pyproject.toml, requirements.txt or Cargo.toml here:\n# write the command that starts the service.\n".to_owned(),
    };
    let build = match &detected.build {
        Some(build) => format!("build = {}\n", toml_list(build)),
        None => "# build = [\"make\"]\n".to_owned(),
    };
    format!(
        r#"# A chaos target file: how chaos starts this service and talks to it.
# Every key is documented in docs/target-protocol.md, section 1; unknown keys
# are errors. Try it in a few seconds with:
#
#   chaos probe --target target.toml
#
# then run the suite:
#
#   chaos run scenarios/*.toml --target target.toml
#
{origin}
name = "{name}"
summary = "{name}: describe in one line what it is"
# Run once per `chaos run`, before the first start (optional).
{build}# Started for the trials; it must answer GET /healthz with 200 once ready.
command = {command}
ready-timeout = "10s"
# One process serves many trials unless it keeps state that leaks between
# them; then start one per trial:
# fresh-process = true

# Added to the environment. Placeholders are the run's facts: {{listen.port}},
# {{listen.addr}}, {{provider.url}}, {{authority.url}}, {{state_dir}},
# {{retention.seconds}}, {{retention.ms}}, {{upstream_timeout.ms}}, ...
[env]
PORT = "{{listen.port}}"
# Point the service's downstream at chaos's provider, and its token check at
# chaos's RFC 7662 introspection:
# PAYMENTS_API_BASE = "{{provider.url}}"
# INTROSPECTION_URL = "{{authority.url}}/introspect"
# DATA_DIR = "{{state_dir}}"

# How long the service remembers an operation, if not forever. With
# shorten = true it must read its period from the environment, e.g.
# IDEMPOTENCY_TTL_SECONDS = "{{retention.seconds}}" above.
# [retention]
# period = "24h"                 # required in [retention]
# after = "new-operation"        # or "refuse", or "reconcile"
# shorten = true

# How to read a status whose body names no outcome (section 3):
# [status]
# 409 = "pending"
# 417 = "conflict"

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
    let detected = detect(dir);
    let text = render(&detected);
    let written = if force {
        // Replaced whole, by a rename that replaces a link itself, never its target.
        crate::fs::write_atomically(&out, text.as_bytes()).map(drop)
    } else {
        // `create_new` fails on anything already there, a link planted since included.
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&out)
            .and_then(|mut file| std::io::Write::write_all(&mut file, text.as_bytes()))
    };
    written.map_err(|error| format!("failed to write {}: {error}", out.display()))?;
    Ok((out, detected))
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
                vec![("package.json", r#"{"main":"index.js"}"#)],
                "node index.js",
                Some("npm install --silent"),
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
