//! Trends over a real shaped link: `client --every` fills a history over two namespaces joined
//! by a veth pair shaped with `tc tbf`, and `report --trend` must find the step where the link
//! went from 1 Gbit/s to 600 Mbit/s, at the run where it happened, and nothing in a series the
//! link kept flat (the machine's own noise). Traffic stays inside the test's namespaces.

use std::time::Duration;

use serde_json::Value;

use crate::netns::{KillOnDrop, ShapedLink, namespaces_available, run_in};
use crate::util::{exclusive, run, test_dir};

/// `client --every` runs of `count` half-second tests from `a` to `b`, stored in `db`, without
/// interval samples, with `extra` flags.
fn fill(link: &ShapedLink, db: &str, count: u32, extra: &[&str]) {
    let count = count.to_string();
    let mut args = vec![
        "client",
        &link.addr_b,
        "-t",
        "0.5",
        "-i",
        "0",
        "--every",
        "0.2",
        "--count",
        &count,
        "--db",
        db,
        "-J",
    ];
    args.extend_from_slice(extra);
    let out = run_in(&link.a, &args);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
}

/// `report --trend` of `db` in `format`.
fn trend(db: &str, target: &str, format: &str) -> String {
    let out =
        run(&["report", "--trend", target, "--db", db, "-f", format], Duration::from_secs(30));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    out.stdout
}

#[test]
fn a_link_that_slowed_is_found_at_the_run_it_slowed_and_a_flat_one_is_not() {
    let serial = exclusive();
    if !namespaces_available() {
        return;
    }
    let link = ShapedLink::new("t", "1gbit");
    let server = KillOnDrop(link.spawn_in(&link.b, &["server", "-p", "5201", "-B", &link.addr_b]));
    std::thread::sleep(Duration::from_millis(400));
    let dir = test_dir("trend");
    let (flat, step) = (dir.join("flat.sqlite"), dir.join("step.sqlite"));
    let (flat, step) = (flat.to_str().expect("path"), step.to_str().expect("path"));

    // 25 runs at 1 Gbit/s are the first half of both histories.
    fill(&link, flat, 25, &[]);
    std::fs::copy(flat, step).expect("copy the history");
    // The flat one: 25 more at 1 Gbit/s.
    fill(&link, flat, 25, &[]);
    // The step: the link slows to 600 Mbit/s for the next 25.
    for side_a in [true, false] {
        link.shape(side_a, Some(["600mbit", "256kb", "20ms"]));
    }
    fill(&link, step, 25, &[]);

    let doc: Value = serde_json::from_str(&trend(flat, &link.addr_b, "json")).expect("json");
    assert_eq!(doc["kind"], "linerate.trend");
    let series = doc["trend"]["series"].as_array().expect("series");
    assert_eq!(series.len(), 1, "one test, one series: {series:?}");
    let points = series[0]["points"].as_array().expect("points");
    assert_eq!(points.len(), 50);
    let rates: Vec<f64> =
        points.iter().map(|p| p["bits_per_second"].as_f64().expect("rate")).collect();
    let (lo, hi) = rates.iter().fold((f64::MAX, 0f64), |(l, h), r| (l.min(*r), h.max(*r)));
    eprintln!("FIGURE trend_flat_range_mbit = {:.1}..{:.1}", lo / 1e6, hi / 1e6);
    assert_eq!(series[0]["changes"], serde_json::json!([]), "a flat link: {rates:?}");

    let doc: Value = serde_json::from_str(&trend(step, &link.addr_b, "json")).expect("json");
    let s = &doc["trend"]["series"][0];
    let points = s["points"].as_array().expect("points");
    assert_eq!(points.len(), 50);
    let changes = s["changes"].as_array().expect("changes");
    assert_eq!(changes.len(), 1, "one step: {changes:?}");
    let c = &changes[0];
    assert_eq!(c["at"], 25, "the 26th run is the first at 600 Mbit/s");
    assert_eq!(c["run"], points[25]["run"]);
    assert_eq!(c["regression"], true);
    let (before, after) = (c["before"].as_f64().expect("b"), c["after"].as_f64().expect("a"));
    eprintln!(
        "FIGURE trend_step_mbit = {:.1} -> {:.1}, p = {}",
        before / 1e6,
        after / 1e6,
        c["p_value"]
    );
    // TCP goodput through tbf: 1448/1514 of the shaped rate.
    let goodput = |rate: f64| rate * 1448.0 / 1514.0;
    assert!((before / goodput(1e9) - 1.0).abs() < 0.05, "before: {before}");
    assert!((after / goodput(600e6) - 1.0).abs() < 0.05, "after: {after}");

    // The other formats say the same.
    let run_id = c["run"].to_string();
    let text = trend(step, &link.addr_b, "text");
    assert!(text.contains(&format!("run {run_id},")) && text.contains("a regression"), "{text}");
    let md = trend(step, &link.addr_b, "md");
    assert!(md.contains("a regression") && md.contains("| runs |"), "{md}");
    let csv = trend(step, &link.addr_b, "csv");
    let changed: Vec<&str> =
        csv.lines().skip(1).filter(|l| l.ends_with(",1\r") || l.ends_with(",1")).collect();
    assert_eq!(changed.len(), 1, "{csv}");
    assert!(changed[0].contains(&format!(",{run_id},")), "{}", changed[0]);
    let page = dir.join("trend.html");
    let out = run(
        &[
            "report",
            "--trend",
            &link.addr_b,
            "--db",
            step,
            "-f",
            "html",
            "-o",
            page.to_str().expect("p"),
        ],
        Duration::from_secs(30),
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let html = std::fs::read_to_string(&page).expect("page");
    assert!(html.contains("data-kind=\"trend\"") && html.contains("a regression"));
    // `history --target HOST --since` lists the same runs.
    let out = run(
        &["history", "--target", &link.addr_b, "--since", "1h", "--db", step, "--limit", "100"],
        Duration::from_secs(10),
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout.lines().skip(1).filter(|l| l.contains("completed")).count(), 50);

    // The page reads in Chromium (its check takes the serial lock itself).
    drop((server, link, serial));
    if let Some((problems, kinds)) = crate::chart_layout::check_page(&page) {
        assert!(problems.is_empty(), "layout problems:\n{}", problems.join("\n"));
        // One chart, seen in each of the check's windows.
        assert!(!kinds.is_empty() && kinds.iter().all(|k| k == "trend"), "{kinds:?}");
    }
}

/// Watching a link: 12 runs at 200 Mbit/s then 2 at 120 are a fresh drop at once (the step
/// test needs five runs after a change), and 14 runs each 4 % slower than the one before are
/// one drift, not steps. Each run over the shaped link, as `client --every` stores them.
#[test]
fn a_fresh_drop_is_named_after_two_runs_and_a_slow_decline_is_a_drift() {
    let serial = exclusive();
    if !namespaces_available() {
        return;
    }
    let link = ShapedLink::new("w", "200mbit");
    let server = KillOnDrop(link.spawn_in(&link.b, &["server", "-p", "5201", "-B", &link.addr_b]));
    std::thread::sleep(Duration::from_millis(400));
    let dir = test_dir("trend-watch");
    let (drop_db, drift_db) = (dir.join("drop.sqlite"), dir.join("drift.sqlite"));
    let (drop_db, drift_db) = (drop_db.to_str().expect("path"), drift_db.to_str().expect("path"));
    let shape = |rate: &str| {
        for side_a in [true, false] {
            link.shape(side_a, Some([rate, "64kb", "20ms"]));
        }
    };
    shape("200mbit");
    fill(&link, drop_db, 12, &[]);
    shape("120mbit");
    fill(&link, drop_db, 2, &[]);
    let series = |db: &str| -> Value {
        let doc: Value = serde_json::from_str(&trend(db, &link.addr_b, "json")).expect("json");
        doc["trend"]["series"][0].clone()
    };
    let s = series(drop_db);
    let rates: Vec<f64> = s["points"]
        .as_array()
        .expect("points")
        .iter()
        .map(|p| p["bits_per_second"].as_f64().expect("rate"))
        .collect();
    let fresh = &s["fresh_drop"];
    assert_eq!((fresh["runs"].as_u64(), fresh["before_runs"].as_u64()), (Some(2), Some(12)), "{s}");
    let relative = fresh["relative"].as_f64().expect("relative");
    eprintln!("FIGURE trend_fresh_drop = {:.1} % after 12 runs: {rates:?}", relative * 100.0);
    assert!((relative + 0.4).abs() < 0.05, "200 → 120 Mbit/s: {relative}");
    let text = trend(drop_db, &link.addr_b, "text");
    assert!(text.contains("fresh drop: the last 2 runs after a stable 12"), "{text}");
    assert!(!text.contains("no change found"), "{text}");

    let mut rate = 200.0f64;
    for _ in 0..14 {
        shape(&format!("{:.0}kbit", rate * 1000.0));
        fill(&link, drift_db, 1, &[]);
        rate *= 0.96;
    }
    let s = series(drift_db);
    let d = &s["drift"];
    let per_run = d["relative_per_run"].as_f64().unwrap_or_else(|| panic!("a drift: {s}"));
    eprintln!("FIGURE trend_drift_per_run = {:.2} %, p = {}", per_run * 100.0, d["p_value"]);
    assert!((per_run + 0.04).abs() < 0.01, "4 % a run: {per_run}");
    assert_eq!(s["changes"], serde_json::json!([]), "one drift, no steps: {s}");
    let text = trend(drift_db, &link.addr_b, "text");
    assert!(text.contains("drift: -4.") || text.contains("drift: -3."), "{text}");
    assert!(text.contains("over 14 runs") && !text.contains("a regression"), "{text}");
    drop((server, link, serial));
}

/// A path's figures are watched beside its rate: UDP at 240 Mbit/s through a link of 200
/// loses about an eighth (12 runs), then through one of 120 almost half (2 runs), and the
/// trend names the loss's fresh rise. (The rate's drop is not asserted: a sender slowed by a
/// busy machine sends below the link, loses nothing, and makes the runs before less stable.)
#[test]
fn a_loss_that_rose_is_named_beside_the_rate() {
    let serial = exclusive();
    if !namespaces_available() {
        return;
    }
    let link = ShapedLink::new("l", "200mbit");
    let server = KillOnDrop(link.spawn_in(&link.b, &["server", "-p", "5201", "-B", &link.addr_b]));
    std::thread::sleep(Duration::from_millis(400));
    let dir = test_dir("trend-loss");
    let db = dir.join("loss.sqlite");
    let db = db.to_str().expect("path");
    let shape = |rate: &str| {
        for side_a in [true, false] {
            link.shape(side_a, Some([rate, "256kb", "20ms"]));
        }
    };
    let udp = ["-u", "-b", "240M"];
    fill(&link, db, 12, &udp);
    shape("120mbit");
    fill(&link, db, 2, &udp);
    let doc: Value = serde_json::from_str(&trend(db, &link.addr_b, "json")).expect("json");
    let s = &doc["trend"]["series"][0];
    let losses: Vec<f64> = s["points"]
        .as_array()
        .expect("points")
        .iter()
        .map(|p| p["loss_percent"].as_f64().expect("every UDP run has its loss"))
        .collect();
    eprintln!("FIGURE trend_loss_percent = {losses:?}");
    let path = s["path"].as_array().expect("path");
    let loss = path.iter().find(|p| p["figure"] == "loss_percent").unwrap_or_else(|| panic!("{s}"));
    let rise = &loss["fresh_rise"];
    assert_eq!(
        (rise["runs"].as_u64(), rise["before_runs"].as_u64()),
        (Some(2), Some(12)),
        "{loss}"
    );
    assert!(rise["relative"].as_f64().is_some_and(|r| r > 0.5), "{loss}");
    let text = trend(db, &link.addr_b, "text");
    let said = text.lines().find(|l| l.contains("loss: fresh rise")).unwrap_or_default();
    eprintln!("FIGURE trend_loss_finding = {said}");
    assert!(said.contains("loss: fresh rise: the last 2 runs after a stable 12: +"), "{text}");
    drop((server, link, serial));
}
