//! No import circles inside a folder (docs/ARCHITECTURE.md, "Inside a folder"): the files of
//! one top-level folder of `crates/linerate/src` (its subfolders' files included) and the
//! modules their code names (`crate::…`, `super::…`, `self::…`, `use` groups expanded; comments
//! and unit tests skipped) form a graph, and no strongly connected part of it may hold three
//! files or more. A reader can then learn a folder from its leaves up.
//!
//! A folder that must hold one for a while is listed in `KNOWN` with its size: it may only
//! shrink, and leaves the list when its circle is gone, so the list stays true. None is.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use crate::layers::{code_lines, rust_files, src};

/// Folders with a circle of three or more files today, and its size: each may shrink, none
/// may grow, and no other folder may get one.
const KNOWN: &[(&str, usize)] = &[];

/// A module path: `["session", "server"]` for `session/server.rs`, `["session", "streams"]`
/// for `session/streams/mod.rs`.
type Module = Vec<String>;

/// Every module of `src` but the crate root, and its file.
fn modules() -> BTreeMap<Module, PathBuf> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut out = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(src()).expect("in src").with_extension("");
        let mut m: Module = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
        if m.last().is_some_and(|l| l == "mod") {
            m.pop();
        }
        if m.len() == 1 && (m[0] == "lib" || m[0] == "main") {
            continue;
        }
        out.insert(m, f);
    }
    out
}

/// Splits `text` at the commas outside braces.
fn top_level_items(text: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(text[start..].trim());
    out.retain(|s| !s.is_empty());
    out
}

/// The paths the path expression at the start of `text` names, from `base`: `a::b::{c,
/// d::e}` gives `base/a/b/c` and `base/a/b/d/e`; `super` steps up. What follows the
/// expression is not read.
fn expand(base: &[String], text: &str, out: &mut Vec<Module>) {
    let mut path = base.to_vec();
    let mut rest = text.trim();
    loop {
        if let Some(group) = rest.strip_prefix('{') {
            let end = matching_brace(group);
            for item in top_level_items(&group[..end]) {
                if item == "self" {
                    out.push(path.clone());
                } else {
                    expand(&path, item, out);
                }
            }
            return;
        }
        let ident: String =
            rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        if ident.is_empty() {
            out.push(path);
            return;
        }
        match ident.as_str() {
            "super" => {
                path.pop();
            }
            "self" => {}
            _ => path.push(ident.clone()),
        }
        rest = &rest[ident.len()..];
        match rest.strip_prefix("::") {
            Some(r) => rest = r,
            None => {
                out.push(path);
                return;
            }
        }
    }
}

/// Where the group that `text` opens (just after its `{`) closes.
fn matching_brace(text: &str) -> usize {
    let mut depth = 1;
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    text.len()
}

/// The paths `code` (of module `m`, a `mod.rs` when `is_mod`) names through `crate::`,
/// `super::` and `self::`.
fn named(code: &str, m: &[String], is_mod: bool) -> Vec<Module> {
    let parent: Module = m[..m.len() - 1].to_vec();
    let here: Module = m.to_vec();
    let mut out = Vec::new();
    for (kw, base) in [("crate::", Vec::new()), ("super::", parent), ("self::", here)] {
        let mut from = 0;
        while let Some(i) = code[from..].find(kw).map(|i| i + from) {
            from = i + kw.len();
            let before = code[..i].chars().last();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | ':')) {
                continue;
            }
            // `self::x` names a child only in a folder's `mod.rs`; elsewhere, an item here.
            if kw == "self::" && !is_mod {
                continue;
            }
            expand(&base, &code[from..], &mut out);
        }
    }
    out
}

/// Each module's imports of other modules: the longest prefix of every named path that is a
/// module.
fn import_graph(mods: &BTreeMap<Module, PathBuf>) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut graph = BTreeMap::new();
    for (m, file) in mods {
        let text = std::fs::read_to_string(file).expect("read source");
        let code: String =
            code_lines(&text, false).into_iter().map(|(_, l)| l).collect::<Vec<_>>().join("\n");
        let is_mod = file.file_name().is_some_and(|f| f == "mod.rs");
        let mut to = BTreeSet::new();
        for path in named(&code, m, is_mod) {
            let target = (1..=path.len()).rev().map(|k| &path[..k]).find(|p| mods.contains_key(*p));
            if let Some(t) = target
                && t != m.as_slice()
            {
                to.insert(t.to_vec());
            }
        }
        graph.insert(m.clone(), to);
    }
    graph
}

/// The strongly connected parts of `graph` (Tarjan), each sorted.
fn strongly_connected(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct Walk<'g> {
        graph: &'g BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'g Module, usize>,
        low: BTreeMap<&'g Module, usize>,
        stack: Vec<&'g Module>,
        on_stack: BTreeSet<&'g Module>,
        parts: Vec<Vec<Module>>,
    }
    fn visit<'g>(w: &mut Walk<'g>, v: &'g Module) {
        let n = w.index.len();
        w.index.insert(v, n);
        w.low.insert(v, n);
        w.stack.push(v);
        w.on_stack.insert(v);
        for u in w.graph.get(v).into_iter().flatten() {
            if !w.graph.contains_key(u) {
                continue;
            }
            if !w.index.contains_key(u) {
                visit(w, u);
                let l = w.low[u].min(w.low[v]);
                w.low.insert(v, l);
            } else if w.on_stack.contains(u) {
                let l = w.index[u].min(w.low[v]);
                w.low.insert(v, l);
            }
        }
        if w.low[v] == w.index[v] {
            let mut part = Vec::new();
            while let Some(u) = w.stack.pop() {
                w.on_stack.remove(u);
                part.push(u.clone());
                if u == v {
                    break;
                }
            }
            part.sort();
            w.parts.push(part);
        }
    }
    let mut w = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        parts: Vec::new(),
    };
    for v in graph.keys() {
        if !w.index.contains_key(v) {
            visit(&mut w, v);
        }
    }
    w.parts
}

/// The circles of three files or more inside each top-level folder: folder, its files.
fn circles() -> Vec<(String, Vec<String>)> {
    let mods = modules();
    let graph = import_graph(&mods);
    let folders: BTreeSet<&String> = mods.keys().filter(|m| m.len() > 1).map(|m| &m[0]).collect();
    let mut out = Vec::new();
    for folder in folders {
        let inside: BTreeMap<Module, BTreeSet<Module>> = graph
            .iter()
            .filter(|(m, _)| &m[0] == folder)
            .map(|(m, to)| (m.clone(), to.iter().filter(|t| &t[0] == folder).cloned().collect()))
            .collect();
        for part in strongly_connected(&inside) {
            if part.len() >= 3 {
                let files = part.iter().map(|m| m[1..].join("/")).collect();
                out.push((folder.clone(), files));
            }
        }
    }
    out
}

#[test]
fn no_folder_holds_an_import_circle_of_three_files() {
    let found = circles();
    let mut wrong = Vec::new();
    for (folder, files) in &found {
        match KNOWN.iter().find(|(f, _)| f == folder) {
            Some((_, known)) if files.len() <= *known => {}
            Some((_, known)) => wrong.push(format!(
                "{folder}/: its circle grew from {known} to {} files: {}",
                files.len(),
                files.join(", ")
            )),
            None => wrong.push(format!(
                "{folder}/: a circle of {} files: {} (take the shared part into a file \
                 that imports none of them)",
                files.len(),
                files.join(", ")
            )),
        }
    }
    for (folder, known) in KNOWN {
        let now: Vec<&Vec<String>> =
            found.iter().filter(|(f, _)| f == folder).map(|(_, files)| files).collect();
        match now.as_slice() {
            [] => wrong.push(format!("{folder}/ has no circle left: take it out of KNOWN")),
            [one] if one.len() < *known => wrong.push(format!(
                "{folder}/'s circle shrank to {} files: write {} in KNOWN",
                one.len(),
                one.len()
            )),
            _ => {}
        }
    }
    assert!(wrong.is_empty(), "import circles inside folders:\n{}", wrong.join("\n"));
}

#[test]
fn the_circle_finder_reads_groups_super_and_self() {
    let m = |p: &str| -> Module { p.split('/').map(String::from).collect() };
    let code = "use crate::stats::{trend::{Method, median}, drift};\n\
                use super::keep::{self, GroupRuns};\n\
                let x = crate::session::agents::wait_for(a);\n\
                let y = my_crate::ignored::path;";
    let got = named(code, &m("cmd/fleet"), false);
    assert!(got.contains(&m("stats/trend/Method")), "{got:?}");
    assert!(got.contains(&m("stats/drift")), "{got:?}");
    assert!(got.contains(&m("cmd/keep")), "{got:?}");
    assert!(got.contains(&m("cmd/keep/GroupRuns")), "{got:?}");
    assert!(got.contains(&m("session/agents/wait_for")), "{got:?}");
    assert!(!got.iter().any(|p| p[0] == "ignored"), "{got:?}");
    let in_mod = named("pub use self::control::Recv;", &m("session"), true);
    assert_eq!(in_mod, [m("session/control/Recv")]);
    let a = |s: &str| m(s);
    let graph: BTreeMap<Module, BTreeSet<Module>> = [
        (a("x/a"), [a("x/b")].into()),
        (a("x/b"), [a("x/c")].into()),
        (a("x/c"), [a("x/a")].into()),
        (a("x/d"), [a("x/a")].into()),
    ]
    .into();
    let parts = strongly_connected(&graph);
    assert!(parts.contains(&vec![a("x/a"), a("x/b"), a("x/c")]), "{parts:?}");
    assert!(parts.contains(&vec![a("x/d")]), "{parts:?}");
}
