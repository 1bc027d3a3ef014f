//! chaos: a fault-injection harness that proves whether an idempotency layer holds.
//!
//! The layout follows the data; each stage sees only the previous one's output:
//!
//! ```text
//! scenarios/*.toml --scenario--> Scenario --plan--> Trial (per target and seed)
//!     --run (sim | live)--> History + Ledger --check--> Verdict --report--> Summary
//!     --render--> table | json | junit | markdown | html
//! ```
//!
//! - [`scenario`]: strict TOML parsing and validation ([`input`]: file errors), [`fault`] the fault schedule as data;
//!   [`target_file`]: the same for target files (how to run a live target);
//! - [`plan`]: keys, subjects, payload bytes and timeouts of one trial;
//! - [`sim`]: the deterministic turmoil simulation of one trial, driving the
//!   harness's [`roles`] (agent, provider, authority, nemesis) and a target;
//! - [`live`]: the same roles on 127.0.0.1 against a target running as a real
//!   process (any language), with real SIGKILLs and restarts;
//! - [`history`]: what the run produced: the agent's history and the provider's ledger;
//! - [`check`]: the checkers, turning history + ledger into a verdict;
//! - [`runner`]: runs every (scenario, target, seed) trial (or one shard of
//!   them), on every core; [`progress`] shows it on a terminal;
//! - [`report`]: the summary of a run, its renderings, and the summaries'
//!   merge (shards) and comparison (implementations, regressions);
//! - [`targets`]: the targets a run can name (reference targets, target files);
//!   [`bench`]: `chaos bench`;
//! - [`explore`]: `chaos explore`, which generates fault schedules (proptest),
//!   runs each as a trial through the same plan -> sim -> check stages, and
//!   shrinks a failing one into a scenario file.

pub mod bench;
pub mod check;
pub mod exit;
pub mod explore;
pub mod fault;
pub mod history;
pub mod input;
pub mod live;
pub mod plan;
pub mod progress;
pub mod report;
pub mod roles;
pub mod runner;
pub mod scenario;
pub mod sim;
pub mod target_file;
pub mod targets;
