//! The callers' grants, shared by the two roles that touch them: the
//! authority answers introspections from them, and the nemesis takes them
//! away. Each holds a [`Grants`] instead of the other, so neither needs to
//! know the other exists.
//!
//! A service that keeps its callers in its own store (a users table) never
//! asks the authority: an [`Adapter`] carries each grant and revocation there
//! too, at the same protocol point, so the same faults reach it unchanged.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use chaos_kit::protocol::Introspection;

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
            .map(|(token, grant)| facts(token, grant))
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
            facts(token, token_grant)
        });
        if let (Some(left), Some(adapter)) = (left, self.0.adapter.get()) {
            if let Err(why) = adapter.revoke(&left, grant, tool) {
                lock(&self.0.adapter_failures).push(why);
            }
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

fn facts(token: &str, grant: &TokenGrant) -> GrantFacts {
    GrantFacts {
        token: token.to_owned(),
        actor: grant.sub.clone(),
        tenant: grant.tenant.clone(),
        scope: grant.scope.join(" "),
        active: grant.active,
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
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
