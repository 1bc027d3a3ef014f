//! The harness's own roles, the same code in the simulator and in live mode:
//!
//! - [`agent`]: plays the orchestrator: sends tool calls, times out, retries,
//!   releases concurrent attempts, records every attempt;
//! - [`provider`]: the downstream side-effect service; its ledger is the
//!   ground truth;
//! - [`authority`]: token introspection, where revocation happens;
//! - [`nemesis`]: the fault schedule, consulted by the others at protocol points;
//! - [`clock`]: the run's timeline and the wall clock that can jump.
//!
//! None of them knows which transport carries its bytes.

pub mod agent;
pub mod authority;
pub mod clock;
pub mod nemesis;
pub mod provider;
