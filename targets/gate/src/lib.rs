//! `gate`: the reference authorization boundary of the seed article "Testing
//! AI Agent Tool Authorization: Seven Reproducible Failure Cases", with its
//! four controls:
//!
//! - active identity: "reject a caller whose access has been revoked";
//! - tool scope: "allow invoice reads and reminders, but deny bulk export";
//! - tenant ownership: "resolve ownership from the stored record, not a
//!   tenant label in model arguments" (the provider's `GET /records/{id}`);
//! - exact approval: "require approval to match the actor, tool, invoice,
//!   recipient, and message body" (the authority's `GET /approvals`).
//!
//! Each control can be taken out ([`Controls`]), as the lab's toggles do,
//! and `baseline` has none: it "validates known tools and basic input
//! structure but omits four authorization controls". An allowed call is
//! dispatched to the provider, a read included: the record released to the
//! caller is the read's effect, so a denied read that leaked is counted.
//!
//! Beyond the lab, which names what it does not test ("approval expiry or
//! replay, concurrent revocation"), each control holds in the ways a
//! [`Weakness`] variant gives up: an approval is used once and not past its
//! expiry, the caller is checked again right before dispatch, and the
//! caller's tenant is the authority's, never a request header's.
//!
//! The lab's export is "intentionally overbroad" and its tenant control
//! guards the single-record route only: "Tenant checks on individual reads
//! do not protect this separate bulk endpoint". With export in scope, that
//! composition leaks every tenant's records; `gate` checks the owner of each
//! record an export releases (the provider's bulk `GET /records` answers
//! with all of them), `gate-export-unscoped` checks only the route.

pub mod posture;

use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex};

use chaos_kit::http::{self, Abort, Request, Response};
use chaos_kit::net::Listener;
use chaos_kit::protocol::{AnswerBody, Approval, Introspection, Outcome, Record, IDEMPOTENCY_KEY};
use chaos_kit::target::{self, AfterRetention, TargetInfo};
use chaos_kit::upstream::{self, Dispatch, Owner};
use chaos_kit::TargetEnv;

/// The lab's tools; anything else is refused as unknown.
const TOOLS: [&str; 3] = ["read_invoice", "export_invoices", "send_reminder"];

/// The header a client may send claiming a tenant: never trusted by `gate`.
pub const TENANT_HEADER: &str = "x-tenant";

/// Which of the four controls are on, and which one of them, if any, is
/// weakened in a way the lab does not test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Controls {
    pub identity: bool,
    pub scope: bool,
    pub tenant: bool,
    pub approval: bool,
    pub weakness: Option<Weakness>,
}

/// One way a control holds in the lab and still gives way under a fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weakness {
    /// Exact approval, never consumed: one approval sends twice.
    ReusesApprovals,
    /// Exact approval, its expiry never read.
    IgnoresExpiry,
    /// Active identity checked once, at the start of the call: a revocation
    /// that lands before the dispatch goes unseen.
    ChecksOnce,
    /// Tenant ownership compared with an `X-Tenant` header when one is sent.
    TrustsTenantHeader,
    /// Tenant ownership checked on the single-record route only: an export
    /// in scope releases every record the bulk route gives, as the lab's
    /// controls do.
    ExportUnscoped,
}

impl Controls {
    pub const ALL: Controls = Controls {
        identity: true,
        scope: true,
        tenant: true,
        approval: true,
        weakness: None,
    };
    pub const NONE: Controls = Controls {
        identity: false,
        scope: false,
        tenant: false,
        approval: false,
        weakness: None,
    };

    fn any(self) -> bool {
        self.identity || self.scope || self.tenant || self.approval
    }

    fn weak(self, weakness: Weakness) -> bool {
        self.weakness == Some(weakness)
    }
}

/// A gate remembers nothing between calls that a retention could expire.
pub(crate) fn info(name: &str, summary: &str) -> TargetInfo {
    TargetInfo {
        name: name.into(),
        summary: summary.into(),
        retention: None,
        after_retention: AfterRetention::NewOperation,
    }
}

/// Every variant, in report order: the baseline, each control taken out,
/// then all four.
pub fn variants() -> Vec<(TargetInfo, Controls)> {
    vec![
        (
            info(
                "baseline",
                "the lab's unchecked baseline: known tools and JSON arguments only, none of the four controls",
            ),
            Controls::NONE,
        ),
        (
            info(
                "gate-no-identity",
                "gate without active identity (WEAK): trusts the caller's grant as it first introspected it",
            ),
            Controls {
                identity: false,
                ..Controls::ALL
            },
        ),
        (
            info(
                "gate-no-scope",
                "gate without tool scope (WEAK): any known tool, the bulk export included",
            ),
            Controls {
                scope: false,
                ..Controls::ALL
            },
        ),
        (
            info(
                "gate-no-tenant",
                "gate without tenant ownership (WEAK): never asks who owns the record",
            ),
            Controls {
                tenant: false,
                ..Controls::ALL
            },
        ),
        (
            info(
                "gate-no-approval",
                "gate without exact approval (WEAK): sends without matching an approval",
            ),
            Controls {
                approval: false,
                ..Controls::ALL
            },
        ),
        (
            info(
                "gate",
                "authorization gate with the lab's four controls: active identity, tool scope, tenant ownership from the stored record, exact approval",
            ),
            Controls::ALL,
        ),
        (
            info(
                "gate-reuses-approval",
                "gate whose approvals are never consumed (WEAK): one approval sends any number of times",
            ),
            weakened(Weakness::ReusesApprovals),
        ),
        (
            info(
                "gate-ignores-expiry",
                "gate that never reads an approval's expiry (WEAK): a stale approval still sends",
            ),
            weakened(Weakness::IgnoresExpiry),
        ),
        (
            info(
                "gate-checks-once",
                "gate that checks the caller once, at the start of the call (WEAK): a revocation before the dispatch goes unseen",
            ),
            weakened(Weakness::ChecksOnce),
        ),
        (
            info(
                "gate-trusts-header",
                "gate that takes the caller's tenant from an X-Tenant header when one is sent (WEAK)",
            ),
            weakened(Weakness::TrustsTenantHeader),
        ),
        (
            info(
                "gate-export-unscoped",
                "gate whose tenant check guards the single-record route only (WEAK): an export in scope releases every tenant's records",
            ),
            weakened(Weakness::ExportUnscoped),
        ),
    ]
}

fn weakened(weakness: Weakness) -> Controls {
    Controls {
        weakness: Some(weakness),
        ..Controls::ALL
    }
}

/// The variant called `name`.
pub fn variant(name: &str) -> Option<(TargetInfo, Controls)> {
    variants().into_iter().find(|(info, _)| info.name == name)
}

struct Gate {
    env: TargetEnv,
    controls: Controls,
    /// Without the identity control: each token's grant as first seen
    /// active, reused after it was revoked (a planned call runs on the
    /// authorization it was planned with).
    seen: Mutex<BTreeMap<String, Introspection>>,
    /// Each approval used, as its JSON, and the Idempotency-Key of the one
    /// operation it was used for: that operation's retries still pass, any
    /// other call is a replay. Held in the gate, so a restart forgets it.
    used: Mutex<BTreeMap<String, String>>,
}

/// Serves tool calls on `listener` until `shutdown` completes.
pub async fn serve(
    listener: impl Listener,
    shutdown: impl std::future::Future<Output = ()>,
    env: TargetEnv,
    controls: Controls,
) -> io::Result<()> {
    let gate = Arc::new(Gate {
        env,
        controls,
        seen: Mutex::new(BTreeMap::new()),
        used: Mutex::new(BTreeMap::new()),
    });
    http::serve(
        listener,
        shutdown,
        http::handler(move |request| {
            let gate = gate.clone();
            async move { Ok::<_, Abort>(gate.handle(request).await) }
        }),
    )
    .await
}

impl Gate {
    async fn handle(&self, request: Request) -> Response {
        if target::is_health_check(&request) {
            return Response::new(200);
        }
        let Some(tool) = target::tool_call(&request) else {
            return target::not_found();
        };
        target::answer(self.decide(tool, &request).await)
    }

    async fn decide(&self, tool: &str, request: &Request) -> AnswerBody {
        if !TOOLS.contains(&tool) {
            return refused(Outcome::Rejected, format!("unknown tool '{tool}'"));
        }
        let Ok(arguments) = serde_json::from_slice::<serde_json::Value>(&request.body) else {
            return refused(Outcome::Rejected, "arguments are not JSON".into());
        };
        let argument = |name: &str| arguments.get(name).and_then(|value| value.as_str());
        if tool != "export_invoices" && argument("invoice").is_none() {
            return refused(Outcome::Rejected, format!("{tool} needs an invoice"));
        }

        let key = request.header_value(IDEMPOTENCY_KEY).unwrap_or("no-key");
        // The caller's tenant, once the authority has told it.
        let mut tenant = None;
        if self.controls.any() {
            let grant = match self.grant(request).await {
                Ok(grant) => grant,
                Err(answer) => return answer,
            };
            tenant = self.caller_tenant(&grant, request).map(str::to_owned);
            let approval = match self.authorize(tool, &grant, request, argument).await {
                Ok(approval) => approval,
                Err(answer) => return answer,
            };
            if let Some(answer) = self.still_active(request).await {
                return answer;
            }
            if let Some(approval) = approval {
                if let Some(answer) = self.consume(&approval, key) {
                    return answer;
                }
            }
        }

        // An export's records are read before anything is done, so a
        // listing that fails ends the call with nothing dispatched.
        let released = match tool {
            "export_invoices" => match upstream::records(&self.env).await {
                Some(all) => Some(self.releasable(all, tenant.as_deref())),
                None => {
                    return AnswerBody::outcome(Outcome::Failed)
                        .with_reason("the records to export could not be read")
                }
            },
            _ => None,
        };

        match upstream::dispatch(&self.env, tool, key, request.body.clone()).await {
            Dispatch::Accepted { receipt, replayed } => {
                let mut result = target::tool_result(tool, &receipt);
                if let Some(records) = released {
                    result["records"] = serde_json::json!(records);
                }
                AnswerBody::outcome(if replayed {
                    Outcome::Replayed
                } else {
                    Outcome::Applied
                })
                .with_result(result)
                .with_receipt(receipt)
            }
            Dispatch::Refused { status } => {
                refused(Outcome::Rejected, format!("provider refused with {status}"))
            }
            Dispatch::Ambiguous(_) => {
                AnswerBody::outcome(Outcome::Unknown).with_reason("provider did not answer")
            }
        }
    }

    /// The caller as the authority tells it now, or the answer that ends the
    /// call. Without the identity control, a revoked token keeps the grant
    /// it was first seen with.
    async fn grant(&self, request: &Request) -> Result<Introspection, AnswerBody> {
        let Some(token) = upstream::bearer_token(request) else {
            return Err(refused(Outcome::Denied, "no bearer token".into()));
        };
        let Some(now) = upstream::introspect(&self.env, token).await else {
            // Nothing was done: safe to retry.
            return Err(
                AnswerBody::outcome(Outcome::Failed).with_reason("the authority did not answer")
            );
        };
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if now.active {
            seen.entry(token.to_owned()).or_insert_with(|| now.clone());
            return Ok(now);
        }
        if self.controls.identity {
            return Err(refused(
                Outcome::Denied,
                "the caller's access was revoked".into(),
            ));
        }
        // WEAK (gate-no-identity): the revocation is never looked at.
        Ok(seen.get(token).cloned().unwrap_or(now))
    }

    /// The first control that refuses the call, as its answer; else the
    /// approval the call goes out on, if it needs one.
    async fn authorize<'a>(
        &self,
        tool: &str,
        grant: &Introspection,
        request: &Request,
        argument: impl Fn(&str) -> Option<&'a str>,
    ) -> Result<Option<Approval>, AnswerBody> {
        let granted = grant.scope.as_deref().unwrap_or("");
        if self.controls.scope && !granted.split_whitespace().any(|name| name == tool) {
            return Err(refused(
                Outcome::Denied,
                format!("'{tool}' is not in the caller's scope"),
            ));
        }
        // The single-record routes name their record; the export is the
        // bulk route, whose records are checked one by one as it releases
        // them (`releasable`), not by an argument.
        let single = (tool != "export_invoices")
            .then(|| argument("invoice"))
            .flatten();
        if let (true, Some(invoice)) = (self.controls.tenant, single) {
            // The owner comes from the stored record; a `tenant` argument is
            // the model's and is never read.
            let caller = self.caller_tenant(grant, request);
            match upstream::record(&self.env, invoice).await {
                Owner::Found(record) if Some(record.tenant.as_str()) == caller => {}
                Owner::Found(_) | Owner::NoSuchRecord => {
                    return Err(refused(
                        Outcome::Denied,
                        format!("invoice {invoice} is not the caller's tenant's"),
                    ))
                }
                Owner::Failed => {
                    return Err(AnswerBody::outcome(Outcome::Failed)
                        .with_reason("the record's owner could not be read"))
                }
            }
        }
        if !(self.controls.approval && tool == "send_reminder") {
            return Ok(None);
        }
        let actor = grant.sub.as_deref().unwrap_or("");
        let Some(approvals) = upstream::approvals(&self.env, actor).await else {
            return Err(
                AnswerBody::outcome(Outcome::Failed).with_reason("the approvals could not be read")
            );
        };
        let exact: Vec<Approval> = approvals
            .into_iter()
            .filter(|approval| {
                approval.actor == actor
                    && approval.tool == tool
                    && Some(approval.invoice.as_str()) == argument("invoice")
                    && Some(approval.recipient.as_str()) == argument("recipient")
                    && Some(approval.body.as_str()) == argument("body")
            })
            .collect();
        if exact.is_empty() {
            return Err(refused(
                Outcome::Denied,
                "no approval matches this actor, tool, invoice, recipient and body".into(),
            ));
        }
        let now = self.env.clock.now_ms();
        let current = exact.into_iter().find(|approval| {
            // WEAK (gate-ignores-expiry): an approval holds for ever.
            self.controls.weak(Weakness::IgnoresExpiry)
                || approval.expires_at_ms.is_none_or(|expiry| now < expiry)
        });
        match current {
            Some(approval) => Ok(Some(approval)),
            None => Err(refused(
                Outcome::Denied,
                "the approval matching this call has expired".into(),
            )),
        }
    }

    /// The caller's tenant: the authority's, never a request header's.
    fn caller_tenant<'a>(&self, grant: &'a Introspection, request: &'a Request) -> Option<&'a str> {
        match request.header_value(TENANT_HEADER) {
            // WEAK (gate-trusts-header): the client names its tenant.
            Some(claimed) if self.controls.weak(Weakness::TrustsTenantHeader) => Some(claimed),
            _ => grant.tenant.as_deref(),
        }
    }

    /// Of the records the bulk route gave, those the caller may receive:
    /// with the tenant control, each record's stored owner is checked, as the
    /// single-record route checks one; without it, all of them.
    fn releasable(&self, all: Vec<Record>, tenant: Option<&str>) -> Vec<Record> {
        // WEAK (gate-export-unscoped): the route was checked, not the records.
        if !self.controls.tenant || self.controls.weak(Weakness::ExportUnscoped) {
            return all;
        }
        all.into_iter()
            .filter(|record| Some(record.tenant.as_str()) == tenant)
            .collect()
    }

    /// With the identity control, the caller asked about again right before
    /// the dispatch: a revocation that landed while the call was being
    /// authorized refuses it. The answer that ends the call, if any.
    async fn still_active(&self, request: &Request) -> Option<AnswerBody> {
        // WEAK (gate-checks-once): the first introspection stands.
        if !self.controls.identity || self.controls.weak(Weakness::ChecksOnce) {
            return None;
        }
        let token = upstream::bearer_token(request)?;
        match upstream::introspect(&self.env, token).await {
            Some(now) if now.active => None,
            Some(_) => Some(refused(
                Outcome::Denied,
                "the caller's access was revoked while the call was authorized".into(),
            )),
            None => Some(
                AnswerBody::outcome(Outcome::Failed).with_reason("the authority did not answer"),
            ),
        }
    }

    /// Uses `approval` for the operation keyed `key`, or refuses a replay:
    /// an approval is "exactly this action, once", and a retry of the same
    /// operation (its key) is the same use.
    fn consume(&self, approval: &Approval, key: &str) -> Option<AnswerBody> {
        // WEAK (gate-reuses-approval): nothing is ever used up.
        if self.controls.weak(Weakness::ReusesApprovals) {
            return None;
        }
        let id = serde_json::to_string(approval).expect("an approval serialises");
        let mut used = self
            .used
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match used.get(&id) {
            Some(owner) if owner != key => Some(refused(
                Outcome::Denied,
                "the approval was already used by another call".into(),
            )),
            Some(_) => None,
            None => {
                used.insert(id, key.to_owned());
                None
            }
        }
    }
}

fn refused(outcome: Outcome, reason: String) -> AnswerBody {
    AnswerBody::outcome(outcome).with_reason(reason)
}
