//! The authority: RFC 7662-style token introspection. Revocation is a fault the
//! nemesis applies here; the target only learns of it by asking.
//!
//! A service that keeps its callers in its own store (a users table) never
//! asks: an [`Adapter`] carries each grant and revocation there too, at the
//! same protocol point, so the same faults reach it unchanged.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use chaos_kit::http::{Abort, Request, Response};
use chaos_kit::protocol::{Approval, Introspection};

use crate::fault::{Action, Grant};
use crate::history::AuthDecision;
use crate::roles::clock::Timeline;
use crate::roles::nemesis::Nemesis;

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

#[derive(Debug, Clone)]
struct TokenGrant {
    active: bool,
    sub: String,
    tenant: String,
    scope: Vec<String>,
}

pub(crate) struct Authority {
    timeline: Arc<dyn Timeline>,
    grants: Mutex<BTreeMap<String, TokenGrant>>,
    /// The lab's approvals, recorded by trusted code before the run.
    approvals: Mutex<Vec<Approval>>,
    decisions: Mutex<Vec<AuthDecision>>,
    /// Asked about every introspection (an outage is a fault). Weak: the
    /// nemesis holds this authority to revoke grants.
    nemesis: OnceLock<Weak<Nemesis>>,
    adapter: OnceLock<Arc<dyn Adapter>>,
    /// Why the adapter failed, first failure first: the run cannot be judged.
    adapter_failures: Mutex<Vec<String>>,
}

impl Authority {
    pub(crate) fn new(timeline: Arc<dyn Timeline>) -> Authority {
        Authority {
            timeline,
            grants: Mutex::new(BTreeMap::new()),
            approvals: Mutex::new(Vec::new()),
            decisions: Mutex::new(Vec::new()),
            nemesis: OnceLock::new(),
            adapter: OnceLock::new(),
            adapter_failures: Mutex::new(Vec::new()),
        }
    }

    /// Carries every grant made so far, and each later revocation, to
    /// `adapter` as well.
    pub(crate) fn adapted_by(&self, adapter: Arc<dyn Adapter>) {
        let grants: Vec<GrantFacts> = lock(&self.grants)
            .iter()
            .map(|(token, grant)| facts(token, grant))
            .collect();
        for grant in &grants {
            if let Err(why) = adapter.grant(grant) {
                lock(&self.adapter_failures).push(why);
            }
        }
        let _ = self.adapter.set(adapter);
    }

    /// Why the adapter could not carry a grant or a revocation, if it could not.
    pub(crate) fn adapter_failure(&self) -> Option<String> {
        lock(&self.adapter_failures).first().cloned()
    }

    /// The nemesis whose faults may take this authority down.
    pub(crate) fn watched_by(&self, nemesis: &Arc<Nemesis>) {
        let _ = self.nemesis.set(Arc::downgrade(nemesis));
    }

    /// Issues `token` to `sub` of `tenant` with a space-separated `scope`.
    pub(crate) fn grant(&self, token: &str, sub: &str, tenant: &str, scope: &str) {
        lock(&self.grants).insert(
            token.to_owned(),
            TokenGrant {
                active: true,
                sub: sub.to_owned(),
                tenant: tenant.to_owned(),
                scope: scope.split_whitespace().map(str::to_owned).collect(),
            },
        );
    }

    /// Records approvals as a human gave them, for `GET /approvals`, at
    /// wall-clock `now_ms`, from which each holds for its `expiries` entry
    /// (the declared one, or live the one shortened for the run).
    pub(crate) fn record_approvals(
        &self,
        approvals: &[crate::scenario::Approval],
        expiries: &[Option<Duration>],
        now_ms: u64,
    ) {
        lock(&self.approvals).extend(approvals.iter().zip(expiries).map(|(approval, expiry)| {
            Approval {
                actor: approval.actor.clone(),
                tool: approval.tool.clone(),
                invoice: approval.invoice.clone(),
                recipient: approval.recipient.clone(),
                body: approval.body.clone(),
                expires_at_ms: expiry.map(|after| now_ms + chaos_kit::clock::millis(after)),
            }
        }));
    }

    /// Takes away `grant` from `token` for `tool`, here and, before this
    /// returns, in the adapter's store.
    pub(crate) fn revoke(&self, token: &str, grant: Grant, tool: &str) {
        let left = lock(&self.grants).get_mut(token).map(|token_grant| {
            match grant {
                Grant::Token => token_grant.active = false,
                Grant::Scope => token_grant.scope.retain(|granted| granted != tool),
            }
            facts(token, token_grant)
        });
        if let (Some(left), Some(adapter)) = (left, self.adapter.get()) {
            if let Err(why) = adapter.revoke(&left, grant, tool) {
                lock(&self.adapter_failures).push(why);
            }
        }
    }

    pub(crate) fn decisions(&self) -> Vec<AuthDecision> {
        lock(&self.decisions).clone()
    }

    pub(crate) fn introspect(&self, token: &str) -> Introspection {
        let introspection = match lock(&self.grants).get(token) {
            Some(grant) if grant.active => Introspection {
                active: true,
                sub: Some(grant.sub.clone()),
                tenant: Some(grant.tenant.clone()),
                scope: Some(grant.scope.join(" ")),
            },
            _ => Introspection::default(),
        };
        lock(&self.decisions).push(AuthDecision {
            at: self.timeline.now(),
            active: introspection.active,
            scope: introspection.scope.clone().unwrap_or_default(),
        });
        introspection
    }

    pub(crate) async fn handle(self: Arc<Self>, request: Request) -> Result<Response, Abort> {
        if request.method == "GET" && request.path == "/healthz" {
            return Ok(Response::new(200));
        }
        if request.method == "GET" && request.path == "/approvals" {
            let actor = request.query_param("actor").unwrap_or("");
            let approvals: Vec<Approval> = lock(&self.approvals)
                .iter()
                .filter(|approval| approval.actor == actor)
                .cloned()
                .collect();
            return Ok(Response::json(200, &approvals));
        }
        if request.method != "POST" || request.path != "/introspect" {
            return Ok(Response::new(404));
        }
        let nemesis = self.nemesis.get().and_then(Weak::upgrade);
        let down = nemesis.as_ref().and_then(|nemesis| nemesis.introspection());
        if down == Some(Action::AuthorityDown) {
            return Ok(Response::new(503));
        }
        let body = String::from_utf8_lossy(&request.body);
        let token = body
            .split('&')
            .find_map(|pair| pair.strip_prefix("token="))
            .unwrap_or("");
        let answer = self.introspect(token);
        if let Some(nemesis) = nemesis {
            nemesis.after_introspection();
        }
        Ok(Response::json(200, &answer))
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

    struct Zero;
    impl Timeline for Zero {
        fn now(&self) -> u64 {
            0
        }
    }

    #[test]
    fn revocation_and_scope_removal() {
        let authority = Authority::new(Arc::new(Zero));
        authority.grant("t", "agent", "north", "read send");
        assert!(authority.introspect("t").allows("send"));
        authority.revoke("t", Grant::Scope, "send");
        assert!(!authority.introspect("t").allows("send"));
        assert!(authority.introspect("t").allows("read"));
        authority.revoke("t", Grant::Token, "send");
        assert!(!authority.introspect("t").active);
        assert!(!authority.introspect("unknown").active);
        assert_eq!(authority.decisions().len(), 5);
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
        let authority = Authority::new(Arc::new(Zero));
        authority.grant("t", "alex", "north", "read send");
        let recorder = Arc::new(Recorder::default());
        authority.adapted_by(recorder.clone());
        authority.revoke("t", Grant::Scope, "send");
        authority.revoke("t", Grant::Token, "send");
        assert_eq!(
            *lock(&recorder.told),
            [
                "grant t north read send",
                "revoke t Scope send left [read] active=true",
                "revoke t Token send left [read] active=false",
            ]
        );
        assert_eq!(authority.adapter_failure(), None);
    }

    #[test]
    fn a_failed_revocation_is_kept_so_the_run_is_not_judged_on_it() {
        let authority = Authority::new(Arc::new(Zero));
        authority.grant("t", "alex", "north", "send");
        authority.adapted_by(Arc::new(Recorder {
            fail_revoke: true,
            ..Recorder::default()
        }));
        authority.revoke("t", Grant::Token, "send");
        assert_eq!(
            authority.adapter_failure().as_deref(),
            Some("psql exited with 2")
        );
        // The harness's own authority revoked all the same.
        assert!(!authority.introspect("t").active);
    }
}
