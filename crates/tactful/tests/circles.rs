//! No crate's files import one another in a circle: a circle makes each of
//! its files unreadable without the others and every change to one ripple
//! through all. This reads every crate's `src/` as text (a file's module
//! path from where it lies; `crate::a::b` and `super::x`, doc links
//! included, name the module they reach; a file's inline `mod tests` is
//! left out) and fails on a circle that is not in `KNOWN`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Circles found before this test, to be broken: (crate, its modules).
/// The test fails when one of them is gone too, so the list only shrinks.
const KNOWN: &[(&str, &[&str])] = &[
    (
        "tactful-core",
        &["addressing", "message", "persona", "policy", "transcript"],
    ),
    ("tactful-core", &["prompt", "turn"]),
    ("tactful", &["console::elsewhere", "console::feed"]),
];

type Graph = BTreeMap<String, BTreeSet<String>>;

#[test]
fn no_crate_imports_its_own_files_in_a_circle() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found: Vec<(String, Vec<String>)> = Vec::new();
    let mut names: Vec<_> = std::fs::read_dir(&crates)
        .expect("crates/")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.join("src").is_dir())
        .collect();
    names.sort();
    for krate in names {
        let name = krate.file_name().expect("a name").to_string_lossy().into_owned();
        let graph = graph_of(&krate.join("src"));
        for circle in circles(&graph) {
            found.push((name.clone(), circle));
        }
    }
    let known = |krate: &str, circle: &[String]| {
        KNOWN
            .iter()
            .any(|(k, mods)| *k == krate && circle.iter().all(|m| mods.contains(&m.as_str())))
    };
    let new: Vec<_> = found.iter().filter(|(k, c)| !known(k, c)).collect();
    assert!(
        new.is_empty(),
        "files importing one another in a circle (move what they share into a module both use): {new:?}"
    );
    let gone: Vec<_> = KNOWN
        .iter()
        .filter(|(k, mods)| {
            !found
                .iter()
                .any(|(fk, c)| fk == k && c.iter().all(|m| mods.contains(&m.as_str())))
        })
        .collect();
    assert!(
        gone.is_empty(),
        "circles broken since: take them out of KNOWN: {gone:?}"
    );
}

/// The test's own reading, tried on a small tree: a circle through a
/// `crate::` path and a `super::` path is found, a doc link counts, and a
/// file's inline tests do not.
#[test]
fn the_reading_finds_a_circle_and_ignores_inline_tests() {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path();
    std::fs::create_dir(src.join("a")).expect("a/");
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\nmod c;\n").expect("lib");
    std::fs::write(src.join("a.rs"), "mod inner;\nuse crate::b::Thing;\n").expect("a");
    std::fs::write(src.join("a/inner.rs"), "use super::super::c;\n").expect("inner");
    std::fs::write(src.join("b.rs"), "/// See [`crate::a`].\npub struct Thing;\n").expect("b");
    std::fs::write(
        src.join("c.rs"),
        "pub fn f() {}\n#[cfg(test)]\nmod tests {\n    use crate::a::inner;\n}\n",
    )
    .expect("c");
    let graph = graph_of(src);
    assert_eq!(circles(&graph), vec![vec!["a".to_owned(), "b".to_owned()]]);
    assert!(graph["c"].is_empty(), "inline tests are left out: {graph:?}");
}

/// Each module of `src` and the modules its text names.
fn graph_of(src: &Path) -> Graph {
    let mut texts = BTreeMap::new();
    read_tree(src, src, &mut texts);
    let modules: BTreeSet<String> = texts.keys().cloned().collect();
    let mut graph = Graph::new();
    for (module, text) in &texts {
        let text = match text.find("#[cfg(test)]\nmod tests {") {
            Some(i) => &text[..i],
            None => text.as_str(),
        };
        let mut reached = BTreeSet::new();
        for path in paths_after(text, "crate::") {
            if let Some(m) = longest_module(&path, &modules) {
                reached.insert(m);
            }
        }
        let parent = module.rsplit_once("::").map_or("lib", |(p, _)| p).to_owned();
        for path in paths_after(text, "super::") {
            let child = if parent == "lib" {
                path[0].clone()
            } else {
                format!("{parent}::{}", path[0])
            };
            reached.insert(if modules.contains(&child) {
                child
            } else {
                parent.clone()
            });
        }
        reached.retain(|m| m != module && modules.contains(m));
        graph.insert(module.clone(), reached);
    }
    graph
}

fn read_tree(root: &Path, dir: &Path, texts: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).expect("a source folder") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            read_tree(root, &path, texts);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(root).expect("under src").with_extension("");
            let rel = rel.to_string_lossy().replace('\\', "/");
            let module = rel.strip_suffix("/mod").unwrap_or(&rel).replace('/', "::");
            texts.insert(module, std::fs::read_to_string(&path).expect("a source file"));
        }
    }
}

/// The lowercase path segments after each `prefix` (`crate::a::b::Thing`
/// gives `[a, b]`).
fn paths_after(text: &str, prefix: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(prefix) {
        rest = &rest[i + prefix.len()..];
        let mut segments = Vec::new();
        let mut tail = rest;
        loop {
            let end = tail
                .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
                .unwrap_or(tail.len());
            if end == 0 || !tail.starts_with(|c: char| c.is_ascii_lowercase() || c == '_') {
                break;
            }
            segments.push(tail[..end].to_owned());
            match tail[end..].strip_prefix("::") {
                Some(next) => tail = next,
                None => break,
            }
        }
        if !segments.is_empty() {
            out.push(segments);
        }
    }
    out
}

fn longest_module(path: &[String], modules: &BTreeSet<String>) -> Option<String> {
    (1..=path.len())
        .rev()
        .map(|k| path[..k].join("::"))
        .find(|m| modules.contains(m))
}

/// The strongly connected groups of more than one module, each sorted
/// (Tarjan's algorithm).
fn circles(graph: &Graph) -> Vec<Vec<String>> {
    struct State<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in &s.graph[v] {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut group = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                group.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if group.len() > 1 {
                group.sort();
                s.out.push(group);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}
