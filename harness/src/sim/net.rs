//! The kit's transport seams, implemented on turmoil's simulated network.

use std::io;

use chaos_kit::net::{BoxFuture, BoxStream, Listener, Network};

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
}

pub(crate) struct SimListener(pub(crate) turmoil::net::TcpListener);

impl Listener for SimListener {
    fn accept(&mut self) -> BoxFuture<'_, io::Result<BoxStream>> {
        Box::pin(async move {
            let (stream, _) = self.0.accept().await?;
            Ok(Box::new(stream) as BoxStream)
        })
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
