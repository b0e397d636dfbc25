//! An in-memory client/server pair with simulated time, driving both state machines through
//! whole tests and through every failure the protocol must survive. No sockets, no clocks.

use crate::machine::Machine;
use std::time::Duration;

use crate::client::{ClientConn, ClientEvent};
use crate::results::{SideResults, SocketReport, StreamResult, StreamRole};
use crate::server::{AttachError, ServerConn, ServerEvent};
use crate::spec::{Direction, EndCondition, Protocol, TestSpec};
use crate::wire::{
    AbortReason, Cookie, Message, PROTOCOL_VERSION, StopReason, encode_frame, preamble,
};
use crate::{ProtoError, fuzzing};

const COOKIE: Cookie = Cookie([0x5a; 16]);

struct Pair {
    client: ClientConn,
    server: ServerConn,
    now: Duration,
    client_events: Vec<ClientEvent>,
    server_events: Vec<ServerEvent>,
    /// Deliver bytes one at a time, to prove framing does not depend on read boundaries.
    trickle: bool,
}

impl Pair {
    fn new(spec: TestSpec) -> Self {
        let now = Duration::from_secs(100);
        Self {
            client: ClientConn::new(spec, "test-client", now).expect("valid spec"),
            server: ServerConn::new("test-server", now),
            now,
            client_events: Vec::new(),
            server_events: Vec::new(),
            trickle: false,
        }
    }

    /// Shuttles bytes both ways until neither side has anything to send; accepts requests.
    fn drive(&mut self) -> Result<(), ProtoError> {
        for _ in 0..100 {
            let mut moved = false;
            if let Some(bytes) = self.client.poll_transmit() {
                moved = true;
                self.feed_server(&bytes)?;
            }
            while let Some(ev) = self.server.poll_event() {
                if let ServerEvent::TestRequested { .. } = ev {
                    self.server.accept(COOKIE, self.now)?;
                }
                self.server_events.push(ev);
            }
            if let Some(bytes) = self.server.poll_transmit() {
                moved = true;
                self.feed_client(&bytes)?;
            }
            while let Some(ev) = self.client.poll_event() {
                self.client_events.push(ev);
            }
            if !moved {
                return Ok(());
            }
        }
        panic!("pair did not quiesce");
    }

    fn feed_server(&mut self, bytes: &[u8]) -> Result<(), ProtoError> {
        if self.trickle {
            bytes.iter().try_for_each(|b| self.server.handle_input(&[*b], self.now))
        } else {
            self.server.handle_input(bytes, self.now)
        }
    }

    fn feed_client(&mut self, bytes: &[u8]) -> Result<(), ProtoError> {
        if self.trickle {
            bytes.iter().try_for_each(|b| self.client.handle_input(&[*b], self.now))
        } else {
            self.client.handle_input(bytes, self.now)
        }
    }

    fn attach_all(&mut self) {
        let n = self.server.spec().expect("accepted").connection_count();
        for id in 1..=n {
            self.server.attach_stream(id, self.now).expect("attach");
        }
    }

    fn advance(&mut self, d: Duration) {
        self.now += d;
    }
}

fn results(software: &str, bytes: u64) -> SideResults {
    SideResults {
        software: software.into(),
        streams: vec![StreamResult {
            id: 1,
            flow: crate::Flow::ClientToServer,
            role: StreamRole::Sender,
            bytes,
            omitted_bytes: 0,
            duration_us: 2_000_000,
            omitted_us: 0,
            intervals: Vec::new(),
            socket: SocketReport::default(),
            retransmits: Some(0),
            tcp: None,
            thread_cpu: None,
            thread_wait_us: None,
            udp_sender: None,
            udp_receiver: None,
            error: None,
            latency: None,
        }],
        intervals_dropped: false,
        intervals_per_sample: 1,
        cost: None,
        environment: None,
    }
}

fn spec_for(direction: Direction, streams: u32) -> TestSpec {
    TestSpec { direction, streams, ..TestSpec::default_tcp() }
}

fn run_to_start(p: &mut Pair) {
    p.drive().expect("handshake");
    assert!(matches!(p.client_events[0], ClientEvent::Accepted { cookie: COOKIE, .. }));
    assert!(matches!(p.server_events[0], ServerEvent::TestRequested { .. }));
    p.attach_all();
    p.drive().expect("start");
    assert!(p.client_events.contains(&ClientEvent::Start));
    assert!(p.server_events.contains(&ServerEvent::Start));
}

#[test]
fn full_test_exchanges_results_both_ways() {
    for trickle in [false, true] {
        let mut p = Pair::new(spec_for(Direction::Bidirectional, 3));
        p.trickle = trickle;
        run_to_start(&mut p);
        p.advance(Duration::from_secs(10));
        p.client.stop(StopReason::TimeElapsed);
        p.client.stop(StopReason::TimeElapsed); // second stop is not sent twice
        p.drive().expect("stop");
        let stops =
            p.server_events.iter().filter(|e| matches!(e, ServerEvent::PeerStop(_))).count();
        assert_eq!(stops, 1);
        p.server.send_results(results("srv", 7), p.now).expect("server results");
        p.drive().expect("server results delivered");
        assert!(!p.client.is_finished(), "client has not sent its results yet");
        p.client.send_results(results("cli", 9), p.now).expect("client results");
        p.drive().expect("client results delivered");
        assert!(p.client.is_finished() && p.server.is_finished());
        assert!(p.client_events.contains(&ClientEvent::PeerResults(Box::new(results("srv", 7)))));
        assert!(p.server_events.contains(&ServerEvent::PeerResults(Box::new(results("cli", 9)))));
        assert_eq!(p.client_events.last(), Some(&ClientEvent::Finished));
        assert_eq!(p.server_events.last(), Some(&ServerEvent::Finished));
        assert_eq!(p.client.poll_timeout(), None, "no deadline after finishing");
    }
}

#[test]
fn results_in_either_order_finish_both() {
    let mut p = Pair::new(spec_for(Direction::Upload, 1));
    run_to_start(&mut p);
    p.client.send_results(results("cli", 1), p.now).expect("client first");
    p.drive().expect("deliver");
    assert!(!p.server.is_finished());
    p.server.send_results(results("srv", 1), p.now).expect("server second");
    p.drive().expect("deliver");
    assert!(p.client.is_finished() && p.server.is_finished());
}

#[test]
fn server_waits_for_every_stream_before_start() {
    let mut p = Pair::new(spec_for(Direction::Upload, 4));
    p.drive().expect("handshake");
    for id in 1..=3 {
        p.server.attach_stream(id, p.now).expect("attach");
    }
    p.drive().expect("no start yet");
    assert!(!p.client_events.contains(&ClientEvent::Start));
    assert_eq!(p.server.attach_stream(3, p.now), Err(AttachError::Duplicate(3)));
    assert_eq!(p.server.attach_stream(5, p.now), Err(AttachError::UnknownStream(5)));
    assert_eq!(p.server.attach_stream(0, p.now), Err(AttachError::UnknownStream(0)));
    p.server.attach_stream(4, p.now).expect("last");
    p.drive().expect("start");
    assert!(p.client_events.contains(&ClientEvent::Start));
    assert_eq!(p.server.attach_stream(1, p.now), Err(AttachError::NotAccepting));
}

#[test]
fn attach_before_accept_is_refused() {
    let mut srv = ServerConn::new("s", Duration::ZERO);
    assert_eq!(srv.attach_stream(1, Duration::ZERO), Err(AttachError::NotAccepting));
}

#[test]
fn silent_client_times_out_within_handshake_deadline() {
    let mut srv = ServerConn::new("s", Duration::ZERO);
    assert_eq!(srv.poll_timeout(), Some(crate::HANDSHAKE_TIMEOUT));
    assert!(srv.handle_timeout(Duration::from_millis(4999)).is_ok());
    let err = srv.handle_timeout(Duration::from_secs(5)).unwrap_err();
    assert!(matches!(err, ProtoError::TimedOut { .. }), "{err}");
    assert!(err.to_string().contains("hello"), "{err}");
}

#[test]
fn trickling_client_cannot_extend_the_handshake() {
    let mut srv = ServerConn::new("s", Duration::ZERO);
    let bytes = preamble(PROTOCOL_VERSION);
    for (i, b) in bytes.iter().enumerate() {
        let now = Duration::from_millis(600 * i as u64);
        let r = srv.handle_input(&[*b], now).and_then(|_| srv.handle_timeout(now));
        if now >= crate::HANDSHAKE_TIMEOUT {
            assert!(r.is_err(), "deadline must hold although bytes keep arriving");
            return;
        }
    }
    panic!("deadline never fired");
}

#[test]
fn client_times_out_when_start_never_comes() {
    let mut p = Pair::new(spec_for(Direction::Upload, 2));
    p.drive().expect("handshake");
    let deadline = p.client.poll_timeout().expect("deadline while connecting");
    assert_eq!(deadline - p.now, crate::STREAMS_TIMEOUT + Duration::from_millis(20));
    let err = p.client.handle_timeout(deadline).unwrap_err();
    assert!(err.to_string().contains("start"), "{err}");
}

#[test]
fn missing_results_time_out() {
    let mut p = Pair::new(spec_for(Direction::Upload, 1));
    run_to_start(&mut p);
    p.client.send_results(results("c", 1), p.now).expect("send");
    let err = p.client.handle_timeout(p.now + crate::RESULTS_TIMEOUT).unwrap_err();
    assert!(err.to_string().contains("results"), "{err}");
}

#[test]
fn running_test_is_cut_after_duration_plus_grace() {
    let mut spec = spec_for(Direction::Download, 1);
    spec.end = EndCondition::Duration { duration_ms: 3000 };
    spec.omit_ms = 1000;
    let mut p = Pair::new(spec);
    run_to_start(&mut p);
    let d = p.server.poll_timeout().expect("run deadline");
    assert_eq!(d - p.now, Duration::from_secs(4) + crate::RUN_GRACE);
    assert!(p.server.handle_timeout(d).is_err());
}

#[test]
fn byte_bound_test_has_no_protocol_run_deadline() {
    let mut spec = spec_for(Direction::Upload, 1);
    spec.end = EndCondition::Bytes { bytes: 1 << 20 };
    let mut p = Pair::new(spec);
    run_to_start(&mut p);
    assert_eq!(p.server.poll_timeout(), None);
}

#[test]
fn server_shutdown_abort_reaches_client_with_reason() {
    let mut p = Pair::new(spec_for(Direction::Upload, 1));
    run_to_start(&mut p);
    p.server.abort(AbortReason::ServerShutdown, "server is shutting down (SIGTERM)");
    let err = p.drive().unwrap_err();
    match err {
        ProtoError::Aborted { reason, message } => {
            assert_eq!(reason, AbortReason::ServerShutdown);
            assert!(message.contains("shutting down"));
        }
        other => panic!("unexpected {other}"),
    }
}

#[test]
fn eof_mid_test_is_reported_as_closed_during_test() {
    let mut p = Pair::new(spec_for(Direction::Upload, 1));
    run_to_start(&mut p);
    let err = p.client.handle_eof().unwrap_err();
    assert_eq!(err, ProtoError::Closed("during the test".into()));
    let err = p.server.handle_eof().unwrap_err();
    assert_eq!(err, ProtoError::Closed("during the test".into()));
}

#[test]
fn eof_after_finish_is_fine() {
    let mut p = Pair::new(spec_for(Direction::Upload, 1));
    run_to_start(&mut p);
    p.client.send_results(results("c", 1), p.now).expect("c");
    p.server.send_results(results("s", 1), p.now).expect("s");
    p.drive().expect("finish");
    assert_eq!(p.client.handle_eof(), Ok(()));
    assert_eq!(p.server.handle_eof(), Ok(()));
}

/// Bytes a hand-written peer sends: preamble plus frames.
fn raw_peer(frames: &[Message]) -> Vec<u8> {
    let mut v = preamble(PROTOCOL_VERSION).to_vec();
    for f in frames {
        v.extend_from_slice(&encode_frame(f));
    }
    v
}

fn hello(caps: &[&str]) -> Message {
    Message::Hello {
        software: "raw".into(),
        capabilities: caps.iter().map(|c| c.to_string()).collect(),
        auth_nonce: None,
    }
}

#[test]
fn invalid_spec_from_peer_is_refused_with_reason() {
    let mut bad = TestSpec::default_tcp();
    bad.streams = 0;
    let mut srv = ServerConn::new("s", Duration::ZERO);
    let bytes = raw_peer(&[hello(&["tcp"]), Message::TestRequest { spec: bad }]);
    let err = srv.handle_input(&bytes, Duration::ZERO).unwrap_err();
    assert!(matches!(err, ProtoError::Spec(_)));
    let out = srv.poll_transmit().expect("refusal queued");
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains("refused") && text.contains("-P"), "{text}");
}

#[test]
fn client_lacking_capability_is_refused() {
    let spec = spec_for(Direction::Bidirectional, 1);
    let mut srv = ServerConn::new("s", Duration::ZERO);
    let bytes = raw_peer(&[hello(&["tcp"]), Message::TestRequest { spec }]);
    let err = srv.handle_input(&bytes, Duration::ZERO).unwrap_err();
    assert!(err.to_string().contains("--bidir"), "{err}");
}

#[test]
fn server_lacking_capability_fails_client_before_request() {
    let mut cli =
        ClientConn::new(spec_for(Direction::Download, 1), "c", Duration::ZERO).expect("valid");
    let err = cli.handle_input(&raw_peer(&[hello(&["tcp"])]), Duration::ZERO).unwrap_err();
    assert!(matches!(err, ProtoError::Incompatible(ref m) if m.contains("-R")), "{err}");
}

/// A peer from before UDP datagrams carried the test's secret (hello with "udp" but not
/// "udp_secret") is told so by name, either way, instead of miscounting 16-byte headers.
#[test]
fn udp_peers_without_the_datagram_secret_are_refused_by_name() {
    let old = ["tcp", "udp", "reverse", "pacing"];
    let udp = TestSpec { protocol: Protocol::Udp, block_bytes: 64, ..TestSpec::default_tcp() };
    let mut srv = ServerConn::new("s", Duration::ZERO);
    let bytes = raw_peer(&[hello(&old), Message::TestRequest { spec: udp.clone() }]);
    let err = srv.handle_input(&bytes, Duration::ZERO).unwrap_err();
    assert!(matches!(err, ProtoError::Incompatible(ref m) if m.contains("udp_secret")), "{err}");
    let refusal = String::from_utf8_lossy(&srv.poll_transmit().expect("refusal")).into_owned();
    assert!(refusal.contains("per-test secret") && refusal.contains("upgrade"), "{refusal}");
    let mut cli = ClientConn::new(udp, "c", Duration::ZERO).expect("valid");
    let err = cli.handle_input(&raw_peer(&[hello(&old)]), Duration::ZERO).unwrap_err();
    assert!(matches!(err, ProtoError::Incompatible(ref m) if m.contains("udp_secret")), "{err}");
    // TCP tests with such a peer still run.
    let mut srv = ServerConn::new("s", Duration::ZERO);
    let tcp = TestSpec::default_tcp();
    let bytes = raw_peer(&[hello(&old), Message::TestRequest { spec: tcp }]);
    assert!(srv.handle_input(&bytes, Duration::ZERO).is_ok());
}

#[test]
fn refusal_reaches_client_as_refused() {
    let mut cli = ClientConn::new(TestSpec::default_tcp(), "c", Duration::ZERO).expect("valid");
    let bytes = raw_peer(&[
        hello(&["tcp"]),
        Message::Refused { reason: "server allows at most 8 streams".into() },
    ]);
    let err = cli.handle_input(&bytes, Duration::ZERO).unwrap_err();
    assert_eq!(err, ProtoError::Refused("server allows at most 8 streams".into()));
}

#[test]
fn out_of_order_messages_are_violations() {
    let mut srv = ServerConn::new("s", Duration::ZERO);
    let err = srv.handle_input(&raw_peer(&[Message::Start]), Duration::ZERO).unwrap_err();
    assert!(matches!(err, ProtoError::Violation(_)));
    let mut cli = ClientConn::new(TestSpec::default_tcp(), "c", Duration::ZERO).expect("valid");
    let err = cli
        .handle_input(&raw_peer(&[hello(&["tcp"]), Message::Start]), Duration::ZERO)
        .unwrap_err();
    assert!(matches!(err, ProtoError::Violation(_)));
    assert!(cli.handle_input(b"", Duration::ZERO).is_err(), "failed machine stays failed");
}

#[test]
fn version_zero_is_incompatible() {
    let mut srv = ServerConn::new("s", Duration::ZERO);
    let err = srv.handle_input(&preamble(0), Duration::ZERO).unwrap_err();
    assert!(matches!(err, ProtoError::Incompatible(_)));
}

#[test]
fn bad_cookie_in_accept_is_violation() {
    let mut cli = ClientConn::new(TestSpec::default_tcp(), "c", Duration::ZERO).expect("valid");
    let bytes = raw_peer(&[hello(&["tcp"]), Message::TestAccepted { cookie: "nothex".into() }]);
    assert!(matches!(cli.handle_input(&bytes, Duration::ZERO), Err(ProtoError::Violation(_))));
}

/// Generated inputs through every fuzz body: valid transcripts, each truncated and with one
/// byte flipped at many positions, plus pseudo-random noise.
#[test]
fn fuzz_bodies_survive_generated_inputs() {
    let mut spec = TestSpec::default_tcp();
    spec.streams = 2;
    let client_script = raw_peer(&[
        hello(&["tcp", "reverse", "bidir", "pacing", "zerocopy"]),
        Message::TestRequest { spec },
        Message::Stop { reason: StopReason::TimeElapsed },
        Message::Results { results: results("x", 5) },
    ]);
    let server_script = {
        let mut v = raw_peer(&[hello(&["tcp"]), Message::TestAccepted { cookie: COOKIE.to_hex() }]);
        v.extend_from_slice(&encode_frame(&Message::Start));
        v.extend_from_slice(&encode_frame(&Message::Results { results: results("y", 3) }));
        v[12..].to_vec()
    };
    let doctor_request = raw_peer(&[
        hello(&["tcp", "environment", "echo"]),
        Message::EnvironmentRequest,
        Message::EchoRequest { client_port: 40000 },
    ]);
    let doctor_answer = raw_peer(&[
        hello(&["tcp", "environment", "echo"]),
        Message::Environment { environment: Box::default() },
        Message::EchoReady { port: 41000, cookie: COOKIE.to_hex() },
    ])[12..]
        .to_vec();
    let scripts = [&client_script, &server_script, &doctor_request, &doctor_answer];
    let mut inputs: Vec<Vec<u8>> = scripts.iter().map(|s| s.to_vec()).collect();
    for base in scripts {
        for i in (0..base.len()).step_by(3) {
            inputs.push(base[..i].to_vec());
            let mut flipped = base.clone();
            flipped[i] ^= 0x5a;
            inputs.push(flipped);
        }
    }
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for len in 0..400 {
        let noise = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        inputs.push(noise);
    }
    for (_, seed) in crate::fuzz_seeds::seeds() {
        inputs.push(seed.clone());
        for i in (0..seed.len()).step_by(5) {
            let mut flipped = seed.clone();
            flipped[i] ^= 0xa5;
            inputs.push(flipped);
            inputs.push(seed[..i].to_vec());
        }
    }
    for input in &inputs {
        for (_, body) in fuzzing::TARGETS {
            body(input);
        }
    }
    assert!(inputs.len() > 2000, "{} inputs", inputs.len());
}

fn corpus_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus")
}

/// Every file of the committed corpus (seeds, and whatever fuzzing found and was kept)
/// through its target's body; every target has a corpus.
#[test]
fn fuzz_corpus_replays() {
    let mut replayed = 0;
    for (name, body) in fuzzing::TARGETS {
        let dir = corpus_dir().join(name);
        let files = std::fs::read_dir(&dir).unwrap_or_else(|e| {
            panic!("{}: {e}; run the ignored test write_fuzz_seeds", dir.display())
        });
        let mut n = 0;
        for f in files {
            let input = std::fs::read(f.expect("entry").path()).expect("corpus file");
            body(&input);
            n += 1;
        }
        assert!(n > 0, "{name} has an empty corpus");
        replayed += n;
    }
    assert!(replayed >= fuzzing::TARGETS.len());
}

/// Writes the seeds to fuzz/corpus/<target>/seed-N (run once after the protocol changes:
/// `cargo test -p linerate-proto write_fuzz_seeds -- --ignored`).
#[test]
#[ignore = "writes into the source tree"]
fn write_fuzz_seeds() {
    let mut count = std::collections::HashMap::new();
    for (name, seed) in crate::fuzz_seeds::seeds() {
        let dir = corpus_dir().join(name);
        std::fs::create_dir_all(&dir).expect("corpus dir");
        let n = count.entry(name).or_insert(0);
        std::fs::write(dir.join(format!("seed-{n}")), seed).expect("write seed");
        *n += 1;
    }
}

#[test]
fn seeds_reach_the_states_they_are_for() {
    // The keyed seed gets through authentication to a request the driver decides on.
    let seeds = crate::fuzz_seeds::seeds();
    let (_, keyed) = seeds.iter().find(|(n, s)| *n == "server_auth" && s[0] == 1).expect("seed");
    let key = crate::auth::Psk::new(fuzzing::FUZZ_KEY.to_vec()).expect("key");
    let mut srv = ServerConn::with_psk("s", Duration::ZERO, key, fuzzing::FUZZ_NONCE);
    let mut input = preamble(PROTOCOL_VERSION).to_vec();
    input.extend_from_slice(&keyed[1..]);
    let _ = srv.handle_input(&input, Duration::ZERO);
    assert!(matches!(srv.poll_event(), Some(ServerEvent::TestRequested { .. })));
}

#[test]
fn garbage_gets_one_abort_explaining_why_and_refusal_is_not_followed_by_abort() {
    let mut srv = ServerConn::new("s", Duration::ZERO);
    let _ = srv.poll_transmit();
    let mut bytes = preamble(PROTOCOL_VERSION).to_vec();
    bytes.extend_from_slice(&0x7fff_fff0u32.to_be_bytes());
    let err = srv.handle_input(&bytes, Duration::ZERO).unwrap_err();
    srv.abort(AbortReason::ProtocolError, &err.to_string());
    srv.abort(AbortReason::ProtocolError, "second");
    let out = String::from_utf8_lossy(&srv.poll_transmit().expect("abort queued")).to_string();
    assert!(out.contains("exceeds the cap") && !out.contains("second"), "{out}");

    let mut bad = TestSpec::default_tcp();
    bad.streams = 0;
    let mut srv = ServerConn::new("s", Duration::ZERO);
    let _ = srv.poll_transmit();
    let req = raw_peer(&[hello(&["tcp"]), Message::TestRequest { spec: bad }]);
    assert!(srv.handle_input(&req, Duration::ZERO).is_err());
    srv.abort(AbortReason::Other, "after refusal");
    let out = String::from_utf8_lossy(&srv.poll_transmit().expect("refusal")).to_string();
    assert!(out.contains("refused") && !out.contains("after refusal"), "{out}");
}

/// Shuttles bytes until the server holds a pending request (it is not answered).
fn pending_request() -> (ClientConn, ServerConn, Duration) {
    let now = Duration::from_secs(100);
    let mut c = ClientConn::new(TestSpec::default_tcp(), "c", now).expect("spec");
    let mut s = ServerConn::new("s", now);
    for _ in 0..4 {
        if let Some(b) = c.poll_transmit() {
            s.handle_input(&b, now).expect("server input");
        }
        if let Some(b) = s.poll_transmit() {
            c.handle_input(&b, now).expect("client input");
        }
    }
    assert!(matches!(s.poll_event(), Some(ServerEvent::TestRequested { .. })));
    (c, s, now)
}

#[test]
fn queued_client_waits_while_heartbeats_arrive_and_times_out_without_them() {
    let (mut c, mut s, t0) = pending_request();
    assert!(s.can_queue(), "this crate's client says it can queue");
    let mut now = t0;
    for position in [2, 1] {
        s.queue(position, Some(Duration::from_secs(7))).expect("queue");
        c.handle_input(&s.poll_transmit().expect("queued frame"), now).expect("client");
        assert_eq!(
            c.poll_event(),
            Some(ClientEvent::Queued { position, wait: Some(Duration::from_secs(7)) })
        );
        now += Duration::from_secs(4);
        c.handle_timeout(now).expect("a heartbeat restarted the deadline");
    }
    s.accept(COOKIE, now).expect("accept after waiting");
    c.handle_input(&s.poll_transmit().expect("accepted"), now).expect("client");
    assert!(matches!(c.poll_event(), Some(ClientEvent::Accepted { .. })));

    let (mut c, mut s, t0) = pending_request();
    s.queue(1, None).expect("queue");
    c.handle_input(&s.poll_transmit().expect("queued"), t0).expect("client");
    let err = c.handle_timeout(t0 + crate::HANDSHAKE_TIMEOUT).expect_err("no heartbeat");
    assert!(err.to_string().contains("queue"), "{err}");
}

/// A hostile server that says `queued` every 0.5 s for ever: each heartbeat restarted the
/// client's only deadline, so it waited for ever. The queue's limit runs from the first
/// `queued` and no heartbeat moves it.
#[test]
fn endless_heartbeats_cannot_hold_a_client_past_its_queue_limit() {
    let limit = Duration::from_secs(20);
    let (c, mut s, t0) = pending_request();
    let mut c = c.with_queue_limit(limit);
    let mut now = t0;
    let err = loop {
        assert!(now <= t0 + limit, "still waiting at {:?}", now - t0);
        s.queue(3, None).expect("queue");
        if let Err(e) = c.handle_input(&s.poll_transmit().expect("queued"), now) {
            break e;
        }
        assert!(matches!(c.poll_event(), Some(ClientEvent::Queued { position: 3, wait: None })));
        assert!(c.poll_timeout().expect("a deadline") <= t0 + limit, "never past the limit");
        now += Duration::from_millis(500);
        if let Err(e) = c.handle_timeout(now) {
            break e;
        }
    };
    assert_eq!(now, t0 + limit, "given up exactly at the limit");
    assert!(
        matches!(err, ProtoError::QueueLimit { position: 3, waited, estimate: None, limit: l }
            if waited == limit && l == limit),
        "{err:?}"
    );
    assert!(err.to_string().contains("waited 20.0 s in the server's queue"), "{err}");
    assert!(c.handle_timeout(now + limit).is_ok(), "a failed machine has no deadline");

    // The server stops saying anything: the limit still ends the wait when it comes first.
    let (c, mut s, t0) = pending_request();
    let mut c = c.with_queue_limit(Duration::from_secs(3));
    s.queue(1, None).expect("queue");
    c.handle_input(&s.poll_transmit().expect("queued"), t0).expect("client");
    assert_eq!(c.poll_timeout(), Some(t0 + Duration::from_secs(3)));
    let err = c.handle_timeout(t0 + Duration::from_secs(3)).expect_err("limit");
    assert!(matches!(err, ProtoError::QueueLimit { .. }), "{err:?}");
}

/// The server's own estimate already runs past the limit: the client says so at once
/// rather than wait for the limit to pass.
#[test]
fn a_queue_estimate_past_the_limit_ends_the_wait_at_once() {
    let (c, mut s, t0) = pending_request();
    let mut c = c.with_queue_limit(Duration::from_secs(60));
    s.queue(2, Some(Duration::from_secs(50))).expect("queue");
    c.handle_input(&s.poll_transmit().expect("queued"), t0).expect("50 s of 60 is fine");
    let later = t0 + Duration::from_secs(15);
    s.queue(2, Some(Duration::from_secs(50))).expect("queue");
    let err = c.handle_input(&s.poll_transmit().expect("queued"), later).expect_err("15 + 50");
    let ProtoError::QueueLimit { position, waited, estimate, limit } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(
        (*position, *waited, *estimate, *limit),
        (2, Duration::from_secs(15), Some(Duration::from_secs(50)), Duration::from_secs(60))
    );
    let words = err.to_string();
    assert!(words.contains("estimated wait 50.0 s") && words.contains("60.0 s"), "{words}");
}

#[test]
fn queue_is_refused_outside_a_pending_request() {
    let mut s = ServerConn::new("s", Duration::ZERO);
    assert!(s.queue(1, None).is_err());
}

fn key(b: u8) -> crate::auth::Psk {
    crate::auth::Psk::new(vec![b; 32]).expect("key")
}

/// Runs client and server (each optionally keyed) until quiet; returns both machines'
/// first errors and whether the server saw a request.
fn keyed(
    client_key: Option<u8>,
    server_key: Option<u8>,
) -> (Option<ProtoError>, Option<ProtoError>, bool) {
    let now = Duration::ZERO;
    let mut c = ClientConn::new(TestSpec::default_tcp(), "c", now).expect("spec");
    if let Some(k) = client_key {
        c = c.with_psk(key(k), [9; 32]);
    }
    let mut s = match server_key {
        Some(k) => ServerConn::with_psk("s", now, key(k), [4; 32]),
        None => ServerConn::new("s", now),
    };
    let (mut ce, mut se, mut requested) = (None, None, false);
    for _ in 0..6 {
        if let Some(b) = c.poll_transmit() {
            se = se.or(s.handle_input(&b, now).err());
        }
        if let Some(b) = s.poll_transmit() {
            ce = ce.or(c.handle_input(&b, now).err());
        }
        while let Some(ev) = s.poll_event() {
            requested |= matches!(ev, ServerEvent::TestRequested { .. });
        }
    }
    (ce, se, requested)
}

#[test]
fn psk_client_and_server_reach_the_request() {
    let (ce, se, requested) = keyed(Some(1), Some(1));
    assert!(ce.is_none() && se.is_none() && requested, "{ce:?} {se:?}");
    let (ce, se, requested) = keyed(Some(1), None);
    assert!(ce.is_none() && se.is_none() && requested, "a key the server does not ask for");
}

#[test]
fn wrong_or_missing_key_gets_only_a_refusal() {
    let (ce, se, requested) = keyed(Some(2), Some(1));
    assert!(!requested, "no request reaches the driver");
    assert!(matches!(se, Some(ProtoError::Refused(ref m)) if m.contains("authentication failed")));
    assert!(matches!(ce, Some(ProtoError::Refused(ref m)) if m.contains("authentication failed")));
    let (ce, _, requested) = keyed(None, Some(1));
    assert!(!requested);
    assert!(matches!(ce, Some(ProtoError::Refused(ref m)) if m.contains("--psk-file")), "{ce:?}");
}

#[test]
fn a_request_without_auth_or_a_replayed_tag_is_refused() {
    let mut srv = ServerConn::with_psk("s", Duration::ZERO, key(1), [4; 32]);
    let bytes =
        raw_peer(&[hello(&["tcp"]), Message::TestRequest { spec: TestSpec::default_tcp() }]);
    let err = srv.handle_input(&bytes, Duration::ZERO).expect_err("refused");
    assert!(err.to_string().contains("requires a pre-shared key"), "{err}");
    assert!(srv.poll_event().is_none());
    // A tag made for another server nonce (a recording from another connection).
    let old = key(1).tag(&[5; 32], &[9; 32]);
    let replay = Message::Auth {
        client_nonce: crate::auth::to_hex(&[9; 32]),
        tag: crate::auth::to_hex(&old),
    };
    let mut srv = ServerConn::with_psk("s", Duration::ZERO, key(1), [4; 32]);
    let err = srv.handle_input(&raw_peer(&[hello(&["tcp"]), replay]), Duration::ZERO);
    assert!(err.expect_err("replay").to_string().contains("authentication failed"));
    let out = String::from_utf8_lossy(&srv.poll_transmit().expect("bytes")).to_string();
    assert!(out.contains("\"auth_nonce\":\"0404") && out.contains("refused"), "{out}");
}

/// A held start's pair, its streams attached and the server's `ready` received.
fn held_at_ready(direction: Direction, streams: u32) -> Pair {
    let mut p = Pair::new(TestSpec { held_start: true, ..spec_for(direction, streams) });
    p.drive().expect("handshake");
    p.attach_all();
    p.drive().expect("ready");
    p
}

/// A held start (a fleet): after the last stream the server says `ready` and starts only on
/// the client's `go`; neither side starts before it.
#[test]
fn held_start_waits_for_go_then_starts_both() {
    let mut p = held_at_ready(Direction::Download, 2);
    assert!(p.client_events.contains(&ClientEvent::Ready));
    assert!(!p.client_events.contains(&ClientEvent::Start));
    assert!(!p.server_events.contains(&ServerEvent::Start), "held: no start before go");
    p.advance(Duration::from_secs(3));
    p.client.go(p.now);
    p.client.go(p.now); // a second go is not sent twice
    // Its bytes written later (a fleet's coordinator): the wait for start counts from then.
    p.advance(Duration::from_secs(20));
    p.client.go_sent(p.now);
    assert_eq!(p.client.poll_timeout(), Some(p.now + crate::HANDSHAKE_TIMEOUT));
    p.drive().expect("go");
    assert_eq!(p.server_events.iter().filter(|e| **e == ServerEvent::Start).count(), 1);
    assert!(p.client_events.contains(&ClientEvent::Start));
    p.client.stop(StopReason::TimeElapsed);
    p.server.send_results(results("srv", 7), p.now).expect("server results");
    p.client.send_results(results("cli", 9), p.now).expect("client results");
    p.drive().expect("results");
    assert!(p.client.is_finished() && p.server.is_finished());
}

/// A fleet's client runs from its `go` on, so a stop may come before the server's `start`
/// does (it can wait behind other hosts' data): sent after the `go`, once, and not again once
/// the `start` arrives.
#[test]
fn held_start_stop_before_the_start_arrives_is_sent_once() {
    let mut p = held_at_ready(Direction::Upload, 1);
    p.client.stop(StopReason::Interrupted); // before the go: ignored
    p.client.go(p.now);
    p.client.stop(StopReason::Interrupted);
    assert!(!p.client.running(), "not before the server's start");
    p.drive().expect("go and stop");
    assert!(p.client_events.contains(&ClientEvent::Start));
    assert!(p.client.running());
    p.client.stop(StopReason::Interrupted);
    p.drive().expect("no second stop");
    let stops = p.server_events.iter().filter(|e| matches!(e, ServerEvent::PeerStop(_))).count();
    assert_eq!(stops, 1, "{:?}", p.server_events);
    let start = p.server_events.iter().position(|e| *e == ServerEvent::Start);
    let stop = p.server_events.iter().position(|e| matches!(e, ServerEvent::PeerStop(_)));
    assert!(start < stop, "the server reads the stop after the go: {:?}", p.server_events);
}

#[test]
fn held_start_times_out_without_go_and_go_is_refused_unheld() {
    let mut p = held_at_ready(Direction::Upload, 1);
    let deadline = p.server.poll_timeout().expect("the held server has a deadline");
    assert_eq!(deadline - p.now, crate::HELD_TIMEOUT);
    let err = p.server.handle_timeout(deadline).unwrap_err();
    assert!(err.to_string().contains("go"), "{err}");

    // Without a held start, `go` is a protocol violation, not a second start.
    let mut p = Pair::new(spec_for(Direction::Upload, 1));
    run_to_start(&mut p);
    let err = p.server.handle_input(&encode_frame(&Message::Go), p.now).unwrap_err();
    assert!(err.to_string().contains("\"go\""), "{err}");
}

#[test]
fn held_start_needs_the_capability() {
    // A server that does not announce held_start (an older linerate) is refused by the client
    // before it requests anything, naming what is missing.
    let spec = TestSpec { held_start: true, ..spec_for(Direction::Upload, 1) };
    let mut client = ClientConn::new(spec, "c", Duration::ZERO).expect("spec");
    let old = raw_peer(&[hello(&["tcp", "reverse", "bidir", "pacing", "zerocopy", "udp"])]);
    let err = client.handle_input(&old, Duration::ZERO).unwrap_err();
    assert!(err.to_string().contains("held_start"), "{err}");
}

#[test]
fn cpu_pairing_is_dropped_for_a_server_without_it() {
    // Pairing is a placement hint: an older server runs the test unpaired, and the request
    // the client sends (and the spec it then runs) no longer carries it.
    let spec = TestSpec { pair_cpus: vec![1, 0], ..spec_for(Direction::Upload, 2) };
    let mut client = ClientConn::new(spec.clone(), "c", Duration::ZERO).expect("spec");
    client.handle_input(&raw_peer(&[hello(&["tcp"])]), Duration::ZERO).expect("not refused");
    assert!(client.spec().pair_cpus.is_empty());
    let request = |c: &mut ClientConn| {
        let sent = String::from_utf8_lossy(&c.poll_transmit().expect("sent")).into_owned();
        let at = sent.find("test_request").expect("a test request");
        sent[at..].to_string()
    };
    let sent = request(&mut client);
    assert!(!sent.contains("pair_cpus"), "{sent}");
    let mut client = ClientConn::new(spec, "c", Duration::ZERO).expect("spec");
    client.handle_input(&raw_peer(&[hello(&["tcp", "pair_cpus"])]), Duration::ZERO).expect("ok");
    assert_eq!(client.spec().pair_cpus, vec![1, 0]);
    let sent = request(&mut client);
    assert!(sent.contains("\"pair_cpus\":[1,0]"), "{sent}");
}
