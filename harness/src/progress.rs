//! How long work reports its progress: one [`Observer`] for sweeps of trials
//! and explorations alike; [`Bar`], the progress bar that draws it on
//! stderr, only when stderr is a terminal; and [`Lines`], for stderr that is
//! not one (a CI log), a line per finished cell, nextest style, so a long
//! live run is never silent and piped output stays free of control
//! characters. `NO_COLOR` turns the bar's colours off.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::trial::Judged;

/// Hears how long work is going; called from worker threads.
pub trait Observer: Sync {
    /// How many units (trials, cases) will run at most.
    fn started(&self, _total: u64) {}
    /// `done` units have finished.
    fn progressed(&self, _done: u64) {}
    /// A short note beside the counts ("2 failing", "shrinking: ...").
    fn note(&self, _message: String) {}
    /// A cell of a sweep is done: all its trials (this shard's) were judged,
    /// or one could not run, which ends the cell.
    fn cell_finished(&self, _done: &CellDone<'_>) {}
    /// A trial was judged, against the target in column `column` (named
    /// `target`): what a run's trace export (`--otlp`) reads.
    fn judged(&self, _column: usize, _target: &str, _judged: &Judged<'_>) {}
    fn finished(&self) {}
}

/// A finished cell, as a sweep reports it: plain text its producer (the
/// report's fold) renders from the settled counts, so progress needs nothing
/// of the report and the report may depend on progress, not both ways.
pub struct CellDone<'a> {
    /// The verdict the report will give it ("FAIL (stuck)"), in any case.
    pub verdict: &'a str,
    pub scenario: &'a str,
    pub target: &'a str,
    /// What was seen: effects, seeds, or why it could not run.
    pub observed: Vec<String>,
    /// The time its trials took, added up (trials of a cell may run side by side).
    pub elapsed: Duration,
    /// How many cells are done, this one included, of `cells`.
    pub done: usize,
    pub cells: usize,
}

impl CellDone<'_> {
    /// `        FAIL [   0.412s] ( 3/45) changed-payload x fresh-key: effects 2/1 · 3/3 seeds`:
    /// the verdict right-aligned, then the time, so a CI log scans by column.
    pub fn line(&self) -> String {
        // `PASS (1 warning)`, `UNKNOWN (vacuous)`: the status shouts, its note does not.
        let verdict = match self.verdict.split_once(' ') {
            Some((status, note)) => format!("{} {note}", status.to_uppercase()),
            None => self.verdict.to_uppercase(),
        };
        let width = self.cells.to_string().len();
        format!(
            "{verdict:>12} [{:>8.3}s] ({:>width$}/{}) {} x {}: {}",
            self.elapsed.as_secs_f64(),
            self.done,
            self.cells,
            self.scenario,
            self.target,
            self.observed.join(" · "),
        )
    }
}

/// A line per finished cell on stderr, for a log rather than a terminal.
pub struct Lines {
    /// Writes to stderr. The command hands over its own writer (one that
    /// shrugs off a closed stderr), so progress imports nothing of the CLI.
    write: fn(&str),
}

impl Lines {
    /// Lines on stderr, through `write`, when it is not a terminal (a bar
    /// draws there otherwise). `write` must not panic on a closed stderr:
    /// a log nobody reads is no reason to stop the run.
    pub fn on_stderr(write: fn(&str)) -> Option<Lines> {
        (!std::io::stderr().is_terminal()).then_some(Lines { write })
    }
}

impl Observer for Lines {
    fn cell_finished(&self, done: &CellDone<'_>) {
        (self.write)(&format!("{}\n", done.line()));
    }
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
