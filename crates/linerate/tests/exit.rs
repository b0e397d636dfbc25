//! Exit statuses, one per way a command ends, and the failure kind a failed run's record
//! keeps: 0 success, 1 a gate failed, 2 usage or input error, 3 the test could not run or
//! failed (130, interrupted, is in `faults.rs`, with Ctrl-C). Loopback only; every run is
//! bounded.

use std::time::Duration;

use crate::util::{Server, free_port, run, test_dir};

#[test]
fn a_gate_that_fails_exits_1_after_the_results() {
    let srv = Server::start(&[]);
    let port = srv.port.to_string();
    let args = ["client", "127.0.0.1", "-p", &port, "-t", "0.3", "--no-store"];
    let out = run(&[&args[..], &["--fail-below", "100T"]].concat(), Duration::from_secs(30));
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(out.stdout.contains("Test complete."), "{}", out.stdout);
    assert!(
        out.stderr.contains("gate failed") && out.stderr.contains("--fail-below"),
        "{}",
        out.stderr
    );
    let passed = run(&[&args[..], &["--fail-below", "1M"]].concat(), Duration::from_secs(30));
    assert_eq!(passed.code, Some(0), "{}", passed.stderr);
}

/// Issue 46: what `--every` exits with is what README.md says: the schedule runs to its end
/// whatever fails, then exits with its last failed run's status — 3 for a test that failed,
/// 1 for a gate.
#[test]
fn a_schedule_exits_with_its_last_failures_status_after_every_run() {
    let closed = free_port().to_string();
    let db = test_dir("every-exit").join("h.sqlite");
    let _ = std::fs::remove_file(&db);
    let db = db.to_str().expect("path").to_string();
    let every = ["--every", "0.3", "--count", "2", "-t", "0.2", "--db", &db];
    let out = run(
        &[&["client", "127.0.0.1", "-p", &closed][..], &every].concat(),
        Duration::from_secs(30),
    );
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    assert!(out.stderr.contains("2 of 2 scheduled runs failed"), "{}", out.stderr);
    let srv = Server::start(&[]);
    let port = srv.port.to_string();
    let gated =
        [&["client", "127.0.0.1", "-p", &port, "--fail-below", "100T"][..], &every].concat();
    let out = run(&gated, Duration::from_secs(30));
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert_eq!(out.stdout.matches("Test complete.").count(), 2, "{}", out.stdout);
}

#[test]
fn usage_and_input_errors_exit_2() {
    let d = test_dir("exit-usage");
    let db = d.join("h.sqlite");
    let db_s = db.to_string_lossy().into_owned();
    let missing = d.join("no-such-campaign.toml").to_string_lossy().into_owned();
    let broken = d.join("broken.toml");
    std::fs::write(&broken, "[tiers.a]\nhost = \n").expect("write");
    let broken = broken.to_string_lossy().into_owned();
    // A history with one run, so an unknown id is unknown in an existing history.
    let out = run(
        &["client", "127.0.0.1", "-p", &free_port().to_string(), "--db", &db_s],
        Duration::from_secs(10),
    );
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    let cases: [(&[&str], &str); 6] = [
        (&["client", "127.0.0.1", "--no-such-flag"], "--no-such-flag"),
        (&["campaign", &missing], "cannot read the campaign file"),
        (&["campaign", &broken, "--no-store"], "broken.toml:"),
        (&["show", "99", "--db", &db_s], "no run 99"),
        (&["compare", "99", "1", "--db", &db_s], "no run 99"),
        (&["report", "m7", "--db", &db_s], "no group 7"),
    ];
    for (args, needle) in cases {
        let out = run(args, Duration::from_secs(10));
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(needle), "{args:?}: {}", out.stderr);
    }
}

#[test]
fn a_refused_connection_exits_3_and_the_record_says_network() {
    let port = free_port().to_string();
    let out =
        run(&["client", "127.0.0.1", "-p", &port, "-J", "--no-store"], Duration::from_secs(10));
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    let outcome = &out.json()["record"]["outcome"];
    assert_eq!(
        (outcome["status"].as_str(), outcome["kind"].as_str()),
        (Some("failed"), Some("network"))
    );
    assert!(
        outcome["error"].as_str().is_some_and(|e| e.contains("connection refused")),
        "{outcome}"
    );
}

#[test]
fn a_test_the_server_refuses_exits_3_and_the_record_says_refused() {
    let srv = Server::start(&["--max-streams", "1"]);
    let port = srv.port.to_string();
    let out = run(
        &["client", "127.0.0.1", "-p", &port, "-P", "2", "-t", "0.3", "-J", "--no-store"],
        Duration::from_secs(10),
    );
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    let outcome = &out.json()["record"]["outcome"];
    assert_eq!(outcome["kind"], "refused", "{outcome}");
    assert!(out.stderr.contains("--max-streams"), "{}", out.stderr);
}

#[test]
fn a_matrix_with_failed_runs_exits_3_with_its_table() {
    let srv = Server::start(&["--max-streams", "1"]);
    let port = srv.port.to_string();
    let args = ["matrix", "127.0.0.1", "-p", &port, "-t", "0.2", "-i", "0", "--no-store"];
    let out = run(
        &[&args[..], &["--parallel", "1,2", "--repeat", "1"]].concat(),
        Duration::from_secs(60),
    );
    assert_eq!(out.code, Some(3), "{}\n{}", out.stderr, out.stdout);
    assert!(out.stdout.contains("P=1"), "the table is printed first: {}", out.stdout);
    assert!(out.stderr.contains("1 of 2 runs failed"), "{}", out.stderr);
}

#[test]
fn help_and_man_page_list_the_exit_statuses() {
    let help = run(&["--help"], Duration::from_secs(10));
    assert_eq!(help.code, Some(0));
    let man = run(&["generate", "man"], Duration::from_secs(10));
    assert_eq!(man.code, Some(0));
    for text in [&help.stdout, &man.stdout] {
        // "EXIT STATUS" in the man page, as man pages name their sections.
        assert!(text.to_lowercase().contains("exit status"), "{text}");
        for code in [
            "0    success",
            "1    a gate failed",
            "2    usage",
            "3    the test",
            "130  interrupted",
        ] {
            assert!(text.contains(code), "{code:?} missing:\n{text}");
        }
    }
}

/// Runs `linerate <args>` with its standard output a pipe whose reader is already closed, as
/// `| head -1` leaves it once it has its line; bounded by `limit`.
fn into_closed_pipe(args: &[&str], limit: Duration) -> (Option<i32>, String) {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two new descriptors into `fds`, each then owned by one OwnedFd.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(rc, 0, "pipe2: {}", std::io::Error::last_os_error());
    let (reader, writer) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(reader);
    let mut child = std::process::Command::new(crate::util::bin())
        .env("XDG_DATA_HOME", crate::util::data_home())
        .args(args)
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn linerate");
    let start = std::time::Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A reader that closed its end of the pipe (`linerate generate bash | head -1`) ends the
/// output quietly with 0, as ripgrep does: `generate` panicked (exit 101) and `show -J` said
/// "Broken pipe" (exit 3).
#[test]
fn a_closed_stdout_ends_quietly_with_0() {
    let d = test_dir("closed-pipe");
    let db = d.join("h.sqlite").to_string_lossy().into_owned();
    let srv = Server::start(&[]);
    let port = srv.port.to_string();
    let stored = run(
        &["client", "127.0.0.1", "-p", &port, "-t", "0.2", "--db", &db],
        Duration::from_secs(20),
    );
    assert_eq!(stored.code, Some(0), "{}", stored.stderr);
    let cases: [&[&str]; 14] = [
        &["generate", "bash"],
        &["generate", "zsh"],
        &["generate", "fish"],
        &["generate", "man"],
        &["show", "last", "-J", "--db", &db],
        &["show", "last", "--db", &db],
        &["history", "-J", "--db", &db],
        &["history", "--db", &db],
        &["report", "last", "--format", "json", "--db", &db],
        &["report", "last", "--format", "html", "--db", &db],
        &["report", "last", "--format", "csv", "--db", &db],
        &["report", "last", "--db", &db],
        &["--help"],
        &["client", "127.0.0.1", "-p", &port, "-t", "0.2", "-J", "--no-store"],
    ];
    for args in cases {
        let (code, stderr) = into_closed_pipe(args, Duration::from_secs(20));
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
        assert!(stderr.is_empty(), "{args:?} ends quietly: {stderr}");
    }
}

/// A usage error found once the client starts (`-6` to an IPv4 address) exits 2 and is not
/// stored: it was kept in the history as a failed run, though no test ran.
#[test]
fn a_usage_error_is_not_stored_as_a_run() {
    let d = test_dir("usage-unstored");
    let db = d.join("h.sqlite");
    let db_s = db.to_string_lossy().into_owned();
    let port = free_port().to_string();
    let out =
        run(&["client", "127.0.0.1", "-6", "-p", &port, "--db", &db_s], Duration::from_secs(10));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("-4/-6"), "{}", out.stderr);
    assert!(!out.stderr.contains("recorded as run"), "{}", out.stderr);
    let store = linerate::store::Store::open(&db).expect("history");
    let runs = store.list(&linerate::store::ListFilter::default()).expect("list");
    assert!(runs.is_empty(), "nothing stored: {} run(s)", runs.len());
}
