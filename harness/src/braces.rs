//! Text with `{name}` placeholders, `{{` and `}}` for literal braces: the
//! one reader behind a target file's `[env]` values and its `[request]`
//! templates, which differ only in which names they accept.

/// A run of literal text, or a placeholder as the caller read its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece<P> {
    Text(String),
    Placeholder(P),
}

/// Splits `text` into pieces; `name` reads each placeholder's name, or says
/// why it is not one. The error says what is wrong with the braces.
pub(crate) fn parse<P>(
    text: &str,
    name: impl Fn(&str) -> Result<P, String>,
) -> Result<Vec<Piece<P>>, String> {
    let mut pieces = Vec::new();
    let mut literal = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(['{', '}']) {
        literal.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("{{") {
            literal.push('{');
            rest = after;
        } else if let Some(after) = tail.strip_prefix("}}") {
            literal.push('}');
            rest = after;
        } else if tail.starts_with('}') {
            return Err(format!(
                "a lone '}}' in \"{text}\"; write '}}}}' for a literal brace"
            ));
        } else {
            let Some(end) = tail.find('}') else {
                return Err(format!(
                    "'{{' opens a placeholder that never closes in \"{text}\"; write '{{{{' for a literal brace"
                ));
            };
            let placeholder = name(&tail[1..end])?;
            if !literal.is_empty() {
                pieces.push(Piece::Text(std::mem::take(&mut literal)));
            }
            pieces.push(Piece::Placeholder(placeholder));
            rest = &tail[end + 1..];
        }
    }
    literal.push_str(rest);
    if !literal.is_empty() {
        pieces.push(Piece::Text(literal));
    }
    Ok(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Vec<Piece<String>>, String> {
        parse(text, |name| Ok(name.to_owned()))
    }

    #[test]
    fn placeholders_split_the_text_and_doubled_braces_are_text() {
        assert_eq!(
            read("a {b}{{c}} d").unwrap(),
            [
                Piece::Text("a ".into()),
                Piece::Placeholder("b".into()),
                Piece::Text("{c} d".into())
            ]
        );
        assert!(read("a } b").unwrap_err().contains("a lone '}'"));
        assert!(read("a {b").unwrap_err().contains("never closes"));
        let refused = parse("x {bad} y", |name| Err::<(), _>(format!("no {name}")));
        assert_eq!(refused.unwrap_err(), "no bad");
    }
}
