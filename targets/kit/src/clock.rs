//! Wall-clock time as targets see it.
//!
//! Retention windows ("keys are pruned after 24 hours") are judged against this
//! clock, never against `SystemTime::now()` directly: the simulator injects an
//! offset so a 25-hour jump costs nothing instead of 90 million ticks.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub type Millis = u64;

pub trait Clock: Send + Sync + 'static {
    fn now_ms(&self) -> Millis;
}

/// The machine's clock, for live mode.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> Millis {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_millis() as Millis
    }
}

/// Whole milliseconds of a duration, saturating.
pub fn millis(duration: Duration) -> Millis {
    duration.as_millis().min(u128::from(u64::MAX)) as Millis
}
