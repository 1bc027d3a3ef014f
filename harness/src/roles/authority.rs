//! The authority: RFC 7662-style token introspection, over the callers'
//! [`Grants`]. Revocation is a fault the nemesis applies to those grants;
//! the target only learns of it by asking here.

use chaos_kit::sync::lock;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use chaos_kit::http::{Abort, Request, Response};
use chaos_kit::protocol::{Approval, Introspection};

use crate::fault::Action;
use crate::history::AuthDecision;
use crate::roles::clock::Timeline;
use crate::roles::grants::{Adapter, Grants, Introspections};

pub(crate) struct Authority {
    timeline: Arc<dyn Timeline>,
    grants: Grants,
    /// The lab's approvals, recorded by trusted code before the run.
    approvals: Mutex<Vec<Approval>>,
    decisions: Mutex<Vec<AuthDecision>>,
}

impl Authority {
    pub(crate) fn new(timeline: Arc<dyn Timeline>) -> Authority {
        Authority {
            timeline,
            grants: Grants::default(),
            approvals: Mutex::new(Vec::new()),
            decisions: Mutex::new(Vec::new()),
        }
    }

    /// The grants it answers from, shared with whoever revokes them.
    pub(crate) fn grants(&self) -> Grants {
        self.grants.clone()
    }

    /// Carries every grant made so far, and each later revocation, to
    /// `adapter` as well.
    pub(crate) fn adapted_by(&self, adapter: Arc<dyn Adapter>) {
        self.grants.adapted_by(adapter);
    }

    /// Why the adapter could not carry a grant or a revocation, if it could not.
    pub(crate) fn adapter_failure(&self) -> Option<String> {
        self.grants.adapter_failure()
    }

    /// Whoever may take this authority down (the nemesis: an outage is a
    /// fault). Generic so this file need not name it.
    pub(crate) fn watched_by<W: Introspections + 'static>(&self, watcher: &Arc<W>) {
        let watcher: Weak<W> = Arc::downgrade(watcher);
        self.grants.watched_by(watcher);
    }

    /// Tells targets the suite's tools by the service's own names
    /// (`[request.tools]`) in introspections, approvals and adapted grants.
    pub(crate) fn name_tools(&self, names: std::collections::BTreeMap<String, String>) {
        self.grants.name_tools(names);
    }

    /// Issues `token` to `sub` of `tenant` with a space-separated `scope`.
    pub(crate) fn grant(&self, token: &str, sub: &str, tenant: &str, scope: &str) {
        self.grants.grant(token, sub, tenant, scope);
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
                tool_call: None,
            }
        }));
    }

    pub(crate) fn decisions(&self) -> Vec<AuthDecision> {
        lock(&self.decisions).clone()
    }

    pub(crate) fn introspect(&self, token: &str) -> Introspection {
        let introspection = self.grants.introspect(token);
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
            // The lab's approvals of actions, then the sign-offs a human gave
            // mid-run to single tool calls.
            let approvals: Vec<Approval> = lock(&self.approvals)
                .iter()
                .filter(|approval| approval.actor == actor)
                .cloned()
                .chain(self.grants.sign_offs(actor))
                .map(|approval| self.grants.told(approval))
                .collect();
            return Ok(Response::json(200, &approvals));
        }
        if request.method != "POST" || request.path != "/introspect" {
            return Ok(Response::new(404));
        }
        let watcher = self.grants.watcher();
        match watcher.as_ref().and_then(|watcher| watcher.introspection()) {
            Some(Action::AuthorityDown) => return Ok(Response::new(503)),
            // No other verdict is given on an introspection.
            Some(
                Action::CrashBeforeDispatch { .. }
                | Action::LoseRequest(_)
                | Action::CrashAfterCommit { .. }
                | Action::LoseAnswer { .. }
                | Action::Stall
                | Action::DelayAnswer { .. }
                | Action::ProviderError { .. }
                | Action::Redeliver
                | Action::AdvanceClock(_)
                | Action::Revoke(_)
                | Action::Replan { .. }
                | Action::CrashAgent { .. }
                | Action::ApproveAgain { .. }
                | Action::TruncateResult
                | Action::Interrupt,
            )
            | None => {}
        }
        let body = String::from_utf8_lossy(&request.body);
        let token = body
            .split('&')
            .find_map(|pair| pair.strip_prefix("token="))
            .unwrap_or("");
        let answer = self.introspect(token);
        if let Some(watcher) = watcher {
            watcher.after_introspection();
        }
        // Recorded in the suite's names, told in the service's own.
        let answer = Introspection {
            scope: (answer.scope.as_deref()).map(|scope| self.grants.service_scope(scope)),
            ..answer
        };
        Ok(Response::json(200, &answer))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::Grant;

    struct Zero;
    impl Timeline for Zero {
        fn now(&self) -> u64 {
            0
        }
    }

    /// `[request.tools]`: the target hears the service's names (its scope,
    /// its approvals); the run records the suite's.
    #[test]
    fn a_target_hears_its_own_tool_names_and_the_record_keeps_the_suites() {
        let authority = Arc::new(Authority::new(Arc::new(Zero)));
        authority.name_tools(std::collections::BTreeMap::from([(
            "send_reminder".to_owned(),
            "remind_customer".to_owned(),
        )]));
        authority.grant("t", "agent", "north", "read send_reminder");
        assert!(authority
            .grants()
            .sign_off("t", "send_reminder", "tu-1", ["inv-1", "", ""]));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let introspected = runtime
            .block_on(authority.clone().handle(Request::post(
                "/introspect",
                bytes::Bytes::from_static(b"token=t"),
            )))
            .unwrap();
        let answer: Introspection = serde_json::from_slice(&introspected.body).unwrap();
        assert_eq!(answer.scope.as_deref(), Some("read remind_customer"));
        assert_eq!(authority.decisions()[0].scope, "read send_reminder");
        let listed = runtime
            .block_on(
                authority
                    .clone()
                    .handle(Request::get("/approvals?actor=agent")),
            )
            .unwrap();
        let approvals: Vec<Approval> = serde_json::from_slice(&listed.body).unwrap();
        assert_eq!(approvals.len(), 1);
        assert_eq!(approvals[0].tool, "remind_customer");
        assert_eq!(approvals[0].tool_call.as_deref(), Some("tu-1"));
    }

    #[test]
    fn revocation_and_scope_removal() {
        let authority = Authority::new(Arc::new(Zero));
        authority.grant("t", "agent", "north", "read send");
        assert!(authority.introspect("t").allows("send"));
        authority.grants().revoke("t", Grant::Scope, "send");
        assert!(!authority.introspect("t").allows("send"));
        assert!(authority.introspect("t").allows("read"));
        authority.grants().revoke("t", Grant::Token, "send");
        assert!(!authority.introspect("t").active);
        assert!(!authority.introspect("unknown").active);
        assert_eq!(authority.decisions().len(), 5);
    }
}
