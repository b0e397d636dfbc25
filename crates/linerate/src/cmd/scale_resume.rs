//! The run order of a scaling curve (`fleet --scale`) across `--until-ci` rounds, and
//! continuing an interrupted curve (`fleet --scale … --resume [fN]`).
//!
//! **Rounds.** The curve is a grid (`session::grid`, through `session::fleet_runs`) whose
//! cells are the host counts: every count `--repeat` times in the seeded order, then with
//! `--until-ci` a round for every count whose total's 95 % interval is still wider than asked
//! (`stats::scaling::pending_counts`), as a matrix does; repetitions go on counting from
//! `--repeat`, and three fleet runs in a row that measured no host stop the curve.
//!
//! **Resuming.** The group's params hold the curve's settings (targets, test, counts,
//! repetitions, `--until-ci`) under `"plan"` and the order seed beside them. The same command
//! line with `--resume` continues the newest unfinished curve with exactly those settings
//! (or the one named; another plan is refused, as for a matrix: `store::resume`), walks the
//! same grid with the stored seed and skips every (k, repetition) that has a whole fleet run
//! (every host stored and measured). A partial one — a host not measured, or the run cut
//! short — is run again whole: a fleet run is one measurement of its k hosts at one instant,
//! so the hosts that did finish cannot be kept alone. Earlier attempts stay stored and are
//! listed as partial runs, never counted in a point.
//!
//! **A single fleet** (no `--scale`) is not resumable: it is one such measurement, so nothing
//! of an interrupted one can be kept, and rerunning it into the old group would only mix an
//! abandoned attempt into the new fleet's figures. `--resume` without `--scale` is refused
//! (`cli::fleet_args`), and the fleet is simply run again as a new group.

use anyhow::{Context, Result};

use super::fleet::{group_runs, identity, open_group};
use super::fleet_stored::{Attempt, curve_attempts};
use super::keep::{self, GroupRuns};
use crate::plan::fleet::FleetPlan;
use crate::report::notice::Console;
use crate::session::Interrupt;
use crate::store::resume::{self, Resumable};

/// A curve's group, opened anew or continued.
pub(super) struct Opened<'a> {
    /// Where its host runs go.
    pub runs: GroupRuns<'a>,
    /// Its group, if there is a history.
    pub group: Option<i64>,
    /// The plan, with the stored seed when resumed.
    pub plan: FleetPlan,
    /// The fleet runs stored before (resumed), in stored order.
    pub earlier: Vec<Attempt>,
}

/// A new group for `plan`, or (with `--resume`) the unfinished one it continues.
pub(super) fn open<'a>(
    plan: &FleetPlan,
    interrupt: &'a Interrupt,
    console: &'a Console,
) -> Result<Opened<'a>> {
    let Some(which) = plan.resume else {
        let (runs, group) = open_group(plan, interrupt, console)?;
        return Ok(Opened { runs, group, plan: plan.clone(), earlier: Vec::new() });
    };
    let store = keep::open(&plan.base.store, console)
        .context("--resume needs the history, which cannot be opened")?;
    let wanted = identity(plan);
    let resumable = Resumable {
        kind: "fleet",
        plan: &wanted,
        name: None,
        fix: "repeat the original command line (targets, --scale, --repeat, --until-ci, test \
              flags)",
        canonical: Clone::clone,
    };
    let g = resume::find_open_group(&store, which, &resumable)?;
    let plan = FleetPlan { seed: resume::stored_seed(&g)?, ..plan.clone() };
    let earlier = curve_attempts(&store, g.id)?;
    let runs = group_runs(Some(store), Some(g.id), &plan, (interrupt, console));
    Ok(Opened { runs, group: Some(g.id), plan, earlier })
}

/// Whether a fleet run of `hosts` hosts had every one stored and measured: a whole point.
pub(super) fn whole<'a>(
    hosts: usize,
    records: impl ExactSizeIterator<Item = &'a crate::record::RunRecord>,
) -> bool {
    records.len() >= hosts && super::fleet::all_completed(records)
}
