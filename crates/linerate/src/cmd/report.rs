//! `linerate report`: reads a stored run, matrix, campaign or fleet from the history, or a saved JSON
//! document (`source.rs`), and writes the report in the chosen format to stdout or a file.
//! A file is written whole or not at all (a temporary file renamed into place), so a failed
//! report never leaves half a file where the last good one was.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};

use super::source::{from_file, load};
use crate::plan::{ReportPlan, ReportSource};
use crate::record::Failure;
use crate::report::model::build;
use crate::stats::change_point::Method;
use crate::stats::trend::trend;
use crate::store::ListFilter;

/// Runs `linerate report`.
pub fn run(plan: &ReportPlan) -> Result<ExitCode> {
    let source = match &plan.source {
        ReportSource::Trend { db, target, server, since } => {
            let store = super::history::open_existing(db)?;
            let since_unix_ms = since.map(super::history::since_unix_ms);
            let filter =
                ListFilter { server: Some(server.clone()), since_unix_ms, ..Default::default() };
            let runs = store.trend_runs(&filter)?;
            let trend = trend(target, since_unix_ms, runs, Method::default());
            let mut buf = Vec::new();
            crate::report::trend::render(&trend, plan.format, &mut buf)?;
            return emit(plan, &buf);
        }
        ReportSource::History { db, which } => load(db, *which)?,
        // A file the user named that does not read as a report is the user's to fix.
        ReportSource::File(path) => from_file(path).map_err(|e| Failure::usage_of(&e))?,
    };
    let report = build(source);
    let mut buf = Vec::new();
    crate::report::render(&report, plan.format, &mut buf)?;
    emit(plan, &buf)
}

/// Writes a finished report where the plan says.
fn emit(plan: &ReportPlan, buf: &[u8]) -> Result<ExitCode> {
    match &plan.output {
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(buf)?;
            out.flush()?;
        }
        Some(path) => write_whole(path, buf)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes `bytes` to `path` through a temporary file in the same directory.
pub fn write_whole(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    std::fs::write(&tmp, bytes)
        .with_context(|| format!("cannot write the report to {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| {
        let _ = std::fs::remove_file(&tmp);
        format!("cannot move the report into place at {}", path.display())
    })
}
