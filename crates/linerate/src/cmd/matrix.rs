//! `linerate matrix HOST`: glue between the matrix plan, its runner (`session::matrix`), the
//! history (one group of kind "matrix", every run a `MatrixCell`) and the report.
//!
//! Resuming (`--resume [mN]`): the group's params hold the matrix's settings (target, axes,
//! repetitions, the base test) and the order seed. The same command line with `--resume`
//! continues the newest unfinished matrix with exactly those settings (or the one named),
//! keeps its completed runs, runs the failed and missing ones in the stored order, and refuses
//! a group whose settings differ (see `resume`). A group is finished only when every planned
//! run completed, so a matrix with failed runs can be completed later.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use serde_json::Value;

use super::failed::{grid_failure, interrupted};
use super::keep::{self, GroupRuns};
use crate::plan::matrix::{Cell, MatrixIdentity, MatrixPlan, MatrixRun};
use crate::plan::{ClientPlan, OutputFormat};
use crate::record::{Outcome, RunRecord};
use crate::report::notice::{Console, Notice, Stored};
use crate::session::{self, Interrupt};
use crate::stats;
use crate::store::resume::{self, Earlier, Resumable};
use crate::store::{GroupKind, RunKind, Store};

/// Runs every cell (after the completed runs of a resumed group), shows progress on a
/// terminal, stores every run, then renders the table and findings (or one JSON document).
pub fn run(
    base: &ClientPlan,
    plan: &MatrixPlan,
    how: &MatrixRun,
    interrupt: &Interrupt,
) -> Result<ExitCode> {
    let console = super::console(base.output == OutputFormat::Text);
    let mut store = keep::open(&base.store, &console);
    // `-A auto`: the placement of each shape of cell, before the group is stored or run.
    let mut base = base.clone();
    let streams: Vec<u32> =
        plan.cells().iter().map(|c| plan.cell_plan(&base, c).spec.streams).collect();
    super::placement::resolve(&mut base, &streams, &console, interrupt)?;
    let base = &base;
    let (group, plan, earlier) = start_or_resume(base, plan, how, &mut store, &console)?;
    let cells = plan.cells();
    if base.output == OutputFormat::Text {
        let resumed = how.resume.and(group).map(|g| (g, earlier.kept.len()));
        crate::report::matrix::render_start(&plan, &base.spec, resumed, &mut std::io::stdout())?;
    }
    let mut progress = |p: session::grid::Progress<'_, RunRecord>| {
        console.progress(&crate::report::progress::Progress::of_test(&p));
    };
    let mut runs = GroupRuns::new(
        store,
        (RunKind::MatrixCell, group),
        base.store.labels.clone(),
        (how.stop_after, interrupt),
        &console,
    );
    runs.wanted = base.store.path.clone();
    let mut keep = |cell: &Cell, rep: u32, record: &RunRecord| runs.keep(cell.label(), rep, record);
    let kept = earlier.kept.len();
    let mut outcome = session::matrix::run_matrix_from(
        base,
        &plan,
        earlier.kept,
        interrupt,
        &mut progress,
        &mut keep,
    );
    console.end_progress();
    let complete = outcome.stopped.is_none()
        && outcome.runs.iter().all(|(_, _, r)| r.outcome == Outcome::Completed);
    if let (Some(s), Some(g), true) = (runs.store.as_mut(), group, complete) {
        s.finish_group(g)?;
    }
    let unstored = runs.unstored();
    // What the group holds now, as `report` reads it: every earlier run, then the new ones.
    let mut all = earlier.all;
    all.extend(outcome.runs.drain(kept..));
    outcome.runs = all;
    let runs: Vec<(usize, RunRecord)> =
        outcome.runs.iter().map(|(c, _, r)| (*c, r.clone())).collect();
    let summary = stats::matrix::summarize_matrix(&cells, &runs, plan.until_ci);
    let mut out = std::io::stdout().lock();
    let stopped = outcome.stopped.as_deref();
    match base.output {
        OutputFormat::Text => crate::report::matrix::render_text(&summary, stopped, &mut out)?,
        _ => crate::report::matrix::render_json(
            crate::report::matrix::MatrixMeta { seed: Some(plan.seed), until_ci: plan.until_ci },
            &summary,
            &outcome.runs,
            stopped,
            &mut out,
        )?,
    }
    out.flush()?;
    if let Some(g) = group {
        console.show(&Notice::Stored(Stored::Matrix(g)));
    }
    if let (Some(group), false) = (group, complete) {
        console.show(&Notice::MatrixIncomplete { group });
    }
    if interrupt.count() > 0 {
        return Err(interrupted(interrupt, "the runs until then are above"));
    }
    unstored?;
    grid_failure(("matrix", "runs"), stopped, outcome.runs.iter().map(|(_, _, r)| r))?;
    let cells: Vec<(String, Vec<f64>)> =
        summary.cells.iter().map(|c| (c.label.clone(), c.samples.clone())).collect();
    super::gate::gate(base, &cells)?;
    Ok(ExitCode::SUCCESS)
}

/// A stored identity with its sizes written canonically (`MatrixIdentity::canonical`), for
/// comparing plans; an identity that does not read is compared as it is.
fn canonical_identity(identity: &Value) -> Value {
    let typed = serde_json::from_value::<MatrixIdentity>(identity.clone());
    typed.ok().and_then(|i| serde_json::to_value(i.canonical()).ok()).unwrap_or(identity.clone())
}

/// A new group (if there is a history), or the group to resume with its seed and runs.
fn start_or_resume(
    base: &ClientPlan,
    plan: &MatrixPlan,
    how: &MatrixRun,
    store: &mut Option<Store>,
    console: &Console,
) -> Result<(Option<i64>, MatrixPlan, Earlier<usize>)> {
    let identity = serde_json::to_value(MatrixIdentity::of(base, plan))?;
    let fix = "repeat the original command line (host, port, axes, --repeat, test flags)";
    let resumable = Resumable::new(GroupKind::Matrix, &identity, fix);
    let resumable = Resumable { canonical: canonical_identity, ..resumable };
    let opened = keep::open_group(store, how.resume, &resumable, plan.seed, console)?;
    let (Some(g), Some(s)) = (&opened.continued, store.as_ref()) else {
        return Ok((opened.id, plan.clone(), Earlier::default()));
    };
    // The group's cells keep the words they were stored with (`w=256k`), however they were
    // written this time.
    let stored = g.params.plan::<MatrixIdentity>().ok().and_then(|i| i.axes);
    let axes = stored.unwrap_or_else(|| plan.axes.clone());
    let plan = MatrixPlan { seed: opened.seed, axes, ..plan.clone() };
    let cells = plan.cells();
    let place = |label: &str| cells.iter().find(|c| c.is_named(label)).map(|c| c.index);
    let earlier = Earlier::of(resume::placed_runs(s, g, place)?);
    Ok((opened.id, plan, earlier))
}
