//! The stdio bridge: an MCP server that speaks over its stdin and stdout
//! (`[mcp] transport = "stdio"`; MCP 2025-11-25 "Transports": one JSON-RPC
//! message per line) is reached by the MCP way in exactly as one serving
//! Streamable HTTP: chaos listens on the target's `{listen.addr}` itself,
//! writes each message POSTed there to the process's stdin as one line, and
//! answers the POST with the line of its stdout that responds to it.
//!
//! Why a bridge and not an MCP client on the pipes: the agent's faults (a
//! lost answer, a stall, a re-plan, a crash and restart, the timeout and
//! its `notifications/cancelled`) act on the trial's HTTP client, so a
//! stdio server meets every one of them unchanged. When the process dies,
//! its stdout ends: the calls waiting on it are reset (the agent sees a
//! dropped transport, as it would with the pipe) and the bridge stops
//! listening; the restarted process gets a bridge of its own on its new
//! pipes, and the way in initializes it anew.

use chaos_kit::sync::lock;
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use chaos_kit::http::{self, Abort, Request, Response};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::oneshot;

/// The longest line read from a server's stdout: a message past it is not
/// read further (the server is answered as broken), as chaos bounds every
/// body it reads.
const MOST_LINE_BYTES: usize = chaos_kit::http::MAX_BODY_BYTES;

/// How long a new bridge tries to take the port its predecessor (the
/// process before a restart) is letting go of.
const BIND_FOR: Duration = Duration::from_secs(2);

/// A running bridge: ended (and its port let go) when dropped.
///
/// It runs on a thread of its own, not on the trial's runtime: a process
/// may outlive the trial that started it and serve the next one, whose
/// runtime is another.
pub(crate) struct Bridge {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Bridge {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // Its runtime ends at once (the process is gone, or going): joined,
        // so the port is free when the process is restarted.
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// What the bridge's two sides share.
struct Pipes {
    stdin: tokio::sync::Mutex<ChildStdin>,
    /// Requests written and not answered yet, by their JSON-RPC id.
    waiting: Mutex<HashMap<String, oneshot::Sender<Bytes>>>,
    /// Every request id written: a response to one of them that nobody
    /// waits for any more is late (the client gave up), not a stranger.
    sent: Mutex<HashSet<String>>,
}

/// Starts the bridge for one process: listens on `addr`, writes to `stdin`,
/// reads `stdout` (each line also appended to `log`, the process's stdout
/// log, for the user reading it after).
pub(crate) fn start(
    addr: &str,
    stdin: std::process::ChildStdin,
    stdout: std::process::ChildStdout,
    log: &Path,
) -> std::io::Result<Bridge> {
    let (stop, stopped) = oneshot::channel::<()>();
    let (bound_tx, bound_rx) = std::sync::mpsc::channel::<std::io::Result<()>>();
    let addr = addr.to_owned();
    let log = log.to_owned();
    let thread = std::thread::Builder::new()
        .name("chaos-stdio-bridge".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(error) => {
                    let _ = bound_tx.send(Err(error));
                    return;
                }
            };
            runtime.block_on(async move {
                let pipes = (|| {
                    Ok::<_, std::io::Error>((
                        ChildStdin::from_std(stdin)?,
                        ChildStdout::from_std(stdout)?,
                    ))
                })();
                let ((stdin, stdout), listener) = match pipes {
                    Ok(pipes) => match bind(&addr).await {
                        Ok(listener) => (pipes, listener),
                        Err(error) => {
                            let _ = bound_tx.send(Err(error));
                            return;
                        }
                    },
                    Err(error) => {
                        let _ = bound_tx.send(Err(error));
                        return;
                    }
                };
                let _ = bound_tx.send(Ok(()));
                serve(listener, stdin, stdout, log, stopped).await;
            });
        })?;
    match bound_rx.recv() {
        Ok(Ok(())) => Ok(Bridge {
            stop: Some(stop),
            thread: Some(thread),
        }),
        Ok(Err(error)) => {
            let _ = thread.join();
            Err(error)
        }
        Err(_) => Err(std::io::Error::other(
            "the bridge's thread ended before it listened",
        )),
    }
}

/// Serves until the process's stdout ends (nobody is left to answer) or
/// the bridge is dropped.
async fn serve(
    listener: tokio::net::TcpListener,
    stdin: ChildStdin,
    stdout: ChildStdout,
    log: PathBuf,
    stopped: oneshot::Receiver<()>,
) {
    let pipes = Arc::new(Pipes {
        stdin: tokio::sync::Mutex::new(stdin),
        waiting: Mutex::default(),
        sent: Mutex::default(),
    });
    let (ended, gone) = oneshot::channel::<()>();
    let reader = tokio::spawn(read(stdout, pipes.clone(), log, ended));
    let handler = http::handler(move |request| post(pipes.clone(), request));
    let _ = http::serve(
        listener,
        async move {
            tokio::select! {
                _ = gone => {}
                _ = stopped => {}
            }
        },
        handler,
    )
    .await;
    reader.abort();
}

async fn bind(addr: &str) -> std::io::Result<tokio::net::TcpListener> {
    let deadline = tokio::time::Instant::now() + BIND_FOR;
    loop {
        match tokio::net::TcpListener::bind(addr).await {
            Err(error)
                if error.kind() == std::io::ErrorKind::AddrInUse
                    && tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            bound => return bound,
        }
    }
}

/// One message the way in POSTed: a request waits for its response; a
/// notification is accepted (`202`, as Streamable HTTP has it).
async fn post(pipes: Arc<Pipes>, request: Request) -> Result<Response, Abort> {
    if request.method != "POST" {
        return Ok(Response::new(405).body("chaos's stdio bridge takes POSTed JSON-RPC messages"));
    }
    let Ok(message) = serde_json::from_slice::<Value>(&request.body) else {
        return Ok(Response::new(400).body("not JSON"));
    };
    let id = message
        .get("id")
        .filter(|_| message.get("method").is_some())
        .map(Value::to_string);
    let answer = id.map(|id| {
        let (tx, rx) = oneshot::channel();
        lock(&pipes.sent).insert(id.clone());
        lock(&pipes.waiting).insert(id, tx);
        rx
    });
    // One line: serde_json writes no raw newline inside a message.
    let mut line = serde_json::to_vec(&message).map_err(|_| Abort)?;
    line.push(b'\n');
    {
        let mut stdin = pipes.stdin.lock().await;
        // A closed pipe: the process is gone, as a dropped connection is.
        stdin.write_all(&line).await.map_err(|_| Abort)?;
        stdin.flush().await.map_err(|_| Abort)?;
    }
    let Some(answer) = answer else {
        return Ok(Response::new(202));
    };
    // The sender goes when the process's stdout ends: reset, no answer.
    let body = answer.await.map_err(|_| Abort)?;
    Ok(Response::new(200)
        .header("content-type", "application/json")
        .header(crate::way_in::mcp::STDIO_LINE, "1")
        .body(body))
}

/// Reads the process's stdout line by line, answering whoever waits for
/// each response; at its end, resets every call still waiting.
async fn read(stdout: ChildStdout, pipes: Arc<Pipes>, log: PathBuf, ended: oneshot::Sender<()>) {
    let mut lines = BufReader::new(stdout);
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .ok();
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut lines)
            .take(MOST_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if let Some(log) = log.as_mut() {
            let _ = log.write_all(&line);
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let message = match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(message)) => message,
            // Not a JSON-RPC message: MCP's stdio servers must write nothing
            // else to stdout. Whoever waits is answered with the line itself,
            // which the way in names as what the server said.
            _ => {
                answer_all(&pipes, Bytes::from(text.to_owned()));
                continue;
            }
        };
        let response = message.contains_key("result") || message.contains_key("error");
        let Some(id) = message.get("id").filter(|_| response).map(Value::to_string) else {
            // The server's own requests and notifications: chaos takes none up.
            continue;
        };
        let body = Bytes::from(Value::Object(message).to_string());
        let waiter = lock(&pipes.waiting).remove(&id);
        match waiter {
            Some(waiter) => {
                let _ = waiter.send(body);
            }
            // A response to an id it was never sent: whoever waits hears
            // of it, and the way in names both ids.
            None if !lock(&pipes.sent).contains(&id) => answer_all(&pipes, body),
            // Late: the client gave up on it (and cancelled it).
            None => {}
        }
    }
    lock(&pipes.waiting).clear();
    let _ = ended.send(());
}

fn answer_all(pipes: &Pipes, body: Bytes) {
    for (_, waiter) in lock(&pipes.waiting).drain() {
        let _ = waiter.send(body.clone());
    }
}
