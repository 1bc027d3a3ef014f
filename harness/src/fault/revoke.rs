//! `revoke`: the caller loses its permission at the authority. The target
//! only learns of it by asking, which is the point: an idempotency key is
//! not a credential, and a replay must be authorized like any other answer.

use std::fmt;

use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;
use serde::{Deserialize, Serialize};

use super::{Action, Declared, Event, Fault, Kind, Live, Role, Space, Trigger};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Grant {
    /// The caller's token stops being active.
    Token,
    /// The tool is removed from the token's scope.
    Scope,
}

/// Take the caller's permission away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Revoke {
    pub grant: Grant,
    pub when: Trigger,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(crate) struct File {
    grant: Grant,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    after_call: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    after_commit: Option<u32>,
    /// Between the target's introspection and its dispatch: the Nth
    /// introspection is answered with the grant, then the grant goes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    after_introspection: Option<u32>,
}

impl fmt::Display for Revoke {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.grant {
            Grant::Token => "caller's token revoked",
            Grant::Scope => "tool removed from the caller's scope",
        };
        write!(f, "{what} {}", self.when)
    }
}

impl Kind for Revoke {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn role(&self) -> Role {
        Role::Authority
    }

    fn verdict(&self, event: Event) -> Option<Action> {
        (event == Event::Moment(self.when)).then_some(Action::Revoke(self.grant))
    }

    fn trigger(&self) -> Option<Trigger> {
        Some(self.when)
    }

    fn trigger_mut(&mut self) -> Option<&mut Trigger> {
        Some(&mut self.when)
    }

    fn simpler(&self) -> Vec<Fault> {
        self.when
            .simpler()
            .into_iter()
            .map(|when| Fault::Revoke(Revoke { when, ..*self }))
            .collect()
    }

    fn live(&self) -> Live {
        Live::AsSimulated
    }
}

impl Declared for Revoke {
    const NAME: &'static str = "revoke";
    const WEIGHT: u32 = 1;
    type File = File;

    fn from_file(file: File, calls: u32) -> Result<Revoke, String> {
        let when = match (file.after_introspection, file.after_call, file.after_commit) {
            (Some(0), _, _) => {
                return Err("after-introspection counts introspections from 1, not 0".into())
            }
            (Some(nth), None, None) => Trigger::AfterIntrospection(nth),
            (Some(_), _, _) => {
                return Err(
                    "revoke needs exactly one of after-call = N, after-commit = N or after-introspection = N".into(),
                )
            }
            (None, after_call, after_commit) => {
                Trigger::from_file(Self::NAME, after_call, after_commit, calls)?
            }
        };
        Ok(Revoke {
            grant: file.grant,
            when,
        })
    }

    fn to_file(&self) -> File {
        let (after_call, after_commit) = self.when.to_file();
        let after_introspection = match self.when {
            Trigger::AfterIntrospection(nth) => Some(nth),
            _ => None,
        };
        File {
            grant: self.grant,
            after_call,
            after_commit,
            after_introspection,
        }
    }

    fn strategy(space: Space) -> BoxedStrategy<Revoke> {
        let grant = prop_oneof![Just(Grant::Token), Just(Grant::Scope)];
        (grant, Trigger::strategy(space))
            .prop_map(|(grant, when)| Revoke { grant, when })
            .boxed()
    }
}
