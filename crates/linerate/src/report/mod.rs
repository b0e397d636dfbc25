//! Renderers: the only code that writes results for people or programs to read.
//!
//! Every figure comes from `stats` (compute first, render separately). Renderers take a
//! `Write` so they can be snapshot-tested. What a command says besides its results (warnings,
//! notes, hints, progress) is a `notice::Notice` or a `progress::Progress`, shown through one
//! `notice::Console`; commands do not print.

pub mod campaign;
pub mod campaign_fleet;
pub mod charts;
pub mod csv;
pub mod doctor;
pub mod document;
pub mod environment;
pub mod fleet;
pub mod history;
pub mod html;
pub mod iperf3_json;
pub mod json;
pub mod kubernetes;
pub mod latency;
pub mod live;
pub mod matrix;
pub mod mesh;
pub mod model;
pub mod notice;
pub mod progress;
pub mod schedule;
pub mod sections;
pub mod stamped;
pub mod style;
pub mod table;
pub mod text;
pub mod trend;
pub mod under_load;
pub mod verbose;
pub mod words;
pub mod yaml;

/// Writes `report` in `format`.
pub fn render(
    report: &model::Report,
    format: crate::plan::ReportFormat,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    use crate::plan::ReportFormat;
    match format {
        ReportFormat::Text => document::write_report(style::Style::Text, report, out),
        ReportFormat::Markdown => document::write_report(style::Style::Markdown, report, out),
        ReportFormat::Csv(kind) => csv::write(report, kind, out),
        ReportFormat::Json => json::render_report(report, out),
        ReportFormat::Html => html::write(report, out),
    }
}
