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
        assert!(text.contains("Exit status"), "{text}");
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
