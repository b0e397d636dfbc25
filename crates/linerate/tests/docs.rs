//! Every `linerate ...` command line in the shell blocks of README.md and docs/*.md parses,
//! through the binary's own entry (`cli::parse`: clap, then the plan with its checks), and the
//! cheap ones run on loopback. README's `linerate report f3 --html` was refused for months
//! because nothing read the documents' commands.
//!
//! A command line is a line of a ```sh (bash, shell, console) block that starts with
//! `linerate` (after an optional `$ ` prompt), joined with its `\` continuations, cut at a
//! comment, a pipe or a redirection. Blocks without a shell tag hold output, not commands.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::util::{Server, run, test_dir};

/// One documented command line: where it is, and its words.
struct Example {
    place: String,
    words: Vec<String>,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// README.md and docs/*.md, in a fixed order.
fn documents() -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    [vec![root().join("README.md")], docs].concat()
}

fn examples() -> Vec<Example> {
    let mut found = Vec::new();
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).expect("read");
        let name = doc.strip_prefix(root()).unwrap_or(&doc).display().to_string();
        let mut shell = None;
        let mut pending: Option<(usize, String)> = None;
        for (i, line) in text.lines().enumerate() {
            if let Some(info) = line.trim_start().strip_prefix("```") {
                shell = match shell {
                    Some(_) => None,
                    None => Some(["sh", "bash", "shell", "console"].contains(&info.trim())),
                };
                continue;
            }
            if shell != Some(true) {
                continue;
            }
            let (start, joined) = match pending.take() {
                Some((start, head)) => (start, format!("{head} {}", line.trim())),
                None => (i + 1, line.trim().trim_start_matches("$ ").to_string()),
            };
            if let Some(head) = joined.strip_suffix('\\') {
                pending = Some((start, head.trim_end().to_string()));
                continue;
            }
            let words = shell_words(&joined);
            if words.first().is_some_and(|w| w == "linerate") {
                found.push(Example { place: format!("{name}:{start}"), words });
            }
        }
    }
    found
}

/// A command's words as a POSIX shell splits them, up to a comment, a pipe, a redirection or
/// a second command; quotes are removed.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.get_or_insert_with(String::new).push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                word.get_or_insert_with(String::new);
            }
            (None, '#') if word.is_none() => break,
            (None, '|' | '>' | '<' | ';' | '&') => break,
            (None, c) if c.is_whitespace() => words.extend(word.take()),
            (None, c) => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    words
}

/// The files the documents' examples take for granted (a key, a config file, a targets file,
/// a saved `-J` document), made in `dir`; the campaign examples are the repository's own.
fn with_files(words: &[String], dir: &Path) -> Vec<String> {
    let made = |name: &str, content: &str| {
        let path = dir.join(name);
        std::fs::write(&path, content).expect("write");
        path.display().to_string()
    };
    words
        .iter()
        .map(|w| match w.as_str() {
            "key" => made("key", "a documented key of 32 bytes, ok\n"),
            "/etc/linerate/server.toml" => made("server.toml", "max_streams = 8\n"),
            // The README's curves go up to 16 hosts.
            "hosts.txt" => {
                made("hosts.txt", &(1..=16).map(|i| format!("127.0.0.{i}\n")).collect::<String>())
            }
            "saved.json" => made("saved.json", "{}\n"),
            w if w.starts_with("examples/") => root().join(w).display().to_string(),
            w => w.to_string(),
        })
        .collect()
}

#[test]
fn every_documented_command_line_parses() {
    let dir = test_dir("documented-commands");
    let examples = examples();
    // The extraction itself is checked: README alone has some forty.
    assert!(examples.len() >= 40, "only {} command lines found", examples.len());
    let mut wrong = Vec::new();
    for e in &examples {
        if let Err(err) = linerate::cli::parse(with_files(&e.words, &dir)) {
            let first = err.to_string().lines().next().unwrap_or_default().to_string();
            wrong.push(format!("{}: `{}`: {first}", e.place, e.words.join(" ")));
        }
    }
    assert!(wrong.is_empty(), "documented commands that do not parse:\n{}", wrong.join("\n"));
}

/// The documented commands that need no remote host, no stored history and no long test run
/// for real: `generate`, and `doctor` (HOST is a linerate server on loopback).
#[test]
fn cheap_documented_commands_run_on_loopback() {
    let srv = Server::start(&["-B", "127.0.0.1"]);
    let host = format!("127.0.0.1:{}", srv.port);
    let cheap: Vec<Example> = examples()
        .into_iter()
        .filter(|e| matches!(e.words.get(1).map(String::as_str), Some("generate" | "doctor")))
        .collect();
    assert!(cheap.len() >= 3, "generate and doctor examples: {}", cheap.len());
    for e in cheap {
        let args: Vec<&str> =
            e.words[1..].iter().map(|w| if w == "HOST" { host.as_str() } else { w }).collect();
        let out = run(&args, Duration::from_secs(30));
        assert_eq!(out.code, Some(0), "{}: {args:?}: {}", e.place, out.stderr);
        assert!(!out.stdout.is_empty(), "{}: {args:?} printed nothing", e.place);
    }
}

#[test]
fn shell_words_split_as_a_shell_does() {
    let words = |s| shell_words(s).join("|");
    assert_eq!(words("linerate client HOST -J | jq '.a'"), "linerate|client|HOST|-J");
    assert_eq!(words("linerate report m3 > m.md   # comment"), "linerate|report|m3");
    assert_eq!(words("linerate -T 'two words' -t 1"), "linerate|-T|two words|-t|1");
    assert_eq!(words("linerate fleet a#b"), "linerate|fleet|a#b");
}
