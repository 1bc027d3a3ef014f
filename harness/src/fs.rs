//! Files chaos writes (reports, explored scenarios) appear whole or not at
//! all: each is written beside its final name and renamed into place, so a
//! run that dies halfway never leaves half a report.

use std::io;
use std::path::{Path, PathBuf};

/// Writes `bytes` to `path` through a temporary file and a rename; creates
/// the parent directory if it is missing.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<PathBuf> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let file_name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| "report".into());
    let temporary = path.with_file_name(format!(".{file_name}.partial"));
    std::fs::write(&temporary, bytes)?;
    std::fs::rename(&temporary, path)?;
    Ok(path.to_owned())
}

/// Fails unless files can be written into the folder `dir`, which need not
/// exist yet. Leaves nothing behind: the folders it had to create for the
/// probe are removed again, so a run stopped before its end still writes
/// nothing.
pub(crate) fn check_writable_dir(dir: &Path) -> io::Result<()> {
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let mut missing = Vec::new();
    let mut existing = dir;
    while !existing.exists() {
        missing.push(existing.to_owned());
        match existing.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => existing = parent,
            _ => {
                existing = Path::new(".");
                break;
            }
        }
    }
    if !existing.is_dir() {
        return Err(io::Error::other(if missing.is_empty() {
            "it is a file, not a folder".to_owned()
        } else {
            format!("{} is a file, not a folder", existing.display())
        }));
    }
    std::fs::create_dir_all(dir)?;
    let probe = dir.join(format!(".chaos-probe-{}", std::process::id()));
    let probed = std::fs::write(&probe, b"").and_then(|()| std::fs::remove_file(&probe));
    for created in &missing {
        let _ = std::fs::remove_dir(created);
    }
    probed
}

/// Fails unless the file `path` can be written (created or replaced).
pub(crate) fn check_writable_file(path: &Path) -> io::Result<()> {
    if path.is_dir() {
        return Err(io::Error::other("it is a folder, not a file"));
    }
    check_writable_dir(path.parent().unwrap_or(Path::new(".")))
}

#[cfg(test)]
mod tests {
    use super::*;

    // guards: `--out` naming a file, or a folder under a file, was found only
    // after the whole sweep had run (issue 15)
    #[test]
    fn an_unwritable_place_is_found_and_nothing_is_left_behind() {
        let root = std::env::temp_dir().join(format!("chaos-fs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let file = root.join("a-file");
        std::fs::write(&file, "x").unwrap();

        let error = check_writable_dir(&file).unwrap_err();
        assert_eq!(error.to_string(), "it is a file, not a folder");
        let error = check_writable_dir(&file.join("out")).unwrap_err();
        assert!(
            error
                .to_string()
                .ends_with("a-file is a file, not a folder"),
            "{error}"
        );
        assert!(check_writable_file(&root).is_err());

        let fresh = root.join("new/deeper");
        check_writable_dir(&fresh).unwrap();
        assert!(
            !root.join("new").exists(),
            "the probe left its folders behind"
        );
        check_writable_file(&fresh.join("junit.xml")).unwrap();
        std::fs::remove_dir_all(&root).unwrap();
    }
}
