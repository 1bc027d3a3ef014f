//! The progress bar of a long sweep, on stderr, and only when stderr is a
//! terminal: piped or redirected output (CI logs, `--format json | jq`) stays
//! free of control characters. `NO_COLOR` turns its colours off.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::runner::Progress;

pub struct Bar {
    bar: ProgressBar,
}

impl Bar {
    /// A bar on stderr, or `None` when stderr is not a terminal.
    pub fn on_stderr() -> Option<Bar> {
        if !std::io::stderr().is_terminal() {
            return None;
        }
        let color = std::env::var_os("NO_COLOR").is_none();
        let template = if color {
            "{spinner:.cyan} [{elapsed_precise}] {wide_bar:.cyan/blue} {pos}/{len} trials, {eta} left"
        } else {
            "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} trials, {eta} left"
        };
        let style = ProgressStyle::with_template(template)
            .expect("the template is valid")
            .progress_chars("=> ");
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
        bar.set_style(style);
        bar.enable_steady_tick(Duration::from_millis(200));
        Some(Bar { bar })
    }

    /// Removes the bar, so what follows starts on a clean line.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Progress for Bar {
    fn started(&self, total: usize) {
        self.bar.set_length(total as u64);
    }

    fn trial_done(&self, _done: usize, _total: usize) {
        self.bar.inc(1);
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}
