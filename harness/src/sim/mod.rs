//! Stage 3, simulated: one trial as a deterministic turmoil simulation.
//!
//! Agent, target, provider and authority are turmoil hosts speaking HTTP/1.1
//! over simulated TCP. The seed decides every latency and the order hosts run
//! in each step; the same seed replays the same history. Time is simulated,
//! and wall-clock jumps are an injected offset, so "25 hours later" is free.
//!
//! The driver loop between steps is where the nemesis's crashes happen:
//! `sim.crash` drops the target's runtime (its memory, its connections),
//! `sim.bounce` starts its software again on the same durable disk.

mod net;

use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use chaos_kit::clock::Clock;
use chaos_kit::disk::MemoryDisk;
use chaos_kit::protocol::ProviderContract;
use chaos_kit::TargetEnv;

use crate::history::{History, Ms, RunOutput};
use crate::plan::Trial;
use crate::roles::agent::{self, AgentEnv, Script, StatusMapping};
use crate::roles::clock::{HarnessClock, Timeline};
use crate::roles::nemesis::Nemesis;
use crate::roles::Cast;
use crate::targets::ReferenceTarget;
use net::{SimListener, SimNetwork, SimTimeline};

const TARGET_HOST: &str = "target";
const PROVIDER: (&str, u16) = ("provider", 9000);
const AUTHORITY: (&str, u16) = ("authority", 9001);
const TARGET_PORT: u16 = 8080;

/// 2026-01-01T00:00:00Z: every simulation's wall clock starts here.
pub const EPOCH_MS: u64 = 1_767_225_600_000;

/// A run cannot take longer than this much simulated time; past it the run is
/// cut short and judged `unknown`.
const SIMULATION_LIMIT: Duration = Duration::from_secs(120);

/// Runs one trial against one reference target.
pub fn simulate(trial: &Trial<'_>, target: &ReferenceTarget) -> RunOutput {
    let scenario = trial.scenario;
    let timing = trial.timing;
    let timeline: Arc<dyn Timeline> = Arc::new(SimTimeline);
    let clock = Arc::new(HarnessClock::on_timeline(EPOCH_MS, timeline.clone()));

    let Cast {
        authority,
        nemesis,
        provider,
    } = Cast::new(
        trial,
        timeline.clone(),
        clock.clone(),
        scenario.provider.retention,
        Default::default(),
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
        let provider = provider.clone();
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
        let authority = authority.clone();
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
        let contract = ProviderContract {
            profile: scenario.provider.profile,
            retention: scenario.provider.retention,
        };
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

    let attempts = Arc::new(Mutex::new(Vec::new()));
    {
        let env = AgentEnv {
            http: chaos_kit::http::Client::new(Arc::new(SimNetwork)),
            target: format!("{TARGET_HOST}:{TARGET_PORT}"),
            timeline: timeline.clone(),
            clock: clock.clone(),
            nemesis: nemesis.clone(),
            mapping: StatusMapping::default(),
            attempts: attempts.clone(),
        };
        let script = Script::from_trial(trial);
        sim.client("agent", async move {
            agent::run(script, env).await;
            Ok(())
        });
    }

    let error = drive(&mut sim, &nemesis);

    let history = History {
        attempts: std::mem::take(&mut *attempts.lock().unwrap_or_else(|p| p.into_inner())),
        faults: nemesis.events(),
        authorizations: authority.decisions(),
        ended_at: elapsed_ms(&sim),
    };
    RunOutput {
        history,
        ledger: provider.ledger(),
        error,
    }
}

/// Steps the simulation to the end, carrying out the nemesis's crashes and
/// restarts between steps.
fn drive(sim: &mut turmoil::Sim<'_>, nemesis: &Nemesis) -> Option<String> {
    let mut restart_at: Option<Duration> = None;
    loop {
        match sim.step() {
            Ok(true) => return None,
            Ok(false) => {}
            Err(error) => return Some(format!("the simulation stopped: {error}")),
        }
        while let Some(crash) = nemesis.take_crash_request() {
            if sim.is_host_running(TARGET_HOST) {
                sim.crash(TARGET_HOST);
                nemesis.record_at(elapsed_ms(sim), None, "target killed".into());
            }
            restart_at = Some(sim.elapsed() + crash.restart_after);
        }
        if restart_at.is_some_and(|at| sim.elapsed() >= at) {
            sim.bounce(TARGET_HOST);
            nemesis.record_at(elapsed_ms(sim), None, "target restarted".into());
            restart_at = None;
        }
    }
}

fn elapsed_ms(sim: &turmoil::Sim<'_>) -> Ms {
    sim.elapsed().as_millis() as Ms
}
