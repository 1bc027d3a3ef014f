//! Two notions of time in a run.
//!
//! - The [`Timeline`]: milliseconds since the run started, on which the history
//!   is written. In the simulator it is simulated time.
//! - The [`HarnessClock`]: the wall clock roles judge retention by. It can be
//!   moved forward by the nemesis; a jump is an offset, so it costs nothing.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use chaos_kit::clock::{Clock, Millis, SystemClock};

use crate::history::Ms;

pub(crate) trait Timeline: Send + Sync + 'static {
    fn now(&self) -> Ms;
}

/// Real elapsed time since a start instant, for live runs.
#[derive(Debug)]
pub(crate) struct RealTimeline {
    start: Instant,
}

impl RealTimeline {
    pub(crate) fn start() -> Self {
        RealTimeline {
            start: Instant::now(),
        }
    }
}

impl Timeline for RealTimeline {
    fn now(&self) -> Ms {
        self.start.elapsed().as_millis() as Ms
    }
}

/// A wall clock with an injectable forward offset.
pub(crate) struct HarnessClock {
    base: Box<dyn Fn() -> Millis + Send + Sync>,
    offset_ms: AtomicU64,
}

impl HarnessClock {
    /// `epoch_ms` plus the timeline's elapsed time: deterministic in a simulation.
    pub(crate) fn on_timeline(epoch_ms: Millis, timeline: Arc<dyn Timeline>) -> HarnessClock {
        HarnessClock {
            base: Box::new(move || epoch_ms + timeline.now()),
            offset_ms: AtomicU64::new(0),
        }
    }

    /// The machine's clock.
    pub(crate) fn system() -> HarnessClock {
        HarnessClock {
            base: Box::new(|| SystemClock.now_ms()),
            offset_ms: AtomicU64::new(0),
        }
    }

    pub(crate) fn advance(&self, by_ms: Millis) {
        self.offset_ms.fetch_add(by_ms, Ordering::SeqCst);
    }

    pub(crate) fn offset_ms(&self) -> Millis {
        self.offset_ms.load(Ordering::SeqCst)
    }
}

impl Clock for HarnessClock {
    fn now_ms(&self) -> Millis {
        (self.base)() + self.offset_ms()
    }
}

impl std::fmt::Debug for HarnessClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HarnessClock")
            .field("offset_ms", &self.offset_ms())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(Ms);
    impl Timeline for Fixed {
        fn now(&self) -> Ms {
            self.0
        }
    }

    #[test]
    fn a_jump_moves_the_wall_clock_not_the_timeline() {
        let timeline: Arc<dyn Timeline> = Arc::new(Fixed(5));
        let clock = HarnessClock::on_timeline(1_000, timeline.clone());
        clock.advance(25 * 3_600_000);
        assert_eq!(clock.now_ms(), 1_005 + 25 * 3_600_000);
        assert_eq!(timeline.now(), 5);
    }
}
