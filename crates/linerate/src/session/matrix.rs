//! Runs a matrix: every cell's repetitions in the plan's shuffled order, then (with
//! `--until-ci`) further rounds for the cells whose confidence interval is still too wide.
//!
//! Each run is a normal client test (`session::client::run`) with the cell's settings. A
//! failed run is kept and counted, not retried silently; three failures in a row stop the
//! matrix (the server is probably gone). Ctrl-C stops after the current run, keeping every
//! completed one. Progress goes to a callback; this module prints nothing.
//!
//! A matrix can be resumed ([`run_matrix_from`]): given the runs that already completed, the
//! same seeded order is walked and those (cell, repetition) pairs are skipped, so the runs
//! left are the ones the interrupted matrix had not reached.

use std::time::{Duration, Instant};

use crate::plan::ClientPlan;
use crate::plan::matrix::{Cell, MatrixPlan};
use crate::record::{Outcome, RunRecord};
use crate::session::{Interrupt, Quiet, client};
use crate::stats::matrix::received_rate;
use crate::stats::sample::{ci_within, describe};
use crate::stats::summarize;

/// Consecutive failed runs after which the matrix stops.
pub const MAX_FAILURES_IN_A_ROW: u32 = 3;

/// Where the matrix is, for a progress line.
#[derive(Debug, Clone)]
pub struct Progress<'a> {
    /// Runs finished so far.
    pub done: usize,
    /// Runs planned so far (grows with `--until-ci` rounds).
    pub planned: usize,
    /// The cell about to run.
    pub cell: &'a Cell,
    /// Its repetition number (1-based).
    pub repetition: u32,
    /// Estimated time left for the planned runs.
    pub eta: Option<Duration>,
}

/// What a matrix run produced.
#[derive(Debug)]
pub struct MatrixOutcome {
    /// Every finished run: (cell index, repetition, record), in the order run.
    pub runs: Vec<(usize, u32, RunRecord)>,
    /// Why it stopped early, if it did.
    pub stopped: Option<String>,
}

/// Runs `plan` against `base`'s server. `each` sees every finished run (to store it).
pub fn run_matrix(
    base: &ClientPlan,
    plan: &MatrixPlan,
    interrupt: &Interrupt,
    progress: &mut dyn FnMut(Progress<'_>),
    each: &mut dyn FnMut(&Cell, u32, &RunRecord),
) -> MatrixOutcome {
    run_matrix_from(base, plan, Vec::new(), interrupt, progress, each)
}

/// [`run_matrix`] after `prior` (cell index, repetition, record: completed runs of an earlier,
/// interrupted attempt at the same plan and seed), which are not run again. The outcome's runs
/// start with `prior`; `each` sees only the new ones.
pub fn run_matrix_from(
    base: &ClientPlan,
    plan: &MatrixPlan,
    prior: Vec<(usize, u32, RunRecord)>,
    interrupt: &Interrupt,
    progress: &mut dyn FnMut(Progress<'_>),
    each: &mut dyn FnMut(&Cell, u32, &RunRecord),
) -> MatrixOutcome {
    let cells = plan.cells();
    let all: Vec<usize> = cells.iter().map(|c| c.index).collect();
    let mut order = plan.round(&all, plan.repeat, 0);
    let done: std::collections::HashSet<(usize, u32)> =
        prior.iter().map(|(c, r, _)| (*c, *r)).collect();
    let mut out = MatrixOutcome { runs: prior, stopped: None };
    let mut reps = vec![0u32; cells.len()];
    let (mut failures, mut round, mut next, mut skipped) = (0u32, 0u64, 0usize, 0usize);
    let started = Instant::now();
    loop {
        if next == order.len() {
            let pending = pending_cells(plan, &cells, &out.runs);
            if pending.is_empty() {
                break;
            }
            round += 1;
            order.extend(plan.round(&pending, 1, round));
        }
        if interrupt.count() > 0 {
            out.stopped = Some(format!("interrupted by {}", interrupt.last_name()));
            break;
        }
        let cell = &cells[order[next]];
        reps[cell.index] += 1;
        if done.contains(&(cell.index, reps[cell.index])) {
            (next, skipped) = (next + 1, skipped + 1);
            continue;
        }
        let ran = (next - skipped) as u32;
        let left = (order.len() - next).saturating_sub(done.len() - skipped) as u32;
        let eta = (ran > 0).then(|| started.elapsed() / ran * left);
        progress(Progress {
            done: next,
            planned: order.len(),
            cell,
            repetition: reps[cell.index],
            eta,
        });
        let record = client::run(&plan.cell_plan(base, cell), &mut Quiet, interrupt);
        each(cell, reps[cell.index], &record);
        failures = if matches!(record.outcome, Outcome::Failed { .. }) { failures + 1 } else { 0 };
        let error = match &record.outcome {
            Outcome::Failed { error, .. } => Some(error.clone()),
            _ => None,
        };
        out.runs.push((cell.index, reps[cell.index], record));
        next += 1;
        if failures >= MAX_FAILURES_IN_A_ROW {
            out.stopped = Some(format!(
                "{failures} runs in a row failed (last: {}); stopping the matrix",
                error.unwrap_or_default()
            ));
            break;
        }
    }
    out
}

/// With `--until-ci`: cells whose 95 % interval is still wider than the target and that have
/// runs left.
fn pending_cells(
    plan: &MatrixPlan,
    cells: &[Cell],
    runs: &[(usize, u32, RunRecord)],
) -> Vec<usize> {
    let Some(target) = plan.until_ci else { return Vec::new() };
    cells
        .iter()
        .filter(|c| {
            let of_cell: Vec<&RunRecord> =
                runs.iter().filter(|(i, _, _)| *i == c.index).map(|(_, _, r)| r).collect();
            if of_cell.len() >= plan.max_repeat as usize {
                return false;
            }
            let rates: Vec<f64> = of_cell
                .iter()
                .filter(|r| !matches!(r.outcome, Outcome::Failed { .. }))
                .map(|r| received_rate(&summarize(r)))
                .collect();
            !describe(&rates).is_some_and(|s| ci_within(&s, target))
        })
        .map(|c| c.index)
        .collect()
}
