//! The authority: RFC 7662-style token introspection. Revocation is a fault the
//! nemesis applies here; the target only learns of it by asking.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use chaos_kit::http::{Abort, Request, Response};
use chaos_kit::protocol::{Approval, Introspection};

use crate::fault::{Action, Grant};
use crate::history::AuthDecision;
use crate::roles::clock::Timeline;
use crate::roles::nemesis::Nemesis;

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
}

impl Authority {
    pub(crate) fn new(timeline: Arc<dyn Timeline>) -> Authority {
        Authority {
            timeline,
            grants: Mutex::new(BTreeMap::new()),
            approvals: Mutex::new(Vec::new()),
            decisions: Mutex::new(Vec::new()),
            nemesis: OnceLock::new(),
        }
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
    /// wall-clock `now_ms`, from which an expiring one counts.
    pub(crate) fn record_approvals(&self, approvals: &[crate::scenario::Approval], now_ms: u64) {
        lock(&self.approvals).extend(approvals.iter().map(|approval| {
            Approval {
                actor: approval.actor.clone(),
                tool: approval.tool.clone(),
                invoice: approval.invoice.clone(),
                recipient: approval.recipient.clone(),
                body: approval.body.clone(),
                expires_at_ms: approval
                    .expires_after
                    .map(|after| now_ms + chaos_kit::clock::millis(after)),
            }
        }));
    }

    /// Takes away `grant` from `token` for `tool`.
    pub(crate) fn revoke(&self, token: &str, grant: Grant, tool: &str) {
        if let Some(token_grant) = lock(&self.grants).get_mut(token) {
            match grant {
                Grant::Token => token_grant.active = false,
                Grant::Scope => token_grant.scope.retain(|granted| granted != tool),
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
}
