//! Glue between runs and the history database: storing what ran (never at the cost of the
//! run: a database that cannot be opened or written gives a warning and the results are still
//! printed) and the `history`, `show` and `compare` commands.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow, bail};

use std::path::Path;

use crate::plan::{Gates, HistoryCommand, HistoryPlan, HistoryRef, StorePlan};
use crate::record::{Outcome, RunRecord};
use crate::report;
use crate::stats::compare::compare;
use crate::stats::environment::end_changes;
use crate::stats::matrix::received_rate;
use crate::stats::summarize;
use crate::store::{ListFilter, RunMeta, Store};
use crate::units::format_bits_per_second;
use linerate_proto::Environment;

/// Significance level of `linerate compare`.
pub const ALPHA: f64 = 0.05;

/// The store of a plan, or None (with a warning saying why) when it cannot be used.
pub fn open(plan: &StorePlan) -> Option<Store> {
    let path = plan.path.as_ref()?;
    match Store::open(path) {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!("warning: results will not be stored: {e:#}");
            None
        }
    }
}

/// Stores `record`; a failure is a warning, not an error. Returns the run id.
pub fn keep(store: &mut Option<Store>, record: &RunRecord, meta: &RunMeta) -> Option<i64> {
    let s = store.as_mut()?;
    match s.insert_run(record, meta) {
        Ok(id) => Some(id),
        Err(e) => {
            eprintln!("warning: this run was not stored: {e:#}");
            None
        }
    }
}

/// Stores the runs of one group (a matrix or a campaign) as they finish, each as a cell with
/// its repetition; with the hidden `--stop-after N` it triggers `interrupt` after the Nth, as
/// Ctrl-C would (the tests of `--resume`).
#[derive(Debug)]
pub struct GroupRuns<'a> {
    /// The history, if there is one (a failure to store is a warning, see [`keep`]).
    pub store: Option<Store>,
    /// The kind every run is stored as.
    pub kind: crate::store::RunKind,
    /// The group they belong to.
    pub group: Option<i64>,
    /// `--label`s.
    pub labels: Vec<String>,
    /// Stop after this many runs were stored.
    pub stop_after: Option<usize>,
    /// Triggered at `stop_after`.
    pub interrupt: &'a crate::session::Interrupt,
    stored: usize,
}

impl<'a> GroupRuns<'a> {
    /// Runs of `kind` into `group` of `store`.
    pub fn new(
        store: Option<Store>,
        (kind, group): (crate::store::RunKind, Option<i64>),
        labels: Vec<String>,
        (stop_after, interrupt): (Option<usize>, &'a crate::session::Interrupt),
    ) -> Self {
        Self { store, kind, group, labels, stop_after, interrupt, stored: 0 }
    }

    /// Stores `record` as repetition `rep` of `cell`.
    pub fn keep(&mut self, cell: String, rep: u32, record: &RunRecord) {
        let meta = RunMeta {
            kind: self.kind,
            group: self.group,
            cell: Some(cell),
            repetition: Some(rep),
            labels: self.labels.clone(),
        };
        keep(&mut self.store, record, &meta);
        self.stored += 1;
        if self.stop_after.is_some_and(|n| self.stored >= n) {
            self.interrupt.trigger();
        }
    }
}

/// Runs a history command.
pub fn run(plan: &HistoryPlan) -> Result<ExitCode> {
    if !plan.db.exists() {
        bail!(
            "no history at {}: run a test first (results are stored by default), or give --db PATH",
            plan.db.display()
        );
    }
    let store = Store::open(&plan.db)?;
    let mut out = std::io::stdout().lock();
    match &plan.command {
        HistoryCommand::List { label, server, group, limit } => {
            let filter = ListFilter {
                label: label.clone(),
                server: server.clone(),
                group: *group,
                limit: Some(*limit),
            };
            let rows = store.list(&filter)?;
            report::history::render_list(&rows, plan.json, &mut out)?;
        }
        HistoryCommand::Show(id) => {
            let (_, record) =
                store.run(*id)?.ok_or_else(|| anyhow!("no run {id} in {}", plan.db.display()))?;
            if plan.json {
                report::json::render_run(&record, &mut out)?;
            } else {
                report::text::render_run(&record, &mut out)?;
                show_environments(&record, &mut out)?;
            }
        }
        HistoryCommand::Compare(a, b, html) => {
            let (a_cells, b_cells) = (cells(&store, *a)?, cells(&store, *b)?);
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
                    report::model::build(crate::reporting::load(&plan.db, *a)?),
                    report::model::build(crate::reporting::load(&plan.db, *b)?),
                );
                let mut page = Vec::new();
                report::html::write_compare(&ra, &rb, &rows, &mut page)?;
                crate::reporting::write_whole(path, &page)?;
                if !plan.json {
                    writeln!(out, "HTML comparison written to {}", path.display())?;
                }
            }
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// Both ends' environments under a shown run (or why one is missing).
fn show_environments(record: &RunRecord, out: &mut dyn Write) -> Result<()> {
    for (end, side) in [("client", &record.client), ("server", &record.server_results)] {
        match side.as_ref().and_then(|s| s.environment.as_deref()) {
            Some(e) => report::environment::render(&format!("Environment ({end})"), e, out)?,
            None => writeln!(out, "Environment ({end}): not recorded")?,
        }
    }
    Ok(())
}

/// Which gates failed for these results (cell label, received rates); empty = passed.
/// The baseline comes from the history at `db`.
pub fn failed_gates(
    gates: &Gates,
    db: Option<&Path>,
    cells: &[(String, Vec<f64>)],
) -> Result<Vec<String>> {
    let mut failed = Vec::new();
    if let Some(min) = gates.below {
        for (cell, xs) in cells.iter().filter(|(_, xs)| !xs.is_empty()) {
            let mean = xs.iter().sum::<f64>() / xs.len() as f64;
            if mean < min as f64 {
                failed.push(format!(
                    "{cell}: received {} (mean of {}), below --fail-below {}",
                    format_bits_per_second(mean),
                    xs.len(),
                    format_bits_per_second(min as f64)
                ));
            }
        }
    }
    if let Some((drop, baseline)) = gates.regression {
        let db = db.context("--fail-regression needs the history")?;
        let before = samples(&Store::open(db)?, baseline)?;
        let mut common = 0;
        for (cell, xs) in cells {
            let Some((_, base)) = before.iter().find(|(c, _)| c == cell) else { continue };
            common += 1;
            let c = compare(base, xs, ALPHA);
            let change = c.change_percent.unwrap_or(0.0);
            let testable = c.n_a >= 2 && c.n_b >= 2;
            if change < -drop * 100.0 && (c.significant || !testable) {
                let how = if testable {
                    c.verdict.clone()
                } else {
                    "single runs: not tested for significance".into()
                };
                failed.push(format!("{cell}: {change:.1}% against the baseline ({how})"));
            }
        }
        if common == 0 {
            bail!("the baseline {baseline:?} has no cell in common with these results");
        }
    }
    Ok(failed)
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
fn samples(store: &Store, r: HistoryRef) -> Result<Vec<(String, Vec<f64>)>> {
    Ok(cells(store, r)?.into_iter().map(|c| (c.name, c.rates)).collect())
}

fn cells(store: &Store, r: HistoryRef) -> Result<Vec<Cell>> {
    let completed = |rec: &RunRecord| !matches!(rec.outcome, Outcome::Failed { .. });
    match r {
        HistoryRef::Run(id) => {
            let (_, rec) = store.run(id)?.with_context(|| format!("no run {id} in the history"))?;
            if !completed(&rec) {
                bail!("run {id} failed: it has no figures to compare");
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
