//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use std::sync::atomic::AtomicBool;

use chaos::report::Summary;
use chaos::{RunOutput, Scenario, Seeds, SimTarget, Sweep, Target, Verdict};

/// The repository's `scenarios/` directory.
pub fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios")
}

/// Every `scenarios/*.toml`, parsed, sorted by name.
pub fn all_scenarios() -> Vec<Scenario> {
    scenarios_in(&scenarios_dir())
}

/// Every `*.toml` directly in `dir`, parsed, sorted by name.
pub fn scenarios_in(dir: &Path) -> Vec<Scenario> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
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

/// The repository's root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Fails, listing every error, unless `report` matches `docs/report.schema.json`.
/// Every test that produces a report.json calls this (issue #4, item 1).
pub fn assert_valid_report(report: &serde_json::Value) {
    let errors = schema_errors(report);
    assert!(
        errors.is_empty(),
        "the report does not match docs/report.schema.json:\n{}",
        errors.join("\n")
    );
}

/// Every way `report` breaks `docs/report.schema.json`.
pub fn schema_errors(report: &serde_json::Value) -> Vec<String> {
    let text = std::fs::read_to_string(repo_root().join("docs/report.schema.json"))
        .expect("docs/report.schema.json exists");
    let schema: serde_json::Value = serde_json::from_str(&text).expect("the schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    validator
        .iter_errors(report)
        .map(|error| format!("{} at {}", error, error.instance_path()))
        .collect()
}

/// A path for one test under the system's temporary directory, with nothing
/// there yet: for a test that checks what chaos creates (or does not).
pub fn fresh_path(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("chaos-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&path);
    path
}

/// A fresh, empty directory for one test.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = fresh_path(name);
    std::fs::create_dir_all(&dir).expect("the temporary directory can be created");
    dir
}

/// The `chaos` binary, to be run from the repository's root as a user would.
pub fn chaos_command() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_chaos"));
    command.current_dir(repo_root());
    command
}

/// Runs `chaos args...` from the repository's root and waits for it.
pub fn chaos(args: &[&str]) -> Output {
    chaos_command().args(args).output().expect("chaos runs")
}

/// Runs `chaos args... --out out` from the repository's root and waits for it.
pub fn chaos_out(args: &[&str], out: &Path) -> Output {
    chaos_command()
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .expect("chaos runs")
}

/// Whether process `pid` runs: a zombie does not (the third field of
/// `/proc/PID/stat` says `Z`).
pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

/// What a finished command printed: (stdout, stderr).
pub fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Every seed of `seeds` of every scenario against every simulated target.
pub fn sweep(scenarios: &[Scenario], targets: &[SimTarget], seeds: Seeds) -> Summary {
    run_sweep(scenarios, targets, Sweep::new(seeds))
}

/// `sweep` with every setting of the sweep given.
pub fn run_sweep(scenarios: &[Scenario], targets: &[SimTarget], sweep: Sweep) -> Summary {
    let targets: Vec<Target> = targets.iter().cloned().map(Target::Sim).collect();
    chaos::run(scenarios, &targets, sweep, &(), &AtomicBool::new(false)).expect("not cancelled")
}

/// Seeds 0 to `seeds` of every scenario against one target (a live target
/// file, or a simulated one).
pub fn sweep_target(scenarios: &[Scenario], target: &Target, seeds: u64) -> Summary {
    chaos::run(
        scenarios,
        std::slice::from_ref(target),
        Sweep::new(Seeds::Range {
            first: 0,
            count: seeds,
        }),
        &(),
        &AtomicBool::new(false),
    )
    .expect("not cancelled")
}

/// One simulated trial, judged, with what the run produced.
pub fn trial(scenario: &Scenario, target: &SimTarget, seed: u64) -> (Verdict, Option<RunOutput>) {
    let judged = chaos::judge(scenario, &Target::Sim(target.clone()), seed);
    (judged.verdict, judged.run)
}

/// Fails unless `reports/seeds/{file}` is what its documented command
/// (the line of `reports/README.md` starting with `prefix`, which must be
/// `expected`, the report's own) writes now, and that command exits 1
/// (`why`: which targets fail it on purpose).
pub fn assert_seeds_report_fresh(prefix: &str, expected: &str, file: &str, why: &str) {
    let command = documented_command(prefix);
    assert_eq!(
        command, expected,
        "reports/README.md and the report's own command drifted apart"
    );
    let out = temp_dir(file);
    let output = chaos_command()
        .args(documented_arguments(&command, "reports/seeds", &out))
        .output()
        .expect("chaos runs");
    assert_eq!(
        output.status.code(),
        Some(1),
        "{why}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let fresh = std::fs::read_to_string(out.join(file)).unwrap();
    let checked_in = std::fs::read_to_string(repo_root().join("reports/seeds").join(file))
        .unwrap_or_else(|_| panic!("reports/seeds/{file} is checked in"));
    assert!(
        fresh == checked_in,
        "reports/seeds/{file} is stale; regenerate it from the repository root with:\n    {command}"
    );
}

/// The line of `reports/README.md` that starts with `prefix`: the command
/// that regenerates a checked-in report, as the documentation states it.
pub fn documented_command(prefix: &str) -> String {
    let readme = std::fs::read_to_string(repo_root().join("reports/README.md"))
        .expect("reports/README.md exists");
    readme
        .lines()
        .find(|line| line.starts_with(prefix))
        .unwrap_or_else(|| panic!("reports/README.md documents a command starting {prefix}"))
        .to_owned()
}

/// The arguments of a documented `cargo run ... -- run ...` command as the
/// test runs them: each `dir/*.toml` or `dir/prefix*.toml` glob expanded as
/// a shell would (sorted), and `--out <documented_out>` sent to `out` instead.
pub fn documented_arguments(command: &str, documented_out: &str, out: &Path) -> Vec<String> {
    let mut arguments: Vec<String> = Vec::new();
    let mut words = command.split_once(" -- ").unwrap().1.split_whitespace();
    while let Some(word) = words.next() {
        match word {
            glob if glob.contains('*') && glob.ends_with(".toml") => {
                let (dir, pattern) = glob.rsplit_once('/').unwrap();
                let prefix = pattern.split('*').next().unwrap();
                let mut paths: Vec<String> = std::fs::read_dir(repo_root().join(dir))
                    .unwrap()
                    .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
                    .filter(|name| name.starts_with(prefix) && name.ends_with(".toml"))
                    .map(|name| format!("{dir}/{name}"))
                    .collect();
                paths.sort();
                arguments.extend(paths);
            }
            "--out" => {
                assert_eq!(words.next(), Some(documented_out));
                arguments.push("--out".into());
                arguments.push(out.display().to_string());
            }
            other => arguments.push(other.to_owned()),
        }
    }
    arguments
}

/// Where [`run_live`] writes the reports of a run against `target`.
pub fn live_out(dir: &Path, target: &Path) -> PathBuf {
    dir.join(format!(
        "out-{}",
        target.file_stem().unwrap().to_string_lossy()
    ))
}

/// Runs `scenarios` against the target file at `target` for `seeds` trials;
/// (exit code, stdout, stderr, report.json).
pub fn run_live(
    dir: &Path,
    scenarios: &[&str],
    target: &Path,
    seeds: &str,
    extra: &[&str],
) -> (Option<i32>, String, String, serde_json::Value) {
    let out = live_out(dir, target);
    let mut args = vec!["run"];
    args.extend(scenarios);
    args.extend([
        "--target",
        target.to_str().unwrap(),
        "--seeds",
        seeds,
        "--out",
        out.to_str().unwrap(),
    ]);
    args.extend(extra);
    let output = chaos(&args);
    let (stdout, stderr) = text(&output);
    let report = std::fs::read(out.join("report.json"))
        .map(|bytes| serde_json::from_slice(&bytes).unwrap())
        .unwrap_or(serde_json::Value::Null);
    (output.status.code(), stdout, stderr, report)
}

/// One HTTP/1.1 request read off `stream` by a server a test runs: its
/// method, path, headers (names lower-cased) and body.
pub struct HttpRequest {
    pub method: String,
    pub path: String,
    pub headers: std::collections::BTreeMap<String, String>,
    pub body: Vec<u8>,
}

impl HttpRequest {
    pub fn read(stream: &std::net::TcpStream) -> HttpRequest {
        use std::io::{BufRead, BufReader, Read};
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut request_line = String::new();
        reader.read_line(&mut request_line).unwrap();
        let mut headers = std::collections::BTreeMap::new();
        loop {
            let mut header = String::new();
            reader.read_line(&mut header).unwrap();
            if header.trim().is_empty() {
                break;
            }
            let (name, value) = header.split_once(':').unwrap();
            headers.insert(name.to_ascii_lowercase(), value.trim().to_string());
        }
        let length = headers
            .get("content-length")
            .map_or(0, |length| length.parse().unwrap());
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let mut parts = request_line.split_whitespace();
        HttpRequest {
            method: parts.next().unwrap_or_default().to_string(),
            path: parts.next().unwrap_or_default().to_string(),
            headers,
            body,
        }
    }

    pub fn header(&self, name: &str) -> String {
        self.headers.get(name).cloned().unwrap_or_default()
    }
}

/// Runs an example's `setup` (its exact pins, installed once): the tests
/// that start it need it, and a clean machine has none.
pub fn setup_example(folder: &str) {
    let setup = repo_root().join(folder).join("setup");
    let output = Command::new(&setup)
        .output()
        .unwrap_or_else(|error| panic!("{} did not start: {error}", setup.display()));
    assert!(
        output.status.success(),
        "{} failed: {}",
        setup.display(),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The live target file at `path`, resolved as `--target` would.
pub fn live_target(path: &Path) -> Target {
    chaos::resolve(path.to_str().unwrap(), Path::new("unused"))
        .unwrap_or_else(|error| panic!("{error}"))
}

/// The target file at `relative` (from the repository's root) of an
/// example, its `setup` run first.
pub fn example_target(relative: &str) -> Target {
    setup_example(Path::new(relative).parent().unwrap().to_str().unwrap());
    live_target(&repo_root().join(relative))
}
