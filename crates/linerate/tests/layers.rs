//! The crate's layers (docs/ARCHITECTURE.md): which top-level module of `crates/linerate/src`
//! may import which. Read from the source: every `crate::X` in code (comments skipped) of a
//! module's files must name the module itself or one it may import. A new import across
//! layers either fits the map or the map (here and in docs/ARCHITECTURE.md) changes with a
//! reason; an import cycle between folders cannot pass, because the map has none.

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

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
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
