//! `linerate matrix` end to end on loopback: every cell run the right number of times in a
//! seeded random order, statistics and findings present, bad axes refused.

use std::time::Duration;

use serde_json::Value;

use linerate::store::Store;

use crate::util::{Server, completed, run};

fn matrix(port: u16, extra: &[&str]) -> Value {
    let port = port.to_string();
    let mut args = vec!["matrix", "127.0.0.1", "-p", &port, "-i", "0", "-J"];
    args.extend_from_slice(extra);
    let out = run(&args, Duration::from_secs(120));
    assert_eq!(out.code, Some(0), "{args:?}: {}\n{}", out.stderr, out.stdout);
    out.json()
}

/// Two streams x two windows, twice each, in the order seed 7 gives.
const SEEDED_2X2: [&str; 8] =
    ["--parallel", "1,2", "--window", "default,256K", "--repeat", "2", "--seed", "7"];

/// A fresh history file for one test.
fn history(name: &str) -> std::path::PathBuf {
    crate::util::test_dir(name).join("h.sqlite")
}

fn cell_order(doc: &Value) -> Vec<u64> {
    doc["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| r["cell"].as_u64().expect("cell"))
        .collect()
}

#[test]
fn a_two_by_two_matrix_runs_every_cell_twice_with_statistics_and_findings() {
    let _serial = crate::util::exclusive();
    let srv = Server::start(&[]);
    let doc = matrix(srv.port, &[&SEEDED_2X2[..], &["-t", "0.5"]].concat());
    assert_eq!(doc["kind"], "linerate.matrix");
    let cells = doc["summary"]["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 4);
    let labels: Vec<&str> = cells.iter().map(|c| c["label"].as_str().expect("label")).collect();
    assert_eq!(labels, ["P=1 w=default", "P=1 w=256K", "P=2 w=default", "P=2 w=256K"]);
    for c in cells {
        assert_eq!(c["runs"], 2, "{c}");
        let s = &c["bits_per_second"];
        assert_eq!(s["n"], 2);
        assert!(s["min"].as_f64().expect("min") > 1e8, "{s}");
        assert!(s["ci95"].is_array(), "{s}");
    }
    // The streams and window really changed between cells.
    let runs = doc["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 8);
    for r in runs {
        let cell = &cells[r["cell"].as_u64().expect("c") as usize];
        let spec = &r["record"]["spec"];
        let p = if cell["label"].as_str().expect("l").starts_with("P=2") { 2 } else { 1 };
        assert_eq!(spec["streams"], p);
        let w = if cell["label"].as_str().expect("l").ends_with("256K") {
            Value::from(262_144)
        } else {
            Value::Null
        };
        assert_eq!(spec["window_bytes"], w);
    }
    let findings = doc["summary"]["findings"].as_array().expect("findings");
    assert!(findings[0].as_str().expect("f").starts_with("best: "), "{findings:?}");
    assert!(
        findings.iter().any(|f| f.as_str().expect("f").starts_with("window: ")),
        "{findings:?}"
    );
    // Same seed, same order; the order is not the cell order.
    let again = matrix(srv.port, &[&SEEDED_2X2[..], &["-t", "0.2"]].concat());
    assert_eq!(cell_order(&doc), cell_order(&again));
    assert_ne!(cell_order(&doc), vec![0, 0, 1, 1, 2, 2, 3, 3]);
}

#[test]
fn until_ci_repeats_cells_within_the_bounds() {
    let _serial = crate::util::exclusive();
    let srv = Server::start(&[]);
    let doc = matrix(
        srv.port,
        &[
            "--parallel",
            "1",
            "--repeat",
            "2",
            "--until-ci",
            "0.001%",
            "--max-repeat",
            "4",
            "-t",
            "0.3",
        ],
    );
    let c = &doc["summary"]["cells"][0];
    assert_eq!(c["runs"], 4, "an unreachable target runs to --max-repeat: {c}");
    assert_eq!(c["ci_target_met"], false);
    let findings = doc["summary"]["findings"].to_string();
    assert!(findings.contains("confidence target was not reached"), "{findings}");
}

#[test]
fn text_output_has_the_table_and_findings() {
    let srv = Server::start(&[]);
    let port = srv.port.to_string();
    let out = run(
        &[
            "matrix",
            "127.0.0.1",
            "-p",
            &port,
            "--parallel",
            "1,2",
            "--repeat",
            "2",
            "-t",
            "0.3",
            "-i",
            "0",
            "--link-speed",
            "1T",
        ],
        Duration::from_secs(60),
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("Matrix: 2 cell(s) x 2 run(s)"), "{}", out.stdout);
    assert!(
        out.stdout.contains("\nPlan: 4 runs × (0.3 s + ~0.5 s setup) ≈ 3 s\n"),
        "{}",
        out.stdout
    );
    // Standard error is a pipe, not a terminal: one line per finished run, as it finishes.
    let lines: Vec<&str> = out.stderr.lines().filter(|l| l.starts_with('[')).collect();
    assert_eq!(lines.len(), 4, "{}", out.stderr);
    for (i, line) in lines.iter().enumerate() {
        assert!(line.starts_with(&format!("[{}/4] P=", i + 1)), "{line}");
        assert!(line.contains(" (run ") && line.contains("bit/s"), "{line}");
        assert_eq!(line.ends_with(" left)"), i < 3, "the time left, but after the last: {line}");
    }
    // The table's unit is whichever keeps three figures for every value (Gbit/s on a quiet
    // machine; a run starved by other builds can pull it to Mbit/s).
    assert!(
        out.stdout.contains("cell (") && out.stdout.contains("bit/s received)"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("P=2 "), "{}", out.stdout);
    assert!(out.stdout.contains("Findings:\n  - best: "), "{}", out.stdout);
    // Loopback is far from a 1 Tbit/s link: the finding says how close the best came.
    assert!(
        out.stdout.contains("link: no cell reached 90% of the declared link"),
        "{}",
        out.stdout
    );
}

#[test]
fn bad_axes_are_refused_with_the_flag_named() {
    for (args, word) in [
        (&["--parallel", "0"][..], "--parallel"),
        (&["--window", "huge"][..], "--window"),
        (&["--protocol", "sctp"][..], "--protocol"),
        (&["--length", "100000", "--protocol", "udp"][..], "24..=65507"),
    ] {
        let mut all = vec!["matrix", "127.0.0.1", "-p", "1"];
        all.extend_from_slice(args);
        let out = run(&all, Duration::from_secs(10));
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(word), "{args:?}: {}", out.stderr);
    }
}

#[test]
fn an_interrupted_matrix_resumes_in_its_stored_order_without_repeating_a_run() {
    let _serial = crate::util::exclusive();
    let (srv, db) = (Server::start(&[]), history("matrix-resume"));
    let (db_s, port) = (db.to_string_lossy().into_owned(), srv.port.to_string());
    let base = ["matrix", "127.0.0.1", "-p", &port, "-i", "0", "-t", "0.2", "--db", &db_s];
    let with = |extra: &[&str]| run(&[&base[..], extra].concat(), Duration::from_secs(120));
    let first = with(&[&SEEDED_2X2[..], &["--stop-after", "3"]].concat());
    assert_eq!(first.code, Some(130), "{}\n{}", first.stderr, first.stdout);
    assert!(first.stderr.contains("--resume m"), "says how to resume: {}", first.stderr);
    let store = Store::open(&db).expect("history");
    let g = store.groups(10).expect("groups").remove(0);
    assert_eq!((g.kind.as_str(), g.finished), ("matrix", false));
    assert_eq!(completed(&store, g.id).len(), 3);
    drop(store);

    // Other settings are another matrix: refused, naming the group when it is named.
    let other = ["--parallel", "1,2", "--window", "default,256K", "--repeat", "3"];
    let refused = with(&[&other[..], &["--resume"]].concat());
    assert_eq!(refused.code, Some(2), "{}", refused.stderr);
    assert!(refused.stderr.contains("no unfinished matrix"), "{}", refused.stderr);
    let named = format!("m{}", g.id);
    let refused = with(&[&other[..], &["--resume", &named]].concat());
    assert_eq!(refused.code, Some(2), "{}", refused.stderr);
    assert!(refused.stderr.contains("changed since matrix group"), "{}", refused.stderr);

    // The same settings without --seed: the stored seed and order are used.
    let resumed = with(
        &["--parallel", "1,2", "--window", "default,256K", "--repeat", "2"]
            .iter()
            .copied()
            .chain(["--resume", "-J"])
            .collect::<Vec<_>>(),
    );
    assert_eq!(resumed.code, Some(0), "{}\n{}", resumed.stderr, resumed.stdout);
    let doc = resumed.json();
    assert_eq!(doc["seed"], 7);
    let fresh = matrix(srv.port, &[&SEEDED_2X2[..], &["-t", "0.2", "--no-store"]].concat());
    assert_eq!(cell_order(&doc), cell_order(&fresh), "the stored order, prior runs first");
    crate::util::assert_resumed_whole(&db, g.id, 8);
    let finished = with(&[&SEEDED_2X2[..], &["--resume", &named]].concat());
    assert_eq!(finished.code, Some(2), "{}", finished.stderr);
    assert!(finished.stderr.contains("already finished"), "{}", finished.stderr);
}

/// Ctrl-C in the middle of a run (a real SIGINT, after `after` runs were stored): the run in
/// progress is stored as interrupted. Returns once the process has ended.
fn interrupt_mid_run(args: &[&str], db: &std::path::Path, after: usize, into_run: Duration) {
    let mut child = std::process::Command::new(crate::util::bin())
        .env("XDG_DATA_HOME", crate::util::data_home())
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn matrix");
    let start = std::time::Instant::now();
    let stored = || {
        Store::open(db)
            .ok()
            .and_then(|s| s.groups(1).ok()?.first().map(|g| (s, g.id)))
            .map_or(0, |(s, g)| s.group_runs(g).map_or(0, |r| r.len()))
    };
    while stored() < after {
        assert!(start.elapsed() < Duration::from_secs(60), "no {after} runs stored in time");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(into_run);
    // SAFETY: plain kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let end = std::time::Instant::now() + Duration::from_secs(30);
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > end {
            let _ = child.kill();
            panic!("the matrix did not stop after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A matrix interrupted mid-run and resumed: the interrupted run is in no figure, and the
/// resumed table, `report` (text and JSON) and `compare` all say the same n per cell; the
/// report counts the planned runs, not the attempts.
#[test]
fn an_interrupted_run_enters_no_figure_and_every_view_agrees_on_n() {
    let _serial = crate::util::exclusive();
    let (srv, db) = (Server::start(&[]), history("matrix-interrupted-n"));
    let (db_s, port) = (db.to_string_lossy().into_owned(), srv.port.to_string());
    // `-A none`: no placement calibration, so the matrix is the history's first group, m1.
    let args =
        ["matrix", "127.0.0.1", "-p", &port, "-i", "0", "-t", "1.5", "--db", &db_s, "-A", "none"];
    let args = [&args[..], &["--parallel", "1,2", "--repeat", "2", "--seed", "7"]].concat();
    // A signal that misses the run (a loaded machine can delay it past the run's end) proves
    // nothing: try again, a few times, on a fresh history.
    let outcomes = |db: &std::path::Path| -> Vec<String> {
        let store = Store::open(db).expect("history");
        let g = store.groups(10).expect("groups").remove(0);
        let runs = store.group_runs(g.id).expect("runs");
        runs.iter().map(|(_, _, r)| format!("{:?}", r.outcome)).collect()
    };
    for _ in 0..3 {
        let _ = std::fs::remove_file(&db);
        interrupt_mid_run(&args, &db, 1, Duration::from_millis(400));
        if outcomes(&db).last().map(String::as_str) == Some("Interrupted") {
            break;
        }
    }
    assert_eq!(outcomes(&db), ["Completed", "Interrupted"], "one run done, one cut short");

    let resumed = run(&[&args[..], &["--resume", "-J"]].concat(), Duration::from_secs(60));
    assert_eq!(resumed.code, Some(0), "{}\n{}", resumed.stderr, resumed.stdout);
    let live = resumed.json();
    let n = |doc: &Value| -> Vec<(String, u64, u64)> {
        doc["summary"]["cells"]
            .as_array()
            .expect("cells")
            .iter()
            .map(|c| {
                let label = c["label"].as_str().expect("label").to_string();
                (label, c["runs"].as_u64().expect("runs"), c["interrupted"].as_u64().expect("i"))
            })
            .collect()
    };
    let report = crate::report::report(&["m1", "--db", &db_s, "-f", "json"]);
    let stored: Value = serde_json::from_str(&report).expect("JSON");
    assert_eq!(stored["summary"], live["summary"], "report says what the resumed matrix said");
    let interrupted: u64 = n(&live).iter().map(|c| c.2).sum();
    assert_eq!(interrupted, 1, "the interrupted attempt is listed, not counted: {:?}", n(&live));
    for (_, runs, _) in n(&live) {
        assert_eq!(runs, 2, "every cell has its two completed runs: {:?}", n(&live));
    }
    let text = crate::report::report(&["m1", "--db", &db_s]);
    assert!(
        text.contains(
            "Runs: 4 completed; not counted: 1 interrupted (every planned run completed: yes)"
        ),
        "{text}"
    );
    let compared = run(&["compare", "m1", "m1", "--db", &db_s, "-J"], Duration::from_secs(30));
    assert_eq!(compared.code, Some(0), "{}", compared.stderr);
    for row in compared.json().as_array().expect("rows") {
        assert_eq!(row["result"]["n_a"], 2, "{row}");
    }
}

/// Issue 34: `compare` listed cells in the order their first runs happened to come in the
/// matrix's random order (P=1 w=800k, P=4 w=4M, P=2 …). It lists them in the plan's order,
/// the order the report's table has, whatever order they ran in.
#[test]
fn compare_lists_cells_in_the_plans_order() {
    let _serial = crate::util::exclusive();
    let (srv, db) = (Server::start(&[]), history("compare-order"));
    let _ = std::fs::remove_file(&db);
    let (db_s, port) = (db.to_string_lossy().into_owned(), srv.port.to_string());
    // `-A none`: no placement calibration, so the matrix is the history's first group, m1.
    let args =
        ["matrix", "127.0.0.1", "-p", &port, "-i", "0", "-t", "0.2", "--db", &db_s, "-A", "none"];
    let axes = ["--parallel", "1,4,2", "--repeat", "2", "--seed", "5", "-J"];
    let out = run(&[&args[..], &axes[..]].concat(), Duration::from_secs(60));
    assert_eq!(out.code, Some(0), "{}\n{}", out.stderr, out.stdout);
    let ran: Vec<u64> = cell_order(&out.json());
    let compared = run(&["compare", "m1", "m1", "--db", &db_s, "-J"], Duration::from_secs(30));
    assert_eq!(compared.code, Some(0), "{}", compared.stderr);
    let rows: Vec<String> = compared
        .json()
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r["cell"].as_str().expect("cell").to_string())
        .collect();
    assert_eq!(rows, ["P=1", "P=4", "P=2"], "the runs came in the order of cells {ran:?}");
    let text = run(&["compare", "m1", "m1", "--db", &db_s], Duration::from_secs(30)).stdout;
    let at = |cell: &str| text.find(&format!("\n{cell} ")).unwrap_or_else(|| panic!("{text}"));
    assert!(at("P=1") < at("P=4") && at("P=4") < at("P=2"), "{text}");
}

/// `matrix --window 1M,8K`: the 8K cell's rate is orders of magnitude below the other's and
/// the table still shows it with three significant figures, never as 0.00.
#[test]
fn a_tiny_window_cell_is_not_rounded_away() {
    let _serial = crate::util::exclusive();
    let srv = Server::start(&[]);
    let port = srv.port.to_string();
    let args = ["matrix", "127.0.0.1", "-p", &port, "-i", "0", "-t", "0.5", "--no-store"];
    let out = run(
        &[&args[..], &["--window", "1M,8K", "--repeat", "1"]].concat(),
        Duration::from_secs(60),
    );
    assert_eq!(out.code, Some(0), "{}\n{}", out.stderr, out.stdout);
    let row = out
        .stdout
        .lines()
        .find(|l| l.starts_with("w=8K"))
        .unwrap_or_else(|| panic!("{}", out.stdout));
    // Columns are at least two spaces apart; a figure with its unit holds one.
    let columns: Vec<&str> = row.split("  ").map(str::trim).filter(|c| !c.is_empty()).collect();
    let median = columns[3];
    let digits: String = median.chars().filter(char::is_ascii_digit).collect();
    assert!(digits.trim_start_matches('0').len() >= 3, "three figures: {median} in {row}");
    assert!(!row.contains("0.00–0.00"), "{}", out.stdout);
}

/// `--window 256k` is `w=256k` in the table, the history and the report (not the `w=250K` the
/// same bytes read canonically); a group an older version stored as `w=250K` still resumes
/// with `--window 256k` and reports with its stored words.
#[test]
fn labels_keep_the_users_words_and_old_labels_still_read_back() {
    let _serial = crate::util::exclusive();
    let (srv, db) = (Server::start(&[]), history("matrix-words"));
    let (db_s, port) = (db.to_string_lossy().into_owned(), srv.port.to_string());
    // `-A none`: no placement calibration, so the matrices are the history's groups 1 and 2.
    let base =
        ["matrix", "127.0.0.1", "-p", &port, "-i", "0", "-t", "0.2", "--db", &db_s, "-A", "none"];
    let axes = ["--window", "256k,default", "--repeat", "1", "--seed", "3"];
    let with = |extra: &[&str]| {
        let out = run(&[&base[..], &axes[..], extra].concat(), Duration::from_secs(60));
        assert_eq!(out.code, Some(0), "{}\n{}", out.stderr, out.stdout);
        out
    };
    let text = with(&[]).stdout;
    assert!(text.contains("\nw=256k "), "{text}");
    assert!(!text.contains("250K"), "{text}");
    let history = run(&["history", "--db", &db_s], Duration::from_secs(10)).stdout;
    assert!(history.contains("m1 w=256k"), "{history}");
    let report = crate::report::report(&["m1", "--db", &db_s]);
    assert!(report.contains("\nw=256k ") && report.contains("w=256k,w=default"), "{report}");

    // A group stored by an older version: labels in canonical words, interrupted (as Ctrl-C:
    // exit 130 after the partial table).
    let args = [&base[..], &axes[..], &["--stop-after", "1"]].concat();
    let stopped = run(&args, Duration::from_secs(60));
    assert_eq!(stopped.code, Some(130), "{}\n{}", stopped.stderr, stopped.stdout);
    let conn = rusqlite::Connection::open(&db).expect("db");
    let old = |t: &str| t.replace("w=256k", "w=250K");
    let params: String =
        conn.query_row("SELECT params_json FROM groups WHERE id = 2", [], |r| r.get(0)).expect("g");
    conn.execute("UPDATE groups SET params_json = ?1 WHERE id = 2", [old(&params)])
        .expect("params");
    conn.execute("UPDATE runs SET cell = 'w=250K' WHERE group_id = 2 AND cell = 'w=256k'", [])
        .expect("cells");
    drop(conn);
    let resumed = with(&["--resume", "m2", "-J"]).json();
    let labels: Vec<&str> = resumed["summary"]["cells"]
        .as_array()
        .expect("cells")
        .iter()
        .map(|c| c["label"].as_str().expect("label"))
        .collect();
    assert_eq!(labels, ["w=250K", "w=default"], "the group's stored words");
    let store = Store::open(&db).expect("history");
    assert!(store.group(2).expect("read").expect("group").finished);
    let mut done = completed(&store, 2);
    done.sort();
    assert_eq!(done, [("w=250K".to_string(), 1), ("w=default".to_string(), 1)], "no run twice");
    let report = crate::report::report(&["m2", "--db", &db_s]);
    assert!(report.contains("\nw=250K "), "{report}");
}
