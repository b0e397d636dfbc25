//! `linerate show ID`: one stored run, as the client printed it, with both ends' environments.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;

use crate::plan::{HistoryPlan, HistoryRef};
use crate::record::Failure;
use crate::report;
use crate::store::Stored;

/// Runs `linerate show`.
pub fn run(plan: &HistoryPlan, which: HistoryRef) -> Result<ExitCode> {
    let store = super::history::open_existing(&plan.db)?;
    let Stored::Run(id) = store.resolve(which, true)? else {
        return Err(Failure::usage(
            "`show` shows one run; use `linerate report` for a matrix or campaign".to_string(),
        )
        .into());
    };
    let (_, record) = store
        .run(id)?
        .ok_or_else(|| Failure::usage(format!("no run {id} in {}", plan.db.display())))?;
    let mut out = std::io::stdout().lock();
    if plan.json {
        report::json::render_run(&record, &mut out)?;
    } else {
        report::text::render_run(&record, &mut out)?;
        report::environment::render_ends(&record, &mut out)?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
