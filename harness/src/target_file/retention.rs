//! `[retention]`: what the target promises to remember, and what it does
//! past that (docs/target-protocol.md §6). Left out: it remembers forever.

use std::time::Duration;

use chaos_kit::target::AfterRetention;
use serde::Deserialize;

/// What the target promises to remember, and what it does after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Retention {
    pub period: Duration,
    pub after: AfterRetention,
    /// Whether the target takes a shorter period from `CHAOS_RETENTION_MS`, so
    /// a live run can wait it out in seconds.
    pub shorten: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct RetentionFile {
    #[serde(with = "humantime_serde")]
    period: Duration,
    /// What a key past `period` is: a new operation unless the file says
    /// otherwise, the policy of most idempotency layers (a record that has
    /// expired is simply gone).
    #[serde(default)]
    after: AfterRetention,
    #[serde(default = "default_shorten")]
    shorten: bool,
}

fn default_shorten() -> bool {
    true
}

impl RetentionFile {
    /// Every shape serde accepts is valid: a period of zero is a target
    /// that remembers nothing, which the checks judge as such.
    pub(super) fn validate(self) -> Retention {
        Retention {
            period: self.period,
            after: self.after,
            shorten: self.shorten,
        }
    }
}
