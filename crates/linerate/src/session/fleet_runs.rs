//! Fleet runs one after another: each host run as a record that carries its place in the
//! fleet (label, measured start), as a grid (`grid.rs`) whose cells are the host counts — a
//! scaling curve's (`fleet --scale`, a campaign's fleet tier) each `repeat` times in the seeded
//! order, with `--until-ci` rounds, skipping the fleet runs an earlier, interrupted attempt
//! completed; a single fleet is the grid of one cell, every target once.
//!
//! A fleet run in which no host was measured says nothing of the fleet; after
//! `grid::MAX_FAILURES_IN_A_ROW` of them the curve stops (its servers are gone), as a matrix
//! does. Prints nothing: progress goes to a callback.

use crate::plan::fleet::FleetPlan;
use crate::record::{FleetPlace, Outcome, RunRecord};
use crate::session::Interrupt;
use crate::session::fleet::{HostRun, run_fleet};
use crate::session::grid::{Executor, Grid, MAX_ATTEMPTS_PER_RUN, Slot};
use crate::session::matrix::MatrixOutcome;
use crate::stats::fleet::{FleetSummary, HostInput, summarize_planned};
use crate::stats::scaling::pending_counts;

/// Each host's record with its place in the fleet (label, measured start), labelled.
pub fn placed(hosts: Vec<HostRun>) -> Vec<(String, RunRecord)> {
    hosts
        .into_iter()
        .map(|h| {
            let mut record = h.record;
            let us = |d: Option<std::time::Duration>| {
                d.map(|d| d.as_micros().try_into().unwrap_or(u64::MAX))
            };
            record.fleet = Some(FleetPlace {
                label: h.target.label.clone(),
                started_us: us(h.started),
                first_byte_us: us(h.first_byte),
            });
            (h.target.label, record)
        })
        .collect()
}

/// Each host's label and record, in one fleet run.
pub type Hosts = [(String, RunRecord)];

/// One fleet run: each host's label and record, and why its start went ahead without every
/// host, if it did.
#[derive(Debug, Clone)]
pub struct Ran {
    /// Each host's label and record, in the targets' order.
    pub hosts: Vec<(String, RunRecord)>,
    /// The gate's note (a deadline, an interrupt), if the start did not wait for every host.
    pub gate_note: Option<String>,
}

/// Before and after each fleet run of a curve.
#[derive(Debug, Clone, Copy)]
pub struct CurveProgress<'a> {
    /// Hosts in the run.
    pub hosts: usize,
    /// Its repetition (1-based).
    pub repetition: u32,
    /// After the run: each host's label and record (before it: None).
    pub finished: Option<&'a Hosts>,
    /// Fleet runs finished this time (after the run: this one included) and planned so far.
    pub position: (usize, usize),
}

/// Fleet runs as a grid's executor: cell i is the fleet run of the first `counts[i]` hosts
/// (a scaling curve's host counts; a single fleet's one count, every target).
struct Curve<'a> {
    plan: &'a FleetPlan,
    counts: Vec<usize>,
}

impl Executor for Curve<'_> {
    type Run = Ran;

    fn run(&mut self, slot: Slot, interrupt: &Interrupt) -> Self::Run {
        let run = run_fleet(&self.plan.first(self.counts[slot.cell]), interrupt);
        Ran { hosts: placed(run.hosts), gate_note: run.gate_note }
    }

    /// A fleet run in which no host was measured says nothing of the fleet.
    fn failure(&self, run: &Self::Run) -> Option<String> {
        let run = &run.hosts;
        if run.iter().any(|(_, r)| r.outcome == Outcome::Completed) {
            return None;
        }
        let first = run.iter().find_map(|(label, r)| match &r.outcome {
            Outcome::Failed { error, .. } => Some(format!("{label}: {error}")),
            _ => None,
        });
        Some(first.unwrap_or_else(|| "no host completed".into()))
    }

    /// With `--until-ci`: the host counts whose total's interval is still too wide
    /// (`stats::scaling::pending_counts`).
    fn pending(&self, runs: &[(Slot, Self::Run)]) -> Vec<usize> {
        let Some(target) = self.plan.until_ci else { return Vec::new() };
        let scale = &self.counts;
        let fleets: Vec<(usize, FleetSummary)> = runs
            .iter()
            .map(|(slot, ran)| {
                let k = scale[slot.cell];
                let inputs: Vec<HostInput<'_>> = ran
                    .hosts
                    .iter()
                    .map(|(label, r)| HostInput { label, ..HostInput::placed(r) })
                    .collect();
                (k, summarize_planned(k, &inputs))
            })
            .collect();
        let bounds = (self.plan.max_repeat as usize, MAX_ATTEMPTS_PER_RUN);
        let pending = pending_counts(&fleets, scale, target, bounds);
        (0..scale.len()).filter(|i| pending.contains(&scale[*i])).collect()
    }

    fn stop_message(&self, failures: u32, last: &str) -> String {
        format!(
            "{failures} fleet runs in a row measured no host (last: {last}); stopping the curve"
        )
    }
}

/// Runs `plan`'s curve (every host count of `plan.scale`, `plan.repeat` times, then with
/// `--until-ci` further rounds) as a grid (`grid.rs`) after `prior`: the host runs (index of
/// the host count in `plan.scale`, repetition, record) of the fleet runs an earlier attempt
/// completed, which are not run again. The outcome's runs start with `prior`, then every host
/// run of each new fleet run; `each` sees each new fleet run.
pub fn run_curve_from(
    plan: &FleetPlan,
    prior: Vec<(usize, u32, RunRecord)>,
    interrupt: &Interrupt,
    progress: &mut dyn FnMut(CurveProgress<'_>),
    each: &mut dyn FnMut(usize, u32, &Ran),
) -> MatrixOutcome {
    let counts = plan.counts();
    let grid = Grid { cells: counts.len(), repeat: plan.repeat, seed: plan.seed };
    let mut earlier: Vec<(Slot, Ran)> = Vec::new();
    for (cell, repetition, record) in prior {
        let slot = Slot { cell, repetition };
        let label = record.fleet.as_ref().map(|f| f.label.clone()).unwrap_or_default();
        match earlier.iter_mut().find(|(s, _)| *s == slot) {
            Some((_, ran)) => ran.hosts.push((label, record)),
            None => earlier.push((slot, Ran { hosts: vec![(label, record)], gate_note: None })),
        }
    }
    let mut exec = Curve { plan, counts: counts.clone() };
    let out = grid.run(
        &mut exec,
        earlier,
        interrupt,
        &mut |p| {
            progress(CurveProgress {
                hosts: counts[p.slot.cell],
                repetition: p.slot.repetition,
                finished: p.finished.map(|r| r.hosts.as_slice()),
                position: (p.done, p.planned),
            })
        },
        &mut |slot, ran| each(counts[slot.cell], slot.repetition, ran),
    );
    let runs = out
        .runs
        .into_iter()
        .flat_map(|(s, ran)| ran.hosts.into_iter().map(move |(_, r)| (s.cell, s.repetition, r)))
        .collect();
    let planned = out.planned.iter().map(|s| (s.cell, s.repetition)).collect();
    MatrixOutcome { runs, planned, stopped: out.stopped }
}
