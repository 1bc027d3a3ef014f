//! Transport seams: a target never names `tokio::net` or `turmoil::net` itself.

use std::future::Future;
use std::io;
use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::JoinHandle;

/// A boxed future, `Send` so servers can run on a multi-threaded runtime in live mode.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A byte stream: a TCP connection, real or simulated.
pub trait Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Stream for T {}

pub type BoxStream = Box<dyn Stream>;

/// Opens outbound connections to `host:port`.
pub trait Network: Send + Sync + 'static {
    fn connect<'a>(&'a self, host_port: &'a str) -> BoxFuture<'a, io::Result<BoxStream>>;

    /// Runs a connection's background task. A simulator overrides this to keep
    /// the task with its host: when a simulated host crashes, its tasks (and
    /// the sockets they own) must end in an order the seed decides, not in the
    /// order of tokio's process-wide task ids.
    fn spawn(&self, task: BoxFuture<'static, ()>) -> JoinHandle<()> {
        tokio::spawn(task)
    }
}

/// Accepts inbound connections. Servers take their listener as an argument
/// (mini-redis style) so the same code serves real and simulated sockets.
pub trait Listener: Send + 'static {
    fn accept(&mut self) -> BoxFuture<'_, io::Result<BoxStream>>;

    /// Runs the task serving one accepted connection (see [`Network::spawn`]).
    fn spawn(&self, task: BoxFuture<'static, ()>) -> JoinHandle<()> {
        tokio::spawn(task)
    }
}

/// The real network, for live mode.
#[derive(Debug, Clone, Copy, Default)]
pub struct TcpNetwork;

impl Network for TcpNetwork {
    fn connect<'a>(&'a self, host_port: &'a str) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            let stream = tokio::net::TcpStream::connect(host_port).await?;
            stream.set_nodelay(true)?;
            Ok(Box::new(stream) as BoxStream)
        })
    }
}

impl Listener for tokio::net::TcpListener {
    fn accept(&mut self) -> BoxFuture<'_, io::Result<BoxStream>> {
        Box::pin(async move {
            let (stream, _) = tokio::net::TcpListener::accept(self).await?;
            stream.set_nodelay(true)?;
            Ok(Box::new(stream) as BoxStream)
        })
    }
}

impl Listener for Box<dyn Listener> {
    fn accept(&mut self) -> BoxFuture<'_, io::Result<BoxStream>> {
        (**self).accept()
    }

    fn spawn(&self, task: BoxFuture<'static, ()>) -> JoinHandle<()> {
        (**self).spawn(task)
    }
}
