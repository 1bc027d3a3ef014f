//! How long work reports its progress: one [`Observer`] for sweeps of trials
//! and explorations alike, and [`Bar`], the progress bar that draws it on
//! stderr, only when stderr is a terminal: piped or redirected output (CI
//! logs, `--format json | jq`) stays free of control characters. `NO_COLOR`
//! turns its colours off.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Hears how long work is going; called from worker threads.
pub trait Observer: Sync {
    /// How many units (trials, cases) will run at most.
    fn started(&self, _total: u64) {}
    /// `done` units have finished.
    fn progressed(&self, _done: u64) {}
    /// A short note beside the counts ("2 failing", "shrinking: ...").
    fn note(&self, _message: String) {}
    fn finished(&self) {}
}

/// Nobody listening.
impl Observer for () {}

pub struct Bar {
    bar: ProgressBar,
}

impl Bar {
    /// A bar counting `unit`s ("trials", "cases") on stderr, or `None` when
    /// stderr is not a terminal. The length may be set later.
    pub fn on_stderr(unit: &str, length: Option<u64>) -> Option<Bar> {
        if !std::io::stderr().is_terminal() {
            return None;
        }
        let color = std::env::var_os("NO_COLOR").is_none();
        let template = if color {
            format!("{{spinner:.cyan}} [{{elapsed_precise}}] {{wide_bar:.cyan/blue}} {{pos}}/{{len}} {unit}, {{eta}} left {{msg}}")
        } else {
            format!("{{spinner}} [{{elapsed_precise}}] {{wide_bar}} {{pos}}/{{len}} {unit}, {{eta}} left {{msg}}")
        };
        let style = ProgressStyle::with_template(&template)
            .expect("the template is valid")
            .progress_chars("=> ");
        let bar = ProgressBar::with_draw_target(length.or(Some(0)), ProgressDrawTarget::stderr());
        bar.set_style(style);
        bar.enable_steady_tick(Duration::from_millis(200));
        Some(Bar { bar })
    }
}

impl Observer for Bar {
    fn started(&self, total: u64) {
        self.bar.set_length(total);
    }

    fn progressed(&self, done: u64) {
        // Workers finish out of order: the bar only moves forward.
        if done > self.bar.position() {
            self.bar.set_position(done);
        }
    }

    fn note(&self, message: String) {
        self.bar.set_message(message);
    }

    /// Removes the bar, so what follows starts on a clean line.
    fn finished(&self) {
        self.bar.finish_and_clear();
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}
