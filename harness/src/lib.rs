//! chaos: a fault-injection harness that proves whether an idempotency layer holds.
//!
//! The layout follows the data; each stage sees only the previous one's output:
//!
//! ```text
//! scenarios/*.toml --scenario--> Scenario --plan--> Trial (per target and seed)
//!     --run (sim | live)--> RunOutput (history + ledger) --check--> Verdict
//!     --report--> Summary --render--> table | json | junit | markdown | html
//! ```
//!
//! - [`scenario`]: strict TOML in, a validated [`Scenario`] out; [`fault`]: the
//!   fault kinds, one file each, as rules; `target_file`: how to run a live
//!   target, config only, a file per table;
//! - `plan`: keys, subjects, payload bytes and timeouts of one [`Trial`];
//! - `trial`: one trial through `plan -> Driver::run -> check -> Judged`,
//!   the same for both drivers: `sim` (a deterministic turmoil simulation)
//!   and `live` (a real process on 127.0.0.1), which drive the harness's
//!   `roles` (agent, provider, authority, nemesis) and never judge;
//! - the live wing's three registries, one file per unit, as `fault` is:
//!   `provider_api` (what the provider speaks: chaos, stripe, smtp),
//!   `way_in` (how a call reaches the target: protocol, mapped, mcp, broker) and
//!   `callers` (what makes the calls: agent); the first two sit below the
//!   target file, which names their units, and know no role (a provider API
//!   sees the provider's core only as the `Desk` it implements);
//! - [`history`]: what a run produced, the agent's history and the provider's ledger;
//! - `check`: the checkers, one file per family, composed into a [`Verdict`];
//! - `runner`: every (scenario, target, seed) trial of a [`Sweep`], or one
//!   shard's, on every core where the driver allows;
//! - [`report`]: folds judged trials into a [`Summary`] and renders it; merges
//!   shards, compares reports;
//! - [`explore`]: generates fault schedules, judges each as a trial, and
//!   shrinks a failure into a scenario file;
//! - `probe` and `init_target`: first contact with a user's own service: four
//!   calls against it with what it did, and a commented target file for it;
//!   `suite_tools`: the tools (and arguments) the suite calls, which such a
//!   service must accept;
//! - [`cli`]: the `chaos` command's flags and presenters, over these verbs.
//!
//! The verbs are [`run`] (a sweep into a summary) and [`judge`] (one trial);
//! the rest of this page is the types they take and give.

pub mod cli;
pub mod explore;
pub mod fault;
pub mod history;
pub mod progress;
pub mod report;
pub mod scenario;

pub(crate) mod bench;
pub(crate) mod braces;
pub(crate) mod callers;
pub(crate) mod check;
#[cfg(test)]
pub(crate) mod docs_block;
pub(crate) mod error;
pub(crate) mod exit;
pub(crate) mod fs;
pub(crate) mod init_target;
pub(crate) mod input;
pub(crate) mod live;
pub(crate) mod plan;
pub(crate) mod probe;
pub(crate) mod provider_api;
pub(crate) mod roles;
pub(crate) mod runner;
pub(crate) mod sim;
pub(crate) mod simplify;
pub(crate) mod suite_tools;
pub(crate) mod sweep;
pub(crate) mod target;
pub(crate) mod target_file;
pub(crate) mod trial;
pub(crate) mod way_in;

pub use check::{Check, Finding, Liveness, OperationSummary, Status, Verdict};
pub use error::Error;
pub use exit::Exit;
pub use history::RunOutput;
pub use input::FileError;
pub use plan::Trial;
pub use runner::{judge, run};
pub use scenario::Scenario;
pub use sim::{ServeFn, SimTarget};
pub use sweep::{rerun_command, Partition, Payloads, Seeds, Sweep, Transport};
pub use target::{
    find, gate_targets, policy_targets, posture_targets, reference_targets, resolve, sim_targets,
    variant_targets, ResolveError, Target, UnknownTarget,
};
pub use target_file::TargetFile;
pub use trial::Judged;
