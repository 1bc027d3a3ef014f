//! `report.json`: the [`Summary`] as versioned JSON, written atomically.

use std::io;
use std::path::{Path, PathBuf};

use super::Summary;

pub fn render(summary: &Summary) -> String {
    serde_json::to_string_pretty(summary).expect("a summary always serialises")
}

/// Writes `report.json` into `dir`. The file appears whole or not at all: it is
/// written beside its final name and renamed into place.
pub fn write(summary: &Summary, dir: &Path) -> io::Result<PathBuf> {
    write_atomically(&dir.join("report.json"), render(summary).as_bytes())
}

/// Writes `bytes` to `path` through a temporary file and a rename.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<PathBuf> {
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
