//! `linerate show ID`: one stored run, as the client printed it, with both ends' environments.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;

use crate::plan::HistoryPlan;
use crate::record::{Failure, RunRecord};
use crate::report;

/// Runs `linerate show`.
pub fn run(plan: &HistoryPlan, id: i64) -> Result<ExitCode> {
    let store = super::history::open_existing(&plan.db)?;
    let (_, record) = store
        .run(id)?
        .ok_or_else(|| Failure::usage(format!("no run {id} in {}", plan.db.display())))?;
    let mut out = std::io::stdout().lock();
    if plan.json {
        report::json::render_run(&record, &mut out)?;
    } else {
        report::text::render_run(&record, &mut out)?;
        show_environments(&record, &mut out)?;
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
