//! The broker way in, live (issue 25): the agent's calls are messages on a
//! real RabbitMQ queue (127.0.0.1:5672, guest/guest) or NATS JetStream stream
//! (127.0.0.1:4222) that chaos creates for the run, taken by a real consumer
//! process: `examples/rabbitmq-consumer` (pika) and
//! `examples/jetstream-consumer` (nats.js); each `setup` installs the pinned
//! packages, run here when missing.
//!
//! Done when the naive consumer fails `duplicate-effect` where the broker
//! itself delivered a message again, the consumer with an inbox passes, every
//! fault acted, and the broker is left with no queue of the run.

mod common;

use std::path::Path;
use std::process::Command;

use chaos::report::Summary;
use chaos::{Check, Scenario, Status, Target};

const INBOX: &str = "examples/rabbitmq-consumer/target.toml";
const NAIVE: &str = "examples/rabbitmq-consumer/naive.target.toml";
const JETSTREAM_INBOX: &str = "examples/jetstream-consumer/target.toml";
const JETSTREAM_NAIVE: &str = "examples/jetstream-consumer/naive.target.toml";

fn setup(example: &str) {
    let setup = common::repo_root().join(example).join("setup");
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

fn target(relative: &str) -> Target {
    setup(Path::new(relative).parent().unwrap().to_str().unwrap());
    let path = common::repo_root().join(relative);
    chaos::resolve(path.to_str().unwrap(), Path::new("unused"))
        .unwrap_or_else(|error| panic!("{error}"))
}

/// Every `scenarios/queue/*.toml`, with the paths a user would write.
fn queue_scenarios() -> Vec<Scenario> {
    let mut scenarios = common::scenarios_in(&common::scenarios_dir().join("queue"));
    for scenario in &mut scenarios {
        scenario.path = format!("scenarios/queue/{}.toml", scenario.name).into();
    }
    scenarios
}

fn run(scenarios: &[Scenario], target: &Target, seeds: u64) -> Summary {
    common::sweep_target(scenarios, target, seeds)
}

fn verdicts(summary: &Summary) -> String {
    summary
        .cells
        .iter()
        .map(|cell| {
            format!(
                "{}: {:?} {} faults: {:?}",
                cell.scenario,
                cell.verdict,
                cell.reason.as_deref().unwrap_or(""),
                cell.faults_lines()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The queues on the broker that this process's runs created (their names
/// end with its pid), as `rabbitmqctl` lists them.
fn queues_left() -> Vec<String> {
    let output = Command::new("rabbitmqctl")
        .args(["list_queues", "name", "--quiet", "--no-table-headers"])
        .output()
        .expect("rabbitmqctl runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let pid = format!("-{}", std::process::id());
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::trim)
        .filter(|name| name.contains(".chaos-") && name.ends_with(&pid))
        .map(str::to_owned)
        .collect()
}

/// The streams on the NATS server that this process's runs created.
fn streams_left() -> Vec<String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let pid = format!("-{}", std::process::id());
    runtime.block_on(async {
        use futures_util::StreamExt;
        let client = async_nats::connect("127.0.0.1:4222")
            .await
            .expect("NATS runs");
        let js = async_nats::jetstream::new(client);
        let mut names = js.stream_names();
        let mut left = Vec::new();
        while let Some(name) = names.next().await {
            let name = name.expect("stream names");
            if name.contains("-chaos-") && name.ends_with(&pid) {
                left.push(name);
            }
        }
        left
    })
}

fn assert_every_fault_acted(summary: &Summary) {
    for cell in &summary.cells {
        assert_eq!(
            cell.seeds_all_faults_acted,
            cell.seeds_run,
            "{}: a fault did not act: {}",
            cell.scenario,
            verdicts(summary)
        );
        assert!(cell.seeds_run > 0, "{}", verdicts(summary));
    }
}

/// The naive consumer fails `duplicate-effect` in each of `redelivered`,
/// naming delivery 2 of the message; the one with an inbox passes every
/// queue scenario; every fault acted.
fn naive_fails_where_redelivered_inbox_passes(naive: &str, inbox: &str, redelivered: &[&str]) {
    let scenarios = queue_scenarios();
    assert!(!scenarios.is_empty());

    let summary = run(&scenarios, &target(naive), 2);
    assert_every_fault_acted(&summary);
    for scenario in redelivered {
        let cell = summary
            .cells
            .iter()
            .find(|cell| cell.scenario == *scenario)
            .expect("the scenario ran");
        assert_eq!(cell.verdict, Status::Fail, "{}", verdicts(&summary));
        assert_eq!(cell.seeds_failed, 2, "{}", verdicts(&summary));
        for failure in &cell.failures {
            let finding = failure
                .findings
                .iter()
                .find(|finding| finding.check == Check::DuplicateEffect)
                .unwrap_or_else(|| panic!("seed {}: {:?}", failure.seed, failure.checks()));
            assert!(
                finding
                    .message
                    .contains("from delivery 2 of the same message"),
                "{scenario}: {}",
                finding.message
            );
        }
    }

    let summary = run(&scenarios, &target(inbox), 2);
    assert_every_fault_acted(&summary);
    for cell in &summary.cells {
        assert_eq!(cell.verdict, Status::Pass, "{}", verdicts(&summary));
    }
}

// guards: issue 25's done-when on RabbitMQ: the naive consumer charges
// again for a message the broker redelivered; the one with an inbox does not
#[test]
fn a_consumer_killed_before_its_ack_charges_twice_unless_it_keeps_an_inbox() {
    naive_fails_where_redelivered_inbox_passes(NAIVE, INBOX, &["consumer-killed-before-ack"]);
    assert!(queues_left().is_empty(), "left: {:?}", queues_left());
}

// guards: the same on JetStream, where the broker also redelivers when the
// ack deadline (AckWait, shortened) passes while the first consumer works
#[test]
fn on_jetstream_an_ack_deadline_passed_charges_twice_unless_the_consumer_keeps_an_inbox() {
    naive_fails_where_redelivered_inbox_passes(
        JETSTREAM_NAIVE,
        JETSTREAM_INBOX,
        &["consumer-killed-before-ack", "ack-deadline-passed"],
    );
    assert!(streams_left().is_empty(), "left: {:?}", streams_left());
}

// guards: a broker that is down is no verdict on the target: exit 3, and
// the message names the address
#[test]
fn a_broker_that_is_down_is_exit_3_naming_its_address() {
    setup("examples/rabbitmq-consumer");
    let dir = common::temp_dir("broker-down");
    let example = common::repo_root().join("examples/rabbitmq-consumer");
    std::fs::write(
        dir.join("target.toml"),
        format!(
            "name = \"down\"\ncommand = [\"{}/.venv/bin/python\", \"{}/consumer.py\"]\n[broker]\nkind = \"rabbitmq\"\nurl = \"amqp://guest:secret@127.0.0.1:1/%2f\"\nqueue = \"charges\"\n",
            example.display(),
            example.display()
        ),
    )
    .unwrap();
    let scenario = common::scenarios_dir().join("queue/consumer-killed-before-ack.toml");
    let output = common::chaos(&[
        "run",
        scenario.to_str().unwrap(),
        "--target",
        dir.join("target.toml").to_str().unwrap(),
    ]);
    let (stdout, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(3), "{stdout}\n{stderr}");
    let all = format!("{stdout}{stderr}");
    assert!(all.contains("127.0.0.1:1"), "{all}");
    assert!(!all.contains("secret"), "the password is masked: {all}");
}
