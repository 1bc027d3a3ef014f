//! `--otlp URL|FILE`: each judged trial as an OpenTelemetry trace, sent over
//! OTLP/HTTP (protobuf) to a collector or appended to a file as OTLP JSON,
//! one `ExportTraceServiceRequest` a line (the collector's file exporter's
//! format).
//!
//! A trial's trace is the one its agent run's `traceparent` opened
//! (`plan::trace_id`): every attempt's span has the id the attempt sent as
//! its parent, so a target that reads the header puts its own spans under
//! the attempt that caused them. The tree:
//!
//! ```text
//! trial (scenario x target, seed; the verdict)
//! ├── call N (gen_ai.operation.name = execute_tool)
//! │   └── execute_tool TOOL (one per attempt; gen_ai.tool.call.id)
//! │       └── dispatch N (at the provider, during the attempt)
//! ├── fault N KIND (each act of a fault)
//! └── finding CHECK (each finding of the verdict)
//! ```
//!
//! Built from the history after the trial is judged, never in the run: a
//! simulated trial's time is laid out from the moment it was judged, a live
//! one's from its real clock (its first attempt's wall clock), where the
//! target's spans are. Sending is a thread of its own with a bounded
//! queue; a collector that fails gets one warning and no more traffic, and
//! the run goes on.

use chaos_kit::sync::lock;
use std::io::Write;
use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status};
use prost::Message;

use crate::check::Status as Verdict;
use crate::history::{Attempt, AttemptEnd, Ms};
use crate::plan::{attempt_span_id, trace_id};
use crate::sweep::Transport;
use crate::trial::Judged;

/// Where the traces go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Destination {
    /// An OTLP/HTTP endpoint: `http://host:port/path` (`/v1/traces` when
    /// the URL names no path).
    Http {
        authority: String,
        path: String,
        url: String,
    },
    /// OTLP JSON lines, appended.
    File(PathBuf),
}

impl Destination {
    /// `--otlp`'s value: a URL (http only: a collector on the machine or
    /// the network; TLS is the collector's to add) or a file path.
    pub(crate) fn parse(text: &str) -> Result<Destination, String> {
        if let Some(rest) = text.strip_prefix("http://") {
            let (authority, path) = match rest.find('/') {
                Some(at) => (&rest[..at], &rest[at..]),
                None => (rest, ""),
            };
            if authority.is_empty() || authority.contains(['@', ' ']) {
                return Err(format!(
                    "'{text}' names no host; write one like http://127.0.0.1:4318"
                ));
            }
            let authority = if authority.rsplit_once(':').is_some_and(|(_, port)| {
                !port.is_empty() && port.chars().all(|c| c.is_ascii_digit())
            }) {
                authority.to_owned()
            } else {
                format!("{authority}:80")
            };
            let path = if path.is_empty() || path == "/" {
                "/v1/traces".to_owned()
            } else {
                path.to_owned()
            };
            return Ok(Destination::Http {
                url: format!("http://{authority}{path}"),
                authority,
                path,
            });
        }
        if text.contains("://") {
            return Err(format!(
                "'{text}': --otlp speaks plain http (OTLP/HTTP, protobuf) to a collector, e.g. http://127.0.0.1:4318; for https, send to a local collector that forwards it"
            ));
        }
        if text.is_empty() {
            return Err("--otlp needs a URL (http://127.0.0.1:4318) or a file".into());
        }
        Ok(Destination::File(PathBuf::from(text)))
    }

    fn describe(&self) -> String {
        match self {
            Destination::Http { url, .. } => url.clone(),
            Destination::File(path) => path.display().to_string(),
        }
    }
}

/// One trial's trace, and how many trials it is (for the warning).
type Batch = ExportTraceServiceRequest;

/// Sends traces from a thread of its own. Dropped or [`Exporter::finish`]ed,
/// it sends what is queued and stops.
pub(crate) struct Exporter {
    queue: Mutex<Option<SyncSender<Batch>>>,
    sender: Mutex<Option<JoinHandle<()>>>,
    transport: Vec<Transport>,
}

/// How many trials' traces may wait to be sent; past it a trial's trace is
/// dropped rather than slow the run or grow without bound.
const QUEUE: usize = 256;
/// How many trials' traces one request carries at most.
const BATCH: usize = 64;
/// A collector that does not answer within this is failing.
const TIMEOUT: Duration = Duration::from_secs(10);

impl Exporter {
    /// Starts sending to `destination`; a file is created (emptied) now, so
    /// a path that cannot be written is said before the run starts.
    /// `transports[i]` is column `i`'s.
    pub(crate) fn start(
        destination: Destination,
        transports: Vec<Transport>,
        warn: fn(String),
    ) -> Result<Exporter, String> {
        let mut file = match &destination {
            Destination::File(path) => Some(std::fs::File::create(path).map_err(|error| {
                format!("cannot write the OTLP file {}: {error}", path.display())
            })?),
            Destination::Http { .. } => None,
        };
        let (queue, batches) = sync_channel::<Batch>(QUEUE);
        let sender = std::thread::Builder::new()
            .name("chaos-otlp".into())
            .spawn(move || send_all(&destination, file.as_mut(), batches, warn))
            .map_err(|error| format!("cannot start the OTLP exporter: {error}"))?;
        Ok(Exporter {
            queue: Mutex::new(Some(queue)),
            sender: Mutex::new(Some(sender)),
            transport: transports,
        })
    }

    /// Queues `judged`'s trace; a trial that never ran has none.
    pub(crate) fn add(&self, column: usize, target: &str, judged: &Judged<'_>) {
        let transport = self
            .transport
            .get(column)
            .copied()
            .unwrap_or(Transport::Sim);
        let Some(request) = trace(judged, target, transport, SystemTime::now()) else {
            return;
        };
        if let Some(queue) = lock(&self.queue).as_ref() {
            if let Err(TrySendError::Full(_)) = queue.try_send(request) {
                // The sender is behind (a slow collector): this trace is
                // lost, the run is not slowed. The sender says so once.
                DROPPED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }

    /// Sends what is queued, and waits for it.
    pub(crate) fn finish(&self) {
        lock(&self.queue).take();
        if let Some(sender) = lock(&self.sender).take() {
            let _ = sender.join();
        }
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.finish();
    }
}

static DROPPED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The sender thread: every batch to the destination, until the first
/// failure, which is the one warning; later batches are dropped.
fn send_all(
    destination: &Destination,
    mut file: Option<&mut std::fs::File>,
    batches: Receiver<Batch>,
    warn: fn(String),
) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let mut failed = false;
    let mut sent = 0u64;
    while let Ok(first) = batches.recv() {
        // What else is waiting goes in the same request: a fast sweep makes
        // traces faster than one request each could carry them.
        let mut batch = first;
        while batch.resource_spans.len() < BATCH {
            match batches.try_recv() {
                Ok(more) => batch.resource_spans.extend(more.resource_spans),
                Err(_) => break,
            }
        }
        if failed {
            continue;
        }
        let result = match (destination, file.as_mut(), &runtime) {
            (Destination::File(_), Some(file), _) => serde_json::to_string(&batch)
                .map_err(|error| error.to_string())
                .and_then(|line| writeln!(file, "{line}").map_err(|error| error.to_string())),
            (
                Destination::Http {
                    authority, path, ..
                },
                _,
                Ok(runtime),
            ) => runtime.block_on(async {
                // Inside the runtime: a timeout needs its timer.
                tokio::time::timeout(TIMEOUT, post(authority, path, batch.encode_to_vec()))
                    .await
                    .unwrap_or_else(|_| Err(format!("no answer in {}s", TIMEOUT.as_secs())))
            }),
            (_, _, Err(error)) => Err(error.to_string()),
            (Destination::File(_), None, _) => Err("the file is not open".into()),
        };
        match result {
            Ok(()) => sent += 1,
            Err(error) => {
                failed = true;
                warn(format!(
                    "--otlp: could not export a trace to {} ({error}); the run goes on, and no more traces are sent",
                    destination.describe()
                ));
            }
        }
    }
    let dropped = DROPPED.swap(0, std::sync::atomic::Ordering::Relaxed);
    if dropped > 0 && !failed {
        warn(format!(
            "--otlp: {dropped} trial(s)' traces were dropped: {} took them slower than the run made them ({sent} sent)",
            destination.describe()
        ));
    }
}

/// One POST of an OTLP/HTTP protobuf body; a 2xx is success.
async fn post(authority: &str, path: &str, body: Vec<u8>) -> Result<(), String> {
    use http_body_util::{BodyExt, Full};
    let stream = tokio::net::TcpStream::connect(authority)
        .await
        .map_err(|error| error.to_string())?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|error| error.to_string())?;
    tokio::spawn(connection);
    let request = hyper::Request::post(path)
        .header(hyper::header::HOST, authority)
        .header(hyper::header::CONTENT_TYPE, "application/x-protobuf")
        .body(Full::new(bytes::Bytes::from(body)))
        .map_err(|error| error.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|error| error.to_string())?;
    let status = response.status();
    // Read the answer whole, so the connection closes cleanly.
    let _ = response.into_body().collect().await;
    if status.is_success() {
        Ok(())
    } else {
        Err(format!("the collector answered {status}"))
    }
}

// ---------------------------------------------------------------------------
// The trace of one trial.

/// Span ids beside the attempts' (whose top byte is 0: see
/// `plan::attempt_span_id`): a kind in the top byte, a number below.
fn span_id(kind: u8, number: u64) -> Vec<u8> {
    ((u64::from(kind) << 56) | (number & 0x00ff_ffff_ffff_ffff))
        .to_be_bytes()
        .to_vec()
}
const TRIAL: u8 = 1;
const CALL: u8 = 2;
const DISPATCH: u8 = 3;
const FAULT: u8 = 4;
const FINDING: u8 = 5;
const REDELIVERY: u8 = 6;

fn text(key: &str, value: impl Into<String>) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.into())),
        }),
        ..KeyValue::default()
    }
}

fn int(key: &str, value: u64) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::IntValue(value as i64)),
        }),
        ..KeyValue::default()
    }
}

fn status(ok: bool, message: impl Into<String>) -> Option<Status> {
    Some(if ok {
        Status::default()
    } else {
        Status {
            message: message.into(),
            code: StatusCode::Error as i32,
        }
    })
}

/// `judged`'s trace, as one export request; `None` when the trial never ran.
/// `now` is when it was judged: a simulated trial ends there.
pub(crate) fn trace(
    judged: &Judged<'_>,
    target: &str,
    transport: Transport,
    now: SystemTime,
) -> Option<ExportTraceServiceRequest> {
    let run = judged.run.as_ref()?;
    let trial = &judged.trial;
    let history = &run.history;
    // Where the trial's ms 0 is, in Unix nanoseconds.
    let now_ms = now
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as u64);
    let zero_ms = match (transport, history.attempts.first()) {
        (Transport::Live, Some(first)) => first.wall_clock_ms.saturating_sub(first.sent_at),
        _ => now_ms.saturating_sub(history.ended_at),
    };
    let at = |ms: Ms| (zero_ms + ms).saturating_mul(1_000_000);
    let trace = trace_id(&trial.run_id).to_vec();
    let root = span_id(TRIAL, 0);
    let span = |id: Vec<u8>, parent: &[u8], name: String, from: Ms, to: Ms| Span {
        trace_id: trace.clone(),
        span_id: id,
        parent_span_id: parent.to_vec(),
        name,
        kind: SpanKind::Internal as i32,
        start_time_unix_nano: at(from),
        end_time_unix_nano: at(to.max(from)),
        ..Span::default()
    };

    let verdict = &judged.verdict;
    let mut spans = Vec::new();
    let mut trial_span = span(
        root.clone(),
        &[],
        format!(
            "chaos {} x {target} seed {}",
            trial.scenario.name, trial.seed
        ),
        0,
        history.ended_at,
    );
    trial_span.attributes = vec![
        text("chaos.scenario", trial.scenario.name.clone()),
        text(
            "chaos.scenario.path",
            trial.scenario.path.display().to_string(),
        ),
        text("chaos.target", target),
        int("chaos.seed", trial.seed),
        text("chaos.run_id", trial.run_id.clone()),
        text("chaos.transport", transport.to_string()),
        text("chaos.verdict", verdict.status.to_string()),
    ];
    trial_span.status = status(
        verdict.status != Verdict::Fail,
        verdict
            .findings
            .first()
            .map(|finding| format!("{}: {}", finding.check, finding.message))
            .unwrap_or_default(),
    );
    spans.push(trial_span);

    for call in &trial.calls {
        let attempts: Vec<&Attempt> = history
            .attempts
            .iter()
            .filter(|attempt| attempt.call == call.number)
            .collect();
        let operation = &trial.operations[call.operation];
        let call_id = span_id(CALL, u64::from(call.number));
        let from = attempts.iter().map(|a| a.sent_at).min().unwrap_or(0);
        let to = attempts.iter().map(|a| a.ended_at).max().unwrap_or(from);
        let mut call_span = span(
            call_id.clone(),
            &root,
            format!("call {} {}", call.number, call.tool),
            from,
            to,
        );
        call_span.attributes = vec![
            text("gen_ai.operation.name", "execute_tool"),
            text("gen_ai.tool.name", call.tool.clone()),
            text("chaos.operation", operation.name.clone()),
            int("chaos.call", u64::from(call.number)),
            int("chaos.attempts", attempts.len() as u64),
        ];
        spans.push(call_span);
        for (index, attempt) in attempts.iter().enumerate() {
            let own = attempt_span_id(attempt.call, attempt.worker, attempt.attempt)
                .to_be_bytes()
                .to_vec();
            // A second delivery carried the same traceparent: a child of
            // the attempt it copied, under an id of its own.
            let redelivered = attempt.attempt_id.ends_with("-redelivered");
            let (id, parent) = if redelivered {
                (span_id(REDELIVERY, index as u64), own.clone())
            } else {
                (own, call_id.clone())
            };
            let mut attempt_span = span(
                id,
                &parent,
                format!("execute_tool {}", call.tool),
                attempt.sent_at,
                attempt.ended_at,
            );
            attempt_span.kind = SpanKind::Client as i32;
            attempt_span.attributes = vec![
                text("gen_ai.operation.name", "execute_tool"),
                text("gen_ai.tool.name", call.tool.clone()),
                text("gen_ai.tool.call.id", attempt.tool_use_id.clone()),
                text("chaos.attempt_id", attempt.attempt_id.clone()),
                text("chaos.idempotency_key", attempt.key.clone()),
                int("chaos.worker", u64::from(attempt.worker)),
                int("chaos.attempt", u64::from(attempt.attempt)),
                int("chaos.decision", u64::from(attempt.decision)),
                text("chaos.end", attempt.summary()),
            ];
            if let Some(answer) = attempt.answer() {
                attempt_span
                    .attributes
                    .push(int("http.response.status_code", u64::from(answer.status)));
            }
            attempt_span.status = status(
                matches!(attempt.end, AttemptEnd::Answered(_)),
                attempt.summary(),
            );
            spans.push(attempt_span);
        }
    }

    // Each dispatch under the attempt of its operation in flight when it
    // reached the provider (the latest sent, as the checkers blame one).
    for dispatch in &run.ledger.dispatches {
        let operation = trial
            .operations
            .iter()
            .position(|operation| dispatch.subject.as_deref() == Some(&operation.subject));
        let parent = history
            .attempts
            .iter()
            .filter(|attempt| Some(attempt.operation) == operation && attempt.spans(dispatch.at))
            .max_by_key(|attempt| attempt.sent_at)
            .map_or(root.clone(), |attempt| {
                attempt_span_id(attempt.call, attempt.worker, attempt.attempt)
                    .to_be_bytes()
                    .to_vec()
            });
        let mut dispatch_span = span(
            span_id(DISPATCH, u64::from(dispatch.number)),
            &parent,
            format!("dispatch {} {}", dispatch.number, dispatch.tool),
            dispatch.at,
            dispatch.at,
        );
        dispatch_span.kind = SpanKind::Server as i32;
        dispatch_span.attributes = vec![
            text("gen_ai.tool.name", dispatch.tool.clone()),
            int("chaos.dispatch", u64::from(dispatch.number)),
            text("chaos.disposition", dispatch.disposition.class()),
            text(
                "chaos.disposition.description",
                dispatch.disposition.describe(),
            ),
        ];
        if let Some(key) = &dispatch.key {
            dispatch_span
                .attributes
                .push(text("chaos.idempotency_key", key.clone()));
        }
        spans.push(dispatch_span);
    }

    for (index, event) in history.faults.iter().enumerate() {
        let name = match event.act() {
            Some((fault, what)) => format!("fault {} {what}", fault + 1),
            None => event.description.clone(),
        };
        let mut fault_span = span(
            span_id(FAULT, index as u64),
            &root,
            name,
            event.at,
            event.at,
        );
        fault_span.attributes = vec![text("chaos.fault.description", event.description.clone())];
        if let Some(fault) = event.fault() {
            fault_span
                .attributes
                .push(int("chaos.fault.index", fault as u64 + 1));
        }
        spans.push(fault_span);
    }

    for (index, finding) in verdict.findings.iter().enumerate() {
        let mut finding_span = span(
            span_id(FINDING, index as u64),
            &root,
            format!("finding {}", finding.check),
            history.ended_at,
            history.ended_at,
        );
        finding_span.attributes = vec![
            text("chaos.check", finding.check.as_str()),
            text("chaos.finding", finding.message.clone()),
        ];
        if let Some(operation) = &finding.operation {
            finding_span
                .attributes
                .push(text("chaos.operation", operation.clone()));
        }
        finding_span.status = status(finding.check.is_warning(), finding.message.clone());
        spans.push(finding_span);
    }

    Some(ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![
                    text("service.name", "chaos"),
                    text("service.version", env!("CARGO_PKG_VERSION")),
                ],
                ..Resource::default()
            }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "chaos".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..InstrumentationScope::default()
                }),
                spans,
                ..ScopeSpans::default()
            }],
            ..ResourceSpans::default()
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::traceparent;

    #[test]
    fn a_url_is_a_collector_and_anything_else_a_file() {
        assert_eq!(
            Destination::parse("http://127.0.0.1:4318"),
            Ok(Destination::Http {
                authority: "127.0.0.1:4318".into(),
                path: "/v1/traces".into(),
                url: "http://127.0.0.1:4318/v1/traces".into(),
            })
        );
        assert_eq!(
            Destination::parse("http://collector/otlp/v1/traces"),
            Ok(Destination::Http {
                authority: "collector:80".into(),
                path: "/otlp/v1/traces".into(),
                url: "http://collector:80/otlp/v1/traces".into(),
            })
        );
        assert_eq!(
            Destination::parse("traces.jsonl"),
            Ok(Destination::File("traces.jsonl".into()))
        );
        for refused in [
            "https://collector:4318",
            "http:///v1/traces",
            "grpc://x",
            "",
        ] {
            assert!(Destination::parse(refused).is_err(), "{refused}");
        }
    }

    #[test]
    fn an_attempt_s_span_is_the_parent_its_traceparent_names() {
        let header = traceparent("run-2a-x", 3, 2, 7);
        let trace: String = trace_id("run-2a-x")
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        let span = format!("{:016x}", attempt_span_id(3, 2, 7));
        assert_eq!(header, format!("00-{trace}-{span}-01"));
        // The id the header always carried: the run's fingerprint, padded.
        assert_eq!(
            trace,
            format!("{:0>32}", chaos_kit::canonical::fingerprint("run-2a-x"))
        );
        // Concurrent workers' attempts differ; the other spans' kinds never
        // meet an attempt's id.
        assert_ne!(attempt_span_id(1, 1, 1), attempt_span_id(1, 2, 1));
        for kind in [TRIAL, CALL, DISPATCH, FAULT, FINDING, REDELIVERY] {
            assert_ne!(span_id(kind, 1)[0], 0);
            assert_eq!(attempt_span_id(u32::MAX, u32::MAX, u32::MAX) >> 56, 0);
        }
    }
}
