//! Stored fleets on loopback (several `linerate server`s on 127.0.0.1, each its own port):
//! `compare` of two fleets and of two scaling curves (cell by cell: host count, host),
//! `--until-ci` for a curve, and resuming an interrupted curve without losing or repeating a
//! stored run.

use std::time::Duration;

use serde_json::Value;

use crate::util::{Output, Server, run, test_dir};

/// `linerate fleet TARGET... ARGS --db DB`.
fn fleet(targets: &[String], args: &[&str], db: &str) -> Output {
    let mut all = vec!["fleet"];
    all.extend(targets.iter().map(String::as_str));
    all.extend_from_slice(args);
    all.extend_from_slice(&["--db", db]);
    run(&all, Duration::from_secs(120))
}

fn target(s: &Server, label: &str) -> String {
    format!("127.0.0.1:{}={label}", s.port)
}

/// Two fleets sharing one host and two curves: compared host by host and point by point, in
/// text and JSON; a fleet against a curve or a run is refused naming both kinds.
#[test]
fn fleets_and_curves_compare_with_their_own_kind() {
    let _serial = crate::util::exclusive();
    let servers = [Server::start(&[]), Server::start(&[]), Server::start(&[])];
    let db = test_dir("fleet-compare").join("h.sqlite");
    let db = db.to_str().expect("utf-8 path");
    let (a, b, c) = (target(&servers[0], "a"), target(&servers[1], "b"), target(&servers[2], "c"));
    let one = ["-t", "1", "-P", "2"];
    for pair in [[&a, &b], [&a, &c]] {
        let out = fleet(&[pair[0].clone(), pair[1].clone()], &one, db);
        assert_eq!(out.code, Some(0), "{}", out.stderr);
    }
    let text = run(&["compare", "f1", "f2", "--db", db], Duration::from_secs(10));
    assert_eq!(text.code, Some(0), "{}", text.stdout);
    let row = |cell: &str| {
        let line = text.stdout.lines().find(|l| l.starts_with(&format!("{cell} ")));
        line.unwrap_or_else(|| panic!("no row {cell:?} in:\n{}", text.stdout)).to_string()
    };
    assert!(row("k=2 total").contains("too few runs to test (n = 1 vs 1)"), "{}", text.stdout);
    assert!(row("k=2 a").contains("too few runs to test (n = 1 vs 1)"), "{}", text.stdout);
    assert!(row("k=2 b").contains("not compared: only A has this cell"), "{}", text.stdout);
    assert!(row("k=2 c").contains("not compared: only B has this cell"), "{}", text.stdout);
    assert!(row("k=2 Jain's index").contains("(n=1)"), "{}", text.stdout);
    let rows: Value = {
        let out = run(&["compare", "f1", "f2", "--db", db, "-J"], Duration::from_secs(10));
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        serde_json::from_str(&out.stdout).expect("json")
    };
    let rows = rows.as_array().expect("rows");
    let cell = |name: &str| rows.iter().find(|r| r["cell"] == name).expect(name).clone();
    let compared: Vec<&str> =
        rows.iter().filter(|r| r["only_in"].is_null()).filter_map(|r| r["cell"].as_str()).collect();
    assert_eq!(compared, ["k=2 total", "k=2 Jain's index", "k=2 a"], "hosts by label");
    let total = cell("k=2 total")["result"].clone();
    assert_eq!((total["n_a"].as_u64(), total["test"].as_str()), (Some(1), Some("none")));
    let total_a = total["mean_a"].as_f64().expect("total");
    let f1 = run(&["report", "f1", "--db", db, "-f", "json"], Duration::from_secs(10));
    let f1: Value = serde_json::from_str(&f1.stdout).expect("json");
    let stored = f1["summary"]["directions"][0]["total_bits_per_second"].as_f64().expect("total");
    assert_eq!(total_a, stored, "compare reads the fleet's own total");
    let jain = cell("k=2 Jain's index");
    assert_eq!(jain["index"], true, "{jain}");
    assert!(jain["result"]["mean_a"].as_f64().is_some_and(|j| j > 0.5 && j <= 1.0), "{jain}");
    assert!(
        cell("k=2 a")["settings"].as_array().is_some_and(Vec::is_empty),
        "hosts are matched by label, not address"
    );

    // Two curves: every host count tested with its repetitions.
    let curve = ["--scale", "1..2", "--repeat", "2", "-t", "0.5", "--seed", "3"];
    for _ in 0..2 {
        let out = fleet(&[a.clone(), b.clone()], &curve, db);
        assert_eq!(out.code, Some(0), "{}", out.stderr);
    }
    let out = run(&["compare", "f3", "last", "--db", db, "-J"], Duration::from_secs(10));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let by_name = run(&["compare", "f3", "f4", "--db", db, "-J"], Duration::from_secs(10));
    assert_eq!(out.stdout, by_name.stdout, "last is the newest fleet");
    let rows: Value = serde_json::from_str(&out.stdout).expect("json");
    let totals: Vec<&Value> = rows
        .as_array()
        .expect("rows")
        .iter()
        .filter(|r| r["cell"].as_str().is_some_and(|c| c.ends_with(" total")))
        .collect();
    let shape: Vec<(&str, u64, u64, &str)> = totals
        .iter()
        .map(|p| {
            let r = &p["result"];
            let n = |k: &str| r[k].as_u64().expect("n");
            (
                p["cell"].as_str().expect("cell"),
                n("n_a"),
                n("n_b"),
                r["test"].as_str().expect("test"),
            )
        })
        .collect();
    assert_eq!(shape, [("k=1 total", 2, 2, "welch_t"), ("k=2 total", 2, 2, "welch_t")]);
    assert!(totals.iter().all(|p| p["result"]["p_value"].is_f64()), "{rows}");
    let text = run(&["compare", "f3", "f4", "--db", db], Duration::from_secs(10));
    for cell in ["k=1 total", "k=1 a", "k=2 Jain's index", "k=2 b"] {
        assert!(text.stdout.lines().any(|l| l.starts_with(cell)), "{cell} in {}", text.stdout);
    }

    // Other kinds: refused, naming both.
    for (x, y, says) in [
        ("f1", "f3", "f1 is a fleet and f3 is a fleet scaling curve"),
        ("f1", "1", "f1 is a fleet and 1 is a run"),
        ("3", "f2", "3 is a run and f2 is a fleet"),
    ] {
        let out = run(&["compare", x, y, "--db", db], Duration::from_secs(10));
        assert_eq!(out.code, Some(2), "{x} {y}: {}", out.stderr);
        assert!(out.stderr.contains(says), "{says:?} in {}", out.stderr);
    }
    let html = test_dir("fleet-compare-html").join("c.html");
    let out = run(
        &["compare", "f1", "f2", "--db", db, "--html", html.to_str().expect("utf-8")],
        Duration::from_secs(10),
    );
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("drop --html"), "{}", out.stderr);
}

/// The points of the first direction of a `linerate.fleet_scale` document: (host count,
/// whole runs, partial runs, 95 % half-width / mean).
fn points(doc: &Value) -> Vec<(u64, usize, u64, Option<f64>)> {
    doc["summary"]["directions"][0]["points"]
        .as_array()
        .expect("points")
        .iter()
        .map(|p| {
            let t = &p["total"];
            let rel = t["ci95_half_width"].as_f64().zip(t["mean"].as_f64()).map(|(h, m)| h / m);
            let whole = p["totals"].as_array().map_or(0, Vec::len);
            (p["hosts"].as_u64().expect("k"), whole, p["partial_runs"].as_u64().expect("p"), rel)
        })
        .collect()
}

/// `--until-ci`: every host count runs in rounds until its total's interval is within the
/// target or it has `--max-repeat` whole runs, and not one round more.
#[test]
fn until_ci_repeats_each_host_count_until_its_interval_or_its_bound() {
    let _serial = crate::util::exclusive();
    let servers = [Server::start(&[]), Server::start(&[])];
    let targets: Vec<String> = servers.iter().map(|s| format!("127.0.0.1:{}", s.port)).collect();
    let db = test_dir("fleet-until-ci").join("h.sqlite");
    let db = db.to_str().expect("utf-8 path");
    // A target no run can meet: every count stops at its bound, exactly.
    let args = ["--scale", "1..2", "--until-ci", "0.0001", "--max-repeat", "3", "-t", "0.3", "-J"];
    let out = fleet(&targets, &args, db);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let doc: Value = serde_json::from_str(&out.stdout).expect("json");
    let shape: Vec<(u64, usize)> = points(&doc).iter().map(|p| (p.0, p.1)).collect();
    assert_eq!(shape, [(1, 3), (2, 3)], "{}", out.stderr);
    assert_eq!(out.stderr.matches("] ").count(), 6, "a progress line per run: {}", out.stderr);
    let reps: Vec<(u64, u64)> = doc["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| (r["hosts"].as_u64().expect("k"), r["repetition"].as_u64().expect("rep")))
        .collect();
    let mut sorted = reps.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (2, 3)], "{reps:?}");
    let store = linerate::store::Store::open(std::path::Path::new(db)).expect("history");
    assert!(store.group(1).expect("read").expect("f1").finished);
    drop(store);

    // A target runs can meet: a count stops as soon as its interval is within it (at two
    // runs at the earliest), or at its bound.
    let args = ["--scale", "1..2", "--until-ci", "60", "--max-repeat", "4", "-t", "0.3", "-J"];
    let out = fleet(&targets, &args, db);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let doc: Value = serde_json::from_str(&out.stdout).expect("json");
    for (k, whole, partial, rel) in points(&doc) {
        assert!((2..=4).contains(&whole) && partial == 0, "k={k}: {whole} runs");
        if whole < 4 {
            assert!(rel.is_some_and(|r| r <= 0.6), "k={k} stopped at {whole} runs: {rel:?}");
        }
    }
}

/// An interrupted curve, one of whose hosts was down (its fleet runs partial), resumed once
/// the host is back: every stored run is kept, the whole runs are not run again, the partial
/// ones are, and the finished curve has every point.
#[test]
fn an_interrupted_curve_resumes_keeping_every_stored_run() {
    let _serial = crate::util::exclusive();
    let (a, b) = (Server::start(&[]), Server::start(&[]));
    let down = crate::util::free_port();
    let targets = vec![target(&a, "a"), target(&b, "b"), format!("127.0.0.1:{down}=c")];
    let db = test_dir("fleet-resume").join("h.sqlite");
    let db_s = db.to_str().expect("utf-8 path");
    let curve = ["--scale", "1..3", "--repeat", "2", "-t", "0.3"];
    let first =
        fleet(&targets, &[&curve[..], &["--seed", "9", "--stop-after", "4"]].concat(), db_s);
    assert_eq!(first.code, Some(130), "{}\n{}", first.stderr, first.stdout);
    assert!(first.stderr.contains("--resume f1"), "says how to resume: {}", first.stderr);
    let stored_before = stored(&db);
    let (attempts_before, partial_before) = {
        let mut pairs: Vec<(String, u64)> =
            stored_before.iter().map(|(_, cell, rep, _, _)| (cell.clone(), *rep)).collect();
        pairs.dedup();
        let k3 = pairs.iter().filter(|(c, _)| c == "k=3").count();
        (pairs.len(), k3)
    };
    assert_eq!(attempts_before, 4, "four fleet runs stored: {stored_before:?}");
    assert!(partial_before >= 1, "seed 9 runs a 3-host fleet (c down) among its first four");

    // Other settings are another curve; a single fleet is not resumed.
    let refused =
        fleet(&targets, &["--scale", "1..3", "--repeat", "3", "-t", "0.3", "--resume"], db_s);
    assert_eq!(refused.code, Some(2), "{}", refused.stderr);
    assert!(refused.stderr.contains("no unfinished fleet"), "{}", refused.stderr);
    let refused =
        fleet(&targets, &["--scale", "1..2", "--repeat", "2", "-t", "0.3", "--resume", "f1"], db_s);
    assert_eq!(refused.code, Some(2), "{}", refused.stderr);
    assert!(refused.stderr.contains("changed since fleet group 1"), "{}", refused.stderr);
    let refused = fleet(&targets, &["-t", "0.3", "--resume"], db_s);
    assert_eq!(refused.code, Some(2), "{}", refused.stderr);
    assert!(refused.stderr.contains("continues a scaling curve"), "{}", refused.stderr);

    // Host c is back: the same command line (without --seed) finishes the curve.
    let _c = Server::start_on(down);
    let resumed = fleet(&targets, &[&curve[..], &["--resume", "-J"]].concat(), db_s);
    assert_eq!(resumed.code, Some(0), "{}\n{}", resumed.stderr, resumed.stdout);
    let doc: Value = serde_json::from_str(&resumed.stdout).expect("json");
    assert_eq!(doc["seed"], 9, "the stored seed");
    let got = points(&doc);
    let shape: Vec<(u64, usize, u64)> = got.iter().map(|p| (p.0, p.1, p.2)).collect();
    assert_eq!(shape, [(1, 2, 0), (2, 2, 0), (3, 2, partial_before as u64)]);
    let after = stored(&db);
    assert!(after.starts_with(&stored_before), "every run stored before is kept as it was");
    // Whole fleet runs were not run again: the history holds the 12 host runs of the six
    // whole fleet runs plus the three of each partial attempt (c not measured), no more.
    assert_eq!(after.len(), 12 + 3 * partial_before, "{after:?}");
    let mut whole: Vec<(&str, u64, &str)> = after
        .iter()
        .filter(|(_, _, _, _, completed)| *completed)
        .map(|(_, cell, rep, label, _)| (cell.as_str(), *rep, label.as_str()))
        .collect();
    whole.sort_unstable();
    whole.dedup();
    assert_eq!(whole.len(), 12, "every host of every (k, repetition) measured: {whole:?}");
    let store = linerate::store::Store::open(&db).expect("history");
    assert!(store.group(1).expect("read").expect("f1").finished);
    assert_eq!(store.groups(10).expect("groups").len(), 1, "no new group on resume");
    drop(store);
    let again = run(&["report", "f1", "--db", db_s, "-f", "json"], Duration::from_secs(10));
    let again: Value = serde_json::from_str(&again.stdout).expect("json");
    assert_eq!(again["summary"], doc["summary"], "the history gives the same curve");
}

/// Every host run of the history's group 1: (id, cell, repetition, label, completed).
fn stored(db: &std::path::Path) -> Vec<(i64, String, u64, String, bool)> {
    let store = linerate::store::Store::open(db).expect("history");
    store
        .group_runs(1)
        .expect("runs")
        .into_iter()
        .map(|(id, meta, r)| {
            let label = r.fleet.as_ref().map(|f| f.label.clone()).unwrap_or_default();
            let done = r.outcome == linerate::record::Outcome::Completed;
            (id, meta.cell.expect("cell"), u64::from(meta.repetition.expect("rep")), label, done)
        })
        .collect()
}
