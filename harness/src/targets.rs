//! The reference targets chaos ships, by name. Each is a small crate under
//! `targets/` whose server takes its listener, so it runs in the simulator here
//! and as a real process in live mode.

use std::io;

use chaos_kit::net::{BoxFuture, Listener};
use chaos_kit::target::TargetInfo;
use chaos_kit::TargetEnv;

/// Starts a target's server: `serve(listener, shutdown, env)`.
pub type ServeFn =
    fn(Box<dyn Listener>, BoxFuture<'static, ()>, TargetEnv) -> BoxFuture<'static, io::Result<()>>;

#[derive(Clone)]
pub struct ReferenceTarget {
    pub info: TargetInfo,
    pub serve: ServeFn,
}

impl std::fmt::Debug for ReferenceTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReferenceTarget")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

/// Every reference target that runs in the simulator, in report order.
pub fn reference_targets() -> Vec<ReferenceTarget> {
    vec![
        ReferenceTarget {
            info: target_fresh_key::info(),
            serve: |listener, shutdown, env| {
                Box::pin(target_fresh_key::serve(listener, shutdown, env))
            },
        },
        ReferenceTarget {
            info: target_args_hash::info(),
            serve: |listener, shutdown, env| {
                Box::pin(target_args_hash::serve(listener, shutdown, env))
            },
        },
        ReferenceTarget {
            info: target_ledger::info(),
            serve: |listener, shutdown, env| {
                Box::pin(target_ledger::serve(listener, shutdown, env))
            },
        },
    ]
}

/// Finds a reference target by name.
pub fn find(name: &str) -> Result<ReferenceTarget, UnknownTarget> {
    let targets = reference_targets();
    targets
        .iter()
        .find(|target| target.info.name == name)
        .cloned()
        .ok_or_else(|| UnknownTarget {
            name: name.to_owned(),
            choices: targets.into_iter().map(|target| target.info.name).collect(),
        })
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown target '{name}'. Choose from: {}", choices.join(", "))]
pub struct UnknownTarget {
    pub name: String,
    pub choices: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_target_lists_the_choices() {
        let error = find("ledgr").unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown target 'ledgr'. Choose from: fresh-key, args-hash, ledger"
        );
    }
}
