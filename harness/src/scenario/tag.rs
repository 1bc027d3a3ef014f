//! `tags = ["atlas:AML.T0051.001", "owasp:LLM06"]`: where a scenario sits in
//! a threat taxonomy (MITRE ATLAS, the OWASP Top 10 for LLM applications),
//! carried to every report so a finding can be filed against the catalogue
//! a security review already uses.

use super::MAX_NAME_BYTES;

/// Most tags one scenario carries.
pub const MAX_TAGS: usize = 16;

/// Checks the `index`th tag of a scenario as written, after `earlier`:
/// `namespace:value`, the namespace lower-case letters, digits and '-', the
/// value printable ASCII without spaces, none given twice.
pub(crate) fn check<'a>(
    tag: &str,
    index: usize,
    mut earlier: impl Iterator<Item = &'a str>,
) -> Result<(), String> {
    let example = "write it as namespace:value, e.g. \"atlas:AML.T0051.001\" or \"owasp:LLM06\"";
    if index >= MAX_TAGS {
        return Err(format!("a scenario may carry at most {MAX_TAGS} tags"));
    }
    if tag.len() > MAX_NAME_BYTES {
        return Err(format!(
            "tag '{}...' is {} bytes long; at most {MAX_NAME_BYTES} are allowed",
            tag.chars().take(24).collect::<String>(),
            tag.len()
        ));
    }
    let Some((namespace, value)) = tag.split_once(':') else {
        return Err(format!("tag '{tag}' has no namespace; {example}"));
    };
    if namespace.is_empty()
        || !namespace
            .bytes()
            .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-')
    {
        return Err(format!(
            "tag '{tag}': the namespace '{namespace}' must be lower-case letters, digits or '-'; {example}"
        ));
    }
    if value.is_empty() || !value.bytes().all(|byte| byte.is_ascii_graphic()) {
        return Err(format!(
            "tag '{tag}': the value '{value}' must be non-empty, printable ASCII without spaces; {example}"
        ));
    }
    if earlier.any(|other| other == tag) {
        return Err(format!("tag '{tag}' is given twice; remove one"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(tag: &str) -> Result<(), String> {
        super::check(tag, 0, std::iter::empty())
    }

    #[test]
    fn a_tag_is_namespace_colon_value() {
        assert_eq!(check("atlas:AML.T0051.001"), Ok(()));
        assert_eq!(check("owasp:LLM06"), Ok(()));
        assert!(check("LLM06").unwrap_err().contains("has no namespace"));
        assert!(check("OWASP:LLM06")
            .unwrap_err()
            .contains("namespace 'OWASP'"));
        assert!(check(":LLM06").unwrap_err().contains("namespace ''"));
        assert!(check("owasp:").unwrap_err().contains("value ''"));
        assert!(check("owasp:LLM 06")
            .unwrap_err()
            .contains("value 'LLM 06'"));
    }

    #[test]
    fn a_tag_is_given_once() {
        let error = super::check("owasp:LLM06", 1, ["owasp:LLM06"].into_iter()).unwrap_err();
        assert!(error.contains("given twice"), "{error}");
        let error = super::check("owasp:LLM06", MAX_TAGS, std::iter::empty()).unwrap_err();
        assert!(error.contains("at most 16 tags"), "{error}");
    }
}
