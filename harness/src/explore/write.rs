//! Writes a shrunk failure as a scenario file `chaos run` accepts, opening
//! with a comment that says where it came from and how to replay it.

use std::io;
use std::path::{Path, PathBuf};

use super::{Found, Settings};
use crate::fs::write_atomically;
use crate::sweep::rerun_command;

/// A scenario file written for one failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub path: PathBuf,
    /// The command that replays the failure.
    pub rerun: String,
}

/// The file a failure is written to: `<target>[-<provider>]-<seed>.toml`, and
/// `-2`, `-3`... for further failures of one `--keep-going` exploration.
pub fn file_path(dir: &Path, target: &str, settings: &Settings, index: usize) -> PathBuf {
    let mut stem = target.to_owned();
    if let Some(profile) = settings.provider {
        stem.push('-');
        stem.push_str(profile.as_str());
    }
    stem.push_str(&format!("-{}", settings.seed));
    if index > 0 {
        stem.push_str(&format!("-{}", index + 1));
    }
    dir.join(format!("{stem}.toml"))
}

/// The `chaos explore` command that finds this failure again.
pub fn explore_command(target: &str, settings: &Settings) -> String {
    let mut command = format!("chaos explore --target {target}");
    if let Some(profile) = settings.provider {
        command.push_str(&format!(" --provider {profile}"));
    }
    command.push_str(&format!(
        " --cases {} --seed {}",
        settings.cases, settings.seed
    ));
    if settings.keep_going {
        command.push_str(" --keep-going");
    }
    command
}

/// The whole file: the header comment, then the scenario.
pub fn render(found: &Found, target: &str, settings: &Settings, path: &Path) -> String {
    let scenario = found.scenario(target, path.to_owned());
    let shrunk = &found.shrunk;
    let rerun = rerun_command(&path.display().to_string(), target, shrunk.case.seed);
    let minimal = if shrunk.complete {
        "no fault can be removed, and no value lowered, with it still failing"
    } else {
        "cut short: smaller than found, maybe not minimal"
    };
    let mut header: Vec<String> = vec![
        "Found by chaos explore: a fault schedule nobody wrote, shrunk.".to_owned(),
        String::new(),
        format!("target:   {target}"),
        format!(
            "found by: {} (case {})",
            explore_command(target, settings),
            found.case_number
        ),
        format!(
            "shrunk:   from {} fault(s) to {} in {} steps; {minimal}",
            found.original.faults.len(),
            shrunk.case.faults.len(),
            shrunk.steps
        ),
        format!("fails:    {}", found.reason()),
        format!("rerun:    {rerun}"),
        String::new(),
        "An explored schedule (test = \"explored\") is judged on the universal".to_owned(),
        "invariants: at most one effect per operation, honest outcomes, no".to_owned(),
        "disclosure, no dispatch of a changed payload. Completion and liveness are".to_owned(),
        "not judged: a generated retry budget may leave no honest way to finish.".to_owned(),
    ];
    if !shrunk.case.faults.is_empty() {
        header.push(String::new());
        header.push("faults:".to_owned());
        header.extend(
            shrunk
                .case
                .faults
                .iter()
                .map(|fault| format!("  - {fault}")),
        );
    }
    let mut text: String = header
        .iter()
        .map(|line| {
            if line.is_empty() {
                "#\n".to_owned()
            } else {
                format!("# {}\n", line.replace('\n', " "))
            }
        })
        .collect();
    text.push('\n');
    text.push_str(&scenario.to_toml());
    text
}

/// Writes the failure into `dir`, whole or not at all.
pub fn write(
    found: &Found,
    target: &str,
    settings: &Settings,
    dir: &Path,
    index: usize,
) -> io::Result<Written> {
    let path = file_path(dir, target, settings, index);
    write_atomically(&path, render(found, target, settings, &path).as_bytes())?;
    Ok(Written {
        rerun: rerun_command(&path.display().to_string(), target, found.shrunk.case.seed),
        path,
    })
}
