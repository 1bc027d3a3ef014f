//! The README is a front page and `docs/` is the book: every relative link
//! and anchor in either resolves, every page of the book is in its
//! `SUMMARY.md`, and the front page stays a first read (under 300 lines).
//! CI also builds the book with mdBook; this test needs no mdBook, so the
//! README's test command catches a broken link on a clean machine.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd};

/// Every Markdown file a reader reaches from the README: the book's pages
/// and the READMEs beside the examples, libraries, reports and scenarios.
fn pages() -> Vec<PathBuf> {
    let root = common::repo_root();
    let mut pages = vec![root.join("README.md")];
    for dir in ["docs", "examples", "libraries", "reports", "scenarios"] {
        walk(&root.join(dir), &mut pages);
    }
    pages.sort();
    pages
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        // Installed dependencies are not ours to check.
        if name.starts_with('.') || name == "node_modules" {
            continue;
        }
        if path.is_dir() {
            walk(&path, out);
        } else if name.ends_with(".md") {
            out.push(path);
        }
    }
}

/// GitHub's anchor for a heading: lower case, punctuation but `-` and `_`
/// dropped, spaces to `-`; a repeated heading gets `-1`, `-2`, ...
fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut anchors = BTreeSet::new();
    let mut heading: Option<String> = None;
    for event in Parser::new_ext(markdown, Options::all()) {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::Text(text) | Event::Code(text) => {
                if let Some(heading) = heading.as_mut() {
                    heading.push_str(&text);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                let text = heading.take().unwrap_or_default();
                let slug: String = text
                    .to_lowercase()
                    .chars()
                    .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_' || *c == ' ')
                    .map(|c| if c == ' ' { '-' } else { c })
                    .collect();
                let n = seen.entry(slug.clone()).or_insert(0);
                anchors.insert(if *n == 0 {
                    slug.clone()
                } else {
                    format!("{slug}-{n}")
                });
                *n += 1;
            }
            _ => {}
        }
    }
    anchors
}

/// Every link and image target in a page, with the text around it.
fn links(markdown: &str) -> Vec<String> {
    Parser::new_ext(markdown, Options::all())
        .filter_map(|event| match event {
            Event::Start(Tag::Link { dest_url, .. })
            | Event::Start(Tag::Image { dest_url, .. }) => Some(dest_url.to_string()),
            _ => None,
        })
        .collect()
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let root = common::repo_root();
    let mut broken = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let shown = page.strip_prefix(&root).unwrap().display().to_string();
        for link in links(&text) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match link.split_once('#') {
                Some((path, anchor)) => (path, Some(anchor)),
                None => (link.as_str(), None),
            };
            let target = if path.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(path)
            };
            if !target.exists() {
                broken.push(format!("{shown}: ({link}): no such file"));
                continue;
            }
            if let Some(anchor) = anchor {
                if target.extension().is_some_and(|ext| ext == "md") {
                    let headings = anchors(&std::fs::read_to_string(&target).unwrap());
                    if !headings.contains(anchor) {
                        broken.push(format!("{shown}: ({link}): no heading with that anchor"));
                    }
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_page_of_the_book_is_in_its_summary() {
    let docs = common::repo_root().join("docs");
    let summary = std::fs::read_to_string(docs.join("SUMMARY.md")).unwrap();
    let listed: BTreeSet<String> = links(&summary).into_iter().collect();
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&docs).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if name.ends_with(".md") && name != "SUMMARY.md" && !listed.contains(&name) {
            missing.push(name);
        }
    }
    assert!(
        missing.is_empty(),
        "docs/SUMMARY.md does not list {missing:?}: a page outside the summary is not in the book"
    );
    // mdBook refuses a summary whose chapters do not exist (create-missing = false).
    for page in &listed {
        assert!(
            docs.join(page).is_file(),
            "docs/SUMMARY.md lists {page}, which does not exist"
        );
    }
}

#[test]
fn the_readme_is_a_front_page() {
    let readme = std::fs::read_to_string(common::repo_root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines < 300,
        "README.md has {lines} lines: it is the front page (what chaos is, install, the two \
         commands, reading the output, your own service, where to go next); move reference \
         text into a page of the book under docs/"
    );
    let levels: Vec<HeadingLevel> = Parser::new(&readme)
        .filter_map(|event| match event {
            Event::Start(Tag::Heading { level, .. }) => Some(level),
            _ => None,
        })
        .collect();
    assert_eq!(
        levels.first(),
        Some(&HeadingLevel::H1),
        "README.md opens with its title"
    );
}

/// `.ci/run` runs the line after this marker, exactly, as the test step.
#[test]
fn the_readme_names_the_test_command_ci_runs() {
    let root = common::repo_root();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let after = readme
        .split_once("<!-- test-command -->")
        .expect("README.md marks its test command with <!-- test-command -->")
        .1;
    let command = after.lines().nth(2).unwrap_or_default();
    assert!(
        command.starts_with("cargo nextest run "),
        "the line after the marker's opening fence is the test command, found {command:?}"
    );
    let ci = std::fs::read_to_string(root.join(".ci/run")).unwrap();
    assert!(
        ci.contains("<!-- test-command -->"),
        ".ci/run reads the README's test command from its marker"
    );
}
