//! The history listing and comparisons, as text or JSON.

use std::io::Write;

use serde::Serialize;

use crate::report::words::lat;
use crate::stats::compare::Comparison;
use crate::stats::environment::{EndChanges, EnvChange};
use crate::stats::latency::LatencyBrief;
use crate::stats::latency_compare::{LatencyComparison, TestKind};
use crate::store::{GroupKind, RunRow};
use crate::units::peer_text::escape;
use crate::units::{format_bits_per_second, utc};

/// One cell of a comparison: compared, or had by one side only.
#[derive(Debug, Clone, Serialize)]
pub struct CompareRow {
    /// The cell (`run` for single runs).
    pub cell: String,
    /// The test (for a cell only one side has: no test, and a verdict saying so).
    pub result: Comparison,
    /// What changed in each end's environment between the first runs of the cell.
    pub environment: Vec<EndChanges>,
    /// The test settings that differ between the first runs of the cell (direction,
    /// streams, window, …): a change here makes it a comparison of two different tests.
    pub settings: Vec<EnvChange>,
    /// True when `result` compares transactions per second (request/response cells), not
    /// received bit rates; absent when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub transactions: bool,
    /// True when `result` compares a fleet's Jain's index across its hosts (1 = equal
    /// shares), not rates; absent when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub index: bool,
    /// Two latency runs' figures side by side (one run a side); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencyComparison>,
    /// `A` or `B` for a cell only that side has (not compared); absent for compared cells.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub only_in: Option<&'static str>,
}

/// Stored runs, newest first.
pub fn render_list(rows: &[RunRow], json: bool, out: &mut dyn Write) -> std::io::Result<()> {
    if json {
        let v: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "id": r.id, "started_unix_ms": r.started_unix_ms, "kind": r.kind.as_str(),
                    "group": r.group, "cell": r.cell, "server": r.server, "protocol": r.protocol,
                    "direction": r.direction, "streams": r.streams, "outcome": r.outcome,
                    "bits_per_second": r.bits_per_second, "labels": r.labels,
                    "error": r.error, "latency": r.latency,
                    "directions": (!r.directions.is_empty()).then_some(&r.directions),
                })
            })
            .collect();
        serde_json::to_writer_pretty(&mut *out, &v).map_err(std::io::Error::other)?;
        return writeln!(out);
    }
    writeln!(
        out,
        "{:>5}  {:<19}  {:<22} {:<21} {:<4} {:<13} {:>3} {:>14}  {:<9} labels",
        "run", "started (UTC)", "what", "server", "prot", "direction", "P", "received", "outcome"
    )?;
    for r in rows {
        let line = format!(
            "{:>5}  {:<19}  {:<22} {:<21} {:<4} {:<13} {:>3} {:>14}  {:<9} {}",
            r.id,
            utc(r.started_unix_ms),
            what(r),
            r.server,
            r.protocol,
            r.direction,
            r.streams,
            received(r),
            r.outcome,
            r.labels.join(",")
        );
        // Servers, labels and errors are stored strings, errors often a peer's words.
        writeln!(out, "{}", escape(line.trim_end()))?;
        if let Some(e) = &r.error {
            writeln!(out, "{:>5}  failed: {}", "", escape(e))?;
        }
        if let Some(each) = crate::stats::matrix::directions_words(&r.directions) {
            writeln!(out, "{:>5}  {each}", "")?;
        }
        if let Some(l) = r.latency.as_ref().and_then(latency_line) {
            writeln!(out, "{:>5}  {l}", "")?;
        }
    }
    Ok(())
}

/// The received column: a request/response run's transactions per second (its bytes are
/// requests), else the bit rate.
fn received(r: &RunRow) -> String {
    match r.latency.as_ref().filter(|l| l.p50_ns.is_some() || l.transactions_per_second.is_some()) {
        Some(l) => l.transactions_per_second.map_or("n/a tr/s".into(), |t| format!("{t:.0} tr/s")),
        None => r.bits_per_second.map_or("n/a".into(), format_bits_per_second),
    }
}

/// The line under a latency run: a request/response run's p50 and p99, a test under load's
/// idle and loaded probe medians and responsiveness; None when it has no figure to show.
fn latency_line(l: &LatencyBrief) -> Option<String> {
    if let Some(p50) = l.p50_ns {
        return Some(format!("latency p50 {}, p99 {}", lat(Some(p50)), lat(l.p99_ns)));
    }
    let rpm = l.rpm.zip(l.rating).map_or("n/a".into(), |(r, g)| format!("{r:.0} RPM ({g})"));
    (l.idle_p50_ns.is_some() || l.loaded_p50_ns.is_some()).then(|| {
        format!(
            "under load: probe p50 {} idle, {} loaded; responsiveness {rpm}",
            lat(l.idle_p50_ns),
            lat(l.loaded_p50_ns)
        )
    })
}

/// What a listed run was part of, named as the commands that read it take it: `m3 P=4` (a
/// matrix and its cell), `c4 lan/P=4` (a campaign), `find-max 5 b=…` (a search, listed with
/// `history --group 5`), or the kind of a run on its own.
fn what(r: &RunRow) -> String {
    let Some(g) = r.group else { return r.kind.as_str().to_string() };
    let group = r.kind.group_kind().unwrap_or(GroupKind::Matrix).reference(g);
    match &r.cell {
        Some(c) => format!("{group} {c}"),
        None => group,
    }
}

/// Cell-by-cell comparison of A (before) and B (after).
pub fn render_compare(rows: &[CompareRow], json: bool, out: &mut dyn Write) -> std::io::Result<()> {
    if json {
        serde_json::to_writer_pretty(&mut *out, rows).map_err(std::io::Error::other)?;
        return writeln!(out);
    }
    for t in compare_tables(rows) {
        t.write_text(out)?;
    }
    for line in environment_lines(rows) {
        writeln!(out, "{}", escape(&line))?;
    }
    Ok(())
}

/// What changed between the environments of A and B: one block for all cells when every
/// cell saw the same change (the usual case: one host, one tuning step), else one per cell.
pub fn environment_lines(rows: &[CompareRow]) -> Vec<String> {
    let compared: Vec<&CompareRow> = rows.iter().filter(|r| r.only_in.is_none()).collect();
    let per_cell: Vec<Vec<String>> =
        compared.iter().map(|r| r.environment.iter().map(environment_line).collect()).collect();
    let Some(items) = per_cell_or_once(&compared, per_cell) else { return Vec::new() };
    let mut lines = vec!["Environment, A → B:".to_string()];
    lines.extend(items.iter().map(|l| format!("  {l}")));
    lines
}

/// Items that hold for every cell once, else each prefixed with its cell; None when no cell
/// has any.
fn per_cell_or_once(rows: &[&CompareRow], per_cell: Vec<Vec<String>>) -> Option<Vec<String>> {
    if per_cell.iter().all(Vec::is_empty) {
        return None;
    }
    if per_cell.windows(2).all(|w| w[0] == w[1]) {
        return per_cell.into_iter().next();
    }
    let prefixed = rows
        .iter()
        .zip(per_cell)
        .flat_map(|(r, items)| items.into_iter().map(move |i| format!("{}: {i}", r.cell)));
    Some(prefixed.collect())
}

/// The settings that differ between A's and B's tests, as a table's legend: A and B ran
/// different tests, which the reader must know before reading a change as an improvement.
fn settings_legend(rows: &[CompareRow]) -> Option<(String, Vec<String>)> {
    let compared: Vec<&CompareRow> = rows.iter().filter(|r| r.only_in.is_none()).collect();
    let per_cell: Vec<Vec<String>> = compared
        .iter()
        .map(|r| {
            r.settings.iter().map(|c| format!("{} {} → {}", c.key, c.before, c.after)).collect()
        })
        .collect();
    let items = per_cell_or_once(&compared, per_cell)?;
    let title = "Settings differ, A → B (these are different tests, not one test before and after)";
    Some((title.to_string(), items))
}

/// The comparison as a table: cell, both means with their run counts, change, verdict.
pub fn compare_table(rows: &[CompareRow]) -> crate::report::table::Table {
    let mut t =
        crate::report::table::Table::new(&["cell", ">A mean", ">B mean", ">change", "verdict"]);
    let side = |mean: f64, n: usize, r: &CompareRow| match n {
        0 => "n/a (no cell)".to_string(),
        n if r.index => format!("{mean:.3} (n={n})"),
        n if r.transactions => format!("{mean:.0} tr/s (n={n})"),
        n => format!("{} (n={n})", format_bits_per_second(mean)),
    };
    for r in rows {
        let c = &r.result;
        t.rows.push(vec![
            r.cell.clone(),
            side(c.mean_a, c.n_a, r),
            side(c.mean_b, c.n_b, r),
            c.change_percent.map_or("n/a".into(), |p| format!("{p:+.1}%")),
            c.verdict.clone(),
        ]);
    }
    t.legend = settings_legend(rows);
    t
}

/// The tables of a comparison: the throughput table, unless A and B are request/response
/// runs (whose bytes are requests), then the latency table of two latency runs.
pub fn compare_tables(rows: &[CompareRow]) -> Vec<crate::report::table::Table> {
    let latency = rows.iter().find_map(|r| r.latency.as_ref());
    let mut tables = Vec::new();
    if latency.is_none_or(|l| l.kind != TestKind::RequestResponse) {
        tables.push(compare_table(rows));
    }
    if let Some(l) = latency {
        let mut t = crate::report::latency::compare_table(l);
        if tables.is_empty() {
            t.legend = settings_legend(rows);
        }
        tables.push(t);
    }
    tables
}

/// `client: lo MTU 65536 → 9000, net.core.rmem_max 212992 → 8388608`.
pub fn environment_line(e: &EndChanges) -> String {
    if let Some(why) = &e.not_compared {
        return format!("{}: environment not compared: {why}", e.end);
    }
    if e.changes.is_empty() {
        return format!("{}: environment unchanged", e.end);
    }
    let list: Vec<String> =
        e.changes.iter().map(|c| format!("{} {} → {}", c.key, c.before, c.after)).collect();
    format!("{}: {}", e.end, list.join(", "))
}

#[cfg(test)]
mod tests {
    use super::environment_line;
    use crate::stats::environment::{EndChanges, EnvChange};

    #[test]
    fn environment_lines() {
        let change = |k: &str, a: &str, b: &str| EnvChange {
            key: k.into(),
            before: a.into(),
            after: b.into(),
        };
        let e = EndChanges {
            end: crate::record::End::Client,
            changes: vec![
                change("lo MTU", "65536", "9000"),
                change("net.core.rmem_max", "212992", "8388608"),
            ],
            not_compared: None,
        };
        assert_eq!(
            environment_line(&e),
            "client: lo MTU 65536 → 9000, net.core.rmem_max 212992 → 8388608"
        );
        let same = EndChanges { changes: vec![], ..e.clone() };
        assert_eq!(environment_line(&same), "client: environment unchanged");
        let old = EndChanges { not_compared: Some("run A has none".into()), ..e };
        assert_eq!(environment_line(&old), "client: environment not compared: run A has none");
    }
}
