//! `chaos scenarios export DIR`: the scenarios built into chaos, written out
//! as files to read and edit (an installed chaos has no clone beside it).

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::stdout::outln;
use crate::error::Error;
use crate::exit::Exit;
use crate::scenario::builtin;

#[derive(Debug, clap::Args)]
pub(super) struct ScenariosArgs {
    #[command(subcommand)]
    command: ScenariosCommand,
}

#[derive(Debug, clap::Subcommand)]
enum ScenariosCommand {
    /// Write every built-in scenario (and its folder's README) under DIR, as
    /// the repository's scenarios/ folder holds them: DIR/three-charges.toml,
    /// DIR/posture/..., DIR/authorization/... Then run them with
    /// `chaos run DIR/*.toml`.
    Export {
        /// The folder to write into; created if missing.
        dir: PathBuf,
        /// Replace files that are already there (never through a symbolic link).
        #[arg(long)]
        force: bool,
    },
}

pub(super) fn scenarios(args: ScenariosArgs) -> Result<Exit, Error> {
    match args.command {
        ScenariosCommand::Export { dir, force } => export(&dir, force),
    }
}

fn export(dir: &Path, force: bool) -> Result<Exit, Error> {
    let files = builtin::files();
    if files.is_empty() {
        return Err(Error::Usage(
            "this chaos was built without the repository's scenarios/ folder: there is nothing to export".into(),
        ));
    }
    let failed = |path: &Path, error: io::Error| {
        Error::Usage(format!("cannot write {}: {error}", path.display()))
    };
    std::fs::create_dir_all(dir).map_err(|error| failed(dir, error))?;
    let mut written = 0;
    for (path, text) in files {
        let relative = path.strip_prefix("scenarios/").unwrap_or(path);
        let dest = dir.join(relative);
        if let Some(parent) = dest.parent() {
            make_folder(dir, parent).map_err(|error| failed(parent, error))?;
        }
        write_file(&dest, text, force).map_err(|error| failed(&dest, error))?;
        written += 1;
    }
    let suite = builtin::suite().count();
    outln!(
        "wrote {written} files into {} ({suite} scenarios of the suite at the top, the labs in folders); run them with: chaos run {}/*.toml",
        dir.display(),
        dir.display()
    );
    Ok(Exit::Success)
}

/// Creates `folder` (below `root`, which the user named) as real folders:
/// a symbolic link planted inside the export would send files anywhere.
fn make_folder(root: &Path, folder: &Path) -> io::Result<()> {
    let mut at = root.to_path_buf();
    for part in folder.strip_prefix(root).unwrap_or(folder).components() {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(found) if found.is_dir() => {}
            Ok(_) => {
                return Err(io::Error::other(format!(
                    "{} is there and is not a folder (chaos never writes through a symbolic link)",
                    at.display()
                )))
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => std::fs::create_dir(&at)?,
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

/// Writes a new file; an existing one only with `force`, and only a regular
/// file (`O_NOFOLLOW`: a link is refused, dangling or not).
fn write_file(dest: &Path, text: &str, force: bool) -> io::Result<()> {
    match std::fs::symlink_metadata(dest) {
        Ok(found) if found.is_file() && force => {}
        Ok(found) if found.is_file() => {
            return Err(io::Error::other(
                "it is already there; pass --force to replace the exported files",
            ))
        }
        Ok(_) => {
            return Err(io::Error::other(
                "something other than a regular file is there (a symbolic link, a folder, a device); chaos does not write through it",
            ))
        }
        Err(error) if error.kind() == io::ErrorKind::NotFound => {}
        Err(error) => return Err(error),
    }
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(dest)?;
    file.write_all(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("chaos-export-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn exports_every_file_and_refuses_to_overwrite_without_force() {
        let dir = temp("all");
        export(&dir, false).unwrap();
        for (path, text) in builtin::files() {
            let dest = dir.join(path.strip_prefix("scenarios/").unwrap());
            assert_eq!(std::fs::read_to_string(&dest).unwrap(), *text, "{path}");
        }
        let again = export(&dir, false).unwrap_err().to_string();
        assert!(again.contains("--force"), "{again}");
        export(&dir, true).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn never_writes_through_a_link_even_with_force() {
        let dir = temp("link");
        std::fs::create_dir_all(&dir).unwrap();
        let elsewhere = temp("elsewhere");
        std::fs::create_dir_all(&elsewhere).unwrap();
        let victim = elsewhere.join("victim");
        std::fs::write(&victim, "mine").unwrap();
        std::os::unix::fs::symlink(&victim, dir.join("three-charges.toml")).unwrap();
        let error = export(&dir, true).unwrap_err().to_string();
        assert!(error.contains("symbolic link"), "{error}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "mine");

        // A planted folder link is refused too.
        let dir2 = temp("folderlink");
        std::fs::create_dir_all(&dir2).unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir2.join("posture")).unwrap();
        let error = export(&dir2, true).unwrap_err().to_string();
        assert!(error.contains("not a folder"), "{error}");
        assert!(!elsewhere.join("README.md").exists());
        for dir in [dir, dir2, elsewhere] {
            std::fs::remove_dir_all(dir).unwrap();
        }
    }
}
