//! Failures a user meets: each ends within a bounded time with a one-line error that says
//! what happened and what to try, keeping whatever partial results exist. Loopback only.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{Server, bin, bytes, client_json, free_port, run};

#[test]
fn refused_connection_says_what_to_start() {
    let port = free_port().to_string();
    let out = run(&["client", "127.0.0.1", "-p", &port, "-t", "1"], Duration::from_secs(10));
    assert_eq!(out.code, Some(3));
    assert!(out.stderr.contains("connection refused"), "{}", out.stderr);
    assert!(out.stderr.contains(&format!("linerate server -p {port}")), "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "one line: {}", out.stderr);
    assert!(out.elapsed < Duration::from_secs(3));
}

#[test]
fn unanswered_connect_times_out_with_hint() {
    // A listener with a full accept queue drops further SYNs: a local "black hole".
    let sock =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    sock.bind(&"127.0.0.1:0".parse::<std::net::SocketAddr>().expect("addr").into()).expect("bind");
    sock.listen(0).expect("listen");
    let addr = sock.local_addr().expect("addr").as_socket().expect("inet");
    let _fill: Vec<TcpStream> = (0..2)
        .filter_map(|_| TcpStream::connect_timeout(&addr, Duration::from_millis(300)).ok())
        .collect();
    let port = addr.port().to_string();
    let out = run(
        &["client", "127.0.0.1", "-p", &port, "--connect-timeout", "1"],
        Duration::from_secs(10),
    );
    assert_eq!(out.code, Some(3));
    assert!(out.stderr.contains("--connect-timeout"), "{}", out.stderr);
    assert!(out.elapsed < Duration::from_secs(4), "took {:?}", out.elapsed);
}

#[test]
fn silent_peer_is_not_a_linerate_server() {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port().to_string();
    let t = std::thread::spawn(move || {
        let (s, _) = l.accept().expect("accept");
        std::thread::sleep(Duration::from_secs(8));
        drop(s);
    });
    let out = run(&["client", "127.0.0.1", "-p", &port], Duration::from_secs(15));
    assert_eq!(out.code, Some(3));
    assert!(
        out.stderr.contains("hello") && out.stderr.contains("linerate server?"),
        "{}",
        out.stderr
    );
    assert!(out.elapsed < Duration::from_secs(7), "took {:?}", out.elapsed);
    drop(t);
}

#[test]
fn other_protocol_on_the_port_is_named() {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port().to_string();
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().expect("accept");
        let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
        std::thread::sleep(Duration::from_secs(2));
    });
    let out = run(&["client", "127.0.0.1", "-p", &port], Duration::from_secs(10));
    assert_eq!(out.code, Some(3));
    assert!(
        out.stderr.contains("not the linerate protocol") && out.stderr.contains("-p"),
        "{}",
        out.stderr
    );
}

#[test]
fn server_killed_mid_test_fails_fast_with_partial_results() {
    let mut srv = Server::start(&[]);
    let port = srv.port.to_string();
    let client = std::thread::spawn(move || {
        run(&["client", "127.0.0.1", "-p", &port, "-t", "30", "-J"], Duration::from_secs(40))
    });
    std::thread::sleep(Duration::from_millis(1500));
    srv.child.kill().expect("kill -9");
    let killed = Instant::now();
    let out = client.join().expect("client");
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    assert!(
        killed.elapsed() < Duration::from_secs(5),
        "client noticed after {:?}",
        killed.elapsed()
    );
    let doc = out.json();
    assert_eq!(doc["record"]["outcome"]["status"], "failed");
    assert!(bytes(&doc, "client", "sender") > 0, "partial figures kept");
    assert!(out.stderr.contains("closed") || out.stderr.contains("reset"), "{}", out.stderr);
}

#[test]
fn server_shutdown_tells_running_clients_why() {
    let mut srv = Server::start(&[]);
    let port = srv.port.to_string();
    let client = std::thread::spawn(move || {
        run(&["client", "127.0.0.1", "-p", &port, "-t", "30", "-R"], Duration::from_secs(40))
    });
    assert!(srv.wait_for_log("accepted", Duration::from_secs(5)));
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: plain kill(2) on our own child's pid.
    unsafe { libc::kill(srv.child.id() as i32, libc::SIGTERM) };
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = srv.child.try_wait().expect("wait") {
            break s;
        }
        assert!(t0.elapsed() < Duration::from_secs(6), "server did not exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "server exit status {status}");
    let out = client.join().expect("client");
    assert_eq!(out.code, Some(3));
    assert!(out.stderr.contains("shutting down (SIGTERM)"), "{}", out.stderr);
    assert!(out.stdout.contains("partial"), "partial summary printed: {}", out.stdout);
}

#[test]
fn garbage_and_silent_connections_do_not_block_tests() {
    let srv = Server::start(&[]);
    let addr = format!("127.0.0.1:{}", srv.port);
    let _silent = TcpStream::connect(&addr).expect("silent connection");
    let mut junk = TcpStream::connect(&addr).expect("junk");
    junk.write_all(b"GET / HTTP/1.0\r\n\r\n").expect("write");
    // A valid preamble and then a 2 GiB length prefix: refused before any allocation.
    let mut huge = TcpStream::connect(&addr).expect("huge");
    huge.write_all(b"\x89LRC\r\n\x1a\n\x00\x00\x00\x01\x7f\xff\xff\xf0").expect("write");
    let doc = client_json(srv.port, &["-t", "0.5"]);
    assert_eq!(doc["record"]["outcome"]["status"], "completed");
    huge.set_read_timeout(Some(Duration::from_secs(3))).expect("timeout");
    let mut buf = Vec::new();
    let _ = huge.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    assert!(text.contains("exceeds the cap"), "server explains the refusal: {text:?}");
    assert!(srv.wait_for_log("not the linerate protocol", Duration::from_secs(3)), "{}", srv.log());
    assert!(srv.wait_for_log("sent no hello within 2 s", Duration::from_secs(5)), "{}", srv.log());
}

/// Ctrl-C: the test stops early, both ends' figures are exchanged, printed and stored as
/// interrupted, and the exit status is 130 (not an error line).
#[test]
fn ctrl_c_stops_early_and_keeps_both_ends_results() {
    let srv = Server::start(&[]);
    let db = crate::util::test_dir("ctrl-c").join("h.sqlite");
    let child = Command::new(bin())
        .env("XDG_DATA_HOME", crate::util::data_home())
        .args(["client", "127.0.0.1", "-p", &srv.port.to_string(), "-t", "30", "-J", "--db"])
        .arg(&db)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // Once the test runs (a new history calibrates the loopback placement first).
    assert!(srv.wait_for_log("accepted", Duration::from_secs(30)), "{}", srv.log());
    std::thread::sleep(Duration::from_millis(1000));
    // SAFETY: plain kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let t0 = Instant::now();
    let out = child.wait_with_output().expect("wait");
    assert!(t0.elapsed() < Duration::from_secs(5));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted by SIGINT"), "{stderr}");
    assert!(!stderr.contains("linerate: error"), "an interruption is not an error: {stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(doc["record"]["outcome"]["status"], "interrupted");
    assert!(bytes(&doc, "server_results", "receiver") > 0, "server figures exchanged");
    let store = linerate::store::Store::open(&db).expect("history");
    let rows = store.list(&linerate::store::ListFilter::default()).expect("list");
    assert_eq!(rows.iter().map(|r| r.outcome.as_str()).collect::<Vec<_>>(), ["interrupted"]);
}

#[test]
fn vanished_client_frees_its_test_and_the_server_keeps_serving() {
    let srv = Server::start(&[]);
    let mut child = Command::new(bin())
        .env("XDG_DATA_HOME", crate::util::data_home())
        .args(["client", "127.0.0.1", "-p", &srv.port.to_string(), "-t", "30", "-R"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    assert!(srv.wait_for_log("accepted", Duration::from_secs(5)));
    std::thread::sleep(Duration::from_millis(700));
    child.kill().expect("kill -9 the client");
    let _ = child.wait();
    assert!(
        srv.wait_for_log("[test 1] 127.0.0.1", Duration::from_secs(3))
            && srv.wait_for_log("FAILED", Duration::from_secs(3)),
        "server noticed the vanished client: {}",
        srv.log()
    );
    let doc = client_json(srv.port, &["-t", "0.5"]);
    assert_eq!(doc["record"]["outcome"]["status"], "completed");
}

#[test]
fn second_server_on_a_busy_port_says_so() {
    let srv = Server::start(&[]);
    let port = srv.port.to_string();
    let out = run(&["server", "-p", &port], Duration::from_secs(10));
    assert_eq!(out.code, Some(3));
    assert!(out.stderr.contains("cannot listen") && out.stderr.contains("-p"), "{}", out.stderr);
}
