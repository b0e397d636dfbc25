//! The history database through the command line: runs are stored by default, listed,
//! shown, compared; a database linerate cannot use never costs a run its results.

use std::time::Duration;

use serde_json::Value;

use crate::util::{Output, Server, run};

fn db_path(name: &str) -> String {
    let dir = crate::util::data_home().join("store-tests");
    std::fs::create_dir_all(&dir).expect("dir");
    let p = dir.join(format!("{name}.sqlite"));
    let _ = std::fs::remove_file(&p);
    p.to_string_lossy().into_owned()
}

fn ok(args: &[&str]) -> Output {
    let out = run(args, Duration::from_secs(120));
    assert_eq!(out.code, Some(0), "{args:?}: {}\n{}", out.stderr, out.stdout);
    out
}

#[test]
fn a_run_is_stored_listed_and_shown_as_it_was() {
    let srv = Server::start(&[]);
    let (port, db) = (srv.port.to_string(), db_path("show"));
    let out = ok(&[
        "client",
        "127.0.0.1",
        "-p",
        &port,
        "-t",
        "0.5",
        "--db",
        &db,
        "--label",
        "before",
        "-J",
    ]);
    let original: Value = out.json();
    let list = ok(&["history", "--db", &db, "--label", "before", "-J"]).json();
    let rows = list.as_array().expect("rows");
    assert_eq!(rows.len(), 1, "{list}");
    assert_eq!(rows[0]["labels"][0], "before");
    let id = rows[0]["id"].as_i64().expect("id").to_string();
    let shown = ok(&["show", &id, "--db", &db, "-J"]).json();
    assert_eq!(shown["record"], original["record"], "the stored record is the run's record");
    let text = ok(&["show", &id, "--db", &db]).stdout;
    assert!(text.contains("Test: TCP upload"), "{text}");
    let none = ok(&["history", "--db", &db, "--label", "after", "-J"]).json();
    assert_eq!(none.as_array().map(Vec::len), Some(0));
    let target = format!("127.0.0.1:{port}");
    let by_target = ok(&["history", "--db", &db, "--target", &target, "-J"]).json();
    assert_eq!(by_target.as_array().map(Vec::len), Some(1), "{by_target}");
    let other = ok(&["history", "--db", &db, "--target", "127.0.0.1:1", "-J"]).json();
    assert_eq!(other.as_array().map(Vec::len), Some(0), "{other}");
}

/// A one-cell matrix (P=1, three runs) paced at `rate`, stored in `db`.
fn paced_matrix(port: &str, db: &str, rate: &str, secs: &str, extra: &[&str]) -> Output {
    let mut args = vec!["matrix", "127.0.0.1", "-p", port, "--parallel", "1", "--repeat", "3"];
    args.extend(["-t", secs, "-i", "0", "-b", rate, "--db", db]);
    args.extend_from_slice(extra);
    run(&args, Duration::from_secs(60))
}

/// The `mN` a matrix run says it was stored as.
fn stored_matrix(out: &Output) -> String {
    let line = out.stdout.lines().find_map(|l| l.strip_prefix("Stored as matrix "));
    let line = line.unwrap_or_else(|| panic!("not stored: {}", out.stdout));
    line.split(' ').next().expect("id").to_string()
}

#[test]
fn compare_finds_a_real_difference_and_not_a_false_one() {
    let _serial = crate::util::exclusive();
    let srv = Server::start(&[]);
    let (port, db) = (srv.port.to_string(), db_path("compare"));
    let matrix = |rate: &str| {
        let out = paced_matrix(&port, &db, rate, "0.5", &[]);
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        stored_matrix(&out)
    };
    let (a, b, c) = (matrix("100M"), matrix("200M"), matrix("100M"));
    let diff = ok(&["compare", &a, &b, "--db", &db, "-J"]).json();
    let r = &diff[0]["result"];
    assert_eq!(r["significant"], true, "{diff}");
    let change = r["change_percent"].as_f64().expect("change");
    assert!((95.0..=105.0).contains(&change), "-b 200M vs 100M is +100%: {change}");
    let same = ok(&["compare", &a, &c, "--db", &db, "-J"]).json();
    let r = &same[0]["result"];
    let change = r["change_percent"].as_f64().expect("change").abs();
    // Equal settings: no significant difference, or (at the 5 % false-positive rate of any
    // test at p < 0.05) one too small to matter.
    assert!(r["significant"] == false || change < 1.0, "{same}");
    let text = ok(&["compare", &a, &b, "--db", &db]).stdout;
    assert!(text.contains("P=1") && text.contains("significant"), "{text}");
}

/// A test that could not run is recorded as a failure, not announced as a result, and `show`
/// says why it failed instead of judging figures it never had.
#[test]
fn a_failed_test_is_recorded_and_shown_as_a_failure() {
    let db = db_path("failed");
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr();
    let port = port.expect("addr").port().to_string();
    let out =
        run(&["client", "127.0.0.1", "-p", &port, "-t", "1", "--db", &db], Duration::from_secs(20));
    assert_ne!(out.code, Some(0), "{}", out.stderr);
    assert!(!out.stdout.contains("Stored as run"), "not a result: {}", out.stdout);
    assert!(
        out.stdout.contains("The failure is recorded as run 1 (linerate show 1;"),
        "{}",
        out.stdout
    );
    let shown = ok(&["show", "1", "--db", &db]).stdout;
    assert!(
        shown.contains("Verdict: n/a: the test failed: cannot connect to 127.0.0.1:"),
        "{shown}"
    );
    assert!(!shown.contains("path-bound"), "no verdict without figures: {shown}");
    assert!(shown.contains("Test FAILED: nothing was measured."), "{shown}");
    let doc = ok(&["show", "1", "--db", &db, "-J"]).json();
    assert_eq!(doc["summary"]["verdicts"], serde_json::json!([]), "{doc}");
    // `history --failed` lists it with its error; `--completed` leaves it out.
    let failures = ok(&["history", "--db", &db, "--failed"]).stdout;
    assert!(failures.contains("failed: cannot connect to 127.0.0.1:"), "{failures}");
    let rows = ok(&["history", "--db", &db, "--failed", "-J"]).json();
    assert_eq!(rows[0]["outcome"], "failed", "{rows}");
    assert!(rows[0]["error"].as_str().is_some_and(|e| e.contains("connection refused")), "{rows}");
    let none = ok(&["history", "--db", &db, "--completed", "-J"]).json();
    assert_eq!(none, serde_json::json!([]), "{none}");
}

/// `compare` says what it could not compare and when A and B ran different tests, and names
/// them as the user does.
#[test]
fn compare_names_what_it_did_not_compare_and_settings_that_differ() {
    let _serial = crate::util::exclusive();
    let srv = Server::start(&[]);
    let (port, db) = (srv.port.to_string(), db_path("compare-honest"));
    let quick = ["-t", "0.3", "-i", "0", "--db", &db];
    let client = |extra: &[&str]| {
        ok(&[&["client", "127.0.0.1", "-p", &port][..], &quick[..], extra].concat());
    };
    client(&[]);
    client(&["-R", "-P", "2"]);
    let text = ok(&["compare", "1", "2", "--db", &db]).stdout;
    assert!(text.contains("Settings differ, A → B"), "{text}");
    assert!(text.contains("direction upload → download"), "{text}");
    assert!(text.contains("streams 1 → 2"), "{text}");
    let matrix = |streams: &str| {
        let args = ["matrix", "127.0.0.1", "-p", &port, "--parallel", streams, "--repeat", "1"];
        stored_matrix(&ok(&[&args[..], &quick[..]].concat()))
    };
    let (a, b) = (matrix("1,2"), matrix("2,3"));
    let text = ok(&["compare", &a, &b, "--db", &db]).stdout;
    let row = |cell: &str| text.lines().find(|l| l.starts_with(cell)).unwrap_or("").to_string();
    assert!(row("P=2 ").contains("B is") || row("P=2 ").contains("B equals"), "{text}");
    assert!(row("P=1 ").contains("not compared: only A has this cell"), "{text}");
    assert!(row("P=3 ").contains("not compared: only B has this cell"), "{text}");
    assert!(!text.contains("Settings differ"), "same settings but the axis: {text}");
    let rows = ok(&["compare", &a, &b, "--db", &db, "-J"]).json();
    let only: Vec<(&str, &str)> = rows
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(|r| Some((r["cell"].as_str()?, r["only_in"].as_str()?)))
        .collect();
    assert_eq!(only, [("P=1", "A"), ("P=3", "B")], "{rows}");
    let none = run(&["compare", &a, "1", "--db", &db], Duration::from_secs(20));
    assert_ne!(none.code, Some(0));
    assert!(none.stderr.contains(&format!("{a} and 1 have no cell in common")), "{}", none.stderr);
    assert!(!none.stderr.contains("Group(") && !none.stderr.contains("Run("), "{}", none.stderr);
}

#[test]
fn an_unusable_database_costs_a_warning_not_the_results() {
    let srv = Server::start(&[]);
    let (port, db) = (srv.port.to_string(), db_path("garbage"));
    std::fs::write(&db, b"this is not a database, but someone's notes").expect("write");
    let before = std::fs::read(&db).expect("read");
    let out = ok(&["client", "127.0.0.1", "-p", &port, "-t", "0.3", "--db", &db]);
    assert!(out.stdout.contains("Test complete."), "{}", out.stdout);
    assert!(out.stderr.contains("not a SQLite database"), "{}", out.stderr);
    assert_eq!(std::fs::read(&db).expect("read"), before, "the file was left untouched");
    let out = run(&["history", "--db", &db], Duration::from_secs(10));
    assert_eq!(out.code, Some(1));
    assert!(out.stderr.contains("left untouched"), "{}", out.stderr);
}

#[test]
fn no_store_stores_nothing() {
    let srv = Server::start(&[]);
    let port = srv.port.to_string();
    let db = db_path("nostore");
    let out = ok(&["client", "127.0.0.1", "-p", &port, "-t", "0.3", "--no-store"]);
    assert!(!out.stdout.contains("Stored as run"), "{}", out.stdout);
    let out = ok(&["client", "127.0.0.1", "-p", &port, "-t", "0.3", "--db", &db]);
    assert!(out.stdout.contains("Stored as run 1 "), "{}", out.stdout);
}

#[test]
fn gates_fail_below_a_rate_and_on_a_regression_against_a_baseline() {
    let _serial = crate::util::exclusive();
    let srv = Server::start(&[]);
    let (port, db) = (srv.port.to_string(), db_path("gates"));
    let out = run(
        &["client", "127.0.0.1", "-p", &port, "-t", "0.3", "--db", &db, "--fail-below", "1T"],
        Duration::from_secs(30),
    );
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(
        out.stderr.contains("gate failed") && out.stderr.contains("below --fail-below 1.00 Tbit/s"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.contains("Test complete."), "results are printed before the verdict");
    ok(&["client", "127.0.0.1", "-p", &port, "-t", "0.3", "--db", &db, "--fail-below", "1M"]);
    let m = |rate: &str, extra: &[&str]| paced_matrix(&port, &db, rate, "0.4", extra);
    let base = m("200M", &[]);
    assert_eq!(base.code, Some(0), "{}", base.stderr);
    let id = stored_matrix(&base);
    let slower = m("100M", &["--fail-regression", "5%", "--baseline", &id]);
    assert_eq!(slower.code, Some(1), "{}", slower.stderr);
    assert!(
        slower.stderr.contains("P=1: -") && slower.stderr.contains("against the baseline"),
        "{}",
        slower.stderr
    );
    let same = m("200M", &["--fail-regression", "5%", "--baseline", &id]);
    assert_eq!(same.code, Some(0), "{}", same.stderr);
}

#[test]
fn last_names_the_newest_run_or_the_matrix_it_belongs_to() {
    let srv = Server::start(&[]);
    let (port, db) = (srv.port.to_string(), db_path("last"));
    let empty = run(&["show", "last", "--db", &db], Duration::from_secs(30));
    assert_ne!(empty.code, Some(0), "an empty history has no last run");
    let client = |label: &str| {
        let args = ["client", "127.0.0.1", "-p", &port, "-t", "0.3", "--db", &db];
        ok(&[&args[..], &["--label", label, "-J"]].concat()).json()
    };
    let (_, second) = (client("first"), client("second"));
    // `show` with no id and `show last` are the second run, whose record they print.
    for args in [&["show", "--db", &db, "-J"][..], &["show", "last", "--db", &db, "-J"][..]] {
        let shown = ok(args).json();
        assert_eq!(shown["record"], second["record"], "{args:?}");
    }
    // `report` with no id is the newest run too: a one-run report.
    let report = ok(&["report", "--db", &db, "-f", "json"]).json();
    assert_eq!(report["kind"], "linerate.run", "a one-run report");
    // After a matrix, `last` is the matrix for report and compare, and its newest run for show.
    let out = paced_matrix(&port, &db, "100M", "0.3", &[]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let m = stored_matrix(&out);
    let report = ok(&["report", "--db", &db]).stdout;
    assert!(report.contains(&format!("matrix {m}")), "report names the matrix {m}: {report}");
    let same = ok(&["compare", &m, "last", "--db", &db, "-J"]).json();
    assert_eq!(same[0]["result"]["change_percent"], 0.0, "a matrix against itself: {same}");
    let shown = ok(&["show", "last", "--db", &db, "-J"]).json();
    assert_eq!(shown["record"]["spec"]["bits_per_second"], 100_000_000, "{shown}");
    // A group id is not a run: show says what to use instead.
    let refused = run(&["show", &m, "--db", &db], Duration::from_secs(30));
    assert_ne!(refused.code, Some(0));
    assert!(refused.stderr.contains(&format!("linerate report {m}")), "{}", refused.stderr);
}
