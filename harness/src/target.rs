//! The targets a run can name. The reference targets chaos ships run in the
//! simulator: each is a small crate under `targets/` whose server takes its
//! listener, so it runs here as a simulated host ([`SimTarget`]). Any other
//! target (any language, or a reference target's binary on PostgreSQL or
//! Redis) is described by a target file and runs live, as a real process.

use std::path::Path;
use std::sync::Arc;

use chaos_kit::target::TargetInfo;

use crate::live::LiveDriver;
use crate::sim::SimTarget;
use crate::sweep::{Payloads, Transport};
use crate::target_file::{self, TargetFile, TargetFileError};
use crate::trial::Driver;

/// Every reference target that runs in the simulator, in report order.
pub fn reference_targets() -> Vec<SimTarget> {
    vec![
        SimTarget {
            info: target_fresh_key::info(),
            serve: |listener, shutdown, env| {
                Box::pin(target_fresh_key::serve(listener, shutdown, env))
            },
        },
        SimTarget {
            info: target_args_hash::info(),
            serve: |listener, shutdown, env| {
                Box::pin(target_args_hash::serve(listener, shutdown, env))
            },
        },
        SimTarget {
            info: target_ledger::info(),
            serve: |listener, shutdown, env| {
                Box::pin(target_ledger::serve(listener, shutdown, env))
            },
        },
        SimTarget {
            info: target_ledger::runtime_info(),
            serve: |listener, shutdown, env| {
                Box::pin(target_ledger::serve_runtime(listener, shutdown, env))
            },
        },
    ]
}

/// The ledger's variants in the simulator: each correct under another
/// declared policy, or weakened on purpose where one design choice is wrong.
/// A run names them (`--target subject-key`); a run that names none runs
/// only the reference targets.
pub fn variant_targets() -> Vec<SimTarget> {
    macro_rules! ledger_variants {
        ($($info:ident => $serve:ident),+ $(,)?) => {
            vec![$(SimTarget {
                info: target_ledger::$info(),
                serve: |listener, shutdown, env| {
                    Box::pin(target_ledger::$serve(listener, shutdown, env))
                },
            }),+]
        };
    }
    ledger_variants![
        refusing_info => serve_refusing,
        reconciling_info => serve_reconciling,
        subject_key_info => serve_subject_key,
        trace_key_info => serve_trace_key,
        tenantless_info => serve_tenantless,
        expiry_race_info => serve_expiry_race,
        trusts_missing_info => serve_trusts_missing,
        reset_is_failure_info => serve_reset_is_failure,
        assumes_delivered_info => serve_assumes_delivered,
        replica_guard_info => serve_replica_guard,
    ]
}

/// The ledgers that hold a per-tool runtime policy beyond `coalesce` and
/// `allow` (`refuses-replans`: `refuse`; `signs-off-replans`: `sign-off`). Named by a run, never in the
/// default sweep nor in [`sim_targets`]: a layer is held to the policy its
/// tool declares, so each is judged on the scenarios of its policy
/// (`[workload] policy`), where the others are caught.
pub fn policy_targets() -> Vec<SimTarget> {
    vec![
        SimTarget {
            info: target_ledger::refuses_replans_info(),
            serve: |listener, shutdown, env| {
                Box::pin(target_ledger::serve_refuses_replans(
                    listener, shutdown, env,
                ))
            },
        },
        SimTarget {
            info: target_ledger::signs_off_replans_info(),
            serve: |listener, shutdown, env| {
                Box::pin(target_ledger::serve_signs_off_replans(
                    listener, shutdown, env,
                ))
            },
        },
    ]
}

/// Every target the simulator runs: the reference targets, then the variants.
pub fn sim_targets() -> Vec<SimTarget> {
    let mut targets = reference_targets();
    targets.extend(variant_targets());
    targets
}

/// The authorization lab's `gate` and its variants (`baseline`, one
/// `gate-no-*` per control, then one weakened past what the lab tests). Named by a run, never in the default sweep nor
/// in [`sim_targets`]: they are authorization boundaries, not idempotency
/// layers, and are judged on `scenarios/authorization/` only.
pub fn gate_targets() -> Vec<SimTarget> {
    macro_rules! gate_variant {
        ($name:literal) => {
            SimTarget {
                info: target_gate::variant($name).expect("a gate variant").0,
                serve: |listener, shutdown, env| {
                    let controls = target_gate::variant($name).expect("a gate variant").1;
                    Box::pin(target_gate::serve(listener, shutdown, env, controls))
                },
            }
        };
    }
    let targets = vec![
        gate_variant!("baseline"),
        gate_variant!("gate-no-identity"),
        gate_variant!("gate-no-scope"),
        gate_variant!("gate-no-tenant"),
        gate_variant!("gate-no-approval"),
        gate_variant!("gate"),
        gate_variant!("gate-reuses-approval"),
        gate_variant!("gate-ignores-expiry"),
        gate_variant!("gate-checks-once"),
        gate_variant!("gate-trusts-header"),
        gate_variant!("gate-export-unscoped"),
    ];
    debug_assert_eq!(targets.len(), target_gate::variants().len());
    targets
}

/// The posture benchmark's gates (`undefended`, `blocklist`, `allowlist`,
/// `impact-threshold`):
/// named by a run, judged on `scenarios/posture/` only.
pub fn posture_targets() -> Vec<SimTarget> {
    macro_rules! posture {
        ($name:literal) => {
            SimTarget {
                info: target_gate::posture::posture($name).expect("a posture").0,
                serve: |listener, shutdown, env| {
                    let posture = target_gate::posture::posture($name).expect("a posture").1;
                    Box::pin(target_gate::posture::serve(
                        listener, shutdown, env, posture,
                    ))
                },
            }
        };
    }
    let targets = vec![
        posture!("undefended"),
        posture!("blocklist"),
        posture!("allowlist"),
        posture!("impact-threshold"),
    ];
    debug_assert_eq!(targets.len(), target_gate::posture::postures().len());
    targets
}

/// Every simulated target a run can name.
fn nameable() -> Vec<SimTarget> {
    let mut targets = sim_targets();
    targets.extend(policy_targets());
    targets.extend(gate_targets());
    targets.extend(posture_targets());
    targets
}

/// Finds a simulated target by name.
pub fn find(name: &str) -> Result<SimTarget, UnknownTarget> {
    let targets = nameable();
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

/// A target to run, and the transport that runs it.
#[derive(Debug, Clone)]
pub enum Target {
    /// A reference target, as a host in the deterministic simulation.
    Sim(SimTarget),
    /// A target file's command, as a real process.
    Live {
        file: Arc<TargetFile>,
        /// How the user named it (a name or a path): rerun commands repeat it.
        arg: String,
    },
}

impl Target {
    pub fn name(&self) -> &str {
        match self {
            Target::Sim(target) => &target.info.name,
            Target::Live { file, .. } => &file.name,
        }
    }

    /// What the checker and the report know about it, with its declared retention.
    pub fn info(&self) -> TargetInfo {
        match self {
            Target::Sim(target) => target.info.clone(),
            Target::Live { file, .. } => file.info(),
        }
    }

    pub fn transport(&self) -> Transport {
        match self {
            Target::Sim(_) => Transport::Sim,
            Target::Live { .. } => Transport::Live,
        }
    }

    /// What carries this target's trials, for one run. `keep_trying`: a
    /// live target that never gets ready is tried in every cell anyway;
    /// `payloads`: whether its secrets are masked in what it quotes.
    pub(crate) fn driver(&self, keep_trying: bool, payloads: Payloads) -> Box<dyn Driver + '_> {
        match self {
            Target::Sim(target) => Box::new(target.clone()),
            Target::Live { file, .. } => Box::new(LiveDriver::new(file, keep_trying, payloads)),
        }
    }

    /// What `--target` must say to select this target again.
    pub fn arg(&self) -> &str {
        match self {
            Target::Sim(target) => &target.info.name,
            Target::Live { arg, .. } => arg,
        }
    }
}

/// Resolves one `--target`: a reference target's name, a path to a target
/// file, or the name of a target file under `targets_dir` (as `chaos list`
/// shows them). A reference target's name wins over a target file's.
pub fn resolve(arg: &str, targets_dir: &Path) -> Result<Target, ResolveError> {
    if let Ok(target) = find(arg) {
        return Ok(Target::Sim(target));
    }
    let looks_like_a_path = arg.ends_with(".toml") || arg.contains('/');
    if looks_like_a_path {
        let file = TargetFile::load(Path::new(arg)).map_err(ResolveError::File)?;
        return Ok(Target::Live {
            file: Arc::new(file),
            arg: arg.to_owned(),
        });
    }
    let mut choices: Vec<String> = nameable()
        .into_iter()
        .map(|target| target.info.name)
        .collect();
    for found in target_file::discover(targets_dir) {
        match found {
            Ok(file) if file.name == arg => {
                return Ok(Target::Live {
                    file: Arc::new(file),
                    arg: arg.to_owned(),
                })
            }
            Ok(file) => choices.push(file.name),
            // A broken file is reported when it is the one asked for: its
            // directory carries the name.
            Err(error)
                if error
                    .path
                    .parent()
                    .and_then(Path::file_name)
                    .is_some_and(|dir| dir == arg) =>
            {
                return Err(ResolveError::File(error))
            }
            Err(_) => {}
        }
    }
    Err(ResolveError::Unknown(UnknownTarget {
        name: arg.to_owned(),
        choices,
    }))
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    #[error("{0} (or give the path of a target file)")]
    Unknown(UnknownTarget),
    #[error("{0}")]
    File(TargetFileError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_target_lists_the_choices() {
        let error = find("ledgr").unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown target 'ledgr'. Choose from: fresh-key, args-hash, ledger, runtime-ledger, refusing-ledger, reconciling-ledger, subject-key, trace-key, tenantless, expiry-race, trusts-missing, reset-is-failure, assumes-delivered, replica-guard, refuses-replans, signs-off-replans, baseline, gate-no-identity, gate-no-scope, gate-no-tenant, gate-no-approval, gate, gate-reuses-approval, gate-ignores-expiry, gate-checks-once, gate-trusts-header, gate-export-unscoped, undefended, blocklist, allowlist, impact-threshold"
        );
    }
}
