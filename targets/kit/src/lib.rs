//! The toolkit shared by chaos targets and the chaos harness.
//!
//! A target written in Rust runs in two places: inside the deterministic simulator
//! (as a turmoil host) and as a real process (live mode). Everything that differs
//! between the two is a seam defined here, passed to the target when it starts:
//!
//! - [`net`]: how to accept and open connections ([`net::Listener`], [`net::Network`]);
//! - [`clock`]: what time it is ([`clock::Clock`]), so the simulator can jump 25 hours;
//! - [`disk`]: state that survives a crash ([`disk::Disk`]).
//!
//! On top of the seams:
//!
//! - [`protocol`]: target protocol v1 (headers, outcomes, status mapping);
//! - [`http`]: a minimal HTTP/1.1 server and client over any [`net`] transport;
//! - [`upstream`]: typed clients for the provider and the authority;
//! - [`canonical`]: canonical JSON and payload fingerprints;
//! - [`target`]: routing and answering helpers, and [`target::TargetInfo`];
//! - [`process`]: the `CHAOS_*` environment a live target process is started with;
//! - [`sync`]: a mutex lock that survives a panicked holder.

pub mod canonical;
pub mod clock;
pub mod disk;
pub mod env;
pub mod http;
pub mod net;
pub mod process;
pub mod protocol;
pub mod sync;
pub mod target;
pub mod upstream;

pub use env::TargetEnv;
