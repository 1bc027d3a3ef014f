//! `report.json`: the [`Summary`] as versioned JSON, and reading one back
//! (for `chaos compare` and `chaos merge`).

use std::path::{Path, PathBuf};

use super::{Summary, SCHEMA_VERSION};

pub fn render(summary: &Summary) -> String {
    let figures = super::posture::figures(summary);
    if figures.is_empty() {
        return serde_json::to_string_pretty(summary).expect("a summary always serialises");
    }
    // Derived from the cells, so never read back: `chaos compare` derives
    // them again from what it reads.
    let mut value = serde_json::to_value(summary).expect("a summary always serialises");
    value["postures"] = serde_json::to_value(figures).expect("figures serialise");
    serde_json::to_string_pretty(&value).expect("a summary always serialises")
}

/// A file that is not a report.json this chaos can read, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failed to read the report {}: {why}", path.display())]
pub struct ReadError {
    pub path: PathBuf,
    pub why: String,
}

/// Reads a report.json, checking its schema version first so an old or
/// foreign file gets a message saying what to do.
pub fn read(path: &Path) -> Result<Summary, ReadError> {
    let error = |why: String| ReadError {
        path: path.to_owned(),
        why,
    };
    let text = std::fs::read_to_string(path).map_err(|source| error(source.to_string()))?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|source| {
        error(format!(
            "it is not JSON ({source}); pass a report.json written by `chaos run`"
        ))
    })?;
    match value.get("schema_version").and_then(|version| version.as_u64()) {
        Some(version) if version == u64::from(SCHEMA_VERSION) => {}
        Some(version) => {
            return Err(error(format!(
                "it has schema version {version}, this chaos reads version {SCHEMA_VERSION}; regenerate it with this chaos"
            )))
        }
        None => {
            return Err(error(
                "it has no schema_version, so it is not a chaos report.json".into(),
            ))
        }
    }
    serde_json::from_value(value)
        .map_err(|source| error(format!("{source} (see docs/report.schema.json)")))
}
