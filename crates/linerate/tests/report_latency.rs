//! `linerate report` of latency runs, from frozen fixtures of real loopback runs
//! (tests/fixtures/reports: `rr.json`, `linerate client --rr -P 2 -t 3`; `under-load.json`,
//! `--under-load -P 2 -t 6`): every format leads with transactions and latency instead of a
//! bit rate of request bytes, the figures agree with the run's own summary, and a record whose
//! histograms hold nothing reports n/a instead of failing.

use std::time::Duration;

use serde_json::Value;

use crate::report::{fixture, report};

fn doc(file: &str) -> Value {
    crate::chart_layout::fixture_json(file)
}

/// The CSV row of a single run as (column, field) pairs.
fn csv_row(file: &str, kind: &str) -> Vec<(String, String)> {
    let csv = report(&[&fixture(file), "-f", "csv", "--csv-kind", kind]);
    let mut lines = csv.split("\r\n").filter(|l| !l.is_empty());
    let header: Vec<String> = lines.next().expect("header").split(',').map(String::from).collect();
    let row = lines.next().expect("a row");
    header.into_iter().zip(row.split(',').map(String::from)).collect()
}

fn field<'a>(row: &'a [(String, String)], column: &str) -> &'a str {
    row.iter().find(|(c, _)| c == column).map(|(_, v)| v.as_str()).unwrap_or_else(|| {
        panic!("no column {column}");
    })
}

#[test]
fn a_request_response_run_reports_transactions_and_latency_in_every_format() {
    let text = report(&[&fixture("rr.json")]);
    insta::assert_snapshot!("rr_text", text);
    insta::assert_snapshot!("rr_md", report(&[&fixture("rr.json"), "-f", "md"]));
    // The headline is transactions, not a bit rate of request bytes.
    assert!(!text.contains("bit/s"), "{text}");
    let summary = &doc("rr.json")["summary"]["latency"];
    let row = |name: &str| {
        text.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("{name}:\n{text}"))
    };
    let rate = summary["transactions_per_second"].as_f64().expect("rate");
    assert!(row("transactions per second").ends_with(&format!("{rate:.0}")));
    assert!(row("latency p99.99").ends_with(" us") || row("latency p99.99").ends_with(" ms"));
    // CSV: the run's own figures, exactly.
    let csv = csv_row("rr.json", "cells");
    for (column, key) in [
        ("latency_p50_ns", "p50_ns"),
        ("latency_p99_9_ns", "p99_9_ns"),
        ("latency_max_ns", "max_ns"),
        ("transactions", "transactions"),
    ] {
        assert_eq!(field(&csv, column), summary[key].to_string(), "{column}");
    }
    assert_eq!(field(&csv, "transactions_per_second"), format!("{rate:.0}"));
    assert_eq!(field(&csv, "loaded_p50_ns"), "", "not a test under load");
    let intervals = csv_row("rr.json", "intervals");
    let first = &doc("rr.json")["record"]["client"]["streams"][0]["intervals"][0]["rr"];
    assert_eq!(field(&intervals, "transactions"), first["transactions"].to_string());
    assert_eq!(field(&intervals, "latency_p99_ns"), first["p99_ns"].to_string());
    // JSON: the summary derived again from the record is the one the run printed.
    let json: Value =
        serde_json::from_str(&report(&[&fixture("rr.json"), "-f", "json"])).expect("JSON");
    assert_eq!(json["summary"]["latency"], *summary);
}

#[test]
fn a_test_under_load_reports_idle_against_loaded_probes_in_every_format() {
    let text = report(&[&fixture("under-load.json")]);
    insta::assert_snapshot!("under_load_text", text);
    insta::assert_snapshot!("under_load_md", report(&[&fixture("under-load.json"), "-f", "md"]));
    let u = &doc("under-load.json")["summary"]["under_load"];
    // The load's throughput table stays: the test is a bulk test with probes beside it.
    assert!(text.contains("Gbit/s received"), "{text}");
    let finding = u["finding"].as_str().expect("finding");
    assert!(text.contains(finding), "{text}");
    let rpm = u["responsiveness"]["rpm"].as_f64().expect("rpm");
    assert!(text.contains(&format!("Responsiveness: {rpm:.0} RPM")), "{text}");
    let csv = csv_row("under-load.json", "cells");
    assert_eq!(field(&csv, "idle_p50_ns"), u["idle"]["p50_ns"].to_string());
    assert_eq!(field(&csv, "loaded_p99_ns"), u["loaded"]["p99_ns"].to_string());
    assert_eq!(field(&csv, "added_p50_ns"), u["added_p50_ns"].to_string());
    assert_eq!(field(&csv, "responsiveness_rating"), u["responsiveness"]["rating"]);
    assert_eq!(field(&csv, "responsiveness_confidence"), u["responsiveness"]["confidence"]);
    assert_eq!(field(&csv, "transactions_per_second"), "", "not a request/response run");
    let json: Value =
        serde_json::from_str(&report(&[&fixture("under-load.json"), "-f", "json"])).expect("JSON");
    assert_eq!(json["summary"]["under_load"], *u);
}

/// Histograms that hold nothing (a record edited, or cut short) give n/a figures and no CDF,
/// in every format; a histogram that is not one is refused as bad input (exit 2), not a panic.
#[test]
fn empty_or_malformed_histograms_give_n_a_or_a_clear_error() {
    let dir = crate::util::test_dir("report-latency-bad");
    let mut rr = doc("rr.json");
    for s in rr["record"]["client"]["streams"].as_array_mut().expect("streams") {
        s["latency"]["histogram"]["buckets"] = serde_json::json!([]);
    }
    let mut ul = doc("under-load.json");
    ul["record"]["probes"]["loaded"]["latency"]["histogram"]["buckets"] = serde_json::json!([]);
    for (name, d) in [("rr", &rr), ("ul", &ul)] {
        let file = dir.join(format!("{name}.json"));
        std::fs::write(&file, d.to_string()).expect("write");
        let file = file.to_string_lossy().into_owned();
        for format in ["text", "md", "csv", "json", "html"] {
            report(&[&file, "-f", format]);
        }
        let text = report(&[&file]);
        match name {
            "rr" => {
                let p50 = text.lines().find(|l| l.starts_with("latency p50")).expect("p50");
                assert!(p50.ends_with(" n/a"), "{text}");
            }
            _ => assert!(text.contains("loaded probes: n/a"), "{text}"),
        }
    }
    let html = report(&[&dir.join("rr.json").to_string_lossy(), "-f", "html"]);
    assert!(!html.contains("data-kind=\"latency-cdf\""), "a CDF of nothing");
    let mut bad = doc("rr.json");
    bad["record"]["client"]["streams"][0]["latency"]["histogram"]["buckets"] =
        serde_json::json!([["ten", 1]]);
    let file = dir.join("bad.json");
    std::fs::write(&file, bad.to_string()).expect("write");
    let out =
        crate::util::run(&["report", &file.to_string_lossy()], std::time::Duration::from_secs(10));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
}

/// The value of the row named `name` of a two-column HTML table in `html`.
pub fn table_value(html: &str, name: &str) -> String {
    let cell = format!("<td>{name}</td><td class=\"num\">");
    let at = html.find(&cell).unwrap_or_else(|| panic!("no row {name:?}")) + cell.len();
    html[at..].split("</td>").next().expect("value").to_string()
}

/// A history holding the frozen request/response runs (ids 1, 2) and tests under load (3, 4),
/// stored as single tests; returns its path.
pub fn latency_history(name: &str) -> String {
    use linerate::store::{RunKind, RunMeta, Store};
    let db = crate::util::test_dir(name).join("history.sqlite");
    let _ = std::fs::remove_file(&db);
    let mut store = Store::open(&db).expect("history");
    for file in ["rr.json", "rr-b.json", "under-load.json", "under-load-b.json"] {
        let record: linerate::record::RunRecord =
            serde_json::from_value(doc(file)["record"].clone()).expect("record");
        let meta = RunMeta {
            kind: RunKind::Test,
            group: None,
            cell: None,
            repetition: None,
            labels: Vec::new(),
        };
        store.insert_run(&record, &meta).expect("store");
    }
    db.to_string_lossy().into_owned()
}

fn linerate(args: &[&str]) -> String {
    let out = crate::util::run(args, std::time::Duration::from_secs(20));
    assert_eq!(out.code, Some(0), "{args:?}: {}", out.stderr);
    out.stdout
}

/// `history` lists a request/response run by its transactions per second and latency (not
/// a bit rate of request bytes), a test under load with its probes and responsiveness; `show`
/// prints both as the client did.
#[test]
fn history_and_show_list_latency_runs_by_their_latency() {
    let db = latency_history("history-latency");
    let text = linerate(&["history", "--db", &db]);
    let rr = doc("rr.json")["summary"]["latency"].clone();
    let line = |id: &str| -> Vec<&str> {
        let mut lines = text.lines().skip_while(|l| !l.trim_start().starts_with(&format!("{id} ")));
        vec![lines.next().expect("run line"), lines.next().unwrap_or_default()]
    };
    let rate = rr["transactions_per_second"].as_f64().expect("rate");
    let run1 = line("1");
    assert!(run1[0].contains(&format!("{rate:.0} tr/s")) && !run1[0].contains("bit/s"), "{text}");
    let p50 = linerate::units::format_latency_ns(rr["p50_ns"].as_u64().expect("p50"));
    assert!(
        run1[1].trim()
            == format!(
                "latency p50 {p50}, p99 {}",
                linerate::units::format_latency_ns(rr["p99_ns"].as_u64().expect("p99"))
            ),
        "{text}"
    );
    let u = doc("under-load.json")["summary"]["under_load"].clone();
    let run3 = line("3");
    assert!(run3[0].contains("Gbit/s"), "the load's rate stays: {text}");
    let rpm = u["responsiveness"]["rpm"].as_f64().expect("rpm");
    assert!(run3[1].contains(&format!("{rpm:.0} RPM (high)")), "{text}");
    let loaded = linerate::units::format_latency_ns(u["loaded"]["p50_ns"].as_u64().expect("p50"));
    assert!(run3[1].contains(&format!("{loaded} loaded")), "{text}");
    let json: Value =
        serde_json::from_str(&linerate(&["history", "--db", &db, "-J"])).expect("JSON");
    let by_id = |id: u64| json.as_array().expect("rows").iter().find(|r| r["id"] == id).cloned();
    let listed = by_id(1).expect("run 1");
    assert_eq!(listed["latency"]["p50_ns"], rr["p50_ns"]);
    assert_eq!(by_id(3).expect("run 3")["latency"]["rating"], "high");
    let stored = linerate(&["report", "1", "--db", &db]);
    assert!(stored.contains("== Request/response latency (closed loop"), "{stored}");
    assert!(stored.lines().any(|l| l.starts_with("transactions per second")), "{stored}");
    let shown = linerate(&["show", "1", "--db", &db]);
    assert!(shown.contains(&format!("{rate:.0} per second")), "{shown}");
    let shown = linerate(&["show", "3", "--db", &db]);
    assert!(shown.contains(&format!("Responsiveness: {rpm:.0} RPM")), "{shown}");
}

/// `compare` of two request/response runs: each figure of A and B with the change and the
/// setting that differs (in flight 1 → 4), no throughput of request bytes; of two tests under
/// load: the throughput and the probes' figures; of a request/response run and another kind:
/// refused (exit 2) naming both kinds. The HTML page draws both sides' CDFs on one chart.
#[test]
fn compare_sets_latency_runs_side_by_side_and_refuses_mixed_kinds() {
    let db = latency_history("compare-latency");
    let text = linerate(&["compare", "1", "2", "--db", &db]);
    let (a, b) = (doc("rr.json"), doc("rr-b.json"));
    let p99 = |d: &Value| {
        linerate::units::format_latency_ns(d["summary"]["latency"]["p99_ns"].as_u64().expect("p99"))
    };
    let row = text.lines().find(|l| l.starts_with("latency p99 ")).expect("p99 row");
    assert!(row.contains(&p99(&a)) && row.contains(&p99(&b)) && row.ends_with("(worse)"), "{row}");
    assert!(text.contains("1 in flight, closed loop → 1 B requests, 1 B responses, 4 in flight"));
    assert!(!text.contains("bit/s"), "no throughput of request bytes:\n{text}");
    let json: Value =
        serde_json::from_str(&linerate(&["compare", "1", "2", "--db", &db, "-J"])).expect("JSON");
    let latency = &json[0]["latency"];
    assert_eq!(latency["kind"], "request_response");
    let rate = &latency["figures"][0];
    assert_eq!(rate["figure"], "transactions_per_second");
    assert_eq!(rate["a"], a["summary"]["latency"]["transactions_per_second"]);
    assert_eq!(rate["b"], b["summary"]["latency"]["transactions_per_second"]);
    let loaded = linerate(&["compare", "3", "4", "--db", &db]);
    assert!(loaded.contains("Gbit/s (n=1)"), "the load's throughput is compared:\n{loaded}");
    let rpm = loaded.lines().find(|l| l.starts_with("responsiveness (RPM)")).expect("RPM");
    let u = doc("under-load.json")["summary"]["under_load"]["responsiveness"]["rpm"].clone();
    assert!(rpm.contains(&format!("{:.0}", u.as_f64().expect("rpm"))), "{rpm}");
    let mixed = crate::util::run(&["compare", "1", "3", "--db", &db], Duration::from_secs(10));
    assert_eq!(mixed.code, Some(2), "{}", mixed.stderr);
    for kind in ["a request/response test (--rr)", "a test under load (--under-load)"] {
        assert!(mixed.stderr.contains(kind), "{}", mixed.stderr);
    }
    let page = crate::util::test_dir("compare-latency-html").join("compare.html");
    let page_s = page.to_string_lossy().into_owned();
    linerate(&["compare", "1", "2", "--db", &db, "--html", &page_s]);
    let html = std::fs::read_to_string(&page).expect("page");
    assert!(!html.contains("data-kind=\"compare\""), "no throughput chart of request bytes");
    let svg = crate::report_html::chart(
        &html,
        "A and B: latency distribution (CDF) of their transactions",
    );
    assert!(svg.contains("A: 387574 transactions") && svg.contains("B: 1385276 transactions"));
}
