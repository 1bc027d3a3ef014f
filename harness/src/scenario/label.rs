//! The scenario values that chaos hands to a target's `[authority]`
//! commands (`{actor}`, `{tenant}`): a user's command may paste them into a
//! SQL statement or a shell line, so they are held to a small alphabet where
//! they are declared, and a hostile value never reaches a command (issue 27).

use serde::{Deserialize, Deserializer};

/// Bytes in a label; the same bound as every other name of a scenario.
pub const MAX_LABEL_BYTES: usize = super::file::MAX_NAME_BYTES;

/// `[fixture] tenant`: letters, digits, `_` and `-`, as an operation's tenant.
pub(crate) fn tenant<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    let value = String::deserialize(deserializer)?;
    check("fixture.tenant", &value, b"_-", "'_' or '-'", "north")
        .map_err(serde::de::Error::custom)?;
    Ok(value)
}

/// `[fixture] actor`: an account name or an address, so `.` and `@` too.
pub(crate) fn actor<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    let value = String::deserialize(deserializer)?;
    check(
        "fixture.actor",
        &value,
        b"_-.@",
        "'_', '-', '.' or '@'",
        "alex or alex@north.example",
    )
    .map_err(serde::de::Error::custom)?;
    Ok(value)
}

/// Fails unless `value` is 1 to [`MAX_LABEL_BYTES`] ASCII letters, digits
/// or `extra` bytes; the message says what is allowed.
fn check(
    what: &str,
    value: &str,
    extra: &[u8],
    extra_named: &str,
    example: &str,
) -> Result<(), String> {
    let allowed = |byte: u8| byte.is_ascii_alphanumeric() || extra.contains(&byte);
    if value.is_empty() || value.len() > MAX_LABEL_BYTES || !value.bytes().all(allowed) {
        let shown: String = value.chars().take(40).collect();
        return Err(format!(
            "{what} {shown:?} must be 1 to {MAX_LABEL_BYTES} ASCII letters, digits, {extra_named} \
             (it reaches the target's [authority] commands), e.g. {example}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_refuse_quotes_spaces_braces_and_control_characters() {
        for hostile in [
            "a', 'b', 'c'); DROP TABLE victim; --",
            "$(touch /tmp/pwned)",
            "alex {token}",
            "alex\n",
            "",
            "ålex",
        ] {
            assert!(
                check("fixture.actor", hostile, b"_-.@", "", "").is_err(),
                "{hostile:?}"
            );
        }
        check("fixture.actor", "alex@north.example", b"_-.@", "", "").unwrap();
        check("fixture.tenant", "north-2_b", b"_-", "", "").unwrap();
        assert!(check("fixture.tenant", "a.b", b"_-", "", "").is_err());
    }
}
