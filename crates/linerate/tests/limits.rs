//! The server's operator limits, end to end: an over-limit request is refused before the
//! test starts, with a sentence the client prints (native) or iperf3's own error (iperf3
//! clients); the config file's errors point at line and column. Loopback only.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{Server, client_json, run};

fn client(port: u16, extra: &[&str]) -> crate::util::Output {
    let port = port.to_string();
    let mut args = vec!["client", "127.0.0.1", "-p", &port];
    args.extend_from_slice(extra);
    run(&args, Duration::from_secs(30))
}

#[test]
fn over_limit_native_requests_are_refused_with_the_flag_named() {
    let srv = Server::start(&[
        "--max-streams",
        "8",
        "--max-duration",
        "2",
        "--allow-directions",
        "send,bidir",
        "--max-bitrate",
        "100M",
    ]);
    let cases: [(&[&str], &str); 4] = [
        (&["-P", "9", "-b", "1M"], "server allows at most 8 streams (--max-streams)"),
        (&["-t", "3", "-b", "1M"], "(--max-duration)"),
        (&["-R", "-b", "1M"], "does not allow reverse (-R, server sends) tests"),
        (&["-t", "1"], "an unpaced test"),
    ];
    for (args, want) in cases {
        let t0 = Instant::now();
        let out = client(srv.port, args);
        assert_eq!(out.code, Some(3), "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(want), "{args:?}: {}", out.stderr);
        assert!(t0.elapsed() < Duration::from_secs(3), "{args:?} refused quickly");
    }
    assert!(srv.wait_for_log("refused: server allows at most 8 streams", Duration::from_secs(2)));
    let doc = client_json(srv.port, &["-P", "8", "-t", "0.3", "-b", "10M"]);
    assert_eq!(doc["record"]["outcome"]["status"], "completed", "within every limit");
}

/// Runs `iperf3 -c` for 1 s against `port`, asserts it failed and returns what it printed.
pub(crate) fn iperf3_refused(port: u16, args: &[&str]) -> String {
    let out = Command::new("timeout")
        .args(["20", "iperf3", "-c", "127.0.0.1", "-p", &port.to_string(), "-t", "1"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run iperf3");
    assert_ne!(out.status.code(), Some(0), "{args:?} refused");
    String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr)
}

#[test]
fn over_limit_iperf3_requests_get_iperf3_errors() {
    if !crate::interop_server::have_iperf3() {
        return;
    }
    let srv = Server::start(&["--max-streams", "2", "--max-tests", "1"]);
    let iperf3 = |args: &[&str]| iperf3_refused(srv.port, args);
    // iperf3's own number for this would print iperf3's maximum (128), not ours: the server
    // sends "unable to create a new test" with EPERM, and its log names the limit.
    let text = iperf3(&["-P", "3"]);
    assert!(text.contains("unable to create a new test: Operation not permitted"), "{text}");
    assert!(srv.wait_for_log("at most 2 streams (--max-streams)", Duration::from_secs(3)));
    let port = srv.port.to_string();
    let running = std::thread::spawn(move || {
        run(&["client", "127.0.0.1", "-p", &port, "-t", "2"], Duration::from_secs(20))
    });
    assert!(srv.wait_for_log("accepted", Duration::from_secs(5)), "{}", srv.log());
    let text = iperf3(&[]);
    assert!(text.contains("the server is busy running a test"), "ACCESS_DENIED: {text}");
    assert_eq!(running.join().expect("native").code, Some(0));
}

#[test]
fn max_tests_refuses_a_second_concurrent_test_as_busy() {
    let srv = Server::start(&["--max-tests", "1"]);
    let port = srv.port.to_string();
    let first = std::thread::spawn(move || {
        run(&["client", "127.0.0.1", "-p", &port, "-t", "2"], Duration::from_secs(20))
    });
    assert!(srv.wait_for_log("accepted", Duration::from_secs(5)), "{}", srv.log());
    let out = client(srv.port, &["-t", "1"]);
    assert_eq!(out.code, Some(3));
    assert!(out.stderr.contains("at most 1 test(s) at once (--max-tests)"), "{}", out.stderr);
    assert_eq!(first.join().expect("first").code, Some(0), "the running test is unharmed");
    let doc = client_json(srv.port, &["-t", "0.3"]);
    assert_eq!(doc["record"]["outcome"]["status"], "completed", "the slot was given back");
}

#[test]
fn max_bytes_cuts_a_running_test() {
    let srv = Server::start(&["--max-bytes", "20M"]);
    let out = client(srv.port, &["-t", "10", "-b", "200M"]);
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    assert!(out.stderr.contains("(--max-bytes)"), "{}", out.stderr);
    let over = client(srv.port, &["-n", "30M"]);
    assert!(over.stderr.contains("at most 20971520 bytes per test"), "{}", over.stderr);
}

#[test]
fn config_file_sets_limits_and_its_errors_point_at_the_line() {
    let dir = crate::util::data_home();
    std::fs::create_dir_all(&dir).expect("dir");
    let good = dir.join("server-good.toml");
    std::fs::write(&good, "# operator settings\nmax_streams = 2\nallow_protocols = [\"tcp\"]\n")
        .expect("write");
    let srv = Server::start(&["--config", good.to_str().expect("utf-8")]);
    let out = client(srv.port, &["-P", "3", "-t", "1"]);
    assert!(out.stderr.contains("at most 2 streams"), "{}", out.stderr);
    let out = client(srv.port, &["-u", "-t", "1"]);
    assert!(out.stderr.contains("does not allow UDP"), "{}", out.stderr);
    let flag_wins =
        Server::start(&["--config", good.to_str().expect("utf-8"), "--max-streams", "4"]);
    let doc = client_json(flag_wins.port, &["-P", "3", "-t", "0.3"]);
    assert_eq!(doc["record"]["outcome"]["status"], "completed");

    let bad = dir.join("server-bad.toml");
    std::fs::write(&bad, "max_tests = 2\nmax_duration = \"forever\"\n").expect("write");
    let out = run(
        &["server", "-p", "0", "--config", bad.to_str().expect("utf-8")],
        Duration::from_secs(5),
    );
    assert_eq!(out.code, Some(2), "usage error: {}", out.stderr);
    assert!(out.stderr.contains("server-bad.toml:2:16"), "line:column: {}", out.stderr);
    assert!(out.stderr.contains("max_duration"), "{}", out.stderr);
}

#[test]
fn exclusive_server_queues_tests_with_their_place_and_refuses_when_full() {
    let srv = Server::start(&["--exclusive", "--queue", "1"]);
    let port = srv.port.to_string();
    let spawn = |t: &'static str| {
        let port = port.clone();
        std::thread::spawn(move || {
            run(&["client", "127.0.0.1", "-p", &port, "-t", t, "-i", "0"], Duration::from_secs(30))
        })
    };
    let first = spawn("2");
    assert!(srv.wait_for_log("accepted", Duration::from_secs(5)), "{}", srv.log());
    let t0 = Instant::now();
    let second = spawn("0.3");
    std::thread::sleep(Duration::from_millis(700));
    let third = client(srv.port, &["-t", "0.3"]);
    assert_eq!(third.code, Some(3), "the queue of 1 is full");
    assert!(third.stderr.contains("queue of 1 is full (--queue)"), "{}", third.stderr);
    let second = second.join().expect("second");
    assert_eq!(second.code, Some(0), "{}", second.stderr);
    assert!(
        second
            .stdout
            .contains("Queued: the server runs one test at a time; position 1, wait about"),
        "{}",
        second.stdout
    );
    assert!(t0.elapsed() >= Duration::from_millis(1200), "it waited for the first test");
    assert_eq!(first.join().expect("first").code, Some(0), "the running test was not disturbed");
    let log = srv.log();
    assert!(log.find("[test 1]").expect("1") < log.find("[test 2]").expect("2"), "{log}");
}

#[test]
fn total_bitrate_counts_every_running_test() {
    let srv = Server::start(&["--max-total-bitrate", "10M"]);
    let port = srv.port.to_string();
    let first = std::thread::spawn(move || {
        run(&["client", "127.0.0.1", "-p", &port, "-t", "2", "-b", "6M"], Duration::from_secs(20))
    });
    assert!(srv.wait_for_log("accepted", Duration::from_secs(5)), "{}", srv.log());
    let out = client(srv.port, &["-t", "0.3", "-b", "6M"]);
    assert_eq!(out.code, Some(3));
    assert!(
        out.stderr.contains("(--max-total-bitrate) and 6.00 Mbit/s is in use"),
        "{}",
        out.stderr
    );
    let fits = client_json(srv.port, &["-t", "0.3", "-b", "4M"]);
    assert_eq!(fits["record"]["outcome"]["status"], "completed", "4 + 6 fit in 10");
    assert_eq!(first.join().expect("first").code, Some(0));
    let later = client_json(srv.port, &["-t", "0.3", "-b", "6M"]);
    assert_eq!(later["record"]["outcome"]["status"], "completed", "the rate was given back");
}
