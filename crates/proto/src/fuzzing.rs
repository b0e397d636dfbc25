//! Fuzz bodies: functions that take arbitrary bytes and drive the codecs and state machines.
//!
//! The `fuzz/` crate's cargo-fuzz targets call these, and a stable test replays a corpus and
//! generated inputs through them, so fuzzing needs no nightly toolchain to catch regressions.
//! Each body must return normally for every input: errors are fine, panics are bugs.

use crate::machine::Machine;
use std::time::Duration;

use crate::auth::{NONCE_LEN, Psk, to_hex};
use crate::client::{ClientConn, ClientEvent};
use crate::iperf3::{Iperf3Results, Iperf3Server, Iperf3ServerEvent};
use crate::limits::Limits;
use crate::server::{ServerConn, ServerEvent};
use crate::spec::TestSpec;
use crate::udp::{
    Arrival, DatagramHeader, JitterMeter, SeqWidth, SequenceTracker, TrackerCounts, Unwrapper,
    header_len,
};
use crate::wire::decode;
use crate::wire::{
    Cookie, DATA_HELLO_LEN, DataHello, FrameDecoder, Message, PROTOCOL_VERSION, encode_frame,
    preamble,
};

/// A fuzz body: any bytes in, returns normally.
pub type Body = fn(&[u8]);

/// Every body, by the name of its cargo-fuzz target (`fuzz/fuzz_targets/<name>.rs`) and of
/// its corpus directory (`fuzz/corpus/<name>/`).
pub const TARGETS: &[(&str, Body)] = &[
    ("frame_decoder", frame_decoder),
    ("data_hello", data_hello),
    ("server_machine", server),
    ("server_auth", server_auth),
    ("client_machine", client),
    ("udp_receiver", udp_receiver),
    ("iperf3_server", iperf3_server),
    ("doctor_machine", doctor),
    ("typed_frames", typed_frames),
];

/// Feeds `data` (after a valid preamble) to a frame decoder in chunks whose sizes come from
/// the data itself, and checks the decoder never buffers much beyond the cap.
pub fn frame_decoder(data: &[u8]) {
    let mut d = FrameDecoder::new();
    d.push(&preamble(PROTOCOL_VERSION));
    if !matches!(d.poll_preamble(), Ok(Some(_))) {
        return;
    }
    for chunk in chunks(data) {
        d.push(chunk);
        loop {
            match d.poll_frame() {
                Ok(Some(_)) => continue,
                Ok(None) => break,
                Err(_) => return,
            }
        }
        assert!(d.buffered() <= crate::wire::MAX_FRAME_HANDSHAKE as usize + 4 + data.len());
    }
}

/// Decodes the rest of `data` as one frame body (native, or iperf3 results when the first
/// byte is odd) under bounds drawn from the first byte, from tiny to the real ones, and checks
/// that looser bounds never refuse what tighter ones accepted, that both decode alike, and
/// that a decoded message encodes and decodes to itself.
pub fn typed_frames(data: &[u8]) {
    let Some((&mode, body)) = data.split_first() else { return };
    let real = crate::wire::frame_bounds(crate::wire::MAX_FRAME_RESULTS);
    let tight = crate::bounded::Bounds {
        budget: 32 << (mode >> 1 & 15),
        max_items: 1 << (mode >> 5),
        max_string: 2 << (mode >> 4 & 7),
    };
    if mode & 1 == 1 {
        let (t, r) = (Iperf3Results::parse_within(body, tight), Iperf3Results::parse(body));
        check_bounds_monotonic(t.as_ref().ok(), r.as_ref().map_err(Clone::clone));
        return;
    }
    let (t, r) = (decode::decode(body, tight), decode::decode(body, real));
    if let Err(e) = &r {
        assert!(matches!(e, crate::ProtoError::Garbage(_) | crate::ProtoError::Violation(_)));
    }
    check_bounds_monotonic(t.as_ref().ok(), r.as_ref().map_err(ToString::to_string));
    if let Ok(msg) = &r {
        let again = decode::decode(&encode_frame(msg)[4..], real);
        assert_eq!(again.as_ref(), Ok(msg), "a decoded message re-encodes to itself");
    }
}

fn check_bounds_monotonic<T: PartialEq + std::fmt::Debug>(
    tight: Option<&T>,
    real: Result<&T, String>,
) {
    if let Some(t) = tight {
        match real {
            Ok(r) => assert_eq!(t, r, "the bounds change only whether, not what, is decoded"),
            Err(e) => panic!("looser bounds refused what tighter ones accepted: {e}"),
        }
    }
}

/// Parses a data-connection hello from the first 28 bytes.
pub fn data_hello(data: &[u8]) {
    if let Some(bytes) = data.get(..DATA_HELLO_LEN)
        && let Ok(arr) = <[u8; DATA_HELLO_LEN]>::try_from(bytes)
        && let Some(h) = DataHello::decode(&arr)
    {
        assert_eq!(DataHello::decode(&h.encode()), Some(h));
    }
}

/// Drives a server state machine with `data` as the client's bytes (after a valid preamble
/// when the first byte is even, raw otherwise), advancing simulated time between chunks,
/// checking every request against limits drawn from the input, queueing some, accepting or
/// refusing them and attaching streams named by the input.
pub fn server(data: &[u8]) {
    let mut prefix = Vec::new();
    if data.first().is_some_and(|b| b % 2 == 0) {
        prefix.extend_from_slice(&preamble(PROTOCOL_VERSION));
    }
    drive_server(ServerConn::new("fuzz", Duration::ZERO), data, &prefix);
}

/// As [`server`], for a server that requires a pre-shared key. The first byte is a mode:
/// bit 0 set prepends a valid preamble, bit 1 set also a valid hello and `auth` (so the
/// states after authentication are reached too); otherwise the input must get past the
/// challenge by itself.
pub fn server_auth(data: &[u8]) {
    let Some((&mode, data)) = data.split_first() else { return };
    let Ok(key) = Psk::new(FUZZ_KEY.to_vec()) else { return };
    let srv = ServerConn::with_psk("fuzz", Duration::ZERO, key.clone(), FUZZ_NONCE);
    let mut prefix = Vec::new();
    if mode & 1 == 1 {
        prefix.extend_from_slice(&preamble(PROTOCOL_VERSION));
    }
    if mode & 3 == 3 {
        let client_nonce = [3u8; NONCE_LEN];
        let hello = Message::Hello {
            software: "fuzz".into(),
            capabilities: vec!["tcp".into(), "queue".into()],
            auth_nonce: None,
        };
        let tag = to_hex(&key.tag(&FUZZ_NONCE, &client_nonce));
        prefix.extend(encode_frame(&hello));
        prefix.extend(encode_frame(&Message::Auth { client_nonce: to_hex(&client_nonce), tag }));
    }
    drive_server(srv, data, &prefix);
}

/// The key and server nonce of [`server_auth`] (public: the seeds use them).
pub const FUZZ_KEY: &[u8; 16] = b"fuzz-key-16bytes";
/// See [`FUZZ_KEY`].
pub const FUZZ_NONCE: [u8; NONCE_LEN] = [4; NONCE_LEN];

/// Feeds `prefix` and then `data` in chunks to `srv`, deciding every request.
fn drive_server(mut srv: ServerConn, data: &[u8], prefix: &[u8]) {
    let mut now = Duration::ZERO;
    let mut first = true;
    for chunk in chunks(data) {
        now += Duration::from_millis(u64::from(chunk.first().copied().unwrap_or(0)) * 40);
        let mut input = Vec::new();
        if first {
            input.extend_from_slice(prefix);
        }
        first = false;
        input.extend_from_slice(chunk);
        if srv.handle_input(&input, now).is_err() || srv.handle_timeout(now).is_err() {
            let _ = srv.poll_transmit();
            return;
        }
        while let Some(ev) = srv.poll_event() {
            match ev {
                ServerEvent::TestRequested { spec, .. } => decide(&mut srv, &spec, chunk, now),
                ServerEvent::EnvironmentRequested { .. } => {
                    let _ = srv.send_environment(crate::Environment::default());
                }
                ServerEvent::EchoRequested { .. } => {
                    let _ = srv.echo_ready(9, Cookie([7; 16]));
                }
                _ => {}
            }
        }
        for b in chunk {
            let _ = srv.attach_stream(u32::from(*b), now);
        }
        let _ = srv.poll_transmit();
    }
    let _ = srv.handle_eof();
}

/// What a driver might do with a request: check it against limits taken from the input,
/// then queue it a few times, refuse it or accept it.
fn decide(srv: &mut ServerConn, spec: &TestSpec, chunk: &[u8], now: Duration) {
    let b = |i: usize| u32::from(chunk.get(i).copied().unwrap_or(0));
    let limits = Limits {
        max_tests: b(1) % 4,
        max_streams: b(2) % 8 + 1,
        max_duration: Duration::from_secs(u64::from(b(3))),
        max_bitrate: (b(4) % 2 == 1).then(|| u64::from(b(4)) << 20),
        max_bytes: (b(5) % 2 == 1).then(|| u64::from(b(5)) << 10),
        allow_udp: b(6) % 2 == 0,
        allow_download: b(6) % 3 != 0,
        exclusive: b(7) % 2 == 1,
        ..Limits::default()
    };
    let verdict = limits.check(spec).and_then(|()| limits.busy(b(1) % 3).map_or(Ok(()), Err));
    for position in (1..=b(8) % 4).rev() {
        let _ = srv.queue(position, Some(Duration::from_millis(u64::from(position) * 100)));
    }
    match verdict {
        Ok(()) => {
            let _ = srv.accept(Cookie([7; 16]), now);
        }
        Err(r) => {
            assert!(!r.message.is_empty());
            srv.refuse(&r.message);
        }
    }
}

/// Drives the iperf3 server machine with `data` as an iperf3 client's bytes (after a valid
/// cookie and parameters when the first byte is even), accepting requests, attaching the
/// streams it expects and answering TEST_END with results.
pub fn iperf3_server(data: &[u8]) {
    let mut now = Duration::ZERO;
    let mut srv = Iperf3Server::new(now);
    let mut prefix = Vec::new();
    if data.first().is_some_and(|b| b % 2 == 0) {
        let p = br#"{"tcp":true,"time":1,"parallel":2,"len":1000}"#;
        prefix.extend_from_slice(&[b'a'; 36]);
        prefix.push(0);
        prefix.extend_from_slice(&(p.len() as u32).to_be_bytes());
        prefix.extend_from_slice(p);
    }
    for (k, chunk) in chunks(data).enumerate() {
        now += Duration::from_millis(u64::from(chunk.first().copied().unwrap_or(0)) * 40);
        let input = if k == 0 { [prefix.as_slice(), chunk].concat() } else { chunk.to_vec() };
        if srv.handle_input(&input, now).is_err() || srv.handle_timeout(now).is_err() {
            let _ = srv.poll_transmit();
            return;
        }
        while let Some(ev) = srv.poll_event() {
            match ev {
                Iperf3ServerEvent::TestRequested(Ok(_)) => {
                    let _ = srv.accept(now);
                    while srv.awaiting_streams() && srv.stream_arrived(now).is_ok() {}
                }
                Iperf3ServerEvent::TestEnd => {
                    let _ = srv.exchange_results("{}".into(), now);
                }
                _ => {}
            }
        }
        let _ = srv.poll_transmit();
    }
    let _ = srv.handle_eof();
}

/// Drives a doctor's state machine with `data` as the server's bytes (requesting an echo once
/// the environment arrived), and reads every chunk as a probe and as an echo.
pub fn doctor(data: &[u8]) {
    let mut now = Duration::ZERO;
    let mut doc = crate::doctor::DoctorConn::new("fuzz", now);
    let mut input = preamble(PROTOCOL_VERSION).to_vec();
    let cookie = Cookie([7; 16]);
    for chunk in chunks(data) {
        if let Some(echo) = crate::wire::echo_for(chunk, &cookie) {
            assert!(echo.len() <= chunk.len(), "an echo never amplifies");
        }
        let _ = crate::wire::decode_echo(chunk, &cookie);
        now += Duration::from_millis(u64::from(chunk.first().copied().unwrap_or(0)) * 40);
        input.extend_from_slice(chunk);
        if doc.handle_input(&input, now).is_err() || doc.handle_timeout(now).is_err() {
            return;
        }
        input.clear();
        while doc.poll_event().is_some() {}
        if doc.server_echoes() {
            let _ = doc.request_echo(40000, now);
        }
        let _ = doc.poll_transmit();
    }
    let _ = doc.handle_eof();
}

/// Drives a client state machine with `data` as the server's bytes (with a pre-shared key
/// when the input's length is odd, so challenges in the server's hello are answered).
pub fn client(data: &[u8]) {
    let mut now = Duration::ZERO;
    let Ok(mut cli) = ClientConn::new(TestSpec::default_tcp(), "fuzz", now) else { return };
    if data.len() % 2 == 1
        && let Ok(key) = Psk::new(FUZZ_KEY.to_vec())
    {
        cli = cli.with_psk(key, [5; NONCE_LEN]);
    }
    let mut input = preamble(PROTOCOL_VERSION).to_vec();
    for chunk in chunks(data) {
        now += Duration::from_millis(u64::from(chunk.first().copied().unwrap_or(0)) * 40);
        input.extend_from_slice(chunk);
        if cli.handle_input(&input, now).is_err() || cli.handle_timeout(now).is_err() {
            return;
        }
        input.clear();
        while let Some(ev) = cli.poll_event() {
            if ev == ClientEvent::Start {
                cli.stop(crate::wire::StopReason::TimeElapsed);
            }
        }
        let _ = cli.poll_transmit();
    }
    let _ = cli.handle_eof();
}

/// Decodes `data` as a receiver would a stream of UDP datagrams and checks the accounting
/// invariants after every one. The first byte picks the sequence width (bit 0: 64-bit) and
/// the tracker's window (bits 1-2: 64, 256, 4096 or 65536 sequence numbers); then each record
/// is one byte of arrival-time advance (in 10 µs steps) followed by a datagram header.
pub fn udp_receiver(data: &[u8]) {
    let Some((&mode, mut rest)) = data.split_first() else { return };
    let width = if mode & 1 == 1 { SeqWidth::Bits64 } else { SeqWidth::Bits32 };
    let mut tracker = SequenceTracker::with_window(64 << (2 * ((mode >> 1) & 3)));
    let mut jitter = JitterMeter::new();
    let mut unwrap = Unwrapper::new();
    let mut arrival = Duration::ZERO;
    let mut datagrams = 0u64;
    let mut before = tracker.snapshot();
    while let Some((&advance, tail)) = rest.split_first() {
        arrival += Duration::from_micros(u64::from(advance) * 10);
        let len = header_len(width).min(tail.len());
        let (datagram, tail) = tail.split_at(len);
        rest = tail;
        datagrams += 1;
        match DatagramHeader::decode(datagram, width) {
            None => tracker.on_malformed(),
            Some(mut h) => {
                if width == SeqWidth::Bits32 {
                    h.seq = unwrap.extend(h.seq as u32);
                }
                if let Arrival::InOrder { .. } = tracker.on_seq(h.seq) {
                    jitter.on_in_order(h.send_time, arrival);
                }
            }
        }
        let now = tracker.snapshot();
        check_udp_counts(&before, &now, datagrams);
        before = now;
    }
    check_udp_jitter(&jitter);
    for sent in [before.highest_seq, before.received, before.highest_seq.saturating_add(7), 0] {
        let s = tracker.settle(sent);
        assert!(s.lost <= sent && s.tail_lost <= s.lost);
        assert_eq!(s.inconsistent.is_some(), sent < before.highest_seq);
        assert_eq!(s.lost, sent.saturating_sub(s.received));
    }
}

fn check_udp_counts(before: &TrackerCounts, now: &TrackerCounts, datagrams: u64) {
    assert_eq!(now.highest_seq, now.received + now.lost);
    assert_eq!(now.received + now.duplicates + now.too_late + now.invalid, datagrams);
    assert!(now.out_of_order <= now.received);
    let d = now.since(before);
    assert_eq!(d.received + d.duplicates + d.too_late + d.invalid, 1);
    assert!(d.lost_change >= -1);
}

fn check_udp_jitter(jitter: &JitterMeter) {
    let s = jitter.summary();
    assert!(s.jitter_seconds.is_finite() && s.jitter_seconds >= 0.0);
    assert!(s.ipdv_p50 <= s.ipdv_p99 && s.ipdv_p99 <= s.ipdv_max);
    if let Some(max) = s.ipdv_max {
        assert!(s.jitter_seconds <= max.as_secs_f64() + 1e-9);
    }
}

/// Splits input into chunks whose lengths are taken from the input (1..=64 bytes).
fn chunks(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = data;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let n = (usize::from(rest[0]) % 64 + 1).min(rest.len());
        let (head, tail) = rest.split_at(n);
        rest = tail;
        Some(head)
    })
}
