//! The real network, as the harness uses it live: everything on 127.0.0.1.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};

use chaos_kit::net::{BoxFuture, BoxStream, Network, TcpNetwork};
use tokio::sync::watch;

/// The only address anything of the harness listens on, and the only one it
/// tells a target to listen on.
pub const LOOPBACK: Ipv4Addr = Ipv4Addr::LOCALHOST;

/// A listener on 127.0.0.1, on a port the OS picks.
pub async fn bind_loopback() -> io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(SocketAddr::from((LOOPBACK, 0))).await
}

/// A free port on 127.0.0.1 for the target: the OS picks it, and it is
/// released for the target to bind. (Another process could take it in
/// between; the target then fails to start, and says so on its stderr.)
pub fn reserve_port() -> io::Result<u16> {
    let listener = std::net::TcpListener::bind(SocketAddr::from((LOOPBACK, 0)))?;
    Ok(listener.local_addr()?.port())
}

/// The agent's network while a target may be restarting: a connection waits
/// until the target is up again, as a load balancer would hold it, instead of
/// burning the agent's retries on "connection refused" from a port nobody
/// listens on for a moment. The agent's own timeout still bounds the wait.
#[derive(Debug, Clone)]
pub struct GatedNetwork {
    pub up: watch::Receiver<bool>,
}

impl Network for GatedNetwork {
    fn connect<'a>(&'a self, host_port: &'a str) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            let mut up = self.up.clone();
            up.wait_for(|up| *up)
                .await
                .map_err(|_| io::Error::new(io::ErrorKind::ConnectionRefused, "the run is over"))?;
            TcpNetwork.connect(host_port).await
        })
    }
}
