//! Stored fleets on loopback (several `linerate server`s on 127.0.0.1, each its own port):
//! `compare` of two fleets and of two scaling curves, `--until-ci` for a curve, and resuming
//! an interrupted curve without losing or repeating a stored run.

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
    assert_eq!(text.code, Some(0), "{}", text.stderr);
    for says in [
        "Fleet f1 (A) against fleet f2 (B): A measured 2 of 2 hosts, B 2 of 2.",
        "Data to the hosts (upload):",
        "too few runs to test (n = 1 vs 1)",
        "Not compared: b (only A measured it",
        "A has no host \"c\"",
        "Across hosts: Jain's index ",
        "Significance: one fleet run a side, so no test is possible",
    ] {
        assert!(text.stdout.contains(says), "{says:?} in:\n{}", text.stdout);
    }
    let doc: Value = {
        let out = run(&["compare", "f1", "f2", "--db", db, "-J"], Duration::from_secs(10));
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        serde_json::from_str(&out.stdout).expect("json")
    };
    assert_eq!(
        (doc["kind"].as_str(), doc["a"].as_str()),
        (Some("linerate.fleet_compare"), Some("f1"))
    );
    let d = &doc["compared"]["fleet"]["directions"][0];
    let hosts: Vec<&str> =
        d["hosts"].as_array().expect("hosts").iter().filter_map(|h| h["label"].as_str()).collect();
    assert_eq!(hosts, ["a"]);
    assert_eq!((d["total"]["n_a"].as_u64(), d["total"]["test"].as_str()), (Some(1), Some("none")));
    let total_a = d["total"]["mean_a"].as_f64().expect("total");
    let f1 = run(&["report", "f1", "--db", db, "-f", "json"], Duration::from_secs(10));
    let f1: Value = serde_json::from_str(&f1.stdout).expect("json");
    let stored = f1["summary"]["directions"][0]["total_bits_per_second"].as_f64().expect("total");
    assert_eq!(total_a, stored, "compare reads the fleet's own total");
    let jain = &d["across_hosts"]["jain"];
    assert!(jain["a"].as_f64().is_some_and(|j| j > 0.5 && j <= 1.0), "{jain}");

    // Two curves: every host count tested with its repetitions.
    let curve = ["--scale", "1..2", "--repeat", "2", "-t", "0.5", "--seed", "3"];
    for _ in 0..2 {
        let out = fleet(&[a.clone(), b.clone()], &curve, db);
        assert_eq!(out.code, Some(0), "{}", out.stderr);
    }
    let out = run(&["compare", "f3", "last", "--db", db, "-J"], Duration::from_secs(10));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let doc: Value = serde_json::from_str(&out.stdout).expect("json");
    assert_eq!(doc["b"], "f4", "last is the newest fleet");
    let points = doc["compared"]["scale"]["directions"][0]["points"].as_array().expect("points");
    let shape: Vec<(u64, u64, u64, &str)> = points
        .iter()
        .map(|p| {
            let r = &p["result"];
            let n = |k: &str| r[k].as_u64().expect("n");
            (p["hosts"].as_u64().expect("k"), n("n_a"), n("n_b"), r["test"].as_str().expect("test"))
        })
        .collect();
    assert_eq!(shape, [(1, 2, 2, "welch_t"), (2, 2, 2, "welch_t")]);
    assert!(points.iter().all(|p| p["ci95_a"].is_array() && p["result"]["p_value"].is_f64()));
    let text = run(&["compare", "f3", "f4", "--db", db], Duration::from_secs(10));
    assert!(
        text.stdout.contains("Scaling curve f3 (A) against scaling curve f4 (B)."),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("The total stops rising: A "), "{}", text.stdout);

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
