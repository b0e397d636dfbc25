//! The run order of a scaling curve (`fleet --scale`) across `--until-ci` rounds, and
//! continuing an interrupted curve (`fleet --scale … --resume [fN]`).
//!
//! **Rounds.** The first round is every (host count, repetition) pair in the seeded order
//! (`FleetPlan::order`). With `--until-ci`, each further round runs once more every host
//! count whose total's 95 % interval is still wider than asked (`stats::scaling::
//! pending_counts`), in a random order the seed and the round reproduce, as a matrix does;
//! repetitions go on counting from `--repeat`.
//!
//! **Resuming.** The group's params hold the curve's settings (targets, test, counts,
//! repetitions, `--until-ci`) under `"plan"` and the order seed beside them. The same command
//! line with `--resume` continues the newest unfinished curve with exactly those settings
//! (or the one named; another plan is refused, as for a matrix: `store::resume`), walks the
//! same order with the stored seed and skips every (k, repetition) that has a whole fleet run
//! (every host stored and measured). A partial one — a host not measured, or the run cut
//! short — is run again whole: a fleet run is one measurement of its k hosts at one instant,
//! so the hosts that did finish cannot be kept alone. Earlier attempts stay stored and are
//! listed as partial runs, never counted in a point.
//!
//! **A single fleet** (no `--scale`) is not resumable: it is one such measurement, so nothing
//! of an interrupted one can be kept, and rerunning it into the old group would only mix an
//! abandoned attempt into the new fleet's figures. `--resume` without `--scale` is refused
//! (`cli::fleet_args`), and the fleet is simply run again as a new group.

use std::collections::HashSet;

use anyhow::{Context, Result};

use super::fleet::{group_runs, identity, open_group};
use super::fleet_stored::{Attempt, curve_attempts};
use super::keep::{self, GroupRuns};
use crate::plan::fleet::FleetPlan;
use crate::report::notice::Console;
use crate::session::Interrupt;
use crate::session::matrix::MAX_ATTEMPTS_PER_RUN;
use crate::stats::fleet::FleetSummary;
use crate::stats::scaling::pending_counts;
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

/// The curve's order of (host count, repetition), walked once, round after round.
#[derive(Debug)]
pub(super) struct Walk {
    order: Vec<(usize, u32)>,
    next: usize,
    round: u64,
    /// The host count of every run planned beyond the first round.
    later: Vec<usize>,
    /// Pairs with a whole fleet run before this walk (resumed): skipped.
    done: HashSet<(usize, u32)>,
    /// Pairs walked past because they were done.
    skipped: usize,
}

impl Walk {
    /// The walk of `plan`, skipping the whole runs among `earlier`.
    pub fn new(plan: &FleetPlan, earlier: &[Attempt]) -> Self {
        let done = earlier
            .iter()
            .filter(|a| whole(a.hosts, a.records.iter().map(|(_, r)| r)))
            .map(|a| (a.hosts, a.repetition))
            .collect();
        Self { order: plan.order(), next: 0, round: 0, later: Vec::new(), done, skipped: 0 }
    }

    /// The next (host count, repetition) to run, or None when the curve is done. `runs` is
    /// every fleet run so far, earlier attempts included: (host count, figures).
    pub fn next(
        &mut self,
        plan: &FleetPlan,
        runs: &[(usize, &FleetSummary)],
    ) -> Option<(usize, u32)> {
        loop {
            if self.next == self.order.len() {
                let target = plan.until_ci?;
                let runs: Vec<(usize, FleetSummary)> =
                    runs.iter().map(|(k, s)| (*k, (*s).clone())).collect();
                let bounds = (plan.max_repeat as usize, MAX_ATTEMPTS_PER_RUN);
                let pending = pending_counts(&runs, &plan.scale, target, bounds);
                if pending.is_empty() {
                    return None;
                }
                self.round += 1;
                for k in plan.round(&pending, self.round) {
                    let given = self.later.iter().filter(|n| **n == k).count() as u32;
                    self.later.push(k);
                    self.order.push((k, plan.repeat + given + 1));
                }
            }
            let pair = self.order[self.next];
            self.next += 1;
            if self.done.contains(&pair) {
                self.skipped += 1;
                continue;
            }
            return Some(pair);
        }
    }

    /// (fleet runs walked this time, runs planned this time) for a progress line: the ones
    /// skipped as done count in neither.
    pub fn position(&self) -> (usize, usize) {
        let planned = self.order.iter().filter(|p| !self.done.contains(p)).count();
        (self.next - self.skipped, planned)
    }

    /// Every (host count, repetition) planned so far, resumed ones included.
    pub fn planned(&self) -> &[(usize, u32)] {
        &self.order
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Plan;
    use linerate_proto::Flow;

    fn plan(extra: &[&str]) -> FleetPlan {
        let mut argv = vec!["linerate", "fleet", "h1", "h2", "--scale", "1..2", "--seed", "4"];
        argv.extend_from_slice(extra);
        match crate::cli::parse(argv) {
            Ok(Plan::Fleet(p)) => p,
            other => panic!("{other:?}"),
        }
    }

    /// A whole fleet run of `k` hosts with this total.
    fn fleet(k: usize, total: f64) -> FleetSummary {
        FleetSummary::even_for_tests(Flow::ClientToServer, k, total)
    }

    /// Walks to the end, each run giving `total(k, rep)`.
    fn walk(
        p: &FleetPlan,
        done: &[(usize, u32)],
        total: impl Fn(usize, u32) -> f64,
    ) -> Vec<(usize, u32)> {
        let mut w = Walk { done: done.iter().copied().collect(), ..Walk::new(p, &[]) };
        let mut runs: Vec<(usize, FleetSummary)> =
            done.iter().map(|&(k, r)| (k, fleet(k, total(k, r)))).collect();
        let mut ran = Vec::new();
        loop {
            let so_far: Vec<(usize, &FleetSummary)> = runs.iter().map(|(k, s)| (*k, s)).collect();
            let Some((k, rep)) = w.next(p, &so_far) else { break };
            runs.push((k, fleet(k, total(k, rep))));
            ran.push((k, rep));
            assert!(ran.len() < 100, "the walk ends");
        }
        ran
    }

    #[test]
    fn rounds_go_on_until_the_interval_or_the_bound_and_skip_what_is_done() {
        // No --until-ci: the first round only, every pair once.
        let p = plan(&["--repeat", "2"]);
        let mut all = walk(&p, &[], |_, _| 1e9);
        all.sort_unstable();
        assert_eq!(all, [(1, 1), (1, 2), (2, 1), (2, 2)]);
        // Resumed: the done pairs are skipped, the rest walked in the same order.
        let order = p.order();
        assert_eq!(walk(&p, &order[..2], |_, _| 1e9), order[2..]);
        // --until-ci: k=1 is steady (met at 2 runs), k=2 never is: it runs to --max-repeat,
        // its repetitions counting on from --repeat.
        let p = plan(&["--until-ci", "5", "--max-repeat", "4"]);
        let steady_or_not = |k: usize, rep: u32| if k == 1 { 1e9 } else { f64::from(rep) * 1e9 };
        let ran = walk(&p, &[], steady_or_not);
        let of =
            |k: usize| ran.iter().filter(|(n, _)| *n == k).map(|(_, r)| *r).collect::<Vec<_>>();
        assert_eq!((of(1), of(2)), (vec![1, 2], vec![1, 2, 3, 4]));
        // Resumed in a later round: what was run is not run again.
        assert_eq!(walk(&p, &[(1, 1), (2, 1), (1, 2), (2, 2)], steady_or_not), [(2, 3), (2, 4)]);
    }
}
