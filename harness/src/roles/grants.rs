//! The callers' grants, shared by the two roles that touch them: the
//! authority answers introspections from them, and the nemesis takes them
//! away. Each holds a [`Grants`] instead of the other, so neither needs to
//! know the other exists.
//!
//! A service that keeps its callers in its own store (a users table) never
//! asks the authority: an [`Adapter`] carries each grant and revocation there
//! too, at the same protocol point, so the same faults reach it unchanged.

use chaos_kit::sync::lock;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use chaos_kit::protocol::{Approval, Introspection};

use crate::fault::{Action, Grant};

/// One caller's grant as an adapter is told it: after a revocation, what
/// is left of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GrantFacts {
    pub token: String,
    pub actor: String,
    pub tenant: String,
    /// Space-separated, as introspection answers it.
    pub scope: String,
    pub active: bool,
}

/// Where else grants live: the target's own store of callers. Each call
/// returns once the store says so, and says why when it could not.
pub(crate) trait Adapter: Send + Sync {
    fn grant(&self, grant: &GrantFacts) -> Result<(), String>;
    /// `grant` is what remains; `taken` is what went, and `tool` the tool
    /// the fault names.
    fn revoke(&self, grant: &GrantFacts, taken: Grant, tool: &str) -> Result<(), String>;
}

/// What faults do to introspections, as the authority asks: the nemesis
/// answers, and the authority never needs to know it is the nemesis.
pub(crate) trait Introspections: Send + Sync {
    /// An introspection arrived: what happens to it, if anything.
    fn introspection(&self) -> Option<Action>;
    /// The introspection last counted has been answered, and the answer has
    /// not left yet: a revocation due now lands between the target's check
    /// and its dispatch.
    fn after_introspection(&self);
}

#[derive(Debug, Clone)]
struct TokenGrant {
    active: bool,
    sub: String,
    tenant: String,
    scope: Vec<String>,
}

/// The callers' grants. Clones share them: the authority's and the
/// nemesis's are the same grants.
#[derive(Clone, Default)]
pub(crate) struct Grants(Arc<Shared>);

#[derive(Default)]
struct Shared {
    tokens: Mutex<BTreeMap<String, TokenGrant>>,
    adapter: OnceLock<Arc<dyn Adapter>>,
    /// Why the adapter failed, first failure first: the run cannot be judged.
    adapter_failures: Mutex<Vec<String>>,
    /// Asked about every introspection (an outage is a fault). Weak: the
    /// nemesis holds these grants to revoke them.
    watcher: OnceLock<Weak<dyn Introspections>>,
    /// Sign-offs a human gave mid-run, each for one tool call: given by a
    /// fault (the nemesis), read by the target through the authority.
    sign_offs: Mutex<Vec<Approval>>,
    /// The service's own names for the suite's tools (`[request.tools]`):
    /// what a target is told (its scope, its approvals, its adapter's
    /// grants); the run's record keeps the suite's names.
    names: OnceLock<BTreeMap<String, String>>,
}

impl Grants {
    /// Issues `token` to `sub` of `tenant` with a space-separated `scope`.
    pub(crate) fn grant(&self, token: &str, sub: &str, tenant: &str, scope: &str) {
        lock(&self.0.tokens).insert(
            token.to_owned(),
            TokenGrant {
                active: true,
                sub: sub.to_owned(),
                tenant: tenant.to_owned(),
                scope: scope.split_whitespace().map(str::to_owned).collect(),
            },
        );
    }

    /// Carries every grant made so far, and each later revocation, to
    /// `adapter` as well.
    pub(crate) fn adapted_by(&self, adapter: Arc<dyn Adapter>) {
        let grants: Vec<GrantFacts> = lock(&self.0.tokens)
            .iter()
            .map(|(token, grant)| self.facts(token, grant))
            .collect();
        for grant in &grants {
            if let Err(why) = adapter.grant(grant) {
                lock(&self.0.adapter_failures).push(why);
            }
        }
        let _ = self.0.adapter.set(adapter);
    }

    /// Why the adapter could not carry a grant or a revocation, if it could not.
    pub(crate) fn adapter_failure(&self) -> Option<String> {
        lock(&self.0.adapter_failures).first().cloned()
    }

    /// Takes away `grant` from `token` for `tool`, here and, before this
    /// returns, in the adapter's store.
    pub(crate) fn revoke(&self, token: &str, grant: Grant, tool: &str) {
        let left = lock(&self.0.tokens).get_mut(token).map(|token_grant| {
            match grant {
                Grant::Token => token_grant.active = false,
                Grant::Scope => token_grant.scope.retain(|granted| granted != tool),
            }
            self.facts(token, token_grant)
        });
        if let (Some(left), Some(adapter)) = (left, self.0.adapter.get()) {
            if let Err(why) = adapter.revoke(&left, grant, self.service_name(tool)) {
                lock(&self.0.adapter_failures).push(why);
            }
        }
    }

    /// Tells targets the suite's tools by the service's own names from now on.
    pub(crate) fn name_tools(&self, names: BTreeMap<String, String>) {
        let _ = self.0.names.set(names);
    }

    /// The service's name for the suite's tool `tool`.
    pub(crate) fn service_name<'a>(&'a self, tool: &'a str) -> &'a str {
        (self.0.names.get())
            .and_then(|names| names.get(tool))
            .map_or(tool, String::as_str)
    }

    /// A space-separated scope in the service's names.
    pub(crate) fn service_scope(&self, scope: &str) -> String {
        let names: Vec<&str> = scope
            .split_whitespace()
            .map(|tool| self.service_name(tool))
            .collect();
        names.join(" ")
    }

    /// Records a human's sign-off of one tool call of `tool` by the caller
    /// holding `token`, with what the call asks (`invoice`, `recipient`,
    /// `body`, empty where it says none). False when nobody holds `token`:
    /// there is no caller to sign off for.
    pub(crate) fn sign_off(
        &self,
        token: &str,
        tool: &str,
        tool_call: &str,
        action: [&str; 3],
    ) -> bool {
        let Some(actor) = lock(&self.0.tokens)
            .get(token)
            .map(|grant| grant.sub.clone())
        else {
            return false;
        };
        let [invoice, recipient, body] = action.map(str::to_owned);
        lock(&self.0.sign_offs).push(Approval {
            actor,
            tool: tool.to_owned(),
            invoice,
            recipient,
            body,
            expires_at_ms: None,
            tool_call: Some(tool_call.to_owned()),
        });
        true
    }

    /// The sign-offs given so far to `actor`'s tool calls.
    pub(crate) fn sign_offs(&self, actor: &str) -> Vec<Approval> {
        lock(&self.0.sign_offs)
            .iter()
            .filter(|approval| approval.actor == actor)
            .cloned()
            .collect()
    }

    /// `approval` as a target reads it: its tool by the service's name.
    pub(crate) fn told(&self, approval: Approval) -> Approval {
        Approval {
            tool: self.service_name(&approval.tool).to_owned(),
            ..approval
        }
    }

    /// What introspecting `token` answers now.
    pub(crate) fn introspect(&self, token: &str) -> Introspection {
        match lock(&self.0.tokens).get(token) {
            Some(grant) if grant.active => Introspection {
                active: true,
                sub: Some(grant.sub.clone()),
                tenant: Some(grant.tenant.clone()),
                scope: Some(grant.scope.join(" ")),
            },
            _ => Introspection::default(),
        }
    }

    /// Who faults the introspections of these grants.
    pub(crate) fn watched_by(&self, watcher: Weak<dyn Introspections>) {
        let _ = self.0.watcher.set(watcher);
    }

    pub(crate) fn watcher(&self) -> Option<Arc<dyn Introspections>> {
        self.0.watcher.get().and_then(Weak::upgrade)
    }
}

impl Grants {
    /// A grant as an adapter is told it: in the service's names.
    fn facts(&self, token: &str, grant: &TokenGrant) -> GrantFacts {
        GrantFacts {
            token: token.to_owned(),
            actor: grant.sub.clone(),
            tenant: grant.tenant.clone(),
            scope: self.service_scope(&grant.scope.join(" ")),
            active: grant.active,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_grants() {
        let grants = Grants::default();
        let nemesis_side = grants.clone();
        grants.grant("t", "agent", "north", "send");
        nemesis_side.revoke("t", Grant::Token, "send");
        assert!(!grants.introspect("t").active);
    }

    #[derive(Default)]
    struct Recorder {
        told: Mutex<Vec<String>>,
        fail_revoke: bool,
    }

    impl Adapter for Recorder {
        fn grant(&self, grant: &GrantFacts) -> Result<(), String> {
            lock(&self.told).push(format!(
                "grant {} {} {}",
                grant.token, grant.tenant, grant.scope
            ));
            Ok(())
        }
        fn revoke(&self, grant: &GrantFacts, taken: Grant, tool: &str) -> Result<(), String> {
            lock(&self.told).push(format!(
                "revoke {} {taken:?} {tool} left [{}] active={}",
                grant.token, grant.scope, grant.active
            ));
            if self.fail_revoke {
                return Err("psql exited with 2".into());
            }
            Ok(())
        }
    }

    #[test]
    fn an_adapter_is_told_every_grant_and_what_a_revocation_leaves() {
        let grants = Grants::default();
        grants.grant("t", "alex", "north", "read send");
        let recorder = Arc::new(Recorder::default());
        grants.adapted_by(recorder.clone());
        grants.revoke("t", Grant::Scope, "send");
        grants.revoke("t", Grant::Token, "send");
        assert_eq!(
            *lock(&recorder.told),
            [
                "grant t north read send",
                "revoke t Scope send left [read] active=true",
                "revoke t Token send left [read] active=false",
            ]
        );
        assert_eq!(grants.adapter_failure(), None);
    }

    #[test]
    fn a_failed_revocation_is_kept_so_the_run_is_not_judged_on_it() {
        let grants = Grants::default();
        grants.grant("t", "alex", "north", "send");
        grants.adapted_by(Arc::new(Recorder {
            fail_revoke: true,
            ..Recorder::default()
        }));
        grants.revoke("t", Grant::Token, "send");
        assert_eq!(
            grants.adapter_failure().as_deref(),
            Some("psql exited with 2")
        );
        // The harness's own grants were revoked all the same.
        assert!(!grants.introspect("t").active);
    }
}
