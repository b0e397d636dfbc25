//! The latency sections of a run's report: a request/response run's (`--rr`: transactions
//! per second, the latency percentiles of every transaction, CPU per transaction) and a test
//! under load's (`--under-load`: the idle probes against the loaded ones, the delay the load
//! added, the responsiveness figure and the finding).
//!
//! A section is a heading, a table and notes; text, Markdown and HTML lay out the same
//! sections (`report::document`, `report::html`), so a figure cannot differ between formats.
//! A request/response run's section replaces the throughput table: its bytes are requests,
//! and its answer is transactions and latency. Must not compute figures (`stats::latency`,
//! `stats::under_load` do).

use linerate_proto::TestSpec;

use crate::report::model::ReportRun;
use crate::report::table::Table;
use crate::report::words::{lat, loop_words, per_second, signed};
use crate::stats::latency::{LatencySummary, PERCENTILES};
use crate::stats::latency_compare::LatencyComparison;
use crate::stats::matrix::MatrixSummary;
use crate::stats::under_load::{PhaseFigures, UnderLoadSummary};
use crate::units::format_latency_ns;

/// One section: what it is, its table and the sentences under it.
#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    /// Its heading.
    pub heading: String,
    /// Its figures.
    pub table: Table,
    /// Sentences that do not fit a table cell (the finding, responsiveness, what is n/a).
    pub notes: Vec<String>,
}

/// CPU microseconds per transaction; "n/a" with why.
fn cpu(v: Option<f64>) -> String {
    v.map_or("n/a (no process CPU reported)".into(), |v| format!("{v:.2} us"))
}

/// The rows of a request/response run's figures: (name, value), in table order.
pub fn rr_rows(l: &LatencySummary) -> Vec<(String, String)> {
    let mut rows = vec![
        ("transactions per second".to_string(), per_second(l.transactions_per_second)),
        ("transactions (after the warm-up)".into(), l.transactions.to_string()),
        ("streams".into(), l.streams.to_string()),
        ("unanswered at the end".into(), l.unanswered.to_string()),
    ];
    if l.from_intended_send {
        rows.push(("requests sent late".into(), l.late_requests.to_string()));
    }
    rows.push(("latency min".into(), lat(l.min_ns)));
    for ((_, _, name), v) in PERCENTILES.iter().zip(l.percentiles()) {
        rows.push((format!("latency {name}"), lat(v)));
    }
    rows.push(("latency max".into(), lat(l.max_ns)));
    rows.push(("latency mean".into(), lat(l.mean_ns)));
    rows.push(("client CPU per transaction".into(), cpu(l.client_cpu_us_per_transaction)));
    rows.push(("server CPU per transaction".into(), cpu(l.server_cpu_us_per_transaction)));
    rows
}

/// A request/response run's section.
fn rr_section(spec: &TestSpec, l: &LatencySummary) -> Section {
    let mut table = Table::new(&["figure", ">value"]);
    table.rows = rr_rows(l).into_iter().map(|(k, v)| vec![k, v]).collect();
    let notes = vec![
        "Percentiles are those of every transaction of every stream (their histograms merged, \
         within 1.6 %; min, max and mean exact); CPU per transaction is each end's process CPU \
         over the test divided by every transaction, warm-up included (docs/METHODOLOGY.md, \
         \"Latency\")."
            .to_string(),
    ];
    let heading = format!("Request/response latency ({})", loop_words(spec, l));
    Section { heading, table, notes }
}

/// The under-load rows: (figure, idle, loaded, added by the load).
pub fn under_load_rows(u: &UnderLoadSummary) -> Vec<[String; 4]> {
    type Pick = fn(&PhaseFigures) -> Option<u64>;
    let rows: [(&str, Pick, Option<i64>); 7] = [
        ("min", |f| f.min_ns, None),
        ("p50", |f| f.p50_ns, u.added_p50_ns),
        ("p90", |f| f.p90_ns, None),
        ("p99", |f| f.p99_ns, u.added_p99_ns),
        ("max", |f| f.max_ns, None),
        ("mean", |f| f.mean_ns, None),
        ("trimmed mean (lowest 95 %)", |f| f.trimmed_mean_ns, None),
    ];
    let phase = |f: Option<&PhaseFigures>, pick: Pick| f.map_or("n/a".into(), |f| lat(pick(f)));
    let count = |f: Option<&PhaseFigures>, pick: fn(&PhaseFigures) -> u64| {
        f.map_or("n/a".into(), |f| pick(f).to_string())
    };
    let (idle, loaded) = (u.idle.as_ref(), u.loaded.as_ref());
    let mut out = vec![[
        "probes answered".to_string(),
        count(idle, |f| f.probes),
        count(loaded, |f| f.probes),
        String::new(),
    ]];
    for (name, pick, added) in rows {
        let added = if name == "p50" || name == "p99" { signed(added) } else { String::new() };
        out.push([name.to_string(), phase(idle, pick), phase(loaded, pick), added]);
    }
    out.push([
        "unanswered".into(),
        count(idle, |f| f.unanswered),
        count(loaded, |f| f.unanswered),
        String::new(),
    ]);
    out
}

/// The sentences of a test under load besides its table: a phase that failed, the queue, the
/// loaded connections' round trip, the finding and responsiveness. The client's own text
/// (`report::under_load`) prints the same sentences.
pub fn under_load_notes(u: &UnderLoadSummary) -> Vec<String> {
    let mut notes = Vec::new();
    for (name, f, e) in [("idle", &u.idle, &u.idle_error), ("loaded", &u.loaded, &u.loaded_error)] {
        if f.is_none() {
            let why = e.as_deref().unwrap_or("the probes reported nothing");
            notes.push(format!("{name} probes: n/a: {why}"));
        }
    }
    if let Some(q) = u.queue_bytes {
        notes.push(format!(
            "the added median at the rate reached means about {} waiting in a queue",
            crate::units::ByteCount(q).iec()
        ));
    }
    let (connections, finding, responsiveness) = crate::report::under_load::sentences(u);
    notes.push(connections);
    notes.extend(finding);
    notes.push(responsiveness);
    notes
}

/// A test under load's section.
fn under_load_section(u: &UnderLoadSummary) -> Section {
    let mut table = Table::new(&["probe latency", ">idle", ">loaded", ">added by the load"]);
    table.rows = under_load_rows(u).into_iter().map(Vec::from).collect();
    Section {
        heading: format!(
            "Latency under load (1-byte request/response probes on a connection of their own, {} \
             per second, from each probe's intended send time)",
            u.probes_per_second
        ),
        table,
        notes: under_load_notes(u),
    }
}

/// A run's latency sections, in reading order; empty for a bulk test.
pub fn sections(run: &ReportRun) -> Vec<Section> {
    let mut out = Vec::new();
    match &run.summary.latency {
        Some(l) => out.push(rr_section(&run.record.spec, l)),
        None if run.record.spec.rr.is_some() => {
            let mut table = Table::new(&["figure", ">value"]);
            table.rows.push(vec![
                "transactions per second".into(),
                "n/a: no stream reported a transaction".into(),
            ]);
            let heading = "Request/response latency".into();
            out.push(Section { heading, table, notes: Vec::new() });
        }
        None => {}
    }
    if let Some(u) = &run.summary.under_load {
        out.push(under_load_section(u));
    }
    out
}

/// Whether a run's answer is its latency, not its throughput (a request/response run): its
/// report leaves out the throughput table of request bytes.
pub fn replaces_throughput(run: &ReportRun) -> bool {
    run.record.spec.rr.is_some()
}

/// A figure of `stats::latency_compare` in words and in its unit.
fn figure_words(key: &str, v: Option<f64>) -> (String, String) {
    let shown = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("n/a".into(), f);
    let latency = |v: f64| {
        let text = format_latency_ns(v.abs() as u64);
        if v < 0.0 { format!("-{text}") } else { text }
    };
    match key {
        "transactions_per_second" => ("transactions per second".into(), per_second(v)),
        "rpm" => ("responsiveness (RPM)".into(), shown(v, &|r| format!("{r:.0}"))),
        k if k.ends_with("_us_per_transaction") => {
            let end = k.split('_').next().unwrap_or(k);
            (format!("{end} CPU per transaction"), shown(v, &|c| format!("{c:.2} us")))
        }
        k => {
            let name =
                k.trim_end_matches("_ns").replace("p99_99", "p99.99").replace("p99_9", "p99.9");
            let name = match name.split_once('_') {
                Some(("added", p)) => format!("added by the load, {p}"),
                Some((phase, p)) => format!("{phase} probes {p}"),
                None => format!("latency {name}"),
            };
            (name, shown(v, &latency))
        }
    }
}

/// Two latency runs side by side: each figure of A and B, the change and whether it is
/// better or worse.
pub fn compare_table(c: &LatencyComparison) -> Table {
    let mut t = Table::new(&["figure", ">A", ">B", ">change"]);
    for f in &c.figures {
        let (name, a) = figure_words(&f.figure, f.a);
        let (_, b) = figure_words(&f.figure, f.b);
        let change = f.change_percent.map_or("n/a".into(), |p| {
            let better = (p > 0.0) == f.higher_is_better;
            let word = if p == 0.0 {
                ""
            } else if better {
                " (better)"
            } else {
                " (worse)"
            };
            format!("{p:+.1}%{word}")
        });
        t.rows.push(vec![name, a, b, change]);
    }
    t
}

/// A request/response matrix's cell table: per cell its completed runs, transactions per
/// second (mean ± 95 % CI and min–max over the runs), the median across runs of each run's
/// p50 and p99, and CPU per transaction; a cell without runs is n/a.
pub fn cell_table(summary: &MatrixSummary) -> Table {
    let mut t = Table::new(&[
        "cell (transactions/s)",
        ">n",
        ">mean ± 95% CI",
        ">min–max",
        ">p50",
        ">p99",
        ">CPU/tr client",
        ">CPU/tr server",
    ]);
    let us = |v: Option<f64>| v.map_or("n/a".into(), |v| format!("{v:.2} us"));
    for c in &summary.cells {
        let l = c.latency.as_ref();
        let s = l.and_then(|l| l.transactions_per_second.as_ref());
        let mean = s.map_or("n/a".into(), |s| match s.ci95_half_width {
            Some(h) => format!("{:.0} ± {h:.0}", s.mean),
            None => format!("{:.0}", s.mean),
        });
        t.rows.push(vec![
            c.label.clone(),
            c.runs.to_string(),
            mean,
            s.map_or("n/a".into(), |s| format!("{:.0}–{:.0}", s.min, s.max)),
            lat(l.and_then(|l| l.p50_ns)),
            lat(l.and_then(|l| l.p99_ns)),
            us(l.and_then(|l| l.client_cpu_us_per_transaction)),
            us(l.and_then(|l| l.server_cpu_us_per_transaction)),
        ]);
    }
    let items = vec![
        "mean ± 95% CI: each run's transactions per second, their mean and Student t interval \
         (n/a with one run); min–max: the slowest and fastest run"
            .to_string(),
        "p50, p99: the median across the cell's runs of each run's own percentile (every \
         stream's transactions merged)"
            .to_string(),
        "CPU/tr: each end's process CPU per transaction, mean of the runs".to_string(),
    ];
    t.legend = Some(("Request/response cells".to_string(), items));
    t
}
