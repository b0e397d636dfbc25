//! Hostile peer strings, both ways (docs/SECURITY.md, "Peer strings"): a fake client whose
//! hello software and abort text carry ESC sequences, CR/LF with a forged "Server listening
//! on" line and bidi overrides must leave the server's log clean and bounded; a fake server
//! doing the same must leave the client's terminal output clean, and `show` of the stored run
//! too. Loopback only; every peer here is a few frames written by the test.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use linerate_proto::TestSpec;
use linerate_proto::wire::{
    AbortReason, Capability, Message, PROTOCOL_VERSION, encode_frame, preamble,
};

use crate::util::{Server, run, test_dir};

/// A title bar rewrite, a screen clear, a forged log line and a right-to-left override.
const HOSTILE: &str =
    "evil\x1b]0;pwned\x07\x1b[2J\r\nServer listening on 0.0.0.0:1\u{202e}txt.exe\u{2066}";

/// Asserts `text` has no raw control byte but line feeds, no bidi or invisible format
/// character, and no line that starts like the server's own "listening" line after the first.
fn assert_clean(what: &str, text: &str) {
    let bad: Vec<char> = text
        .chars()
        .filter(|&c| {
            (c.is_control() && c != '\n')
                || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200b}'..='\u{200f}')
        })
        .collect();
    assert!(bad.is_empty(), "{what}: raw {bad:?} in:\n{text}");
    let forged = text.lines().skip(1).filter(|l| l.starts_with("Server listening on")).count();
    assert_eq!(forged, 0, "{what}: a forged line in:\n{text}");
}

fn hello(software: &str) -> Message {
    Message::Hello {
        software: software.into(),
        capabilities: Capability::ALL.iter().map(|c| c.as_str().to_string()).collect(),
        auth_nonce: None,
    }
}

fn frames(first: bool, messages: &[Message]) -> Vec<u8> {
    let mut out = if first { preamble(PROTOCOL_VERSION).to_vec() } else { Vec::new() };
    for m in messages {
        out.extend(encode_frame(m));
    }
    out
}

#[test]
fn hostile_client_strings_reach_the_server_log_escaped_and_capped() {
    let srv = Server::start(&[]);
    let mut c = TcpStream::connect(("127.0.0.1", srv.port)).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    let spec = TestSpec::default_tcp();
    c.write_all(&frames(true, &[hello(HOSTILE), Message::TestRequest { spec }])).expect("send");
    assert!(srv.wait_for_log("accepted", Duration::from_secs(5)), "{}", srv.log());
    // Just under the frame's string limit: the log quotes at most its cap of it.
    let long = format!("{HOSTILE}{}", "A".repeat(4000));
    let abort = Message::Abort { reason: AbortReason::Other, message: long };
    c.write_all(&frames(false, &[abort])).expect("abort");
    assert!(srv.wait_for_log("FAILED", Duration::from_secs(5)), "{}", srv.log());
    let log = srv.log();
    assert_clean("server log", &log);
    assert!(log.contains("evil\\x1b]0;pwned\\x07\\x1b[2J\\r\\nServer listening on"), "{log}");
    assert!(log.contains("\\u{202e}txt.exe"), "{log}");
    let longest = log.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    assert!(longest < 2000, "a log line of {longest} characters:\n{log}");
    assert!(log.contains("bytes cut)"), "the cut is said: {log}");
}

/// A fake server: answers the first control connection with a hostile hello, an acceptance
/// and a hostile abort; accepts (and holds) whatever else connects until the client is done.
fn hostile_server(done: Arc<AtomicBool>) -> (u16, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    l.set_nonblocking(true).expect("nonblocking");
    let t = std::thread::spawn(move || {
        let mut held = Vec::new();
        let end = std::time::Instant::now() + Duration::from_secs(10);
        while std::time::Instant::now() < end && !done.load(Ordering::Relaxed) {
            let Ok((mut s, _)) = l.accept() else {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            };
            if held.is_empty() {
                let _ = s.set_nonblocking(false);
                let _ = s.set_read_timeout(Some(Duration::from_millis(300)));
                let _ = s.read(&mut [0u8; 4096]);
                let accepted = Message::TestAccepted { cookie: "ab".repeat(16) };
                let abort = Message::Abort { reason: AbortReason::Other, message: HOSTILE.into() };
                let _ = s.write_all(&frames(true, &[hello(HOSTILE), accepted]));
                std::thread::sleep(Duration::from_millis(300));
                let _ = s.write_all(&frames(false, &[abort]));
            }
            held.push(s);
        }
    });
    (port, t)
}

#[test]
fn hostile_server_strings_reach_the_terminal_and_show_escaped() {
    let dir = test_dir("peer-strings");
    let db = dir.join("h.db");
    let db = db.to_str().expect("utf-8 path");
    let done = Arc::new(AtomicBool::new(false));
    let (port, server) = hostile_server(done.clone());
    let port = port.to_string();
    let out =
        run(&["client", "127.0.0.1", "-p", &port, "-t", "2", "--db", db], Duration::from_secs(20));
    done.store(true, Ordering::Relaxed);
    let _ = server.join();
    assert_eq!(out.code, Some(3), "the test failed: {out:?}");
    assert!(out.stderr.contains("\\x1b"), "the abort text is shown, escaped: {}", out.stderr);
    assert_clean("client stdout", &out.stdout);
    assert_clean("client stderr", &out.stderr);
    let shown = run(&["show", "last", "--db", db], Duration::from_secs(10));
    assert_eq!(shown.code, Some(0), "{shown:?}");
    assert!(shown.stdout.contains("\\u{202e}"), "the stored strings are shown: {}", shown.stdout);
    assert_clean("show", &shown.stdout);
    let report = run(&["report", "last", "--db", db, "--format", "md"], Duration::from_secs(10));
    assert_eq!(report.code, Some(0), "{report:?}");
    assert!(report.stdout.contains("\\u{202e}"), "{}", report.stdout);
    assert_clean("report", &report.stdout);
    let history = run(&["history", "--failed", "--db", db], Duration::from_secs(10));
    assert_eq!(history.code, Some(0), "{history:?}");
    assert!(history.stdout.contains("\\x1b"), "the failure is listed: {}", history.stdout);
    assert_clean("history", &history.stdout);
}
