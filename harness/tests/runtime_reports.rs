//! `reports/runtimes/<name>/`: the published verdicts on agent runtimes'
//! documented patterns, chaos playing the model (docs/runtimes.md), checked
//! for staleness as far as a live run allows: each report covers exactly the
//! re-plan and crash scenarios (`three-charges`, `replan-*`,
//! `worker-restart`) against the runtime's naive and keyed forms, as
//! `reports/runtimes/regenerate` lists them; its `summary.md` is what its
//! report.json renders to; the pins it ran with are the example's
//! `requirements.txt`; and what it publishes is the claim the README makes:
//! the naive form fails `three-charges` with three effects, the keyed form
//! passes every scenario it was admitted to.

mod common;

use chaos::report::{json, markdown};

const REGENERATE: &str = "reports/runtimes/regenerate";

/// (name, example folder, naive file, keyed file), as the script lists them.
fn runtimes() -> Vec<[String; 4]> {
    let script = std::fs::read_to_string(common::repo_root().join(REGENERATE)).unwrap();
    let found: Vec<[String; 4]> = script
        .lines()
        .filter_map(|line| {
            let entry = line.trim().strip_prefix('"')?.strip_suffix('"')?;
            let parts: Vec<String> = entry.split('|').map(str::to_owned).collect();
            parts.try_into().ok()
        })
        .collect();
    assert!(!found.is_empty(), "{REGENERATE} lists no runtime");
    found
}

/// The names of the scenarios the script runs, sorted.
fn scenarios() -> Vec<String> {
    let mut names: Vec<String> = common::all_scenarios()
        .into_iter()
        .map(|scenario| scenario.name)
        .filter(|name| {
            name == "three-charges" || name == "worker-restart" || name.starts_with("replan-")
        })
        .collect();
    names.sort();
    names
}

#[test]
fn published_runtime_reports_match_the_scenarios_the_pins_and_their_claims() {
    let index = std::fs::read_to_string(common::repo_root().join("reports/runtimes/README.md"))
        .expect("reports/runtimes/README.md exists");
    for [name, folder, naive, keyed] in runtimes() {
        let out = common::repo_root().join("reports/runtimes").join(&name);
        let text = std::fs::read_to_string(out.join("report.json")).unwrap();
        let report: serde_json::Value = serde_json::from_str(&text).unwrap();
        common::assert_valid_report(&report);

        let mut covered: Vec<String> = (report["scenarios"].as_array().unwrap().iter())
            .map(|scenario| scenario["name"].as_str().unwrap().to_owned())
            .collect();
        covered.sort();
        assert_eq!(
            covered,
            scenarios(),
            "reports/runtimes/{name}; regenerate with {REGENERATE}"
        );
        assert_eq!(report["transport"], "live", "reports/runtimes/{name}");

        let file_name = |file: &str| {
            let path = common::repo_root().join(&folder).join(file);
            chaos::TargetFile::load(&path).unwrap().name
        };
        let (naive, keyed) = (file_name(&naive), file_name(&keyed));
        let targets: Vec<&str> = (report["targets"].as_array().unwrap().iter())
            .map(|target| target["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            targets,
            [naive.as_str(), keyed.as_str()],
            "reports/runtimes/{name}"
        );

        let pins =
            std::fs::read_to_string(common::repo_root().join(&folder).join("requirements.txt"))
                .unwrap();
        let run_with = std::fs::read_to_string(out.join("requirements.txt")).unwrap();
        assert_eq!(
            run_with, pins,
            "{folder}/requirements.txt changed since the published run; regenerate with {REGENERATE}"
        );
        assert!(
            index.contains(&format!("[{name}]")),
            "reports/runtimes/README.md lists {name}"
        );
        assert!(
            out.join("README.md").is_file(),
            "reports/runtimes/{name}/README.md"
        );

        let summary = json::read(&out.join("report.json")).unwrap();
        assert!(
            markdown::render(&summary) == std::fs::read_to_string(out.join("summary.md")).unwrap(),
            "reports/runtimes/{name}/summary.md is not what its report.json renders to; regenerate with {REGENERATE}"
        );
        for cell in &summary.cells {
            if cell.target == keyed {
                assert_eq!(
                    cell.verdict,
                    chaos::Status::Pass,
                    "{name}: {} x {keyed}",
                    cell.scenario
                );
            }
            if cell.target == naive && cell.scenario == "three-charges" {
                assert_eq!(
                    cell.verdict,
                    chaos::Status::Fail,
                    "{name}: three-charges x {naive}"
                );
                assert_eq!(
                    cell.effects_observed_max, 3,
                    "{name}: three-charges x {naive}"
                );
            }
        }
    }
}
