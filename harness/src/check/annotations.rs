//! An MCP server's tool annotations held to the ledger.
//!
//! MCP tools declare hints in `tools/list` (MCP 2025-11-25, "Tools",
//! `ToolAnnotations`): `idempotentHint: true` says that calling the tool
//! again with the same arguments has no additional effect; `readOnlyHint:
//! true` that it does not modify its environment. Clients are told not to
//! trust them, and agent runtimes do anyway: a tool declared idempotent is
//! the one a runtime retries without a second thought. So each is checked
//! against what the provider committed:
//!
//! - `idempotentHint: true`, and one operation made more than one effect of
//!   the same payload while the agent sent it identical calls (a retry, a
//!   replay): the hint is contradicted;
//! - `readOnlyHint: true`, and the operation made any effect at all.
//!
//! Only a tool the run called counts, and only hints the server declared
//! (an absent hint promises nothing).

use std::collections::{BTreeMap, BTreeSet};

use super::view::RunView;
use super::{Anchor, Check, Findings};
use crate::history::DeclaredTool;

pub(super) fn check(run: &RunView<'_>, findings: &mut Findings) {
    let Some(seen) = &run.run.history.mcp else {
        return;
    };
    let declared: BTreeMap<&str, &DeclaredTool> = (seen.tools.iter())
        .map(|tool| (tool.tool.as_str(), tool))
        .collect();
    let scenario = &run.trial.scenario.name;
    for operation in &run.operations {
        // The tool of the operation's calls (one per operation in a scenario).
        let Some(tool) = (run.trial.calls.iter())
            .find(|call| call.operation == operation.index)
            .and_then(|call| declared.get(call.tool.as_str()))
        else {
            continue;
        };
        let name = operation.name;
        let anchor = Anchor::Operation {
            index: operation.index,
            slot: 4,
        };
        let effects = operation.effects.len();
        if tool.read_only == Some(true) && effects > 0 {
            findings.fail(
                anchor,
                Check::AnnotationContradicted,
                Some(name),
                format!(
                    "tool '{}' (MCP tool '{}') declares readOnlyHint: true, and in scenario '{scenario}' operation '{name}' made {effects} effect(s) at the provider",
                    tool.tool, tool.mcp_tool
                ),
            );
            continue;
        }
        if tool.idempotent != Some(true) || effects < 2 {
            continue;
        }
        // Identical calls: attempts carrying the same arguments.
        let mut calls: BTreeMap<&str, usize> = BTreeMap::new();
        for attempt in &operation.attempts {
            *calls
                .entry(attempt.payload_fingerprint.as_str())
                .or_default() += 1;
        }
        let identical = calls.values().copied().max().unwrap_or(0);
        // Effects of one call's arguments: the same call's effect, more than
        // once. Each effect counts under the arguments of the attempts in
        // flight when it was committed, when they are all one: the payload
        // the provider saw may carry what the server adds per call (a
        // Stripe form with a key of its own in its metadata) and tells
        // nothing about the arguments then. Otherwise, under its own payload.
        let mut same: BTreeMap<&str, usize> = BTreeMap::new();
        for effect in &operation.effects {
            let during: BTreeSet<&str> = (operation.attempts.iter())
                .filter(|attempt| attempt.spans(effect.at))
                .map(|attempt| attempt.payload_fingerprint.as_str())
                .collect();
            let arguments = match during.len() {
                1 => during.into_iter().next().unwrap_or_default(),
                _ => effect.payload_fingerprint.as_str(),
            };
            *same.entry(arguments).or_default() += 1;
        }
        let repeated = same.values().copied().max().unwrap_or(0);
        if identical >= 2 && repeated >= 2 {
            findings.fail(
                anchor,
                Check::AnnotationContradicted,
                Some(name),
                format!(
                    "tool '{}' (MCP tool '{}') declares idempotentHint: true, and in scenario '{scenario}' operation '{name}' was sent {identical} identical calls (same arguments) and made {repeated} effects of one payload at the provider ({effects} in all): a client that trusted the hint and retried charged again",
                    tool.tool, tool.mcp_tool
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use chaos_kit::protocol::Outcome;

    use super::super::tests::{Case, Found, ONE_CALL};
    use crate::check::{Check, Status};
    use crate::history::DeclaredTool;

    fn tool(idempotent: Option<bool>, read_only: Option<bool>) -> DeclaredTool {
        DeclaredTool {
            tool: "send_reminder".into(),
            mcp_tool: "remind".into(),
            read_only,
            idempotent,
            ..DeclaredTool::default()
        }
    }

    /// A lost answer, retried with the same arguments, charged twice.
    fn charged_twice(declared: DeclaredTool) -> crate::check::Verdict {
        Case::new(ONE_CALL)
            .declared(vec![declared])
            .commit(1, 3)
            .timeout(1, 1, 5)
            .commit(1, 8)
            .answer(1, 7, 10, Outcome::Applied)
            .judge()
    }

    #[test]
    fn an_idempotent_hint_with_a_second_effect_of_an_identical_retry_fails() {
        let verdict = charged_twice(tool(Some(true), None));
        assert_eq!(verdict.status, Status::Fail);
        let message = &verdict.finding(Check::AnnotationContradicted).message;
        assert!(
            message.contains("tool 'send_reminder' (MCP tool 'remind') declares idempotentHint: true, and in scenario '"),
            "{message}"
        );
        assert!(
            message
                .contains("2 identical calls (same arguments) and made 2 effects of one payload"),
            "{message}"
        );
        // The duplicate is found either way; the hint is what this adds.
        assert!(verdict.has(Check::DuplicateEffect));
    }

    /// The server sent each charge with a key of its own in the provider's
    /// payload (a Stripe form's metadata): two payloads at the provider,
    /// from one call's identical attempts.
    #[test]
    fn a_per_call_key_in_the_providers_payload_does_not_hide_the_contradiction() {
        let verdict = Case::new(ONE_CALL)
            .declared(vec![tool(Some(true), None)])
            .commit(1, 3)
            .provider_shaped("form-key-1")
            .timeout(1, 1, 5)
            .commit(1, 8)
            .provider_shaped("form-key-2")
            .answer(1, 7, 10, Outcome::Applied)
            .judge();
        assert!(
            verdict.has(Check::AnnotationContradicted),
            "{:?}",
            verdict.findings
        );
    }

    #[test]
    fn no_hint_or_a_false_one_promises_nothing() {
        for hints in [tool(None, None), tool(Some(false), Some(false))] {
            let verdict = charged_twice(hints);
            assert!(!verdict.has(Check::AnnotationContradicted));
            assert!(verdict.has(Check::DuplicateEffect));
        }
    }

    #[test]
    fn an_idempotent_tool_that_held_passes() {
        let verdict = Case::new(ONE_CALL)
            .declared(vec![tool(Some(true), None)])
            .commit(1, 3)
            .timeout(1, 1, 5)
            .answer(1, 7, 10, Outcome::Replayed)
            .judge();
        assert_eq!(verdict.status, Status::Pass, "{:?}", verdict.findings);
    }

    #[test]
    fn a_read_only_tool_with_any_effect_fails() {
        let verdict = Case::new(ONE_CALL)
            .declared(vec![tool(None, Some(true))])
            .commit(1, 3)
            .answer(1, 1, 5, Outcome::Applied)
            .judge();
        assert_eq!(verdict.status, Status::Fail);
        let message = &verdict.finding(Check::AnnotationContradicted).message;
        assert!(message.contains("declares readOnlyHint: true"), "{message}");
        assert!(message.contains("made 1 effect(s)"), "{message}");
    }

    #[test]
    fn hints_of_a_tool_the_run_did_not_call_are_not_judged() {
        let mut other = tool(Some(true), Some(true));
        other.tool = "charge_card".into();
        let verdict = charged_twice(other);
        assert!(!verdict.has(Check::AnnotationContradicted));
    }
}
