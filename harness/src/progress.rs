//! The progress bar of long work (a sweep of trials, an exploration), on
//! stderr, and only when stderr is a terminal: piped or redirected output (CI
//! logs, `--format json | jq`) stays free of control characters. `NO_COLOR`
//! turns its colours off.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::runner::Progress;

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

    pub fn set_position(&self, position: u64) {
        self.bar.set_position(position);
    }

    /// A short note after the counts ("2 failing", "shrinking: ...").
    pub fn set_message(&self, message: String) {
        self.bar.set_message(message);
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
