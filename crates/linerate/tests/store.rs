//! The history database through the command line: runs are stored by default, listed,
//! shown, compared; a database linerate cannot use never costs a run its results.

use std::path::PathBuf;
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

/// Issue 46: one `--bidir` run read 18.0 in the history (its first direction) and 57.35 in
/// the report (the unlabelled sum). Every view now gives each direction and their labelled
/// total, the same figures.
#[test]
fn a_bidirectional_run_shows_each_direction_and_their_total_in_every_view() {
    let srv = Server::start(&[]);
    let (port, db) = (srv.port.to_string(), db_path("bidir"));
    let out = ok(&["client", "127.0.0.1", "-p", &port, "-t", "0.5", "--bidir", "--db", &db]);
    let line = |text: &str, needle: &str| {
        text.lines()
            .find(|l| l.contains(needle))
            .map(str::to_string)
            .unwrap_or_else(|| panic!("no line with {needle:?}:\n{text}"))
    };
    // The run's own output: `Both directions received: C->S a + S->C b = t total`.
    let words = line(&out.stdout, "Both directions received: C->S ");
    let total = words.split(" = ").nth(1).expect("a total").to_string();
    assert!(total.ends_with(" total") && words.contains(" + S->C "), "{words}");
    // The history: the total in its column, each direction under it, the same words.
    let listed = ok(&["history", "--db", &db]).stdout;
    let each = words.trim_start_matches("Both directions received: ");
    assert!(listed.contains(each), "{listed}");
    let rate = total.trim_end_matches(" total");
    assert!(line(&listed, "bidirectional").contains(rate), "{listed}");
    let rows = ok(&["history", "--db", &db, "-J"]).json();
    let row = &rows[0];
    let directions = row["directions"].as_array().expect("directions");
    assert_eq!(directions.len(), 2, "{row}");
    let sum: f64 = directions.iter().map(|d| d["bits_per_second"].as_f64().expect("rate")).sum();
    let listed_rate = row["bits_per_second"].as_f64().expect("rate");
    assert!((sum - listed_rate).abs() < 1.0, "{sum} against {listed_rate}");
    // The report: the total labelled as such, and each direction beside it.
    let report = ok(&["report", "1", "--db", &db]).stdout;
    assert!(report.contains("received, summed over directions)"), "{report}");
    assert!(line(&report, "run 1 ").contains(" + S->C "), "{report}");
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
fn an_unusable_database_costs_neither_the_results_nor_the_run() {
    let srv = Server::start(&[]);
    let (port, db) = (srv.port.to_string(), db_path("garbage"));
    std::fs::write(&db, b"this is not a database, but someone's notes").expect("write");
    let before = std::fs::read(&db).expect("read");
    let out = run(&["client", "127.0.0.1", "-p", &port, "-t", "0.3", "--db", &db], LIMIT);
    assert!(out.stdout.contains("Test complete."), "the results come first: {}", out.stdout);
    assert!(out.stderr.contains("not a SQLite database"), "{}", out.stderr);
    assert_eq!(out.code, Some(3), "a run that was not stored is not a success: {}", out.stderr);
    assert_saved_instead(&out.stderr);
    assert_eq!(std::fs::read(&db).expect("read"), before, "the file was left untouched");
    let out = run(&["history", "--db", &db], Duration::from_secs(10));
    assert_eq!(out.code, Some(3));
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
    assert_eq!(empty.code, Some(2), "an empty history has no last run: {}", empty.stderr);
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
    assert_eq!(refused.code, Some(2), "{}", refused.stderr);
    assert!(refused.stderr.contains(&format!("linerate report {m}")), "{}", refused.stderr);
}

/// The server the concurrency tests run against: no per-address rate cap (they start 200 tests
/// within seconds from 127.0.0.1).
fn busy_server() -> Server {
    Server::start(&[
        "--max-client-tests-per-minute",
        "0",
        "--max-client-connections",
        "0",
        "--max-tests-per-address",
        "0",
    ])
}

/// How many runs the history at `db` holds.
fn runs_in(db: &std::path::Path) -> usize {
    let store = linerate::store::Store::open_read_only(db).expect("open the history");
    store.list(&linerate::store::ListFilter::default()).expect("list").len()
}

#[test]
fn ten_clients_creating_one_new_history_at_once_store_every_run() {
    // Ten processes opening one file that does not exist yet once lost a run to "a SQLite
    // database of another program" and another to "database is locked" after a few ms.
    let _serial = crate::util::exclusive();
    let srv = busy_server();
    let port = srv.port.to_string();
    let dir = crate::util::test_dir("ten-at-once");
    for round in 0..20 {
        let db = dir.join(format!("round-{round}.sqlite"));
        let db_arg = db.to_string_lossy().into_owned();
        let clients: Vec<_> = (0..10)
            .map(|_| {
                let (port, db) = (port.clone(), db_arg.clone());
                std::thread::spawn(move || {
                    let args = ["client", "127.0.0.1", "-p", &port, "-t", "0.1", "--db", &db];
                    run(&args, Duration::from_secs(60))
                })
            })
            .collect();
        for out in clients.into_iter().map(|c| c.join().expect("client thread")) {
            assert_eq!(out.code, Some(0), "round {round}: {}\n{}", out.stderr, out.stdout);
            assert!(out.stdout.contains("Stored as run"), "round {round}: {}", out.stderr);
            assert!(!out.stderr.contains("warning"), "round {round}: {}", out.stderr);
        }
        assert_eq!(runs_in(&db), 10, "round {round}: every run is in the history");
    }
}

/// A server, a fresh test directory, and in it the history `db` holding one run of a 0.1 s
/// test (with `extra` arguments): (server, port, directory, the history's path).
fn one_run_in(test: &str, db: &str, extra: &[&str]) -> (Server, String, PathBuf, String) {
    let srv = Server::start(&[]);
    let port = srv.port.to_string();
    let dir = crate::util::test_dir(test);
    let db = dir.join(db).to_string_lossy().into_owned();
    ok(&[&["client", "127.0.0.1", "-p", &port, "-t", "0.1", "--db", &db][..], extra].concat());
    (srv, port, dir, db)
}

#[test]
fn a_client_waits_out_another_process_holding_the_history() {
    // A writer holding the file for a second is waited for (the busy timeout is 5 s), both
    // when the history exists and when the file is still empty and must be switched to WAL,
    // the one step SQLite does not wait for by itself.
    let _serial = crate::util::exclusive();
    let (_srv, port, dir, existing) = one_run_in("held", "existing.sqlite", &[]);
    let existing = PathBuf::from(existing);
    let empty = dir.join("empty.sqlite");
    std::fs::write(&empty, b"").expect("touch");
    for (db, before) in [(&existing, 1), (&empty, 0)] {
        let mut holder = rusqlite::Connection::open(db).expect("open");
        let tx = holder
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .expect("hold the write lock");
        let client = {
            let (port, db) = (port.clone(), db.to_string_lossy().into_owned());
            std::thread::spawn(move || {
                run(&["client", "127.0.0.1", "-p", &port, "-t", "0.1", "--db", &db], LIMIT)
            })
        };
        std::thread::sleep(Duration::from_secs(1));
        tx.commit().expect("release");
        let out = client.join().expect("client thread");
        assert_eq!(out.code, Some(0), "{}: {}", db.display(), out.stderr);
        assert!(out.stdout.contains("Stored as run"), "{}: {}", db.display(), out.stderr);
        assert!(out.elapsed > Duration::from_millis(900), "it waited: {:?}", out.elapsed);
        drop(holder);
        assert_eq!(runs_in(db), before + 1, "{}", db.display());
    }
}

const LIMIT: Duration = Duration::from_secs(60);

/// The bytes of `db` and its `-wal` and `-shm` files.
fn three_files(db: &std::path::Path) -> Vec<Option<Vec<u8>>> {
    ["", "-wal", "-shm"]
        .iter()
        .map(|s| std::fs::read(format!("{}{s}", db.display())).ok())
        .collect()
}

#[test]
fn a_newer_history_with_a_pending_wal_is_left_byte_for_byte() {
    let _serial = crate::util::exclusive();
    let (_srv, port, dir, origin) = one_run_in("newer-wal", "origin.sqlite", &[]);
    // A newer linerate's last transaction, still in the WAL: copied with -wal and -shm while
    // the connection that wrote it (and never checkpoints) is open.
    let raw = rusqlite::Connection::open(&origin).expect("open");
    raw.pragma_update(None, "wal_autocheckpoint", 0).expect("no checkpoints");
    raw.execute_batch("CREATE TABLE future (x); PRAGMA user_version = 2;").expect("upgrade");
    let db = dir.join("newer.sqlite");
    for s in ["", "-wal", "-shm"] {
        std::fs::copy(format!("{origin}{s}"), format!("{}{s}", db.display())).expect("copy");
    }
    let before = three_files(&db);
    assert!(before.iter().all(|f| f.as_ref().is_some_and(|b| !b.is_empty())), "three files");
    let db_arg = db.to_string_lossy().into_owned();
    let client = run(&["client", "127.0.0.1", "-p", &port, "-t", "0.1", "--db", &db_arg], LIMIT);
    assert!(
        client.stderr.contains("written by a newer linerate (store schema 2"),
        "{}",
        client.stderr
    );
    assert_eq!(client.code, Some(3), "{}", client.stderr);
    assert_saved_instead(&client.stderr);
    for args in [&["history", "--db", &db_arg][..], &["show", "last", "--db", &db_arg]] {
        let out = run(args, LIMIT);
        assert_ne!(out.code, Some(0), "{args:?}");
        assert!(out.stderr.contains("written by a newer linerate"), "{args:?}: {}", out.stderr);
    }
    assert!(three_files(&db) == before, "the file, its -wal and its -shm are as they were");
}

/// One `linerate` command run inside a mount namespace: shell lines to run first, a name for
/// its output files, its arguments and extra environment.
type NsCommand<'a> = (String, &'a str, Vec<&'a str>, Vec<(&'a str, String)>);

/// Runs `setup` then each command in a private mount namespace (its mounts vanish with it), as
/// root or as a user mapped to root; each command's output is read back from `dir`. None (with
/// a note) where mount namespaces are not available, except under CI.
fn in_mount_namespace(
    dir: &std::path::Path,
    setup: &str,
    commands: &[NsCommand<'_>],
) -> Option<Vec<Output>> {
    let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let mut script = format!("set -e\n{setup}\nset +e\n");
    for (before, name, args, env) in commands {
        let env: Vec<String> = env.iter().map(|(k, v)| format!("{k}={}", quote(v))).collect();
        let args: Vec<String> = args.iter().map(|a| quote(a)).collect();
        let out = quote(&dir.join(name).to_string_lossy());
        script += &format!(
            "{before}\n{} {} {} > {out}.out 2> {out}.err; echo $? > {out}.rc\n",
            env.join(" "),
            quote(crate::util::bin()),
            args.join(" ")
        );
    }
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let mut cmd = std::process::Command::new("unshare");
    cmd.arg("--mount");
    if !root {
        cmd.arg("--map-root-user");
    }
    let status =
        cmd.args(["sh", "-c", &script]).env("XDG_DATA_HOME", crate::util::data_home()).output();
    match status {
        Ok(o) if o.status.success() => {}
        other => {
            let why = format!("unshare --mount failed: {other:?}");
            assert!(
                std::env::var_os("CI").is_none(),
                "mount-namespace tests cannot run in CI: {why}"
            );
            eprintln!("skipping a mount-namespace test: {why}");
            return None;
        }
    }
    let read = |name: &str, ext: &str| {
        std::fs::read_to_string(dir.join(format!("{name}.{ext}"))).expect("command output")
    };
    Some(
        commands
            .iter()
            .map(|(_, name, _, _)| Output {
                code: read(name, "rc").trim().parse().ok(),
                stdout: read(name, "out"),
                stderr: read(name, "err"),
                elapsed: Duration::ZERO,
            })
            .collect(),
    )
}

/// A command for [`in_mount_namespace`] with nothing run before it and no extra environment.
fn ns<'a>(name: &'a str, args: &[&'a str]) -> NsCommand<'a> {
    (String::new(), name, args.to_vec(), vec![])
}

#[test]
fn a_read_only_history_is_still_listed_and_shown() {
    let _serial = crate::util::exclusive();
    let (_srv, port, dir, db) = one_run_in("read-only", "ro/h.sqlite", &["--label", "kept"]);
    let ro = dir.join("ro");
    let ro_arg = ro.to_string_lossy().into_owned();
    // A read-only file system; the history was closed cleanly, so there is no -wal to read
    // and none can be created.
    let setup = format!("mount --bind '{ro_arg}' '{ro_arg}'\nmount -o remount,bind,ro '{ro_arg}'");
    // The run's JSON cannot go beside the history: it goes to the temp dir, this test's own.
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).expect("dir");
    let Some(outs) = in_mount_namespace(
        &dir,
        &setup,
        &[
            ns("history", &["history", "--db", &db, "-J"]),
            ns("show", &["show", "last", "--db", &db, "-J"]),
            ns("report", &["report", "--db", &db]),
            (
                String::new(),
                "client",
                vec!["client", "127.0.0.1", "-p", &port, "-t", "0.1", "--db", &db],
                vec![("TMPDIR", tmp.to_string_lossy().into_owned())],
            ),
        ],
    ) else {
        return;
    };
    assert_eq!(outs[0].code, Some(0), "{}", outs[0].stderr);
    let listed = outs[0].json();
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(listed[0]["labels"][0], "kept");
    assert_eq!(outs[1].code, Some(0), "{}", outs[1].stderr);
    assert_eq!(outs[2].code, Some(0), "{}", outs[2].stderr);
    let client = &outs[3];
    assert!(client.stdout.contains("Test complete."), "results are printed: {}", client.stdout);
    assert!(
        client.stderr.contains("is read-only") && client.stderr.contains("give --db PATH"),
        "{}",
        client.stderr
    );
    assert!(!client.stderr.contains("permissions"), "{}", client.stderr);
    assert_eq!(client.code, Some(3), "a run that was not stored: {}", client.stderr);
    assert!(saved_to(&client.stderr).starts_with(&tmp), "{}", client.stderr);
    assert_saved_instead(&client.stderr);
}

#[test]
fn a_full_disk_is_named_and_the_history_still_lists() {
    let _serial = crate::util::exclusive();
    let (_srv, port, dir, seed) = one_run_in("full-disk", "seed.sqlite", &[]);
    let (full, tmp) = (dir.join("full"), dir.join("tmp"));
    std::fs::create_dir_all(&full).expect("dir");
    std::fs::create_dir_all(&tmp).expect("dir");
    let (f, t) = (full.to_string_lossy().into_owned(), tmp.to_string_lossy().into_owned());
    let db = full.join("h.sqlite").to_string_lossy().into_owned();
    // A 512 KiB tmpfs holding the history, filled to the last byte.
    let setup = format!(
        "mount -t tmpfs -o size=512k tmpfs '{f}'\ncp '{seed}' '{db}'\n\
         dd if=/dev/zero of='{f}/fill' bs=4k 2>/dev/null || true"
    );
    // Then with 40 KiB left: room for SQLite's 32 KiB -shm index, so the history opens, but
    // not for a run. A JSON saved beside the history is copied out of the tmpfs.
    let leave_40k = format!(
        "rm '{f}/fill'; dd if=/dev/zero of='{f}/reserve' bs=4k count=10 2>/dev/null\n\
         dd if=/dev/zero of='{f}/fill' bs=4k 2>/dev/null; rm '{f}/reserve'"
    );
    let client = ["client", "127.0.0.1", "-p", &port, "-t", "0.1", "--db", &db];
    let json_client = [&client[..], &["-J"]].concat();
    let copy_out = format!("cp '{f}'/linerate-unstored-run-*.json '{t}' 2>/dev/null");
    let Some(outs) = in_mount_namespace(
        &dir,
        &setup,
        &[
            (String::new(), "client", client.to_vec(), vec![("TMPDIR", t.clone())]),
            ns("history", &["history", "--db", &db, "-J"]),
            (leave_40k, "json-client", json_client, vec![("TMPDIR", t.clone())]),
            (copy_out, "history-after", vec!["history", "--db", &db, "-J"], vec![]),
        ],
    ) else {
        return;
    };
    let opening = &outs[0];
    assert!(opening.stdout.contains("Test complete."), "{}", opening.stdout);
    let named = "the disk is full";
    let fix = format!("free space on the file system holding {f}");
    assert!(opening.stderr.contains(named) && opening.stderr.contains(&fix), "{}", opening.stderr);
    assert!(!opening.stderr.contains("permissions"), "{}", opening.stderr);
    assert_eq!(opening.code, Some(3), "{}", opening.stderr);
    assert!(saved_to(&opening.stderr).starts_with(&tmp), "{}", opening.stderr);
    assert_saved_instead(&opening.stderr);
    assert_eq!(outs[1].code, Some(0), "history lists on a full disk: {}", outs[1].stderr);
    assert_eq!(outs[1].json().as_array().map(Vec::len), Some(1));
    let lost = &outs[2];
    assert!(lost.stderr.contains("this run was not stored"), "{}", lost.stderr);
    assert!(lost.stderr.contains(named) && lost.stderr.contains(&fix), "{}", lost.stderr);
    assert_eq!(lost.code, Some(3), "{}", lost.stderr);
    let saved = saved_to(&lost.stderr);
    let name = saved.file_name().expect("name");
    let document = std::fs::read_to_string(tmp.join(name)).expect("the saved JSON");
    assert_eq!(document, lost.stdout, "the saved file is the document -J printed");
    assert_eq!(outs[3].code, Some(0), "{}", outs[3].stderr);
    assert_eq!(outs[3].json().as_array().map(Vec::len), Some(1));
}

/// The file a "this run was not stored" message says the run's JSON was saved to.
fn saved_to(stderr: &str) -> PathBuf {
    let path = stderr
        .split("was saved to ")
        .nth(1)
        .and_then(|rest| rest.split(" instead").next())
        .unwrap_or_else(|| panic!("no 'saved to' in: {stderr}"));
    PathBuf::from(path)
}

/// The run's JSON went to the file the error names, and it is the run's `-J` document.
fn assert_saved_instead(stderr: &str) {
    let path = saved_to(stderr);
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("saved file"))
        .expect("the saved file is JSON");
    assert_eq!(doc["kind"], "linerate.run", "{}", path.display());
    let _ = std::fs::remove_file(path);
}

/// A history an earlier release wrote (tests/fixtures/stores/README.md: commit 98db5eb, group
/// parameters in both of its layouts) reads with this build: every group reports in every
/// format with the figures its runs hold, lists and compares, and the file is left as it was.
#[test]
fn a_history_written_by_an_earlier_release_reads_whole_and_stays_unchanged() {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/stores/history-98db5eb.sqlite");
    let before = std::fs::read(&fixture).expect("fixture");
    let db = db_path("earlier-release");
    std::fs::write(&db, &before).expect("copy");
    let json = |which: &str| -> Value {
        serde_json::from_str(&ok(&["report", which, "--db", &db, "-f", "json"]).stdout)
            .expect("json")
    };
    // m1: a matrix of layout 1, 2 × 2 cells, 2 runs each.
    let m1 = json("m1");
    let cells = m1["summary"]["cells"].as_array().expect("cells");
    let labels: Vec<&str> = cells.iter().filter_map(|c| c["label"].as_str()).collect();
    assert_eq!(labels, ["P=1 w=128K", "P=1 w=256k", "P=2 w=128K", "P=2 w=256k"], "its words kept");
    assert!(cells.iter().all(|c| c["runs"] == 2), "{m1}");
    // c2: a campaign of layout 1, two tiers of 2 cells × 2 runs.
    let c2 = json("c2");
    let tiers: Vec<&str> =
        c2["tiers"].as_array().expect("tiers").iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(tiers, ["first", "second"]);
    assert_eq!(c2["tiers"][1]["runs"].as_array().map(Vec::len), Some(4));
    // f3: a fleet of layout 0 (its targets at the top of the params), both hosts measured.
    let f3 = json("f3");
    assert_eq!(f3["kind"], "linerate.fleet");
    let s = &f3["summary"];
    assert_eq!((s["hosts_planned"].as_u64(), s["hosts_measured"].as_u64()), (Some(2), Some(2)));
    let hosts = s["directions"][0]["hosts"].as_array().expect("hosts");
    let labels: Vec<&str> = hosts.iter().filter_map(|h| h["label"].as_str()).collect();
    assert_eq!(labels, ["a", "b"]);
    // f4: a scaling curve of layout 0: three host counts, two whole runs each.
    let f4 = json("f4");
    let points = f4["summary"]["directions"][0]["points"].as_array().expect("points");
    let shape: Vec<(u64, usize)> = points
        .iter()
        .map(|p| (p["hosts"].as_u64().expect("k"), p["totals"].as_array().map_or(0, Vec::len)))
        .collect();
    assert_eq!(shape, [(1, 2), (2, 2), (3, 2)]);
    for which in ["1", "m1", "c2", "f3", "f4"] {
        for format in ["text", "md", "csv", "html"] {
            let out = ok(&["report", which, "--db", &db, "-f", format]);
            assert!(out.stdout.len() > 200, "report {which} -f {format}: {}", out.stdout);
        }
    }
    let listed = ok(&["history", "--db", &db]).stdout;
    assert!(listed.contains("find-max 5") && listed.contains("f4 k=3"), "{listed}");
    let fleets = ok(&["compare", "f3", "f3", "--db", &db]).stdout;
    for cell in ["k=2 total", "k=2 a", "k=2 b"] {
        assert!(fleets.lines().any(|l| l.starts_with(cell)), "{cell} in {fleets}");
    }
    let curves = ok(&["compare", "f4", "f4", "--db", &db]).stdout;
    for cell in ["k=1 total", "k=2 total", "k=3 total"] {
        let row = curves.lines().find(|l| l.starts_with(cell)).unwrap_or_default();
        assert!(row.contains("(n=2)"), "{cell} in {curves}");
    }
    ok(&["compare", "m1", "m1", "--db", &db]);
    assert_eq!(std::fs::read(&db).expect("read back"), before, "reading changed the history");
}

/// A matrix whose stored axes this build cannot read (a newer release's axis, here a
/// congestion-control one): its report names each cell as stored, reads no axis values back
/// from those labels, and says why the axis breakdown is missing; `compare` lists the same
/// cells.
#[test]
fn a_matrix_of_axes_this_build_cannot_read_reports_its_cells_as_stored() {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/stores/history-98db5eb.sqlite");
    let db = db_path("unread-axes");
    std::fs::copy(&fixture, &db).expect("copy");
    let sql = rusqlite::Connection::open(&db).expect("open the copy");
    for (old, new) in [("w=128K", "cc=bbr"), ("w=256k", "cc=cubic")] {
        sql.execute(
            "UPDATE groups SET params_json = replace(params_json, ?1, ?2) WHERE id = 1",
            [old, new],
        )
        .expect("axes");
        sql.execute("UPDATE runs SET cell = replace(cell, ?1, ?2) WHERE group_id = 1", [old, new])
            .expect("cells");
    }
    drop(sql);
    let m1: Value = serde_json::from_str(&ok(&["report", "m1", "--db", &db, "-f", "json"]).stdout)
        .expect("json");
    let cells = m1["summary"]["cells"].as_array().expect("cells");
    let labels: Vec<&str> = cells.iter().filter_map(|c| c["label"].as_str()).collect();
    // The order they ran in (the fixture's run 2 is "P=2 w=128K").
    assert_eq!(labels, ["P=2 cc=bbr", "P=1 cc=cubic", "P=2 cc=cubic", "P=1 cc=bbr"], "{m1}");
    assert!(cells.iter().all(|c| c["runs"] == 2 && c["values"] == serde_json::json!([])), "{m1}");
    let text = ok(&["report", "m1", "--db", &db]).stdout;
    assert!(text.contains("stored axes are not ones this build knows"), "{text}");
    let compared = ok(&["compare", "m1", "m1", "--db", &db]).stdout;
    for cell in labels {
        assert!(compared.lines().any(|l| l.starts_with(cell)), "{cell} in {compared}");
    }
}
