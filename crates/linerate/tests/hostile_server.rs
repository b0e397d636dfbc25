//! The client against a hostile or broken server (docs/SECURITY.md, "A hostile server"): one
//! that says `queued` for ever, one whose estimate of the queue is absurd, one that reports
//! figures no link can produce, and one that resets a data stream mid-test. The server here
//! is a fake written by the test, speaking the native protocol with `linerate_proto::wire`
//! on loopback; the client is the real binary. Each fake is bounded in time.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use linerate_proto::wire::{
    CONTROL_MAGIC, Capability, Cookie, DATA_HELLO_LEN, DATA_MAGIC, DataHello, FrameDecoder,
    MAX_FRAME_RESULTS, Message, PROTOCOL_VERSION, encode_frame, preamble,
};
use linerate_proto::{SideResults, StreamResult};

use crate::util::{Server, run, test_dir};

/// The longest any fake serves: every test here ends well within it.
const FAKE_LIFE: Duration = Duration::from_secs(40);

/// What the fake server does with a test request.
#[derive(Debug, Clone, Copy)]
enum Fake {
    /// Says `queued` every `every`, with this estimate, until the client leaves.
    QueueForever { every: Duration, wait_ms: Option<u64> },
    /// Runs the test, then reports stream 1 as receiving `bytes` in `duration_us`.
    Inflate { bytes: u64, duration_us: u64 },
    /// Runs the test, resetting data stream `id` (RST, `SO_LINGER` 0) after 300 ms; reports
    /// what it read, honestly.
    Reset { id: u32 },
}

/// A fake linerate server on a loopback port until dropped (or [`FAKE_LIFE`]).
struct FakeServer {
    port: u16,
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeServer {
    fn start(fake: Fake) -> FakeServer {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        l.set_nonblocking(true).expect("nonblocking");
        let done = Arc::new(AtomicBool::new(false));
        let stop = done.clone();
        let thread = std::thread::spawn(move || accept_loop(&l, fake, &stop));
        FakeServer { port, done, thread: Some(thread) }
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Accepts control and data connections; each control connection is served on a thread of
/// its own, data connections go to the test by their hello's stream id.
fn accept_loop(l: &TcpListener, fake: Fake, done: &AtomicBool) {
    let end = Instant::now() + FAKE_LIFE;
    let (data_tx, data_rx) = channel::<(u32, TcpStream)>();
    let mut data_rx = Some(data_rx);
    let mut sessions = Vec::new();
    while Instant::now() < end && !done.load(Ordering::Relaxed) {
        let Ok((mut s, _)) = l.accept() else {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        };
        let _ = s.set_nonblocking(false);
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        let mut magic = [0u8; 8];
        if s.read_exact(&mut magic).is_err() {
            continue;
        }
        if magic == DATA_MAGIC {
            let mut hello = [0u8; DATA_HELLO_LEN];
            hello[..8].copy_from_slice(&magic);
            if s.read_exact(&mut hello[8..]).is_ok()
                && let Some(h) = DataHello::decode(&hello)
            {
                let _ = data_tx.send((h.stream_id, s));
            }
        } else if magic == CONTROL_MAGIC
            && let Some(rx) = data_rx.take()
        {
            sessions.push(std::thread::spawn(move || {
                let _ = serve(s, fake, &rx);
            }));
        }
    }
    for t in sessions {
        let _ = t.join();
    }
}

/// The control connection's reader: whole messages, with a deadline (the fake agent's too,
/// `hostile_agent.rs`).
pub(crate) struct Control {
    pub(crate) sock: TcpStream,
    pub(crate) decoder: FrameDecoder,
}

impl Control {
    pub(crate) fn next(&mut self, limit: Duration) -> Option<Message> {
        let until = Instant::now() + limit;
        let mut buf = [0u8; 65536];
        loop {
            if let Ok(Some(m)) = self.decoder.poll_frame() {
                return Some(m);
            }
            let left = until.checked_duration_since(Instant::now())?;
            let _ = self.sock.set_read_timeout(Some(left.max(Duration::from_millis(1))));
            match self.sock.read(&mut buf) {
                Ok(0) => return None,
                Ok(n) => self.decoder.push(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(_) => return None,
            }
        }
    }

    pub(crate) fn send(&mut self, m: &Message) -> std::io::Result<()> {
        self.sock.write_all(&encode_frame(m))
    }
}

/// Serves one test as `fake` says.
fn serve(sock: TcpStream, fake: Fake, data: &Receiver<(u32, TcpStream)>) -> std::io::Result<()> {
    let mut c = Control { sock, decoder: FrameDecoder::new() };
    c.decoder.set_max_frame(MAX_FRAME_RESULTS);
    // The rest of the client's preamble (its magic was read by the acceptor).
    let mut version = [0u8; 4];
    c.sock.read_exact(&mut version)?;
    c.decoder.push(&CONTROL_MAGIC);
    c.decoder.push(&version);
    if !matches!(c.decoder.poll_preamble(), Ok(Some(_))) {
        return Ok(());
    }
    let mut hello = preamble(PROTOCOL_VERSION).to_vec();
    hello.extend(encode_frame(&Message::Hello {
        software: "fake-server".into(),
        capabilities: Capability::ALL.iter().map(|c| c.as_str().to_string()).collect(),
        auth_nonce: None,
    }));
    c.sock.write_all(&hello)?;
    let spec = loop {
        match c.next(Duration::from_secs(5)) {
            Some(Message::TestRequest { spec }) => break spec,
            Some(_) => {}
            None => return Ok(()),
        }
    };
    if let Fake::QueueForever { every, wait_ms } = fake {
        let end = Instant::now() + FAKE_LIFE;
        while Instant::now() < end {
            c.send(&Message::Queued { position: 3, wait_ms })?;
            // Ends when the client leaves (its abort, or its close).
            if c.next(every).is_some() {
                return Ok(());
            }
            if c.sock.peek(&mut [0u8; 1]).is_ok_and(|n| n == 0) {
                return Ok(());
            }
        }
        return Ok(());
    }
    c.send(&Message::TestAccepted { cookie: Cookie([7; 16]).to_hex() })?;
    let mut streams: Vec<(u32, TcpStream)> = Vec::new();
    while streams.len() < spec.connection_count() as usize {
        match data.recv_timeout(Duration::from_secs(10)) {
            Ok(s) => streams.push(s),
            Err(_) => return Ok(()),
        }
    }
    if spec.held_start {
        c.send(&Message::Ready)?;
        match c.next(Duration::from_secs(30)) {
            Some(Message::Go) => {}
            _ => return Ok(()),
        }
    }
    let start = Instant::now();
    c.send(&Message::Start)?;
    let readers: Vec<_> = streams
        .into_iter()
        .map(|(id, s)| std::thread::spawn(move || drain(id, s, start, fake)))
        .collect();
    // The client's stop (a byte-bound test has none: its streams end on their own).
    let _ = c.next(Duration::from_secs(20));
    let mut results: Vec<StreamResult> =
        readers.into_iter().filter_map(|r| r.join().ok()).collect();
    results.sort_by_key(|s| s.id);
    if let Fake::Inflate { bytes, duration_us } = fake
        && let Some(first) = results.first_mut()
    {
        first.bytes = bytes;
        first.duration_us = duration_us;
    }
    let side =
        SideResults { software: "fake-server".into(), streams: results, ..SideResults::default() };
    c.send(&Message::Results { results: side })?;
    // The client's results, then it closes.
    let _ = c.next(Duration::from_secs(10));
    Ok(())
}

/// Reads a client's upload stream to its end (or resets it, for [`Fake::Reset`]) and says
/// what arrived, as a linerate server would.
fn drain(id: u32, mut s: TcpStream, start: Instant, fake: Fake) -> StreamResult {
    let reset_at = match fake {
        Fake::Reset { id: r } if r == id => Some(start + Duration::from_millis(300)),
        _ => None,
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(50)));
    let mut buf = vec![0u8; 256 * 1024];
    let mut bytes = 0u64;
    let end = start + Duration::from_secs(30);
    while Instant::now() < end {
        if reset_at.is_some_and(|t| Instant::now() >= t) {
            // Dropped below with a zero linger: a reset, not a close.
            let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
            break;
        }
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => bytes += n as u64,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
    }
    // The reset stream's report says nothing wrong: the client must see it on its own.
    drop(s);
    // What a linerate server reports of a stream it received; the fields not given are
    // the ones no fake measures (None).
    let report = serde_json::json!({
        "id": id, "flow": "client_to_server", "role": "receiver", "bytes": bytes,
        "omitted_bytes": 0, "duration_us": start.elapsed().as_micros() as u64, "omitted_us": 0,
        "socket": {},
    });
    serde_json::from_value(report).expect("a stream result")
}

fn db(name: &str) -> String {
    test_dir(name).join("h.db").to_str().expect("utf-8 path").to_string()
}

/// Issue 35: a server that answered `queued` every 0.5 s held a client for ever (each one
/// restarted its 5 s deadline). `--queue-timeout 2` ends the wait at 2 s, naming the flag.
#[test]
fn a_server_that_queues_for_ever_holds_a_client_only_until_its_queue_timeout() {
    let fake =
        FakeServer::start(Fake::QueueForever { every: Duration::from_millis(500), wait_ms: None });
    let port = fake.port.to_string();
    let db = db("hostile-queue");
    let began = Instant::now();
    let out = run(
        &["client", "127.0.0.1", "-p", &port, "-t", "1", "--queue-timeout", "2", "--db", &db],
        Duration::from_secs(25),
    );
    let took = began.elapsed();
    println!("FIGURE hostile_queue_client_seconds = {:.2}", took.as_secs_f64());
    assert_eq!(out.code, Some(3), "{out:?}");
    assert!(took < Duration::from_secs(10), "held {took:?}");
    assert!(
        out.stderr.contains("waited 2.") && out.stderr.contains("in the server's queue"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("raise --queue-timeout (now 2 s)"), "{}", out.stderr);
}

/// The server's own estimate already exceeds what the client waits: it says so at once.
#[test]
fn a_queue_estimate_longer_than_the_queue_timeout_is_refused_at_once() {
    let fake = FakeServer::start(Fake::QueueForever {
        every: Duration::from_millis(500),
        wait_ms: Some(3_600_000),
    });
    let port = fake.port.to_string();
    let began = Instant::now();
    let out = run(
        &["client", "127.0.0.1", "-p", &port, "-t", "1", "--no-store"],
        Duration::from_secs(25),
    );
    let took = began.elapsed();
    println!("FIGURE hostile_queue_estimate_client_seconds = {:.2}", took.as_secs_f64());
    assert_eq!(out.code, Some(3), "{out:?}");
    assert!(took < Duration::from_secs(4), "waited {took:?} for a queue it knew was too long");
    assert!(
        out.stderr.contains("estimated wait 3600.0 s")
            && out.stderr.contains("exceeds the 300.0 s"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("raise --queue-timeout (now 300 s)"), "{}", out.stderr);
}

/// Issue 35: "8.00 EiB in 0.00 s" for a 1.74 GiB send was stored as a completed run. Now it
/// is a refusal, recorded as a failure of kind `violation`, with the server's figures
/// dropped and this end's kept.
#[test]
fn inflated_server_figures_are_refused_and_recorded_as_a_violation() {
    let fake = FakeServer::start(Fake::Inflate { bytes: 8 << 60, duration_us: 1_000 });
    let port = fake.port.to_string();
    let db = db("hostile-inflate");
    let out = run(
        &["client", "127.0.0.1", "-p", &port, "-t", "1", "-b", "100M", "-J", "--db", &db],
        Duration::from_secs(25),
    );
    assert_eq!(out.code, Some(3), "{out:?}");
    assert!(
        out.stderr.contains(
            "the server reported receiving 8.00 EiB on stream 1, more than this client sent on it ("
        ) && out.stderr.contains("its figures are not plausible"),
        "{}",
        out.stderr
    );
    let record = &out.json()["record"];
    assert_eq!(record["outcome"]["status"], "failed", "{record}");
    assert_eq!(record["outcome"]["kind"], "violation", "{record}");
    assert!(record["server_results"].is_null(), "not kept: {}", record["server_results"]);
    assert!(record["client"]["streams"][0]["bytes"].as_u64().unwrap_or(0) > 0, "this end's are");
    let history = run(&["history", "--failed", "--db", &db], Duration::from_secs(10));
    assert!(history.stdout.contains("not plausible"), "stored as a failure: {}", history.stdout);
}

/// A fleet of a real server and one that inflates: the fleet's total counts only the real
/// one, and says why the other is left out.
#[test]
fn a_fleet_leaves_an_implausible_host_out_of_its_total() {
    let srv = Server::start(&[]);
    let fake = FakeServer::start(Fake::Inflate { bytes: 8 << 60, duration_us: 1_000 });
    let (good, bad) =
        (format!("127.0.0.1:{}=good", srv.port), format!("127.0.0.1:{}=bad", fake.port));
    let out = run(
        &["fleet", &good, &bad, "-t", "2", "-b", "50M", "--no-store", "-J"],
        Duration::from_secs(40),
    );
    let doc = out.json();
    let text = doc.to_string();
    assert!(text.contains("not plausible"), "the bad host's failure is said: {text:.3000}");
    let hosts = doc["hosts"].as_array().cloned().unwrap_or_default();
    let bad = hosts.iter().find(|h| h.to_string().contains("not plausible")).expect("the bad host");
    assert_eq!(bad["record"]["outcome"]["kind"], "violation", "{bad}");
    assert!(!text.contains("9223372036854775808"), "the 8 EiB is nowhere in the figures");
    println!("FIGURE hostile_fleet_exit = {:?}", out.code);
}

/// A fleet host held in a queue for ever: the fleet ends once `--queue-timeout` passes, and
/// the real host is measured.
#[test]
fn a_fleet_is_not_held_by_a_server_that_queues_for_ever() {
    let srv = Server::start(&[]);
    let fake =
        FakeServer::start(Fake::QueueForever { every: Duration::from_millis(500), wait_ms: None });
    let (good, bad) =
        (format!("127.0.0.1:{}=good", srv.port), format!("127.0.0.1:{}=bad", fake.port));
    let began = Instant::now();
    let out = run(
        &["fleet", &good, &bad, "-t", "1", "-b", "50M", "--queue-timeout", "2", "--no-store"],
        Duration::from_secs(40),
    );
    let took = began.elapsed();
    println!("FIGURE hostile_queue_fleet_seconds = {:.2}", took.as_secs_f64());
    assert!(took < Duration::from_secs(15), "the fleet was held {took:?}: {out:?}");
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(all.contains("in the server's queue"), "{all}");
}

/// Issue 35: 96 of 128 streams reset, yet "Test complete" and exit 0. Now a test in which a
/// stream failed is a failure: exit 3, which stream and why, the rest of the figures kept.
#[test]
fn a_reset_stream_fails_the_test_and_keeps_the_partial_figures() {
    let fake = FakeServer::start(Fake::Reset { id: 2 });
    let port = fake.port.to_string();
    let db = db("hostile-reset");
    let out = run(
        &["client", "127.0.0.1", "-p", &port, "-t", "2", "-P", "2", "-b", "100M", "--db", &db],
        Duration::from_secs(25),
    );
    assert_eq!(out.code, Some(3), "{out:?}");
    assert!(!out.stdout.contains("Test complete"), "{}", out.stdout);
    assert!(out.stdout.contains("Test FAILED: the figures above are partial."), "{}", out.stdout);
    assert!(out.stdout.contains("over 2 stream(s)"), "the figures are kept: {}", out.stdout);
    assert!(out.stderr.contains("1 of 2 stream(s) failed: stream 2 (client: "), "{}", out.stderr);
    let history = run(&["history", "--failed", "--db", &db], Duration::from_secs(10));
    assert!(history.stdout.contains("stream(s) failed"), "stored as failed: {}", history.stdout);
}
