//! One live trial, along the simulator's seams: the harness's servers for
//! this trial, the target started or reused, the caller, the watch loop, and
//! what was collected. Admission was decided for the whole cell before
//! ([`super::admit`]); a trial here only fails to run for reasons of its own
//! (the target never got ready, died, hung).

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chaos_kit::http::{self, CallFailure};
use tokio::sync::watch;

use crate::fault::Fault;
use crate::history::{AttemptEnd, RunOutput};
use crate::plan::Trial;
use crate::roles::clock::{HarnessClock, RealTimeline, Timeline};
use crate::roles::{Cast, LiveTimes, Setting};
use crate::sweep::Payloads;
use crate::target_file::TargetFile;
use crate::way_in::Sent;

use super::authority;
use super::effects::Effects;
use super::error::{Error, Result};
use super::launch::{Launch, TargetProcess};
use super::net::{self, GatedNetwork};
use super::schedule::{self, LiveTime};
use super::slot::{reusable, served_with, Running, Served, Slot};
use super::start::{exposure, healthy, launch, lost_its_port, start, Addrs, PORT_RETRIES};
use super::watch::{run_limit, Watch, Watched};
use super::Starts;

/// A trial that ran: its output, and the target's retention in force.
pub(super) type Ran = (RunOutput, Option<Duration>);

/// Runs one trial against `target`, on a runtime of its own: when the trial
/// ends, everything it started (held answers, connections) ends with it.
/// The target process may be `slot`'s, and may stay there for the next
/// trial. `Ok(None)` when cancelled.
pub(super) fn run_trial(
    trial: &Trial<'_>,
    target: &TargetFile,
    cancel: &AtomicBool,
    slot: &mut Slot,
    starts: &Starts,
    payloads: Payloads,
) -> Result<Option<Ran>> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(Error::Runtime)?;
    let run = runtime.block_on(drive(trial, target, cancel, slot, starts, payloads));
    runtime.shutdown_timeout(Duration::from_millis(200));
    run
}

async fn drive(
    trial: &Trial<'_>,
    target: &TargetFile,
    cancel: &AtomicBool,
    slot: &mut Slot,
    starts: &Starts,
    payloads: Payloads,
) -> Result<Option<Ran>> {
    let scenario = trial.scenario;
    // Admitted for the cell, so this only fails if the file changed under us.
    let time = schedule::live_time(scenario, target.retention, target.way_in.duplicate_window())
        .map_err(|why| Error::NotLive {
            scenario: scenario.name.clone(),
            why,
        })?;
    // What the kept process served before: if it serves this trial too,
    // their late requests are told apart from this trial's. A subject this
    // trial names too (a lab fixture's fixed record) is this trial's.
    let mut earlier = (slot.running.as_ref())
        .map(|running| running.served.clone())
        .unwrap_or_default();
    for operation in &trial.operations {
        earlier.remove(&operation.subject);
    }
    let timeline: Arc<dyn Timeline> = Arc::new(RealTimeline::start());
    // The same instant on the wall clock, to place rows the database stamped.
    let wall_start = std::time::SystemTime::now();
    let cast = Cast::new(
        trial,
        Setting {
            timeline: timeline.clone(),
            clock: Arc::new(HarnessClock::system()),
            api: target.provider_api,
            live: Some(LiveTimes {
                provider_retention: time.provider_retention,
                clock_waits: time.clock_waits.clone(),
                approval_expiries: &time.approval_expiries,
                earlier,
                tool_names: target.way_in.tool_names().clone(),
            }),
        },
    );

    // The harness's servers, on the slot's ports (a kept process was told
    // them), for this trial only: until `stop` is dropped.
    let (stop, stopped) = watch::channel(());
    let mut addrs = serve_harness(trial, target, &cast, slot, stopped)?;
    // An earlier trial's messages still on the broker (the agent's retries
    // published while a slow consumer restarted) are that trial's work:
    // gone before this trial's consumer starts or is reused.
    target
        .way_in
        .before_trial()
        .await
        .map_err(|why| Error::NotPrepared {
            target: target.name.clone(),
            why,
        })?;
    let Some((launch, mut process, process_dir, served)) =
        start_or_reuse(trial, target, &time, &mut addrs, slot, cancel, starts).await?
    else {
        return Ok(None);
    };
    adapt_authority(target, &cast, &launch, payloads)?;
    // The broker's duplicate window for this trial (shortened when a clock
    // jump is to cross it), set before the first message is published.
    if let Some(window) = time.duplicate_window {
        if let Err(why) = target.way_in.set_duplicate_window(window).await {
            process.kill();
            return Err(Error::NotPrepared {
                target: target.name.clone(),
                why,
            }
            .into());
        }
    }

    let (gate, gate_open) = watch::channel(true);
    let env = cast.agent_env(
        http::Client::new(Arc::new(GatedNetwork { up: gate_open })),
        addrs.target.clone(),
        target.way_in.clone(),
    );
    // The model's endpoint, when the target is a runtime whose model chaos
    // plays: served from now until the trial is over.
    let model_listener = net::for_this_trial(&slot.model).map_err(Error::Listen)?;
    let staged = target
        .caller
        .stage(trial, &env, model_listener, stop.subscribe());
    let mut caller = tokio::spawn(target.caller.call(trial, env, &staged));
    let mut rows = match watch_rows(trial, target).await {
        Ok(rows) => rows,
        Err(error) => {
            caller.abort();
            process.kill();
            return Err(error);
        }
    };
    let watch = Watch {
        target,
        launch: &launch,
        target_addr: &addrs.target,
        nemesis: &cast.nemesis,
        timeline: &timeline,
        gate: &gate,
        starts,
        cancel,
    };
    let limit = run_limit(trial, target, &time);
    let watched = watch.run(&mut caller, &mut process, &mut rows, limit).await;
    caller.abort();
    let Watched::Over(error) = watched else {
        return Ok(None);
    };
    let error = settle(trial, target, &cast, &mut process, error)?;
    // A runtime that never asked the model, or asked what chaos could not
    // read, was not tested: judged, its missing effect would read as the
    // runtime's fault. The trial is not run, and says why.
    if let Some(why) = staged.problem() {
        process.kill();
        return Err(Error::Caller {
            target: target.name.clone(),
            why,
        }
        .into());
    }
    let error = error.or_else(|| {
        staged
            .incomplete()
            .map(|why| Box::new(Error::RunNeverCompleted(why)))
    });
    let error = unacked(trial, target, &cast, &mut process, timeline.now(), error).await;
    // Asked before the provider stops: a request still open there is this
    // trial's work going on after its answer (a held answer its SDK still
    // waits for, then retries), which would reach the next trial.
    let still_working = cast.provider.open_requests() > 0;
    drop(stop);
    let keepable = error.is_none() && reusable(trial, target) && process.exited().is_none();
    if keepable && !still_working {
        slot.running = Some(Running {
            process,
            launch,
            dir: process_dir,
            served: served_with(served, trial),
        });
    } else {
        if keepable {
            starts.replaced.fetch_add(1, Ordering::Relaxed);
        }
        process.kill();
    }
    let mut output = cast.finish(timeline.now(), error.map(|error| error.to_string()));
    let called = trial.calls.iter().map(|call| call.tool.clone()).collect();
    let attempts = (output.history.attempts.iter())
        .map(|attempt| attempt.attempt_id.as_str())
        .collect();
    output.history.mcp = target.way_in.seen(&addrs.target, &called, &attempts);
    starts
        .late
        .fetch_add(output.ledger.late.len() as u64, Ordering::Relaxed);
    collect_rows(trial, target, rows, &mut output, wall_start).await;
    Ok(Some((output, time.target_retention)))
}

/// Serves the provider (in its API's shape) and the authority on the slot's
/// ports for this trial; returns where each listens, and the target's port.
fn serve_harness(
    trial: &Trial<'_>,
    target: &TargetFile,
    cast: &Cast,
    slot: &Slot,
    stopped: watch::Receiver<()>,
) -> Result<Addrs> {
    let provider = net::for_this_trial(&slot.provider).map_err(Error::Listen)?;
    let provider_addr = provider.local_addr().map_err(Error::Listen)?;
    target.provider_api.serve(
        provider,
        cast.provider.clone(),
        trial.sent(),
        stopped.clone(),
    );
    let authority = net::for_this_trial(&slot.authority).map_err(Error::Listen)?;
    let authority_addr = authority.local_addr().map_err(Error::Listen)?;
    let handler = {
        let authority = cast.authority.clone();
        http::handler(move |request| authority.clone().handle(request))
    };
    let mut stopped = stopped;
    tokio::spawn(http::serve(
        authority,
        async move {
            // Completes when the sender is dropped: the trial is over.
            while stopped.changed().await.is_ok() {}
        },
        handler,
    ));
    Ok(Addrs {
        target: slot.target_addr.clone(),
        provider: provider_addr.to_string(),
        authority: authority_addr.to_string(),
        model: slot.model.local_addr().map_err(Error::Listen)?.to_string(),
    })
}

/// A process kept from an earlier trial serves this one if it was started
/// with the same environment, is still up, and nothing in this scenario
/// kills it; otherwise this trial starts its own. `None` when cancelled;
/// with the process, the trials it served before (none when new).
///
/// A start that lost its port to another program (see [`lost_its_port`])
/// is tried again on a new port, at most [`PORT_RETRIES`] times: the port
/// is chaos's choice, not the target's fault. The slot and `addrs` keep the
/// new one.
async fn start_or_reuse(
    trial: &Trial<'_>,
    target: &TargetFile,
    time: &LiveTime,
    addrs: &mut Addrs,
    slot: &mut Slot,
    cancel: &AtomicBool,
    starts: &Starts,
) -> Result<Option<(Launch, TargetProcess, std::path::PathBuf, Served)>> {
    if let Some(mut running) = slot.running.take().filter(|_| reusable(trial, target)) {
        let wanted = launch(target, trial, time, &running.dir, addrs);
        let same = wanted.env == running.launch.env && running.process.exited().is_none();
        if same && healthy(target, &addrs.target).await {
            return Ok(Some((
                running.launch,
                running.process,
                running.dir,
                running.served,
            )));
        }
        running.process.kill();
    }
    let mut retries = 0;
    loop {
        let process_dir = slot.new_process_dir().map_err(Error::StateDir)?;
        let launch = launch(target, trial, time, &process_dir, addrs);
        let process = match start(&launch, &addrs.target, target, cancel).await {
            Ok(Some(process)) => process,
            Ok(None) => return Ok(None),
            Err(error) if retries < PORT_RETRIES && lost_its_port(&error, &addrs.target) => {
                retries += 1;
                let port = net::reserve_port().map_err(Error::NoPort)?;
                let moved = format!("{}:{port}", net::LOOPBACK);
                // A closed stderr is no reason to stop (issue 15).
                let _ = writeln!(
                    std::io::stderr(),
                    "chaos: target '{}': another program took {} before the target could listen there; starting it again on {moved}",
                    target.name,
                    addrs.target,
                );
                slot.target_addr.clone_from(&moved);
                addrs.target = moved;
                continue;
            }
            Err(error) => return Err(error),
        };
        starts.got_ready();
        exposure(target, &addrs.target)?;
        return Ok(Some((launch, process, process_dir, Served::new())));
    }
}

/// A target that keeps its own callers learns of this trial's tokens before
/// the first call, and of each revocation at its protocol point.
fn adapt_authority(
    target: &TargetFile,
    cast: &Cast,
    launch: &Launch,
    payloads: Payloads,
) -> Result<()> {
    let Some(commands) = &target.authority else {
        return Ok(());
    };
    cast.authority
        .adapted_by(Arc::new(authority::CommandAdapter {
            commands: commands.clone(),
            workdir: target.workdir.clone(),
            env: launch.env.clone(),
            quote_values: payloads == Payloads::Included,
        }));
    match cast.authority.adapter_failure() {
        Some(why) => Err(Error::Authority {
            target: target.name.clone(),
            why,
        }
        .into()),
        None => Ok(()),
    }
}

/// The rows of a target whose commits are rows, watched while the trial
/// runs when a fault waits for the Nth commit.
async fn watch_rows(trial: &Trial<'_>, target: &TargetFile) -> Result<Option<Effects>> {
    match &target.effects {
        Some(query) if trial.scenario.faults.iter().any(Fault::acts_on_dispatches) => {
            match Effects::open(query, trial).await {
                Ok(rows) => Ok(Some(rows)),
                Err(why) => Err(Error::Effects {
                    target: target.name.clone(),
                    why,
                }
                .into()),
            }
        }
        _ => Ok(None),
    }
}

/// What the trial's end says beyond the watch: a revocation the target's
/// store never got is no trial at all (`Err`, killing the process), and a
/// target that answered nothing at all hangs.
fn settle(
    trial: &Trial<'_>,
    target: &TargetFile,
    cast: &Cast,
    process: &mut TargetProcess,
    error: Option<Box<Error>>,
) -> Result<Option<Box<Error>>> {
    // Judged, it would read as the target's fault: the trial did not happen
    // as the scenario says, so it is not run.
    if let Some(why) = cast.authority.adapter_failure() {
        process.kill();
        return Err(Error::Authority {
            target: target.name.clone(),
            why,
        }
        .into());
    }
    let attempts = cast.attempts();
    let unanswered = attempts.iter().all(|attempt| {
        matches!(
            attempt.end,
            AttemptEnd::Failed {
                failure: CallFailure::Timeout
            }
        )
    });
    if error.is_none() && !attempts.is_empty() && unanswered {
        return Ok(Some(
            Error::Unanswered {
                attempts: attempts.len(),
                timeout: trial.timing.agent_timeout,
                stderr: process.stderr_tail(),
            }
            .into(),
        ));
    }
    Ok(error)
}

/// A consumer on a broker that answered none of the trial's messages: the
/// broker says what it still holds unacked (which message, how often
/// delivered, since when), read once the consumer is stopped, since
/// RabbitMQ puts a message back only when its consumer's connection closes.
/// That is the trial's reason, in place of "the target hangs"; anything
/// else that cut the trial short stays its reason.
async fn unacked(
    trial: &Trial<'_>,
    target: &TargetFile,
    cast: &Cast,
    process: &mut TargetProcess,
    now: crate::history::Ms,
    error: Option<Box<Error>>,
) -> Option<Box<Error>> {
    let attempts = cast.attempts();
    let hung = matches!(error.as_deref(), None | Some(Error::Unanswered { .. }));
    let unanswered = !attempts.is_empty() && attempts.iter().all(crate::way_in::broker::unanswered);
    if !target.way_in.settles() || !hung || !unanswered {
        return error;
    }
    process.kill();
    let dispatches = cast.provider.ledger().dispatches;
    let published: Vec<Sent> = attempts
        .iter()
        .map(|attempt| Sent {
            id: attempt.attempt_id.clone(),
            ago: Duration::from_millis(now.saturating_sub(attempt.sent_at)),
            acted: dispatches.iter().any(|dispatch| {
                dispatch
                    .message
                    .as_ref()
                    .is_none_or(|message| *message == attempt.attempt_id)
            }),
        })
        .collect();
    match target.way_in.unsettled(&published).await {
        Some(held) => Some(Box::new(Error::Unsettled {
            attempts: attempts.len(),
            timeout: trial.timing.agent_timeout,
            held,
            stderr: process.stderr_tail(),
        })),
        None => error,
    }
}

/// The effects of a target whose commits are rows, read into the ledger.
async fn collect_rows(
    trial: &Trial<'_>,
    target: &TargetFile,
    rows: Option<Effects>,
    output: &mut RunOutput,
    wall_start: std::time::SystemTime,
) {
    let Some(query) = &target.effects else {
        return;
    };
    let read = match rows {
        Some(rows) => rows.read().await,
        None => match Effects::open(query, trial).await {
            Ok(rows) => rows.read().await,
            Err(why) => Err(why),
        },
    };
    match read {
        Ok(rows) => super::effects::record(
            &mut output.ledger,
            rows,
            &trial.scenario.workload.tool,
            wall_start,
        ),
        Err(why) => {
            output
                .error
                .get_or_insert(format!("target '{}' [effects]: {why}", target.name));
        }
    }
}
