//! The broker way in, live (issue 25): the agent's calls are messages on a
//! real RabbitMQ queue (127.0.0.1:5672, guest/guest) or NATS JetStream stream
//! (127.0.0.1:4222) that chaos creates for the run, taken by a real consumer
//! process: `examples/rabbitmq-consumer` (pika),
//! `examples/jetstream-consumer` (nats.js) and `examples/celery-worker` (a
//! Celery worker with acks_late, the stripe SDK); each `setup` installs the
//! pinned packages, run here when missing.
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
const CELERY_INBOX: &str = "examples/celery-worker/target.toml";
const CELERY_NAIVE: &str = "examples/celery-worker/naive.target.toml";

use common::{example_target as target, setup_example as setup};

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

/// What the naive consumer does in a queue scenario.
enum Naive {
    /// Fails `duplicate-effect`, its second effect from delivery 2 of the
    /// message: the broker handed it out again.
    Redelivered,
    /// Fails `duplicate-effect`, its second effect from a second publish
    /// of the same message: the broker did not drop it.
    PublishedAgain,
    /// Passes: the broker itself kept the second effect from happening.
    Passes,
}

/// The naive consumer does in each scenario what `expected` says; the one
/// with an inbox passes every queue scenario; every fault acted.
fn naive_and_inbox(naive: &str, inbox: &str, expected: &[(&str, Naive)]) {
    let scenarios = queue_scenarios();
    assert!(!scenarios.is_empty());

    let summary = run(&scenarios, &target(naive), 2);
    assert_every_fault_acted(&summary);
    for (scenario, naive) in expected {
        let cell = summary
            .cells
            .iter()
            .find(|cell| cell.scenario == *scenario)
            .expect("the scenario ran");
        let named = match naive {
            Naive::Passes => {
                assert_eq!(cell.verdict, Status::Pass, "{}", verdicts(&summary));
                continue;
            }
            Naive::Redelivered => "from delivery 2 of the same message",
            Naive::PublishedAgain => {
                "of a second publish of the same message (published by attempt"
            }
        };
        assert_eq!(cell.verdict, Status::Fail, "{}", verdicts(&summary));
        assert_eq!(cell.seeds_failed, 2, "{}", verdicts(&summary));
        for failure in &cell.failures {
            let finding = failure
                .findings
                .iter()
                .find(|finding| finding.check == Check::DuplicateEffect)
                .unwrap_or_else(|| panic!("seed {}: {:?}", failure.seed, failure.checks()));
            assert!(
                finding.message.contains(named),
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
    naive_and_inbox(
        NAIVE,
        INBOX,
        &[
            ("consumer-killed-before-ack", Naive::Redelivered),
            ("provider-error-requeued", Naive::Redelivered),
            // RabbitMQ has no duplicate window: a message published again
            // is a second message, inside the window or past it.
            ("publish-confirm-lost-inside-window", Naive::PublishedAgain),
            ("publish-confirm-lost-past-window", Naive::PublishedAgain),
        ],
    );
    assert!(queues_left().is_empty(), "left: {:?}", queues_left());
}

// guards: the same on JetStream, where the broker also redelivers when the
// ack deadline (AckWait, shortened) passes while the first consumer works
#[test]
fn on_jetstream_an_ack_deadline_passed_charges_twice_unless_the_consumer_keeps_an_inbox() {
    naive_and_inbox(
        JETSTREAM_NAIVE,
        JETSTREAM_INBOX,
        &[
            ("consumer-killed-before-ack", Naive::Redelivered),
            ("ack-deadline-passed", Naive::Redelivered),
            ("provider-error-requeued", Naive::Redelivered),
            // Issue 25's duplicate window: one effect inside it for a
            // consumer with no dedup of its own, two past it.
            ("publish-confirm-lost-inside-window", Naive::Passes),
            ("publish-confirm-lost-past-window", Naive::PublishedAgain),
        ],
    );
    assert!(streams_left().is_empty(), "left: {:?}", streams_left());
}

// guards: issue 25's Celery example: a stock Celery worker with acks_late
// takes chaos's task messages (protocol v2) and answers through the rpc://
// result backend; its naive task charges again for the message RabbitMQ
// redelivered after the worker died before its late ack, and for a second
// publish; the task with an inbox passes every queue scenario
#[test]
fn a_celery_worker_with_acks_late_charges_twice_unless_its_task_keeps_an_inbox() {
    naive_and_inbox(
        CELERY_NAIVE,
        CELERY_INBOX,
        &[
            ("consumer-killed-before-ack", Naive::Redelivered),
            ("publish-confirm-lost-inside-window", Naive::PublishedAgain),
            ("publish-confirm-lost-past-window", Naive::PublishedAgain),
        ],
    );
    assert!(queues_left().is_empty(), "left: {:?}", queues_left());
}

/// The scenario of `scenarios/queue/` named `name`.
fn queue_scenario(name: &str) -> Scenario {
    queue_scenarios()
        .into_iter()
        .find(|scenario| scenario.name == name)
        .unwrap_or_else(|| panic!("scenarios/queue/{name}.toml"))
}

// guards: the naive JetStream consumer's pass inside the window is the
// broker's doing: the producer did publish again, JetStream answered the
// second publish as a duplicate of the same Nats-Msg-Id, and one effect
// happened; past the window (shortened for the run, and waited out) the
// same second publish reached the consumer and charged again
#[test]
fn jetstream_drops_a_second_publish_inside_its_duplicate_window_and_takes_it_past() {
    let naive = target(JETSTREAM_NAIVE);

    let inside = queue_scenario("publish-confirm-lost-inside-window");
    let judged = chaos::judge(&inside, &naive, 0);
    let run = judged.run.as_ref().expect("the trial ran");
    assert_eq!(judged.verdict.status, Status::Pass, "{:?}", judged.verdict);
    assert_eq!(run.ledger.effects.len(), 1, "{:?}", run.ledger);
    assert_eq!(run.history.attempts.len(), 2, "{:?}", run.history.attempts);
    let second = run.history.attempts[1]
        .answer()
        .expect("the broker answered the second publish");
    assert!(
        second
            .reason
            .as_deref()
            .is_some_and(|why| why.contains("dropped by the broker as a duplicate")),
        "{second:?}"
    );

    let past = queue_scenario("publish-confirm-lost-past-window");
    let judged = chaos::judge(&past, &naive, 0);
    let run = judged.run.as_ref().expect("the trial ran");
    assert_eq!(judged.verdict.status, Status::Fail, "{:?}", judged.verdict);
    assert_eq!(run.ledger.effects.len(), 2, "{:?}", run.ledger);
    // The jump was waited out past the stream's window, shortened for the run.
    assert!(
        run.history.faults.iter().any(|event| event
            .description
            .contains("the broker's duplicate window (500ms for this run)")),
        "{:?}",
        run.history.faults
    );
    // The broker's view: two messages, each delivered once.
    let messages: Vec<_> = run
        .ledger
        .dispatches
        .iter()
        .map(|dispatch| (dispatch.message.clone(), dispatch.delivery))
        .collect();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_ne!(messages[0].0, messages[1].0, "{messages:?}");
    assert!(
        messages
            .iter()
            .all(|(message, delivery)| message.is_some() && *delivery == Some(1)),
        "{messages:?}"
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

/// Polls `done` every 250 ms for up to `limit`; whether it came true.
fn within(limit: std::time::Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    done()
}

/// Runs `scenario` for `seeds` seeds against the target file `file`, its
/// reports in [`common::live_out`]; the run must exit `exit`. The report's
/// first cell.
fn first_cell(
    dir: &Path,
    scenario: &str,
    file: &Path,
    seeds: &str,
    exit: i32,
) -> serde_json::Value {
    let (code, stdout, stderr, report) = common::run_live(dir, &[scenario], file, seeds, &[]);
    assert_eq!(code, Some(exit), "{stdout}\n{stderr}");
    report["cells"][0].clone()
}

/// Whether RabbitMQ has the queue `name`, asked over AMQP with a passive
/// declare: in milliseconds, where `rabbitmqctl` takes a second or more to
/// start under load, longer than the queue's lease after a SIGKILL; and a
/// passive declare does not renew a quorum queue's `x-expires` lease.
fn queue_exists(name: &str) -> bool {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        use lapin::options::QueueDeclareOptions;
        let connection = lapin::Connection::connect(
            "amqp://guest:guest@127.0.0.1:5672/%2f",
            lapin::ConnectionProperties::default(),
        )
        .await
        .expect("RabbitMQ runs");
        let channel = connection.create_channel().await.expect("a channel");
        let there = channel
            .queue_declare(
                name.into(),
                QueueDeclareOptions {
                    passive: true,
                    ..QueueDeclareOptions::default()
                },
                lapin::types::FieldTable::default(),
            )
            .await
            .is_ok();
        let _ = connection.close(200, "test: looked".into()).await;
        there
    })
}

/// Every stream on the NATS server, by name.
fn all_streams() -> Vec<String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        use futures_util::StreamExt;
        let client = async_nats::connect("127.0.0.1:4222")
            .await
            .expect("NATS runs");
        let js = async_nats::jetstream::new(client);
        let mut names = js.stream_names();
        let mut all = Vec::new();
        while let Some(name) = names.next().await {
            all.push(name.expect("stream names"));
        }
        all
    })
}

/// A target file for `example`'s naive worker named `name`, with `extra`
/// lines in its `[broker]` table.
fn naive_file(dir: &Path, example: &str, name: &str, extra: &str) -> std::path::PathBuf {
    variant_file(
        dir,
        example,
        "naive.target.toml",
        name,
        &[("[broker]", extra)],
    )
}

/// A copy of `example`'s target file `base` named `name`, with lines added
/// at the top of the tables named (`("[env]", "X = \"1\"")`).
fn variant_file(
    dir: &Path,
    example: &str,
    base: &str,
    name: &str,
    extra: &[(&str, &str)],
) -> std::path::PathBuf {
    let base = std::fs::read_to_string(common::repo_root().join(example).join(base)).unwrap();
    let workdir = common::repo_root().join(example);
    let mut text = String::new();
    for line in base.lines() {
        if line.starts_with("name = ") {
            text.push_str(&format!("name = \"{name}\"\n"));
        } else if line.starts_with("build = ") {
            // Set up already; its files are the example's.
            text.push_str(&format!("workdir = \"{}\"\n", workdir.display()));
        } else {
            text.push_str(line);
            text.push('\n');
            for (table, lines) in extra {
                if line == *table && !lines.is_empty() {
                    text.push_str(lines);
                    text.push('\n');
                }
            }
        }
    }
    let path = dir.join(format!("{name}.target.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

// guards: issue 25's "nothing left on the broker after a run that was
// SIGKILLed": no handler sees a SIGKILL of chaos, so its consumer dies by
// its parent-death signal and the RabbitMQ queue, unused, is deleted by the
// broker once its x-expires has passed (2s here); JetStream has no stream
// that expires, so the next run that prepares a JetStream target deletes the
// stream whose chaos is gone
#[test]
fn a_sigkilled_run_leaves_nothing_on_either_broker() {
    setup("examples/rabbitmq-consumer");
    setup("examples/jetstream-consumer");
    let dir = common::temp_dir("broker-sigkill");
    let scenario = "scenarios/queue/ack-deadline-passed.toml";

    let rabbit = naive_file(
        &dir,
        "examples/rabbitmq-consumer",
        "sigkilled",
        "expires = \"2s\"",
    );
    let mut chaos = common::chaos_command()
        .args([
            "run",
            scenario,
            "--target",
            rabbit.to_str().unwrap(),
            "--seeds",
            "50",
        ])
        .args(["--out", dir.join("rabbit").to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("chaos starts");
    let queue = format!("charges.chaos-sigkilled-{}", chaos.id());
    let made = within(std::time::Duration::from_secs(60), || queue_exists(&queue));
    // Mid-run: the queue exists and a trial is under way; longer than the
    // lease, which chaos keeps while it waits for a consumer.
    std::thread::sleep(std::time::Duration::from_secs(3));
    chaos.kill().expect("SIGKILL");
    chaos.wait().unwrap();
    assert!(made, "the run never made {queue}");
    assert!(
        queue_exists(&queue),
        "{queue} is there right after the SIGKILL"
    );
    let gone = within(std::time::Duration::from_secs(20), || !queue_exists(&queue));
    assert!(gone, "{queue} outlived its x-expires");

    let jet = naive_file(&dir, "examples/jetstream-consumer", "sigkilled-js", "");
    let mut chaos = common::chaos_command()
        .args([
            "run",
            scenario,
            "--target",
            jet.to_str().unwrap(),
            "--seeds",
            "50",
        ])
        .args(["--out", dir.join("jet").to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("chaos starts");
    let stream = format!("charges-chaos-sigkilled-js-{}", chaos.id());
    let made = within(std::time::Duration::from_secs(60), || {
        all_streams().contains(&stream)
    });
    std::thread::sleep(std::time::Duration::from_secs(2));
    chaos.kill().expect("SIGKILL");
    chaos.wait().unwrap();
    assert!(made, "the run never made {stream}: {:?}", all_streams());
    assert!(
        all_streams().contains(&stream),
        "{stream} is there right after the SIGKILL"
    );
    // The next run that prepares a JetStream target deletes it.
    let output = common::chaos(&[
        "run",
        scenario,
        "--target",
        jet.to_str().unwrap(),
        "--seeds",
        "1",
        "--out",
        dir.join("next").to_str().unwrap(),
    ]);
    let (stdout, stderr) = common::text(&output);
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "{stdout}\n{stderr}"
    );
    assert!(
        !all_streams().contains(&stream),
        "{stream} outlived the next run: {:?}",
        all_streams()
    );
}

// guards: a consumer slower to start than the run queue's `x-expires`
// lease still finds its queue. Of what a client can do, only a consumer or
// a `basic.get` keeps a quorum queue's lease (a declare, a purge, a publish
// do not), so chaos renews it with an empty `basic.get` while it waits for
// the consumer. Without that, the broker deletes the queue 2s after chaos
// declared it, this worker's `basic_consume` fails on a missing queue, and
// the run is exit 3; with it, the worker's inbox holds the requeued
// message to one charge and the provider error acted
#[test]
fn a_consumer_slower_to_start_than_the_queue_lease_still_finds_its_queue() {
    setup("examples/rabbitmq-consumer");
    let dir = common::temp_dir("broker-slow-start");
    let file = variant_file(
        &dir,
        "examples/rabbitmq-consumer",
        "target.toml",
        "slow-start",
        &[("[broker]", "expires = \"2s\"")],
    );
    let text = std::fs::read_to_string(&file).unwrap();
    let text = text
        .lines()
        .map(|line| {
            if line.starts_with("command = ") {
                "command = [\"sh\", \"-c\", \"sleep 8; exec .venv/bin/python consumer.py\"]"
                    .to_owned()
            } else if line.starts_with("ready-timeout = ") {
                "ready-timeout = \"40s\"".to_owned()
            } else {
                line.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(text.contains("sleep 8"), "{text}");
    std::fs::write(&file, text).unwrap();
    let cell = first_cell(
        &dir,
        "scenarios/queue/provider-error-requeued.toml",
        &file,
        "1",
        0,
    );
    assert_eq!(cell["verdict"], "pass", "{cell}");
    assert_eq!(cell["seeds_all_faults_acted"], 1, "{cell}");
    assert!(queues_left().is_empty(), "left: {:?}", queues_left());
}

// guards: issue 25's bad input: `create = false` names a queue (a stream)
// that does not exist; nothing can be tested (exit 3), and the message names
// it and how to fix the file (JetStream also lists the streams that exist)
#[test]
fn a_queue_that_does_not_exist_is_exit_3_naming_it() {
    setup("examples/rabbitmq-consumer");
    setup("examples/jetstream-consumer");
    let dir = common::temp_dir("broker-missing");
    let scenario = "scenarios/queue/consumer-killed-before-ack.toml";
    for (example, name, missing) in [
        (
            "examples/rabbitmq-consumer",
            "missing",
            "queue 'no-such-queue-of-chaos' does not exist on RabbitMQ",
        ),
        (
            "examples/jetstream-consumer",
            "missing-js",
            "stream 'no-such-queue-of-chaos' does not exist on NATS",
        ),
    ] {
        let file = naive_file(&dir, example, name, "create = false");
        let text = std::fs::read_to_string(&file)
            .unwrap()
            .replace("queue = \"charges\"", "queue = \"no-such-queue-of-chaos\"");
        std::fs::write(&file, text).unwrap();
        let output = common::chaos(&["run", scenario, "--target", file.to_str().unwrap()]);
        let (stdout, stderr) = common::text(&output);
        assert_eq!(output.status.code(), Some(3), "{stdout}\n{stderr}");
        let all = format!("{stdout}{stderr}");
        assert!(all.contains(missing), "{all}");
        assert!(all.contains("create = true"), "{all}");
    }
}

// guards: issue 25's bad input "a consumer that never acks (bounded; the
// cell says the message is still unacked)": a worker that charges and then
// neither answers nor acks leaves the cell unknown (exit 3), and its reason,
// in every report format, is the broker's own view of the message: which
// one (the attempt that published it), how often it was delivered, how
// long ago it was published; read on RabbitMQ over AMQP once the consumer
// stopped (the broker put it back, redelivered, x-delivery-count), on
// JetStream from the consumer's info (num_ack_pending, num_redelivered)
#[test]
fn a_consumer_that_never_acks_is_unknown_and_the_cell_names_the_unacked_message() {
    setup("examples/rabbitmq-consumer");
    setup("examples/jetstream-consumer");
    let dir = common::temp_dir("broker-never-acks");
    // The consumer is SIGKILLed after its first charge and restarted: the
    // broker delivers the message to it again, and it never acks either.
    let scenario = "scenarios/queue/consumer-killed-before-ack.toml";
    for (example, name, said) in [
        (
            "examples/rabbitmq-consumer",
            "never-acks",
            vec![
                "the consumer answered none of its 8 attempt(s)",
                "still unacked on RabbitMQ: message att-0-1-1-1 (published ",
                "delivered 2 time(s) and never acked, the broker put it back in queue 'charges.chaos-never-acks-",
                "7 more of its messages were never taken",
            ],
        ),
        (
            "examples/jetstream-consumer",
            "never-acks-js",
            vec![
                "the consumer answered none of its 8 attempt(s)",
                "at stream sequence 1 is still unacked on JetStream: consumer 'charges-chaos-never-acks-js-",
                "delivered it more than once (num_ack_pending 1, num_redelivered 1)",
            ],
        ),
    ] {
        let file = variant_file(
            &dir,
            example,
            "target.toml",
            name,
            &[("[env]", "CONSUMER_ACKS = \"never\"")],
        );
        let out = common::live_out(&dir, &file);
        let cell = first_cell(&dir, scenario, &file, "1", 3);
        assert_eq!(cell["verdict"], "unknown", "{cell}");
        let reason = cell["reason"].as_str().unwrap_or_default().to_owned();
        // The message is the one the first attempt published.
        let first = "message att-0-1-1-1 (published ";
        for text in said.iter().chain([&first]) {
            assert!(reason.contains(text), "{name}: {text:?} not in {reason}");
        }
        // The same reason in the other formats.
        for file in ["summary.md", "junit.xml", "report.html"] {
            let written = std::fs::read_to_string(out.join(file)).unwrap();
            assert!(
                written.contains("still unacked on") && written.contains("att-0-1-1-1"),
                "{name}: {file} does not say it: {written}"
            );
        }
        // One effect: the restarted consumer's inbox kept the second
        // delivery from charging again; the fault acted.
        assert_eq!(cell["seeds_all_faults_acted"], 1, "{cell}");
    }
    assert!(queues_left().is_empty(), "left: {:?}", queues_left());
    assert!(streams_left().is_empty(), "left: {:?}", streams_left());
}

// guards: issue 25's bad input "a message the consumer rejects as
// malformed": the model's drifted amount (4999.0) reaches a consumer that
// validates its input (a whole number of cents) and rejects it without
// requeue (JetStream: term). The cell is unknown (exit 3), and its reason
// says the consumer rejected which message at which delivery without
// acting on it, read from the broker: on RabbitMQ the run queue's
// dead-letter queue (x-death), on JetStream the MSG_TERMINATED advisory
#[test]
fn a_message_the_consumer_rejects_as_malformed_is_named_in_the_cell() {
    setup("examples/rabbitmq-consumer");
    setup("examples/jetstream-consumer");
    let dir = common::temp_dir("broker-rejected");
    let scenario = dir.join("drifted-amount.toml");
    std::fs::write(
        &scenario,
        "test = \"provider-contract\"\ndescription = \"the model writes the amount as 4999.0\"\ninvariant = \"a malformed message is rejected without an effect\"\nboundary = \"accepted-request\"\n\n[provider]\nprofile = \"keyed\"\nretention = \"24h\"\n\n[workload]\nfree-text-field = \"note\"\n\n[[call]]\noperation = \"reminder\"\nattempts = 2\npayload = \"drifted\"\n\n[expect]\neffects-per-operation = 1\n",
    )
    .unwrap();
    for (example, name, said) in [
        (
            "examples/rabbitmq-consumer",
            "rejects",
            "RabbitMQ dead-lettered it (x-death reason 'rejected') to queue 'charges.chaos-rejected-rejects-",
        ),
        (
            "examples/jetstream-consumer",
            "rejects-js",
            "JetStream announced it terminated (stream sequence 1",
        ),
    ] {
        let file = naive_file(&dir, example, name, "");
        // Five seeds, as a live run has unless told.
        let cell = first_cell(&dir, scenario.to_str().unwrap(), &file, "5", 3);
        assert_eq!(cell["verdict"], "unknown", "{cell}");
        let reason = cell["reason"].as_str().unwrap_or_default().to_owned();
        for text in [
            "the consumer rejected message att-0-1-1-1 (delivery 1) without acting on it",
            said,
        ] {
            assert!(reason.contains(text), "{name}: {text:?} not in {reason}");
        }
        // The consumer said why (its stderr's last lines are in the
        // reason), and the provider saw nothing.
        assert!(
            reason.contains("rejected a malformed message: amount_cents is 4999.0"),
            "{name}: {reason}"
        );
        assert_eq!(cell["effects_observed_max"], 0, "{cell}");
    }
    assert!(queues_left().is_empty(), "left: {:?}", queues_left());
    assert!(streams_left().is_empty(), "left: {:?}", streams_left());
}
