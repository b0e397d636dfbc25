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
use crate::stats::matrix::summarize_matrix;

/// Consecutive failed runs after which the matrix stops.
pub const MAX_FAILURES_IN_A_ROW: u32 = 3;
/// With `--until-ci`: attempts a cell may make per run it may have (`max_repeat`), failed and
/// interrupted ones included, before it is given up on.
pub const MAX_ATTEMPTS_PER_RUN: usize = 2;

/// Where the matrix is, for a progress line: told before each run and after it.
#[derive(Debug, Clone)]
pub struct Progress<'a> {
    /// Runs finished so far (with `finished`: this one included).
    pub done: usize,
    /// Runs planned so far (grows with `--until-ci` rounds).
    pub planned: usize,
    /// The cell about to run (or just run).
    pub cell: &'a Cell,
    /// Its repetition number (1-based).
    pub repetition: u32,
    /// Estimated time left for the planned runs.
    pub eta: Option<Duration>,
    /// After the run: its record (before it: None).
    pub finished: Option<&'a RunRecord>,
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
        let eta = |ran: u32, left: u32| (ran > 0).then(|| started.elapsed() / ran * left);
        let at = |done, eta, finished| Progress {
            done,
            planned: order.len(),
            cell,
            repetition: reps[cell.index],
            eta,
            finished,
        };
        progress(at(next, eta(ran, left), None));
        let record = client::run(&plan.cell_plan(base, cell), &mut Quiet, interrupt);
        each(cell, reps[cell.index], &record);
        progress(at(next + 1, eta(ran + 1, left.saturating_sub(1)), Some(&record)));
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
/// runs left. Only completed runs count, for the interval and towards `max_repeat` (as in
/// every figure, `stats::matrix`): a failed or interrupted run says nothing about the cell's
/// rate. So that a cell whose runs keep failing cannot go on for ever, a cell stops after
/// `MAX_ATTEMPTS_PER_RUN` attempts per run it may have.
fn pending_cells(
    plan: &MatrixPlan,
    cells: &[Cell],
    runs: &[(usize, u32, RunRecord)],
) -> Vec<usize> {
    let Some(target) = plan.until_ci else { return Vec::new() };
    let runs: Vec<(usize, RunRecord)> = runs.iter().map(|(c, _, r)| (*c, r.clone())).collect();
    let max = plan.max_repeat as usize;
    summarize_matrix(cells, &runs, Some(target))
        .cells
        .iter()
        .filter(|c| c.ci_target_met != Some(true) && c.runs < max)
        .filter(|c| c.runs + c.failed + c.interrupted < max * MAX_ATTEMPTS_PER_RUN)
        .map(|c| c.index)
        .collect()
}

#[cfg(test)]
mod tests {
    use linerate_proto::{SideResults, StreamRole, TestSpec};

    use super::*;
    use crate::plan::matrix::AxisValue;

    /// A run whose server received `bits_per_second` for one second, ending with `outcome`.
    fn run(bits_per_second: u64, outcome: Outcome) -> RunRecord {
        let side = |role| SideResults {
            software: "t".into(),
            streams: vec![RunRecord::test_stream(role, bits_per_second / 8)],
            ..Default::default()
        };
        let mut r = RunRecord::for_tests(
            TestSpec::default_tcp(),
            side(StreamRole::Sender),
            side(StreamRole::Receiver),
        );
        r.outcome = outcome;
        r
    }

    fn failed() -> Outcome {
        Outcome::Failed { error: "refused".into(), kind: None }
    }

    fn plan(max_repeat: u32) -> MatrixPlan {
        MatrixPlan {
            axes: vec![vec![AxisValue::Parallel(1)]],
            repeat: 2,
            until_ci: Some(0.05),
            max_repeat,
            seed: 1,
            udp_rate: 1_000_000,
            length_given: false,
        }
    }

    fn pending(max_repeat: u32, outcomes: &[(u64, Outcome)]) -> bool {
        let p = plan(max_repeat);
        let runs: Vec<_> = outcomes
            .iter()
            .enumerate()
            .map(|(i, (b, o))| (0, i as u32 + 1, run(*b, o.clone())))
            .collect();
        pending_cells(&p, &p.cells(), &runs) == [0]
    }

    #[test]
    fn until_ci_counts_only_completed_runs_towards_the_interval_and_the_cap() {
        let g = 1_000_000_000;
        // Two completed runs of the same rate meet any target.
        assert!(!pending(4, &[(g, Outcome::Completed), (g, Outcome::Completed)]));
        // An interrupted run's part-test rate does not widen the interval.
        assert!(!pending(
            4,
            &[(g, Outcome::Completed), (g, Outcome::Completed), (g / 10, Outcome::Interrupted)]
        ));
        // Failed runs do not use up the cell's runs: one completed run is no interval.
        assert!(pending(3, &[(0, failed()), (0, failed()), (g, Outcome::Completed)]));
        // Completed runs reach the cap whatever their spread.
        assert!(!pending(2, &[(g, Outcome::Completed), (g / 2, Outcome::Completed)]));
        // A cell whose runs keep failing is given up after MAX_ATTEMPTS_PER_RUN per run.
        let failing = vec![(0, failed()); 2 * MAX_ATTEMPTS_PER_RUN];
        assert!(!pending(2, &failing));
        assert!(pending(2, &failing[1..]));
    }
}
