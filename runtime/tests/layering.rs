//! The runtime crate's structure, checked on its sources (issue 22's acceptance, kept true):
//!
//! * no import circle among the crate's modules (a file or folder under `src/`): every
//!   `crate::…` path in code — `use` items and paths in expressions, comments excluded —
//!   is an edge, names re-exported at the crate root resolve to the module that defines them;
//! * no file in `src/` over 600 lines of code (its `#[cfg(test)]` module excluded);
//! * the pretouch engine (`src/pretouch/`) names neither the heap nor embedder memories.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .expect("read src")
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of a file: comments (line, doc and block) and string literals blanked out.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

/// The module a file belongs to: its first path component under `src/` (`heap/alloc.rs` is
/// `heap`), without `.rs`; `lib.rs` is the root.
fn module_of(rel: &Path) -> String {
    let first = rel.components().next().expect("a path under src");
    first
        .as_os_str()
        .to_string_lossy()
        .trim_end_matches(".rs")
        .to_owned()
}

/// Lines of code before the file's test module.
fn code_lines(text: &str) -> usize {
    text.lines()
        .take_while(|l| !l.starts_with("#[cfg(test)]"))
        .count()
}

/// Names the crate root re-exports, with the module each comes from (`pub use heap::{Heap,
/// ..}` maps `Heap` to `heap`).
fn root_exports(lib: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    let code = code_only(lib);
    let mut rest = code.as_str();
    while let Some(i) = rest.find("pub use ") {
        rest = &rest[i + "pub use ".len()..];
        let end = rest.find(';').unwrap_or(rest.len());
        let item = &rest[..end];
        rest = &rest[end..];
        let Some((module, names)) = item.split_once("::") else {
            continue;
        };
        let module = module.trim();
        if module.starts_with("rtvm_") || module == "crate" {
            continue;
        }
        for name in names
            .trim_matches(|c: char| c == '{' || c == '}' || c.is_whitespace())
            .split(',')
        {
            let name = name.trim();
            if !name.is_empty() {
                map.insert(name.to_owned(), module.to_owned());
            }
        }
    }
    map
}

/// Every module a file's code names through `crate::`.
fn references(code: &str, exports: &BTreeMap<String, String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut push = |word: &str| {
        if word.is_empty() {
            return;
        }
        if word.chars().next().is_some_and(char::is_uppercase) || exports.contains_key(word) {
            if let Some(m) = exports.get(word) {
                out.insert(m.clone());
            }
        } else {
            out.insert(word.to_owned());
        }
    };
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        if rest.starts_with('{') {
            // `use crate::{a::X, b, Y}`: the first segment of each entry.
            let end = rest.find('}').unwrap_or(rest.len());
            for entry in rest[1..end].split(',') {
                let first = entry.trim().split("::").next().unwrap_or("").trim();
                push(first.trim_start_matches('{'));
            }
        } else {
            let word: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            push(&word);
        }
    }
    out
}

fn files() -> Vec<(PathBuf, String)> {
    let root = src();
    let mut paths = Vec::new();
    rust_files(&root, &mut paths);
    paths
        .into_iter()
        .map(|p| {
            let text = fs::read_to_string(&p).expect("read a source file");
            (
                p.strip_prefix(&root).expect("under src").to_path_buf(),
                text,
            )
        })
        .collect()
}

#[test]
fn no_import_circle_among_modules() {
    let files = files();
    let lib = &files
        .iter()
        .find(|(p, _)| p == Path::new("lib.rs"))
        .expect("lib.rs")
        .1;
    let exports = root_exports(lib);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (rel, text) in &files {
        let module = module_of(rel);
        if module == "lib" {
            continue;
        }
        let refs = references(&code_only(text), &exports);
        let edges = graph.entry(module.clone()).or_default();
        edges.extend(refs.into_iter().filter(|r| *r != module));
    }
    assert!(
        graph.get("heap").is_some_and(|e| e.contains("pretouch")),
        "the parser sees the heap's use of the pretouch engine: {graph:?}"
    );
    // Depth-first search for a back edge.
    fn visit(
        m: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == m) {
            let mut circle = path[i..].to_vec();
            circle.push(m.to_owned());
            return Some(circle);
        }
        if !done.insert(m.to_owned()) {
            return None;
        }
        path.push(m.to_owned());
        for next in graph.get(m).into_iter().flatten() {
            if let Some(c) = visit(next, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    for m in graph.keys() {
        let mut path = Vec::new();
        if let Some(circle) = visit(m, &graph, &mut path, &mut done) {
            panic!(
                "import circle: {}\nmodule graph: {graph:#?}",
                circle.join(" -> ")
            );
        }
    }
}

#[test]
fn no_file_over_600_lines_of_code() {
    let long: Vec<String> = files()
        .iter()
        .filter(|(_, text)| code_lines(text) > 600)
        .map(|(p, text)| format!("{} ({} lines)", p.display(), code_lines(text)))
        .collect();
    assert!(long.is_empty(), "files over 600 lines of code: {long:?}");
}

#[test]
fn the_pretouch_engine_knows_no_client() {
    let mut checked = 0;
    for (rel, text) in files() {
        if !rel.starts_with("pretouch") {
            continue;
        }
        checked += 1;
        let code = code_only(&text);
        for name in [
            "crate::heap",
            "crate::memory",
            "Heap",
            "VmMemory",
            "MemoryInner",
            "crate::vm",
        ] {
            assert!(
                !code.contains(name),
                "{} names {name}: the engine must take a target, not a client",
                rel.display()
            );
        }
    }
    assert!(checked >= 3, "pretouch/ has its files ({checked} found)");
}

#[test]
fn the_parser_sees_comments_and_strings_as_nothing() {
    let code =
        code_only("use crate::heap; // crate::vm\n/* crate::memory */ let s = \"crate::nmt\";");
    let refs = references(&code, &BTreeMap::new());
    assert_eq!(refs, BTreeSet::from(["heap".to_owned()]));
    let exports = BTreeMap::from([("Vm".to_owned(), "vm".to_owned())]);
    let refs = references("use crate::{policy::X, Vm, threads};", &exports);
    assert_eq!(
        refs,
        BTreeSet::from(["policy".into(), "vm".into(), "threads".into()])
    );
}
