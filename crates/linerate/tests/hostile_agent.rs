//! `linerate mesh` against a hostile agent (issue 47): one that proves nothing, names its node,
//! and then, asked for a pair test, sends back a record of "8.00 EiB in 1 µs" whose two ends
//! agree; asked to serve another agent's test, it refuses with terminal control bytes in the
//! reason (ESC sequences, BEL, CR/LF, U+202E). The requester and the other agent are the real
//! binary; the fake is written here with `linerate_proto::wire`, on loopback, bounded in time.
//!
//! What must hold: the forged record is stored as a `violation`, never as completed, and its
//! figures are not kept; no line the mesh prints (progress on stderr, tables on stdout) carries
//! a control byte raw.

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use linerate_proto::wire::{
    CONTROL_MAGIC, Capability, FrameDecoder, MAX_FRAME_RESULTS, Message, PROTOCOL_VERSION,
    encode_frame, preamble,
};
use serde_json::Value;

use crate::hostile_server::Control;
use crate::util::{Server, run, test_dir};

/// The longest the fake serves.
const FAKE_LIFE: Duration = Duration::from_secs(60);

/// What the fake puts in its refusals: a title change, a screen clear, a bell, a line break
/// and a right-to-left override.
const HOSTILE: &str = "\u{1b}]0;pwned\u{7}\u{1b}[2J\r\nforged line\u{202e}txet";

/// A fake agent on a loopback port until dropped.
struct FakeAgent {
    port: u16,
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeAgent {
    /// `template`: a real record (of `linerate client -J`), made absurd for each request.
    fn start(template: Value) -> FakeAgent {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        l.set_nonblocking(true).expect("nonblocking");
        let done = Arc::new(AtomicBool::new(false));
        let stop = done.clone();
        let thread = std::thread::spawn(move || {
            let end = Instant::now() + FAKE_LIFE;
            while Instant::now() < end && !stop.load(Ordering::Relaxed) {
                let Ok((s, _)) = l.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                let template = template.clone();
                std::thread::spawn(move || {
                    let _ = serve(s, &template);
                });
            }
        });
        FakeAgent { port, done, thread: Some(thread) }
    }
}

impl Drop for FakeAgent {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One control connection: a hello asking for the key, any `auth` taken as proof, then the
/// environment (node `node-a`), a forged pair record, or a refusal full of control bytes.
fn serve(sock: TcpStream, template: &Value) -> std::io::Result<()> {
    let _ = sock.set_nonblocking(false);
    let mut c = Control { sock, decoder: FrameDecoder::new() };
    c.decoder.set_max_frame(MAX_FRAME_RESULTS);
    let mut pre = [0u8; 12];
    c.sock.read_exact(&mut pre)?;
    if pre[..8] != CONTROL_MAGIC {
        return Ok(()); // a data connection: nothing here runs a test
    }
    c.decoder.push(&pre);
    if !matches!(c.decoder.poll_preamble(), Ok(Some(_))) {
        return Ok(());
    }
    let mut hello = preamble(PROTOCOL_VERSION).to_vec();
    hello.extend(encode_frame(&Message::Hello {
        software: "fake-agent".into(),
        capabilities: Capability::ALL.iter().map(|c| c.as_str().to_string()).collect(),
        auth_nonce: Some("ab".repeat(32)),
    }));
    std::io::Write::write_all(&mut c.sock, &hello)?;
    for _ in 0..4 {
        match c.next(Duration::from_secs(5)) {
            Some(Message::Hello { .. } | Message::Auth { .. }) => {}
            Some(Message::EnvironmentRequest) => {
                let environment = linerate_proto::Environment {
                    node: Some("node-a".into()),
                    ..Default::default()
                };
                c.send(&Message::Environment { environment: Box::new(environment) })?;
                let _ = c.next(Duration::from_secs(2));
                return Ok(());
            }
            Some(Message::PairTestRequest { spec, .. }) => {
                c.send(&Message::Queued { position: 0, wait_ms: None })?;
                let mut record = template.clone();
                record["spec"] = serde_json::to_value(&spec).expect("spec");
                for side in ["client", "server_results"] {
                    for s in record[side]["streams"].as_array_mut().expect("streams") {
                        s["bytes"] = Value::from(8u64 << 60);
                        s["duration_us"] = Value::from(1u64);
                        s["intervals"] = Value::Array(Vec::new());
                    }
                }
                c.send(&Message::PairResult { record })?;
                return Ok(());
            }
            Some(Message::TestRequest { .. }) => {
                c.send(&Message::Refused { reason: HOSTILE.into() })?;
                return Ok(());
            }
            Some(_) | None => return Ok(()),
        }
    }
    Ok(())
}

/// Whether `text` holds a control byte other than a line feed, or a bidirectional override.
fn raw_control(text: &str) -> Option<char> {
    text.chars().find(|c| (c.is_control() && *c != '\n') || ('\u{202a}'..='\u{202e}').contains(c))
}

#[test]
fn a_hostile_agents_forged_record_is_a_violation_and_its_bytes_never_reach_the_terminal() {
    let _g = crate::util::exclusive();
    let dir = test_dir("hostile-agent");
    let key = dir.join("psk");
    std::fs::write(&key, [b'h'; 32]).expect("key");
    let key = key.to_str().expect("path");
    // A real record to forge from.
    let plain = Server::start(&[]);
    let port = plain.port.to_string();
    let out = run(
        &["client", "127.0.0.1", "-p", &port, "-t", "0.3", "-J", "--no-store"],
        Duration::from_secs(30),
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let doc: Value = serde_json::from_str(&out.stdout).expect("JSON");
    let fake = FakeAgent::start(doc["record"].clone());
    let real = Server::start(&["--agent", "--psk-file", key, "--node-name", "node-b"]);
    let db = dir.join("h.db");
    let db = db.to_str().expect("path");
    let (a, b) = (format!("127.0.0.1:{}", fake.port), format!("127.0.0.1:{}", real.port));
    let args = ["mesh", "-t", "0.5", "--repeat", "1", "--psk-file", key, "--db", db, &a, &b];
    let out = run(&args, Duration::from_secs(60));
    assert_eq!(out.code, Some(3), "failed pairs: exit 3\n{}\n{}", out.stdout, out.stderr);
    for (name, text) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        if let Some(c) = raw_control(text) {
            panic!("{name} carries {c:?} raw:\n{text}");
        }
    }
    // The refusal's words are there, escaped, in the progress line of node-b -> node-a.
    let line = out.stderr.lines().find(|l| l.contains("node-b -> node-a") && l.contains("failed"));
    let line =
        line.unwrap_or_else(|| panic!("no progress line of node-b -> node-a:\n{}", out.stderr));
    assert!(line.contains("forged line"), "{line}");
    let forged = out.stderr.lines().find(|l| l.contains("node-a -> node-b"));
    let forged = forged.unwrap_or_else(|| panic!("no line of node-a -> node-b:\n{}", out.stderr));
    assert!(forged.contains("8.00 EiB") && forged.contains("not plausible"), "{forged}");
    // Stored as a violation, with no figure of its own.
    let out = run(&["history", "--db", db, "-J", "--limit", "10"], Duration::from_secs(30));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let runs: Value = serde_json::from_str(&out.stdout).expect("JSON");
    let runs = runs.as_array().expect("runs");
    assert_eq!(runs.len(), 2, "{runs:?}");
    let pair = |label: &str| {
        let found = runs.iter().find(|r| r["cell"].as_str() == Some(label));
        found.unwrap_or_else(|| panic!("no run {label}: {runs:?}"))
    };
    let forged = pair("node-a -> node-b");
    assert_eq!(forged["outcome"], "failed", "{forged}");
    assert!(forged["bits_per_second"].is_null(), "no figure kept: {forged}");
    let id = forged["id"].to_string();
    let out = run(&["show", &id, "--db", db, "-J"], Duration::from_secs(30));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let shown: Value = serde_json::from_str(&out.stdout).expect("JSON");
    let record = &shown["record"];
    assert_eq!(record["outcome"]["kind"], "violation", "{shown}");
    assert!(record["client"].is_null() && record["server_results"].is_null(), "{record}");
    assert_eq!(pair("node-b -> node-a")["outcome"], "failed");
}
