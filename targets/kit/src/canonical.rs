//! Canonical JSON: two payloads that mean the same thing (reordered keys, other
//! whitespace) have the same canonical form and the same fingerprint.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Re-serialises `value` with object keys sorted and no insignificant whitespace.
/// (`serde_json::Map` is a `BTreeMap` unless `preserve_order` is enabled, which
/// this crate does not enable, so plain serialisation is already sorted.)
pub fn canonical_json(value: &Value) -> String {
    serde_json::to_string(value).expect("a serde_json::Value always serialises")
}

/// Parses `bytes` as JSON and returns the canonical form, or `None` when the
/// bytes are not JSON.
pub fn canonicalize(bytes: &[u8]) -> Option<String> {
    serde_json::from_slice::<Value>(bytes)
        .ok()
        .map(|value| canonical_json(&value))
}

/// A short hex fingerprint (the first 96 bits of SHA-256) of arbitrary text.
pub fn fingerprint(text: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(text.as_bytes());
    let mut hex = String::with_capacity(24);
    for byte in &digest[..12] {
        hex.push(HEX[usize::from(byte >> 4)] as char);
        hex.push(HEX[usize::from(byte & 0x0f)] as char);
    }
    hex
}

/// The fingerprint of an already parsed JSON payload.
pub fn value_fingerprint(value: &Value) -> String {
    fingerprint(&canonical_json(value))
}

/// The payload as an intent: what the action *is*, not how the model worded
/// it. Numbers are compared by value (`4999.0` is `4999`) and the `free_text`
/// fields (a memo, a note the model may reword) are left out. Two payloads
/// with the same intent are the same action, retried or re-planned.
pub fn intent(value: &Value, free_text: &[&str]) -> Value {
    match value {
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .filter(|(name, _)| !free_text.contains(&name.as_str()))
                .map(|(name, field)| (name.clone(), intent(field, &[])))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|item| intent(item, &[])).collect()),
        Value::Number(number) => match number.as_f64() {
            Some(float) if number.is_f64() && float.fract() == 0.0 && float.abs() < 9.0e15 => {
                Value::from(float as i64)
            }
            _ => Value::Number(number.clone()),
        },
        other => other.clone(),
    }
}

/// The fingerprint of a payload's intent (see [`intent`]); equal to its
/// [`value_fingerprint`] when nothing was normalized away.
pub fn intent_fingerprint(value: &Value, free_text: &[&str]) -> String {
    value_fingerprint(&intent(value, free_text))
}

/// The fingerprint of a JSON payload's canonical form; non-JSON bytes are
/// fingerprinted as they are.
pub fn payload_fingerprint(bytes: &[u8]) -> String {
    match canonicalize(bytes) {
        Some(canonical) => fingerprint(&canonical),
        None => fingerprint(&String::from_utf8_lossy(bytes)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reordered_keys_and_whitespace_share_a_fingerprint() {
        let a = br#"{"invoice":"inv-1","recipient":"a@example.com","body":"hi"}"#;
        let b =
            b"{ \"body\" : \"hi\",\n  \"recipient\": \"a@example.com\", \"invoice\": \"inv-1\" }";
        assert_eq!(payload_fingerprint(a), payload_fingerprint(b));
    }

    #[test]
    fn fingerprints_are_stable_hex() {
        // Fingerprints appear in reports: they must not change between builds.
        assert_eq!(fingerprint("abc"), "ba7816bf8f01cfea414140de");
        assert_eq!(
            value_fingerprint(&serde_json::json!({"b": 1, "a": 2})),
            payload_fingerprint(br#"{"a":2,"b":1}"#)
        );
    }

    #[test]
    fn an_intent_ignores_number_spelling_and_free_text_only() {
        let approved =
            serde_json::json!({"invoice": "inv-1", "amount_cents": 4999, "note": "first notice"});
        let drifted =
            serde_json::json!({"invoice": "inv-1", "amount_cents": 4999.0, "note": "1st notice"});
        let moved =
            serde_json::json!({"invoice": "inv-1", "amount_cents": 5000, "note": "first notice"});
        assert_ne!(value_fingerprint(&approved), value_fingerprint(&drifted));
        assert_eq!(
            intent_fingerprint(&approved, &["note"]),
            intent_fingerprint(&drifted, &["note"])
        );
        assert_ne!(
            intent_fingerprint(&approved, &["note"]),
            intent_fingerprint(&moved, &["note"])
        );
        // Nothing to normalize: the intent's fingerprint is the payload's.
        let plain = serde_json::json!({"invoice": "inv-1", "amount_cents": 4999});
        assert_eq!(
            intent_fingerprint(&plain, &["note"]),
            value_fingerprint(&plain)
        );
    }

    #[test]
    fn a_changed_field_changes_the_fingerprint() {
        let a = br#"{"invoice":"inv-1","recipient":"a@example.com"}"#;
        let b = br#"{"invoice":"inv-1","recipient":"b@example.com"}"#;
        assert_ne!(payload_fingerprint(a), payload_fingerprint(b));
    }
}
