//! Memory a peer can make the server hold, measured on a server under a 2 GiB address-space
//! limit (as in issue 16): many streams sampled at a tiny interval, and hostile 16 MiB
//! results frames after acceptance. Each test asserts its bound and prints its figures
//! (`FIGURE name = value`, see docs/SECURITY.md). Loopback only; every loop is bounded.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::thread::sleep;
use std::time::{Duration, Instant};

use linerate_proto::wire::{DataHello, FrameDecoder, MAX_FRAME_RESULTS, Message};
use linerate_proto::{EndCondition, TestSpec};

use crate::abuse::{figure, status_field};
use crate::util::{Server, client_json, run};

const MIB: u64 = 1024;

/// Starts a server and caps its address space at 2 GiB (the limit the attacks were measured
/// against: past it, an allocation fails and the process aborts).
pub(crate) fn limited_server(extra: &[&str]) -> Server {
    let srv = Server::start(extra);
    let pid = srv.child.id().to_string();
    let ok = std::process::Command::new("prlimit")
        .args(["--pid", &pid, "--as=2147483648"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "prlimit could not cap the server's address space");
    srv
}

pub(crate) fn alive(srv: &mut Server) -> bool {
    srv.child.try_wait().ok().flatten().is_none()
}

#[test]
fn short_intervals_are_refused_by_default_naming_the_flag() {
    let srv = Server::start(&[]);
    let port = srv.port.to_string();
    let out = run(&["client", "127.0.0.1", "-p", &port, "-t", "0.3", "-i", "0.05"], secs(20));
    assert_ne!(out.code, Some(0));
    assert!(out.stderr.contains("at least 0.1 s (--min-interval)"), "{}", out.stderr);
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// 128 streams at 8 kbit/s each sampled every 10 ms (the protocol's floor, which the operator
/// allowed) for 10 s: 128,000 stream samples that used to be kept. The server's memory must
/// stop growing once every stream's log is full.
#[test]
fn many_streams_at_a_tiny_interval_keep_server_memory_flat() {
    let _serial = crate::util::exclusive();
    let mut srv = limited_server(&["--min-interval", "0.01"]);
    let pid = srv.child.id();
    client_json(srv.port, &["-t", "0.2"]);
    sleep(Duration::from_millis(300));
    let base = status_field(pid, "VmRSS:");
    let port = srv.port.to_string();
    let attack = std::thread::spawn(move || {
        let args = ["-P", "128", "-i", "0.01", "-b", "8k", "-l", "1K", "-t", "10", "-J"];
        let mut all = vec!["client", "127.0.0.1", "-p", &port];
        all.extend(args);
        run(&all, secs(60))
    });
    assert!(srv.wait_for_log("accepted", secs(10)), "{}", srv.log());
    let started = Instant::now();
    let (mut at_3s, mut last, mut peak) = (None, base, base);
    while !attack.is_finished() && started.elapsed() < secs(40) {
        let rss = status_field(pid, "VmRSS:");
        peak = peak.max(rss);
        if started.elapsed() >= secs(3) && at_3s.is_none() {
            at_3s = Some(rss);
        }
        if started.elapsed() <= Duration::from_millis(9500) {
            last = rss;
        }
        sleep(Duration::from_millis(100));
    }
    let out = attack.join().expect("client");
    assert_eq!(out.code, Some(0), "{}\nserver: {}", out.stderr, srv.log());
    let at_3s = at_3s.expect("ran 3 s");
    let steady = last.saturating_sub(at_3s);
    figure("interval_attack_server_rss_growth_3s_to_9.5s_kib", steady);
    figure("interval_attack_server_rss_peak_growth_mib", (peak - base) / MIB);
    assert!(steady < 4 * MIB, "RSS grew {steady} KiB in 6.5 s of sampling");
    assert!(peak - base < 96 * MIB, "RSS peaked {} KiB over the baseline", peak - base);
    let doc = out.json();
    let server = &doc["record"]["server_results"];
    let most = server["streams"]
        .as_array()
        .expect("streams")
        .iter()
        .map(|s| s["intervals"].as_array().map_or(0, Vec::len));
    let most = most.max().expect("128 streams");
    let merged = server["intervals_per_sample"].as_u64().unwrap_or(1);
    figure("interval_attack_server_samples_per_stream", most);
    figure("interval_attack_server_intervals_per_sample", merged);
    let cap = linerate_proto::samples::samples_per_stream(128);
    assert!(most <= cap && merged >= 8, "{most} samples of {merged} intervals");
    assert!(alive(&mut srv), "the server is up");
    let doc = client_json(srv.port, &["-t", "0.3"]);
    assert_eq!(doc["record"]["outcome"]["status"], "completed");
}

/// A raw client whose test was accepted and started: the control connection (the server's
/// frames so far read) and the data connection.
struct Accepted {
    ctl: TcpStream,
    _data: TcpStream,
}

pub(crate) fn next_message(s: &mut TcpStream, d: &mut FrameDecoder) -> Message {
    let mut buf = [0u8; 4096];
    loop {
        if let Some(m) = d.poll_frame().expect("server frames decode") {
            return m;
        }
        let n = s.read(&mut buf).expect("read");
        assert!(n > 0, "server closed");
        d.push(&buf[..n]);
    }
}

fn accepted_test(port: u16) -> Accepted {
    let spec = TestSpec {
        end: EndCondition::Duration { duration_ms: 5000 },
        block_bytes: 1024,
        bits_per_second: 8000,
        ..TestSpec::default_tcp()
    };
    let localhost = std::net::IpAddr::from([127, 0, 0, 1]);
    let (mut ctl, mut d, cookie) = crate::attacks::accepted(localhost, port, spec);
    let mut data = TcpStream::connect(("127.0.0.1", port)).expect("data");
    data.write_all(&DataHello { cookie, stream_id: 1 }.encode()).expect("data hello");
    while next_message(&mut ctl, &mut d) != Message::Start {}
    Accepted { ctl, _data: data }
}

/// A 16 MiB results frame: `results` holding `head`, then `item` repeated to fill the cap,
/// then `tail`.
fn hostile_results(head: &str, item: &str, tail: &str) -> Vec<u8> {
    let head = format!(r#"{{"type":"results","results":{head}"#);
    let tail = format!("{tail}}}");
    let n = (MAX_FRAME_RESULTS as usize - head.len() - tail.len()) / (item.len() + 1);
    let items = format!("{item},").repeat(n);
    let body = [head.as_bytes(), items.trim_end_matches(',').as_bytes(), tail.as_bytes()].concat();
    [(body.len() as u32).to_be_bytes().as_slice(), &body].concat()
}

/// Four tests, each accepted and then sent a hostile 16 MiB results frame: the issue's list of
/// empty strings (which used to peak at 591 MB and hold 154 MB) and streams of minimal samples
/// (the shape that reaches the decoding budget).
#[test]
fn hostile_results_frames_after_acceptance_cost_bounded_memory() {
    let _serial = crate::util::exclusive();
    let mut srv = limited_server(&[]);
    let pid = srv.child.id();
    client_json(srv.port, &["-t", "0.2"]);
    sleep(Duration::from_millis(300));
    let (hwm0, rss0) = (status_field(pid, "VmHWM:"), status_field(pid, "VmRSS:"));
    let strings = hostile_results(
        r#"{"software":"x","streams":[],"cost":{"window_us":0,"foreign_top":["#,
        r#""""#,
        "]}}",
    );
    let stream = format!(
        r#"{{"id":1,"flow":"client_to_server","role":"sender","bytes":0,"omitted_bytes":0,"duration_us":0,"omitted_us":0,"socket":{{}},"retransmits":null,"error":null,"intervals":[{}]}}"#,
        r#"{"start_us":0,"end_us":0,"bytes":0,"omitted":false},"#.repeat(40_000).trim_end_matches(',')
    );
    let samples = hostile_results(r#"{"software":"x","streams":["#, &stream, "]}");
    let frames = [(&strings, "results.cost.foreign_top"), (&samples, "more than 33554432 bytes")];
    let mut peaks = Vec::new();
    for (round, (frame, says)) in frames.iter().cycle().take(4).enumerate() {
        let mut t = accepted_test(srv.port);
        t.ctl.write_all(frame).expect("the frame is read whole");
        let deadline = Instant::now() + secs(15);
        while srv.log().matches(says).count() < round / 2 + 1 && Instant::now() < deadline {
            sleep(Duration::from_millis(20));
        }
        assert!(srv.log().contains(says), "round {round}: {}", srv.log());
        peaks.push(status_field(pid, "VmHWM:").saturating_sub(hwm0));
    }
    sleep(Duration::from_millis(500));
    let held = status_field(pid, "VmRSS:").saturating_sub(rss0);
    let peak = *peaks.iter().max().expect("rounds");
    figure("hostile_results_frame_server_peak_growth_mib", peak / MIB);
    figure("hostile_results_frames_server_rss_held_after_kib", held);
    eprintln!("VmHWM growth after each round (KiB): {peaks:?}");
    assert!(peak < 64 * MIB, "peak grew {peak} KiB (goal: 16 MiB frame + 48 MiB decoding)");
    assert!(held < 16 * MIB, "held {held} KiB after the tests ended");
    assert!(alive(&mut srv), "the server is up");
    let doc = client_json(srv.port, &["-t", "0.3"]);
    assert_eq!(doc["record"]["outcome"]["status"], "completed");
}
