//! `reports/libraries/<name>/`: the published verdicts on real idempotency
//! libraries from PyPI (`libraries/<name>/`), checked for staleness as far as
//! a live, nondeterministic run allows (issue 14, item 1):
//!
//! - exactly: each published report.json covers exactly the current
//!   `scenarios/*.toml` and its library's target, its `summary.md` is what
//!   rendering that report.json gives, and the pins it was run with are the
//!   library's `requirements.txt`;
//! - live, at one trial a cell (a few minutes): every cell that failed on
//!   *every* published trial fails again, and no cell that reached a verdict
//!   then is `unknown` now. Cells that failed on some trials only (races) and
//!   passing cells are not asserted at one trial: a race missed once is not a
//!   regression, and a race found where the publication saw none is a finding
//!   to publish (`reports/libraries/regenerate`), not a flaky test.
//!
//! The live test also proves the `[env]` run facts end to end: every
//! library's target file binds its port only through `{listen.host}` and
//! `{listen.port}` (uvicorn refuses a literal `{listen.port}`), keeps its
//! state under `{state_dir}`, or takes its expiry from `{retention.seconds}`.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chaos::report::{json, markdown};

/// `libraries/<name>` for every `libraries/*/target.toml`, sorted.
fn libraries() -> Vec<(String, PathBuf)> {
    let root = common::repo_root().join("libraries");
    let mut found: Vec<(String, PathBuf)> = std::fs::read_dir(&root)
        .expect("libraries/ exists")
        .map(|entry| entry.unwrap().path())
        .filter(|dir| dir.join("target.toml").is_file())
        .map(|dir| (dir.file_name().unwrap().to_string_lossy().into_owned(), dir))
        .collect();
    found.sort();
    assert!(
        found.len() >= 3,
        "issue 14 publishes at least three libraries"
    );
    found
}

fn published(name: &str) -> PathBuf {
    common::repo_root().join("reports/libraries").join(name)
}

fn read_json(path: &Path) -> serde_json::Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// The names of `scenarios/*.toml`, sorted by name.
fn current_scenarios() -> Vec<String> {
    let mut names: Vec<String> = common::all_scenarios()
        .into_iter()
        .map(|scenario| scenario.name)
        .collect();
    names.sort();
    names
}

const REGENERATE: &str = "reports/libraries/regenerate";

#[test]
fn published_library_reports_match_the_scenarios_the_pins_and_their_rendering() {
    let scenarios = current_scenarios();
    let index = std::fs::read_to_string(common::repo_root().join("reports/libraries/README.md"))
        .expect("reports/libraries/README.md exists");
    for (name, dir) in libraries() {
        assert_published(
            &name,
            &dir,
            &scenarios,
            &index,
            &format!("libraries/{name}"),
            "scenarios/*.toml",
        );
    }
}

/// The checks every published report passes, a library's or an MCP
/// server's: it is a valid report of exactly `scenarios` against its one
/// target, live; it was run with the pins in `dir` (`source`, for the
/// message), whose README names the version judged, listed in `index`;
/// and its summary.md is what its report.json renders to. The report,
/// for the caller's own checks.
fn assert_published(
    name: &str,
    dir: &Path,
    scenarios: &[String],
    index: &str,
    source: &str,
    covers: &str,
) -> serde_json::Value {
    let out = published(name);
    let report = read_json(&out.join("report.json"));
    common::assert_valid_report(&report);

    let mut covered: Vec<String> = report["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|scenario| scenario["name"].as_str().unwrap().to_owned())
        .collect();
    covered.sort();
    assert_eq!(
        covered, scenarios,
        "reports/libraries/{name} does not cover exactly {covers}; regenerate with {REGENERATE}"
    );
    let targets: Vec<&str> = report["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|target| target["name"].as_str().unwrap())
        .collect();
    assert_eq!(targets, [name], "reports/libraries/{name}");
    assert_eq!(report["transport"], "live", "reports/libraries/{name}");

    let pins = std::fs::read_to_string(dir.join("requirements.txt")).unwrap();
    let run_with = std::fs::read_to_string(out.join("requirements.txt")).unwrap();
    assert_eq!(
        run_with, pins,
        "{source}/requirements.txt changed since the published run; regenerate with {REGENERATE}"
    );
    let pin = pins
        .lines()
        .find(|line| line.split("==").next() == Some(name))
        .unwrap_or_else(|| panic!("{source}/requirements.txt pins {name}"));
    let readme = std::fs::read_to_string(out.join("README.md")).unwrap();
    assert!(
        readme.contains(pin),
        "reports/libraries/{name}/README.md names the version it judged ({pin})"
    );
    assert!(
        index.contains(&format!("[{name}]")),
        "reports/libraries/README.md lists {name}"
    );

    let summary = json::read(&out.join("report.json"))
        .unwrap_or_else(|error| panic!("reports/libraries/{name}/report.json: {error}"));
    let rendered = markdown::render(&summary);
    let checked_in = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(
        rendered == checked_in,
        "reports/libraries/{name}/summary.md is not what its report.json renders to; regenerate with {REGENERATE}"
    );
    report
}

/// Per cell (scenario): (verdict, failed on every trial).
fn cells(report: &serde_json::Value) -> BTreeMap<String, (String, bool)> {
    report["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cell| {
            let run = cell["seeds_run"].as_u64().unwrap();
            let failed = cell["seeds_failed"].as_u64().unwrap();
            (
                cell["scenario"].as_str().unwrap().to_owned(),
                (
                    cell["verdict"].as_str().unwrap().to_owned(),
                    run > 0 && failed == run,
                ),
            )
        })
        .collect()
}

// Live: PostgreSQL and Redis on 127.0.0.1, and each library's venv (its
// target file's `build`, `libraries/<name>/setup`, makes it; .ci/run runs the
// setups first).
#[test]
fn published_deterministic_findings_still_hold_at_one_trial() {
    let scenarios = common::all_scenarios()
        .iter()
        .map(|scenario| format!("scenarios/{}.toml", scenario.name))
        .collect();
    let targets = libraries()
        .into_iter()
        .map(|(name, _)| {
            let file = format!("libraries/{name}/target.toml");
            (name, file)
        })
        .collect::<Vec<_>>();
    assert_published_still_hold("libraries-live", "library", scenarios, &targets);
}

/// Runs `scenarios` once against each published target (`(name, target
/// file)`), and fails naming every cell published failing on every trial
/// that no longer fails, and every decided cell that is now unknown. `what`
/// names the published set in the message.
fn assert_published_still_hold(
    dir: &str,
    what: &str,
    scenarios: Vec<String>,
    targets: &[(String, String)],
) {
    let out = common::temp_dir(dir);
    let mut args: Vec<String> = vec!["run".into()];
    args.extend(scenarios);
    for (_, file) in targets {
        args.push("--target".into());
        args.push(file.clone());
    }
    args.extend(["--seeds", "1", "--emit", "json", "--out"].map(String::from));
    args.push(out.display().to_string());
    let output = common::chaos_command()
        .args(&args)
        .output()
        .expect("chaos runs");
    let (_, stderr) = common::text(&output);
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "every cell reaches a verdict (exit 0 or 1), got {:?}:\n{stderr}",
        output.status.code()
    );
    let fresh = read_json(&out.join("report.json"));
    common::assert_valid_report(&fresh);

    let mut problems = Vec::new();
    for (name, _) in targets {
        let published = cells(&read_json(&published(name).join("report.json")));
        let fresh: BTreeMap<&str, &str> = fresh["cells"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|cell| cell["target"] == name.as_str())
            .map(|cell| {
                (
                    cell["scenario"].as_str().unwrap(),
                    cell["verdict"].as_str().unwrap(),
                )
            })
            .collect();
        for (scenario, (verdict, every_trial)) in &published {
            let now = fresh.get(scenario.as_str()).copied().unwrap_or("missing");
            if *every_trial && now != "fail" {
                problems.push(format!(
                    "{scenario} x {name}: failed on every published trial, now {now}"
                ));
            }
            if verdict != "unknown" && now == "unknown" {
                problems.push(format!(
                    "{scenario} x {name}: published {verdict}, now unknown"
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "the published {what} verdicts are stale (regenerate with {REGENERATE}, and update the findings in reports/libraries/*/README.md):\n{}\n{stderr}",
        problems.join("\n")
    );
}

/// Celery's documented pattern, published beside the libraries (issue 25):
/// `examples/celery-worker` on the queue scenarios.
const CELERY: &str = "reports/libraries/celery";

// guards: the published Celery verdicts are those of the current queue
// scenarios, of both forms of the example's task, with its current pins, and
// summary.md is what the report renders to (the live half is
// tests/broker.rs, which runs the same example on the same scenarios)
#[test]
fn published_celery_verdicts_match_the_queue_scenarios_the_pins_and_their_rendering() {
    let out = common::repo_root().join(CELERY);
    let report = read_json(&out.join("report.json"));
    common::assert_valid_report(&report);
    let mut covered: Vec<String> = report["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|scenario| scenario["name"].as_str().unwrap().to_owned())
        .collect();
    covered.sort();
    let mut queue: Vec<String> = common::scenarios_in(&common::scenarios_dir().join("queue"))
        .into_iter()
        .map(|scenario| scenario.name)
        .collect();
    queue.sort();
    assert_eq!(
        covered, queue,
        "{CELERY} does not cover exactly scenarios/queue/*.toml; regenerate with {REGENERATE}"
    );
    let targets: Vec<&str> = report["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|target| target["name"].as_str().unwrap())
        .collect();
    assert_eq!(targets, ["celery-naive", "celery-inbox"], "{CELERY}");
    assert_eq!(report["transport"], "live", "{CELERY}");

    let pins = std::fs::read_to_string(
        common::repo_root().join("examples/celery-worker/requirements.txt"),
    )
    .unwrap();
    let run_with = std::fs::read_to_string(out.join("requirements.txt")).unwrap();
    assert_eq!(
        run_with, pins,
        "examples/celery-worker/requirements.txt changed since the published run; regenerate with {REGENERATE}"
    );
    let pin = pins
        .lines()
        .find(|line| line.starts_with("celery=="))
        .expect("the example pins celery");
    let readme = std::fs::read_to_string(out.join("README.md")).unwrap();
    assert!(
        readme.contains(pin),
        "{CELERY}/README.md names the version it judged ({pin})"
    );
    let index =
        std::fs::read_to_string(common::repo_root().join("reports/libraries/README.md")).unwrap();
    assert!(
        index.contains("[celery]"),
        "reports/libraries/README.md lists celery"
    );

    let summary = json::read(&out.join("report.json"))
        .unwrap_or_else(|error| panic!("{CELERY}/report.json: {error}"));
    assert!(
        markdown::render(&summary) == std::fs::read_to_string(out.join("summary.md")).unwrap(),
        "{CELERY}/summary.md is not what its report.json renders to; regenerate with {REGENERATE}"
    );
}

/// Real third-party MCP servers that send mail, published beside the
/// libraries (issue 23, item 6): `libraries/mcp-servers/<name>/`, each run
/// over stdio with chaos as its MCP client and its mail server.
fn mcp_servers() -> Vec<(String, PathBuf)> {
    let root = common::repo_root().join("libraries/mcp-servers");
    let mut found: Vec<(String, PathBuf)> = std::fs::read_dir(&root)
        .expect("libraries/mcp-servers/ exists")
        .map(|entry| entry.unwrap().path())
        .filter(|dir| dir.join("target.toml").is_file())
        .map(|dir| (dir.file_name().unwrap().to_string_lossy().into_owned(), dir))
        .collect();
    found.sort();
    assert!(
        found.len() >= 2,
        "issue 23 publishes at least two third-party MCP servers"
    );
    found
}

/// What `regenerate` runs against a mail-sending MCP server, as the paths it
/// passes: `scenarios/smtp/*.toml` and the top-level `scenarios/*-blind*.toml`
/// (the scenarios a mail server, which deduplicates nothing, can serve).
fn mail_scenarios() -> Vec<(String, String)> {
    let smtp = common::scenarios_in(&common::scenarios_dir().join("smtp"))
        .into_iter()
        .map(|scenario| {
            let path = format!("scenarios/smtp/{}.toml", scenario.name);
            (scenario.name, path)
        });
    let blind = common::all_scenarios()
        .into_iter()
        .filter(|scenario| scenario.name.contains("-blind"))
        .map(|scenario| {
            let path = format!("scenarios/{}.toml", scenario.name);
            (scenario.name, path)
        });
    let mut all: Vec<(String, String)> = smtp.chain(blind).collect();
    all.sort();
    assert!(all.len() >= 6, "the SMTP scenarios and the blind ones");
    all
}

/// The MCP tool a server's target file maps the suite's `send_reminder` to.
fn mapped_tool(dir: &Path) -> String {
    let text = std::fs::read_to_string(dir.join("target.toml")).unwrap();
    let file: toml::Value = toml::from_str(&text).unwrap();
    file["mcp"]["tools"]["send_reminder"]["name"]
        .as_str()
        .expect("the target file maps send_reminder to the server's tool")
        .to_owned()
}

// guards: the published MCP server verdicts are those of the current mail
// scenarios, with the current pins, render to their summary.md, and carry
// the hints each server declared for the tool it was called through
#[test]
fn published_mcp_server_reports_match_the_mail_scenarios_the_pins_and_their_rendering() {
    let scenarios: Vec<String> = mail_scenarios().into_iter().map(|(name, _)| name).collect();
    let index = std::fs::read_to_string(common::repo_root().join("reports/libraries/README.md"))
        .expect("reports/libraries/README.md exists");
    for (name, dir) in mcp_servers() {
        let report = assert_published(
            &name,
            &dir,
            &scenarios,
            &index,
            &format!("libraries/mcp-servers/{name}"),
            "scenarios/smtp/*.toml and scenarios/*-blind*.toml",
        );

        // The hints come from the server's own tools/list, in every cell
        // that called it: what it declared is part of the verdict.
        let tool = mapped_tool(&dir);
        for cell in report["cells"].as_array().unwrap() {
            if cell["verdict"] == "excluded" {
                continue;
            }
            let declared = cell["declared_tools"].as_array().unwrap_or_else(|| {
                panic!(
                    "reports/libraries/{name}: cell {} declares no tools",
                    cell["scenario"]
                )
            });
            assert!(
                declared
                    .iter()
                    .any(|entry| entry["mcp-tool"] == tool.as_str()),
                "reports/libraries/{name}: cell {} lacks what {tool} declared: {declared:?}",
                cell["scenario"]
            );
        }

        // The summary.md is what report.json renders to (above), and it
        // shows the hints. Markdown escapes the name's underscores.
        let rendered = std::fs::read_to_string(published(&name).join("summary.md")).unwrap();
        let shown = tool.replace('_', "\\_");
        assert!(
            rendered.contains("MCP tools as their servers declare them")
                && rendered.contains(&shown),
            "reports/libraries/{name}: the summary shows the hints {tool} declared"
        );
    }
}

// Live: each server's venv (its target file's `build`,
// `libraries/mcp-servers/<name>/setup`), chaos as its MCP client over stdio
// and its mail server. One trial a cell, as for the libraries above.
#[test]
fn published_mcp_server_findings_still_hold_at_one_trial() {
    let scenarios = mail_scenarios().into_iter().map(|(_, path)| path).collect();
    let targets = mcp_servers()
        .into_iter()
        .map(|(name, _)| {
            let file = format!("libraries/mcp-servers/{name}/target.toml");
            (name, file)
        })
        .collect::<Vec<_>>();
    assert_published_still_hold("mcp-servers-live", "MCP server", scenarios, &targets);
}
