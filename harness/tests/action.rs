//! The GitHub Action (issue 28 item 1): action/run.py, run as action.yml
//! runs it, with fake GITHUB_OUTPUT, GITHUB_STEP_SUMMARY and GITHUB_EVENT_PATH
//! files, a real chaos binary and, for the pull-request comment, a GitHub API
//! served by the test; and action.yml itself, parsed, against what the script
//! reads.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use yaml_rust2::{Yaml, YamlLoader};

fn script() -> PathBuf {
    common::repo_root().join("action/run.py")
}

/// One fake job: its folder (the working directory) and its GitHub files.
struct Job {
    dir: PathBuf,
    output: PathBuf,
    summary: PathBuf,
    env: Vec<(String, String)>,
}

impl Job {
    fn new(name: &str) -> Job {
        let dir = common::temp_dir(&format!("action-{name}"));
        let (output, summary) = (dir.join("github-output"), dir.join("step-summary"));
        std::fs::write(&output, "").unwrap();
        std::fs::write(&summary, "").unwrap();
        Job {
            dir,
            output,
            summary,
            env: Vec::new(),
        }
    }

    fn set(&mut self, name: &str, value: &str) -> &mut Job {
        self.env.push((name.to_string(), value.to_string()));
        self
    }

    /// `python3 action/run.py VERB` with only the variables a runner would
    /// give it: nothing of the test's own environment (a CI runner's
    /// GITHUB_* variables, a proxy) leaks in.
    fn run(&self, verb: &str) -> Output {
        let mut command = Command::new("python3");
        command
            .arg(script())
            .arg(verb)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.dir)
            .env("GITHUB_OUTPUT", &self.output)
            .env("GITHUB_STEP_SUMMARY", &self.summary)
            .env("CHAOS_BIN", env!("CARGO_BIN_EXE_chaos"))
            .env("INPUT_WORKING_DIRECTORY", &self.dir)
            .current_dir(&self.dir);
        for (name, value) in &self.env {
            command.env(name, value);
        }
        command.output().expect("python3 runs action/run.py")
    }

    /// The step's outputs, as the runner reads $GITHUB_OUTPUT (the last
    /// value of a name wins).
    fn outputs(&self) -> BTreeMap<String, String> {
        parse_outputs(&std::fs::read_to_string(&self.output).unwrap())
    }

    fn step_summary(&self) -> String {
        std::fs::read_to_string(&self.summary).unwrap()
    }
}

/// `name=value` lines and `name<<DELIMITER` heredocs, as the runner reads them.
fn parse_outputs(text: &str) -> BTreeMap<String, String> {
    let mut outputs = BTreeMap::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if let Some((name, delimiter)) = line.split_once("<<") {
            let mut value = Vec::new();
            for line in lines.by_ref() {
                if line == delimiter {
                    break;
                }
                value.push(line);
            }
            outputs.insert(name.to_string(), value.join("\n"));
        } else if let Some((name, value)) = line.split_once('=') {
            outputs.insert(name.to_string(), value.to_string());
        }
    }
    outputs
}

fn log(output: &Output) -> String {
    let (stdout, stderr) = common::text(output);
    format!("{stdout}{stderr}")
}

/// A folder whose name a shell would run, holding one built-in scenario.
const HOSTILE: &str = "my scenarios $(touch pwned) `touch pwned2`";

fn hostile_scenario(job: &Job) -> PathBuf {
    let folder = job.dir.join(HOSTILE);
    std::fs::create_dir_all(&folder).unwrap();
    let path = folder.join("lost response.toml");
    std::fs::copy(
        common::scenarios_dir().join("lost-response-keyed.toml"),
        &path,
    )
    .unwrap();
    path
}

#[test]
fn a_failing_sweep_gives_its_exit_code_its_outputs_and_the_job_summary() {
    let mut job = Job::new("failing");
    hostile_scenario(&job);
    job.set("INPUT_SCENARIOS", &format!("{HOSTILE}/*.toml\n"))
        .set("INPUT_TARGETS", "fresh-key\n\nruntime-ledger")
        .set("INPUT_SEEDS", "3")
        .set("INPUT_EMIT", "json,junit,sarif")
        .set("INPUT_ARGS", "--first-seed 5 --keep-failures '2'");
    let ran = job.run("run");
    assert!(ran.status.success(), "{}", log(&ran));
    let outputs = job.outputs();

    // The glob was expanded without a shell: the folder's name reached chaos
    // as written, in one argument, and nothing in it ran.
    assert_eq!(
        outputs["command"],
        format!(
            "chaos run '{HOSTILE}/lost response.toml' --target fresh-key --target runtime-ledger \
             --seeds 3 --out chaos-report --emit json,junit,sarif,markdown --first-seed 5 --keep-failures 2"
        )
    );
    for file in ["pwned", "pwned2"] {
        assert!(!job.dir.join(file).exists(), "{file} was created");
        assert!(!job.dir.join(HOSTILE).join(file).exists());
    }

    // fresh-key duplicates the charge under a lost answer: exit 1, passed on.
    assert_eq!(outputs["exit-code"], "1", "{}", log(&ran));
    let report_dir = job.dir.join("chaos-report");
    assert_eq!(Path::new(&outputs["report-dir"]), report_dir);
    assert_eq!(outputs["whole"], "true");
    assert_eq!(outputs["artifact-name"], "chaos-report");
    for (name, file) in [
        ("summary", "summary.md"),
        ("junit", "junit.xml"),
        ("sarif", "report.sarif"),
    ] {
        assert_eq!(Path::new(&outputs[name]), report_dir.join(file));
        assert!(report_dir.join(file).is_file(), "{file}");
    }
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(report_dir.join("report.json")).unwrap()).unwrap();
    let cells = report["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    assert_eq!(report["seeds"]["first"], 5, "{}", report["seeds"]);
    let sarif = std::fs::read_to_string(report_dir.join("report.sarif")).unwrap();
    assert!(
        sarif.contains("lost response.toml"),
        "the SARIF result names the file"
    );

    // The job summary is summary.md.
    let summary = std::fs::read_to_string(report_dir.join("summary.md")).unwrap();
    assert!(summary.contains("fresh-key"), "{summary}");
    assert_eq!(job.step_summary().trim_end(), summary.trim_end());

    // The gate fails the job on 1 by default, and lets a shard's 1 through.
    let mut gate = Job::new("gate");
    gate.set("CHAOS_EXIT_CODE", &outputs["exit-code"]);
    let failed = gate.run("gate");
    assert_eq!(failed.status.code(), Some(1), "{}", log(&failed));
    assert!(
        log(&failed).contains("::error::chaos exited 1: an invariant was violated"),
        "{}",
        log(&failed)
    );
    gate.set("INPUT_ALLOWED_EXIT_CODES", "0, 1");
    assert_eq!(gate.run("gate").status.code(), Some(0));
}

#[test]
fn a_passing_sweep_gives_0_and_the_gate_passes() {
    let mut job = Job::new("passing");
    job.set("INPUT_SCENARIOS", "scenarios/lost-response-keyed.toml")
        .set("INPUT_TARGETS", "runtime-ledger")
        .set("INPUT_SEEDS", "3")
        .set("INPUT_DENY_WARNINGS", "true");
    let ran = job.run("run");
    assert!(ran.status.success(), "{}", log(&ran));
    let outputs = job.outputs();
    assert_eq!(outputs["exit-code"], "0", "{}", log(&ran));
    assert!(
        outputs["command"].ends_with(
            "--seeds 3 --deny warnings --out chaos-report --emit json,junit,markdown,html,sarif"
        ),
        "{}",
        outputs["command"]
    );
    // Not on disk in the job's folder: chaos read its built-in copy.
    assert!(log(&ran).contains("using the copy built into chaos"));
    assert!(job.step_summary().contains("runtime-ledger"));
    let mut gate = Job::new("gate-pass");
    gate.set("CHAOS_EXIT_CODE", &outputs["exit-code"]);
    assert_eq!(gate.run("gate").status.code(), Some(0));
}

#[test]
fn bad_inputs_give_2_with_the_reason_and_chaos_s_own_2_is_passed_on() {
    // chaos refuses the partition: its 2 and its message are the step's.
    let mut job = Job::new("bad-partition");
    job.set("INPUT_PARTITION", "5/4").set("INPUT_SEEDS", "1");
    let ran = job.run("run");
    assert_eq!(job.outputs()["exit-code"], "2", "{}", log(&ran));
    assert!(log(&ran).contains("5/4"), "{}", log(&ran));
    assert!(job.step_summary().contains("**chaos exited 2**"));

    // The script's own refusals run nothing and say what to change.
    for (name, value, says) in [
        ("INPUT_ARGS", "--first-seed 'unclosed", "input 'args'"),
        ("INPUT_DENY_WARNINGS", "yes", "write true or false"),
        ("INPUT_SCENARIOS", "scenarios/x.toml", "remove scenarios"),
    ] {
        let mut job = Job::new("bad-input");
        job.set("INPUT_MERGE", "shard-*/report.json")
            .set(name, value);
        let ran = job.run("run");
        assert!(ran.status.success(), "{}", log(&ran));
        let outputs = job.outputs();
        assert_eq!(outputs["exit-code"], "2", "{name}: {}", log(&ran));
        assert_eq!(outputs["command"], "", "{name}: chaos did not run");
        assert!(log(&ran).contains(says), "{name}: {}", log(&ran));
        assert!(job.step_summary().contains(says));
    }
}

#[test]
fn shards_then_a_merge_step_give_the_whole_run_s_reports() {
    let job = Job::new("shards");
    for shard in ["1/2", "2/2"] {
        let mut step = Job::new("shard-step");
        step.dir = job.dir.clone();
        step.set("INPUT_SCENARIOS", "scenarios/lost-response-keyed.toml")
            .set("INPUT_TARGETS", "fresh-key")
            .set("INPUT_SEEDS", "4")
            .set("INPUT_PARTITION", shard)
            .set("INPUT_EMIT", "json")
            .set(
                "INPUT_OUT",
                &format!("shard-{}", shard.split('/').next().unwrap()),
            );
        let ran = step.run("run");
        let outputs = step.outputs();
        assert_eq!(outputs["exit-code"], "1", "{}", log(&ran));
        assert_eq!(outputs["whole"], "false");
        assert_eq!(
            outputs["artifact-name"],
            format!("chaos-shard-{}", shard.replace('/', "-of-"))
        );
        assert!(step
            .step_summary()
            .starts_with(&format!("### chaos, shard {shard}")));
    }
    let mut merge = Job::new("merge-step");
    merge.dir = job.dir.clone();
    merge.set("INPUT_MERGE", "shard-*/report.json");
    let ran = merge.run("run");
    let outputs = merge.outputs();
    assert_eq!(
        outputs["command"],
        "chaos merge shard-1/report.json shard-2/report.json --out chaos-report --emit json,junit,markdown,html,sarif"
    );
    assert_eq!(outputs["exit-code"], "1", "{}", log(&ran));
    assert_eq!(outputs["whole"], "true");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(job.dir.join("chaos-report/report.json")).unwrap())
            .unwrap();
    assert_eq!(report["cells"][0]["seeds_run"], 4, "{report}");
    assert!(!outputs["sarif"].is_empty());
}

/// One request the fake API received: method, path, Authorization, body.
type Request = (String, String, String, String);

/// A GitHub REST API for issue comments, enough for the script: it lists,
/// creates and updates comments, and records every request.
struct FakeGitHub {
    url: String,
    requests: Arc<Mutex<Vec<Request>>>,
}

impl FakeGitHub {
    fn start() -> FakeGitHub {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&requests);
        std::thread::spawn(move || {
            // An earlier comment by someone else, which must stay untouched.
            let mut comments = vec![serde_json::json!({"id": 1, "body": "LGTM"})];
            for stream in listener.incoming() {
                let mut stream = stream.unwrap();
                let request = common::HttpRequest::read(&stream);
                let authorization = request.header("authorization");
                let body = String::from_utf8(request.body).unwrap();
                let (method, path) = (request.method, request.path);
                let answer = match method.as_str() {
                    "GET" => serde_json::Value::from(comments.clone()),
                    "POST" => {
                        let text: serde_json::Value = serde_json::from_str(&body).unwrap();
                        let comment =
                            serde_json::json!({"id": 100 + comments.len(), "body": text["body"]});
                        comments.push(comment.clone());
                        comment
                    }
                    _ => {
                        let text: serde_json::Value = serde_json::from_str(&body).unwrap();
                        let id: u64 = path.rsplit('/').next().unwrap().parse().unwrap();
                        let comment = comments.iter_mut().find(|c| c["id"] == id).unwrap();
                        comment["body"] = text["body"].clone();
                        comment.clone()
                    }
                };
                recorded
                    .lock()
                    .unwrap()
                    .push((method, path, authorization, body));
                let answer = answer.to_string();
                write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                    answer.len()
                )
                .unwrap();
            }
        });
        FakeGitHub { url, requests }
    }

    fn take(&self) -> Vec<Request> {
        std::mem::take(&mut *self.requests.lock().unwrap())
    }
}

fn pull_request_job(name: &str, github: &FakeGitHub, seeds: &str) -> Job {
    let mut job = Job::new(name);
    let event = job.dir.join("event.json");
    std::fs::write(&event, r#"{"pull_request": {"number": 7}}"#).unwrap();
    job.set("GITHUB_EVENT_NAME", "pull_request")
        .set("GITHUB_EVENT_PATH", event.to_str().unwrap())
        .set("GITHUB_API_URL", &github.url)
        .set("GITHUB_REPOSITORY", "acme/payments")
        .set("GITHUB_SERVER_URL", "https://github.com")
        .set("GITHUB_RUN_ID", "42")
        .set("INPUT_GITHUB_TOKEN", "t0ken")
        .set("INPUT_SCENARIOS", "scenarios/lost-response-keyed.toml")
        .set("INPUT_TARGETS", "fresh-key")
        .set("INPUT_SEEDS", seeds);
    job
}

#[test]
fn the_pull_request_gets_one_comment_updated_on_every_push() {
    let github = FakeGitHub::start();
    let first = pull_request_job("comment-first", &github, "2");
    let ran = first.run("run");
    assert!(
        log(&ran).contains("pull request #7: created comment 101"),
        "{}",
        log(&ran)
    );
    let requests = github.take();
    let methods: Vec<(&str, &str)> = requests
        .iter()
        .map(|(method, path, _, _)| (method.as_str(), path.as_str()))
        .collect();
    assert_eq!(
        methods,
        [
            (
                "GET",
                "/repos/acme/payments/issues/7/comments?per_page=100&page=1"
            ),
            ("POST", "/repos/acme/payments/issues/7/comments"),
        ]
    );
    assert!(requests.iter().all(|request| request.2 == "Bearer t0ken"));
    let body: serde_json::Value = serde_json::from_str(&requests[1].3).unwrap();
    let body = body["body"].as_str().unwrap();
    let summary = std::fs::read_to_string(first.dir.join("chaos-report/summary.md")).unwrap();
    assert!(body.starts_with("<!-- chaos-action: chaos -->\n"), "{body}");
    assert!(body.contains(summary.trim_end()), "{body}");
    assert!(body.contains("(https://github.com/acme/payments/actions/runs/42)"));

    // The next push: the same comment, with the new run's summary.
    let second = pull_request_job("comment-second", &github, "3");
    let ran = second.run("run");
    assert!(
        log(&ran).contains("pull request #7: updated comment 101"),
        "{}",
        log(&ran)
    );
    let requests = github.take();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(
        (requests[1].0.as_str(), requests[1].1.as_str()),
        ("PATCH", "/repos/acme/payments/issues/comments/101")
    );
    assert!(requests[1].3.contains("3/3"), "{}", requests[1].3);

    // Another chaos job on the same pull request keeps its own comment.
    let mut other = pull_request_job("comment-other", &github, "1");
    other.set("INPUT_COMMENT_TAG", "chaos-live");
    assert!(log(&other.run("run")).contains("created comment 102"));
    github.take();

    // A shard's part, or `comment: false`, comments nothing.
    let mut shard = pull_request_job("comment-shard", &github, "2");
    shard.set("INPUT_PARTITION", "1/2");
    shard.run("run");
    let mut quiet = pull_request_job("comment-quiet", &github, "2");
    quiet.set("INPUT_COMMENT", "false");
    quiet.run("run");
    assert_eq!(github.take(), []);
}

#[test]
fn a_comment_that_cannot_be_posted_is_a_warning_not_a_failure() {
    // Nothing listens here: the token of a fork, a network down.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let github = FakeGitHub {
        url,
        requests: Arc::default(),
    };
    let job = pull_request_job("comment-down", &github, "1");
    let ran = job.run("run");
    assert!(ran.status.success(), "{}", log(&ran));
    assert!(
        log(&ran).contains("::warning::chaos could not comment on pull request #7"),
        "{}",
        log(&ran)
    );
    assert_eq!(job.outputs()["exit-code"], "1");
}

fn action_yml() -> Yaml {
    let text = std::fs::read_to_string(common::repo_root().join("action.yml")).unwrap();
    YamlLoader::load_from_str(&text)
        .expect("action.yml is YAML")
        .remove(0)
}

/// Every `${{ inputs.NAME }}` (or `inputs.NAME` inside a longer expression).
fn inputs_used(text: &str) -> BTreeSet<String> {
    text.match_indices("inputs.")
        .map(|(at, _)| {
            text[at + "inputs.".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                .collect()
        })
        .collect()
}

#[test]
fn action_yml_declares_and_wires_every_input_the_script_reads() {
    let action = action_yml();
    assert_eq!(action["runs"]["using"].as_str(), Some("composite"));
    let declared: BTreeSet<String> = action["inputs"]
        .as_hash()
        .unwrap()
        .keys()
        .map(|key| key.as_str().unwrap().to_string())
        .collect();

    let listed = Command::new("python3")
        .arg(script())
        .arg("inputs")
        .output()
        .unwrap();
    let read: BTreeMap<String, String> = serde_json::from_slice(&listed.stdout).unwrap();
    let steps = action["runs"]["steps"].as_vec().unwrap();
    let run_step = steps
        .iter()
        .find(|step| step["id"].as_str() == Some("run"))
        .unwrap();
    for (input, variable) in &read {
        assert!(declared.contains(input), "action.yml lacks input {input}");
        assert_eq!(
            run_step["env"][variable.as_str()].as_str(),
            Some(format!("${{{{ inputs.{input} }}}}").as_str()),
            "the run step maps {variable} from inputs.{input}"
        );
    }

    // Every input declared is used, and every input used is declared.
    let text = std::fs::read_to_string(common::repo_root().join("action.yml")).unwrap();
    let runs_part = &text[text.find("\nruns:").unwrap()..];
    assert_eq!(inputs_used(runs_part), declared);

    for step in steps {
        // No expression is spliced into a shell line: inputs go through env.
        if let Some(run) = step["run"].as_str() {
            assert!(
                !run.contains("${{"),
                "a run: line holds an expression: {run}"
            );
            assert_eq!(step["shell"].as_str(), Some("bash"));
        }
        // Third-party actions are pinned to a release.
        if let Some(uses) = step["uses"].as_str() {
            let (_, version) = uses.split_once('@').expect("pinned");
            assert!(
                version.starts_with('v') && version[1..].parse::<u32>().is_ok(),
                "{uses}"
            );
        }
    }

    // The outputs are the ones the script writes.
    let written = {
        let mut job = Job::new("outputs");
        job.set("INPUT_SEEDS", "1")
            .set("INPUT_SCENARIOS", "scenarios/lost-response-keyed.toml")
            .set("INPUT_TARGETS", "runtime-ledger");
        job.run("run");
        job.outputs()
    };
    for (name, output) in action["outputs"].as_hash().unwrap() {
        let value = output["value"].as_str().unwrap();
        let name = name.as_str().unwrap();
        assert_eq!(value, format!("${{{{ steps.run.outputs.{name} }}}}"));
        assert!(written.contains_key(name), "the script never writes {name}");
    }
}

#[test]
fn the_cache_key_names_the_version_and_the_install_folder() {
    let mut job = Job::new("key");
    job.set("RUNNER_OS", "Linux")
        .set("RUNNER_ARCH", "X64")
        .set("RUNNER_TOOL_CACHE", "/opt/hostedtoolcache");
    let ran = job.run("key");
    assert!(ran.status.success(), "{}", log(&ran));
    let outputs = job.outputs();
    let key = &outputs["key"];
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        key.starts_with(&format!("chaos-{version}-Linux-X64-")),
        "{key}"
    );
    assert_eq!(
        outputs["root"],
        format!("/opt/hostedtoolcache/chaos-action/{key}")
    );
    // The same sources give the same key.
    assert!(job.run("key").status.success());
    assert_eq!(&job.outputs()["key"], key);
}

/// docs/github-actions.yml uses the action: shards with `partition`, a merge
/// job with `merge`, and only inputs the action has.
#[test]
fn the_github_actions_example_uses_the_action_s_real_inputs() {
    let declared: BTreeSet<String> = action_yml()["inputs"]
        .as_hash()
        .unwrap()
        .keys()
        .map(|key| key.as_str().unwrap().to_string())
        .collect();
    let text =
        std::fs::read_to_string(common::repo_root().join("docs/github-actions.yml")).unwrap();
    let workflow = YamlLoader::load_from_str(&text).unwrap().remove(0);
    let mut used = BTreeMap::new();
    for (job, body) in workflow["jobs"].as_hash().unwrap() {
        for step in body["steps"].as_vec().unwrap() {
            let Some(uses) = step["uses"].as_str() else {
                continue;
            };
            if !uses.starts_with("OWNER/chaos@") {
                continue;
            }
            let with: BTreeSet<String> = step["with"]
                .as_hash()
                .unwrap()
                .keys()
                .map(|key| key.as_str().unwrap().to_string())
                .collect();
            let unknown: Vec<&String> = with.difference(&declared).collect();
            assert!(unknown.is_empty(), "action.yml has no input {unknown:?}");
            used.insert(job.as_str().unwrap().to_string(), step["with"].clone());
        }
    }
    assert_eq!(used.len(), 2, "a shard job and a merge job use the action");
    let shard = &used["shard"];
    assert_eq!(shard["partition"].as_str(), Some("${{ matrix.shard }}/4"));
    assert_eq!(shard["allowed-exit-codes"].as_str(), Some("0,1"));
    assert_eq!(
        workflow["jobs"]["shard"]["strategy"]["matrix"]["shard"]
            .as_vec()
            .map(Vec::len),
        Some(4)
    );
    let merge = &used["merge"];
    assert!(merge["merge"].as_str().unwrap().contains("report.json"));
    // Each shard's artifact is what the merge job downloads.
    assert!(text.contains("pattern: chaos-shard-*"), "{text}");
}
