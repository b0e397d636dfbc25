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
