//! `--resumable`: the events of every Streamable HTTP stream kept in an
//! event store (rmcp's `EventStore`), so a client whose stream closed
//! before it read a result reconnects with `GET` and `Last-Event-ID` and
//! is sent the rest of that stream, the result included (MCP 2025-11-25,
//! "Resumability and Redelivery"). Without it rmcp 3.11's session manager
//! still numbers the events, but forgets a request's stream once its
//! response is sent: a resume after the result is an empty stream.
//!
//! Held in memory: a restarted process resumes nothing, as the stream it
//! would resume died with it.

use std::collections::VecDeque;
use std::sync::Mutex;

use rmcp::transport::common::server_side_http::ServerSseMessage;
use rmcp::transport::streamable_http_server::session::{
    EventId, EventStore, EventStoreError, EventStream,
};

/// Most events kept: older ones are forgotten (a client resumes a stream
/// that has just closed, not one from long ago).
const MOST_EVENTS: usize = 16_384;

/// Every event stored, with its stream, in the order sent; event `n` of
/// the process has id `n`.
#[derive(Default)]
pub struct Events {
    kept: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    /// The id of the oldest event kept.
    first: u64,
    events: VecDeque<(String, ServerSseMessage)>,
}

#[async_trait::async_trait]
impl EventStore for Events {
    async fn store_event(
        &self,
        stream_id: &str,
        event: &ServerSseMessage,
    ) -> Result<EventId, EventStoreError> {
        let mut kept = self
            .kept
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if kept.events.len() >= MOST_EVENTS {
            kept.events.pop_front();
            kept.first += 1;
        }
        let id = (kept.first + kept.events.len() as u64).to_string();
        let mut event = event.clone();
        event.event_id = Some(id.clone());
        kept.events.push_back((stream_id.to_owned(), event));
        Ok(id)
    }

    async fn replay_events_after(
        &self,
        last_event_id: &str,
    ) -> Result<EventStream, EventStoreError> {
        let id: u64 = last_event_id
            .parse()
            .map_err(|_| format!("'{last_event_id}' is not an event id of this server"))?;
        let kept = self
            .kept
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let at = (id.checked_sub(kept.first))
            .and_then(|at| usize::try_from(at).ok())
            .filter(|at| *at < kept.events.len())
            .ok_or_else(|| format!("event {last_event_id} is not kept (any more)"))?;
        let stream = kept.events[at].0.clone();
        let later: Vec<ServerSseMessage> = (kept.events.iter().skip(at + 1))
            .filter(|(of, _)| *of == stream)
            .map(|(_, event)| event.clone())
            .collect();
        Ok(Box::pin(futures_util::stream::iter(later)))
    }
}
