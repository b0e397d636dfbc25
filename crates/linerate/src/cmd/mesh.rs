//! `linerate mesh AGENT...`: glue between the mesh plan, its runner (`session::mesh`), the
//! history (one group of kind "mesh", every pair test a `mesh_pair` run labelled `A -> B`)
//! and its output (`report::mesh`).

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;

use super::failed::{group_failure_kind, interrupted, last_failure};
use super::keep::{self, GroupRuns};
use crate::plan::OutputFormat;
use crate::plan::mesh::{MeshIdentity, MeshPlan, cells, check_agents, pair_label, pairs};
use crate::record::{Failure, Outcome, RunRecord};
use crate::report::notice::{Notice, Stored};
use crate::session::Interrupt;
use crate::session::grid::Slot;
use crate::store::{GroupKind, GroupParams, RunKind};

/// Runs every pair, shows progress on a terminal, stores every run, then renders the tables
/// and findings (or one JSON document).
pub fn run(plan: &MeshPlan, interrupt: &Interrupt) -> Result<ExitCode> {
    let base = &plan.base;
    let console = super::console(base.output == OutputFormat::Text);
    let agents = crate::session::fleet::expand(&plan.agents, plan.each_address, base.family)
        .map_err(Failure::usage)?;
    check_agents(&agents).map_err(Failure::usage)?;
    let agents = if plan.labelled {
        agents
    } else {
        crate::session::mesh::named_by_node(&agents, base)
    };
    let pairs = pairs(agents.len(), plan.sample, plan.seed);
    let labels: Vec<String> = pairs.iter().map(|p| pair_label(&agents, *p)).collect();
    let cells = cells(&labels);
    let identity = MeshIdentity {
        agents: agents.clone(),
        pairs: pairs.clone(),
        spec: base.spec.clone(),
        rounds: crate::plan::StoredRounds::of(plan.repeat, plan.until_ci, plan.max_repeat),
    };
    let mut store = keep::open(&base.store, &console);
    let params = GroupParams::new(&identity, Some(plan.seed))?;
    let group = store.as_mut().and_then(|s| s.begin_group(GroupKind::Mesh, None, &params).ok());
    if base.output == OutputFormat::Text {
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "Mesh of {} agents: {} ordered pairs × {} runs, one pair at a time (order seed {})",
            agents.len(),
            pairs.len(),
            plan.repeat,
            plan.seed
        )?;
    }
    let mut runs = GroupRuns::new(
        store,
        (RunKind::MeshPair, group),
        base.store.labels.clone(),
        (plan.stop_after, interrupt),
        &console,
    );
    runs.wanted = base.store.path.clone();
    let mut progress = |p: crate::session::grid::Progress<'_, RunRecord>| {
        console.progress(&crate::report::progress::Progress::of_run(&labels[p.slot.cell], &p));
    };
    let mut keep = |slot: Slot, record: &RunRecord| {
        runs.keep(labels[slot.cell].clone(), slot.repetition, record);
    };
    let mesh = crate::session::mesh::Pairs { plan, agents: &agents, pairs: &pairs, labels: &labels };
    let outcome = crate::session::mesh::run_mesh(
        mesh,
        Vec::new(),
        interrupt,
        &mut progress,
        &mut keep,
    );
    console.end_progress();
    let complete = outcome.stopped.is_none()
        && outcome.runs.iter().all(|(_, r)| r.outcome == Outcome::Completed);
    if let (Some(s), Some(g), true) = (runs.store.as_mut(), group, complete) {
        s.finish_group(g)?;
    }
    let unstored = runs.unstored();
    let by_cell: Vec<(usize, RunRecord)> =
        outcome.runs.iter().map(|(s, r)| (s.cell, r.clone())).collect();
    let agent_labels: Vec<String> = agents.iter().map(|a| a.label.clone()).collect();
    let summary =
        crate::stats::mesh::summarize_mesh(&agent_labels, &pairs, &cells, &by_cell, plan.until_ci);
    let stopped = outcome.stopped.as_deref();
    let mut out = std::io::stdout().lock();
    match base.output {
        OutputFormat::Text => crate::report::mesh::write_mesh(
            crate::report::document::Style::Text,
            &summary,
            stopped,
            &mut out,
        )?,
        _ => {
            let runs: Vec<(usize, u32, RunRecord)> =
                outcome.runs.iter().map(|(s, r)| (s.cell, s.repetition, r.clone())).collect();
            let meta = crate::report::matrix::MatrixMeta { seed: Some(plan.seed), until_ci: plan.until_ci };
            crate::report::mesh::render_json(meta, &summary, &runs, stopped, &mut out)?
        }
    }
    out.flush()?;
    if let Some(g) = group {
        console.show(&Notice::Stored(Stored::Mesh(g)));
    }
    if interrupt.count() > 0 {
        return Err(interrupted(interrupt, "the runs until then are above"));
    }
    unstored?;
    let records = || outcome.runs.iter().map(|(_, r)| r);
    let kind = group_failure_kind(records());
    if let Some(why) = stopped {
        return Err(Failure::new(kind, format!("mesh stopped early: {why}")).into());
    }
    if let Some(last) = last_failure(records()) {
        let failed = records().filter(|r| r.outcome.failure().is_some()).count();
        let why = format!("{failed} of {} pair tests failed (last: {})", outcome.runs.len(), last.message);
        return Err(Failure::new(kind, why).into());
    }
    Ok(ExitCode::SUCCESS)
}
