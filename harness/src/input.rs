//! Strict TOML input files (scenarios, target files): reading, parsing, and
//! errors that name the file, the line and the column, ripgrep style.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

/// An input file that could not be used, with where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct FileError {
    pub path: PathBuf,
    pub location: Option<Location>,
    pub message: String,
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.location {
            Some(location) => write!(
                f,
                "{}:{}:{}: {}",
                self.path.display(),
                location.line,
                location.column,
                self.message.trim_end()
            ),
            None => write!(f, "{}: {}", self.path.display(), self.message.trim_end()),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    pub line: usize,
    pub column: usize,
}

impl Location {
    /// The 1-based line and column of byte `offset` in `text`.
    pub fn of(text: &str, offset: usize) -> Location {
        let before = &text[..offset.min(text.len())];
        let line = before.matches('\n').count() + 1;
        let column = before.len() - before.rfind('\n').map_or(0, |newline| newline + 1) + 1;
        Location { line, column }
    }
}

/// Builds the errors of one file: at a span of its text, or about the whole file.
#[derive(Clone, Copy)]
pub(crate) struct Errors<'a> {
    pub path: &'a Path,
    pub text: &'a str,
}

impl Errors<'_> {
    pub(crate) fn at(&self, span: Range<usize>, message: String) -> FileError {
        FileError {
            path: self.path.to_owned(),
            location: Some(Location::of(self.text, span.start)),
            message,
        }
    }

    pub(crate) fn whole(&self, message: String) -> FileError {
        FileError {
            path: self.path.to_owned(),
            location: None,
            message,
        }
    }
}

/// Reads `path`; `what` names the kind of file in the error ("scenario file").
pub(crate) fn read(path: &Path, what: &str) -> Result<String, FileError> {
    std::fs::read_to_string(path).map_err(|error| FileError {
        path: path.to_owned(),
        location: None,
        message: format!("failed to read the {what}: {error}"),
    })
}

/// Deserialises `text`; a TOML or schema error points at its line and column
/// and keeps the TOML crate's list of valid choices.
pub(crate) fn parse<T: DeserializeOwned>(path: &Path, text: &str) -> Result<T, FileError> {
    toml::from_str(text).map_err(|error| FileError {
        path: path.to_owned(),
        location: error.span().map(|span| Location::of(text, span.start)),
        message: error.message().to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_are_one_based() {
        let text = "a = 1\nbb = 2\n";
        assert_eq!(Location::of(text, 0), Location { line: 1, column: 1 });
        assert_eq!(Location::of(text, 8), Location { line: 2, column: 3 });
    }
}
