//! The kit's transport seams, implemented on turmoil's simulated network.

use std::io;

use chaos_kit::net::{BoxFuture, BoxStream, Listener, Network};
use tokio::task::JoinHandle;

use crate::history::Ms;
use crate::roles::clock::Timeline;

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SimNetwork;

impl Network for SimNetwork {
    fn connect<'a>(&'a self, host_port: &'a str) -> BoxFuture<'a, io::Result<BoxStream>> {
        let host_port = host_port.to_owned();
        Box::pin(async move {
            let stream = turmoil::net::TcpStream::connect(host_port).await?;
            Ok(Box::new(stream) as BoxStream)
        })
    }

    fn spawn(&self, task: BoxFuture<'static, ()>) -> JoinHandle<()> {
        spawn_on_host(task)
    }
}

/// Spawns on the host's `LocalSet`. Its task list is a plain list, so a crash
/// drops a host's tasks (and sends their sockets' FINs, each drawing a latency
/// from the seeded RNG) in spawn order. Tasks on the runtime itself would be
/// dropped in an order derived from tokio's process-wide task ids, which
/// differs between two runs of the same seed.
fn spawn_on_host(task: BoxFuture<'static, ()>) -> JoinHandle<()> {
    tokio::task::spawn_local(task)
}

pub(crate) struct SimListener(pub(crate) turmoil::net::TcpListener);

impl Listener for SimListener {
    fn accept(&mut self) -> BoxFuture<'_, io::Result<BoxStream>> {
        Box::pin(async move {
            let (stream, _) = self.0.accept().await?;
            Ok(Box::new(stream) as BoxStream)
        })
    }

    fn spawn(&self, task: BoxFuture<'static, ()>) -> JoinHandle<()> {
        spawn_on_host(task)
    }
}

/// Simulated time since the simulation started, as seen from the host that asks.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SimTimeline;

impl Timeline for SimTimeline {
    fn now(&self) -> Ms {
        turmoil::sim_elapsed().map_or(0, |elapsed| elapsed.as_millis() as Ms)
    }
}
