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

use std::time::{Duration, Instant};

use crate::plan::ClientPlan;
use crate::plan::campaign::{CampaignPlan, Tier};
use crate::plan::matrix::Cell;
use crate::record::RunRecord;
use crate::session::Interrupt;
use crate::session::matrix::{MatrixOutcome, run_matrix_from};

/// Where the campaign is, for a progress line.
#[derive(Debug, Clone)]
pub struct CampaignProgress<'a> {
    /// The tier running.
    pub tier: &'a Tier,
    /// Its position (0-based) and the number of tiers.
    pub tier_index: usize,
    /// Number of tiers.
    pub tiers: usize,
    /// The cell about to run (or just run).
    pub cell: &'a Cell,
    /// Its repetition (1-based).
    pub repetition: u32,
    /// Runs of the whole campaign done so far (including earlier attempts).
    pub done: usize,
    /// Runs planned for the whole campaign (before any `until_ci` rounds).
    pub planned: usize,
    /// Estimated time left for the whole campaign.
    pub eta: Option<Duration>,
    /// After the run: its record (before it: None).
    pub finished: Option<&'a RunRecord>,
}

/// What a campaign tells its caller as it goes.
#[derive(Debug, Clone)]
pub enum CampaignEvent<'a> {
    /// Before and after each run.
    Run(CampaignProgress<'a>),
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
/// completed runs `prior[i]`. `each` sees every new run (to store it); `events` hears of each
/// run before and after it, and of a tier that stopped early.
pub fn run_campaign(
    plan: &CampaignPlan,
    bases: &[ClientPlan],
    seed: u64,
    prior: Vec<Vec<(usize, u32, RunRecord)>>,
    interrupt: &Interrupt,
    events: &mut dyn FnMut(CampaignEvent<'_>),
    each: &mut dyn FnMut(&Tier, &Cell, u32, &RunRecord),
) -> CampaignOutcome {
    let planned = plan.planned_runs();
    let done_before: usize = prior.iter().map(Vec::len).sum();
    let mut prior = prior.into_iter();
    let started = Instant::now();
    let mut out = CampaignOutcome { tiers: Vec::new(), ran: 0 };
    for (i, (tier, base)) in plan.tiers.iter().zip(bases).enumerate() {
        let earlier = prior.next().unwrap_or_default();
        if interrupt.count() > 0 {
            let why = format!("not started: interrupted by {}", interrupt.last_name());
            out.tiers.push(MatrixOutcome { runs: earlier, stopped: Some(why) });
            continue;
        }
        let matrix = tier.matrix_plan(CampaignPlan::tier_seed(seed, i));
        let ran_before = out.ran;
        let ran_here = std::cell::Cell::new(0usize);
        let mut tier_progress = |p: crate::session::matrix::Progress<'_>| {
            let ran = ran_before + ran_here.get();
            let done = done_before + ran;
            let left = planned.saturating_sub(done) as u32;
            let eta = (ran > 0).then(|| started.elapsed() / ran as u32 * left);
            events(CampaignEvent::Run(CampaignProgress {
                tier,
                tier_index: i,
                tiers: plan.tiers.len(),
                cell: p.cell,
                repetition: p.repetition,
                done,
                // Before a run, that run at least is planned; after it, the runs done are.
                planned: planned.max(done + usize::from(p.finished.is_none())),
                eta,
                finished: p.finished,
            }));
        };
        let mut tier_each = |cell: &Cell, rep: u32, record: &RunRecord| {
            ran_here.set(ran_here.get() + 1);
            each(tier, cell, rep, record);
        };
        let earlier_len = earlier.len();
        let outcome =
            run_matrix_from(base, &matrix, earlier, interrupt, &mut tier_progress, &mut tier_each);
        if let Some(why) = outcome.stopped.as_deref().filter(|_| interrupt.count() == 0) {
            let tiers = plan.tiers.len();
            events(CampaignEvent::TierStopped { tier, tier_index: i, tiers, why });
        }
        let new_runs = outcome.runs.len() - earlier_len;
        out.ran += new_runs;
        out.tiers.push(outcome);
    }
    out
}
