//! CSV for spreadsheets and plotting scripts, in the two layouts of docs/CSV.md: one row per
//! cell summary (`--csv-kind cells`) or one row per (run, stream, interval)
//! (`--csv-kind intervals`).
//!
//! Columns are stable (new ones are only appended) and carry their unit in the name. A figure
//! that was not measured is an empty field, never 0. Numbers are rounded to what was measured
//! (bit/s and bytes as integers, CPU percentages to 0.1, fractions to 4 decimals, seconds to
//! the microsecond), with `.` as the decimal point; text fields are quoted when they hold `,`,
//! `"`, CR or LF (RFC 4180). Must not compute figures: everything comes from the report model.

use std::io::Write;

use linerate_proto::{Direction, Protocol, StreamRole};

use crate::plan::CsvKind;
use crate::plan::matrix::AxisValue;
use crate::record::RunRecord;
use crate::report::fleet::{outcome_word, run_hosts};
use crate::report::model::{Report, Series};
use crate::stats::campaign_fleet::FleetTierFigures;
use crate::stats::fleet::{FleetDirection, HostFigures};
use crate::stats::matrix::CellSummary;

/// Columns of `--csv-kind cells`, in order.
pub const CELL_COLUMNS: [&str; 49] = [
    "tier",
    "server",
    "cell",
    "streams",
    "window_bytes",
    "length_bytes",
    "protocol",
    "direction",
    "runs",
    "failed_runs",
    "min_bits_per_second",
    "median_bits_per_second",
    "max_bits_per_second",
    "mean_bits_per_second",
    "stddev_bits_per_second",
    "ci95_low_bits_per_second",
    "ci95_high_bits_per_second",
    "cv_fraction",
    "client_cpu_percent_of_core",
    "server_cpu_percent_of_core",
    "peak_rss_bytes",
    "retransmits_per_run",
    "udp_loss_percent",
    "fairness_jain",
    "link_share_fraction",
    "verdict",
    "interrupted_runs",
    "transactions_per_second",
    "transactions",
    "latency_min_ns",
    "latency_p50_ns",
    "latency_p90_ns",
    "latency_p99_ns",
    "latency_p99_9_ns",
    "latency_p99_99_ns",
    "latency_max_ns",
    "latency_mean_ns",
    "client_cpu_us_per_transaction",
    "server_cpu_us_per_transaction",
    "idle_p50_ns",
    "idle_p99_ns",
    "loaded_p50_ns",
    "loaded_p99_ns",
    "added_p50_ns",
    "responsiveness_rpm",
    "responsiveness_rating",
    "responsiveness_confidence",
    "transactions_per_second_ci95_low",
    "transactions_per_second_ci95_high",
];

/// Columns of `--csv-kind intervals`, in order.
pub const INTERVAL_COLUMNS: [&str; 21] = [
    "run_id",
    "tier",
    "cell",
    "repetition",
    "run_started_unix_ms",
    "run_outcome",
    "end",
    "stream",
    "flow",
    "role",
    "interval_start_seconds",
    "interval_end_seconds",
    "bytes",
    "bits_per_second",
    "omitted",
    "retransmits_total",
    "server",
    "transactions",
    "latency_p50_ns",
    "latency_p99_ns",
    "latency_max_ns",
];

/// Writes the report as CSV of the given layout.
pub fn write(report: &Report, kind: CsvKind, out: &mut dyn Write) -> std::io::Result<()> {
    match (kind, report.fleet()) {
        (CsvKind::Cells, Some(f)) => write_fleet(report, f, out),
        (CsvKind::Cells, None) => cells(report, out),
        (CsvKind::Intervals, _) => intervals(report, out),
    }
}

/// One field, quoted if it must be.
pub fn field(s: &str) -> String {
    if s.contains([',', '"', '\r', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn line(out: &mut dyn Write, fields: &[String]) -> std::io::Result<()> {
    let quoted: Vec<String> = fields.iter().map(|f| field(f)).collect();
    write!(out, "{}\r\n", quoted.join(","))
}

/// The name serde gives a unit variant, e.g. `client_to_server`.
fn serde_name<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default()
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// `v` to `decimals` places, without trailing zeros (`44.8`, `3`, `0.1771`); empty for None.
fn fixed(v: Option<f64>, decimals: usize) -> String {
    let Some(v) = v.filter(|v| v.is_finite()) else { return String::new() };
    let text = format!("{v:.decimals$}");
    let text =
        if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.') } else { &text };
    if text == "-0" { "0".to_string() } else { text.to_string() }
}

/// Bits per second (or bytes) as a whole number: nothing below one was measured.
fn whole(v: Option<f64>) -> String {
    fixed(v, 0)
}

fn cells(report: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    line(out, &CELL_COLUMNS.map(String::from))?;
    for (i, t) in report.tiers.iter().enumerate() {
        for c in &t.summary.cells {
            let mut row = vec![t.name.clone(), t.server.clone(), c.label.clone()];
            row.extend(axis_fields(c));
            row.extend(figures(c));
            row.extend(latency_fields(report.single_run(i).map(|r| &r.summary), c));
            line(out, &row)?;
        }
    }
    Ok(())
}

/// The latency columns of a single run's row (a request/response run, a test under load);
/// empty for a bulk run and in matrices and campaigns.
fn latency_fields(summary: Option<&crate::stats::Summary>, c: &CellSummary) -> Vec<String> {
    if let Some(cell) = c.latency.as_ref().filter(|_| summary.is_none()) {
        return matrix_latency_fields(cell);
    }
    let l = summary.and_then(|s| s.latency.as_ref());
    let mut f = vec![
        whole(l.and_then(|l| l.transactions_per_second)),
        opt(l.map(|l| l.transactions)),
        opt(l.and_then(|l| l.min_ns)),
    ];
    f.extend(l.map_or([None; 5], |l| l.percentiles()).map(opt));
    f.extend([
        opt(l.and_then(|l| l.max_ns)),
        opt(l.and_then(|l| l.mean_ns)),
        fixed(l.and_then(|l| l.client_cpu_us_per_transaction), 3),
        fixed(l.and_then(|l| l.server_cpu_us_per_transaction), 3),
    ]);
    let u = summary.and_then(|s| s.under_load.as_ref());
    let (idle, loaded) = (u.and_then(|u| u.idle.as_ref()), u.and_then(|u| u.loaded.as_ref()));
    let rpm = u.and_then(|u| u.responsiveness.as_ref());
    f.extend([
        opt(idle.and_then(|p| p.p50_ns)),
        opt(idle.and_then(|p| p.p99_ns)),
        opt(loaded.and_then(|p| p.p50_ns)),
        opt(loaded.and_then(|p| p.p99_ns)),
        opt(u.and_then(|u| u.added_p50_ns)),
        whole(rpm.map(|r| r.rpm)),
        rpm.map_or(String::new(), |r| r.rating.to_string()),
        rpm.map_or(String::new(), |r| r.confidence.to_string()),
    ]);
    // A single run has no interval across repetitions.
    f.extend([String::new(), String::new()]);
    f
}

/// The latency columns of a request/response matrix cell: the mean transactions per second
/// with its interval, the medians across runs of each run's p50 and p99, and mean CPU per
/// transaction; the columns only a single run has stay empty.
fn matrix_latency_fields(c: &crate::stats::matrix_latency::CellLatency) -> Vec<String> {
    let s = c.transactions_per_second.as_ref();
    let mut f = vec![whole(s.map(|s| s.mean)), String::new(), String::new()];
    f.extend([opt(c.p50_ns), String::new(), opt(c.p99_ns), String::new(), String::new()]);
    f.extend([String::new(), String::new()]);
    f.extend([
        fixed(c.client_cpu_us_per_transaction, 3),
        fixed(c.server_cpu_us_per_transaction, 3),
    ]);
    f.extend(std::iter::repeat_n(String::new(), 8));
    f.extend([
        whole(s.and_then(|s| s.ci95).map(|c| c.0)),
        whole(s.and_then(|s| s.ci95).map(|c| c.1)),
    ]);
    f
}

/// streams, window_bytes, length_bytes, protocol, direction: the cell's axis values (empty
/// where the axis was not varied).
fn axis_fields(c: &CellSummary) -> [String; 5] {
    let mut f: [String; 5] = Default::default();
    for v in &c.values {
        match *v {
            AxisValue::Parallel(p) => f[0] = p.to_string(),
            AxisValue::Window(w) => f[1] = w.map_or("default".into(), |w| w.bytes().to_string()),
            AxisValue::Length(l) => f[2] = l.map_or("default".into(), |l| l.bytes().to_string()),
            AxisValue::Protocol(p) => {
                f[3] = match p {
                    Protocol::Tcp => "tcp",
                    Protocol::Udp => "udp",
                }
                .into()
            }
            AxisValue::Direction(d) => {
                f[4] = match d {
                    Direction::Upload => "upload",
                    Direction::Download => "download",
                    Direction::Bidirectional => "bidirectional",
                }
                .into()
            }
        }
    }
    f
}

fn figures(c: &CellSummary) -> Vec<String> {
    let s = c.bits_per_second.as_ref();
    vec![
        c.runs.to_string(),
        c.failed.to_string(),
        whole(s.map(|s| s.min)),
        whole(s.map(|s| s.median)),
        whole(s.map(|s| s.max)),
        whole(s.map(|s| s.mean)),
        whole(s.and_then(|s| s.stddev)),
        whole(s.and_then(|s| s.ci95).map(|c| c.0)),
        whole(s.and_then(|s| s.ci95).map(|c| c.1)),
        fixed(s.and_then(|s| s.cv), 4),
        fixed(c.client_cpu_percent, 1),
        fixed(c.server_cpu_percent, 1),
        opt(c.peak_rss_bytes),
        fixed(c.retransmits, 1),
        // Loss as small as one datagram in a million is still a figure.
        fixed(c.loss_percent, 4),
        fixed(c.fairness, 4),
        fixed(c.link_share, 4),
        c.limit.clone().unwrap_or_default(),
        c.interrupted.to_string(),
    ]
}

/// Where an interval row's run belongs: its history id, tier, cell and repetition.
struct RunPlace<'a> {
    id: Option<i64>,
    tier: &'a str,
    cell: &'a str,
    repetition: u32,
    record: &'a RunRecord,
}

fn intervals(report: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    line(out, &INTERVAL_COLUMNS.map(String::from))?;
    for s in &report.series {
        let run = &report.runs[s.run];
        let place = RunPlace {
            id: run.id,
            tier: &report.tiers[run.tier].name,
            cell: &report.cell_label(run),
            repetition: run.repetition,
            record: &run.record,
        };
        interval_rows(&place, s, out)?;
    }
    Ok(())
}

/// The rows of one stream's intervals.
fn interval_rows(place: &RunPlace<'_>, s: &Series, out: &mut dyn Write) -> std::io::Result<()> {
    let outcome = serde_json::to_value(&place.record.outcome)
        .ok()
        .and_then(|v| v["status"].as_str().map(String::from))
        .unwrap_or_default();
    let role = match s.role {
        StreamRole::Sender => "sender",
        StreamRole::Receiver => "receiver",
    };
    for p in &s.points {
        line(
            out,
            &[
                opt(place.id),
                place.tier.to_string(),
                place.cell.to_string(),
                place.repetition.to_string(),
                place.record.started_unix_ms.to_string(),
                outcome.clone(),
                s.end.to_string(),
                s.stream.to_string(),
                serde_name(&s.flow),
                role.to_string(),
                fixed(Some(p.start_seconds), 6),
                fixed(Some(p.end_seconds), 6),
                p.bytes.to_string(),
                whole(p.bits_per_second),
                p.omitted.to_string(),
                opt(p.retransmits_total),
                place.record.server.clone(),
                opt(p.rr.map(|r| r.transactions)),
                opt(p.rr.and_then(|r| r.p50_ns)),
                opt(p.rr.and_then(|r| r.p99_ns)),
                opt(p.rr.and_then(|r| r.max_ns)),
            ],
        )?;
    }
    Ok(())
}

/// Columns of a fleet's or scaling curve's CSV (`report fN --format csv`), in order.
pub const FLEET_COLUMNS: [&str; 29] = [
    "fleet",
    "hosts_in_run",
    "repetition",
    "host",
    "server",
    "run_id",
    "run_outcome",
    "not_measured_reason",
    "flow",
    "bits_per_second",
    "share_fraction",
    "counted_over",
    "whole_test_bits_per_second",
    "flows",
    "flow_mean_bits_per_second",
    "flow_stddev_bits_per_second",
    "flow_min_bits_per_second",
    "flow_max_bits_per_second",
    "flow_cv_fraction",
    "flow_jain",
    "retransmits",
    "server_cpu_percent_of_core",
    "verdict",
    "outlier",
    "outlier_against_median_percent",
    "run_total_bits_per_second",
    "start_skew_seconds",
    "stop_skew_seconds",
    "shared_window_seconds",
];

/// A fleet or scaling curve as CSV: one row per host per direction of every fleet run, and one
/// row (no direction, no figures) per host that was not measured.
fn write_fleet(report: &Report, f: &FleetTierFigures, out: &mut dyn Write) -> std::io::Result<()> {
    line(out, &FLEET_COLUMNS.map(String::from))?;
    let fleet = report.tiers.first().map_or("", |t| t.name.as_str());
    for run in &f.runs {
        let s = &run.summary;
        let skew = |f: fn(&crate::stats::fleet::Skew) -> f64| fixed(s.skew.as_ref().map(f), 6);
        let shared = fixed(s.window.map(|(from, to)| to - from), 6);
        let ids = run.records.iter().map(|&i| report.runs.get(i).and_then(|r| r.id));
        for ((label, record), id) in run_hosts(report, run).into_iter().zip(ids) {
            let lead = vec![
                fleet.to_string(),
                run.hosts.to_string(),
                run.repetition.to_string(),
                label.to_string(),
                record.server.clone(),
                opt(id),
                outcome_word(record).to_string(),
            ];
            let why = s.not_measured.iter().find(|(l, _)| *l == label).map(|(_, w)| w);
            if let Some(why) = why {
                let mut row = lead.clone();
                row.push(why.clone());
                row.resize(FLEET_COLUMNS.len(), String::new());
                line(out, &row)?;
                continue;
            }
            for d in &s.directions {
                let Some(h) = d.hosts.iter().find(|h| h.label == label) else { continue };
                let mut row = lead.clone();
                row.push(String::new());
                row.extend(host_fields(d, h));
                row.extend([skew(|k| k.start_seconds), skew(|k| k.stop_seconds), shared.clone()]);
                line(out, &row)?;
            }
        }
    }
    Ok(())
}

/// From `flow` to `run_total_bits_per_second`: one host's figures in one direction.
fn host_fields(d: &FleetDirection, h: &HostFigures) -> Vec<String> {
    let flows = crate::stats::fleet::Spread::of(&h.flows);
    let f = flows.as_ref();
    let outlier = d.outliers.iter().find(|o| o.label == h.label);
    let counted = if h.whole_test { "whole_test" } else { "shared_window" };
    vec![
        serde_name(&d.flow),
        whole(Some(h.bits_per_second)),
        fixed(Some(h.share), 4),
        counted.to_string(),
        whole(h.whole_test_bits_per_second),
        h.flows.len().to_string(),
        whole(f.map(|f| f.mean)),
        whole(f.and_then(|f| f.stddev)),
        whole(f.map(|f| f.min)),
        whole(f.map(|f| f.max)),
        fixed(f.and_then(|f| f.cv), 4),
        fixed(f.and_then(|f| f.jain), 4),
        opt(h.retransmits),
        fixed(h.server_cpu_percent, 1),
        h.limit.clone().unwrap_or_default(),
        outlier.is_some().to_string(),
        fixed(outlier.map(|o| o.against_median_percent), 1),
        whole(Some(d.total_bits_per_second)),
    ]
}

#[cfg(test)]
mod tests {
    use super::{CELL_COLUMNS, FLEET_COLUMNS, INTERVAL_COLUMNS, field, fixed, whole};

    #[test]
    fn docs_csv_md_explains_every_column() {
        let doc = include_str!("../../../../docs/CSV.md");
        let all = CELL_COLUMNS.iter().chain(&INTERVAL_COLUMNS).chain(&FLEET_COLUMNS);
        for column in all {
            assert!(doc.contains(&format!("`{column}`")), "docs/CSV.md does not explain {column}");
        }
    }

    #[test]
    fn numbers_are_rounded_to_what_was_measured() {
        assert_eq!(whole(Some(27_531_630_787.905_89)), "27531630788");
        assert_eq!(fixed(Some(44.845_401_792_473_1), 1), "44.8");
        assert_eq!(fixed(Some(0.177_147_763_367_362_43), 4), "0.1771");
        assert_eq!(fixed(Some(10.0), 1), "10");
        assert_eq!(fixed(Some(0.300_000_000_000_000_04), 6), "0.3");
        assert_eq!(fixed(Some(-0.000_01), 1), "0");
        assert_eq!((fixed(None, 1), fixed(Some(f64::NAN), 1)), (String::new(), String::new()));
    }

    #[test]
    fn fields_are_quoted_only_when_they_must_be() {
        assert_eq!(field("P=1 w=default"), "P=1 w=default");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field("two\nlines"), "\"two\nlines\"");
        assert_eq!(field(""), "");
    }
}
