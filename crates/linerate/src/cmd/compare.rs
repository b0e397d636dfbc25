//! `linerate compare A B [--html FILE]`: two stored runs or groups, cell by cell, with a
//! significance test, the test settings that differ and both ends' environment changes.
//!
//! Fleets and scaling curves are compared the same way, by host count and host
//! (`fleet_cells`), and only with their own kind: their figures answer other questions.
//!
//! Nothing is dropped in silence: a cell only one side has is listed as not compared, and
//! settings that differ (an upload against a download, one stream against four) are said
//! before any change is read as an improvement. A and B are named as the user names them
//! (`m1`, `14`), never by internal names.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use linerate_proto::Environment;

use super::source::stored_fleet_shape;
use crate::plan::matrix::values_of;
use crate::plan::{HistoryPlan, HistoryRef};
use crate::record::{End, Failure, Outcome, RunRecord};
use crate::report;
use crate::report::history::CompareRow;
use crate::report::model::Report;
use crate::stats::compare::compare;
use crate::stats::environment::end_changes;
use crate::stats::fleet::HostInput;
use crate::stats::latency_compare::{TestKind, compare_latency};
use crate::stats::matrix::received_rate;
use crate::stats::settings::setting_changes;
use crate::stats::summarize;
use crate::store::{GroupKind, Store, Stored};

/// Significance level of `linerate compare`.
pub const ALPHA: f64 = 0.05;

/// Runs `linerate compare`.
pub fn run(
    plan: &HistoryPlan,
    (a, b): (HistoryRef, HistoryRef),
    html: Option<&Path>,
) -> Result<ExitCode> {
    let store = super::history::open_existing(&plan.db)?;
    let (a, b) = (store.resolve(a, false)?, store.resolve(b, false)?);
    let fleet = same_fleet_kind(&store, (a, b), html.is_some())?;
    let mut out = std::io::stdout().lock();
    let (a_cells, b_cells) = (cells(&store, a)?, cells(&store, b)?);
    same_kind((&name(&store, a), &a_cells), (&name(&store, b), &b_cells))?;
    let mut rows = rows(&a_cells, &b_cells);
    if fleet {
        // Hosts are matched by label, whatever their address; a host's latency figures are
        // in `report fN`.
        for r in &mut rows {
            r.settings.retain(|c| c.key != "server");
            r.latency = None;
        }
    }
    if rows.iter().all(|r| r.only_in.is_some()) {
        let (na, nb) = (name(&store, a), name(&store, b));
        return Err(Failure::usage(format!(
            "{na} and {nb} have no cell in common ({na}: {}; {nb}: {}): compare runs with runs \
             and matrices with matrices of the same axes",
            cell_names(&a_cells),
            cell_names(&b_cells)
        ))
        .into());
    }
    report::history::render_compare(&rows, plan.json, &mut out)?;
    if let Some(path) = html {
        let (ra, rb) = (
            report::model::build(super::source::load_from(&store, a)?),
            report::model::build(super::source::load_from(&store, b)?),
        );
        let mut page = Vec::new();
        report::html::write_compare(&ra, &rb, &rows, &mut page)?;
        super::report::write_whole(path, &page)?;
        out.flush()?;
        super::console(!plan.json).show(&crate::report::notice::Notice::HtmlWritten(path));
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// Whether A and B are fleets; refuses a fleet against another kind (a single fleet against
/// a curve included), naming both, and `--html` for fleets.
fn same_fleet_kind(store: &Store, (a, b): (Stored, Stored), html: bool) -> Result<bool> {
    let words = |r: Stored| -> Result<(bool, String)> {
        let Stored::Group(id) = r else { return Ok((false, "a run".into())) };
        let Some(g) = store.group(id)? else { return Ok((false, "a group".into())) };
        let curve = g.kind == GroupKind::Fleet && !stored_fleet_shape(&g).scale.is_empty();
        Ok((
            g.kind == GroupKind::Fleet,
            if curve { "a fleet scaling curve".into() } else { g.kind.noun() },
        ))
    };
    let ((fa, wa), (fb, wb)) = (words(a)?, words(b)?);
    let (na, nb) = (name(store, a), name(store, b));
    let why = match (fa || fb, wa == wb) {
        (false, _) => return Ok(false),
        (true, true) if !html => return Ok(true),
        (true, true) => format!(
            "{na} and {nb} are fleets: their comparison is built in text and JSON (-J); an HTML \
             page of a fleet comparison is not built yet, drop --html"
        ),
        (true, false) => format!(
            "{na} is {wa} and {nb} is {wb}: compare a fleet with a fleet and a scaling curve \
             with a scaling curve (`linerate history` lists them)"
        ),
    };
    Err(Failure::usage(why).into())
}

/// Refuses to compare a request/response test with any other: its bytes are requests, its
/// answer transactions and latency, so a change between the two kinds means nothing.
fn same_kind((na, a): (&str, &[Cell]), (nb, b): (&str, &[Cell])) -> Result<()> {
    let kind = |cells: &[Cell]| cells.first().map(|c| TestKind::of(&c.first));
    let (Some(ka), Some(kb)) = (kind(a), kind(b)) else { return Ok(()) };
    let rr = TestKind::RequestResponse;
    if (ka == rr) == (kb == rr) {
        return Ok(());
    }
    Err(Failure::usage(format!(
        "{na} is {} and {nb} is {}: their figures do not measure the same thing; compare \
         request/response runs with request/response runs",
        ka.words(),
        kb.words()
    ))
    .into())
}

/// A's cells compared with B's same cells, in A's order, then the cells only B has; a cell
/// only one side has is a row saying so.
fn rows(a_cells: &[Cell], b_cells: &[Cell]) -> Vec<CompareRow> {
    let mut rows: Vec<CompareRow> = a_cells
        .iter()
        .map(|x| match b_cells.iter().find(|y| same_cell(&x.name, &y.name)) {
            Some(y) => CompareRow {
                cell: x.name.clone(),
                // Request/response cells compare their transactions/s, not request bytes.
                result: match (x.first.spec.rr, y.first.spec.rr) {
                    (Some(_), Some(_)) => compare(&x.transactions, &y.transactions, ALPHA),
                    _ => compare(&x.rates, &y.rates, ALPHA),
                },
                transactions: x.first.spec.rr.is_some() && y.first.spec.rr.is_some(),
                index: x.index,
                environment: vec![
                    end_changes(End::Client, x.client_env.as_ref(), y.client_env.as_ref()),
                    end_changes(End::Server, x.server_env.as_ref(), y.server_env.as_ref()),
                ],
                settings: setting_changes(&x.first, &y.first),
                // One run a side: the figures of each (several runs: not yet).
                latency: (x.rates.len() == 1 && y.rates.len() == 1)
                    .then(|| compare_latency(&x.summary, &y.summary))
                    .flatten(),
                only_in: None,
            },
            None => only_in("A", x, &x.rates, &[]),
        })
        .collect();
    for y in b_cells.iter().filter(|y| !a_cells.iter().any(|x| same_cell(&x.name, &y.name))) {
        rows.push(only_in("B", y, &[], &y.rates));
    }
    rows
}

/// The row of a cell only `side` has: its figures, no test.
fn only_in(side: &'static str, c: &Cell, a: &[f64], b: &[f64]) -> CompareRow {
    let mut result = compare(a, b, ALPHA);
    let other = if side == "A" { "B" } else { "A" };
    result.verdict = format!("not compared: only {side} has this cell ({other} has none)");
    CompareRow {
        cell: c.name.clone(),
        result,
        environment: Vec::new(),
        settings: Vec::new(),
        latency: None,
        transactions: false,
        index: c.index,
        only_in: Some(side),
    }
}

/// Whether two cell names are one cell: the same name, or the same axis values however their
/// sizes were written (`w=256k` and `w=250K`, as older versions stored it).
pub(super) fn same_cell(a: &str, b: &str) -> bool {
    a == b || values_of(a).zip(values_of(b)).is_some_and(|(x, y)| !x.is_empty() && x == y)
}

/// `r` as the user names it: `14` for a run, `m3`, `c4` or `find-max 5` for a group.
pub(super) fn name(store: &Store, r: Stored) -> String {
    match r {
        Stored::Run(id) => id.to_string(),
        Stored::Group(id) => {
            let kind = store.group(id).ok().flatten().map(|g| g.kind);
            kind.unwrap_or(crate::store::GroupKind::Matrix).reference(id)
        }
    }
}

fn cell_names(cells: &[Cell]) -> String {
    match cells {
        [] => "no completed run".into(),
        [one] if one.name == "run" => "a single run".into(),
        many => {
            let names: Vec<&str> = many.iter().map(|c| c.name.as_str()).collect();
            format!("cells {}", names.join(", "))
        }
    }
}

/// One cell of a stored run or matrix: its received rates, its first completed run (whose
/// settings and environments `compare` diffs).
struct Cell {
    name: String,
    rates: Vec<f64>,
    /// Request/response runs: each run's transactions per second.
    transactions: Vec<f64>,
    first: RunRecord,
    /// The first run's summary.
    summary: crate::stats::Summary,
    client_env: Option<Environment>,
    server_env: Option<Environment>,
    /// True when `rates` are Jain's indices (a fleet's), not bit rates.
    index: bool,
}

impl Cell {
    fn new(name: String, rec: &RunRecord) -> Self {
        let env = |r: Option<&linerate_proto::SideResults>| {
            r.and_then(|r| r.environment.as_deref()).cloned()
        };
        Self {
            name,
            rates: Vec::new(),
            transactions: Vec::new(),
            summary: summarize(rec),
            first: rec.clone(),
            client_env: env(rec.client.as_ref()),
            server_env: env(rec.server_results.as_ref()),
            index: false,
        }
    }
}

/// Cell `name` of `cells` (made from `rec` when it is new), with one more figure (rate,
/// transactions/s) when there is one.
fn add<'a>(
    cells: &'a mut Vec<Cell>,
    name: String,
    rec: &RunRecord,
    figure: Option<(f64, Option<f64>)>,
) -> &'a mut Cell {
    let at = cells.iter().position(|c| same_cell(&c.name, &name)).unwrap_or_else(|| {
        cells.push(Cell::new(name, rec));
        cells.len() - 1
    });
    let c = &mut cells[at];
    if let Some((rate, transactions)) = figure {
        c.rates.push(rate);
        c.transactions.extend(transactions);
    }
    c
}

/// The cell of a fleet's Jain's index across its hosts.
const JAIN: &str = "Jain's index";

fn flow_word(flow: linerate_proto::Flow) -> &'static str {
    match flow {
        linerate_proto::Flow::ClientToServer => "upload",
        linerate_proto::Flow::ServerToClient => "download",
    }
}

/// The cells of a stored fleet or scaling curve, host count by host count (a single fleet
/// has one), each over the fleet runs that count (`stats::campaign_fleet`): `k=K total`, the
/// fleet's total of each run that measured every host (one that did not is a smaller fleet,
/// as in the curve); `k=K Jain's index` across those runs' hosts; `k=K LABEL`, a host's rate
/// in each run that measured it (a host no run measured is a cell without runs). A
/// request/response fleet's cells carry transactions per second too. When the fleet ran both
/// directions, each cell is per direction (`k=2 upload a`).
fn fleet_cells(report: &Report) -> Vec<Cell> {
    let Some(f) = report.fleet() else { return Vec::new() };
    let mut counts = f.shape().counts();
    counts.sort_unstable();
    let mut cells: Vec<Cell> = Vec::new();
    for run in counts.iter().flat_map(|&k| f.counted().filter(move |r| r.hosts == k)) {
        let records: Vec<&RunRecord> =
            run.records.iter().map(|&i| &report.runs[i].record).collect();
        let of =
            |label: &str| records.iter().copied().find(|r| HostInput::placed(r).label == label);
        let Some(first) = records.iter().copied().find(|r| r.outcome == Outcome::Completed) else {
            continue;
        };
        let s = &run.summary;
        let latency = s.latency.as_ref();
        // A request/response fleet's figure is its transactions, once whatever its bytes' ways.
        let directions = &s.directions[..s.directions.len().min(latency.map_or(2, |_| 1))];
        for d in directions {
            let name = |what: &str| match directions.len() {
                1 => format!("k={} {what}", run.hosts),
                _ => format!("k={} {} {what}", run.hosts, flow_word(d.flow)),
            };
            if run.whole() {
                let tps = latency.map(|l| l.transactions_per_second);
                add(&mut cells, name("total"), first, Some((d.total_bits_per_second, tps)));
                let jain = latency.map_or(d.across_hosts.as_ref().and_then(|a| a.jain), |l| l.jain);
                if let Some(j) = jain {
                    add(&mut cells, name(JAIN), first, Some((j, Some(j)))).index = true;
                }
            }
            for h in &d.hosts {
                let tps = latency
                    .and_then(|l| l.hosts.iter().find(|x| x.label == h.label))
                    .and_then(|x| x.transactions_per_second);
                let rec = of(&h.label).unwrap_or(first);
                add(&mut cells, name(&h.label), rec, Some((h.bits_per_second, tps)));
            }
            for (label, _) in &s.not_measured {
                add(&mut cells, name(label), of(label).unwrap_or(first), None);
            }
        }
    }
    cells
}

/// A completed run's figure: its received rate and, for a request/response run, its
/// transactions per second.
fn figure_of(rec: &RunRecord) -> Option<(f64, Option<f64>)> {
    let s = summarize(rec);
    Some((received_rate(&s), s.latency.as_ref().and_then(|l| l.transactions_per_second)))
}

/// Received rates per cell: one cell (`run`) for a run, the matrix's cells for a group.
pub(super) fn samples(store: &Store, r: Stored) -> Result<Vec<(String, Vec<f64>)>> {
    Ok(cells(store, r)?.into_iter().map(|c| (c.name, c.rates)).collect())
}

fn cells(store: &Store, r: Stored) -> Result<Vec<Cell>> {
    // Only completed runs have figures of a whole test: an interrupted one covers part of it.
    let completed = |rec: &RunRecord| rec.outcome == Outcome::Completed;
    match r {
        Stored::Run(id) => {
            let (_, rec) = store
                .run(id)?
                .ok_or_else(|| Failure::usage(format!("no run {id} in the history")))?;
            match &rec.outcome {
                Outcome::Completed => {}
                Outcome::Interrupted => {
                    return Err(Failure::usage(format!(
                        "run {id} was interrupted: its figures cover part of a test, so it is \
                         not compared; compare completed runs"
                    ))
                    .into());
                }
                Outcome::Failed { .. } => {
                    let why = format!("run {id} failed: it has no figures to compare");
                    return Err(Failure::usage(why).into());
                }
            }
            let mut cells = Vec::new();
            add(&mut cells, "run".into(), &rec, figure_of(&rec));
            Ok(cells)
        }
        Stored::Group(id) => {
            let group = store
                .group(id)?
                .ok_or_else(|| Failure::usage(format!("no group {id} in the history")))?;
            if group.kind == GroupKind::Fleet {
                return Ok(fleet_cells(&report::model::build(super::source::load_from(store, r)?)));
            }
            let mut cells: Vec<Cell> = Vec::new();
            for (_, meta, rec) in store.group_runs(id)? {
                if !completed(&rec) {
                    continue;
                }
                add(&mut cells, meta.cell.unwrap_or_else(|| "run".into()), &rec, figure_of(&rec));
            }
            // The plan's order, as the report's tables list cells; the runs came in the
            // matrix's random order. A cell the plan does not name (a history changed outside
            // linerate) goes last, in the order it ran.
            if let Some(order) = super::source::planned_cell_names(&group) {
                let place = |c: &Cell| order.iter().position(|n| same_cell(n, &c.name));
                cells.sort_by_key(|c| place(c).unwrap_or(usize::MAX));
            }
            Ok(cells)
        }
    }
}
