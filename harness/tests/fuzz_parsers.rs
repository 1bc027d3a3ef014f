//! The scenario and target-file parsers, fuzzed: no input makes them panic;
//! each is either a value or an error with a message (issue 15). Inputs are
//! the repository's own files, mutated (bytes cut, TOML fragments and extreme
//! values spliced in, lines repeated), and lines of keys and values drawn
//! from the files' vocabulary.
//!
//! Bounded for CI: `CHAOS_FUZZ_CASES` inputs per parser (default 5,000). Run
//! once with a million (see README, "Limits"):
//!
//!     CHAOS_FUZZ_CASES=500000 cargo nextest run -p chaos --test fuzz_parsers --no-capture

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use chaos::{Scenario, TargetFile};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestRunner};

const DEFAULT_CASES: u32 = 5_000;

/// Spliced into the files: every key and table of both formats, values of
/// the wrong type or out of range, and TOML's own punctuation.
const FRAGMENTS: &[&str] = &[
    "test",
    "description",
    "invariant",
    "boundary",
    "provider",
    "profile",
    "retention",
    "processing-delay",
    "lookup",
    "lookup-lag",
    "saves-errors",
    "declines",
    "operations",
    "tenant",
    "subject",
    "key",
    "network",
    "min-latency",
    "max-latency",
    "workload",
    "tool",
    "subject-field",
    "free-text-field",
    "policy",
    "call",
    "operation",
    "payload",
    "attempts",
    "concurrency",
    "subagents",
    "identity",
    "expect",
    "fault",
    "kind",
    "hop",
    "nth",
    "mode",
    "by",
    "at",
    "restart-after",
    "after-call",
    "after-commit",
    "grant",
    "times",
    "gap",
    "committed",
    "effects-per-operation",
    "effects",
    "max-dispatches-per-operation",
    "name",
    "summary",
    "build",
    "command",
    "workdir",
    "ready-timeout",
    "env",
    "status",
    "period",
    "after",
    "shorten",
    "[provider]\n",
    "[[call]]\n",
    "[[fault]]\n",
    "[expect]\n",
    "[network]\n",
    "[workload]\n",
    "[operations.a]\n",
    "[expect.effects]\n",
    "[env]\n",
    "[status]\n",
    "[retention]\n",
    "kind = \"crash-target\"\n",
    "kind = \"advance-clock\"\n",
    "kind = \"replan\"\n",
    "kind = \"crash-agent\"\n",
    "kind = \"double-approve\"\n",
    "kind = \"delay\"\n",
    "restart-after = \"999999999days\"\n",
    "by = \"18446744073709551615s\"\n",
    " = -1",
    " = 0",
    " = 4294967296",
    " = 18446744073709551616",
    " = 1e309",
    " = nan",
    " = inf",
    " = -0.0",
    " = true",
    " = \"\"",
    " = []",
    " = {}",
    " = [[]]",
    " = \"1ms\"",
    " = \"-1s\"",
    " = \"0s\"",
    " = 1979-05-27T07:32:00Z",
    " = '''x'''",
    " = \"\"\"\n\"\"\"",
    "\n",
    "=",
    "\"",
    "'",
    "[",
    "]",
    "[[",
    "]]",
    "{",
    "}",
    ",",
    ".",
    "#",
    "\\",
    "\\u0000",
    "\u{0}",
    "é",
    "\u{feff}",
    "\u{10ffff}",
    "\r\n",
    "\t",
    "a.b.c",
    "\"a\".b",
    "417",
    "999",
];

/// The repository's scenario files and target files, as text.
fn seeds(dir: &str, matches: impl Fn(&Path) -> bool) -> Vec<String> {
    let mut files = Vec::new();
    let mut stack = vec![common::repo_root().join(dir)];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path: PathBuf = entry.unwrap().path();
            if path.is_dir() && !path.ends_with("src") {
                stack.push(path);
            } else if matches(&path) {
                files.push(std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    files.sort();
    assert!(!files.is_empty(), "no seed files under {dir}");
    files
}

#[derive(Debug, Clone)]
enum Edit {
    Cut(Index, u8),
    Splice(Index, &'static str),
    SpliceText(Index, String),
    RepeatLine(Index),
    SwapNumber(Index, i128),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<Index>(), any::<u8>()).prop_map(|(at, len)| Edit::Cut(at, len)),
        (any::<Index>(), prop::sample::select(FRAGMENTS)).prop_map(|(at, f)| Edit::Splice(at, f)),
        (any::<Index>(), ".{0,12}").prop_map(|(at, text)| Edit::SpliceText(at, text)),
        any::<Index>().prop_map(Edit::RepeatLine),
        (
            any::<Index>(),
            prop_oneof![
                Just(-1i128),
                Just(0),
                Just(i128::from(u32::MAX) + 1),
                Just(i128::from(u64::MAX)),
                Just(i128::from(u64::MAX) + 1),
                any::<i64>().prop_map(i128::from),
            ]
        )
            .prop_map(|(at, n)| Edit::SwapNumber(at, n)),
    ]
}

/// The char boundary at or before `index`'s place in `text`.
fn boundary(text: &str, at: &Index) -> usize {
    if text.is_empty() {
        return 0;
    }
    let mut place = at.index(text.len() + 1);
    while !text.is_char_boundary(place) {
        place -= 1;
    }
    place
}

fn apply(mut text: String, edits: &[Edit]) -> String {
    for edit in edits {
        match edit {
            Edit::Cut(at, len) => {
                let start = boundary(&text, at);
                let mut end = (start + usize::from(*len)).min(text.len());
                while !text.is_char_boundary(end) {
                    end += 1;
                }
                text.replace_range(start..end, "");
            }
            Edit::Splice(at, fragment) => text.insert_str(boundary(&text, at), fragment),
            Edit::SpliceText(at, fragment) => text.insert_str(boundary(&text, at), fragment),
            Edit::RepeatLine(at) => {
                let lines: Vec<&str> = text.lines().collect();
                if !lines.is_empty() {
                    let line = at.index(lines.len());
                    let mut out = lines[..=line].join("\n");
                    out.push('\n');
                    out.push_str(&lines[line..].join("\n"));
                    text = out;
                }
            }
            Edit::SwapNumber(at, number) => {
                let digits: Vec<usize> = text
                    .char_indices()
                    .filter(|(_, c)| c.is_ascii_digit())
                    .map(|(i, _)| i)
                    .collect();
                if !digits.is_empty() {
                    let start = digits[at.index(digits.len())];
                    let end = text[start..]
                        .find(|c: char| !c.is_ascii_digit())
                        .map_or(text.len(), |len| start + len);
                    text.replace_range(start..end, &number.to_string());
                }
            }
        }
    }
    text
}

/// A file: a seed file with up to eight edits, or lines of keys and values.
fn input(seeds: Vec<String>) -> impl Strategy<Value = String> {
    let mutated = (
        prop::sample::select(seeds),
        prop::collection::vec(edit(), 0..8),
    )
        .prop_map(|(seed, edits)| apply(seed, &edits));
    let drawn = prop::collection::vec(
        (
            prop::sample::select(FRAGMENTS),
            prop::sample::select(FRAGMENTS),
        )
            .prop_map(|(key, value)| format!("{key}{value}\n")),
        0..24,
    )
    .prop_map(|lines| lines.concat());
    prop_oneof![8 => mutated, 1 => drawn, 1 => ".{0,200}"]
}

fn cases() -> u32 {
    std::env::var("CHAOS_FUZZ_CASES")
        .ok()
        .and_then(|cases| cases.replace('_', "").parse().ok())
        .unwrap_or(DEFAULT_CASES)
}

/// Runs `parse` on `cases()` inputs drawn from `seeds`; a panic fails the
/// test (proptest catches it and shrinks the input). Prints the count.
fn fuzz(what: &str, seeds: Vec<String>, parse: impl Fn(&str) -> Result<(), String>) {
    let ran = AtomicU64::new(0);
    let accepted = AtomicU64::new(0);
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&input(seeds), |text| {
        ran.fetch_add(1, Ordering::Relaxed);
        match parse(&text) {
            Ok(()) => {
                accepted.fetch_add(1, Ordering::Relaxed);
            }
            Err(message) => prop_assert!(!message.trim().is_empty(), "an empty error for {text:?}"),
        }
        Ok(())
    });
    eprintln!(
        "fuzzed the {what} parser: {} inputs, {} accepted, {}",
        ran.load(Ordering::Relaxed),
        accepted.load(Ordering::Relaxed),
        if result.is_ok() { "0 panics" } else { "FAILED" }
    );
    if let Err(error) = result {
        panic!("{error}");
    }
}

// guards: no input makes the scenario parser panic (issue 15)
#[test]
fn the_scenario_parser_never_panics() {
    let seeds = seeds("scenarios", |path| {
        path.extension().is_some_and(|ext| ext == "toml")
    });
    fuzz("scenario", seeds, |text| {
        let path = Path::new("scenarios/fuzz.toml");
        let scenario = Scenario::parse(path, text).map_err(|error| error.to_string())?;
        // What was accepted writes out, and reads back.
        if let Err(error) = Scenario::parse(path, &scenario.to_toml()) {
            panic!("an accepted scenario does not read back: {error}\n{text}");
        }
        Ok(())
    });
}

// guards: no input makes the target-file parser panic (issue 15)
#[test]
fn the_target_file_parser_never_panics() {
    let seeds = seeds("targets", |path| {
        path.to_string_lossy().ends_with("target.toml")
    });
    fuzz("target file", seeds, |text| {
        TargetFile::parse(Path::new("targets/fuzz/target.toml"), text)
            .map(drop)
            .map_err(|error| error.to_string())
    });
}
