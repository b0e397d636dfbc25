//! The attacks of issue 16 that the server's budgets answer, each against a server under a
//! 2 GiB address-space limit: one address taking every slot, a trickle holding a test, held
//! doctor sessions, tests asking for too much memory, and a test accepted but never started
//! raising its address's connection cap. Each asserts that the server stays up, that a
//! legitimate test from another loopback address succeeds, and that the server's RSS stays
//! within the budget docs/SECURITY.md states; figures are printed as `FIGURE name = value`.
//! Loopback only (sources in 127.0.0.0/8); every loop is bounded in count and time.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use linerate_proto::wire::{
    Capability, Cookie, DataHello, FrameDecoder, Message, PROTOCOL_VERSION, encode_frame, preamble,
};
use linerate_proto::{EndCondition, TestSpec};

use crate::abuse::{figure, raise_fd_limit, status_field};
use crate::memory::{alive, limited_server, next_message};
use crate::util::{Output, Server, bin, data_home, exclusive, run};

const MIB: u64 = 1024;

fn ip(c: u8, d: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, c, d))
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// A TCP connection to the server from `src`, a loopback address of its own.
pub(crate) fn connect_from(src: IpAddr, port: u16) -> TcpStream {
    let s =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    s.bind(&SocketAddr::new(src, 0).into()).expect("bind a loopback source");
    s.connect(&SocketAddr::from(([127, 0, 0, 1], port)).into()).expect("connect");
    s.into()
}

/// `linerate client` from `src` against `port`.
fn client_from(port: u16, src: IpAddr, extra: &[&str]) -> Output {
    let (port, src) = (port.to_string(), src.to_string());
    let mut args = vec!["client", "127.0.0.1", "-p", &port, "-B", &src];
    args.extend_from_slice(extra);
    run(&args, secs(30))
}

/// A legitimate short test from `src`: it must complete.
fn legitimate(port: u16, src: IpAddr) -> Result<(), String> {
    let out = client_from(port, src, &["-t", "0.5", "-J"]);
    match out.code {
        Some(0) if out.json()["record"]["outcome"]["status"] == "completed" => Ok(()),
        _ => Err(format!("legitimate test from {src} failed: {}", out.stderr)),
    }
}

/// The server's RSS growth over `base` KiB: printed, and asserted under `budget_mib`.
fn assert_rss(srv: &Server, base: u64, budget_mib: u64, name: &str) {
    let grew = status_field(srv.child.id(), "VmRSS:").saturating_sub(base);
    figure(name, format!("{:.1}", grew as f64 / MIB as f64));
    assert!(grew < budget_mib * MIB, "RSS grew {grew} KiB, budget {budget_mib} MiB");
}

/// Checks that the server survived and still serves another address.
fn assert_serves(srv: &mut Server) {
    assert!(alive(srv), "the server is up");
    legitimate(srv.port, ip(0, 2)).unwrap_or_else(|e| panic!("{e}\nserver: {}", srv.log()));
}

/// Child processes, killed on drop.
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The greeting of a raw native client followed by `request`.
fn greeting(request: &Message) -> Vec<u8> {
    let mut out = preamble(PROTOCOL_VERSION).to_vec();
    out.extend(encode_frame(&Message::Hello {
        software: "attacker".into(),
        capabilities: Capability::ALL.iter().map(|c| c.as_str().to_string()).collect(),
        auth_nonce: None,
    }));
    out.extend(encode_frame(request));
    out
}

/// A raw client from `src` whose test was accepted: its control connection, the decoder of
/// the server's frames and the test's cookie. It opens no data connection.
pub(crate) fn accepted(
    src: IpAddr,
    port: u16,
    spec: TestSpec,
) -> (TcpStream, FrameDecoder, Cookie) {
    let mut ctl = connect_from(src, port);
    ctl.set_read_timeout(Some(secs(10))).expect("timeout");
    ctl.write_all(&greeting(&Message::TestRequest { spec })).expect("request");
    let mut d = FrameDecoder::new();
    let mut first = [0u8; 12];
    ctl.read_exact(&mut first).expect("preamble");
    d.push(&first);
    d.poll_preamble().expect("preamble");
    let cookie = loop {
        match next_message(&mut ctl, &mut d) {
            Message::TestAccepted { cookie } => break Cookie::from_hex(&cookie).expect("cookie"),
            Message::Refused { reason } => panic!("refused: {reason}"),
            _ => {}
        }
    };
    (ctl, d, cookie)
}

/// Issue 47 item 7: addresses that each pay the progress floor (8 kbit/s) filled all 16
/// slots, and legitimate tests got 0 of 2. Now a running test that moves less than 1 Mbit/s
/// gives its slot to a newcomer from a network holding fewer such slots: 24 addresses of one
/// /24, each keeping a `-b 16k` test running (restarted at once when it ends), and 10 tests
/// from another network are served.
#[test]
fn addresses_paying_the_floor_cannot_keep_another_network_out() {
    let _serial = exclusive();
    let mut srv = limited_server(&[]);
    let port = srv.port.to_string();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let started = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let attackers: Vec<_> = (1..=24u8)
        .map(|d| {
            let (port, stop, started) = (port.clone(), stop.clone(), started.clone());
            std::thread::spawn(move || {
                use std::sync::atomic::Ordering::SeqCst;
                let src = ip(47, d).to_string();
                let t0 = Instant::now();
                while !stop.load(SeqCst) && t0.elapsed() < secs(90) {
                    let child = Command::new(bin())
                        .env("XDG_DATA_HOME", data_home())
                        .args(["client", "127.0.0.1", "-p", &port, "-B", &src])
                        .args(["-t", "120", "-b", "16k", "-l", "1000"])
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .spawn()
                        .expect("spawn an attacking client");
                    started.fetch_add(1, SeqCst);
                    let mut child = Children(vec![child]);
                    while !stop.load(SeqCst) && child.0[0].try_wait().ok().flatten().is_none() {
                        sleep(Duration::from_millis(50));
                    }
                    drop(child);
                    sleep(Duration::from_millis(100));
                }
            })
        })
        .collect();
    // Let the attackers take every slot, and run long enough to have a rate.
    let deadline = Instant::now() + secs(30);
    while srv.log().matches(": accepted:").count() < 16 {
        assert!(Instant::now() < deadline, "the attackers did not fill the slots: {}", srv.log());
        sleep(Duration::from_millis(50));
    }
    sleep(Duration::from_millis(1500));
    let ok = (2..12)
        .filter(|&d| legitimate(srv.port, ip(0, d)).inspect_err(|e| eprintln!("{e}")).is_ok())
        .count();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    attackers.into_iter().for_each(|t| t.join().expect("attacker"));
    figure("floor_rate_crowd_other_network_served_of_10", ok);
    figure("floor_rate_crowd_clients_started", started.load(std::sync::atomic::Ordering::SeqCst));
    assert!(alive(&mut srv), "the server is up");
    assert!(ok >= 9, "{ok} of 10 tests from another network were served: {}", srv.log());
    assert!(srv.log().contains("moved less than 1 Mbit/s"), "{}", srv.log());
}

/// Issue 16: 16 `linerate client HOST -t 3600 -b 8 -l 1` from one address held every slot
/// and 0 of 10 clients from other addresses were served. Now the address holds its share
/// (a quarter of --max-tests: 4) and the ten are served, all at once.
#[test]
fn one_address_holds_at_most_its_share_of_the_slots() {
    let _serial = exclusive();
    // --min-rate 0: the 8 bit/s clients are accepted, so the share alone is tested.
    let mut srv = limited_server(&["--min-rate", "0"]);
    let base = status_field(srv.child.id(), "VmRSS:");
    let port = srv.port.to_string();
    let spawn = || {
        Command::new(bin())
            .env("XDG_DATA_HOME", data_home())
            .args(["client", "127.0.0.1", "-p", &port, "-B", "127.0.0.1"])
            .args(["-t", "3600", "-b", "8", "-l", "1"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn an attacking client")
    };
    let _attack = Children((0..16).map(|_| spawn()).collect());
    let deadline = Instant::now() + secs(20);
    let count = |needle: &str| srv.log().matches(needle).count();
    while count(": accepted:") + count("(--max-tests-per-address)") < 16 {
        assert!(Instant::now() < deadline, "not every attacker was answered: {}", srv.log());
        sleep(Duration::from_millis(50));
    }
    let held = count(": accepted:");
    figure("share_attack_tests_held_by_one_address_of_16", held);
    assert_eq!(held, 4, "{}", srv.log());
    let others: Vec<_> = (2..12)
        .map(|d| {
            let port = srv.port;
            std::thread::spawn(move || legitimate(port, ip(0, d)))
        })
        .collect();
    let failed: Vec<String> =
        others.into_iter().filter_map(|t| t.join().expect("client thread").err()).collect();
    figure("share_attack_other_addresses_served_of_10", 10 - failed.len());
    assert!(failed.is_empty(), "{failed:?}\nserver: {}", srv.log());
    assert_rss(&srv, base, 64, "share_attack_server_rss_growth_mib");
    assert_serves(&mut srv);
}

/// A client that asks for 1 Mbit/s and sends a byte every 250 ms used to hold its slot for
/// as long as it asked (the idle timeout only fires at zero bytes); the 8 bit/s
/// client is now refused at once.
#[test]
fn a_trickle_cannot_satisfy_the_progress_deadline() {
    let mut srv = limited_server(&["--idle-timeout", "2"]);
    let base = status_field(srv.child.id(), "VmRSS:");
    let out = client_from(srv.port, ip(0, 3), &["-t", "3600", "-b", "8", "-l", "1"]);
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    assert!(out.stderr.contains("at least 8.00 kbit/s (--min-rate)"), "{}", out.stderr);
    let spec = TestSpec {
        end: EndCondition::Duration { duration_ms: 60_000 },
        block_bytes: 1024,
        bits_per_second: 1_000_000,
        ..TestSpec::default_tcp()
    };
    let (mut ctl, mut d, cookie) = accepted(ip(0, 3), srv.port, spec);
    let mut data = connect_from(ip(0, 3), srv.port);
    data.write_all(&DataHello { cookie, stream_id: 1 }.encode()).expect("data hello");
    while next_message(&mut ctl, &mut d) != Message::Start {}
    let t0 = Instant::now();
    let mut cut = None;
    while t0.elapsed() < secs(15) {
        let _ = data.write_all(b"x");
        if srv.log().contains("(--min-rate, averaged over --idle-timeout)") {
            cut = Some(t0.elapsed());
            break;
        }
        sleep(Duration::from_millis(250));
    }
    let cut = cut.unwrap_or_else(|| panic!("the trickle was never cut: {}", srv.log()));
    figure("trickle_32_bit_s_cut_after_s_with_idle_timeout_2", format!("{:.2}", cut.as_secs_f64()));
    assert!(cut < secs(5), "one 2 s window and a little more: {cut:?}");
    assert_rss(&srv, base, 64, "trickle_server_rss_growth_mib");
    assert_serves(&mut srv);
}

/// Issue 16: 400 held doctor sessions from 40 addresses cost 802 threads and 805 fds, and a
/// legitimate test failed with 1024 fds. Doctors now hold slots like tests, at most a
/// quarter of them.
#[test]
fn held_doctor_sessions_take_neither_threads_nor_the_slots_of_tests() {
    let _serial = exclusive();
    let fds = raise_fd_limit();
    assert!(fds >= 1024, "this test needs 1024 open files, have {fds}");
    let mut srv = limited_server(&[]);
    legitimate(srv.port, ip(0, 2)).expect("warm-up test");
    sleep(Duration::from_millis(300));
    let pid = srv.child.id();
    let open_fds = || std::fs::read_dir(format!("/proc/{pid}/fd")).expect("fds").count();
    let (threads0, fds0) = (status_field(pid, "Threads:"), open_fds());
    let base = status_field(pid, "VmRSS:");
    let hello = greeting(&Message::EnvironmentRequest);
    let held: Vec<TcpStream> = (0..400)
        .map(|i| {
            let mut s = connect_from(ip(3, 1 + (i / 10) as u8), srv.port);
            s.write_all(&hello).expect("doctor request");
            s
        })
        .collect();
    sleep(Duration::from_millis(1500));
    let threads = status_field(pid, "Threads:").saturating_sub(threads0);
    let fds = open_fds().saturating_sub(fds0);
    figure("doctor_flood_400_server_extra_threads", threads);
    figure("doctor_flood_400_server_extra_fds", fds);
    assert!(threads <= 16, "{threads} more threads while 400 doctor sessions are held");
    assert!(fds <= 32, "{fds} more fds while 400 doctor sessions are held");
    assert_serves(&mut srv);
    let told = held
        .iter()
        .filter(|s| {
            let mut s = *s;
            s.set_read_timeout(Some(Duration::from_millis(20))).expect("timeout");
            let mut got = Vec::new();
            let _ = s.read_to_end(&mut got);
            String::from_utf8_lossy(&got).contains("doctor session(s) at once")
        })
        .count();
    figure("doctor_flood_400_told_the_server_is_busy", told);
    assert!(told >= 300, "refused doctors are told why: {told}");
    assert_rss(&srv, base, 64, "doctor_flood_server_rss_growth_mib");
}

/// Issue 16: `-R -l 64M -P 16` held 1.05 GB per test. Blocks and memory per test are capped
/// by the operator, refused with a sentence (iperf3 clients: iperf3's own error), and four
/// tests at the cap from four addresses stay within max_tests × max_test_memory.
#[test]
fn memory_per_test_is_capped_by_the_operator() {
    let _serial = exclusive();
    // A thread (and buffer) per stream: the layout whose memory grows with the streams.
    // The pooled layout's buffers are per worker (covered by the loopback tests).
    let limits = ["--max-tests", "4", "--max-test-memory", "24M", "--max-block", "512K"];
    let limits = [&limits[..], &["--threads", "stream"]].concat();
    let mut srv = limited_server(&limits);
    legitimate(srv.port, ip(0, 2)).expect("warm-up test");
    let base = status_field(srv.child.id(), "VmRSS:");
    for d in 1..=4 {
        let out = client_from(srv.port, ip(4, d), &["-R", "-l", "64M", "-P", "16", "-t", "2"]);
        assert_eq!(out.code, Some(3), "{}", out.stderr);
        let want = "server allows blocks of at most 512 KiB (--max-block), asked for -l 64 MiB";
        assert!(out.stderr.contains(want), "{}", out.stderr);
    }
    let out = client_from(srv.port, ip(4, 5), &["-R", "-P", "40", "-l", "512K", "-t", "2"]);
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    let want = "at most 24 MiB of memory per test (--max-test-memory); 40 streams with their \
                buffers need 30 MiB";
    assert!(out.stderr.contains(want), "{}", out.stderr);
    if crate::interop_server::have_iperf3() {
        let iperf3 = |args: &[&str]| crate::limits::iperf3_refused(srv.port, args);
        // iperf3's numbers for these would print iperf3's own maxima, not this server's.
        let text = iperf3(&["-l", "1M"]);
        assert!(text.contains("unable to create a new test: Operation not permitted"), "{text}");
        let text = iperf3(&["-P", "40", "-l", "512K"]);
        assert!(text.contains("unable to create a new test: Cannot allocate memory"), "{text}");
    }
    // Four tests at the cap (32 streams × (512 KiB + 256 KiB) = 24 MiB), the server
    // sending, from four addresses at once.
    let pid = srv.child.id();
    let tests: Vec<_> = (1..=4)
        .map(|d| {
            let port = srv.port;
            std::thread::spawn(move || {
                let args = ["-R", "-P", "32", "-l", "512K", "-b", "1M", "-t", "3", "-J"];
                client_from(port, ip(5, d), &args)
            })
        })
        .collect();
    let mut peak = base;
    while tests.iter().any(|t| !t.is_finished()) {
        peak = peak.max(status_field(pid, "VmRSS:"));
        sleep(Duration::from_millis(50));
    }
    for t in tests {
        let out = t.join().expect("client");
        assert_eq!(out.code, Some(0), "{}\nserver: {}", out.stderr, srv.log());
    }
    let grew = peak.saturating_sub(base);
    figure("memory_cap_4_tests_at_24_mib_server_peak_rss_growth_mib", grew / MIB);
    assert!(grew < 4 * 24 * MIB, "peak RSS grew {grew} KiB, budget 4 × 24 MiB");
    assert_serves(&mut srv);
}

/// The per-address connection cap used to rise by every data connection an accepted test
/// declared, for as long as the test waited for them: a test that never starts kept it
/// raised. Now each declared connection lends one admission over the cap, once.
#[test]
fn a_test_that_never_starts_lends_its_address_its_connections_only_once() {
    let mut srv = limited_server(&["--max-client-connections", "4"]);
    let base = status_field(srv.child.id(), "VmRSS:");
    let src = ip(6, 1);
    let spec = TestSpec {
        streams: 8,
        end: EndCondition::Duration { duration_ms: 5000 },
        bits_per_second: 1_000_000,
        ..TestSpec::default_tcp()
    };
    let _never_started = accepted(src, srv.port, spec);
    let round = || {
        let conns: Vec<TcpStream> = (0..12).map(|_| connect_from(src, srv.port)).collect();
        sleep(Duration::from_millis(600));
        let closed = conns
            .iter()
            .filter(|s| {
                s.set_nonblocking(true).expect("nonblocking");
                let r = s.peek(&mut [0u8; 1]);
                !matches!(r, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
            })
            .count();
        drop(conns);
        sleep(Duration::from_millis(300));
        closed
    };
    let (first, second) = (round(), round());
    figure("never_started_test_first_round_closed_of_12", first);
    figure("never_started_test_second_round_closed_of_12", second);
    assert_eq!(first, 0, "4 under the cap and 8 lent by the test: {}", srv.log());
    assert_eq!(second, 8, "the 8 were lent once: {}", srv.log());
    assert_rss(&srv, base, 64, "never_started_server_rss_growth_mib");
    assert_serves(&mut srv);
}
