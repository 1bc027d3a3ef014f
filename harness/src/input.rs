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
    use std::io::Read;
    let failed = |error: std::io::Error| FileError {
        path: path.to_owned(),
        location: None,
        message: format!("failed to read the {what}: {error}"),
    };
    // Read no more than a byte past the largest file chaos accepts, so that a
    // huge file (or /dev/zero) is refused at once rather than read whole.
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(READ_LIMIT as u64 + 1).read_to_string(&mut text))
        .map_err(failed)?;
    if text.len() > READ_LIMIT {
        return Err(FileError {
            path: path.to_owned(),
            location: None,
            message: format!(
                "the {what} is larger than {} KiB; no input of chaos is that large",
                READ_LIMIT / 1024
            ),
        });
    }
    Ok(text)
}

/// The largest input file chaos reads: above every file limit (a scenario's
/// is [`crate::scenario::MAX_FILE_BYTES`]), so each can say its own.
const READ_LIMIT: usize = 1024 * 1024;

/// Deserialises `text`; a TOML or schema error points at its line and column
/// and keeps the TOML crate's list of valid choices.
pub(crate) fn parse<T: DeserializeOwned>(path: &Path, text: &str) -> Result<T, FileError> {
    toml::from_str(text).map_err(|error| FileError {
        path: path.to_owned(),
        location: error.span().map(|span| Location::of(text, span.start)),
        message: explain(
            error.message(),
            error.span().and_then(|span| text.get(span)),
        ),
    })
}

/// The TOML crate's message, made to say how to fix the input where it does
/// not (issue 15): which key is duplicated, that a name goes in quotes, and
/// what numbers a field takes instead of a Rust type's name.
fn explain(message: &str, at: Option<&str>) -> String {
    let at = at.map(str::trim).filter(|at| !at.is_empty());
    if message == "duplicate key" {
        if let Some(key) = at {
            return format!("duplicate key `{key}`: it is already set in this table; keep one");
        }
    }
    // A table where a name from a list is expected (`profile = { a = 1 }`):
    // serde's words are about enum internals.
    if message.starts_with("wanted exactly 1 element") {
        let found = at.map(|at| format!(", not `{at}`")).unwrap_or_default();
        return format!("expected one name in quotes (a string), not a table{found}");
    }
    if message == "wanted string or table" {
        let found = at.map(|at| format!(", not `{at}`")).unwrap_or_default();
        return format!("expected a name in quotes (a string){found}");
    }
    let mut message = message.to_owned();
    for (rust, range) in [
        ("u8", "0 to 255"),
        ("u16", "0 to 65535"),
        ("u32", "0 to 4294967295"),
        ("u64", "0 to 18446744073709551615"),
        ("usize", "0 to 18446744073709551615"),
    ] {
        let typed = format!("expected {rust}");
        if message.ends_with(&typed) {
            message.truncate(message.len() - typed.len());
            message.push_str(&format!("expected a whole number from {range}"));
            if message.contains("integer `-") {
                message.push_str("; it cannot be negative");
            }
        }
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    // guards: `duplicate key` did not name the key, `profile = -1` said
    // "wanted string or table", a negative count said "expected u32" (issue 15)
    #[test]
    fn toml_messages_say_how_to_fix_the_input() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct File {
            attempts: Option<u32>,
            profile: Option<chaos_kit::protocol::ProviderProfile>,
        }
        let message = |text: &str| {
            parse::<File>(Path::new("s.toml"), text)
                .unwrap_err()
                .message
        };
        assert_eq!(
            message("attempts = 1\nattempts = 2\n"),
            "duplicate key `attempts`: it is already set in this table; keep one"
        );
        assert_eq!(
            message("profile = -1\n"),
            "expected a name in quotes (a string), not `-1`"
        );
        assert!(
            message("profile = { keyed = 1, lookup = 2 }\n")
                .starts_with("expected one name in quotes (a string), not a table"),
            "{}",
            message("profile = { keyed = 1, lookup = 2 }\n")
        );
        assert_eq!(
            message("attempts = -1\n"),
            "invalid value: integer `-1`, expected a whole number from 0 to 4294967295; it cannot be negative"
        );
    }

    #[test]
    fn locations_are_one_based() {
        let text = "a = 1\nbb = 2\n";
        assert_eq!(Location::of(text, 0), Location { line: 1, column: 1 });
        assert_eq!(Location::of(text, 8), Location { line: 2, column: 3 });
    }
}
