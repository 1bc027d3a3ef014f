//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use chaos::scenario::Scenario;

/// The repository's `scenarios/` directory.
pub fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios")
}

/// Every `scenarios/*.toml`, parsed, sorted by name.
pub fn all_scenarios() -> Vec<Scenario> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(scenarios_dir())
        .expect("the scenarios directory exists")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|path| Scenario::load(path).unwrap_or_else(|error| panic!("{error}")))
        .collect()
}

/// One scenario by name, with its path as a user in the repository root would
/// write it (so rendered rerun commands are stable).
pub fn scenario(name: &str) -> Scenario {
    let mut scenario = Scenario::load(&scenarios_dir().join(format!("{name}.toml")))
        .unwrap_or_else(|error| panic!("{error}"));
    scenario.path = PathBuf::from(format!("scenarios/{name}.toml"));
    scenario
}
