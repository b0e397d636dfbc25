//! `linerate compare A B [--html FILE]`: two stored runs or groups, cell by cell, with a
//! significance test, the test settings that differ and both ends' environment changes.
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

use crate::plan::matrix::values_of;
use crate::plan::{HistoryPlan, HistoryRef};
use crate::record::{Failure, Outcome, RunRecord};
use crate::report;
use crate::report::history::CompareRow;
use crate::stats::compare::compare;
use crate::stats::environment::end_changes;
use crate::stats::latency_compare::{TestKind, compare_latency};
use crate::stats::matrix::received_rate;
use crate::stats::settings::setting_changes;
use crate::stats::summarize;
use crate::store::{Store, Stored};

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
    if let Some(code) = super::compare_fleet::run(&store, (a, b), plan.json, html.is_some())? {
        return Ok(code);
    }
    let mut out = std::io::stdout().lock();
    let (a_cells, b_cells) = (cells(&store, a)?, cells(&store, b)?);
    same_kind((&name(&store, a), &a_cells), (&name(&store, b), &b_cells))?;
    let rows = rows(&a_cells, &b_cells);
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
                environment: vec![
                    end_changes("client", x.client_env.as_ref(), y.client_env.as_ref()),
                    end_changes("server", x.server_env.as_ref(), y.server_env.as_ref()),
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
}

impl Cell {
    fn new(name: String, rec: &RunRecord) -> Self {
        let env = |r: Option<&linerate_proto::SideResults>| {
            r.and_then(|r| r.environment.as_deref()).cloned()
        };
        let summary = summarize(rec);
        Self {
            name,
            rates: vec![received_rate(&summary)],
            transactions: transactions_of(&summary).into_iter().collect(),
            summary,
            first: rec.clone(),
            client_env: env(rec.client.as_ref()),
            server_env: env(rec.server_results.as_ref()),
        }
    }
}

/// A request/response run's transactions per second; None for other runs.
fn transactions_of(s: &crate::stats::Summary) -> Option<f64> {
    s.latency.as_ref()?.transactions_per_second
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
            Ok(vec![Cell::new("run".into(), &rec)])
        }
        Stored::Group(id) => {
            let group = store
                .group(id)?
                .ok_or_else(|| Failure::usage(format!("no group {id} in the history")))?;
            let mut cells: Vec<Cell> = Vec::new();
            for (_, meta, rec) in store.group_runs(id)? {
                if !completed(&rec) {
                    continue;
                }
                let name = meta.cell.unwrap_or_else(|| "run".into());
                match cells.iter_mut().find(|c| same_cell(&c.name, &name)) {
                    Some(c) => {
                        let summary = summarize(&rec);
                        c.rates.push(received_rate(&summary));
                        c.transactions.extend(transactions_of(&summary));
                    }
                    None => cells.push(Cell::new(name, &rec)),
                }
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
