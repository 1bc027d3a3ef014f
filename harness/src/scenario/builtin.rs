//! The scenarios built into the binary (see `harness/build.rs`): what a
//! `chaos` installed with `cargo install` runs when it is given no scenario
//! paths, and what `chaos scenarios export` writes out for editing.
//!
//! A path is the file's place in the repository (`scenarios/three-charges.toml`),
//! so a rerun command printed by one machine names the same scenario on
//! another, with or without a clone.

use std::path::Path;

include!(concat!(env!("OUT_DIR"), "/builtin_scenarios.rs"));

/// Every built-in file: `(path in the repository, text)`, sorted by path;
/// scenario files and the folders' READMEs.
pub(crate) fn files() -> &'static [(&'static str, &'static str)] {
    FILES
}

/// The suite `chaos run` runs with no paths: the scenario files directly
/// under `scenarios/` (the folders below it, the authorization lab, the
/// posture benchmark, SMTP and database scenarios, are run by name, as the
/// README's commands do).
pub(crate) fn suite() -> impl Iterator<Item = (&'static str, &'static str)> {
    FILES.iter().copied().filter(|(path, _)| {
        path.strip_prefix("scenarios/")
            .is_some_and(|rest| !rest.contains('/') && rest.ends_with(".toml"))
    })
}

/// The built-in text of the scenario at `path`, written as the repository
/// names it (`scenarios/x.toml`, or `./scenarios/x.toml`).
pub(crate) fn get(path: &Path) -> Option<&'static str> {
    let wanted: Vec<_> = path
        .components()
        .filter(|part| !matches!(part, std::path::Component::CurDir))
        .map(|part| part.as_os_str().to_string_lossy().into_owned())
        .collect();
    let wanted = wanted.join("/");
    FILES
        .iter()
        .find(|(known, _)| *known == wanted && known.ends_with(".toml"))
        .map(|(_, text)| *text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The build embedded the folder as it is on disk: every file, byte for
    /// byte, and nothing else.
    #[test]
    fn the_embedded_folder_is_the_repository_s() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut on_disk = Vec::new();
        let mut stack = vec![root.join("scenarios")];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else if path
                    .extension()
                    .is_some_and(|ext| ext == "toml" || ext == "md")
                {
                    let relative = path.strip_prefix(&root).unwrap();
                    on_disk.push((
                        relative.to_string_lossy().into_owned(),
                        std::fs::read_to_string(&path).unwrap(),
                    ));
                }
            }
        }
        on_disk.sort();
        let embedded: Vec<(String, String)> = files()
            .iter()
            .map(|(path, text)| (path.to_string(), text.to_string()))
            .collect();
        assert_eq!(embedded, on_disk);
    }

    #[test]
    fn the_suite_is_the_top_level_scenarios_and_they_parse() {
        let suite: Vec<_> = suite().collect();
        assert!(suite.len() > 40, "{}", suite.len());
        assert!(suite
            .iter()
            .any(|(path, _)| *path == "scenarios/three-charges.toml"));
        assert!(!suite.iter().any(|(path, _)| path.contains("/posture/")));
        for (path, text) in suite {
            crate::Scenario::parse(Path::new(path), text).unwrap();
        }
    }

    #[test]
    fn a_path_finds_its_built_in_copy() {
        assert!(get(Path::new("scenarios/three-charges.toml")).is_some());
        assert!(get(Path::new("./scenarios/three-charges.toml")).is_some());
        assert!(get(Path::new("scenarios/posture/README.md")).is_none());
        assert!(get(Path::new("three-charges.toml")).is_none());
        assert!(get(Path::new("/scenarios/three-charges.toml")).is_none());
    }
}
