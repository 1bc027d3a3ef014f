//! Files chaos writes (reports, explored scenarios) appear whole or not at
//! all: a regular file is written beside its final name and renamed into
//! place, so a run that dies halfway never leaves half a report; anything
//! else at the path is written or refused as [`destination`] says.

use std::io;
use std::path::Path;

mod destination;

pub(crate) use destination::{remove_partial_files, Destination};

/// Writes a report's `bytes` to `path`: a regular file (or a new one, its
/// folder created) is replaced atomically; `-`, `/dev/stdout` and a FIFO are
/// written through; a symbolic link or a device is refused.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<std::path::PathBuf> {
    destination::write(path, bytes)?;
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

/// Fails unless the file `path` can be written: created or replaced when it
/// is a regular file or new, written through when it is a stream.
pub(crate) fn check_writable_file(path: &Path) -> io::Result<()> {
    match Destination::of(path)? {
        Destination::File => check_writable_dir(path.parent().unwrap_or(Path::new("."))),
        Destination::Stdout | Destination::Stderr | Destination::Fifo => Ok(()),
    }
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
