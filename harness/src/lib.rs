//! chaos: a fault-injection harness that proves whether an idempotency layer holds.
//!
//! The layout follows the data; each stage sees only the previous one's output:
//!
//! ```text
//! scenarios/*.toml --scenario--> Scenario --plan--> Trial (per target and seed)
//!     --run (sim | live)--> History + Ledger --check--> Verdict --report--> Summary
//!     --render--> table | json
//! ```
//!
//! - [`scenario`]: strict TOML parsing and validation, [`fault`] the fault schedule as data;
//!   [`target_file`]: the same for target files (how to run a live target);
//! - [`plan`]: keys, subjects, payload bytes and timeouts of one trial;
//! - [`sim`]: the deterministic turmoil simulation of one trial, driving the
//!   harness's [`roles`] (agent, provider, authority, nemesis) and a target;
//! - [`live`]: the same roles on 127.0.0.1 against a target running as a real
//!   process (any language), with real SIGKILLs and restarts;
//! - [`history`]: what the run produced: the agent's history and the provider's ledger;
//! - [`check`]: the checkers, turning history + ledger into a verdict;
//! - [`runner`]: runs every (scenario, target, seed) trial, on every core;
//! - [`report`]: the summary of a run and its renderings;
//! - [`targets`]: the targets a run can name (reference targets, target files);
//!   [`bench`]: `chaos bench`.

pub mod bench;
pub mod check;
pub mod exit;
pub mod fault;
pub mod history;
pub mod live;
pub mod plan;
pub mod report;
pub mod roles;
pub mod runner;
pub mod scenario;
pub mod sim;
pub mod target_file;
pub mod targets;
