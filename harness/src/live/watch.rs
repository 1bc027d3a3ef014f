//! The watch loop of a live trial, the live side of the simulator's run
//! loop: while the caller runs, it feeds the nemesis the rows a database
//! target commits, carries out the crash schedule ([`Crashes`]: SIGKILL the
//! target's process group, start it again after `restart-after`), and ends
//! the trial when the target dies on its own or outlives every honest bound.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::fault::Live;
use crate::plan::Trial;
use crate::roles::clock::Timeline;
use crate::roles::nemesis::{Crashes, Due, Nemesis};
use crate::target_file::TargetFile;

use super::effects::Effects;
use super::error::Error;
use super::launch::{describe_exit, Launch, TargetProcess};
use super::schedule::LiveTime;
use super::start::{exposure, start};
use super::Starts;

/// How often the loop looks at the nemesis, the target and the cancel flag.
const POLL: Duration = Duration::from_millis(2);

/// What the loop watches, for one trial.
pub(super) struct Watch<'a> {
    pub target: &'a TargetFile,
    pub launch: &'a Launch,
    pub target_addr: &'a str,
    pub nemesis: &'a Arc<Nemesis>,
    pub timeline: &'a Arc<dyn Timeline>,
    /// Closed while the target is down: the agent's next connection waits
    /// for the restart, as "kill, restart, then retry" asks.
    pub gate: &'a watch::Sender<bool>,
    pub starts: &'a Starts,
    pub cancel: &'a AtomicBool,
}

/// How the watch ended.
pub(super) enum Watched {
    /// The caller is done, or the run was cut short for the reason given.
    Over(Option<Box<Error>>),
    /// Ctrl-C: nothing is judged.
    Cancelled,
}

impl Watch<'_> {
    /// Watches until the caller ends, the run must be cut short, or it is
    /// cancelled; `process` is the target's current process throughout.
    pub(super) async fn run(
        &self,
        caller: &mut JoinHandle<()>,
        process: &mut TargetProcess,
        rows: &mut Option<Effects>,
        limit: Duration,
    ) -> Watched {
        let started = Instant::now();
        let mut crashes = Crashes::default();
        loop {
            tokio::select! {
                ended = &mut *caller => {
                    let error = ended.err().map(|failure| Error::Agent(failure.to_string()).into());
                    return Watched::Over(error);
                }
                _ = tokio::time::sleep(POLL) => {}
            }
            if self.cancel.load(Ordering::Relaxed) {
                return Watched::Cancelled;
            }
            if let Some(watched) = rows {
                if let Err(why) = self.commits(watched).await {
                    return Watched::Over(Some(why));
                }
            }
            match self.crash_schedule(&mut crashes, process).await {
                Ok(true) => {}
                Ok(false) => return Watched::Cancelled,
                Err(error) => return Watched::Over(Some(error)),
            }
            if !crashes.down() {
                if let Some(status) = process.exited() {
                    return Watched::Over(Some(
                        Error::ExitedDuringRun {
                            status: describe_exit(status),
                            stderr: process.stderr_tail(),
                        }
                        .into(),
                    ));
                }
            }
            if started.elapsed() > limit {
                return Watched::Over(Some(
                    Error::RunTooLong {
                        limit: Duration::from_secs(limit.as_secs()),
                        stderr: process.stderr_tail(),
                    }
                    .into(),
                ));
            }
        }
    }

    /// A crash after the Nth commit, for a target whose commits are rows:
    /// the Nth row seen is the Nth commit.
    async fn commits(&self, rows: &mut Effects) -> Result<(), Box<Error>> {
        let new = rows.new_rows().await.map_err(|why| Error::Effects {
            target: self.target.name.clone(),
            why,
        })?;
        for nth in new {
            self.nemesis.dispatch(nth);
            self.nemesis.after_commit(nth);
        }
        Ok(())
    }

    /// Carries out what the crash schedule says is due now. `Ok(false)`
    /// when cancelled during a restart.
    async fn crash_schedule(
        &self,
        crashes: &mut Crashes,
        process: &mut TargetProcess,
    ) -> Result<bool, Box<Error>> {
        while let Some(due) = crashes.due(self.nemesis, self.timeline.now()) {
            match due {
                Due::Kill => {
                    self.gate.send_replace(false);
                    process.kill();
                    crashes.killed(
                        self.nemesis,
                        self.timeline.now(),
                        "target killed (SIGKILL to its process group)",
                    );
                }
                Due::Restart => {
                    let restarted = start(self.launch, self.target_addr, self.target, self.cancel)
                        .await
                        .map_err(|why| Box::new(Error::NoRestart(why)))?;
                    let Some(restarted) = restarted else {
                        return Ok(false);
                    };
                    self.starts.got_ready();
                    *process = restarted;
                    exposure(self.target, self.target_addr)?;
                    crashes.restarted(self.nemesis, self.timeline.now());
                    self.gate.send_replace(true);
                }
            }
        }
        Ok(true)
    }
}

/// The longest an honest run of `trial` can take; past it the target hangs.
/// Every attempt of the agent is bounded, so this is a safety net, not a guess.
pub(super) fn run_limit(trial: &Trial<'_>, target: &TargetFile, time: &LiveTime) -> Duration {
    let timing = trial.timing;
    let attempts: u32 = trial.calls.iter().map(|call| call.attempts).sum();
    let waits: Duration = time.clock_waits.values().map(|wait| wait.wait).sum();
    let restarts = trial
        .scenario
        .faults
        .iter()
        .filter(|fault| fault.live() == Live::Restarts)
        .count() as u32;
    // A `Retry-After` wait is bounded by the budget left, or else by an
    // attempt's timeout; a `retry-for` budget runs per worker, and the
    // workers of a call run side by side.
    let retry_for: Duration = timing.retry_for.unwrap_or_default() * trial.calls.len() as u32;
    (timing.agent_timeout * 2 + timing.backoff_max) * attempts
        + retry_for * 2
        + waits
        + (target.ready_timeout + Duration::from_secs(1)) * restarts
        + Duration::from_secs(10)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::plan::Timing;
    use crate::scenario::Scenario;

    #[test]
    fn the_run_limit_grows_with_attempts_restarts_and_the_retry_budget() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
        let load = |name: &str| Scenario::load(&root.join(format!("{name}.toml"))).unwrap();
        let target = TargetFile::parse(
            Path::new("t/target.toml"),
            "name = \"t\"\ncommand = [\"x\"]",
        )
        .unwrap();
        let limit = |scenario: &Scenario, timing: Timing| {
            let trial = Trial::new(scenario, 1, timing);
            let time = super::super::schedule::live_time(
                scenario,
                target.retention,
                target.way_in.duplicate_window(),
            )
            .unwrap();
            run_limit(&trial, &target, &time)
        };
        let lost = load("lost-response-keyed");
        let plain = limit(&lost, Timing::live());
        let patient = limit(
            &lost,
            Timing {
                retry_for: Some(Duration::from_secs(30)),
                ..Timing::live()
            },
        );
        assert!(
            patient >= plain + Duration::from_secs(60),
            "{patient:?} vs {plain:?}"
        );
        let restart = load("worker-restart");
        assert!(
            limit(&restart, Timing::live()) >= target.ready_timeout + Duration::from_secs(11),
            "a restart must be able to wait out the ready-timeout"
        );
    }
}
