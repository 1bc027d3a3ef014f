//! Tests' check that a generated block of the book is current: the text
//! between two markers in a docs page must be what the code renders now,
//! and a failing test prints the block to paste.

use std::path::Path;

/// Fails unless `docs/{page}` holds `rendered` between `begin` and `end`.
pub(crate) fn assert_current(page: &str, begin: &str, end: &str, rendered: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../docs")
        .join(page);
    let docs = std::fs::read_to_string(&path).unwrap();
    let block = docs
        .split_once(begin)
        .and_then(|(_, rest)| rest.split_once(end))
        .map(|(block, _)| block.trim());
    assert_eq!(
        block,
        Some(rendered.trim()),
        "docs/{page}'s generated block is stale; put this between its markers:\n{begin}\n{rendered}{end}"
    );
}
