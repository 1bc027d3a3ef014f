//! The broker way in, live (issue 25): the agent's calls are messages on a
//! real RabbitMQ queue (127.0.0.1:5672, guest/guest) that chaos creates for
//! the run, taken by a real consumer process, `examples/rabbitmq-consumer`
//! (pika; its `setup` installs the pinned packages, run here when missing).
//!
//! Done when the naive consumer fails `duplicate-effect` where the broker
//! itself delivered a message again, the consumer with an inbox passes, every
//! fault acted, and the broker is left with no queue of the run.

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::atomic::AtomicBool;

use chaos::report::Summary;
use chaos::{Check, Scenario, Seeds, Status, Sweep, Target};

const INBOX: &str = "examples/rabbitmq-consumer/target.toml";
const NAIVE: &str = "examples/rabbitmq-consumer/naive.target.toml";

fn setup() {
    let setup = common::repo_root().join("examples/rabbitmq-consumer/setup");
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
    setup();
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

// guards: issue 25's done-when on RabbitMQ: the naive consumer charges
// again for a message the broker redelivered; the one with an inbox does not
#[test]
fn a_consumer_killed_before_its_ack_charges_twice_unless_it_keeps_an_inbox() {
    let scenarios = queue_scenarios();
    assert!(!scenarios.is_empty());

    let naive = run(&scenarios, &target(NAIVE), 2);
    assert_every_fault_acted(&naive);
    let killed = naive
        .cells
        .iter()
        .find(|cell| cell.scenario == "consumer-killed-before-ack")
        .expect("the scenario ran");
    assert_eq!(killed.verdict, Status::Fail, "{}", verdicts(&naive));
    for failure in &killed.failures {
        assert!(
            failure.checks().contains(&Check::DuplicateEffect),
            "seed {}: {:?}",
            failure.seed,
            failure.checks()
        );
    }
    assert!(queues_left().is_empty(), "left: {:?}", queues_left());

    let inbox = run(&scenarios, &target(INBOX), 2);
    assert_every_fault_acted(&inbox);
    for cell in &inbox.cells {
        assert_eq!(cell.verdict, Status::Pass, "{}", verdicts(&inbox));
    }
    assert!(queues_left().is_empty(), "left: {:?}", queues_left());
}

// guards: a broker that is down is no verdict on the target: exit 3, and
// the message names the address
#[test]
fn a_broker_that_is_down_is_exit_3_naming_its_address() {
    setup();
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
