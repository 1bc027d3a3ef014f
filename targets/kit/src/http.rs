//! A minimal HTTP/1.1 layer over any [`crate::net`] transport.
//!
//! Handlers see whole requests and return whole responses: tool calls are small
//! JSON documents, and buffering keeps the handler code free of streaming detail.
//! Every outbound call opens a fresh connection and is bounded by a timeout,
//! because a lost segment must never stall a caller forever.

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;

use crate::net::{BoxFuture, Listener, Network};

/// The most bytes of one body read, in either direction: an answer, a
/// health check's, a request to the provider or the authority. Every body of
/// the protocol is a small JSON document; a peer that sends more (an endless
/// body drove the harness to 1.6 GB, issue 27) is cut off there, so memory
/// stays bounded whatever a target does.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// Reads a whole body, or fails with `Ok(None)` once it passes
/// [`MAX_BODY_BYTES`]; `Err` is the connection's own failure.
async fn read_bounded(body: Incoming) -> Result<Option<Bytes>, hyper::Error> {
    match http_body_util::Limited::new(body, MAX_BODY_BYTES)
        .collect()
        .await
    {
        Ok(collected) => Ok(Some(collected.to_bytes())),
        Err(error) => match error.downcast::<hyper::Error>() {
            Ok(error) => Err(*error),
            // The only other error of `Limited` is its limit.
            Err(_) => Ok(None),
        },
    }
}

/// An inbound or outbound request, fully buffered.
#[derive(Debug, Clone, Default)]
pub struct Request {
    pub method: String,
    /// The path without the query string.
    pub path: String,
    pub query: Option<String>,
    /// Header names in lower case.
    pub headers: BTreeMap<String, String>,
    pub body: Bytes,
}

impl Request {
    pub fn post(path: impl Into<String>, body: impl Into<Bytes>) -> Self {
        Request {
            method: "POST".into(),
            path: path.into(),
            body: body.into(),
            ..Request::default()
        }
    }

    pub fn get(path_and_query: &str) -> Self {
        let (path, query) = match path_and_query.split_once('?') {
            Some((path, query)) => (path.to_owned(), Some(query.to_owned())),
            None => (path_and_query.to_owned(), None),
        };
        Request {
            method: "GET".into(),
            path,
            query,
            ..Request::default()
        }
    }

    pub fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.insert(name.to_ascii_lowercase(), value.into());
        self
    }

    pub fn header_value(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    /// The value of `name` in the query string (no percent-decoding: the
    /// harness only puts URL-safe keys there).
    pub fn query_param(&self, name: &str) -> Option<&str> {
        self.query.as_deref()?.split('&').find_map(|pair| {
            let (key, value) = pair.split_once('=')?;
            (key == name).then_some(value)
        })
    }
}

/// A response, fully buffered.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Response {
    pub status: u16,
    pub headers: BTreeMap<String, String>,
    pub body: Bytes,
}

impl Response {
    pub fn new(status: u16) -> Self {
        Response {
            status,
            ..Response::default()
        }
    }

    pub fn json(status: u16, value: &impl serde::Serialize) -> Self {
        let body = serde_json::to_vec(value).expect("serialising a response body cannot fail");
        Response::new(status)
            .header("content-type", "application/json")
            .body(body)
    }

    pub fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.insert(name.to_ascii_lowercase(), value.into());
        self
    }

    pub fn body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }

    pub fn header_value(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

/// What a handler may do instead of answering: close the connection with no
/// response at all, as a crashed or reset peer would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Abort;

impl std::fmt::Display for Abort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection aborted by the handler")
    }
}

impl std::error::Error for Abort {}

pub type Handler =
    Arc<dyn Fn(Request) -> BoxFuture<'static, Result<Response, Abort>> + Send + Sync>;

/// Wraps an async closure as a [`Handler`].
pub fn handler<F, Fut>(f: F) -> Handler
where
    F: Fn(Request) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Response, Abort>> + Send + 'static,
{
    Arc::new(move |request| Box::pin(f(request)))
}

/// Serves HTTP/1.1 on `listener` until `shutdown` completes. Each connection is
/// its own task, so a handler that holds its answer blocks nobody else.
pub async fn serve(
    mut listener: impl Listener,
    shutdown: impl Future<Output = ()>,
    handler: Handler,
) -> io::Result<()> {
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            biased;
            _ = &mut shutdown => return Ok(()),
            accepted = listener.accept() => accepted?,
        };
        let handler = handler.clone();
        listener.spawn(Box::pin(async move {
            let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
                let handler = handler.clone();
                async move {
                    let response = match read_request(request).await.map_err(|_| Abort)? {
                        Some(request) => handler(request).await?,
                        // Told, not dropped: the sender learns why nothing happened.
                        None => Response::new(413).body(format!(
                            "a request body may be at most {MAX_BODY_BYTES} bytes"
                        )),
                    };
                    Ok::<_, Abort>(into_hyper_response(response))
                }
            });
            // A failed connection (peer reset, handler abort) concerns only that peer.
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        }));
    }
}

/// The request, or `None` when its body passed [`MAX_BODY_BYTES`].
async fn read_request(request: hyper::Request<Incoming>) -> Result<Option<Request>, hyper::Error> {
    let (parts, body) = request.into_parts();
    let Some(body) = read_bounded(body).await? else {
        return Ok(None);
    };
    Ok(Some(Request {
        method: parts.method.as_str().to_owned(),
        path: parts.uri.path().to_owned(),
        query: parts.uri.query().map(str::to_owned),
        headers: lower_case_headers(&parts.headers),
        body,
    }))
}

fn lower_case_headers(headers: &hyper::HeaderMap) -> BTreeMap<String, String> {
    headers
        .iter()
        .filter_map(|(name, value)| {
            Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
        })
        .collect()
}

fn into_hyper_response(response: Response) -> hyper::Response<Full<Bytes>> {
    let mut builder = hyper::Response::builder().status(response.status);
    for (name, value) in &response.headers {
        builder = builder.header(name, value);
    }
    builder
        .body(Full::new(response.body))
        .unwrap_or_else(|_| internal_error())
}

fn internal_error() -> hyper::Response<Full<Bytes>> {
    let mut response = hyper::Response::new(Full::new(Bytes::new()));
    *response.status_mut() = hyper::StatusCode::INTERNAL_SERVER_ERROR;
    response
}

/// Why an outbound call produced no response.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum CallFailure {
    /// Nothing came back within the timeout: the request may or may not have
    /// been processed.
    Timeout,
    /// The connection closed before a response: likewise ambiguous.
    Reset,
    /// Nobody was listening: the request was certainly not processed.
    Refused,
    /// An answer came, with a body past [`MAX_BODY_BYTES`]: it was not read
    /// further, so what it said is unknown.
    TooLarge,
}

impl CallFailure {
    fn from_io(error: &io::Error) -> CallFailure {
        match error.kind() {
            io::ErrorKind::ConnectionRefused => CallFailure::Refused,
            _ => CallFailure::Reset,
        }
    }
}

impl std::fmt::Display for CallFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CallFailure::Timeout => "timed out",
            CallFailure::Reset => "connection reset",
            CallFailure::Refused => "connection refused",
            CallFailure::TooLarge => {
                "answer too large (its body passed 1 MiB; chaos read no further)"
            }
        })
    }
}

/// Sends `request` to `host_port` over a fresh connection and waits at most
/// `timeout` for the whole response.
pub async fn call(
    network: &dyn Network,
    host_port: &str,
    request: Request,
    timeout: Duration,
) -> Result<Response, CallFailure> {
    match tokio::time::timeout(timeout, call_unbounded(network, host_port, request)).await {
        Ok(result) => result,
        Err(_) => Err(CallFailure::Timeout),
    }
}

async fn call_unbounded(
    network: &dyn Network,
    host_port: &str,
    request: Request,
) -> Result<Response, CallFailure> {
    let stream = network
        .connect(host_port)
        .await
        .map_err(|error| CallFailure::from_io(&error))?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake::<_, Full<Bytes>>(TokioIo::new(stream))
            .await
            .map_err(|_| CallFailure::Reset)?;

    let hyper_request = into_hyper_request(&request, host_port)?;

    // Drive the connection and the exchange together, without spawning: when the
    // exchange ends (or the timeout drops this future) the connection is dropped
    // with it, and nothing lingers in the runtime.
    let exchange = async move {
        let response = sender
            .send_request(hyper_request)
            .await
            .map_err(|_| CallFailure::Reset)?;
        read_response(response).await
    };
    tokio::pin!(exchange);
    tokio::pin!(connection);
    let mut connection_open = true;
    loop {
        tokio::select! {
            biased;
            result = &mut exchange => return result,
            _ = &mut connection, if connection_open => connection_open = false,
        }
    }
}

fn into_hyper_request(
    request: &Request,
    host_port: &str,
) -> Result<hyper::Request<Full<Bytes>>, CallFailure> {
    let mut builder = hyper::Request::builder()
        .method(request.method.as_str())
        .uri(match &request.query {
            Some(query) => format!("{}?{}", request.path, query),
            None => request.path.clone(),
        })
        .header("host", host_port);
    for (name, value) in &request.headers {
        builder = builder.header(name, value);
    }
    // A request the caller built that hyper cannot express never reached anyone.
    builder
        .body(Full::new(request.body.clone()))
        .map_err(|_| CallFailure::Refused)
}

async fn read_response(response: hyper::Response<Incoming>) -> Result<Response, CallFailure> {
    let (parts, body) = response.into_parts();
    let body = read_bounded(body)
        .await
        .map_err(|_| CallFailure::Reset)?
        .ok_or(CallFailure::TooLarge)?;
    Ok(Response {
        status: parts.status.as_u16(),
        headers: lower_case_headers(&parts.headers),
        body,
    })
}

/// An HTTP client that keeps idle connections open per destination and reuses
/// them, as production clients do. Reuse matters twice here: it is what real
/// services do between a gateway and its provider, and in the simulator every
/// avoided handshake is simulated time and real work saved.
///
/// A connection is reused only after a complete exchange; one that timed out,
/// was reset, or carried a held answer is dropped (its task aborted), never
/// returned to the pool.
#[derive(Clone)]
pub struct Client {
    network: Arc<dyn Network>,
    idle: Arc<std::sync::Mutex<BTreeMap<String, Vec<PooledConnection>>>>,
}

struct PooledConnection {
    sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    /// Drives the connection; dropping it aborts the connection.
    _driver: AbortOnDrop,
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Client {
    pub fn new(network: Arc<dyn Network>) -> Client {
        Client {
            network,
            idle: Arc::default(),
        }
    }

    pub fn network(&self) -> &Arc<dyn Network> {
        &self.network
    }

    /// Sends `request` to `host_port`, on an idle connection when there is one,
    /// and waits at most `timeout` for the whole response.
    pub async fn call(
        &self,
        host_port: &str,
        request: Request,
        timeout: Duration,
    ) -> Result<Response, CallFailure> {
        match tokio::time::timeout(timeout, self.call_unbounded(host_port, &request)).await {
            Ok(result) => result,
            Err(_) => Err(CallFailure::Timeout),
        }
    }

    async fn call_unbounded(
        &self,
        host_port: &str,
        request: &Request,
    ) -> Result<Response, CallFailure> {
        // An idle connection the server has since closed gives the request back
        // unsent; only then is it safe to try another connection with it.
        while let Some(mut connection) = self.checkout(host_port) {
            match connection
                .sender
                .try_send_request(into_hyper_request(request, host_port)?)
                .await
            {
                Ok(response) => return self.finish(host_port, connection, response).await,
                Err(error) if error.message().is_some() => continue,
                Err(_) => return Err(CallFailure::Reset),
            }
        }
        let mut connection = self.connect(host_port).await?;
        let response = connection
            .sender
            .send_request(into_hyper_request(request, host_port)?)
            .await
            .map_err(|_| CallFailure::Reset)?;
        self.finish(host_port, connection, response).await
    }

    async fn finish(
        &self,
        host_port: &str,
        connection: PooledConnection,
        response: hyper::Response<Incoming>,
    ) -> Result<Response, CallFailure> {
        let response = read_response(response).await?;
        if !connection.sender.is_closed() {
            self.lock()
                .entry(host_port.to_owned())
                .or_default()
                .push(connection);
        }
        Ok(response)
    }

    fn checkout(&self, host_port: &str) -> Option<PooledConnection> {
        let mut idle = self.lock();
        let connections = idle.get_mut(host_port)?;
        while let Some(connection) = connections.pop() {
            if !connection.sender.is_closed() {
                return Some(connection);
            }
        }
        None
    }

    async fn connect(&self, host_port: &str) -> Result<PooledConnection, CallFailure> {
        let stream = self
            .network
            .connect(host_port)
            .await
            .map_err(|error| CallFailure::from_io(&error))?;
        let (sender, connection) =
            hyper::client::conn::http1::handshake::<_, Full<Bytes>>(TokioIo::new(stream))
                .await
                .map_err(|_| CallFailure::Reset)?;
        let driver = self.network.spawn(Box::pin(async move {
            // The connection's end is seen by its sender (`is_closed`, or an
            // error on the next request); nothing more to do with it here.
            let _ = connection.await;
        }));
        Ok(PooledConnection {
            sender,
            _driver: AbortOnDrop(driver),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Vec<PooledConnection>>> {
        self.idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// An infallible handler result, for handlers that never abort.
pub fn ok(response: Response) -> Result<Response, Abort> {
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::TcpNetwork;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    // guards: an endless answer drove the harness to 1.6 GB (issue 27)
    #[tokio::test]
    async fn an_answer_past_the_limit_is_too_large_and_not_read_further() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let sent = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = sent.clone();
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 1024];
            let _ = stream.read(&mut request).await;
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await;
            let chunk = vec![b'x'; 64 * 1024];
            while stream.write_all(&chunk).await.is_ok() {
                counted.fetch_add(chunk.len(), std::sync::atomic::Ordering::Relaxed);
            }
        });
        let answer = call(
            &TcpNetwork,
            &addr,
            Request::get("/"),
            Duration::from_secs(10),
        )
        .await;
        assert_eq!(answer.unwrap_err(), CallFailure::TooLarge);
        // The sender stops once the socket's buffers are full: a few MiB, never more.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let sent = sent.load(std::sync::atomic::Ordering::Relaxed);
        assert!(sent < 64 * MAX_BODY_BYTES, "{sent} bytes were taken");
    }
}
