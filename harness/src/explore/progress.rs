//! `chaos explore` on the shared progress bar ([`crate::progress::Bar`]).

use super::shrink::Shrunk;
use super::Observer;
use crate::progress::Bar;

impl Observer for Bar {
    fn cases_done(&self, run: u64, failed: u64) {
        self.set_position(run);
        if failed > 0 {
            self.set_message(format!("{failed} failing"));
        }
    }

    fn shrinking(&self, shrunk: &Shrunk) {
        self.set_message(format!(
            "shrinking: {} steps, {} fault(s) left",
            shrunk.steps,
            shrunk.case.faults.len()
        ));
    }

    fn finished(&self) {
        self.finish();
    }
}
