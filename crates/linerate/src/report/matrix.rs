//! A matrix's table and findings, as text or as one JSON document.

use std::io::Write;

use serde::Serialize;

use linerate_proto::TestSpec;

use crate::plan::matrix::MatrixPlan;
use crate::plan::schedule::Schedule;
use crate::record::{RunRecord, SCHEMA_VERSION};
use crate::report::schedule::plan_line;
use crate::stats::matrix::MatrixSummary;
use crate::store::GroupKind;

/// The header lines before the first run: the matrix, for a resumed matrix (`--resume`) its
/// group and how many completed runs it keeps, and the plan's runs and duration (`spec`: the
/// base test, whose time and warm-up every run has).
pub fn render_start(
    plan: &MatrixPlan,
    spec: &TestSpec,
    resumed: Option<(i64, usize)>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let cells = plan.cells().len();
    let ci = plan
        .until_ci
        .map(|t| {
            format!(
                ", until the 95% CI is within ±{:.1}% (at most {} runs)",
                t * 100.0,
                plan.max_repeat
            )
        })
        .unwrap_or_default();
    writeln!(
        out,
        "Matrix: {cells} cell(s) x {} run(s){ci}, random order (--seed {})",
        plan.repeat, plan.seed
    )?;
    if let Some((group, kept)) = resumed {
        let m = GroupKind::Matrix.reference(group);
        writeln!(out, "Resuming matrix {m}: {kept} completed run(s) kept.")?;
    }
    let done = resumed.map_or(0, |(_, kept)| kept);
    writeln!(out, "{}", plan_line(&Schedule::of_matrix(plan, spec, done)))
}

/// The table (Gbit/s received per run, both ends' CPU, what limited the cell) and findings.
pub fn render_text(
    summary: &MatrixSummary,
    stopped: Option<&str>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    crate::report::sections::write_matrix(
        crate::report::style::Style::Text,
        summary,
        None,
        stopped,
        out,
    )
}

#[derive(Serialize)]
struct Document<'a, S: Serialize> {
    schema_version: u32,
    kind: &'static str,
    seed: Option<u64>,
    until_ci: Option<f64>,
    stopped: Option<&'a str>,
    summary: &'a S,
    runs: Vec<RunEntry<'a>>,
}

/// One run in a JSON document, with its cell and repetition.
#[derive(Serialize)]
pub(crate) struct RunEntry<'a> {
    cell: usize,
    repetition: u32,
    record: &'a RunRecord,
}

/// The runs of a matrix (or a campaign tier) as JSON entries.
pub(crate) fn run_entries<R: std::borrow::Borrow<RunRecord>>(
    runs: &[(usize, u32, R)],
) -> Vec<RunEntry<'_>> {
    runs.iter()
        .map(|(cell, repetition, record)| RunEntry {
            cell: *cell,
            repetition: *repetition,
            record: std::borrow::Borrow::borrow(record),
        })
        .collect()
}

/// How a matrix document describes its matrix: the order seed (None when unknown) and the
/// `--until-ci` target.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MatrixMeta {
    /// Order seed.
    pub seed: Option<u64>,
    /// `--until-ci` target, a fraction of the mean.
    pub until_ci: Option<f64>,
}

/// One JSON document: the summary, then every run's record with its cell.
pub fn render_json(
    meta: MatrixMeta,
    summary: &MatrixSummary,
    runs: &[(usize, u32, RunRecord)],
    stopped: Option<&str>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    grid_document("linerate.matrix", meta, summary, runs, stopped, out)
}

/// A grid's JSON document of `kind` (a matrix's, a mesh's): its seed and `--until-ci`, why it
/// stopped, its summary, then every run's record with its cell.
pub(crate) fn grid_document<S: Serialize, R: std::borrow::Borrow<RunRecord>>(
    kind: &'static str,
    meta: MatrixMeta,
    summary: &S,
    runs: &[(usize, u32, R)],
    stopped: Option<&str>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let doc = Document {
        schema_version: SCHEMA_VERSION,
        kind,
        seed: meta.seed,
        until_ci: meta.until_ci,
        stopped,
        summary,
        runs: run_entries(runs),
    };
    serde_json::to_writer_pretty(&mut *out, &doc).map_err(std::io::Error::other)?;
    writeln!(out)
}
