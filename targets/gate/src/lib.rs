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

use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex};

use chaos_kit::http::{self, Abort, Request, Response};
use chaos_kit::net::Listener;
use chaos_kit::protocol::{AnswerBody, Introspection, Outcome, IDEMPOTENCY_KEY};
use chaos_kit::target::{self, AfterRetention, TargetInfo};
use chaos_kit::upstream::{self, Dispatch, Owner};
use chaos_kit::TargetEnv;

/// The lab's tools; anything else is refused as unknown.
const TOOLS: [&str; 3] = ["read_invoice", "export_invoices", "send_reminder"];

/// Which of the four controls are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Controls {
    pub identity: bool,
    pub scope: bool,
    pub tenant: bool,
    pub approval: bool,
}

impl Controls {
    pub const ALL: Controls = Controls {
        identity: true,
        scope: true,
        tenant: true,
        approval: true,
    };
    pub const NONE: Controls = Controls {
        identity: false,
        scope: false,
        tenant: false,
        approval: false,
    };

    fn any(self) -> bool {
        self.identity || self.scope || self.tenant || self.approval
    }
}

/// Every variant, in report order: the baseline, each control taken out,
/// then all four.
pub fn variants() -> Vec<(TargetInfo, Controls)> {
    let info = |name: &str, summary: &str| TargetInfo {
        name: name.into(),
        summary: summary.into(),
        retention: None,
        after_retention: AfterRetention::NewOperation,
    };
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
    ]
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

        if self.controls.any() {
            let grant = match self.grant(request).await {
                Ok(grant) => grant,
                Err(answer) => return answer,
            };
            if let Some(answer) = self.authorize(tool, &grant, argument).await {
                return answer;
            }
        }

        let key = request.header_value(IDEMPOTENCY_KEY).unwrap_or("no-key");
        match upstream::dispatch(&self.env, tool, key, request.body.clone()).await {
            Dispatch::Accepted { receipt, replayed } => AnswerBody::outcome(if replayed {
                Outcome::Replayed
            } else {
                Outcome::Applied
            })
            .with_result(target::tool_result(tool, &receipt))
            .with_receipt(receipt),
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

    /// The first control that refuses the call, as its answer.
    async fn authorize<'a>(
        &self,
        tool: &str,
        grant: &Introspection,
        argument: impl Fn(&str) -> Option<&'a str>,
    ) -> Option<AnswerBody> {
        let granted = grant.scope.as_deref().unwrap_or("");
        if self.controls.scope && !granted.split_whitespace().any(|name| name == tool) {
            return Some(refused(
                Outcome::Denied,
                format!("'{tool}' is not in the caller's scope"),
            ));
        }
        if let (true, Some(invoice)) = (self.controls.tenant, argument("invoice")) {
            // The owner comes from the stored record; a `tenant` argument is
            // the model's and is never read.
            match upstream::record(&self.env, invoice).await {
                Owner::Found(record) if Some(record.tenant.as_str()) == grant.tenant.as_deref() => {
                }
                Owner::Found(_) | Owner::NoSuchRecord => {
                    return Some(refused(
                        Outcome::Denied,
                        format!("invoice {invoice} is not the caller's tenant's"),
                    ))
                }
                Owner::Failed => {
                    return Some(
                        AnswerBody::outcome(Outcome::Failed)
                            .with_reason("the record's owner could not be read"),
                    )
                }
            }
        }
        if self.controls.approval && tool == "send_reminder" {
            let actor = grant.sub.as_deref().unwrap_or("");
            let Some(approvals) = upstream::approvals(&self.env, actor).await else {
                return Some(
                    AnswerBody::outcome(Outcome::Failed)
                        .with_reason("the approvals could not be read"),
                );
            };
            let exact = approvals.iter().any(|approval| {
                approval.actor == actor
                    && approval.tool == tool
                    && Some(approval.invoice.as_str()) == argument("invoice")
                    && Some(approval.recipient.as_str()) == argument("recipient")
                    && Some(approval.body.as_str()) == argument("body")
            });
            if !exact {
                return Some(refused(
                    Outcome::Denied,
                    "no approval matches this actor, tool, invoice, recipient and body".into(),
                ));
            }
        }
        None
    }
}

fn refused(outcome: Outcome, reason: String) -> AnswerBody {
    AnswerBody::outcome(outcome).with_reason(reason)
}
