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
    fn a_changed_field_changes_the_fingerprint() {
        let a = br#"{"invoice":"inv-1","recipient":"a@example.com"}"#;
        let b = br#"{"invoice":"inv-1","recipient":"b@example.com"}"#;
        assert_ne!(payload_fingerprint(a), payload_fingerprint(b));
    }
}
