//! Dependencies point one way: no import cycle between modules of different
//! responsibility (STYLE.md §1). This test reads `host/src`, finds every
//! `crate::…` and `super::…` path each module names, and fails on a cycle —
//! naming it — between modules that are not one another's parent.
//!
//! A node is a top-level module (`call`, `policy`, `registry`, …) or, for
//! the larger layers, a module one level down (`plugin::store`,
//! `pipeline::execute`, `seams::kv`, `cli::run`); `plugin::contract` (every
//! version of the contract) is one node.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const LAYERS: &[&str] = &["plugin", "pipeline", "seams", "cli"];

/// The module a file defines (`plugin/store.rs` → `plugin::store`).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" && stem != "main" {
        parts.push(stem.to_string());
    }
    parts
}

/// The node a module path belongs to.
fn node(path: &[String]) -> String {
    match path {
        [] => "crate".into(),
        [top, ..] if top == "plugin" && path.get(1).is_some_and(|s| s == "contract") => {
            "plugin::contract".into()
        }
        [top, sub, ..] if LAYERS.contains(&top.as_str()) => format!("{top}::{sub}"),
        [top, ..] => top.clone(),
    }
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every module path the file names through `crate::` or `super::`.
fn references(text: &str, me: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let ident = |s: &str| -> Vec<String> {
        s.split("::")
            .map(|p| {
                p.chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect::<String>()
            })
            .take_while(|p| !p.is_empty() && p.chars().next().is_some_and(|c| c.is_lowercase()))
            .collect()
    };
    for (i, _) in text.match_indices("crate::") {
        // Skip `$crate::` in macros and doc links are harmless either way.
        out.push(ident(&text[i + "crate::".len()..]));
    }
    for (i, _) in text.match_indices("super::") {
        if text[..i].ends_with("super::") {
            continue;
        }
        // In `x.rs` and in `x/mod.rs` alike, `super` is x's parent.
        let mut base: Vec<String> = me.to_vec();
        let mut rest = &text[i..];
        while let Some(r) = rest.strip_prefix("super::") {
            base.pop();
            rest = r;
        }
        base.extend(ident(rest));
        out.push(base);
    }
    out
}

fn is_ancestor(a: &str, b: &str) -> bool {
    b.starts_with(&format!("{a}::"))
}

#[test]
fn no_import_cycles_between_modules() {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&src, &mut all);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &all {
        let me = module_of(&src, file);
        let from = node(&me);
        let text = std::fs::read_to_string(file).unwrap();
        // Tests inside a module may use anything; comments (doc links) are
        // not dependencies.
        let text: String = text
            .split("#[cfg(test)]")
            .next()
            .unwrap_or("")
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let text = text.as_str();
        for path in references(text, &me) {
            let to = node(&path);
            if to == from || to == "crate" || is_ancestor(&to, &from) || is_ancestor(&from, &to) {
                continue;
            }
            edges.entry(from.clone()).or_default().insert(to);
        }
    }
    // Depth-first search for a cycle.
    fn visit(
        n: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
        cycles: &mut Vec<Vec<String>>,
    ) {
        if let Some(pos) = stack.iter().position(|s| s == n) {
            cycles.push(stack[pos..].to_vec());
            return;
        }
        if done.contains(n) {
            return;
        }
        stack.push(n.to_string());
        for m in edges.get(n).into_iter().flatten() {
            visit(m, edges, stack, done, cycles);
        }
        stack.pop();
        done.insert(n.to_string());
    }
    let mut cycles = Vec::new();
    let mut done = BTreeSet::new();
    for n in edges.keys() {
        visit(n, &edges, &mut Vec::new(), &mut done, &mut cycles);
    }
    assert!(
        cycles.is_empty(),
        "import cycles between modules (each line: a → b → … → a):\n{}",
        cycles
            .iter()
            .map(|c| format!("  {} → {}", c.join(" → "), c[0]))
            .collect::<Vec<_>>()
            .join("\n")
    );
    // The test must see the layers it claims to check.
    assert!(edges.contains_key("plugin::store"), "{edges:?}");
    assert!(edges.contains_key("pipeline::execute"), "{edges:?}");
}
