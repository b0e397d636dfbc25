//! Runs a campaign: the tiers in file order, each tier's matrix (`session::matrix`) in its own
//! seeded random order, skipping the runs an earlier, interrupted attempt already completed.
//!
//! Tiers are not interleaved: a tier is a place in the network (localhost, a VM on the same
//! host, across the DC link), and its runs need its server; randomising within a tier is what
//! protects its cells from drift. A tier whose matrix stops early (its server is gone) does not
//! stop the campaign: the next tier has another server; the caller hears why it stopped
//! ([`CampaignEvent::TierStopped`]). Ctrl-C stops after the current run and no further tier
//! starts. Progress goes to a callback; this module prints nothing. Before any of this the
//! caller checks every tier's server (`session::preflight`).
//!
//! A fleet tier runs its fleet (or scaling curve) instead of a matrix
//! (`session::fleet`): a "run" of it, for progress and the schedule, is one fleet run.

use std::time::Instant;

use crate::plan::ClientPlan;
use crate::plan::campaign::{CampaignPlan, Tier};
use crate::plan::matrix::Cell;
use crate::record::RunRecord;
use crate::session::Interrupt;
use crate::session::fleet::{Ran as FleetRan, run_curve_from};
use crate::session::grid::{Progress, Slot};
use crate::session::matrix::{MatrixOutcome, run_matrix_from};

/// What a run gave: a matrix cell's record, or every host's of a fleet run.
#[derive(Debug, Clone, Copy)]
pub enum Finished<'a> {
    /// A run of a matrix cell.
    Run(&'a RunRecord),
    /// A fleet run: each host's record.
    Fleet(&'a [RunRecord]),
}

/// What a tier ran, for the caller to store.
#[derive(Debug, Clone, Copy)]
pub enum Ran<'a> {
    /// Repetition `repetition` of a matrix cell.
    Cell {
        /// The cell.
        cell: &'a Cell,
        /// Its repetition.
        repetition: u32,
        /// The run.
        record: &'a RunRecord,
    },
    /// Repetition `repetition` of a fleet tier's run with `hosts` hosts.
    Fleet {
        /// Hosts in it.
        hosts: usize,
        /// Its repetition.
        repetition: u32,
        /// Each host's label and record (with its place in the fleet).
        records: &'a [RunRecord],
    },
}

/// What a campaign tells its caller as it goes.
#[derive(Debug, Clone)]
pub enum CampaignEvent<'a> {
    /// Before and after each run: its tier, and the campaign's counts and estimate.
    Run(Progress<'a, Finished<'a>>),
    /// A tier stopped early (not by an interrupt): why; the campaign goes on with the next.
    TierStopped {
        /// The tier.
        tier: &'a Tier,
        /// Its position (0-based).
        tier_index: usize,
        /// Number of tiers.
        tiers: usize,
        /// Why it stopped.
        why: &'a str,
    },
}

/// What a campaign run produced: one matrix outcome per tier, in tier order (runs of earlier
/// attempts first). Tiers not reached keep only their earlier runs and say why they stopped.
#[derive(Debug)]
pub struct CampaignOutcome {
    /// Per tier.
    pub tiers: Vec<MatrixOutcome>,
    /// Runs made by this call.
    pub ran: usize,
}

/// Runs `plan`: tier `i` against `bases[i]` with order seed `tier_seed(seed, i)`, after the
/// completed runs `prior[i]` (in a fleet tier: every host run of its completed fleet runs, by
/// host-count index). `each` sees every new run (to store it); `events` hears of each run
/// before and after it, and of a tier that stopped early.
pub fn run_campaign(
    plan: &CampaignPlan,
    bases: &[ClientPlan],
    seed: u64,
    prior: Vec<Vec<(usize, u32, RunRecord)>>,
    interrupt: &Interrupt,
    events: &mut dyn FnMut(CampaignEvent<'_>),
    each: &mut dyn FnMut(&Tier, Ran<'_>),
) -> CampaignOutcome {
    let planned = plan.planned_runs();
    let done_before: usize = plan.tiers.iter().zip(&prior).map(|(t, p)| runs_done(t, p)).sum();
    let mut prior = prior.into_iter();
    let started = Instant::now();
    let mut out = CampaignOutcome { tiers: Vec::new(), ran: 0 };
    for (i, (tier, base)) in plan.tiers.iter().zip(bases).enumerate() {
        let earlier = prior.next().unwrap_or_default();
        if interrupt.count() > 0 {
            let why = format!("not started: interrupted by {}", interrupt.last_name());
            out.tiers.push(MatrixOutcome {
                runs: earlier,
                planned: Vec::new(),
                stopped: Some(why),
            });
            continue;
        }
        let tier_seed = CampaignPlan::tier_seed(seed, i);
        let ran_before = out.ran;
        let ran_here = std::cell::Cell::new(0usize);
        // A tier's grid tells its own counts; the campaign's replace them.
        let mut tier_progress = |slot: Slot, cell: String, finished: Option<Finished<'_>>| {
            let ran = ran_before + ran_here.get();
            let done = done_before + ran;
            let left = planned.saturating_sub(done) as u32;
            let eta = (ran > 0).then(|| started.elapsed() / ran as u32 * left);
            events(CampaignEvent::Run(Progress {
                slot,
                cell,
                done,
                // Before a run, that run at least is planned; after it, the runs done are.
                planned: planned.max(done + usize::from(finished.is_none())),
                eta,
                tier: Some((tier.name.as_str(), i, plan.tiers.len())),
                round: None,
                finished: finished.as_ref(),
            }));
        };
        let outcome = match tier.fleet_plan(tier_seed, base.output, base.store.clone()) {
            Some(fleet) => run_curve_from(
                &fleet,
                earlier,
                interrupt,
                &mut |p: Progress<'_, FleetRan>| {
                    tier_progress(p.slot, p.cell, p.finished.map(|r| Finished::Fleet(&r.hosts)))
                },
                &mut |hosts, repetition, ran| {
                    ran_here.set(ran_here.get() + 1);
                    each(tier, Ran::Fleet { hosts, repetition, records: &ran.hosts });
                },
            ),
            None => run_matrix_from(
                base,
                &tier.matrix_plan(tier_seed),
                earlier,
                interrupt,
                &mut |p: Progress<'_, RunRecord>| {
                    tier_progress(p.slot, p.cell, p.finished.map(Finished::Run))
                },
                &mut |cell: &Cell, repetition: u32, record: &RunRecord| {
                    ran_here.set(ran_here.get() + 1);
                    each(tier, Ran::Cell { cell, repetition, record });
                },
            ),
        };
        if let Some(why) = outcome.stopped.as_deref().filter(|_| interrupt.count() == 0) {
            let tiers = plan.tiers.len();
            events(CampaignEvent::TierStopped { tier, tier_index: i, tiers, why });
        }
        out.ran += ran_here.get();
        out.tiers.push(outcome);
    }
    out
}

/// Runs of `tier` an earlier attempt completed (`prior`): its records, or in a fleet tier its
/// fleet runs (each host-count index and repetition once).
pub fn runs_done(tier: &Tier, prior: &[(usize, u32, RunRecord)]) -> usize {
    if tier.fleet.is_none() {
        return prior.len();
    }
    let runs: std::collections::HashSet<(usize, u32)> =
        prior.iter().map(|(c, r, _)| (*c, *r)).collect();
    runs.len()
}
