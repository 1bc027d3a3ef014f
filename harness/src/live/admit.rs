//! Admission: whether a scenario can be run live against a target file at
//! all, decided once per cell before any process starts. Every reason is
//! about the pairing, never about a seed, so one answer holds for the cell;
//! a cell not admitted is folded as not run, with the reason.

use crate::fault::{Action, Fault};
use crate::plan::Trial;
use crate::scenario::Boundary;
use crate::target_file::TargetFile;

use super::schedule;

/// `Ok` when `trial`'s scenario can be run against `target`; otherwise why
/// not, as the cell's reason. The checks run in the order a user fixes them:
/// the run's time, where the effects are counted, what the provider's API can
/// play, and what the way in needs of the calls.
pub(crate) fn admit(target: &TargetFile, trial: &Trial<'_>) -> Result<(), String> {
    let scenario = trial.scenario;
    schedule::live_time(scenario, target.retention, target.way_in.duplicate_window())
        .map(drop)
        .and_then(|()| in_database(trial, target))
        .and_then(|()| target.provider_api.admit(scenario, &target.name))
        .and_then(|()| target.way_in.admit(&trial.call_arguments(), &target.name))
        .and_then(|()| target.caller.admit(trial))
        .map_err(|why| format!("scenario '{}' cannot be run live: {why}", scenario.name))
}

/// Refuses a pairing whose claim and effects do not meet: a target whose
/// effects are rows in its database is judged only by scenarios that claim
/// one database mutation, and with no fault that waits for a dispatch to
/// the provider (it never comes).
fn in_database(trial: &Trial<'_>, target: &TargetFile) -> Result<(), String> {
    let scenario = trial.scenario;
    let claims_rows = scenario.claim.boundary == Boundary::DatabaseMutation;
    match (&target.effects, claims_rows) {
        (None, true) => Err(format!(
            "it claims one database mutation per operation (boundary = \"database-mutation\"), and target '{}' has no [effects] query to count its rows; add one to its target file, or run a scenario whose boundary is at the provider",
            target.name
        )),
        (Some(_), false) => Err(format!(
            "target '{}' keeps its effects in its database ([effects] in its target file), and the scenario claims {} (boundary = \"{}\"); run scenarios with boundary = \"database-mutation\", e.g. scenarios/database/*.toml",
            target.name,
            scenario.claim.boundary.describe(),
            scenario.claim.boundary.as_str()
        )),
        (Some(_), true) => {
            // A crash after the Nth commit is the one verdict on a dispatch
            // a row can stand for (the driver watches the rows, and the Nth
            // row is the Nth commit); every other one needs a request to the
            // provider, which never comes.
            let needs_the_provider =
                |fault: &&Fault| fault.dispatch_verdicts().any(needs_a_request);
            match scenario.faults.iter().find(needs_the_provider) {
                Some(fault) => Err(format!(
                    "fault '{fault}' acts on dispatches to the provider, and target '{}' writes its effects to its own database without one; use crash-target at after-commit (the Nth row written), or faults on the agent's side (lose-response at target-to-agent, delay, replan, crash-agent, revoke, advance-clock)",
                    target.name
                )),
                None => Ok(()),
            }
        }
        (None, false) => Ok(()),
    }
}

/// Whether a verdict on a dispatch needs a request to the provider to act
/// on; a new verdict must say, or this does not build.
fn needs_a_request(action: Action) -> bool {
    match action {
        Action::CrashAfterCommit { .. } => false,
        Action::CrashBeforeDispatch { .. }
        | Action::LoseRequest(_)
        | Action::LoseAnswer { .. }
        | Action::Stall
        | Action::DelayAnswer { .. }
        | Action::ProviderError { .. }
        | Action::Redeliver
        | Action::AuthorityDown
        | Action::AdvanceClock(_)
        | Action::Revoke(_)
        | Action::Replan { .. }
        | Action::CrashAgent { .. }
        | Action::ApproveAgain { .. }
        | Action::TruncateResult
        | Action::Interrupt => true,
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::plan::Timing;
    use crate::scenario::Scenario;

    fn scenario(path: &str) -> Scenario {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        Scenario::load(&root.join(path)).unwrap()
    }

    fn target(text: &str) -> TargetFile {
        TargetFile::parse(
            Path::new("targets/t/target.toml"),
            &format!("name = \"t\"\n{text}"),
        )
        .unwrap()
    }

    fn admitted(target: &TargetFile, scenario: &Scenario) -> Result<(), String> {
        admit(target, &Trial::new(scenario, 1, Timing::live()))
    }

    #[test]
    fn a_protocol_target_is_admitted_to_the_six_tests() {
        let plain = target("command = [\"x\"]");
        for name in [
            "lost-response-keyed",
            "concurrent-attempts",
            "changed-payload",
            "worker-restart",
            "expired-history",
            "revoked-permission",
        ] {
            let scenario = scenario(&format!("scenarios/{name}.toml"));
            assert_eq!(admitted(&plain, &scenario), Ok(()), "{name}");
        }
    }

    #[test]
    fn each_api_admits_only_the_scenarios_it_can_play() {
        let keyed = scenario("scenarios/lost-response-keyed.toml");
        let smtp = target("command = [\"x\"]\n[provider]\napi = \"smtp\"");
        let why = admitted(&smtp, &keyed).unwrap_err();
        assert!(
            why.starts_with("scenario 'lost-response-keyed' cannot be run live: target 't' sends mail over SMTP"),
            "{why}"
        );
        let stripe = target("command = [\"x\"]\n[provider]\napi = \"stripe\"");
        assert_eq!(
            admitted(&stripe, &keyed),
            Ok(()),
            "keyed, 24h: Stripe's own contract"
        );
        let blind = scenario("scenarios/lost-response-blind.toml");
        let why = admitted(&stripe, &blind).unwrap_err();
        assert!(
            why.contains("Stripe deduplicates by Idempotency-Key"),
            "{why}"
        );
        assert_eq!(admitted(&smtp, &blind), Ok(()));
    }

    #[test]
    fn rows_in_the_database_are_admitted_only_to_database_scenarios() {
        let rows = target(
            "command = [\"x\"]\n[effects]\ndatabase = \"postgresql://u@h/d\"\nquery = \"SELECT 1 WHERE $1 = $1\"",
        );
        let why = admitted(&rows, &scenario("scenarios/lost-response-keyed.toml")).unwrap_err();
        assert!(why.contains("keeps its effects in its database"), "{why}");
        let plain = target("command = [\"x\"]");
        let database =
            std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/database"))
                .unwrap()
                .map(|entry| entry.unwrap().path())
                .find(|path| path.extension().is_some_and(|ext| ext == "toml"))
                .unwrap();
        let database = Scenario::load(&database).unwrap();
        let why = admitted(&plain, &database).unwrap_err();
        assert!(why.contains("has no [effects] query"), "{why}");
    }

    #[test]
    fn a_mapped_placeholder_no_call_fills_is_refused_naming_it() {
        let mapped = target("command = [\"x\"]\n[request]\npath = \"/orders/{order}\"");
        let why = admitted(&mapped, &scenario("scenarios/lost-response-keyed.toml")).unwrap_err();
        assert!(why.contains("[request] uses {order}"), "{why}");
    }
}

/// The docs' list of which shipped scenarios each provider API admits
/// (docs/live-mode.md, between the markers), rendered from the same
/// `admit` a run asks, so the list cannot drift from the code.
#[cfg(test)]
mod admitted_set {
    use std::collections::BTreeMap;
    use std::path::Path;

    use super::*;
    use crate::plan::Timing;
    use crate::provider_api::ProviderApi;
    use crate::scenario::{builtin, Scenario};

    const BEGIN: &str = "<!-- admitted: begin (generated by harness/src/live/admit.rs from `admit`; a failing test prints the new block) -->";
    const END: &str = "<!-- admitted: end -->";

    /// Every shipped scenario, by folder (`scenarios`, `scenarios/smtp`, ...).
    fn folders() -> Vec<(String, Vec<Scenario>)> {
        // The built-in files are the folder as it is on disk, sorted by path.
        let mut folders: BTreeMap<String, Vec<Scenario>> = BTreeMap::new();
        for (path, text) in builtin::files() {
            // `scenarios/` and the folders right under it, as the docs list them.
            let Some((folder, _)) = path
                .rsplit_once('/')
                .filter(|(folder, _)| path.ends_with(".toml") && folder.matches('/').count() <= 1)
            else {
                continue;
            };
            let scenario = Scenario::parse(Path::new(path), text).unwrap();
            folders.entry(folder.to_owned()).or_default().push(scenario);
        }
        folders.into_iter().collect()
    }

    fn render() -> String {
        let mut out = String::from("| scenarios | ");
        out.push_str(
            &(ProviderApi::ALL.iter())
                .map(|api| format!("`{}`", api.as_str()))
                .collect::<Vec<_>>()
                .join(" | "),
        );
        out.push_str(" |\n|---|");
        out.push_str(&"---|".repeat(ProviderApi::ALL.len()));
        out.push('\n');
        for (folder, scenarios) in folders() {
            out.push_str(&format!("| `{folder}/` ({}) |", scenarios.len()));
            for api in ProviderApi::ALL {
                // A target file as a user writes one for this API; a
                // database scenario needs [effects] whatever the API.
                let file = TargetFile::parse(
                    Path::new("targets/t/target.toml"),
                    &format!(
                        "name = \"t\"\ncommand = [\"x\"]\n[provider]\napi = \"{}\"\n[retention]\nperiod = \"7days\"\nafter = \"new-operation\"\nshorten = true",
                        api.as_str()
                    ),
                )
                .unwrap();
                let admitted: Vec<&str> = (scenarios.iter())
                    .filter(|scenario| {
                        admit(&file, &Trial::new(scenario, 1, Timing::live())).is_ok()
                    })
                    .map(|scenario| scenario.name.as_str())
                    .collect();
                let cell = if admitted.len() == scenarios.len() {
                    "all".to_owned()
                } else if admitted.is_empty() {
                    "none".to_owned()
                } else if admitted.len() * 2 <= scenarios.len() {
                    format!("only {}", admitted.join(", "))
                } else {
                    let not: Vec<&str> = (scenarios.iter())
                        .map(|scenario| scenario.name.as_str())
                        .filter(|name| !admitted.contains(name))
                        .collect();
                    format!("all but {}", not.join(", "))
                };
                out.push_str(&format!(" {cell} |"));
            }
            out.push('\n');
        }
        out
    }

    #[test]
    fn the_docs_list_the_scenarios_each_provider_api_admits() {
        crate::docs_block::assert_current("live-mode.md", BEGIN, END, &render());
    }
}
