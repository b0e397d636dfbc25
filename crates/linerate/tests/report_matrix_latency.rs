//! A matrix of request/response cells (`linerate matrix HOST --rr`): each cell's
//! transactions per second with mean ± 95 % CI across its repetitions and the median of its
//! runs' p50 and p99, in text, Markdown, CSV, JSON and HTML, from a frozen loopback matrix
//! (`tests/fixtures/reports/matrix-rr.json`: `--rr -P 1,2,4 --repeat 3 -t 1`); and a live
//! matrix stored and reported back.

use std::time::Duration;

use serde_json::Value;

use crate::report::{fixture, report};

/// Each run's transactions per second, computed here from its record: every client stream's
/// transactions over its measured time, summed.
fn run_rate(record: &Value) -> f64 {
    let streams = record["client"]["streams"].as_array().expect("streams");
    streams
        .iter()
        .filter(|s| s["role"] == "sender")
        .map(|s| {
            let us = s["duration_us"].as_u64().expect("us") - s["omitted_us"].as_u64().expect("us");
            s["latency"]["transactions"].as_f64().expect("transactions") / (us as f64 / 1e6)
        })
        .sum()
}

#[test]
fn a_request_response_matrix_reports_transactions_and_latency_per_cell() {
    let text = report(&[&fixture("matrix-rr.json")]);
    insta::assert_snapshot!("matrix_rr_text", text);
    insta::assert_snapshot!("matrix_rr_md", report(&[&fixture("matrix-rr.json"), "-f", "md"]));
    assert!(!text.contains("bit/s"), "no bit rate of request bytes:\n{text}");
    let doc = crate::chart_layout::fixture_json("matrix-rr.json");
    let runs = doc["runs"].as_array().expect("runs");
    let csv = report(&[&fixture("matrix-rr.json"), "-f", "csv"]);
    let mut lines = csv.split("\r\n").filter(|l| !l.is_empty());
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 3, "{csv}");
    let col = |row: &[&str], name: &str| -> String {
        row[header.iter().position(|h| *h == name).expect(name)].to_string()
    };
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row.len(), header.len());
        let of_cell: Vec<&Value> = runs.iter().filter(|r| r["cell"] == i).collect();
        let rates: Vec<f64> = of_cell.iter().map(|r| run_rate(&r["record"])).collect();
        let mean = rates.iter().sum::<f64>() / rates.len() as f64;
        assert_eq!(col(row, "transactions_per_second"), format!("{mean:.0}"), "cell {i}");
        let text_row = text.lines().find(|l| l.starts_with(&col(row, "cell"))).expect("row");
        assert!(text_row.contains(&format!("{mean:.0} ± ")), "{text_row}");
        let low: f64 = col(row, "transactions_per_second_ci95_low").parse().expect("low");
        let high: f64 = col(row, "transactions_per_second_ci95_high").parse().expect("high");
        assert!(low <= mean && mean <= high, "{low} {mean} {high}");
        assert!(col(row, "latency_p99_ns").parse::<u64>().expect("p99") > 0);
        assert_eq!(col(row, "latency_p90_ns"), "", "a matrix cell has only p50 and p99");
    }
    let json: Value =
        serde_json::from_str(&report(&[&fixture("matrix-rr.json"), "-f", "json"])).expect("JSON");
    assert_eq!(json["summary"]["cells"], doc["summary"]["cells"]);
    let html = report(&[&fixture("matrix-rr.json"), "-f", "html"]);
    let kinds: Vec<&str> =
        html.split("data-kind=\"").skip(1).filter_map(|k| k.split('"').next()).collect();
    assert_eq!(kinds, ["latency-cells"], "no throughput charts of request bytes");
    let svg = crate::report_html::chart(&html, "Transactions per second and latency per cell");
    for needle in ["transactions per second", "latency (µs)", "P=4: 95% CI of the mean "] {
        assert!(svg.contains(needle), "the chart lacks {needle:?}");
    }
}

/// A live `matrix --rr` stores its cells; `report mN` reads them back with the same figures
/// the matrix printed; `--until-ci` (a bit rate's interval) is refused with --rr.
#[test]
fn a_live_request_response_matrix_is_stored_and_reported_back() {
    let _serial = crate::util::exclusive();
    let srv = crate::util::Server::start(&["-B", "127.0.0.1"]);
    let db = crate::util::test_dir("matrix-rr").join("history.sqlite");
    let (db, port) = (db.to_string_lossy().into_owned(), srv.port.to_string());
    let args = ["matrix", "127.0.0.1", "-p", &port, "--rr", "-P", "1,2", "--repeat", "2"];
    let out = crate::util::run(
        &[&args[..], &["-t", "0.3", "--seed", "1", "--db", &db, "-J"]].concat(),
        Duration::from_secs(60),
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let printed = out.json();
    let cells = printed["summary"]["cells"].as_array().expect("cells");
    assert!(cells.iter().all(|c| c["latency"]["transactions_per_second"]["n"] == 2), "{cells:?}");
    let stored: Value =
        serde_json::from_str(&report(&["m1", "--db", &db, "-f", "json"])).expect("JSON");
    assert_eq!(stored["summary"], printed["summary"]);
    let text = report(&["m1", "--db", &db]);
    assert!(text.contains("cell (transactions/s)") && text.contains("most transactions: "));
    let refused = crate::util::run(
        &["matrix", "127.0.0.1", "-p", &port, "--rr", "--until-ci", "5"],
        Duration::from_secs(10),
    );
    assert_eq!(refused.code, Some(2), "{}", refused.stderr);
    assert!(refused.stderr.contains("--until-ci"), "{}", refused.stderr);
}

/// `compare mA mB` of two request/response matrices compares each cell's transactions per
/// second across its runs (Welch's test), not the bit rate of its request bytes; the HTML page
/// draws each side's transactions and latency per cell, no throughput chart.
#[test]
fn compare_of_request_response_matrices_compares_transactions_per_second() {
    let dir = crate::util::test_dir("compare-matrix-rr");
    let db = dir.join("history.sqlite");
    let mut store = linerate::store::Store::open(&db).expect("history");
    let (a, b) = (
        crate::chart_layout::store_matrix(&mut store, "matrix-rr.json"),
        crate::chart_layout::store_matrix(&mut store, "matrix-rr.json"),
    );
    drop(store);
    let (db, a, b) = (db.to_string_lossy().into_owned(), format!("m{a}"), format!("m{b}"));
    let run = |args: &[&str]| {
        let out = crate::util::run(args, Duration::from_secs(20));
        assert_eq!(out.code, Some(0), "{args:?}: {}", out.stderr);
        out.stdout
    };
    let text = run(&["compare", &a, &b, "--db", &db]);
    assert!(!text.contains("bit/s"), "{text}");
    let doc = crate::chart_layout::fixture_json("matrix-rr.json");
    let mean = doc["summary"]["cells"][0]["latency"]["transactions_per_second"]["mean"]
        .as_f64()
        .expect("mean");
    let row = text.lines().find(|l| l.starts_with("P=1 ")).expect("P=1 row");
    assert!(row.contains(&format!("{mean:.0} tr/s (n=3)")), "{row}");
    let json: Value =
        serde_json::from_str(&run(&["compare", &a, &b, "--db", &db, "-J"])).expect("JSON");
    assert_eq!(json[0]["transactions"], true);
    assert!((json[0]["result"]["mean_a"].as_f64().expect("mean") - mean).abs() < 1e-6);
    let page = dir.join("compare.html");
    run(&["compare", &a, &b, "--db", &db, "--html", &page.to_string_lossy()]);
    let html = std::fs::read_to_string(&page).expect("page");
    let kinds: Vec<&str> =
        html.split("data-kind=\"").skip(1).filter_map(|k| k.split('"').next()).collect();
    assert_eq!(kinds, ["latency-cells", "latency-cells"], "A's and B's cells, nothing else");
}
