//! The durable record of one operation.

use chaos_kit::canonical;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Fingerprint of the canonical payload the operation was claimed with.
    pub fingerprint: String,
    /// The canonical payload itself, so a restarted worker can re-send it.
    pub payload: String,
    /// The key the provider sees: derived from the scope, so it is the same on
    /// every attempt and after every restart.
    pub downstream_key: String,
    pub created_at_ms: u64,
    /// When its last dispatch ended, answered or not: the effect may have
    /// been committed up to then, so a lagging lookup's "not found" proves
    /// nothing until the lag has passed since. Absent in older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatch_ended_at_ms: Option<u64>,
    /// When a re-send after a lost answer started, written before it is
    /// sent: if this process dies before that dispatch ends, the next
    /// attempt's lookup must wait out the lag from here, not from the
    /// earlier dispatch (explore found a second effect that way). Absent
    /// before any re-send, and in stores that keep no such column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resent_at_ms: Option<u64>,
    /// The tool call (`X-Tool-Use-Id`) that claimed it, kept by a ledger
    /// whose tool policy refuses a step decided again. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use_id: Option<String>,
    pub state: RecordState,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum RecordState {
    /// Claimed; the dispatch has not been answered.
    Pending,
    /// Dispatched, and the answer was lost: the effect may have happened.
    Unknown,
    Succeeded {
        receipt: String,
    },
    Rejected {
        reason: String,
    },
}

impl RecordState {
    /// Not yet final: the outcome may still be learned (and the record settled).
    pub fn is_open(&self) -> bool {
        matches!(self, RecordState::Pending | RecordState::Unknown)
    }
}

impl Record {
    /// A fresh claim of `scope` for `canonical_payload`, bound to `fingerprint`
    /// (of the payload, or of its intent: see `KeyFrom::fingerprint`).
    pub fn pending(
        scope: &str,
        canonical_payload: &str,
        fingerprint: String,
        now_ms: u64,
    ) -> Record {
        Record {
            fingerprint,
            payload: canonical_payload.to_owned(),
            downstream_key: format!("ledger-{}", canonical::fingerprint(scope)),
            created_at_ms: now_ms,
            dispatch_ended_at_ms: None,
            resent_at_ms: None,
            tool_use_id: None,
            state: RecordState::Pending,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a record always serialises")
    }

    pub fn decode(bytes: &[u8]) -> Option<Record> {
        serde_json::from_slice(bytes).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_downstream_key_depends_on_the_scope_only() {
        let first = Record::pending("t/send/k1", r#"{"a":1}"#, "f1".into(), 0);
        let retry = Record::pending("t/send/k1", r#"{"a":2}"#, "f2".into(), 99);
        let other = Record::pending("t/send/k2", r#"{"a":1}"#, "f1".into(), 0);
        assert_eq!(first.downstream_key, retry.downstream_key);
        assert_ne!(first.downstream_key, other.downstream_key);
    }

    #[test]
    fn records_survive_encoding() {
        let mut record = Record::pending("t/send/k1", r#"{"a":1}"#, "f1".into(), 5);
        record.state = RecordState::Succeeded {
            receipt: "r-1".into(),
        };
        assert_eq!(Record::decode(&record.encode()), Some(record));
    }
}
