//! `report.sarif` (issue 28 item 2): a failing sweep's SARIF validates
//! against the OASIS SARIF 2.1.0 schema (`fixtures/sarif-schema-2.1.0.json`,
//! as the specification's repository publishes it), has a rule per check
//! that fired and a result per cell that did not pass and per warning, with
//! the scenario's tags carried; a merged sharded run's SARIF equals the
//! unsharded one.

mod common;

use std::collections::BTreeSet;

use chaos::report::{merge, sarif, Summary};
use chaos::{Partition, Seeds, Status, Sweep};

fn sweep(partition: Option<Partition>) -> Summary {
    let scenarios: Vec<_> = [
        "lost-response-keyed",
        "changed-payload",
        "revoked-permission",
        "replan-injected",
        "concurrent-attempts-keyed",
    ]
    .into_iter()
    .map(common::scenario)
    .collect();
    common::run_sweep(
        &scenarios,
        &chaos::reference_targets(),
        Sweep {
            partition,
            ..Sweep::new(Seeds::Range { first: 0, count: 6 })
        },
    )
}

fn schema_errors(sarif: &serde_json::Value) -> Vec<String> {
    let text = std::fs::read_to_string(
        common::repo_root().join("harness/tests/fixtures/sarif-schema-2.1.0.json"),
    )
    .unwrap();
    let schema: serde_json::Value = serde_json::from_str(&text).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("the SARIF schema compiles");
    validator
        .iter_errors(sarif)
        .map(|error| format!("{error} at {}", error.instance_path()))
        .collect()
}

#[test]
fn a_failing_sweep_s_sarif_is_valid_with_a_rule_per_check_and_the_tags() {
    let summary = sweep(None);
    let text = sarif::render(&summary);
    let sarif: serde_json::Value = serde_json::from_str(&text).unwrap();
    let errors = schema_errors(&sarif);
    assert!(errors.is_empty(), "{}", errors.join("\n"));

    // The validator is not vacuous: a result without its message breaks it.
    let mut broken = sarif.clone();
    broken["runs"][0]["results"][0]
        .as_object_mut()
        .unwrap()
        .remove("message");
    assert!(!schema_errors(&broken).is_empty());

    let run = &sarif["runs"][0];
    let rules: Vec<&str> = run["tool"]["driver"]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|rule| rule["id"].as_str().unwrap())
        .collect();
    let results = run["results"].as_array().unwrap();
    let cited: BTreeSet<&str> = results
        .iter()
        .map(|result| result["ruleId"].as_str().unwrap())
        .collect();
    assert_eq!(
        rules.iter().copied().collect::<BTreeSet<_>>(),
        cited,
        "a rule per check a result cites, and no other"
    );
    for (index, result) in results.iter().enumerate() {
        let rule = &run["tool"]["driver"]["rules"][result["ruleIndex"].as_u64().unwrap() as usize];
        assert_eq!(rule["id"], result["ruleId"], "result {index}");
    }
    // The rule is the check's page: its fix, and its help as Markdown.
    let duplicate = (run["tool"]["driver"]["rules"].as_array().unwrap())
        .iter()
        .find(|rule| rule["id"] == "duplicate-effect")
        .expect("fresh-key duplicates under lost-response-keyed");
    assert!(duplicate["help"]["text"]
        .as_str()
        .unwrap()
        .starts_with(chaos::Check::DuplicateEffect.fix()));
    assert!(duplicate["help"]["markdown"]
        .as_str()
        .unwrap()
        .starts_with("# `duplicate-effect`"));
    assert_eq!(duplicate["properties"]["security-severity"], "8.0");

    // A result per cell that did not pass (an error for a failure), and a
    // warning per warning under a passing cell.
    let failing = summary
        .cells
        .iter()
        .filter(|cell| cell.verdict == Status::Fail)
        .count();
    let errors = results
        .iter()
        .filter(|result| result["level"] == "error")
        .count();
    assert_eq!(errors, failing);
    let warnings: usize = summary
        .cells
        .iter()
        .filter(|cell| cell.verdict == Status::Pass)
        .map(|cell| cell.warnings.len())
        .sum();
    assert!(warnings > 0, "a keyed race the provider absorbed warns");
    assert_eq!(
        results
            .iter()
            .filter(|result| result["level"] == "warning")
            .count(),
        warnings
    );
    let fresh_key = results
        .iter()
        .find(|result| {
            result["properties"]["scenario"] == "lost-response-keyed"
                && result["properties"]["target"] == "fresh-key"
        })
        .unwrap();
    assert_eq!(
        fresh_key["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
        "scenarios/lost-response-keyed.toml"
    );
    assert!(fresh_key["properties"]["rerun"]
        .as_str()
        .unwrap()
        .starts_with("chaos run scenarios/lost-response-keyed.toml --target fresh-key --seed "));
    assert_eq!(
        fresh_key["partialFingerprints"]["chaosCell/v1"],
        "lost-response-keyed/fresh-key/duplicate-effect"
    );
    // The scenario's tags (ATLAS, OWASP) ride on its results.
    let replan = results
        .iter()
        .find(|result| {
            result["properties"]["scenario"] == "replan-injected" && result["level"] == "error"
        })
        .unwrap();
    let tags: Vec<&str> = replan["properties"]["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tag| tag.as_str().unwrap())
        .collect();
    let declared = &summary
        .scenarios
        .iter()
        .find(|scenario| scenario.name == "replan-injected")
        .unwrap()
        .tags;
    assert!(!declared.is_empty());
    assert_eq!(
        tags,
        declared.iter().map(String::as_str).collect::<Vec<_>>()
    );
}

#[test]
fn merged_shards_give_the_unsharded_sarif() {
    let whole = sarif::render(&sweep(None));
    let shards: Vec<Summary> = (1..=3)
        .map(|index| sweep(Some(Partition { index, total: 3 })))
        .collect();
    let merged = merge::merge(shards).expect("the shards merge");
    assert_eq!(sarif::render(&merged), whole);
}

#[test]
fn sarif_flag_and_emit_write_the_same_file() {
    let dir = common::temp_dir("sarif-cli");
    let file = dir.join("alerts.sarif");
    let output = common::chaos(&[
        "run",
        "scenarios/lost-response-keyed.toml",
        "--target",
        "fresh-key",
        "--seeds",
        "3",
        "--emit",
        "json,sarif",
        "--out",
        dir.join("out").to_str().unwrap(),
        "--sarif",
        file.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1), "{:?}", common::text(&output));
    let emitted = std::fs::read_to_string(dir.join("out/report.sarif")).unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), emitted);
    assert!(
        emitted.contains("\"ruleId\": \"duplicate-effect\""),
        "{emitted}"
    );
}
