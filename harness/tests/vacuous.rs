//! Issue 22: a pass must mean the fault happened and the layer held, and a
//! pass must not hide what it hides. Each test runs `chaos` as users do.

mod common;

use common::chaos_out as chaos;

use std::path::{Path, PathBuf};

/// `scenarios/lost-response-keyed.toml` with its loss moved to the ninth
/// answer, which one call never gets: written as `dir/name.toml`.
fn never_acting_copy(dir: &Path, name: &str) -> PathBuf {
    let text =
        std::fs::read_to_string(common::repo_root().join("scenarios/lost-response-keyed.toml"))
            .unwrap();
    assert!(text.contains("\nnth = 1\n"));
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text.replace("\nnth = 1\n", "\nnth = 9\n")).unwrap();
    path
}

fn report(out: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap()
}

#[test]
fn a_fault_that_never_acts_is_unknown_vacuous_against_every_target() {
    let dir = common::fresh_path("nth9");
    let path = never_acting_copy(&dir, "nth9");
    let out = dir.join("out");
    let output = chaos(&["run", path.to_str().unwrap(), "--seeds", "20"], &out);
    let (stdout, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(3), "{stdout}{stderr}");
    assert!(stdout.contains("exit 3"), "{stdout}");
    assert!(
        stdout.contains("fault 1 (lose-response: answer 9 on provider-to-target lost (held)) never acted: nothing was tested"),
        "{stdout}"
    );
    let report = report(&out);
    common::assert_valid_report(&report);
    let cells = report["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4, "every reference target");
    for cell in cells {
        assert_eq!(cell["verdict"], "unknown", "{cell}");
        assert_eq!(cell["seeds_all_faults_acted"], 0, "{cell}");
        assert_eq!(cell["faults"][0]["seeds_acted"], 0, "{cell}");
        assert_eq!(cell["checks"][0]["check"], "fault-never-acted", "{cell}");
    }
    assert_eq!(stdout.matches("UNKNOWN (vacuous)").count(), 4, "{stdout}");
    let markdown = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(markdown.contains("acted on 0/20 seeds"), "{markdown}");
    let junit = std::fs::read_to_string(out.join("junit.xml")).unwrap();
    assert!(junit.contains("name=\"faults\""), "{junit}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        html.contains("acted on 0&#x2f;20 seeds"),
        "the HTML escapes its slash"
    );
}

#[test]
fn the_same_scenario_with_its_faults_acting_passes_and_says_so() {
    let out = common::fresh_path("acting");
    let output = chaos(
        &[
            "run",
            "scenarios/lost-response-keyed.toml",
            "--target",
            "ledger",
            "--seeds",
            "20",
        ],
        &out,
    );
    assert_eq!(output.status.code(), Some(0));
    let cell = &report(&out)["cells"][0];
    assert_eq!(cell["seeds_all_faults_acted"], 20);
    assert_eq!(cell["faults"][0]["seeds_acted"], 20);
    assert_eq!(
        cell["faults"][0]["acts"][0]["what"],
        "lost an answer provider-to-target (held)"
    );
}

#[test]
fn a_fault_that_stopped_acting_is_a_regression_in_compare() {
    let dir = common::fresh_path("stopped");
    let before = dir.join("before");
    let output = chaos(
        &[
            "run",
            "scenarios/lost-response-keyed.toml",
            "--target",
            "ledger",
            "--seeds",
            "5",
        ],
        &before,
    );
    assert_eq!(output.status.code(), Some(0));
    // The same scenario name, its fault moved where it never acts.
    let path = never_acting_copy(&dir.join("edited"), "lost-response-keyed");
    let after = dir.join("after");
    let output = chaos(
        &[
            "run",
            path.to_str().unwrap(),
            "--target",
            "ledger",
            "--seeds",
            "5",
        ],
        &after,
    );
    assert_eq!(output.status.code(), Some(3));
    let compared = common::chaos(&[
        "compare",
        before.join("report.json").to_str().unwrap(),
        after.join("report.json").to_str().unwrap(),
    ]);
    let (stdout, stderr) = common::text(&compared);
    assert_eq!(compared.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("REGRESSION lost-response-keyed x ledger"),
        "{stdout}"
    );
    assert!(
        stdout.contains("stopped acting (nothing was tested): fault 1 lose-response"),
        "{stdout}"
    );
}

#[test]
fn a_race_the_provider_absorbed_warns_and_fails_only_when_denied() {
    let args = [
        "run",
        "scenarios/concurrent-attempts-keyed.toml",
        "--target",
        "args-hash",
        "--seeds",
        "10",
    ];
    let out = common::fresh_path("warned");
    let output = chaos(&args, &out);
    let (stdout, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("pass (1 warning)"), "{stdout}");
    assert!(
        stdout.contains("warning concurrent-attempts-keyed x args-hash: race-absorbed-by-provider on 10/10 seeds"),
        "{stdout}"
    );
    let cell = &report(&out)["cells"][0];
    assert_eq!(cell["verdict"], "pass");
    assert_eq!(cell["warnings"][0]["check"], "race-absorbed-by-provider");
    assert_eq!(cell["warnings"][0]["seeds"], 10);

    let denied = common::fresh_path("denied");
    let mut strict = args.to_vec();
    strict.extend(["--deny", "warnings"]);
    let output = chaos(&strict, &denied);
    let (stdout, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("FAIL (warnings denied)"), "{stdout}");
    let report = report(&denied);
    common::assert_valid_report(&report);
    assert_eq!(report["warnings_denied"], true);
    assert_eq!(report["cells"][0]["verdict"], "fail");
    assert!(report["cells"][0]["rerun"]
        .as_str()
        .unwrap()
        .ends_with("--deny warnings"));

    // A layer that claims the key first makes one dispatch: no warning.
    let quiet = common::fresh_path("quiet");
    let output = chaos(
        &[
            "run",
            "scenarios/concurrent-attempts-keyed.toml",
            "--target",
            "ledger",
            "--seeds",
            "10",
            "--deny",
            "warnings",
        ],
        &quiet,
    );
    assert_eq!(output.status.code(), Some(0));
}

#[test]
fn two_scenario_files_of_one_name_are_both_named() {
    let dir = common::fresh_path("twins");
    std::fs::create_dir_all(&dir).unwrap();
    let copy = dir.join("lost-response-keyed.toml");
    std::fs::copy(
        common::repo_root().join("scenarios/lost-response-keyed.toml"),
        &copy,
    )
    .unwrap();
    let output = chaos(
        &[
            "run",
            "scenarios/lost-response-keyed.toml",
            copy.to_str().unwrap(),
        ],
        &dir.join("out"),
    );
    let (stdout, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(2), "{stdout}{stderr}");
    assert!(
        stderr.contains("scenarios/lost-response-keyed.toml")
            && stderr.contains(copy.to_str().unwrap()),
        "{stderr}"
    );
}

#[test]
fn a_missing_effect_shows_in_the_cell_not_only_a_maximum() {
    // args-hash merges two reminders of one invoice into one effect: the
    // maximum reads 1/1, the shortfall says what was lost.
    let out = common::fresh_path("missing");
    let output = chaos(
        &[
            "run",
            "scenarios/two-reminders-one-invoice.toml",
            "--target",
            "args-hash",
            "--seeds",
            "5",
        ],
        &out,
    );
    let (stdout, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("effects 1/1, 1 missing"), "{stdout}");
    assert_eq!(report(&out)["cells"][0]["effects_missing_max"], 1);
}

#[test]
fn run_help_names_every_report_it_can_emit() {
    let output = common::chaos(&["run", "--help"]);
    let (stdout, _) = common::text(&output);
    for format in chaos::report::Format::ALL {
        assert!(
            stdout.contains(&format!("{} ({}", format.name(), format.file_name())),
            "`--emit {}` is missing from `chaos run --help`:\n{stdout}",
            format.name()
        );
    }
}

#[test]
fn every_re_plan_scenario_names_its_threats() {
    for scenario in common::all_scenarios() {
        if scenario.test != chaos::scenario::TestKind::RePlan {
            continue;
        }
        for tag in ["owasp:LLM06", "owasp-asi:ASI02", "atlas:AML.M0035"] {
            assert!(
                scenario.tags.iter().any(|have| have == tag),
                "{} lacks {tag}: {:?}",
                scenario.path.display(),
                scenario.tags
            );
        }
    }
}

#[test]
fn a_failing_run_reads_as_causes_most_serious_first_then_what_to_do_next() {
    let out = common::fresh_path("causes");
    let output = chaos(
        &[
            "run",
            "scenarios/revoked-permission.toml",
            "scenarios/lost-response-keyed.toml",
            "--target",
            "args-hash",
            "--seeds",
            "3",
        ],
        &out,
    );
    let (stdout, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(1), "{stdout}{stderr}");
    let causes = stdout
        .split_once("causes, most serious first (`chaos explain CHECK` for a check's page):\n")
        .unwrap_or_else(|| panic!("{stdout}"))
        .1;
    let disclosure = causes.find("  disclosure in 1 cell(s)").expect(causes);
    let unmarked = causes.find("  unmarked-replay in 1 cell(s)").expect(causes);
    assert!(
        disclosure < unmarked,
        "a disclosure is more serious: {causes}"
    );
    assert!(
        causes.contains("    fix: mark a stored answer as a replay"),
        "{causes}"
    );
    assert!(
        stdout.contains("next: replay revoked-permission x args-hash alone with `chaos run scenarios/revoked-permission.toml --target args-hash --seed 0`"),
        "{stdout}"
    );
}
