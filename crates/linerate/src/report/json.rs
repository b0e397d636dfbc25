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
    /// `end` on the last line of `--json-stream`; absent in the `-J` document.
    #[serde(skip_serializing_if = "Option::is_none")]
    event: Option<&'static str>,
    schema_version: u32,
    kind: &'static str,
    record: &'a RunRecord,
    summary: Summary,
}

/// Writes the run as one pretty-printed JSON document followed by a newline.
pub fn render_run(record: &RunRecord, out: &mut dyn Write) -> std::io::Result<()> {
    let doc = Document {
        event: None,
        schema_version: SCHEMA_VERSION,
        kind: "linerate.run",
        record,
        summary: summarize(record),
    };
    serde_json::to_writer_pretty(&mut *out, &doc).map_err(std::io::Error::other)?;
    writeln!(out)
}

/// The last line of `--json-stream`: the run's document on one line, with `"event": "end"`.
pub fn render_run_line(record: &RunRecord, out: &mut dyn Write) -> std::io::Result<()> {
    let doc = Document {
        event: Some("end"),
        schema_version: SCHEMA_VERSION,
        kind: "linerate.run",
        record,
        summary: summarize(record),
    };
    render_line(&doc, out)
}

/// `--json-stream`: live events as JSON lines, flushed one by one (docs/JSON.md, "JSON lines
/// while a test runs"). Called from the session's sampler, never from a stream's data loop.
pub struct JsonStream<W: Write> {
    out: W,
}

impl<W: Write> std::fmt::Debug for JsonStream<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonStream").finish()
    }
}

impl<W: Write> JsonStream<W> {
    /// Writes lines to `out`.
    pub fn new(out: W) -> Self {
        Self { out }
    }
}

/// One stream's interval in a `--json-stream` line.
#[derive(Serialize)]
struct StreamLine<'a> {
    id: u32,
    flow: linerate_proto::Flow,
    role: linerate_proto::StreamRole,
    bits_per_second: Option<f64>,
    #[serde(flatten)]
    sample: &'a linerate_proto::IntervalSample,
}

impl<W: Write> crate::session::Observer for JsonStream<W> {
    fn on_event(&mut self, event: crate::session::LiveEvent<'_>) {
        use crate::session::LiveEvent;
        let line = match event {
            LiveEvent::Accepted { local, remote, server_software } => serde_json::json!({
                "event": "accepted", "local_address": local, "remote_address": remote,
                "server_software": server_software,
            }),
            LiveEvent::Started { streams } => {
                serde_json::json!({ "event": "started", "streams": streams })
            }
            LiveEvent::Interval(rows) => {
                let streams: Vec<StreamLine<'_>> = rows
                    .iter()
                    .map(|r| {
                        let us = r.sample.end_us.saturating_sub(r.sample.start_us);
                        StreamLine {
                            id: r.id,
                            flow: r.flow,
                            role: r.role,
                            bits_per_second: (us > 0)
                                .then(|| r.sample.bytes as f64 * 8e6 / us as f64),
                            sample: &r.sample,
                        }
                    })
                    .collect();
                serde_json::json!({ "event": "interval", "streams": streams })
            }
            LiveEvent::Notice(text) => serde_json::json!({ "event": "notice", "text": text }),
            LiveEvent::Queued { position, wait } => serde_json::json!({
                "event": "queued", "position": position,
                "wait_ms": wait.map(|w| w.as_millis() as u64),
            }),
        };
        // A closed pipe must not stop the test; the final document reports the run.
        let _ = render_line(&line, &mut self.out);
        let _ = self.out.flush();
    }
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

/// The report's JSON document: a run's `linerate.run`, a matrix's `linerate.matrix`, a
/// campaign's `linerate.campaign` or a fleet's `linerate.fleet` (`linerate.fleet_scale`)
/// document (docs/JSON.md), exactly as the live commands write
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
            if let Some(m) = &report.mesh {
                let stopped = tier.stopped.as_deref();
                return crate::report::mesh::render_json(
                    meta,
                    m,
                    &runs_of(0),
                    stopped,
                    crate::report::mesh::Live { gone: &[], interference: None, watch: None },
                    out,
                );
            }
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
        ReportKind::Fleet => match report.fleet() {
            Some(f) => crate::report::fleet::render_report_json(report, f, None, out),
            None => Err(std::io::Error::other("a fleet report without its fleet (a bug)")),
        },
    }
}
