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
