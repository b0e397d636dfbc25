//! Runs a matrix: a grid (`grid.rs`) whose cells are the matrix's cells and whose run is
//! one client test with the cell's settings (`session::client::run`). The grid walks every
//! cell's repetitions in the plan's shuffled order, then (with `--until-ci`) further rounds for
//! the cells whose confidence interval is still too wide; a failed run is kept and counted,
//! three in a row stop the matrix (the server is probably gone); Ctrl-C stops after the
//! current run, keeping every completed one. Progress goes to a callback; this module prints
//! nothing.
//!
//! A matrix can be resumed ([`run_matrix_from`]): given the runs that already completed, the
//! same seeded order is walked and those (cell, repetition) pairs are skipped, so the runs
//! left are the ones the interrupted matrix had not reached.

use crate::plan::ClientPlan;
use crate::plan::matrix::{Cell, MatrixPlan};
use crate::record::RunRecord;
use crate::session::grid::{self, Executor, Grid, Slot};
use crate::session::{Interrupt, Quiet, client};
use crate::stats::matrix::summarize_matrix;

pub use crate::session::grid::MAX_ATTEMPTS_PER_RUN;

/// What a matrix run produced.
#[derive(Debug)]
pub struct MatrixOutcome {
    /// Every finished run: (cell index, repetition, record), in the order run.
    pub runs: Vec<(usize, u32, RunRecord)>,
    /// Every (cell index, repetition) the walk planned, in order, resumed ones included:
    /// what a complete run of the grid ran.
    pub planned: Vec<(usize, u32)>,
    /// Why it stopped early, if it did.
    pub stopped: Option<String>,
}

/// A matrix's cells as a grid's executor: one client test per run.
struct Cells<'a> {
    base: &'a ClientPlan,
    plan: &'a MatrixPlan,
    cells: &'a [Cell],
}

impl Executor for Cells<'_> {
    type Run = RunRecord;

    fn run(&mut self, slot: Slot, interrupt: &Interrupt) -> RunRecord {
        client::run(&self.plan.cell_plan(self.base, &self.cells[slot.cell]), &mut Quiet, interrupt)
    }

    fn failure(&self, run: &RunRecord) -> Option<String> {
        run.outcome.failure().map(|f| f.message)
    }

    fn label(&self, cell: usize) -> String {
        self.cells[cell].label()
    }

    fn pending(&self, runs: &[(Slot, RunRecord)]) -> Vec<usize> {
        let (until_ci, max) = (self.plan.until_ci, self.plan.max_repeat);
        pending_cells(until_ci, max, self.cells, runs.iter().map(|(s, r)| (s.cell, r)))
    }

    fn stop_message(&self, failures: u32, last: &str) -> String {
        format!("{failures} runs in a row failed (last: {last}); stopping the matrix")
    }
}

/// Runs `plan` against `base`'s server after `prior` (cell index, repetition, record: completed runs of an earlier,
/// interrupted attempt at the same plan and seed), which are not run again. The outcome's runs
/// start with `prior`; `each` sees only the new ones.
pub fn run_matrix_from(
    base: &ClientPlan,
    plan: &MatrixPlan,
    prior: Vec<(usize, u32, RunRecord)>,
    interrupt: &Interrupt,
    progress: &mut dyn FnMut(grid::Progress<'_, RunRecord>),
    each: &mut dyn FnMut(&Cell, u32, &RunRecord),
) -> MatrixOutcome {
    let cells = plan.cells();
    let grid = Grid { cells: cells.len(), repeat: plan.repeat, seed: plan.seed };
    let prior =
        prior.into_iter().map(|(c, r, run)| (Slot { cell: c, repetition: r }, run)).collect();
    let mut exec = Cells { base, plan, cells: &cells };
    let out = grid.run(&mut exec, prior, interrupt, progress, &mut |slot, run| {
        each(&cells[slot.cell], slot.repetition, run)
    });
    MatrixOutcome {
        runs: out.runs.into_iter().map(|(s, r)| (s.cell, s.repetition, r)).collect(),
        planned: out.planned.iter().map(|s| (s.cell, s.repetition)).collect(),
        stopped: out.stopped,
    }
}

/// With `--until-ci`: cells whose 95 % interval is still wider than the target and that have
/// runs left. Only completed runs count, for the interval and towards `max_repeat` (as in
/// every figure, `stats::matrix`): a failed or interrupted run says nothing about the cell's
/// rate. So that a cell whose runs keep failing cannot go on for ever, a cell stops after
/// `MAX_ATTEMPTS_PER_RUN` attempts per run it may have. A matrix's cells and a mesh's pairs.
pub(crate) fn pending_cells<'a>(
    until_ci: Option<f64>,
    max_repeat: u32,
    cells: &[Cell],
    runs: impl Iterator<Item = (usize, &'a RunRecord)>,
) -> Vec<usize> {
    let Some(target) = until_ci else { return Vec::new() };
    let runs: Vec<(usize, RunRecord)> = runs.map(|(c, r)| (c, r.clone())).collect();
    let max = max_repeat as usize;
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
    use crate::record::Outcome;

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
        let runs: Vec<_> = outcomes.iter().map(|(b, o)| (0, run(*b, o.clone()))).collect();
        pending_cells(p.until_ci, p.max_repeat, &p.cells(), runs.iter().map(|(c, r)| (*c, r)))
            == [0]
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
