//! The JSON document of one run (`-J`), specified in docs/JSON.md.
//!
//! The document is the raw record plus the derived summary: `{"schema_version", "kind",
//! "record", "summary"}`. It is written for failed runs too (with `record.outcome`).

use std::io::Write;

use serde::Serialize;

use crate::plan::search::{SearchAnswer, SearchPlan};
use crate::record::{RunRecord, SCHEMA_VERSION};
use crate::stats::{Summary, summarize};

#[derive(Serialize)]
struct Document<'a> {
    schema_version: u32,
    kind: &'static str,
    record: &'a RunRecord,
    summary: Summary,
}

/// Writes the run as one pretty-printed JSON document followed by a newline.
pub fn render_run(record: &RunRecord, out: &mut dyn Write) -> std::io::Result<()> {
    let doc = Document {
        schema_version: SCHEMA_VERSION,
        kind: "linerate.run",
        record,
        summary: summarize(record),
    };
    serde_json::to_writer_pretty(&mut *out, &doc).map_err(std::io::Error::other)?;
    writeln!(out)
}

/// Writes any serializable value as one JSON line (server logs).
pub fn render_line<T: Serialize>(value: &T, out: &mut dyn Write) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, value).map_err(std::io::Error::other)?;
    writeln!(out)
}

#[derive(Serialize)]
struct SearchDocument<'a> {
    schema_version: u32,
    kind: &'static str,
    max_loss_percent: f64,
    answer: &'a SearchAnswer,
    records: &'a [RunRecord],
}

/// Writes a `--find-max` search: the answer, every trial, and each trial's full record.
pub fn render_search(
    answer: &SearchAnswer,
    plan: &SearchPlan,
    records: &[RunRecord],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let doc = SearchDocument {
        schema_version: SCHEMA_VERSION,
        kind: "linerate.find_max",
        max_loss_percent: plan.max_loss * 100.0,
        answer,
        records,
    };
    serde_json::to_writer_pretty(&mut *out, &doc).map_err(std::io::Error::other)?;
    writeln!(out)
}

/// The report's JSON document: a run's `linerate.run`, a matrix's `linerate.matrix` or a
/// campaign's `linerate.campaign` document (docs/JSON.md), exactly as the live commands write
/// them, so a saved report reads back with `linerate report FILE.json`.
pub fn render_report(
    report: &crate::report::model::Report,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    use crate::report::model::ReportKind;
    let runs_of = |tier: usize| -> Vec<(usize, u32, RunRecord)> {
        report
            .runs
            .iter()
            .filter(|r| r.tier == tier)
            .map(|r| (r.cell, r.repetition, r.record.clone()))
            .collect()
    };
    match report.kind {
        ReportKind::Run => match report.runs.first() {
            Some(run) => render_run(&run.record, out),
            None => Err(std::io::Error::other("a run report without its run (a bug)")),
        },
        ReportKind::Matrix => {
            let tier = report.tiers.first().ok_or_else(|| std::io::Error::other("no tier"))?;
            let meta =
                crate::report::matrix::MatrixMeta { seed: report.seed, until_ci: report.until_ci };
            crate::report::matrix::render_json(
                meta,
                &tier.summary,
                &runs_of(0),
                tier.stopped.as_deref(),
                out,
            )
        }
        ReportKind::Campaign => {
            let runs: Vec<Vec<(usize, u32, RunRecord)>> =
                (0..report.tiers.len()).map(runs_of).collect();
            let tiers: Vec<_> =
                report.tiers.iter().cloned().zip(runs.iter().map(|r| &r[..])).collect();
            let meta = crate::report::campaign::CampaignMeta {
                name: report.name.as_deref().unwrap_or(&report.title),
                seed: report.seed,
                group: report.group,
                finished: report.finished,
            };
            crate::report::campaign::render_json(meta, &tiers, &report.findings, out)
        }
    }
}
