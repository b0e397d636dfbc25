//! `linerate history`: lists stored runs (newest first), filtered by label, server, group or
//! outcome (`--failed` lists failures with their errors).

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Result, bail};

use crate::plan::{HistoryCommand, HistoryPlan};
use crate::record::Failure;
use crate::report;
use crate::store::{ListFilter, Store};

/// The history at `plan.db`, opened read-only (so a read-only one, or one on a full disk,
/// still reads), or an error saying how to get one.
pub(super) fn open_existing(db: &std::path::Path) -> Result<Store> {
    if !db.exists() {
        return Err(Failure::usage(format!(
            "no history at {}: run a test first (results are stored by default), or give --db PATH",
            db.display()
        ))
        .into());
    }
    Store::open_read_only(db)
}

/// The wall-clock time `ago` before now, milliseconds since the Unix epoch (0 when that is
/// before the epoch: every run).
pub(super) fn since_unix_ms(ago: std::time::Duration) -> u64 {
    let ago = u64::try_from(ago.as_millis()).unwrap_or(u64::MAX);
    crate::record::unix_ms_now().saturating_sub(ago)
}

/// Runs `linerate history`.
pub fn run(plan: &HistoryPlan) -> Result<ExitCode> {
    let store = open_existing(&plan.db)?;
    let HistoryCommand::List { label, server, since, group, outcome, limit } = &plan.command else {
        bail!("not a history listing");
    };
    let filter = ListFilter {
        label: label.clone(),
        server: server.clone(),
        since_unix_ms: since.map(since_unix_ms),
        group: *group,
        outcome: *outcome,
        limit: Some(*limit),
    };
    let rows = store.list(&filter)?;
    let mut out = std::io::stdout().lock();
    report::history::render_list(&rows, plan.json, &mut out)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
