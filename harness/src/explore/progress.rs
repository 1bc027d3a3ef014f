//! The progress bar of `chaos explore`, on stderr, only when stderr is a
//! terminal: piped output and CI logs stay free of redraws.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::shrink::Shrunk;
use super::Observer;

pub struct TerminalProgress {
    bar: ProgressBar,
}

impl TerminalProgress {
    /// A bar over `cases` cases, or `None` when stderr is not a terminal.
    pub fn new(cases: u64) -> Option<TerminalProgress> {
        if !std::io::stderr().is_terminal() {
            return None;
        }
        let bar = ProgressBar::with_draw_target(Some(cases), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} cases, eta {eta} {msg}",
            )
            .expect("the template is valid"),
        );
        Some(TerminalProgress { bar })
    }
}

impl Observer for TerminalProgress {
    fn cases_done(&self, run: u64, failed: u64) {
        self.bar.set_position(run);
        if failed > 0 {
            self.bar.set_message(format!("{failed} failing"));
        }
    }

    fn shrinking(&self, shrunk: &Shrunk) {
        self.bar.set_message(format!(
            "shrinking: {} steps, {} fault(s) left",
            shrunk.steps,
            shrunk.case.faults.len()
        ));
        self.bar.tick();
    }

    fn finished(&self) {
        self.bar.finish_and_clear();
    }
}
