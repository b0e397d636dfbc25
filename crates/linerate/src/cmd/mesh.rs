//! `linerate mesh AGENT...`: glue between the mesh plan, its runner (`session::mesh`), the
//! history (one group of kind "mesh", every pair test a `mesh_pair` run labelled `A -> B`)
//! and its output (`report::mesh`).

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;

use super::failed::{grid_failure, interrupted};
use super::keep::{self, GroupRuns};
use crate::plan::OutputFormat;
use crate::plan::mesh::{MeshIdentity, MeshPlan, cells, check_agents};
use crate::record::{Failure, Outcome, RunRecord};
use crate::report::notice::{Notice, Stored};
use crate::session::Interrupt;
use crate::session::grid::Slot;
use crate::store::resume::{self, Resumable};
use crate::store::{GroupKind, RunKind};

/// One mesh, or (`--every`, `--slip`) meshes on a schedule (`super::every`): each a group of
/// its own, taking the requester lock for its run, so two never overlap.
pub fn run(plan: &MeshPlan, interrupt: &Interrupt) -> Result<ExitCode> {
    let Some(schedule) = plan.every else { return once(plan, interrupt) };
    let console = super::console(plan.base.output == OutputFormat::Text);
    let then = "compare two: linerate compare nA nB; each mesh's pairs are set against the \
                meshes before it";
    // Each mesh of the schedule its own order: the first the plan's seed, the next derived.
    let mut k = 0u64;
    let mut next = || {
        let seed = if k == 0 { plan.seed } else { crate::plan::matrix::round_seed(plan.seed, k) };
        k += 1;
        once(&MeshPlan { seed, ..plan.clone() }, interrupt)
    };
    super::every::on_schedule(schedule, (&console, interrupt), then, &mut next)
}

/// Runs every pair, shows progress on a terminal, stores every run, then renders the tables
/// and findings (or one JSON document).
fn once(plan: &MeshPlan, interrupt: &Interrupt) -> Result<ExitCode> {
    let base = &plan.base;
    let text = base.output == OutputFormat::Text;
    let console = super::console(text);
    let _lock = match plan.dry_run {
        true => None,
        false => keep::requester_lock(&base.store, "mesh", &console, interrupt)?,
    };
    let mut status = |s: &str| console.show(&Notice::AwaitingAgents(s));
    let (each, least) = (plan.each_address, crate::plan::mesh::MIN_AGENTS);
    // A dry run contacts no agent: the names are resolved once, nobody is greeted.
    let wait = if plan.dry_run { Default::default() } else { plan.agent_wait };
    let agents = crate::session::fleet::discover(
        &plan.agents,
        each,
        wait,
        least,
        base,
        interrupt,
        &mut status,
    )
    .map_err(|e| match (wait.awaits(), e.too_few) {
        (true, true) => Failure::new(crate::record::FailureKind::Network, one_node(&e.why)),
        (true, false) => Failure::new(crate::record::FailureKind::Network, e.why),
        (false, _) => Failure::usage(e.why),
    })?;
    check_agents(&agents).map_err(|e| match plan.each_address {
        // What the names resolve to decides, not what was typed: the cluster has too few nodes.
        true => Failure::new(crate::record::FailureKind::Network, one_node(&e)),
        false => Failure::usage(e),
    })?;
    if plan.dry_run {
        // Only a sample by zone needs the agents: their zones choose the pairs.
        let greeted = match plan.sample.by_zone() {
            true => crate::session::mesh::preflight(&agents, base),
            false => Vec::new(),
        };
        let pairs = sampled(plan, agents.len(), &greeted, plan.seed)?;
        let shape = shape(plan, &hosts(agents.len(), &greeted), &pairs, &[]);
        crate::report::mesh::render_start(&shape, None, &[], &mut std::io::stdout().lock())?;
        return Ok(ExitCode::SUCCESS);
    }
    check_descriptors(plan.concurrency.min(agents.len() / 2).max(1))?;
    let greeted = crate::session::mesh::preflight(&agents, base);
    let key_file = plan.key_file.as_deref();
    if let Some(msg) = crate::session::agents::key_refusal(&agents, &greeted, key_file) {
        return Err(Failure::new(crate::record::FailureKind::Refused, msg).into());
    }
    if let Some((a, why)) = agents.iter().zip(&greeted).find_map(|(a, g)| match g {
        Err(u) if u.refused => Some((a, u.why.clone())),
        _ => None,
    }) {
        let why = crate::units::peer_text::escape(&why);
        let msg = format!(
            "agent {} refuses this requester at pre-flight: {why}; no test was started",
            a.label
        );
        return Err(Failure::new(crate::record::FailureKind::Refused, msg).into());
    }
    let unreached: std::collections::HashMap<(String, u16), String> = agents
        .iter()
        .zip(&greeted)
        .filter_map(|(a, g)| {
            let why = g.as_ref().err()?;
            let why = crate::units::peer_text::escape(&why.why);
            Some(((a.host.clone(), a.port), format!("not reachable at pre-flight: {why}")))
        })
        .collect();
    let agents = if crate::plan::mesh::labelled(&plan.agents) {
        agents
    } else {
        crate::session::mesh::named_by_node(&agents, &greeted)
    };
    let mut store = keep::open(&base.store, &console);
    let rounds = crate::plan::StoredRounds::of(plan.repeat, plan.until_ci, plan.max_repeat);
    let opened = open(plan, (agents.as_slice(), &greeted), rounds, &mut store, &console)?;
    let Opened { group, seed, identity, kept, earlier } = opened;
    let plan = &MeshPlan { seed, ..plan.clone() };
    let (agents, pairs) = (identity.agents.clone(), identity.pairs.clone());
    let dead: Vec<Option<String>> =
        agents.iter().map(|a| unreached.get(&(a.host.clone(), a.port)).cloned()).collect();
    let labels = identity.labels();
    let cells = cells(&labels);
    let hosts = hosts(agents.len(), &greeted);
    if text {
        let mut out = std::io::stdout().lock();
        let shape = shape(plan, &hosts, &pairs, &dead);
        let resumed = match (plan.resume, group) {
            (Some(_), Some(g)) => Some((g, kept.len())),
            _ => None,
        };
        let not_reached: Vec<(&str, &str)> = agents
            .iter()
            .zip(&dead)
            .filter_map(|(a, why)| Some((a.label.as_str(), why.as_deref()?)))
            .collect();
        crate::report::mesh::render_start(&shape, resumed, &not_reached, &mut out)?;
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
        console.progress(&crate::report::progress::Progress::of_test(&p));
    };
    let mut keep = |slot: Slot, record: &RunRecord| {
        runs.keep(labels[slot.cell].clone(), slot.repetition, record);
    };
    let mut mesh = crate::session::mesh::Pairs {
        plan,
        agents: &agents,
        pairs: &pairs,
        labels: &labels,
        dead,
        hosts,
    };
    let kept_runs = kept.len();
    let ran = crate::session::mesh::run_mesh(&mut mesh, kept, interrupt, &mut progress, &mut keep);
    let (mut outcome, gone, shared_rounds) = (ran.grid, ran.dead, ran.shared_rounds);
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
    let by_cell: Vec<(usize, &RunRecord)> = outcome.runs.iter().map(|(s, r)| (s.cell, r)).collect();
    let agent_labels: Vec<String> = agents.iter().map(|a| a.label.clone()).collect();
    let summary =
        crate::stats::mesh::summarize_mesh(&agent_labels, &pairs, &cells, &by_cell, plan.until_ci);
    let interference = interference_check(plan, (&mesh, shared_rounds), &summary, interrupt, text)?;
    // Each pair against the meshes before it, when this one is stored.
    let watch = match (runs.store.as_ref(), group) {
        (Some(s), Some(g)) => {
            let stored = s.pair_runs(g, crate::stats::mesh_watch::WATCHED_MESHES)?;
            Some(crate::stats::mesh_watch::watch(g, &stored, &Default::default()))
        }
        _ => None,
    };
    let live = crate::report::mesh::Live {
        gone: &gone,
        interference: interference.as_ref(),
        watch: watch.as_ref(),
    };
    let stopped = outcome.stopped.as_deref();
    let mut out = std::io::stdout().lock();
    match base.output {
        OutputFormat::Text => crate::report::mesh::write_mesh(
            crate::report::style::Style::Text,
            &summary,
            stopped,
            &mut out,
        )
        .and_then(|()| crate::report::mesh::write_gone(&gone, &mut out))
        .and_then(|()| crate::report::mesh::write_interference(interference.as_ref(), &mut out))
        .and_then(|()| crate::report::mesh::write_watch(watch.as_ref(), &mut out))?,
        _ => {
            let runs: Vec<(usize, u32, &RunRecord)> =
                outcome.runs.iter().map(|(s, r)| (s.cell, s.repetition, r)).collect();
            let meta = crate::report::matrix::MatrixMeta {
                seed: Some(plan.seed),
                until_ci: plan.until_ci,
            };
            crate::report::mesh::render_json(meta, &summary, &runs, stopped, live, &mut out)?
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

/// The interference check after the rounds: a seeded sample of the pairs with completed runs,
/// each run again alone, set against its in-round figure. None when it does not apply: no
/// sample asked for, no round that ran (`shared_rounds`) held two pairs (`--serial`,
/// `--concurrency 1`, fewer than four agents, agents of two networks on two nodes), or an
/// interrupted mesh.
fn interference_check(
    plan: &MeshPlan,
    (mesh, shared_rounds): (&crate::session::mesh::Pairs<'_>, bool),
    summary: &crate::stats::mesh::MeshSummary,
    interrupt: &Interrupt,
    text: bool,
) -> Result<Option<crate::stats::mesh::Interference>> {
    if plan.interference == 0 || !shared_rounds || interrupt.count() > 0 {
        return Ok(None);
    }
    let completed: Vec<usize> =
        summary.cells.iter().filter(|c| c.runs > 0).map(|c| c.index).collect();
    let cells = crate::plan::mesh::interference_sample(&completed, plan.interference, plan.seed);
    if cells.is_empty() {
        return Ok(None);
    }
    if text {
        let out = &mut std::io::stdout().lock();
        crate::report::mesh::render_interference_start(cells.len(), plan.seed, out)?;
    }
    let runs = crate::session::mesh::alone(mesh, &cells, interrupt);
    let rates: Vec<(usize, f64)> = runs
        .iter()
        .filter(|(_, r)| r.outcome == Outcome::Completed)
        .map(|(c, r)| (*c, crate::stats::matrix::received_rate(&crate::stats::summarize(r))))
        .collect();
    Ok(Some(crate::stats::mesh::interference(summary, &rates, plan.seed)))
}

/// The plan's shape for agents on `hosts` running `pairs`, `dead` of them not reachable.
fn shape(
    plan: &MeshPlan,
    hosts: &[usize],
    pairs: &[crate::plan::mesh::Pair],
    dead: &[Option<String>],
) -> crate::plan::rounds::Shape {
    let n = hosts.len();
    let rounds = crate::plan::rounds::schedule_on(hosts, pairs, plan.concurrency, plan.seed).len();
    let spec = &plan.base.spec;
    crate::plan::rounds::Shape {
        agents: n,
        unreachable: dead.iter().filter(|d| d.is_some()).count(),
        pairs: pairs.len(),
        repeat: plan.repeat,
        rounds,
        concurrency: plan.concurrency,
        time: spec.duration_ms().map(std::time::Duration::from_millis),
        omit: std::time::Duration::from_millis(spec.omit_ms),
    }
}

/// Refuses a mesh whose pairs at once would need more open files than this process may have:
/// each pair at once is a control connection (and its name lookup) here.
fn check_descriptors(at_once: usize) -> Result<()> {
    let need = 2 * at_once as u64 + 64;
    if let Some(limit) = crate::sys::raise_fd_limit()
        && need > limit
    {
        let why = format!(
            "{at_once} pairs at once need about {need} open files, but this process may open \
             {limit}: raise it (ulimit -n {need}) or give --concurrency {}",
            (limit.saturating_sub(64) / 2).max(1)
        );
        return Err(Failure::new(crate::record::FailureKind::Environment, why).into());
    }
    Ok(())
}

/// The pairs the plan's `--sample` picks among `n` agents with `seed`, by the zones the
/// agents reported when `greeted` (empty: not greeted); a usage error when a sample by zone
/// meets agents of which none has a zone.
fn sampled(
    plan: &MeshPlan,
    n: usize,
    greeted: &crate::session::mesh::Greeted,
    seed: u64,
) -> Result<Vec<crate::plan::mesh::Pair>> {
    let zones = reported(n, greeted, |h| &h.zone);
    let reachable: Vec<bool> = greeted.iter().map(Result::is_ok).collect();
    let picked = match crate::plan::mesh::network_groups(&reported(n, greeted, |h| &h.network)) {
        Some(groups) => {
            crate::plan::sample::pairs_within(&groups, plan.sample, seed, &zones, &reachable)
        }
        None => crate::plan::sample::pairs(n, plan.sample, seed, &zones, &reachable),
    };
    picked.map_err(|e| Failure::usage(e).into())
}

/// Each of `n` agents' host by the nodes they reported (none greeted: each its own).
fn hosts(n: usize, greeted: &crate::session::mesh::Greeted) -> Vec<usize> {
    crate::plan::rounds::hosts(&reported(n, greeted, |h| &h.node))
}

/// What each of `n` agents said of itself at the pre-flight (`field` of its greeting): None
/// for one that did not answer, named nothing, or was not greeted.
fn reported(
    n: usize,
    greeted: &crate::session::mesh::Greeted,
    field: fn(&crate::session::agents::Heard) -> &Option<String>,
) -> Vec<Option<String>> {
    (0..n)
        .map(|i| greeted.get(i).and_then(|g| g.as_ref().ok()).and_then(|h| field(h).clone()))
        .collect()
}

/// Why a mesh over a name that resolved to too few agents cannot run, and what to do instead.
fn one_node(e: &str) -> String {
    format!(
        "{e}. A mesh tests pairs of nodes: on a one-node cluster (kind, minikube) there is no \
         pair; `linerate fleet --each-address` (the fleet Job) measures the pod network to that \
         node's agent instead"
    )
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
    (agents, greeted): (&[crate::plan::fleet::Target], &crate::session::mesh::Greeted),
    rounds: crate::plan::StoredRounds,
    store: &mut Option<crate::store::Store>,
    console: &crate::report::notice::Console,
) -> Result<Opened> {
    let identity = MeshIdentity {
        agents: agents.to_vec(),
        pairs: sampled(plan, agents.len(), greeted, plan.seed)?,
        spec: plan.base.spec.clone(),
        rounds,
    };
    let wanted = serde_json::to_value(&identity)?;
    let fix = "repeat the original command line (agents, --sample, --repeat, --until-ci, test \
               flags; with --each-address the names must still resolve to the same agents)";
    let resumable = Resumable::new(GroupKind::Mesh, &wanted, fix);
    let resumable = Resumable { canonical: without_pairs, ..resumable };
    let opened = keep::open_group(store, plan.resume, &resumable, plan.seed, console)?;
    let (Some(g), Some(s)) = (&opened.continued, store.as_ref()) else {
        let (kept, earlier) = (Vec::new(), Vec::new());
        return Ok(Opened { group: opened.id, seed: opened.seed, identity, kept, earlier });
    };
    // The stored pairs: a sample drawn from the stored seed.
    let identity: MeshIdentity = g.params.plan()?;
    let labels = identity.labels();
    let place = |cell: &str| labels.iter().position(|l| l.as_str() == cell);
    let earlier = resume::Earlier::of(resume::placed_runs(s, g, place)?);
    let slot =
        |(cell, repetition, record): (usize, u32, RunRecord)| (Slot { cell, repetition }, record);
    let kept = earlier.kept.into_iter().map(slot).collect();
    let earlier = earlier.all.into_iter().map(slot).collect();
    Ok(Opened { group: opened.id, seed: opened.seed, identity, kept, earlier })
}
