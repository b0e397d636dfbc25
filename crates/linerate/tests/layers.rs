//! The crate's layers (docs/ARCHITECTURE.md), read from the source and from the document:
//! - which top-level module of `crates/linerate/src` may import which: every `crate::X` in
//!   code (comments skipped) of a module's files must name the module itself or one it may
//!   import, and the document's table says the same. A new import across layers either fits
//!   the map or the map (here and in the document) changes with a reason; an import cycle
//!   between folders cannot pass, because the map has none;
//! - every module under `src/` is named in its folder's row of the table, and every file a
//!   row names exists;
//! - the rules the document states about code (who may use clap, call libc, print, exit,
//!   open the history; that stats does no I/O; what the protocol crate may not do) hold in
//!   every line of code, each failure naming the file, the line and the rule.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Each module and what it may import besides itself, lowest layer first. Nothing may
/// import `cmd` (only `main.rs`), and every module above them may import `units` and
/// `record`.
const LAYERS: &[(&str, &[&str])] = &[
    ("units", &[]),
    ("record", &["units"]),
    ("sys", &[]),
    ("measure", &["sys"]),
    ("traffic", &["sys", "measure"]),
    ("plan", &[]),
    ("stats", &["plan"]),
    ("store", &["plan", "stats"]),
    ("session", &["sys", "measure", "traffic", "plan", "stats"]),
    ("report", &["plan", "stats", "store", "session"]),
    ("cli", &["plan", "store"]),
    ("cmd", &["sys", "measure", "traffic", "plan", "stats", "store", "session", "report", "cli"]),
];

pub(crate) fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

pub(crate) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level modules named as `crate::X` in the code (not the comments) of `text`.
fn imports(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in text.lines() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        let code = code.split(" //").next().unwrap_or(code);
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            let after = &rest[i + "crate::".len()..];
            let name: String =
                after.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            // `linerate_proto::...` has no `crate::`; `$crate::` is a macro's own crate.
            let preceded = rest[..i].chars().last();
            if !name.is_empty() && !matches!(preceded, Some('$' | '_')) {
                found.insert(name);
            }
            rest = after;
        }
    }
    found
}

#[test]
fn every_module_imports_only_what_its_layer_allows() {
    let mut violations = Vec::new();
    let mut checked = 0;
    for (module, allowed) in LAYERS {
        let mut files = Vec::new();
        let dir = src().join(module);
        rust_files(&dir, &mut files);
        let single = src().join(format!("{module}.rs"));
        if single.exists() {
            files.push(single);
        }
        assert!(!files.is_empty(), "module {module} has no source files: update LAYERS");
        for f in files {
            let text = std::fs::read_to_string(&f).expect("read source");
            checked += 1;
            for name in imports(&text) {
                let shared = !matches!(*module, "units" | "record")
                    && matches!(name.as_str(), "units" | "record");
                let ok = name == *module || shared || allowed.contains(&name.as_str());
                if !ok {
                    violations.push(format!(
                        "{} imports crate::{name}, which layer {module} may not import",
                        f.strip_prefix(src()).unwrap_or(&f).display()
                    ));
                }
            }
        }
    }
    assert!(checked > 50, "only {checked} files checked: is the source tree where expected?");
    assert!(violations.is_empty(), "layer violations:\n{}", violations.join("\n"));
}

/// The names of the files (or folders) directly in `src/`, sorted.
fn root_entries(folders: bool) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(src())
        .expect("src")
        .flatten()
        .filter(|e| e.path().is_dir() == folders)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn the_crate_root_holds_no_command_logic() {
    let files = root_entries(false);
    assert_eq!(files, ["lib.rs", "main.rs", "record.rs", "units.rs"], "files at the crate root");
    let mut mapped: Vec<String> =
        LAYERS.iter().map(|(m, _)| m.to_string()).filter(|m| src().join(m).is_dir()).collect();
    mapped.sort();
    assert_eq!(root_entries(true), mapped, "every folder has a place in LAYERS");
}

#[test]
fn the_checker_sees_an_import_and_skips_comments() {
    let text = "use crate::cmd::x;\n// crate::report in a comment\nlet a = crate::stats::f(); // crate::cli\n$crate::units";
    let got: Vec<String> = imports(text).into_iter().collect();
    assert_eq!(got, ["cmd", "stats"]);
}

fn document() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/ARCHITECTURE.md");
    std::fs::read_to_string(path).expect("docs/ARCHITECTURE.md")
}

/// One row of the document's layer table.
struct Row {
    /// The module: `units` for `units.rs`, `sys` for `sys/`.
    module: String,
    /// What it may import, as the document writes it.
    imports: String,
}

/// The section of `doc` under the heading that starts with `heading`, to the next `## `.
fn section<'a>(doc: &'a str, heading: &str) -> &'a str {
    let start = doc.find(heading).unwrap_or_else(|| panic!("the document has no {heading:?}"));
    let section = &doc[start..];
    let end = section[3..].find("\n## ").map_or(section.len(), |i| i + 3);
    &section[..end]
}

/// The rows of the table under "## Layers of `crates/linerate/src`".
fn layer_rows(doc: &str) -> Vec<Row> {
    let mut rows = Vec::new();
    for line in section(doc, "## Layers of").lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
        assert_eq!(cells.len(), 3, "a layer row has three cells (no `|` inside one): {line}");
        let module = cells[0].trim_matches('`').trim_end_matches('/').trim_end_matches(".rs");
        rows.push(Row { module: module.to_string(), imports: cells[2].to_string() });
    }
    rows
}

/// The list of each folder's files under "## The modules, folder by folder": (module, text),
/// from its heading (`### \`sys/\``, `### \`units.rs\``) to the next.
fn module_lists(doc: &str) -> Vec<(String, String)> {
    section(doc, "## The modules, folder by folder")
        .split("\n### ")
        .skip(1)
        .map(|part| {
            let (heading, text) = part.split_once('\n').unwrap_or((part, ""));
            let module = heading.trim().trim_matches('`').trim_end_matches('/');
            (module.trim_end_matches(".rs").to_string(), text.to_string())
        })
        .collect()
}

/// The texts between backticks in `text`.
fn spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

#[test]
fn the_document_draws_the_same_map() {
    let doc = document();
    let rows = layer_rows(&doc);
    let names: Vec<&str> = rows.iter().map(|r| r.module.as_str()).collect();
    let modules: Vec<&str> = LAYERS.iter().map(|(m, _)| *m).collect();
    assert_eq!(names, modules, "the document's rows are LAYERS' modules, in the same order");
    for (row, (module, allowed)) in rows.iter().zip(LAYERS) {
        let mut said: Vec<&str> = if row.imports == "everything" {
            LAYERS
                .iter()
                .map(|(m, _)| *m)
                .filter(|m| m != module && !["units", "record"].contains(m))
                .collect()
        } else {
            spans(&row.imports)
        };
        said.sort_unstable();
        let mut allowed = allowed.to_vec();
        allowed.sort_unstable();
        assert_eq!(
            said, allowed,
            "docs/ARCHITECTURE.md says `{module}` may import {}",
            row.imports
        );
    }
}

/// A unit test's code: a `tests.rs`, a `NAME_tests.rs`, a file in a `tests/` folder.
fn test_file(rel: &Path) -> bool {
    let stem = rel.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    stem == "tests"
        || stem.ends_with("_tests")
        || rel.components().any(|c| c.as_os_str() == "tests")
}

#[test]
fn every_module_is_named_in_its_folders_list() {
    let lists = module_lists(&document());
    let listed: Vec<&str> = lists.iter().map(|(m, _)| m.as_str()).collect();
    let modules: Vec<&str> = LAYERS.iter().map(|(m, _)| *m).collect();
    assert_eq!(listed, modules, "the document lists LAYERS' modules, in the same order");
    let mut missing = Vec::new();
    let mut stale = Vec::new();
    let mut named = 0;
    for (module, text) in &lists {
        let dir = src().join(module);
        let mut files = Vec::new();
        rust_files(&dir, &mut files);
        let said: BTreeSet<String> = spans(text)
            .into_iter()
            .map(|s| {
                let s = s.strip_prefix(&format!("{module}/")).unwrap_or(s);
                s.trim_end_matches('/').trim_end_matches(".rs").to_string()
            })
            .collect();
        for f in files {
            let rel = f.strip_prefix(&dir).expect("under its folder");
            if rel == Path::new("mod.rs") || test_file(rel) {
                continue;
            }
            let path = rel.with_extension("").to_string_lossy().into_owned();
            let name = path.strip_suffix("/mod").unwrap_or(&path).to_string();
            if said.contains(&name) {
                named += 1;
            } else {
                missing.push(format!("{module}/{}", rel.display()));
            }
        }
        for file in spans(text).into_iter().filter(|s| s.ends_with(".rs")) {
            if !dir.join(file).exists() && !src().join(file).exists() {
                stale.push(format!("`{file}` in the list of {module}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "modules docs/ARCHITECTURE.md does not name in their folder's list (by file name, \
         `NAME.rs`, or path inside the folder, `charts/NAME.rs`):\n{}",
        missing.join("\n")
    );
    assert!(stale.is_empty(), "files the document names that are not there:\n{}", stale.join("\n"));
    assert!(named > 150, "only {named} modules named: is the list where expected?");
}

/// A rule the document states about code, checked in every line of code it covers.
struct Rule {
    /// The document's words for it: the test fails if the document stops saying them.
    says: &'static str,
    /// Whether a file is bound by it, by its top-level module (`cmd`, `main`, `proto` for the
    /// protocol crate) and its path inside `src`.
    binds: fn(module: &str, rel: &str) -> bool,
    /// What its code may not contain: names, paths or macros, matched as whole tokens.
    forbidden: &'static [&'static str],
    /// Text a line may hold although it contains a forbidden token (removed before matching).
    allowed: &'static [&'static str],
    /// Whether unit tests are bound too (they may print a skipped check, read a fixture, or
    /// look at a socket with libc from outside the code they test).
    tests_too: bool,
}

const PRINTS: &[&str] = &["print!", "println!", "eprint!", "eprintln!", "dbg!"];

/// A rule that binds unit tests too, or only the code they test.
const AND_TESTS: bool = true;
const NOT_TESTS: bool = false;

const fn rule(
    says: &'static str,
    binds: fn(&str, &str) -> bool,
    forbidden: &'static [&'static str],
    tests_too: bool,
) -> Rule {
    Rule { says, binds, forbidden, allowed: &[], tests_too }
}

const RULES: &[Rule] = &[
    rule(
        "the only clap user",
        |m, _| m != "cli",
        &["clap", "clap_complete", "clap_mangen"],
        AND_TESTS,
    ),
    rule(
        "the only modules that call `libc`",
        |m, _| !matches!(m, "sys" | "measure"),
        &["libc"],
        NOT_TESTS,
    ),
    rule("the only user of `rusqlite`", |m, _| m != "store", &["rusqlite"], AND_TESTS),
    rule(
        "Only `report/` and `main.rs` print",
        |m, _| !matches!(m, "report" | "main"),
        PRINTS,
        NOT_TESTS,
    ),
    rule(
        "hands standard output to a renderer",
        |m, rel| !matches!(m, "report" | "main" | "cmd") && rel != "sys/stdio.rs",
        &["stdout", "stderr"],
        NOT_TESTS,
    ),
    Rule {
        allowed: &["stderr().is_terminal()"],
        ..rule("Commands never print directly", |m, _| m == "cmd", &["stderr"], NOT_TESTS)
    },
    rule(
        "`socket.rs` is the one place data sockets are made",
        |m, rel| {
            matches!(m, "traffic" | "session")
                && !matches!(
                    rel,
                    "traffic/socket.rs" | "session/doctor.rs" | "session/doctor_echo.rs"
                )
        },
        &[
            "Socket::new",
            "TcpStream::connect",
            "TcpStream::connect_timeout",
            "TcpListener::bind",
            "UdpSocket::bind",
        ],
        NOT_TESTS,
    ),
    rule(
        "No I/O, no clock",
        |m, _| m == "stats",
        &[
            "std::fs",
            "std::io",
            "std::env",
            "std::process",
            "std::thread",
            "File",
            "TcpStream",
            "TcpListener",
            "UdpSocket",
            "Instant",
            "SystemTime",
            "print!",
            "println!",
            "eprint!",
            "eprintln!",
        ],
        NOT_TESTS,
    ),
    rule(
        "the one place that turns the outcome into the one line on stderr and the exit status",
        |m, _| m != "main",
        &["process::exit", "ExitCode::from", "ExitCode::FAILURE"],
        AND_TESTS,
    ),
    rule(
        "open sockets, read clocks, spawn threads, draw random numbers, log",
        |m, _| m == "proto",
        &[
            "TcpStream",
            "TcpListener",
            "UdpSocket",
            "socket2",
            "libc",
            "Instant::now",
            "SystemTime::now",
            "std::thread",
            "thread::spawn",
            "getrandom",
            "rand::",
            "log::",
            "tracing::",
            "print!",
            "println!",
            "eprint!",
            "eprintln!",
        ],
        NOT_TESTS,
    ),
];

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Whether `code` holds `token` as a whole token (not inside a longer name).
fn holds(code: &str, token: &str) -> bool {
    code.match_indices(token).any(|(i, _)| {
        let before = code[..i].chars().last();
        let after = code[i + token.len()..].chars().next();
        let starts = !token.starts_with(is_ident) || !before.is_some_and(is_ident);
        let ends = !token.ends_with(is_ident) || !after.is_some_and(is_ident);
        starts && ends
    })
}

/// The lines of code of `text` with their numbers (1-based): comments skipped, and, unless
/// `tests_too`, a unit-test module at the end of a file (`#[cfg(test)] mod NAME {`) too.
pub(crate) fn code_lines(text: &str, tests_too: bool) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut test_attr = false;
    for (i, line) in text.lines().enumerate() {
        let code = line.trim_start();
        if !tests_too && test_attr && code.starts_with("mod ") && code.ends_with('{') {
            break;
        }
        test_attr = code == "#[cfg(test)]" || (test_attr && code.starts_with("#["));
        if code.starts_with("//") {
            continue;
        }
        out.push((i + 1, code.split(" //").next().unwrap_or(code)));
    }
    out
}

/// The files each rule reads: (module, path inside `src`, full path), this crate's and the
/// protocol crate's (module `proto`).
fn bound_files() -> Vec<(String, String, PathBuf)> {
    let mut out = Vec::new();
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    for f in files {
        let rel = f.strip_prefix(src()).expect("in src").to_string_lossy().into_owned();
        let top = rel.split('/').next().unwrap_or_default();
        let module = top.trim_end_matches(".rs").to_string();
        out.push((module, rel, f));
    }
    let proto = Path::new(env!("CARGO_MANIFEST_DIR")).join("../proto/src");
    let mut files = Vec::new();
    rust_files(&proto, &mut files);
    for f in files {
        let rel = f.strip_prefix(&proto).expect("in proto").to_string_lossy().into_owned();
        out.push(("proto".to_string(), rel, f));
    }
    out
}

#[test]
fn the_rules_the_document_states_hold_in_every_line() {
    // The document's words, with its line breaks as spaces.
    let doc = document().split_whitespace().collect::<Vec<_>>().join(" ");
    let files = bound_files();
    let mut broken = Vec::new();
    for rule in RULES {
        if !doc.contains(rule.says) {
            broken.push(format!(
                "docs/ARCHITECTURE.md no longer says {:?}: change the rule in tests/layers.rs too",
                rule.says
            ));
        }
        let mut read = 0;
        for (module, rel, path) in &files {
            if !(rule.binds)(module, rel) || (!rule.tests_too && test_file(Path::new(rel))) {
                continue;
            }
            read += 1;
            let text = std::fs::read_to_string(path).expect("read source");
            for (n, line) in code_lines(&text, rule.tests_too) {
                let mut code = line.to_string();
                for ok in rule.allowed {
                    code = code.replace(ok, "");
                }
                if let Some(t) = rule.forbidden.iter().find(|t| holds(&code, t)) {
                    broken.push(format!("{rel}:{n}: `{t}` breaks \"{}\"", rule.says));
                }
            }
        }
        assert!(read > 0, "no file is bound by \"{}\"", rule.says);
    }
    assert!(broken.is_empty(), "rules of docs/ARCHITECTURE.md broken:\n{}", broken.join("\n"));
}

#[test]
fn the_rule_checker_sees_tokens_and_skips_comments_and_unit_tests() {
    assert!(holds("eprintln!(\"x\")", "eprintln!"));
    assert!(!holds("eprintln!(\"x\")", "println!"), "a longer macro is not the shorter one");
    assert!(holds("use clap::Args;", "clap"));
    assert!(!holds("clap_complete::generate", "clap"));
    assert!(holds("let x = std::io::stderr();", "stderr"));
    let text = "fn a() {}\n// println!(\"in a comment\")\nlet b = 1; // println!\n#[cfg(test)]\nmod tests {\n    println!(\"a test\");\n}\n";
    let code: Vec<usize> = code_lines(text, false).into_iter().map(|(n, _)| n).collect();
    assert_eq!(code, [1, 3, 4]);
    assert!(code_lines(text, true).iter().any(|(_, l)| holds(l, "println!")));
    assert!(!code_lines(text, false).iter().any(|(_, l)| holds(l, "println!")));
}
