//! Dependencies point one way: no import cycle between modules of different
//! responsibility (STYLE.md §1), in any crate of the workspace.
//!
//! The test reads every workspace member (the host, the sandbox, the
//! schema compiler, the SDK, the tests, the plugins…), builds each target's
//! module tree the way rustc does (from the crate root, following
//! `mod name;`), and finds every module each file names through `crate::`
//! or `super::` paths (`use` trees with braces included; items re-exported
//! at the crate root resolve to the module they come from). It then works
//! at *module* level, not file by file: two sibling modules depend on each
//! other when anything inside one names anything inside the other. So
//! `seams::files → plugin::grants` and `plugin::loader → seams::jobs` is a
//! cycle `plugin ↔ seams`, though no two files import each other. Sibling
//! modules under every parent are checked, at every depth; a module and
//! its own ancestors may name each other (`mod.rs` declares its children,
//! children reach `super`). Code under `#[cfg(test)]` and comments are not
//! dependencies.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Cycles known and being removed elsewhere; each names its issue. A
/// cycle is tolerated only when all its modules are listed here.
const KNOWN: &[(&str, &[&str])] = &[];

type Module = Vec<String>;

/// One target of one package: its name and its root file.
struct Target {
    package: String,
    root: PathBuf,
}

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The member directories of the workspace (`dir/*` expanded).
fn members(root: &Path) -> Vec<PathBuf> {
    let text = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let manifest: toml::Table = text.parse().unwrap();
    let mut out = Vec::new();
    for m in manifest["workspace"]["members"].as_array().unwrap() {
        let m = m.as_str().unwrap();
        match m.strip_suffix("/*") {
            Some(dir) => {
                let mut dirs: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
                    .unwrap()
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| p.join("Cargo.toml").is_file())
                    .collect();
                dirs.sort();
                out.extend(dirs);
            }
            None => out.push(root.join(m)),
        }
    }
    out
}

/// Every target (library, binaries, tests, benches) of the package in `dir`.
fn targets(dir: &Path) -> Vec<Target> {
    let text = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let manifest: toml::Table = text.parse().unwrap();
    let package = manifest["package"]["name"].as_str().unwrap().to_string();
    let mut roots = BTreeSet::new();
    let path_of = |t: &toml::Value| t.get("path").and_then(|p| p.as_str()).map(|p| dir.join(p));
    match manifest.get("lib").and_then(path_of) {
        Some(p) => {
            roots.insert(p);
        }
        None if dir.join("src/lib.rs").is_file() => {
            roots.insert(dir.join("src/lib.rs"));
        }
        None => {}
    }
    if dir.join("src/main.rs").is_file() {
        roots.insert(dir.join("src/main.rs"));
    }
    for kind in ["bin", "test", "bench", "example"] {
        for t in manifest
            .get(kind)
            .and_then(|v| v.as_array())
            .into_iter()
            .flatten()
        {
            if let Some(p) = path_of(t) {
                roots.insert(p);
            }
        }
    }
    roots
        .into_iter()
        .filter(|r| r.is_file())
        .map(|root| Target {
            package: package.clone(),
            root,
        })
        .collect()
}

/// The text that counts: before any `#[cfg(test)]`, without comments.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    text.split("#[cfg(test)]")
        .next()
        .unwrap_or("")
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The module tree of a target: every module and the file that defines it.
fn tree(root: &Path) -> BTreeMap<Module, PathBuf> {
    let mut out = BTreeMap::new();
    let mut todo = vec![(Vec::new(), root.to_path_buf(), true)];
    while let Some((module, file, owns_dir)) = todo.pop() {
        let text = code(&file);
        // A crate root or `mod.rs` keeps its children beside it; `x.rs`
        // keeps them in `x/`.
        let dir = if owns_dir {
            file.parent().unwrap().to_path_buf()
        } else {
            file.with_extension("")
        };
        let mut path_attr: Option<String> = None;
        for line in text.lines() {
            let line = line.trim();
            if let Some(p) = line
                .strip_prefix("#[path = \"")
                .and_then(|r| r.strip_suffix("\"]"))
            {
                path_attr = Some(p.to_string());
                continue;
            }
            let decl = line
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub(super) ")
                .trim_start_matches("pub ");
            let Some(name) = decl.strip_prefix("mod ").and_then(|r| r.strip_suffix(';')) else {
                if !line.starts_with("#[") {
                    path_attr = None;
                }
                continue;
            };
            let mut child = module.clone();
            child.push(name.to_string());
            let (file, owns) = match path_attr.take() {
                Some(p) => (dir.join(p), true),
                None if dir.join(format!("{name}.rs")).is_file() => {
                    (dir.join(format!("{name}.rs")), false)
                }
                None => (dir.join(name).join("mod.rs"), true),
            };
            if file.is_file() {
                todo.push((child, file, owns));
            }
        }
        out.insert(module, file);
    }
    out
}

/// The paths of a `use` tree (`a::{b, c::{d, e}}` → `a::b`, `a::c::d`, `a::c::e`).
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        return vec![tree.to_string()];
    };
    let prefix = &tree[..open];
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(|p| expand(p).into_iter().map(move |e| format!("{prefix}{e}")))
        .collect()
}

/// The path starting at `text` (identifiers and `::`, a brace group whole).
fn path_at(text: &str) -> &str {
    let mut depth = 0;
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    return &text[..=i];
                }
            }
            c if depth > 0 || c.is_alphanumeric() || c == '_' || c == ':' => {}
            _ => return &text[..i],
        }
    }
    text
}

/// Every module `me`'s code names through `crate::` or `super::`.
fn references(
    text: &str,
    me: &[String],
    modules: &BTreeMap<Module, PathBuf>,
    reexports: &BTreeMap<String, Module>,
) -> Vec<Module> {
    let mut out = Vec::new();
    for anchor in ["crate::", "super::"] {
        for (i, _) in text.match_indices(anchor) {
            let before = text[..i].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$' || c == ':') {
                continue;
            }
            let mut base: Module = if anchor == "crate::" {
                Vec::new()
            } else {
                me[..me.len().saturating_sub(1)].to_vec()
            };
            let mut rest = &text[i + anchor.len()..];
            while let Some(r) = rest.strip_prefix("super::") {
                base.pop();
                rest = r;
            }
            for path in expand(path_at(rest)) {
                let mut module = base.clone();
                // An item re-exported at the crate root: the module it is from.
                if module.is_empty()
                    && let Some(first) = path.split("::").next().map(str::trim)
                    && let Some(from) = reexports.get(first)
                {
                    out.push(from.clone());
                    continue;
                }
                for s in path.split("::").map(str::trim).filter(|s| !s.is_empty()) {
                    module.push(s.to_string());
                    if !modules.contains_key(&module) {
                        module.pop();
                        break;
                    }
                }
                out.push(module);
            }
        }
    }
    out
}

/// `pub use a::b::{X, Y}` at the crate root: X and Y come from `a::b`.
fn root_reexports(root: &Path, modules: &BTreeMap<Module, PathBuf>) -> BTreeMap<String, Module> {
    let mut out = BTreeMap::new();
    let text = code(root);
    for (i, _) in text.match_indices("pub use ") {
        let rest = &text[i + "pub use ".len()..];
        let rest = rest.strip_prefix("crate::").unwrap_or(rest);
        for path in expand(path_at(rest)) {
            let segments: Vec<&str> = path.split("::").map(str::trim).collect();
            let Some((item, from)) = segments.split_last() else {
                continue;
            };
            let from: Module = from.iter().map(|s| s.to_string()).collect();
            if modules.contains_key(&from) {
                out.insert(item.to_string(), from);
            }
        }
    }
    out
}

/// Cycles (strongly connected components of more than one node) of a graph.
fn cycles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    // Tarjan's algorithm, iterative enough for module graphs (small).
    struct S<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<Module, usize>,
        low: BTreeMap<Module, usize>,
        stack: Vec<Module>,
        on: BTreeSet<Module>,
        out: Vec<Vec<Module>>,
    }
    fn visit(s: &mut S<'_>, v: &Module) {
        let n = s.index.len();
        s.index.insert(v.clone(), n);
        s.low.insert(v.clone(), n);
        s.stack.push(v.clone());
        s.on.insert(v.clone());
        for w in s.edges.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let l = s.low[v].min(s.low[w]);
                s.low.insert(v.clone(), l);
            } else if s.on.contains(w) {
                let l = s.low[v].min(s.index[w]);
                s.low.insert(v.clone(), l);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on.remove(&w);
                comp.push(w.clone());
                if &w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = S {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

/// What one target's check found.
#[derive(Default)]
struct Found {
    /// Per sibling pair (at the level where two modules diverge), one
    /// example of the files that make the edge.
    edges: BTreeMap<(Module, Module), (Module, Module)>,
    modules: usize,
}

fn check(target: &Target) -> Found {
    let modules = tree(&target.root);
    let reexports = root_reexports(&target.root, &modules);
    let mut found = Found {
        modules: modules.len(),
        ..Found::default()
    };
    for (me, file) in &modules {
        for to in references(&code(file), me, &modules, &reexports) {
            // Where the two paths diverge: siblings under a common parent.
            let common = me.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if common == me.len() || common == to.len() {
                continue; // one is the other's ancestor (or itself)
            }
            found
                .edges
                .entry((me[..=common].to_vec(), to[..=common].to_vec()))
                .or_insert((me.clone(), to.clone()));
        }
    }
    found
}

fn name(m: &[String]) -> String {
    if m.is_empty() {
        "(crate root)".into()
    } else {
        m.join("::")
    }
}

#[test]
fn no_import_cycles_between_modules() {
    let root = workspace();
    let mut problems = Vec::new();
    let mut seen_packages = BTreeSet::new();
    let mut host_edges = BTreeSet::new();
    for member in members(&root) {
        for target in targets(&member) {
            seen_packages.insert(target.package.clone());
            let found = check(&target);
            if target.package == "toolgate" && target.root.ends_with("src/lib.rs") {
                assert!(
                    found.modules > 50,
                    "the host's module tree: {}",
                    found.modules
                );
                host_edges.extend(found.edges.keys().cloned());
            }
            let mut graph: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
            for (a, b) in found.edges.keys() {
                graph.entry(a.clone()).or_default().insert(b.clone());
            }
            for cycle in cycles(&graph) {
                let known = KNOWN.iter().any(|(package, members)| {
                    *package == target.package
                        && cycle
                            .iter()
                            .all(|m| m.len() == 1 && members.contains(&m[0].as_str()))
                });
                if known {
                    continue;
                }
                let mut lines = vec![format!(
                    "{} ({}): {}",
                    target.package,
                    target
                        .root
                        .strip_prefix(&root)
                        .unwrap_or(&target.root)
                        .display(),
                    cycle
                        .iter()
                        .map(|m| name(m))
                        .collect::<Vec<_>>()
                        .join(" ↔ ")
                )];
                for ((a, b), (from, to)) in &found.edges {
                    if cycle.contains(a) && cycle.contains(b) {
                        lines.push(format!(
                            "    {} → {} (e.g. {} names {})",
                            name(a),
                            name(b),
                            name(from),
                            name(to)
                        ));
                    }
                }
                problems.push(lines.join("\n"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "import cycles between modules:\n{}",
        problems.join("\n")
    );
    // The test must see what it claims to check.
    for package in [
        "toolgate",
        "toolgate-sandbox",
        "toolgate-schema",
        "toolgate-sdk",
    ] {
        assert!(
            seen_packages.contains(package),
            "{package} not read: {seen_packages:?}"
        );
    }
    let edge = |a: &str, b: &str| (vec![a.to_string()], vec![b.to_string()]);
    assert!(
        host_edges.contains(&edge("plugin", "seams")),
        "{host_edges:?}"
    );
    assert!(
        host_edges.contains(&edge("pipeline", "policy")),
        "{host_edges:?}"
    );
}

/// The check itself: a cycle made of two files that never import each
/// other is found at module level; braces and root re-exports are read.
#[test]
fn a_module_level_cycle_is_found() {
    let dir = std::env::temp_dir().join(format!("toolgate-layering-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("a")).unwrap();
    std::fs::create_dir_all(dir.join("b")).unwrap();
    let write = |p: &str, t: &str| std::fs::write(dir.join(p), t).unwrap();
    write("lib.rs", "mod a;\nmod b;\nmod c;\npub use c::Thing;\n");
    write("a/mod.rs", "pub mod x;\npub mod y;\n");
    write("a/x.rs", "use crate::b::{z::Z, w};\n");
    write("a/y.rs", "// use crate::c; (a comment)\n");
    write("b/mod.rs", "pub mod z;\npub mod w;\n");
    write("b/z.rs", "pub struct Z;\n");
    write(
        "b/w.rs",
        "use crate::Thing;\npub fn f() -> super::super::a::y::Y { todo!() }\n",
    );
    write(
        "c.rs",
        "pub struct Thing;\n#[cfg(test)]\nuse crate::a::x;\n",
    );
    let found = check(&Target {
        package: "t".into(),
        root: dir.join("lib.rs"),
    });
    let mut graph: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (a, b) in found.edges.keys() {
        graph.entry(a.clone()).or_default().insert(b.clone());
    }
    let m = |s: &str| vec![s.to_string()];
    assert_eq!(found.modules, 8);
    assert_eq!(cycles(&graph), vec![vec![m("a"), m("b")]]);
    // `b` names `c` through the root re-export; `c`'s test code and `a`'s
    // comment name nothing.
    assert!(graph[&m("b")].contains(&m("c")), "{graph:?}");
    assert!(!graph.contains_key(&m("c")), "{graph:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
