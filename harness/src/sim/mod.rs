//! Stage 3, simulated: one trial as a deterministic turmoil simulation.
//!
//! Agent, target, provider and authority are turmoil hosts speaking HTTP/1.1
//! over simulated TCP. The seed decides every latency and the order hosts run
//! in each step; the same seed replays the same history. Time is simulated,
//! and wall-clock jumps are an injected offset, so "25 hours later" is free.
//!
//! The driver loop between steps is where the nemesis's crashes happen
//! ([`Crashes`]): `sim.crash` drops the target's runtime (its memory, its
//! connections), `sim.bounce` starts its software again on the same durable
//! disk.

mod net;

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use chaos_kit::clock::Clock;
use chaos_kit::disk::MemoryDisk;
use chaos_kit::net::{BoxFuture, Listener};
use chaos_kit::target::TargetInfo;
use chaos_kit::TargetEnv;

use crate::callers::{CallerDriver, Staged};
use crate::history::{Ms, RunOutput};
use crate::plan::{Timing, Trial};
use crate::provider_api::ProviderApi;
use crate::roles::clock::{HarnessClock, Timeline};
use crate::roles::nemesis::{Crashes, Due, Nemesis};
use crate::roles::{Cast, Setting};
use crate::scenario::Scenario;
use crate::sweep::Transport;
use crate::trial::{Concurrency, Driver, Run};
use crate::way_in::WayIn;
use net::{SimListener, SimNetwork, SimTimeline};

/// Starts a target's server: `serve(listener, shutdown, env)`.
pub type ServeFn =
    fn(Box<dyn Listener>, BoxFuture<'static, ()>, TargetEnv) -> BoxFuture<'static, io::Result<()>>;

/// A target the simulator can host: a Rust server that takes its listener,
/// its shutdown signal and its environment (`targets/kit`), so the same code
/// runs here as a simulated host and, with its own `main`, as a process.
#[derive(Clone)]
pub struct SimTarget {
    pub info: TargetInfo,
    pub serve: ServeFn,
}

impl std::fmt::Debug for SimTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimTarget")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

impl Driver for SimTarget {
    fn transport(&self) -> Transport {
        Transport::Sim
    }

    fn concurrency(&self) -> Concurrency {
        Concurrency::EveryCore
    }

    fn plan<'a>(&self, scenario: &'a Scenario, seed: u64) -> Trial<'a> {
        Trial::new(scenario, seed, Timing::simulated(scenario))
    }

    fn run(&self, trial: &Trial<'_>, cancel: &AtomicBool) -> Run {
        match simulate(trial, self, cancel) {
            Some(output) => Run::Ran {
                output: Box::new(output),
                target: self.info.clone(),
            },
            None => Run::Cancelled,
        }
    }
}

const TARGET_HOST: &str = "target";
const PROVIDER: (&str, u16) = ("provider", 9000);
const AUTHORITY: (&str, u16) = ("authority", 9001);
const TARGET_PORT: u16 = 8080;

/// 2026-01-01T00:00:00Z: every simulation's wall clock starts here.
pub(crate) const EPOCH_MS: u64 = 1_767_225_600_000;

/// A run cannot take longer than this much simulated time; past it the run is
/// cut short and judged `unknown`.
const SIMULATION_LIMIT: Duration = Duration::from_secs(120);

/// Runs one trial against one simulated target; `None` when `cancel` was set
/// meanwhile.
fn simulate(trial: &Trial<'_>, target: &SimTarget, cancel: &AtomicBool) -> Option<RunOutput> {
    let scenario = trial.scenario;
    let timing = trial.timing;
    let timeline: Arc<dyn Timeline> = Arc::new(SimTimeline);
    let clock = Arc::new(HarnessClock::on_timeline(EPOCH_MS, timeline.clone()));

    let cast = Cast::new(
        trial,
        Setting {
            timeline: timeline.clone(),
            clock: clock.clone(),
            api: ProviderApi::default(),
            live: None,
        },
    );

    let mut sim = turmoil::Builder::new()
        .rng_seed(trial.seed)
        .enable_random_order()
        .epoch(UNIX_EPOCH + Duration::from_millis(EPOCH_MS))
        .tick_duration(timing.tick)
        .min_message_latency(timing.min_latency)
        .max_message_latency(timing.max_latency)
        .simulation_duration(SIMULATION_LIMIT)
        .build();

    {
        let provider = cast.provider.clone();
        sim.host(PROVIDER.0, move || {
            let provider = provider.clone();
            async move {
                let listener = turmoil::net::TcpListener::bind(("0.0.0.0", PROVIDER.1)).await?;
                let handler =
                    chaos_kit::http::handler(move |request| provider.clone().handle(request));
                chaos_kit::http::serve(SimListener(listener), std::future::pending(), handler)
                    .await?;
                Ok(())
            }
        });
    }
    {
        let authority = cast.authority.clone();
        sim.host(AUTHORITY.0, move || {
            let authority = authority.clone();
            async move {
                let listener = turmoil::net::TcpListener::bind(("0.0.0.0", AUTHORITY.1)).await?;
                let handler =
                    chaos_kit::http::handler(move |request| authority.clone().handle(request));
                chaos_kit::http::serve(SimListener(listener), std::future::pending(), handler)
                    .await?;
                Ok(())
            }
        });
    }
    {
        // The disk lives out here, outside the host factory: it survives a
        // crash. Everything the factory builds (the HTTP client and its pooled
        // connections, the target's memory) is new on every start.
        let disk: Arc<dyn chaos_kit::disk::Disk> = Arc::new(MemoryDisk::new());
        let clock = clock.clone() as Arc<dyn Clock>;
        let contract = scenario.provider.contract(scenario.provider.retention);
        let upstream_timeout = timing.upstream_timeout;
        let serve = target.serve;
        sim.host(TARGET_HOST, move || {
            let env = TargetEnv::new(
                format!("{}:{}", PROVIDER.0, PROVIDER.1),
                format!("{}:{}", AUTHORITY.0, AUTHORITY.1),
                contract,
                upstream_timeout,
                Arc::new(SimNetwork),
                clock.clone(),
                disk.clone(),
            );
            async move {
                let listener = turmoil::net::TcpListener::bind(("0.0.0.0", TARGET_PORT)).await?;
                serve(
                    Box::new(SimListener(listener)),
                    Box::pin(std::future::pending()),
                    env,
                )
                .await?;
                Ok(())
            }
        });
    }

    {
        let env = cast.agent_env(
            chaos_kit::http::Client::new(Arc::new(SimNetwork)),
            format!("{TARGET_HOST}:{TARGET_PORT}"),
            WayIn::default(),
        );
        let calling = CallerDriver::default().call(trial, env, &Staged::default());
        sim.client("agent", async move {
            calling.await;
            Ok(())
        });
    }

    let error = drive(&mut sim, &cast.nemesis, cancel)?;
    Some(cast.finish(elapsed_ms(&sim), error))
}

/// Steps the simulation to the end, carrying out the nemesis's crashes and
/// restarts between steps: `Some(why it stopped early)`, or `None` when
/// cancelled. The flag is read at every step, so a signal abandons even a
/// trial of many calls at once; before, SIGTERM waited for every trial in
/// flight (issue 15).
fn drive(
    sim: &mut turmoil::Sim<'_>,
    nemesis: &Nemesis,
    cancel: &AtomicBool,
) -> Option<Option<String>> {
    let mut crashes = Crashes::default();
    loop {
        if cancel.load(Ordering::Relaxed) {
            return None;
        }
        match sim.step() {
            Ok(true) => return Some(None),
            Ok(false) => {}
            Err(error) => return Some(Some(format!("the simulation stopped: {error}"))),
        }
        while let Some(due) = crashes.due(nemesis, elapsed_ms(sim)) {
            match due {
                // A second crash while the target is down only delays its restart.
                Due::Kill if sim.is_host_running(TARGET_HOST) => {
                    sim.crash(TARGET_HOST);
                    crashes.killed(nemesis, elapsed_ms(sim), "target killed");
                }
                Due::Kill => {}
                Due::Restart => {
                    sim.bounce(TARGET_HOST);
                    crashes.restarted(nemesis, elapsed_ms(sim));
                }
            }
        }
    }
}

fn elapsed_ms(sim: &turmoil::Sim<'_>) -> Ms {
    sim.elapsed().as_millis() as Ms
}
