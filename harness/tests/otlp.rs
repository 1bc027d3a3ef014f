//! `--otlp` (issue 28 item 4): each trial as a trace, received here by a
//! small OTLP/HTTP collector that decodes what arrived (protobuf from chaos,
//! JSON from a target's own exporter) and checks the tree; and, live, a
//! target's own span joined to the attempt that called it.

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

/// What a collector received: every span, with the service that sent it.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<(String, Span)>>>);

impl Received {
    fn spans(&self) -> Vec<(String, Span)> {
        self.0.lock().unwrap().clone()
    }
}

/// Adds every span of `request`, named by its resource's `service.name`.
fn add(received: &Received, request: ExportTraceServiceRequest) {
    let mut spans = received.0.lock().unwrap();
    for resource in request.resource_spans {
        let service = resource
            .resource
            .iter()
            .flat_map(|resource| &resource.attributes)
            .find(|attribute| attribute.key == "service.name")
            .and_then(
                |attribute| match attribute.value.as_ref()?.value.as_ref()? {
                    Value::StringValue(name) => Some(name.clone()),
                    _ => None,
                },
            )
            .unwrap_or_default();
        for scope in resource.scope_spans {
            for span in scope.spans {
                spans.push((service.clone(), span));
            }
        }
    }
}

/// An OTLP/HTTP collector on a free port: POST /v1/traces, protobuf or JSON.
fn collector() -> (String, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1/traces", listener.local_addr().unwrap());
    let received = Received::default();
    let into = received.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let into = into.clone();
            std::thread::spawn(move || {
                let mut stream = stream.unwrap();
                let http = common::HttpRequest::read(&stream);
                assert_eq!(
                    (http.method.as_str(), http.path.as_str()),
                    ("POST", "/v1/traces")
                );
                let (content_type, body) = (http.header("content-type"), http.body);
                let request = if content_type == "application/json" {
                    serde_json::from_slice(&body).expect("OTLP JSON")
                } else {
                    assert_eq!(content_type, "application/x-protobuf");
                    ExportTraceServiceRequest::decode(body.as_slice()).expect("OTLP protobuf")
                };
                add(&into, request);
                write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                )
                .unwrap();
            });
        }
    });
    (url, received)
}

fn attribute(span: &Span, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|attribute| attribute.key == key)
        .and_then(
            |attribute| match attribute.value.as_ref()?.value.as_ref()? {
                Value::StringValue(text) => Some(text.clone()),
                Value::IntValue(number) => Some(number.to_string()),
                _ => None,
            },
        )
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The spans of each trace, by trace id.
fn traces(spans: &[(String, Span)]) -> BTreeMap<String, Vec<(String, Span)>> {
    let mut traces: BTreeMap<String, Vec<(String, Span)>> = BTreeMap::new();
    for (service, span) in spans {
        traces
            .entry(hex(&span.trace_id))
            .or_default()
            .push((service.clone(), span.clone()));
    }
    traces
}

/// One trial's trace of lost-response-keyed against fresh-key: the tree
/// call > attempt > dispatch, the fault's act and the finding.
fn assert_lost_response_tree(spans: &[&Span], seed: u64) {
    let by_id: BTreeMap<Vec<u8>, &Span> = spans
        .iter()
        .map(|span| (span.span_id.clone(), *span))
        .collect();
    assert_eq!(by_id.len(), spans.len(), "span ids are unique in a trace");
    let parent = |span: &Span| by_id.get(&span.parent_span_id).copied();
    let named = |prefix: &str| -> Vec<&Span> {
        spans
            .iter()
            .copied()
            .filter(|span| span.name.starts_with(prefix))
            .collect()
    };
    let roots: Vec<&Span> = spans
        .iter()
        .copied()
        .filter(|span| span.parent_span_id.is_empty())
        .collect();
    assert_eq!(roots.len(), 1, "one root: {roots:?}");
    let root = roots[0];
    assert_eq!(
        root.name,
        format!("chaos lost-response-keyed x fresh-key seed {seed}")
    );
    assert_eq!(attribute(root, "chaos.verdict").as_deref(), Some("fail"));
    assert_eq!(root.status.as_ref().unwrap().code, StatusCode::Error as i32);

    let calls = named("call ");
    assert_eq!(calls.len(), 1);
    assert_eq!(parent(calls[0]), Some(root));
    assert_eq!(
        attribute(calls[0], "gen_ai.operation.name").as_deref(),
        Some("execute_tool")
    );

    // Two attempts: the first came back unknown, so the agent tried again.
    let attempts = named("execute_tool ");
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    for (number, attempt) in attempts.iter().enumerate() {
        assert_eq!(parent(attempt), Some(calls[0]));
        assert_eq!(
            attribute(attempt, "gen_ai.tool.name"),
            attribute(calls[0], "gen_ai.tool.name")
        );
        assert!(attribute(attempt, "gen_ai.tool.call.id").is_some());
        // Its span id is the parent id its traceparent carried.
        let expected = (1u64 << 40) | (1 << 24) | (number as u64 + 1);
        assert_eq!(attempt.span_id, expected.to_be_bytes().to_vec());
    }
    // The provider's answer to the target was lost: the target said 503
    // unknown, and the retry was applied anew (fresh-key, a new key).
    assert_eq!(
        attribute(attempts[0], "http.response.status_code").as_deref(),
        Some("503"),
        "{attempts:?}"
    );
    assert_eq!(
        attribute(attempts[1], "chaos.end").as_deref(),
        Some("applied")
    );

    // fresh-key sends a new key each attempt: each attempt dispatched.
    let dispatches = named("dispatch ");
    assert_eq!(dispatches.len(), 2, "{dispatches:?}");
    for (dispatch, attempt) in dispatches.iter().zip(&attempts) {
        assert_eq!(parent(dispatch), Some(*attempt), "{dispatch:?}");
        assert_eq!(
            attribute(dispatch, "chaos.disposition").as_deref(),
            Some("committed")
        );
    }

    let faults = named("fault 1 ");
    assert_eq!(faults.len(), 1, "the fault acted once: {spans:?}");
    assert_eq!(parent(faults[0]), Some(root));
    assert!(
        faults[0].name.contains("lost an answer"),
        "{}",
        faults[0].name
    );

    let findings = named("finding duplicate-effect");
    assert_eq!(findings.len(), 1);
    assert_eq!(parent(findings[0]), Some(root));
    assert_eq!(
        findings[0].status.as_ref().unwrap().code,
        StatusCode::Error as i32
    );
    for span in spans {
        assert!(span.start_time_unix_nano > 1_600_000_000_000_000_000);
        assert!(span.end_time_unix_nano >= span.start_time_unix_nano);
    }
}

#[test]
fn each_simulated_trial_is_one_trace_call_attempt_dispatch_fault_finding() {
    let (url, received) = collector();
    let out = common::fresh_path("otlp-sim");
    let output = common::chaos_out(
        &[
            "run",
            "scenarios/lost-response-keyed.toml",
            "--target",
            "fresh-key",
            "--seeds",
            "3",
            "--otlp",
            &url,
        ],
        &out,
    );
    let (stdout, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(1), "{stdout}{stderr}");
    assert!(!stderr.contains("--otlp"), "{stderr}");
    let spans = received.spans();
    let traces = traces(&spans);
    assert_eq!(traces.len(), 3, "one trace per trial");
    let mut seeds = Vec::new();
    for spans in traces.values() {
        let spans: Vec<&Span> = spans
            .iter()
            .map(|(service, span)| {
                assert_eq!(service, "chaos");
                span
            })
            .collect();
        let root = spans
            .iter()
            .find(|span| span.parent_span_id.is_empty())
            .unwrap();
        let seed: u64 = attribute(root, "chaos.seed").unwrap().parse().unwrap();
        assert_lost_response_tree(&spans, seed);
        seeds.push(seed);
    }
    seeds.sort();
    assert_eq!(seeds, [0, 1, 2]);
}

#[test]
fn a_file_gets_a_json_line_per_batch_that_decodes_to_the_same_traces() {
    let dir = common::temp_dir("otlp-file");
    let file = dir.join("traces.jsonl");
    let output = common::chaos_out(
        &[
            "run",
            "scenarios/lost-response-keyed.toml",
            "--target",
            "fresh-key",
            "--seeds",
            "2",
            "--otlp",
            file.to_str().unwrap(),
        ],
        &dir.join("out"),
    );
    assert_eq!(output.status.code(), Some(1), "{}", common::text(&output).1);
    let text = std::fs::read_to_string(&file).unwrap();
    let received = Received::default();
    for line in text.lines() {
        add(
            &received,
            serde_json::from_str(line).expect("a line is an OTLP JSON request"),
        );
    }
    let spans = received.spans();
    let traces = traces(&spans);
    assert_eq!(traces.len(), 2, "{text}");
    for spans in traces.values() {
        let spans: Vec<&Span> = spans.iter().map(|(_, span)| span).collect();
        let root = spans
            .iter()
            .find(|span| span.parent_span_id.is_empty())
            .unwrap();
        let seed: u64 = attribute(root, "chaos.seed").unwrap().parse().unwrap();
        assert_lost_response_tree(&spans, seed);
    }
    // The JSON is OTLP's: ids in hex, as a collector's file exporter writes.
    assert!(text.contains("\"traceId\":\""), "{text}");
}

#[test]
fn a_collector_that_fails_is_one_warning_and_the_run_goes_on() {
    // Nothing listens on this port.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let out = common::fresh_path("otlp-down");
    let output = common::chaos_out(
        &[
            "run",
            "scenarios/lost-response-keyed.toml",
            "--target",
            "fresh-key",
            "--target",
            "runtime-ledger",
            "--seeds",
            "20",
            "--otlp",
            &url,
        ],
        &out,
    );
    let (stdout, stderr) = common::text(&output);
    // The verdict is the run's, as without --otlp.
    assert_eq!(output.status.code(), Some(1), "{stdout}{stderr}");
    assert_eq!(
        stderr.matches("warning: --otlp: could not export").count(),
        1,
        "{stderr}"
    );
    assert!(out.join("report.json").is_file());

    for (value, says) in [
        ("https://collector.example:4318", "speaks plain http"),
        ("http:///v1/traces", "names no host"),
    ] {
        let refused = common::chaos_out(
            &[
                "run",
                "scenarios/lost-response-keyed.toml",
                "--target",
                "fresh-key",
                "--seeds",
                "1",
                "--otlp",
                value,
            ],
            &out,
        );
        let (_, stderr) = common::text(&refused);
        assert_eq!(refused.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }
}

/// Live: python-replay-first exports a server span per tool call when
/// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, parented by the traceparent
/// it received. Its spans land in chaos's trace, under the attempts.
#[test]
fn a_live_target_s_own_spans_join_the_trial_s_trace() {
    let (url, received) = collector();
    let out = common::fresh_path("otlp-live");
    let output = common::chaos_command()
        .args([
            "run",
            "scenarios/lost-response-keyed.toml",
            "--target",
            "python-replay-first",
            "--seeds",
            "1",
            "--otlp",
            &url,
            "--out",
        ])
        .arg(&out)
        .env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", &url)
        .output()
        .unwrap();
    let (stdout, stderr) = common::text(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}{stderr}");
    let spans = received.spans();
    let traces = traces(&spans);
    assert_eq!(traces.len(), 1, "one trial, one trace: {:?}", traces.keys());
    let spans = traces.values().next().unwrap();
    let chaos_attempts: Vec<&Span> = spans
        .iter()
        .filter(|(service, span)| service == "chaos" && span.name.starts_with("execute_tool "))
        .map(|(_, span)| span)
        .collect();
    let own: Vec<&Span> = spans
        .iter()
        .filter(|(service, _)| service == "python-replay-first")
        .map(|(_, span)| span)
        .collect();
    // The answer to the first attempt was lost and the agent retried: the
    // target served both, and each of its spans sits under its attempt.
    assert_eq!(chaos_attempts.len(), 2, "{spans:?}");
    assert_eq!(own.len(), 2, "{spans:?}");
    let parents: std::collections::BTreeSet<&Vec<u8>> =
        own.iter().map(|span| &span.parent_span_id).collect();
    let attempts: std::collections::BTreeSet<&Vec<u8>> =
        chaos_attempts.iter().map(|span| &span.span_id).collect();
    assert_eq!(parents, attempts, "{spans:?}");
    assert!(own.iter().all(|span| span.name.starts_with("POST /tools/")));
    // ... and the fault's act is in the same trace.
    assert!(spans
        .iter()
        .any(|(service, span)| service == "chaos" && span.name.starts_with("fault 1 ")));
}
