//! The harness's modules import one way: no module imports one that imports
//! it back, directly or round a longer circle. A circle makes every module on
//! it depend on every other, so none can be read, tested or moved alone, and
//! it only grows; this test names each one as it appears.
//!
//! It reads the sources rather than asking the compiler (which accepts
//! circles), at two levels:
//! - file: a file (module) names another by a `crate::`, `super::` or
//!   `self::` path, in a `use` (groups and nested groups included) or in
//!   an expression; the target is the longest module prefix of the path.
//!   A child naming its own parent (`roles::agent` -> `roles`) is no edge:
//!   a child uses its parent's items freely.
//! - module: the same edges between top-level modules (`roles::agent` ->
//!   `plan` is `roles` -> `plan`); edges within one top-level module do not
//!   count here.
//!
//! Test-only code is no part of the layering: `#[cfg(test)]` items (a
//! `mod tests { .. }` block, a test-only file behind `#[cfg(test)] mod x;`),
//! comments, string and char literals, and `$crate::` in macros are skipped.
//! The crate root (`lib.rs`, `main.rs`) declares every module and is left out.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};

#[test]
fn the_harness_has_no_import_circles() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = Graph::read(&src);
    // A wrong path would read nothing and find nothing: make sure it read the crate.
    assert!(
        graph.modules.len() > 20,
        "read only {} modules under {}",
        graph.modules.len(),
        src.display()
    );
    let circles = graph.circles();
    assert!(circles.is_empty(), "{}", explain(&circles, "harness/src"));
}

// ---------------------------------------------------------------------------
// The graph.

/// Where one module names another: the first place, for the message.
#[derive(Debug, Clone)]
struct Site {
    /// The file, relative to the source directory.
    file: String,
    line: usize,
    /// The path as it resolves, `crate::` first.
    path: String,
}

/// Modules (files) and the imports between them.
#[derive(Debug, Default)]
struct Graph {
    /// Every module with a file of its own, test-only ones and the root left out.
    modules: BTreeSet<String>,
    /// File-level edges, child-to-parent ones already dropped, with where
    /// each was first seen.
    edges: BTreeMap<String, BTreeMap<String, Site>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    File,
    Module,
}

/// One circle: a path from a module back to itself, and where each step
/// of it is imported.
#[derive(Debug)]
struct Circle {
    level: Level,
    /// First and last are the same module.
    path: Vec<String>,
    sites: Vec<Site>,
    /// Every module tangled with it (its strongly connected set): breaking
    /// `path` alone may leave a circle among these.
    members: BTreeSet<String>,
}

impl Circle {
    /// `file circle: plan -> target_file -> roles::mapping -> plan`.
    fn name(&self) -> String {
        let level = match self.level {
            Level::File => "file",
            Level::Module => "module",
        };
        format!("{level} circle: {}", self.path.join(" -> "))
    }
}

impl Graph {
    /// Reads every `.rs` file under `src`.
    fn read(src: &Path) -> Graph {
        let mut files = Vec::new();
        rust_files(src, &mut files);
        files.sort();
        let mut sources = Vec::new();
        let mut test_only = BTreeSet::new();
        for file in files {
            let relative = file.strip_prefix(src).expect("under src").to_path_buf();
            let module = module_of(&relative);
            let text = fs::read_to_string(&file)
                .unwrap_or_else(|error| panic!("{}: {error}", file.display()));
            let code = Code::of(&text);
            if code.whole_file_is_test_only {
                test_only.insert(module.clone());
            }
            for child in &code.test_only_children {
                test_only.insert(join(&module, child));
            }
            sources.push((relative, module, code));
        }
        let is_test_only = |module: &str| {
            test_only
                .iter()
                .any(|test| module == test || module.starts_with(&format!("{test}::")))
        };
        let mut graph = Graph::default();
        for (_, module, _) in &sources {
            if !module.is_empty() && !is_test_only(module) {
                graph.modules.insert(module.clone());
            }
        }
        for (relative, module, code) in &sources {
            if !graph.modules.contains(module) {
                continue;
            }
            for (offset, segments) in code.paths() {
                let Some(absolute) = resolve(module, &segments) else {
                    continue;
                };
                let Some(target) = graph.longest_module(&absolute) else {
                    continue;
                };
                if target == *module || target == parent(module) {
                    continue;
                }
                let site = Site {
                    file: relative.to_string_lossy().replace('\\', "/"),
                    line: code.line_of(offset),
                    path: format!("crate::{}", absolute.join("::")),
                };
                (graph.edges.entry(module.clone()).or_default())
                    .entry(target)
                    .or_insert(site);
            }
        }
        graph
    }

    /// The longest prefix of `path` that is a module of the graph.
    fn longest_module(&self, path: &[String]) -> Option<String> {
        (1..=path.len())
            .rev()
            .map(|length| path[..length].join("::"))
            .find(|prefix| self.modules.contains(prefix))
    }

    /// The same edges between top-level modules, within-module ones left out.
    fn top_level(&self) -> BTreeMap<String, BTreeMap<String, Site>> {
        let mut edges: BTreeMap<String, BTreeMap<String, Site>> = BTreeMap::new();
        for (from, targets) in &self.edges {
            for (to, site) in targets {
                let (from, to) = (top(from), top(to));
                if from != to {
                    (edges.entry(from.to_owned()).or_default())
                        .entry(to.to_owned())
                        .or_insert_with(|| site.clone());
                }
            }
        }
        edges
    }

    /// Every circle, file level first: one per strongly connected set of
    /// modules, as a concrete path round it.
    fn circles(&self) -> Vec<Circle> {
        let mut circles = circles_of(Level::File, &self.edges);
        circles.extend(circles_of(Level::Module, &self.top_level()));
        circles
    }
}

/// The message for `circles`: each named, each step with where it is
/// imported, and how to break them.
fn explain(circles: &[Circle], root: &str) -> String {
    let mut message = format!(
        "{} import circle(s) among the modules of {root}:\n",
        circles.len()
    );
    for circle in circles {
        message.push_str(&format!("\n{}\n", circle.name()));
        for (step, site) in circle.path.windows(2).zip(&circle.sites) {
            message.push_str(&format!(
                "    {} -> {}: {root}/{}:{} names {}\n",
                step[0], step[1], site.file, site.line, site.path
            ));
        }
        // The path shown is one circle; its set may hold more.
        if circle.members.len() + 1 > circle.path.len() {
            let members: Vec<&str> = circle.members.iter().map(String::as_str).collect();
            message.push_str(&format!(
                "    more circles run among: {}\n",
                members.join(", ")
            ));
        }
    }
    message.push_str(
        "\nHow to fix: a module may not import one that imports it back; move the shared type down a layer \
         (into a module that both may import, one that imports neither), or hand the lower \
         module what it needs as plain data, so every import points one way.\n",
    );
    message
}

/// One circle per strongly connected set of more than one module (Tarjan),
/// in a stable order.
fn circles_of(level: Level, edges: &BTreeMap<String, BTreeMap<String, Site>>) -> Vec<Circle> {
    let mut circles: Vec<Circle> = strongly_connected(edges)
        .into_iter()
        .filter(|members| members.len() > 1)
        .map(|members| {
            let path = cycle_within(edges, &members);
            let sites = (path.windows(2))
                .map(|step| edges[&step[0]][&step[1]].clone())
                .collect();
            Circle {
                level,
                path,
                sites,
                members,
            }
        })
        .collect();
    circles.sort_by(|a, b| a.path.cmp(&b.path));
    circles
}

/// Tarjan's strongly connected components of `edges`.
fn strongly_connected(edges: &BTreeMap<String, BTreeMap<String, Site>>) -> Vec<BTreeSet<String>> {
    struct Tarjan<'a> {
        edges: &'a BTreeMap<String, BTreeMap<String, Site>>,
        next: usize,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        components: Vec<BTreeSet<String>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, node: &'a str) {
            self.index.insert(node, self.next);
            self.low.insert(node, self.next);
            self.next += 1;
            self.stack.push(node);
            self.on_stack.insert(node);
            let edges = self.edges;
            for next in edges
                .get(node)
                .into_iter()
                .flat_map(|targets| targets.keys())
            {
                let next = next.as_str();
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next]);
                    self.low.insert(node, low);
                } else if self.on_stack.contains(next) {
                    let low = self.low[node].min(self.index[next]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut component = BTreeSet::new();
                while let Some(member) = self.stack.pop() {
                    self.on_stack.remove(member);
                    component.insert(member.to_owned());
                    if member == node {
                        break;
                    }
                }
                self.components.push(component);
            }
        }
    }
    let mut tarjan = Tarjan {
        edges,
        next: 0,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        components: Vec::new(),
    };
    let nodes: BTreeSet<&str> = (edges.iter())
        .flat_map(|(from, targets)| std::iter::once(from).chain(targets.keys()))
        .map(String::as_str)
        .collect();
    for node in nodes {
        if !tarjan.index.contains_key(node) {
            tarjan.visit(node);
        }
    }
    tarjan.components
}

/// A shortest path from the first member of `members` back to itself,
/// within `members` (it exists: they are strongly connected).
fn cycle_within(
    edges: &BTreeMap<String, BTreeMap<String, Site>>,
    members: &BTreeSet<String>,
) -> Vec<String> {
    let start = members.iter().next().expect("a component has a member");
    let successors = |node: &String| {
        (edges.get(node).into_iter())
            .flat_map(|targets| targets.keys())
            .filter(|next| members.contains(*next))
            .cloned()
            .collect::<Vec<String>>()
    };
    // Breadth first from the start's successors; `came_from` leads back.
    let mut came_from: BTreeMap<String, String> = BTreeMap::new();
    let mut queue = VecDeque::new();
    for next in successors(start) {
        if next == *start {
            return vec![start.clone(), start.clone()];
        }
        came_from
            .entry(next.clone())
            .or_insert_with(|| start.clone());
        queue.push_back(next);
    }
    while let Some(node) = queue.pop_front() {
        for next in successors(&node) {
            if next == *start {
                let mut path = vec![start.clone(), node.clone()];
                let mut at = node;
                while let Some(before) = came_from.get(&at).filter(|before| *before != start) {
                    path.push(before.clone());
                    at = before.clone();
                }
                path.push(start.clone());
                path.reverse();
                return path;
            }
            if !came_from.contains_key(&next) {
                came_from.insert(next.clone(), node.clone());
                queue.push_back(next);
            }
        }
    }
    unreachable!("{start} is strongly connected to {members:?} but no path leads back");
}

// ---------------------------------------------------------------------------
// Modules and paths.

fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    let entries = fs::read_dir(dir).unwrap_or_else(|error| panic!("{}: {error}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            files.push(path);
        }
    }
}

/// `roles/agent.rs` and `roles/agent/mod.rs` are `roles::agent`; `lib.rs`
/// and `main.rs` are the crate root, "".
fn module_of(relative: &Path) -> String {
    let mut parts: Vec<String> = (relative.iter())
        .map(|part| part.to_string_lossy().into_owned())
        .collect();
    let file = parts.pop().expect("a file name");
    let stem = file.strip_suffix(".rs").unwrap_or(&file);
    let is_root = parts.is_empty() && (stem == "lib" || stem == "main");
    if stem != "mod" && !is_root {
        parts.push(stem.to_owned());
    }
    parts.join("::")
}

fn join(module: &str, child: &str) -> String {
    if module.is_empty() {
        child.to_owned()
    } else {
        format!("{module}::{child}")
    }
}

/// `a::b` -> `a`; a top-level module's parent is the root, "".
fn parent(module: &str) -> &str {
    module.rsplit_once("::").map_or("", |(parent, _)| parent)
}

fn top(module: &str) -> &str {
    module.split("::").next().unwrap_or(module)
}

/// The segments after `crate::` of a path written in `module`: `super::x`
/// in `a::b` is `a::x`, `self::x` is `a::b::x`. `None` for any other path
/// (`std::`, an extern crate, a local item).
fn resolve(module: &str, segments: &[String]) -> Option<Vec<String>> {
    let mut here: Vec<String> = if module.is_empty() {
        Vec::new()
    } else {
        module.split("::").map(str::to_owned).collect()
    };
    let rest = match segments.first()?.as_str() {
        "crate" => {
            here.clear();
            &segments[1..]
        }
        "self" => &segments[1..],
        "super" => {
            let supers = segments
                .iter()
                .take_while(|segment| *segment == "super")
                .count();
            for _ in 0..supers {
                here.pop()?;
            }
            &segments[supers..]
        }
        _ => return None,
    };
    // `use crate::a::{self, b}`: the `self` names `a` itself.
    here.extend(rest.iter().filter(|segment| *segment != "self").cloned());
    Some(here)
}

// ---------------------------------------------------------------------------
// Reading a source file.

/// A file's source with comments, literals and test-only items blanked out
/// (newlines kept, so offsets still give lines).
struct Code {
    chars: Vec<char>,
    /// `#[cfg(test)] mod x;`: children whose whole file is test code.
    test_only_children: Vec<String>,
    /// `#![cfg(test)]` at the top.
    whole_file_is_test_only: bool,
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

impl Code {
    fn of(text: &str) -> Code {
        let chars = without_comments_and_literals(text);
        let mut code = Code {
            chars,
            test_only_children: Vec::new(),
            whole_file_is_test_only: false,
        };
        code.blank_test_items();
        code
    }

    fn line_of(&self, offset: usize) -> usize {
        1 + self.chars[..offset].iter().filter(|c| **c == '\n').count()
    }

    fn blank(&mut self, from: usize, to: usize) {
        let to = to.min(self.chars.len());
        for c in &mut self.chars[from..to] {
            if *c != '\n' {
                *c = ' ';
            }
        }
    }

    /// Skips whitespace from `at`.
    fn skip_space(&self, mut at: usize) -> usize {
        while at < self.chars.len() && self.chars[at].is_whitespace() {
            at += 1;
        }
        at
    }

    /// Whether the tokens of `expected` (each after optional whitespace)
    /// start at `at`; where they end if so.
    fn tokens_at(&self, mut at: usize, expected: &[&str]) -> Option<usize> {
        for token in expected {
            at = self.skip_space(at);
            let end = at + token.chars().count();
            if end > self.chars.len() || !self.chars[at..end].iter().copied().eq(token.chars()) {
                return None;
            }
            // A word must end there (`test` is not `tests`).
            if token.chars().all(is_ident) && self.chars.get(end).is_some_and(|c| is_ident(*c)) {
                return None;
            }
            at = end;
        }
        Some(at)
    }

    /// The identifier starting at `at`, if one starts there (not inside one).
    fn ident_at(&self, at: usize) -> Option<String> {
        let starts = self.chars.get(at).is_some_and(|c| is_ident(*c))
            && (at == 0 || !(is_ident(self.chars[at - 1]) || self.chars[at - 1] == '$'));
        if !starts {
            return None;
        }
        let end = (at..self.chars.len())
            .find(|i| !is_ident(self.chars[*i]))
            .unwrap_or(self.chars.len());
        Some(self.chars[at..end].iter().collect())
    }

    /// Blanks every `#[cfg(test)]` item, from the attribute through the end
    /// of the item: its matching closing brace, or the `;` or `,` that ends
    /// it. Literals and comments are gone already, so braces count true.
    fn blank_test_items(&mut self) {
        let mut at = 0;
        while at < self.chars.len() {
            if self.chars[at] != '#' {
                at += 1;
                continue;
            }
            if self
                .tokens_at(at, &["#", "!", "[", "cfg", "(", "test", ")", "]"])
                .is_some()
            {
                self.whole_file_is_test_only = true;
            }
            let Some(after) = self.tokens_at(at, &["#", "[", "cfg", "(", "test", ")", "]"]) else {
                at += 1;
                continue;
            };
            let end = self.item_end(after);
            let item: String = self.chars[after..end].iter().collect();
            if let Some(child) = out_of_line_module(&item) {
                self.test_only_children.push(child);
            }
            self.blank(at, end);
            at = end;
        }
    }

    /// Where the item starting at `from` ends (exclusive).
    fn item_end(&self, from: usize) -> usize {
        let mut depth = 0usize; // of () and []
                                // Of <>, for a field's `Map<A, B>,`; only a comma heeds it, as a
                                // `<` may be a comparison that never closes.
        let mut angles = 0usize;
        let mut at = from;
        while at < self.chars.len() {
            let arrow = at > 0 && matches!(self.chars[at - 1], '-' | '=');
            match self.chars[at] {
                '(' | '[' => depth += 1,
                ')' | ']' => depth = depth.saturating_sub(1),
                '<' => angles += 1,
                '>' if !arrow => angles = angles.saturating_sub(1),
                ';' if depth == 0 => return at + 1,
                ',' if depth == 0 && angles == 0 => return at + 1,
                // The enclosing block closes: the item was its last part.
                '}' if depth == 0 => return at,
                '{' if depth == 0 => return self.matching_brace(at),
                _ => {}
            }
            at += 1;
        }
        at
    }

    /// Just past the brace that closes the one at `open`.
    fn matching_brace(&self, open: usize) -> usize {
        let mut depth = 0usize;
        for at in open..self.chars.len() {
            match self.chars[at] {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        return at + 1;
                    }
                }
                _ => {}
            }
        }
        self.chars.len()
    }

    /// Every `crate::`, `super::` or `self::` path of the file, with where
    /// it is: those of `use` trees expanded, then those in expressions.
    fn paths(&self) -> Vec<(usize, Vec<String>)> {
        let mut rest = Code {
            chars: self.chars.clone(),
            test_only_children: Vec::new(),
            whole_file_is_test_only: false,
        };
        let mut paths = Vec::new();
        // `use` trees first, then blanked, so `use crate::a::{b, c}` is read
        // as `a::b` and `a::c`, never as `a` by the expression scan below.
        let mut at = 0;
        while at < rest.chars.len() {
            if rest.ident_at(at).as_deref() != Some("use") {
                at += 1;
                continue;
            }
            let end = (at..rest.chars.len())
                .find(|i| rest.chars[*i] == ';')
                .map_or(rest.chars.len(), |semicolon| semicolon + 1);
            let tree: String = rest.chars[at + 3..end].iter().collect();
            let tokens = tokens(&tree);
            let mut expanded = Vec::new();
            expand(&tokens, &mut 0, &[], &mut expanded);
            paths.extend(expanded.into_iter().map(|path| (at, path)));
            rest.blank(at, end);
            at = end;
        }
        // Paths in expressions and types: `crate::report::verdict_label(..)`.
        let mut at = 0;
        while at < rest.chars.len() {
            let Some(word) = rest.ident_at(at) else {
                at += 1;
                continue;
            };
            let mut end = at + word.chars().count();
            if matches!(word.as_str(), "crate" | "super" | "self") && !rest.in_visibility(at) {
                let mut segments = vec![word];
                while let Some(after) = rest.tokens_at(end, &["::"]) {
                    let start = rest.skip_space(after);
                    let Some(segment) = rest.ident_at(start) else {
                        break; // `::<T>`, `::{`, `::*`
                    };
                    end = start + segment.chars().count();
                    segments.push(segment);
                }
                if segments.len() > 1 {
                    paths.push((at, segments));
                }
            }
            at = end;
        }
        paths
    }

    /// `pub(in crate::a)` names a module to say who may see an item; it
    /// imports nothing.
    fn in_visibility(&self, at: usize) -> bool {
        let before: String = self.chars[at.saturating_sub(40)..at].iter().collect();
        let words: String = before.split_whitespace().collect();
        words.ends_with("pub(in")
    }
}

/// `mod name;` (after attributes and a visibility), as the item's text.
fn out_of_line_module(item: &str) -> Option<String> {
    let mut item = item.trim();
    while item.starts_with("#[") {
        item = item[item.find(']')? + 1..].trim_start();
    }
    if let Some(rest) = item.strip_prefix("pub") {
        item = rest.trim_start();
        if item.starts_with('(') {
            item = item[item.find(')')? + 1..].trim_start();
        }
    }
    let name = item.strip_prefix("mod")?.trim().strip_suffix(';')?.trim();
    (!name.is_empty() && name.chars().all(is_ident)).then(|| name.to_owned())
}

/// The text with comments (`//`, `///`, `//!`, nested `/* */`) and
/// string, byte-string, raw-string and char literals replaced by spaces,
/// newlines kept. A lifetime (`'a`) is left as it is.
fn without_comments_and_literals(text: &str) -> Vec<char> {
    let source: Vec<char> = text.chars().collect();
    let mut out = source.clone();
    let blank = |out: &mut Vec<char>, from: usize, to: usize| {
        for c in &mut out[from..to] {
            if *c != '\n' {
                *c = ' ';
            }
        }
    };
    let at_char = |i: usize| source.get(i).copied().unwrap_or('\0');
    let mut i = 0;
    while i < source.len() {
        let c = source[i];
        let word_starts = is_ident(c) && (i == 0 || !is_ident(source[i - 1]));
        if c == '/' && at_char(i + 1) == '/' {
            let end = (i..source.len())
                .find(|j| source[*j] == '\n')
                .unwrap_or(source.len());
            blank(&mut out, i, end);
            i = end;
        } else if c == '/' && at_char(i + 1) == '*' {
            let mut depth = 0;
            let mut j = i;
            while j < source.len() {
                if source[j] == '/' && at_char(j + 1) == '*' {
                    depth += 1;
                    j += 2;
                } else if source[j] == '*' && at_char(j + 1) == '/' {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if word_starts {
            // A literal's prefix (`b"`, `r#"`, `br"`, `c"`, `b'`) or a word.
            let end = (i..source.len())
                .find(|j| !is_ident(source[*j]))
                .unwrap_or(source.len());
            let word: String = source[i..end].iter().collect();
            let raw = matches!(word.as_str(), "r" | "br" | "cr");
            let hashes = (end..source.len())
                .take_while(|j| source[*j] == '#')
                .count();
            if raw && at_char(end + hashes) == '"' {
                // r#"..."#: ends at a quote followed by as many hashes.
                let mut j = end + hashes + 1;
                while j < source.len()
                    && !(source[j] == '"' && (1..=hashes).all(|k| at_char(j + k) == '#'))
                {
                    j += 1;
                }
                let stop = (j + 1 + hashes).min(source.len());
                blank(&mut out, i, stop);
                i = stop;
            } else if matches!(word.as_str(), "b" | "c") && matches!(at_char(end), '"' | '\'') {
                // b"..", c"..", b'.': the literal itself is handled next round.
                blank(&mut out, i, end);
                i = end;
            } else {
                i = end;
            }
        } else if c == '"' {
            let mut j = i + 1;
            while j < source.len() && source[j] != '"' {
                j += if source[j] == '\\' { 2 } else { 1 };
            }
            let stop = (j + 1).min(source.len());
            blank(&mut out, i, stop);
            i = stop;
        } else if c == '\'' {
            // '\n', '\'', '\u{7d}', '}' are literals; 'a and 'static are lifetimes.
            if at_char(i + 1) == '\\' {
                // From the backslash, stepping over each escape (`'\''`).
                let mut j = i + 1;
                while j < source.len() && source[j] != '\'' {
                    j += if source[j] == '\\' { 2 } else { 1 };
                }
                let stop = (j + 1).min(source.len());
                blank(&mut out, i, stop);
                i = stop;
            } else if at_char(i + 2) == '\'' {
                blank(&mut out, i, i + 3);
                i += 3;
            } else {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    out
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Colons,
    Open,
    Close,
    Comma,
    Star,
}

/// The tokens of a `use` tree (`crate::{a, b::{c as d, *}}`).
fn tokens(tree: &str) -> Vec<Token> {
    let chars: Vec<char> = tree.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if is_ident(c) || c == '$' {
            let end = (i + 1..chars.len())
                .find(|j| !is_ident(chars[*j]))
                .unwrap_or(chars.len());
            tokens.push(Token::Word(chars[i..end].iter().collect()));
            i = end;
            continue;
        }
        match c {
            ':' if chars.get(i + 1) == Some(&':') => {
                tokens.push(Token::Colons);
                i += 1;
            }
            '{' => tokens.push(Token::Open),
            '}' => tokens.push(Token::Close),
            ',' => tokens.push(Token::Comma),
            '*' => tokens.push(Token::Star),
            _ => {}
        }
        i += 1;
    }
    tokens
}

/// Expands the use tree at `tokens[*at..]` under `prefix` into full paths.
fn expand(tokens: &[Token], at: &mut usize, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let mut path = prefix.to_vec();
    // A leading `::` (`use ::std::x`) names an extern crate, never this one.
    if *at == 0 && tokens.first() == Some(&Token::Colons) {
        return;
    }
    loop {
        match tokens.get(*at) {
            Some(Token::Word(word)) => {
                path.push(word.clone());
                *at += 1;
                if tokens.get(*at) == Some(&Token::Colons) {
                    *at += 1;
                    continue;
                }
                // `a as b`: the name it is imported as changes nothing.
                if tokens.get(*at) == Some(&Token::Word("as".to_owned())) {
                    *at += 2;
                }
                out.push(path);
                return;
            }
            Some(Token::Open) => {
                *at += 1;
                while let Some(token) = tokens.get(*at) {
                    match token {
                        Token::Close => {
                            *at += 1;
                            break;
                        }
                        Token::Comma => *at += 1,
                        _ => {
                            let before = *at;
                            expand(tokens, at, &path, out);
                            if *at == before {
                                *at += 1; // not a tree: step over it
                            }
                        }
                    }
                }
                return;
            }
            Some(Token::Star) => {
                *at += 1;
                out.push(path);
                return;
            }
            _ => {
                if path.len() > prefix.len() {
                    out.push(path);
                }
                return;
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The detector's own tests, on small source trees written to a temp dir.

/// A source tree under the temp dir, removed when dropped.
struct Tree {
    root: PathBuf,
}

impl Tree {
    fn new(name: &str, files: &[(&str, &str)]) -> Tree {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos());
        let root = std::env::temp_dir().join(format!(
            "chaos-layering-{name}-{}-{nanos}",
            std::process::id()
        ));
        for (path, text) in files {
            let path = root.join(path);
            fs::create_dir_all(path.parent().expect("a file has a directory"))
                .expect("the temp dir can be written");
            fs::write(&path, text).expect("the temp dir can be written");
        }
        Tree { root }
    }

    fn graph(&self) -> Graph {
        Graph::read(&self.root)
    }

    fn circle_names(&self) -> Vec<String> {
        self.graph().circles().iter().map(Circle::name).collect()
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

fn edges_of(graph: &Graph) -> Vec<String> {
    (graph.edges.iter())
        .flat_map(|(from, targets)| targets.keys().map(move |to| format!("{from} -> {to}")))
        .collect()
}

#[test]
fn a_file_circle_within_one_module_is_found_and_named() {
    let tree = Tree::new(
        "file",
        &[
            ("lib.rs", "pub mod roles;\npub mod plan;\n"),
            // The parent uses its children and they it: no circle.
            (
                "roles/mod.rs",
                "pub mod agent;\npub mod mapping;\npub mod nemesis;\n\
                 pub struct Cast;\nuse self::agent::Agent;\n",
            ),
            (
                "roles/agent.rs",
                "use super::Cast;\nuse crate::plan::Timing;\n\
                 pub struct Agent;\npub fn script() -> crate::roles::mapping::Mapping { todo!() }\n",
            ),
            ("roles/mapping.rs", "pub struct Mapping;\nuse super::nemesis::Due;\n"),
            ("roles/nemesis.rs", "pub struct Due;\nuse crate::roles::{agent::Agent, Cast};\n"),
            ("plan.rs", "pub struct Timing;\n"),
        ],
    );
    assert_eq!(
        tree.circle_names(),
        ["file circle: roles::agent -> roles::mapping -> roles::nemesis -> roles::agent"],
    );
    let graph = tree.graph();
    let circles = graph.circles();
    let message = explain(&circles, "src");
    assert!(message.contains(
        "    roles::agent -> roles::mapping: src/roles/agent.rs:4 names crate::roles::mapping::Mapping\n"
    ), "{message}");
    assert!(
        message.contains("a module may not import one that imports it back"),
        "{message}"
    );
}

#[test]
fn a_module_circle_is_found_and_named() {
    // No file imports one that imports it back; `check` and `live` do.
    let tree = Tree::new(
        "module",
        &[
            ("main.rs", "mod check;\nmod live;\nmod plan;\n"),
            ("check/mod.rs", "mod view;\n"),
            ("check/view.rs", "use crate::live::effects::Effect;\n"),
            ("live/mod.rs", "mod effects;\nmod schedule;\n"),
            ("live/effects.rs", "pub struct Effect;\n"),
            (
                "live/schedule.rs",
                "fn at() -> crate::plan::Trial { todo!() }\nfn view() { crate::check::view::show(); }\n",
            ),
            ("plan.rs", "pub struct Trial;\n"),
        ],
    );
    assert_eq!(
        tree.circle_names(),
        ["module circle: check -> live -> check"]
    );
}

#[test]
fn an_acyclic_tree_has_no_circles_and_its_imports_are_read() {
    let tree = Tree::new(
        "acyclic",
        &[
            (
                "lib.rs",
                "pub mod report;\npub mod progress;\npub mod plan;\npub mod cli;\npub use plan::Timing;\n",
            ),
            (
                "cli/mod.rs",
                "pub mod run;\nuse crate::{\n    progress::{self, Lines},\n    report::{fold::Fold as F, *},\n};\n",
            ),
            (
                "cli/run.rs",
                "use super::super::plan::Timing;\npub(in crate::cli) fn go() {\n    \
                 let _ = crate::report::render::<u8>();\n}\n",
            ),
            ("report/mod.rs", "pub mod fold;\npub fn render<T>() {}\n"),
            ("report/fold.rs", "use crate::progress::CellDone;\nuse super::render;\n"),
            ("progress.rs", "pub struct CellDone;\npub struct Lines;\n"),
            ("plan.rs", "pub struct Timing;\n"),
        ],
    );
    let graph = tree.graph();
    assert_eq!(
        edges_of(&graph),
        [
            "cli -> progress",
            "cli -> report",
            "cli -> report::fold",
            "cli::run -> plan",
            "cli::run -> report",
            "report::fold -> progress",
        ],
    );
    assert!(graph.circles().is_empty(), "{:?}", graph.circles());
}

#[test]
fn a_circle_only_in_tests_comments_or_literals_is_ignored() {
    let tree = Tree::new(
        "ignored",
        &[
            ("lib.rs", "mod a;\nmod b;\nmod c;\n"),
            ("a.rs", "use crate::b::B;\npub struct A;\n"),
            (
                "b.rs",
                r##"//! Docs may say `crate::a::A`.
pub struct B;
/// And so may /* nested */ item docs: crate::a::A.
/* crate::a::A /* nested */ crate::a::A */
const TEXT: &str = "crate::a::A }";
const RAW: &str = r#"crate::a::A "} "#;
const BRACE: char = '{';
fn f<'a>(x: &'a str) -> &'a str { x }
// Says who may see it (an odd module to say, but it is only text here).
pub(in crate::a) struct Seen;
macro_rules! m { () => { $crate::a::A }; }

#[cfg(test)]
mod tests {
    use crate::a::A;
    fn g() -> char { let _ = "}"; let _ = '}'; /* } */ '\'' } // }
    #[test]
    fn h() { let _ = crate::a::A; }
}

#[cfg(test)]
mod more_tests;

pub fn after() -> crate::c::C { crate::c::C }
"##,
            ),
            ("b/more_tests.rs", "use crate::a::A;\n"),
            ("c.rs", "pub struct C;\n"),
        ],
    );
    let graph = tree.graph();
    assert_eq!(edges_of(&graph), ["a -> b", "b -> c"]);
    assert!(graph.circles().is_empty(), "{:?}", graph.circles());
}
