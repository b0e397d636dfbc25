//! `linerate campaign FILE`: glue between the campaign plan, its runner
//! (`session::campaign`), the history (one group of kind "campaign", every run a
//! `CampaignCell` named `TIER/CELL`) and the report.
//!
//! Pre-flight: before the first run (and before a group is begun) every tier with runs left
//! has its host resolved and its server greeted (`session::preflight`); one not reached stops
//! the campaign with exit status 3, naming each such tier, its host and why, with nothing run
//! or stored. A tier that stops later is told at once as a warning (`Notice::TierStopped`).
//!
//! Fleet tiers: every target is greeted; the open-files limit must hold the largest fleet
//! (checked as `fleet` checks it); each host run is stored as `TIER/k=K` with its fleet place,
//! and a fleet run counts as done on resume only when every host of one attempt completed.
//!
//! Resuming: the group's params hold the parsed plan and the order seed. `--resume` takes the
//! newest unfinished campaign group whose stored plan equals the file's (or the group given)
//! and refuses, naming the group, if the file changed since — mixing runs of two different
//! plans in one table would be silently wrong. Completed runs are kept; failed, interrupted and
//! missing ones are run; the same seed gives the same order, so the runs left are the ones the
//! first attempt had not reached. A group is finished only when every planned run completed.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;

use super::failed::{group_failure_kind, interrupted};
use super::keep::{self, GroupRuns};
use crate::plan::ClientPlan;
use crate::plan::campaign::{CampaignPlan, CampaignRun, Tier};
use crate::plan::matrix::Cell;
use crate::record::{Failure, FailureKind, Outcome, RunRecord};
use crate::report::campaign::{self as render, CampaignMeta};
use crate::report::notice::{Console, Notice, Stored};
use crate::report::progress::Progress;
use crate::session::Interrupt;
use crate::session::campaign::{CampaignEvent, Ran, run_campaign, runs_done};
use crate::session::preflight::{self, Check};
use crate::stats::campaign::{TierSummary, cross_tier_findings, summarize_tier};
use crate::stats::campaign_fleet::{FleetShape, completed_fleet_runs};
use crate::store::resume::{self, Resumable};
use crate::store::{GroupKind, GroupRow, RunKind, Store};

/// Runs of an earlier attempt, per tier: (cell index, repetition, record).
type Prior = Vec<Vec<(usize, u32, RunRecord)>>;

/// A resumed group's runs per tier: the completed ones the runner skips, and every stored run
/// of the plan in stored order (failed and interrupted attempts too, which the figures do not
/// count but the tables and the document list, as `report` does).
#[derive(Debug)]
struct Earlier {
    kept: Prior,
    all: Prior,
}

impl Earlier {
    fn none(tiers: usize) -> Self {
        Self { kept: vec![Vec::new(); tiers], all: vec![Vec::new(); tiers] }
    }
}

/// Checks every tier's server, runs the campaign, stores every run, renders the report.
pub fn run(c: &CampaignRun, interrupt: &Interrupt) -> Result<ExitCode> {
    let text = c.output == crate::plan::OutputFormat::Text;
    let console = super::console(text);
    let mut store = keep::open(&c.store, &console);
    let plan_json = serde_json::to_value(&c.plan)?;
    let resumable = Resumable::new(GroupKind::Campaign, &plan_json, "restore the campaign file");
    let resumable = Resumable { name: Some(&c.plan.name), ..resumable };
    // A continued group is read now; a new one is begun only once every server answered.
    let (group, seed, earlier) = match keep::continued(store.as_ref(), c.resume, &resumable)? {
        Some(opened) => {
            let runs = match (&opened.continued, store.as_ref()) {
                (Some(g), Some(s)) => prior_runs(s, g, &c.plan, opened.seed)?,
                _ => Earlier::none(c.plan.tiers.len()),
            };
            (opened.id, opened.seed, runs)
        }
        None => (None, c.seed, Earlier::none(c.plan.tiers.len())),
    };
    let kept_per_tier: Vec<usize> = earlier.kept.iter().map(Vec::len).collect();
    let done_per_tier: Vec<usize> =
        c.plan.tiers.iter().zip(&earlier.kept).map(|(t, k)| runs_done(t, k)).collect();
    if text {
        let resumed = group.map(|g| (g, &done_per_tier[..]));
        render::render_start(&c.plan, seed, resumed, &mut std::io::stdout().lock())?;
    }
    let bases: Vec<_> =
        c.plan.tiers.iter().map(|t| t.client_plan(c.output, c.store.clone())).collect();
    for (t, base) in c.plan.tiers.iter().zip(&bases) {
        if let Some(fleet) = t.fleet_plan(0, c.output, base.store.clone()) {
            super::fleet::check_descriptors(&fleet)?;
        }
    }
    preflight(c, &bases, &done_per_tier, text, &console)?;
    // `-A auto`: each loopback tier's placement, before the group is stored or run.
    let mut bases = bases;
    for (i, (t, base)) in c.plan.tiers.iter().zip(bases.iter_mut()).enumerate() {
        if t.fleet.is_none() {
            let m = t.matrix_plan(crate::plan::campaign::CampaignPlan::tier_seed(seed, i));
            let streams: Vec<u32> =
                m.cells().iter().map(|cell| m.cell_plan(base, cell).spec.streams).collect();
            super::placement::resolve(base, &streams, &console, interrupt)?;
        }
    }
    let group = match group {
        Some(g) => Some(g),
        None => keep::begin(&mut store, &resumable, seed, &console).id,
    };
    let mut events = |e: CampaignEvent<'_>| match e {
        CampaignEvent::Run(p) => console.progress(&Progress::of_campaign(&p)),
        CampaignEvent::TierStopped { tier, tier_index, tiers, why } => {
            console.show(&Notice::TierStopped {
                tier: &tier.name,
                index: tier_index,
                tiers,
                why,
                next: c.plan.tiers.get(tier_index + 1).map(|t| t.name.as_str()),
            })
        }
    };
    let mut runs = GroupRuns::new(
        store,
        (RunKind::CampaignCell, group),
        c.store.labels.clone(),
        (c.stop_after, interrupt),
        &console,
    );
    runs.wanted = c.store.path.clone();
    let mut keep = |tier: &Tier, ran: Ran<'_>| match ran {
        Ran::Cell { cell, repetition, record } => {
            runs.keep(format!("{}/{}", tier.name, cell.label()), repetition, record);
        }
        Ran::Fleet { hosts, repetition, records } => {
            for record in records {
                runs.keep(format!("{}/k={hosts}", tier.name), repetition, record);
            }
        }
    };
    let mut outcome =
        run_campaign(&c.plan, &bases, seed, earlier.kept, interrupt, &mut events, &mut keep);
    console.end_progress();
    let complete = outcome.tiers.iter().all(|o| {
        o.stopped.is_none() && o.runs.iter().all(|(_, _, r)| r.outcome == Outcome::Completed)
    });
    // What the group holds now, as `report` reads it: every earlier run, then the new ones.
    for ((o, mut all), kept) in outcome.tiers.iter_mut().zip(earlier.all).zip(kept_per_tier) {
        all.extend(o.runs.drain(kept..));
        o.runs = all;
    }
    let summaries: Vec<TierSummary> = c
        .plan
        .tiers
        .iter()
        .zip(&outcome.tiers)
        .map(|(t, o)| summarize_tier(t, &o.runs, o.stopped.as_deref()))
        .collect();
    if let (Some(s), Some(g), true) = (runs.store.as_mut(), group, complete) {
        s.finish_group(g)?;
    }
    let unstored = runs.unstored();
    let findings = cross_tier_findings(&summaries);
    let mut out = std::io::stdout().lock();
    if text {
        render::render_text(&summaries, &findings, &mut out)?;
    } else {
        let meta = CampaignMeta { name: &c.plan.name, seed: Some(seed), group, finished: complete };
        let tiers: Vec<_> =
            summaries.into_iter().zip(&outcome.tiers).map(|(s, o)| (s, &o.runs[..])).collect();
        render::render_json(meta, &tiers, &findings, &mut out)?;
    }
    out.flush()?;
    let kind =
        group_failure_kind(outcome.tiers.iter().flat_map(|t| t.runs.iter().map(|(_, _, r)| r)));
    let status = conclude(c, (group, complete, kind), interrupt, &console)?;
    unstored?;
    Ok(status)
}

/// Resolves and greets the server (of `bases[i]`; a fleet tier: every target) of every tier
/// with runs left (`done[i]` runs of tier `i` completed earlier); stops the campaign before
/// its first run if one is not reached.
fn preflight(
    c: &CampaignRun,
    bases: &[ClientPlan],
    done: &[usize],
    text: bool,
    console: &Console,
) -> Result<()> {
    // Each distinct server is greeted once; `uses` says which check answers for which tier.
    let mut uses: Vec<(usize, &Tier, usize)> = Vec::new();
    let mut plans: Vec<ClientPlan> = Vec::new();
    for (i, t) in c.plan.tiers.iter().enumerate() {
        let left = done.get(i).copied().unwrap_or(0) < t.planned_runs();
        if !(t.matrix.until_ci_fraction.is_some() || left) {
            continue;
        }
        let servers = match t.fleet_plan(0, c.output, bases[i].store.clone()) {
            Some(f) => f.targets.iter().map(|target| f.plan_for(target)).collect(),
            None => vec![bases[i].clone()],
        };
        for plan in servers {
            let same = |p: &ClientPlan| p.host == plan.host && p.port == plan.port;
            let at = plans.iter().position(same).unwrap_or_else(|| {
                plans.push(plan);
                plans.len() - 1
            });
            uses.push((i, t, at));
        }
    }
    let checks = preflight::check_all(&plans.iter().collect::<Vec<_>>());
    let checked: Vec<(usize, &Tier, &Check)> =
        uses.iter().map(|(i, t, at)| (*i, *t, &checks[*at])).collect();
    let failed = checks.iter().find_map(|check| check.result.as_ref().err());
    if let Some((why, _)) = failed {
        // A server that did not answer is named once, with the first tier that needs it.
        let first: Vec<(usize, &Tier, &Check)> = uses
            .iter()
            .enumerate()
            .filter(|(n, (_, _, at))| !uses[..*n].iter().any(|(_, _, a)| a == at))
            .map(|(_, (i, t, at))| (*i, *t, &checks[*at]))
            .collect();
        let unreached = render::preflight_unreached(&first, c.plan.tiers.len());
        console.show(&Notice::Unreached(&unreached));
        let what = render::preflight_failure(&unreached, &c.file);
        return Err(Failure::new(why.kind(), what).into());
    }
    if text {
        render::render_preflight(&checked, &mut std::io::stdout().lock())?;
    }
    Ok(())
}

/// The last lines and the exit status: how to continue an incomplete campaign; `kind` is the
/// kind of its last failed run.
fn conclude(
    c: &CampaignRun,
    (group, complete, kind): (Option<i64>, bool, FailureKind),
    interrupt: &Interrupt,
    console: &Console,
) -> Result<ExitCode> {
    let db = c.db_given.as_ref().map_or(String::new(), |d| format!(" --db {}", d.display()));
    let hint = format!("linerate campaign {}{db} --resume", c.file.display());
    if let Some(g) = group {
        console.show(&Notice::Stored(Stored::Campaign(g)));
    }
    if complete {
        return Ok(ExitCode::SUCCESS);
    }
    let unresumable = "the campaign did not complete, and without the history it cannot be resumed";
    if interrupt.count() > 0 {
        return Err(match group {
            Some(_) => interrupted(
                interrupt,
                &format!("the completed runs are stored; continue with `{hint}`"),
            ),
            None => interrupted(interrupt, unresumable),
        });
    }
    if group.is_none() {
        return Err(Failure::new(kind, unresumable).into());
    }
    Err(Failure::new(
        kind,
        format!(
            "the campaign did not complete (a tier stopped early or runs failed; see above); \
             fix the cause and run the missing runs with `{hint}`"
        ),
    )
    .into())
}

/// The runs of continued group `g`, per tier, by cell index (see [`Earlier`]).
fn prior_runs(store: &Store, g: &GroupRow, plan: &CampaignPlan, seed: u64) -> Result<Earlier> {
    let cells: Vec<Vec<Cell>> = plan
        .tiers
        .iter()
        .enumerate()
        .map(|(i, t)| t.matrix_plan(CampaignPlan::tier_seed(seed, i)).cells())
        .collect();
    let place = |name: &str| {
        plan.tiers.iter().enumerate().find_map(|(t, tier)| {
            let label = name.strip_prefix(&tier.name)?.strip_prefix('/')?;
            Some((t, tier.cell_index(&cells[t], label)?))
        })
    };
    let mut earlier = Earlier::none(plan.tiers.len());
    for ((tier, cell), run) in resume::placed_runs(store, g, place)? {
        if run.kept && plan.tiers[tier].fleet.is_none() {
            earlier.kept[tier].push((cell, run.repetition, run.record.clone()));
        }
        earlier.all[tier].push((cell, run.repetition, run.record));
    }
    // A fleet run is done when every host of one attempt completed, not when one host did.
    for (t, tier) in plan.tiers.iter().enumerate() {
        if let Some(f) = &tier.fleet {
            earlier.kept[t] = completed_fleet_runs(&FleetShape::of(f), &earlier.all[t]);
        }
    }
    Ok(earlier)
}
