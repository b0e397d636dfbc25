//! `linerate compare A B [--html FILE]`: two stored runs or groups, cell by cell, with a
//! significance test and both ends' environment changes.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use linerate_proto::Environment;

use crate::plan::{HistoryPlan, HistoryRef};
use crate::record::{Outcome, RunRecord};
use crate::report;
use crate::stats::compare::compare;
use crate::stats::environment::end_changes;
use crate::stats::matrix::received_rate;
use crate::stats::summarize;
use crate::store::Store;

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
    let mut out = std::io::stdout().lock();
    let (a_cells, b_cells) = (cells(&store, a)?, cells(&store, b)?);
    let rows: Vec<report::history::CompareRow> = a_cells
        .iter()
        .filter_map(|x| {
            let y = b_cells.iter().find(|c| c.name == x.name)?;
            Some(report::history::CompareRow {
                cell: x.name.clone(),
                result: compare(&x.rates, &y.rates, ALPHA),
                environment: vec![
                    end_changes("client", x.client_env.as_ref(), y.client_env.as_ref()),
                    end_changes("server", x.server_env.as_ref(), y.server_env.as_ref()),
                ],
            })
        })
        .collect();
    if rows.is_empty() {
        bail!(
            "{a:?} and {b:?} have no cell in common: compare runs with runs and matrices with matrices of the same axes"
        );
    }
    report::history::render_compare(&rows, plan.json, &mut out)?;
    if let Some(path) = html {
        let (ra, rb) = (
            report::model::build(super::source::load(&plan.db, a)?),
            report::model::build(super::source::load(&plan.db, b)?),
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

/// One cell of a stored run or matrix: its received rates and the environments of its first
/// completed run (the one `compare` diffs).
struct Cell {
    name: String,
    rates: Vec<f64>,
    client_env: Option<Environment>,
    server_env: Option<Environment>,
}

impl Cell {
    fn new(name: String, rec: &RunRecord) -> Self {
        let env = |r: Option<&linerate_proto::SideResults>| {
            r.and_then(|r| r.environment.as_deref()).cloned()
        };
        Self {
            name,
            rates: vec![received_rate(&summarize(rec))],
            client_env: env(rec.client.as_ref()),
            server_env: env(rec.server_results.as_ref()),
        }
    }
}

/// Received rates per cell: one cell (`run`) for a run, the matrix's cells for a group.
pub(super) fn samples(store: &Store, r: HistoryRef) -> Result<Vec<(String, Vec<f64>)>> {
    Ok(cells(store, r)?.into_iter().map(|c| (c.name, c.rates)).collect())
}

fn cells(store: &Store, r: HistoryRef) -> Result<Vec<Cell>> {
    // Only completed runs have figures of a whole test: an interrupted one covers part of it.
    let completed = |rec: &RunRecord| rec.outcome == Outcome::Completed;
    match store.resolve(r, false)? {
        HistoryRef::Last => bail!("`last` could not be resolved in {}", store.path().display()),
        HistoryRef::Run(id) => {
            let (_, rec) = store.run(id)?.with_context(|| format!("no run {id} in the history"))?;
            match &rec.outcome {
                Outcome::Completed => {}
                Outcome::Interrupted => bail!(
                    "run {id} was interrupted: its figures cover part of a test, so it is not \
                     compared; compare completed runs"
                ),
                Outcome::Failed { .. } => bail!("run {id} failed: it has no figures to compare"),
            }
            Ok(vec![Cell::new("run".into(), &rec)])
        }
        HistoryRef::Group(id) => {
            store.group(id)?.with_context(|| format!("no matrix m{id} in the history"))?;
            let mut cells: Vec<Cell> = Vec::new();
            for (_, meta, rec) in store.group_runs(id)? {
                if !completed(&rec) {
                    continue;
                }
                let name = meta.cell.unwrap_or_else(|| "run".into());
                match cells.iter_mut().find(|c| c.name == name) {
                    Some(c) => c.rates.push(received_rate(&summarize(&rec))),
                    None => cells.push(Cell::new(name, &rec)),
                }
            }
            Ok(cells)
        }
    }
}
