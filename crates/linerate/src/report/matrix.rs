//! A matrix's table and findings, as text or as one JSON document.

use std::io::Write;

use serde::Serialize;

use crate::plan::matrix::MatrixPlan;
use crate::record::{RunRecord, SCHEMA_VERSION};
use crate::stats::matrix::{CellSummary, MatrixSummary};

/// The header line before the first run.
pub fn render_start(plan: &MatrixPlan, cells: usize, out: &mut dyn Write) -> std::io::Result<()> {
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
    )
}

fn gbit(v: f64) -> String {
    format!("{:.3}", v / 1e9)
}

fn row(c: &CellSummary) -> String {
    let Some(s) = &c.bits_per_second else {
        return format!(
            "{:<24} {:>3} {:>9}  no completed run ({} failed)",
            c.label, c.runs, "", c.failed
        );
    };
    let sd = s.stddev.map_or("n/a".into(), gbit);
    let ci = s.ci95.map_or("n/a".into(), |(lo, hi)| format!("{}-{}", gbit(lo), gbit(hi)));
    let cv = s.cv.map_or("n/a".into(), |cv| format!("{:.1}%", cv * 100.0));
    let cpu = |v: Option<f64>| v.map_or("n/a".into(), |v| format!("{v:.0}%"));
    let outliers = if s.outliers.is_empty() {
        String::new()
    } else {
        format!(" outliers:{}", s.outliers.len())
    };
    let failed = if c.failed > 0 { format!(" failed:{}", c.failed) } else { String::new() };
    format!(
        "{:<24} {:>3} {:>8} {:>8} {:>8} {:>8} ± {:<7} {:>15} {:>6} {:>6} {:>6}  {}{outliers}{failed}",
        c.label,
        c.runs,
        gbit(s.min),
        gbit(s.median),
        gbit(s.max),
        gbit(s.mean),
        sd,
        ci,
        cv,
        cpu(c.client_cpu_percent),
        cpu(c.server_cpu_percent),
        c.limit.as_deref().unwrap_or("n/a")
    )
}

/// The table (Gbit/s received per run, both ends' CPU, what limited the cell) and findings.
pub fn render_text(
    summary: &MatrixSummary,
    stopped: Option<&str>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<24} {:>3} {:>8} {:>8} {:>8} {:>8}   {:<7} {:>15} {:>6} {:>6} {:>6}  limit",
        "cell (Gbit/s received)",
        "n",
        "min",
        "median",
        "max",
        "mean",
        "sd",
        "95% CI",
        "CV",
        "cli",
        "srv"
    )?;
    for c in &summary.cells {
        writeln!(out, "{}", row(c))?;
    }
    if summary.cells.iter().any(|c| c.loss_percent.is_some()) {
        for c in summary.cells.iter().filter(|c| c.loss_percent.is_some()) {
            writeln!(out, "{}: UDP loss {:.3}% (mean)", c.label, c.loss_percent.unwrap_or(0.0))?;
        }
    }
    writeln!(out, "Findings:")?;
    for f in &summary.findings {
        writeln!(out, "  - {f}")?;
    }
    if let Some(why) = stopped {
        writeln!(out, "Stopped early: {why}; the table covers the runs that finished.")?;
    }
    Ok(())
}

#[derive(Serialize)]
struct Document<'a> {
    schema_version: u32,
    kind: &'static str,
    seed: u64,
    stopped: Option<&'a str>,
    summary: &'a MatrixSummary,
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
pub(crate) fn run_entries(runs: &[(usize, u32, RunRecord)]) -> Vec<RunEntry<'_>> {
    runs.iter()
        .map(|(cell, repetition, record)| RunEntry { cell: *cell, repetition: *repetition, record })
        .collect()
}

/// One JSON document: the summary, then every run's record with its cell.
pub fn render_json(
    plan: &MatrixPlan,
    summary: &MatrixSummary,
    runs: &[(usize, u32, RunRecord)],
    stopped: Option<&str>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let doc = Document {
        schema_version: SCHEMA_VERSION,
        kind: "linerate.matrix",
        seed: plan.seed,
        stopped,
        summary,
        runs: run_entries(runs),
    };
    serde_json::to_writer_pretty(&mut *out, &doc).map_err(std::io::Error::other)?;
    writeln!(out)
}

/// The progress bar line (for a terminal `columns` wide).
pub fn progress_line(
    (done, planned): (usize, usize),
    cell: &str,
    repetition: u32,
    eta: Option<std::time::Duration>,
    columns: usize,
) -> String {
    super::progress::bar_line(done, planned, &format!("{cell} (run {repetition})"), eta, columns)
}
