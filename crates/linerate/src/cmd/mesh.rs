//! `linerate mesh AGENT...`: glue between the mesh plan, its runner (`session::mesh`), the
//! history (one group of kind "mesh", every pair test a `mesh_pair` run labelled `A -> B`)
//! and its output (`report::mesh`).

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};

use super::failed::{grid_failure, interrupted};
use super::keep::{self, GroupRuns};
use crate::plan::OutputFormat;
use crate::plan::mesh::{MeshIdentity, MeshPlan, cells, check_agents, pairs};
use crate::record::{Failure, Outcome, RunRecord};
use crate::report::notice::{Notice, Stored};
use crate::session::Interrupt;
use crate::session::grid::Slot;
use crate::store::resume::{self, Resumable};
use crate::store::{GroupKind, GroupParams, RunKind};

/// Runs every pair, shows progress on a terminal, stores every run, then renders the tables
/// and findings (or one JSON document).
pub fn run(plan: &MeshPlan, interrupt: &Interrupt) -> Result<ExitCode> {
    let base = &plan.base;
    let console = super::console(base.output == OutputFormat::Text);
    let agents = crate::session::fleet::expand(&plan.agents, plan.each_address, base.family)
        .map_err(Failure::usage)?;
    check_agents(&agents).map_err(Failure::usage)?;
    let agents = if crate::plan::mesh::labelled(&plan.agents) {
        agents
    } else {
        crate::session::mesh::named_by_node(&agents, base)
    };
    let mut store = keep::open(&base.store, &console);
    let rounds = crate::plan::StoredRounds::of(plan.repeat, plan.until_ci, plan.max_repeat);
    let opened = open(plan, &agents, rounds, &mut store)?;
    let Opened { group, seed, identity, kept, earlier } = opened;
    let plan = &MeshPlan { seed, ..plan.clone() };
    let (agents, pairs) = (identity.agents.clone(), identity.pairs.clone());
    let labels = identity.labels();
    let cells = cells(&labels);
    if base.output == OutputFormat::Text {
        let mut out = std::io::stdout().lock();
        let resumed = match (plan.resume, group) {
            (Some(_), Some(g)) => format!(", resuming mesh n{g} ({} runs kept)", kept.len()),
            _ => String::new(),
        };
        writeln!(
            out,
            "Mesh of {} agents: {} ordered pairs × {} runs, one pair at a time (order seed \
             {seed}){resumed}",
            agents.len(),
            pairs.len(),
            plan.repeat,
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
    let kept_runs = kept.len();
    let mut outcome = crate::session::mesh::run_mesh(
        mesh,
        kept,
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
    // What the group holds now: every earlier run (failed attempts too), then the new ones.
    let mut all = earlier;
    all.extend(outcome.runs.drain(kept_runs..));
    outcome.runs = all;
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
    if let (Some(group), false) = (group, complete) {
        console.show(&Notice::MeshIncomplete { group });
    }
    if interrupt.count() > 0 {
        return Err(interrupted(interrupt, "the runs until then are above"));
    }
    unstored?;
    grid_failure(("mesh", "pair tests"), stopped, outcome.runs.iter().map(|(_, r)| r))?;
    Ok(ExitCode::SUCCESS)
}

/// A mesh's group, new or resumed: its seed and identity (a resumed one's as stored), the
/// completed runs the walk skips, and every earlier run of its plan.
struct Opened {
    group: Option<i64>,
    seed: u64,
    identity: MeshIdentity,
    kept: Vec<(Slot, RunRecord)>,
    earlier: Vec<(Slot, RunRecord)>,
}

/// The identity compared on `--resume`: without its pairs, which a sample draws from the seed
/// (the stored group's seed and pairs are used).
fn without_pairs(identity: &serde_json::Value) -> serde_json::Value {
    let mut v = identity.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("pairs");
    }
    v
}

/// A new group for the mesh (if there is a history), or the unfinished one it resumes.
fn open(
    plan: &MeshPlan,
    agents: &[crate::plan::fleet::Target],
    rounds: crate::plan::StoredRounds,
    store: &mut Option<crate::store::Store>,
) -> Result<Opened> {
    let identity = |seed: u64| MeshIdentity {
        agents: agents.to_vec(),
        pairs: pairs(agents.len(), plan.sample, seed),
        spec: plan.base.spec.clone(),
        rounds: rounds.clone(),
    };
    let Some(which) = plan.resume else {
        let identity = identity(plan.seed);
        let params = GroupParams::new(&identity, Some(plan.seed))?;
        let group = store.as_mut().and_then(|s| s.begin_group(GroupKind::Mesh, None, &params).ok());
        let (kept, earlier) = (Vec::new(), Vec::new());
        return Ok(Opened { group, seed: plan.seed, identity, kept, earlier });
    };
    let s = store.as_ref().context("--resume needs the history, which cannot be opened")?;
    let wanted = serde_json::to_value(identity(plan.seed))?;
    let resumable = Resumable {
        kind: GroupKind::Mesh,
        plan: &wanted,
        name: None,
        fix: "repeat the original command line (agents, --pairs, --repeat, --until-ci, test \
              flags; with --each-address the names must still resolve to the same agents)",
        canonical: without_pairs,
    };
    let g = resume::find_open_group(s, which, &resumable)?;
    let seed = resume::stored_seed(&g)?;
    let identity: MeshIdentity = g.params.plan()?;
    let labels = identity.labels();
    let (mut kept, mut earlier) = (Vec::new(), Vec::new());
    for run in resume::planned_runs(s, g.id)? {
        let cell = labels
            .iter()
            .position(|l| *l == run.cell)
            .with_context(|| format!("run {:?} of mesh n{} is of no pair here", run.cell, g.id))?;
        let slot = Slot { cell, repetition: run.repetition };
        if run.kept {
            kept.push((slot, run.record.clone()));
        }
        earlier.push((slot, run.record));
    }
    Ok(Opened { group: Some(g.id), seed, identity, kept, earlier })
}
