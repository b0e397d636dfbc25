//! iperf3's output flags on a linerate client (`-f`, `-V`, `--version`, `--timestamps`,
//! `--logfile`, `--forceflush`) against a linerate server on loopback, and the same flags on
//! a real iperf3 client against a linerate server (they are the client's own: nothing is
//! sent for them, and the test must still run).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{Server, bin, data_home, run, test_dir};

fn client(port: u16, extra: &[&str]) -> crate::util::Output {
    let port = port.to_string();
    let mut args = vec!["client", "127.0.0.1", "-p", &port, "--no-store"];
    args.extend_from_slice(extra);
    let out = run(&args, Duration::from_secs(30));
    assert_eq!(out.code, Some(0), "{args:?}: {}\n{}", out.stderr, out.stdout);
    out
}

/// The sender's summary line ("  sender   (client) ...").
fn sender_line(stdout: &str) -> &str {
    stdout.lines().find(|l| l.trim_start().starts_with("sender")).unwrap_or("")
}

#[test]
fn format_letters_choose_the_unit_of_every_rate_and_transfer() {
    let srv = Server::start(&[]);
    for (letter, rate_unit, bytes_unit) in [("m", "Mbit/s", "MiB"), ("K", "KiB/s", "KiB")] {
        let out = client(srv.port, &["-t", "1", "-i", "0.5", "-b", "200M", "-f", letter]);
        let line = sender_line(&out.stdout);
        assert!(line.contains(rate_unit) && line.contains(bytes_unit), "-f {letter}: {line}");
        let interval = out.stdout.lines().find(|l| l.starts_with("[   1]") && l.contains(" sec "));
        let interval = interval.unwrap_or_else(|| panic!("no interval row:\n{}", out.stdout));
        assert!(interval.contains(rate_unit), "-f {letter}: {interval}");
    }
    // Without -f, 200 Mbit/s shows in the unit that suits it, not in KiB/s.
    let line = sender_line(&client(srv.port, &["-t", "1", "-b", "200M"]).stdout).to_string();
    assert!(!line.contains("KiB/s"), "{line}");
    let out = run(&["client", "127.0.0.1", "-f", "x"], Duration::from_secs(10));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("-f") && out.stderr.contains("k m g t"), "{}", out.stderr);
}

#[test]
fn capital_v_is_verbose_and_version_stays_long() {
    let srv = Server::start(&[]);
    let out = client(srv.port, &["-t", "0.5", "-V"]);
    for needle in ["Streams (verbose):", "socket: 127.0.0.1:", "Environment (server)"] {
        assert!(out.stdout.contains(needle), "-V lacks {needle:?}:\n{}", out.stdout);
    }
    let plain = client(srv.port, &["-t", "0.5"]);
    assert!(!plain.stdout.contains("Streams (verbose):"), "{}", plain.stdout);
    for flag in ["--version", "-v"] {
        let version = run(&[flag], Duration::from_secs(10));
        assert_eq!(version.code, Some(0), "{flag}");
        assert!(version.stdout.starts_with("linerate "), "{flag}: {}", version.stdout);
    }
}

#[test]
fn timestamps_start_every_line_in_the_given_format() {
    let srv = Server::start(&[]);
    let out = client(srv.port, &["-t", "1", "--timestamps=<%Y> "]);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(lines.len() > 5, "{}", out.stdout);
    for l in lines {
        let year = l.strip_prefix('<').and_then(|r| r.get(..4)).unwrap_or("");
        assert!(year.chars().all(|c| c.is_ascii_digit()) && l[5..].starts_with("> "), "{l}");
    }
}

/// `--logfile` appends what stdout would have shown, line by line as the test runs (with
/// `--forceflush`, and without it too: linerate writes each line out whole).
#[test]
fn logfile_gets_the_lines_as_they_happen_and_is_appended_to() {
    let srv = Server::start(&[]);
    let dir = test_dir("logfile");
    let log = dir.join("out.log");
    let log_s = log.to_str().expect("path");
    let port = srv.port.to_string();
    let args = ["client", "127.0.0.1", "-p", &port, "--no-store", "-t", "3", "--logfile", log_s];
    let mut child = Command::new(bin())
        .env("XDG_DATA_HOME", data_home())
        .args(args)
        .arg("--forceflush")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen_live = false;
    while Instant::now() < deadline && child.try_wait().expect("wait").is_none() {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("0.00-1.00 sec") && !text.contains("Test complete.") {
            seen_live = true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let status = child.wait().expect("wait");
    assert!(status.success(), "{status}");
    assert!(seen_live, "the first interval line was in the file while the test ran");
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().expect("stdout"), &mut stdout)
        .expect("read");
    assert!(stdout.is_empty(), "stdout went to the file: {stdout}");
    let out = run(&args, Duration::from_secs(30));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let text = std::fs::read_to_string(&log).expect("log");
    assert_eq!(text.matches("Test complete.").count(), 2, "appended:\n{text}");
}

/// The same flags on iperf3 3.12's own client, against a linerate server.
#[test]
fn iperf3_clients_output_flags_leave_the_test_whole() {
    if !crate::interop_server::have_iperf3() {
        return;
    }
    let srv = Server::start(&[]);
    let log = test_dir("iperf3-logfile").join("iperf3.log");
    let out = Command::new("timeout")
        .args(["30", "iperf3", "-c", "127.0.0.1", "-p", &srv.port.to_string(), "-t", "1"])
        .args(["-V", "-f", "m", "--timestamps", "--forceflush", "--logfile"])
        .arg(&log)
        .output()
        .expect("run iperf3");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&log).expect("iperf3's log");
    assert!(text.contains("Mbits/sec") && text.contains("receiver"), "{text}");
    assert!(srv.wait_for_log(": done;", Duration::from_secs(5)), "{}", srv.log());
}

/// `linerate server --logfile F --timestamps=FORMAT`, as `iperf3 -s --logfile`: the server's
/// lines go to F, each stamped; a client's `-f`/`-V` on a server are refused by name.
#[test]
fn a_servers_log_goes_to_its_logfile_stamped() {
    let log = test_dir("server-logfile").join("server.log");
    let port = crate::util::free_port();
    let mut server = Command::new(bin())
        .env("XDG_DATA_HOME", data_home())
        .args(["server", "-p", &port.to_string(), "--timestamps=[%Y] ", "--logfile"])
        .arg(&log)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn server");
    let text = |needle: &str| {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let t = std::fs::read_to_string(&log).unwrap_or_default();
            if t.contains(needle) || Instant::now() > deadline {
                return t;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let listening = text("Server listening");
    if listening.contains("Server listening") {
        client(port, &["-t", "0.3"]);
    }
    let t = text(": done;");
    let _ = server.kill();
    let _ = server.wait();
    assert!(t.contains("Server listening") && t.contains(": done;"), "{t}");
    for l in t.lines() {
        let year = l.strip_prefix('[').and_then(|r| r.get(..4)).unwrap_or("");
        assert!(year.chars().all(|c| c.is_ascii_digit()) && l[5..].starts_with("] "), "{l}");
    }
    let out = run(&["-s", "-V"], Duration::from_secs(10));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("-V"), "{}", out.stderr);
}

/// A fleet prints its own tables: one client's output flags are refused by name, not ignored.
#[test]
fn a_fleet_refuses_one_clients_output_flags() {
    for (flag, needle) in [(&["-V"][..], "-f or -V"), (&["--logfile", "x.log"][..], "--logfile")] {
        let mut args = vec!["fleet", "127.0.0.1", "127.0.0.2", "--no-store"];
        args.extend_from_slice(flag);
        let out = run(&args, Duration::from_secs(10));
        assert_eq!(out.code, Some(2), "{flag:?}: {}", out.stderr);
        assert!(out.stderr.contains(needle), "{flag:?}: {}", out.stderr);
    }
}
