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
