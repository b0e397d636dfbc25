//! Who may use a server: a pre-shared key (HMAC challenge), an allow-list of networks, and
//! reflection safety (UDP test traffic only to the address that completed the handshake).
//! Loopback only; the "other" addresses are 127.0.0.x aliases of the same host.

use std::io::Read;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use linerate_proto::client::{ClientConn, ClientEvent};
use linerate_proto::wire::DataHello;
use linerate_proto::{Direction, Machine, Protocol, TestSpec};

use crate::util::{Server, client_json, data_home, run};

const KEY: &str = "correct horse battery staple 42";

fn key_file(name: &str, text: &str) -> String {
    let dir = data_home();
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write key");
    path.to_str().expect("utf-8").to_string()
}

#[test]
fn psk_server_serves_only_clients_that_know_the_key() {
    let good = key_file("psk-good", &format!("{KEY}\n"));
    let bad = key_file("psk-bad", "another key of enough length\n");
    let srv = Server::start(&["--psk-file", &good]);
    let doc = client_json(srv.port, &["-t", "0.3", "--psk-file", &good]);
    assert_eq!(doc["record"]["outcome"]["status"], "completed");
    let port = srv.port.to_string();
    let client = |extra: &[&str]| {
        let mut args = vec!["client", "127.0.0.1", "-p", &port, "-t", "0.3"];
        args.extend_from_slice(extra);
        run(&args, Duration::from_secs(15))
    };
    let wrong = client(&["--psk-file", &bad]);
    assert_eq!(wrong.code, Some(3));
    assert!(wrong.stderr.contains("authentication failed"), "{}", wrong.stderr);
    let none = client(&[]);
    assert_eq!(none.code, Some(3));
    assert!(
        none.stderr.contains("requires a pre-shared key") && none.stderr.contains("--psk-file")
    );
    if crate::interop_server::have_iperf3() {
        let out = std::process::Command::new("timeout")
            .args(["20", "iperf3", "-c", "127.0.0.1", "-p", &port, "-t", "1"])
            .output()
            .expect("iperf3");
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(text.contains("busy"), "iperf3 is refused: {text}");
    }
    assert!(srv.wait_for_log("authentication failed", Duration::from_secs(2)), "{}", srv.log());
    assert!(!srv.log().contains("horse"), "the key never reaches the log");
    assert_eq!(srv.log().matches("accepted").count(), 1, "only the keyed test ran");
}

#[test]
fn short_key_files_are_refused_at_start() {
    let short = key_file("psk-short", "tiny\n");
    let out = run(&["server", "-p", "0", "--psk-file", &short], Duration::from_secs(5));
    assert_eq!(out.code, Some(2));
    assert!(out.stderr.contains("at least 16"), "{}", out.stderr);
}

#[test]
fn allow_list_closes_other_networks_unread() {
    let srv = Server::start(&["--allow", "127.0.0.2/32,::1"]);
    let port = srv.port.to_string();
    let out = run(&["client", "127.0.0.1", "-p", &port, "-t", "0.3"], Duration::from_secs(15));
    assert_eq!(out.code, Some(3), "127.0.0.1 is not allowed");
    assert!(srv.wait_for_log("not in the allow-list (--allow)", Duration::from_secs(2)));
    let ok = run(
        &["client", "127.0.0.1", "-p", &port, "-B", "127.0.0.2", "-t", "0.3"],
        Duration::from_secs(15),
    );
    assert_eq!(ok.code, Some(0), "127.0.0.2 is allowed: {}", ok.stderr);
}

/// Plays a native client with the protocol crate over a real socket until the server
/// accepts a reverse UDP test; returns the control connection (kept open) and the cookie.
fn accepted_udp_download(port: u16) -> (TcpStream, linerate_proto::wire::Cookie) {
    use std::io::Write;
    let mut spec = TestSpec::default_tcp();
    spec.protocol = Protocol::Udp;
    spec.direction = Direction::Download;
    spec.block_bytes = 1200;
    spec.bits_per_second = 1_000_000;
    let t0 = Instant::now();
    let mut conn = ClientConn::new(spec, "reflection-test", t0.elapsed()).expect("spec");
    let mut ctrl = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    ctrl.set_read_timeout(Some(Duration::from_millis(200))).expect("timeout");
    let mut buf = [0u8; 4096];
    while t0.elapsed() < Duration::from_secs(5) {
        if let Some(b) = conn.poll_transmit() {
            ctrl.write_all(&b).expect("write");
        }
        if let Ok(n) = ctrl.read(&mut buf) {
            conn.handle_input(&buf[..n], t0.elapsed()).expect("server speaks linerate");
        }
        while let Some(ev) = conn.poll_event() {
            if let ClientEvent::Accepted { cookie, .. } = ev {
                return (ctrl, cookie);
            }
        }
    }
    panic!("the server did not accept the test");
}

#[test]
fn udp_traffic_goes_only_to_the_address_that_did_the_handshake() {
    let srv = Server::start(&[]);
    let (_ctrl, cookie) = accepted_udp_download(srv.port);
    let server = SocketAddr::from(([127, 0, 0, 1], srv.port));
    let hello = DataHello { cookie, stream_id: 1 }.encode();
    // A third party that learned the cookie asks for the stream from another address.
    let victim = UdpSocket::bind("127.0.0.3:0").expect("bind 127.0.0.3");
    victim.set_read_timeout(Some(Duration::from_millis(1500))).expect("timeout");
    victim.send_to(&hello, server).expect("send");
    let mut buf = [0u8; 2048];
    assert!(victim.recv_from(&mut buf).is_err(), "nothing is sent to an unverified address");
    assert!(
        srv.wait_for_log("not the client's address; ignored", Duration::from_secs(2)),
        "{}",
        srv.log()
    );
    // The client's own address gets the echo and then the traffic.
    let own = UdpSocket::bind("127.0.0.1:0").expect("bind");
    own.set_read_timeout(Some(Duration::from_secs(2))).expect("timeout");
    own.send_to(&hello, server).expect("send");
    let (n, _) = own.recv_from(&mut buf).expect("echo to the handshaken address");
    assert_eq!(&buf[..n], &hello[..]);
    // An iperf3-style UDP connect from an address with no test gets no reply either.
    let stranger = UdpSocket::bind("127.0.0.4:0").expect("bind");
    stranger.set_read_timeout(Some(Duration::from_millis(700))).expect("timeout");
    stranger.send_to(&linerate_proto::iperf3::UDP_CONNECT, server).expect("send");
    assert!(stranger.recv_from(&mut buf).is_err(), "no iperf3 reply without a control session");
}

#[test]
fn doctor_answers_a_server_that_requires_the_key() {
    let good = key_file("psk-doctor", &format!("{KEY}\n"));
    let srv = Server::start(&["--psk-file", &good]);
    let port = srv.port.to_string();
    let doctor = |extra: &[&str]| {
        let mut args = vec!["doctor", "127.0.0.1", "-p", &port, "-J"];
        args.extend_from_slice(extra);
        run(&args, Duration::from_secs(30))
    };
    let keyed = doctor(&["--psk-file", &good]);
    assert_eq!(keyed.code, Some(0), "{}", keyed.stderr);
    let remote = &keyed.json()["remote"];
    assert!(remote["environment"]["value"]["kernel"]["value"].is_string(), "{remote}");
    let unkeyed = doctor(&[]);
    assert_eq!(unkeyed.code, Some(3), "{}", unkeyed.stdout);
    let said = unkeyed.stdout + &unkeyed.stderr;
    assert!(said.contains("requires a pre-shared key") && said.contains("--psk-file"), "{said}");
}
