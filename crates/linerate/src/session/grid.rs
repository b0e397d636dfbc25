//! The one runner of repeated experiments: cells × repetitions in a seeded random order, then
//! (with `--until-ci`) further rounds for the cells whose confidence interval is still too
//! wide, resuming an interrupted group, stopping after [`MAX_FAILURES_IN_A_ROW`] failed runs,
//! and telling progress (with an estimate of the time left) before and after every run.
//!
//! What one cell's run is belongs to an [`Executor`] (hyperfine's `Executor` is the model):
//! one client test of a matrix cell (`matrix.rs`), one fleet run of the first k hosts of a
//! scaling curve (`fleet.rs`), and later one pair of a mesh. The walk itself never opens
//! a socket, so its rules are tested here with a mock executor.
//!
//! **Order.** Round 0 is every cell `repeat` times, shuffled with the seed
//! ([`crate::plan::matrix::round_order`], Fisher–Yates over SplitMix64); round r > 0 is the cells
//! still pending, once each, shuffled with the seed of round r. A cell's repetitions are
//! numbered in the order they come (1, 2, …), so the same seed walks the same
//! (cell, repetition) pairs in the same order — which is what resuming relies on: the runs an
//! earlier, interrupted attempt completed (`prior`) are skipped where the walk meets them, and
//! the runs left are the ones it had not reached. Slow drifts of a machine spread over every
//! cell instead of biasing the ones that ran last.
//!
//! **Failures.** A run the executor calls failed (for a fleet run: no host measured) is kept
//! and counted, never retried silently; [`MAX_FAILURES_IN_A_ROW`] in a row stop the grid (its
//! server, or servers, are probably gone). Ctrl-C stops before the next run, keeping every
//! completed one. Nothing here prints.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::plan::matrix::round_order;
use crate::session::Interrupt;

/// Consecutive failed runs after which a grid stops.
pub const MAX_FAILURES_IN_A_ROW: u32 = 3;
/// With `--until-ci`: attempts a cell may make per run it may have (`max_repeat`), failed and
/// interrupted ones included, before it is given up on.
pub const MAX_ATTEMPTS_PER_RUN: usize = 2;

/// One run's place in a grid: its cell (an index the executor understands) and repetition
/// (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Slot {
    /// The cell.
    pub cell: usize,
    /// Its repetition, counted from 1.
    pub repetition: u32,
}

/// What a grid runs in each slot.
pub trait Executor {
    /// What one run produced: a client test's record, a fleet run's host records.
    type Run;

    /// Runs one slot.
    fn run(&mut self, slot: Slot, interrupt: &Interrupt) -> Self::Run;

    /// Why the run says nothing of its cell (it failed), if it does not.
    fn failure(&self, run: &Self::Run) -> Option<String>;

    /// Cell `cell`'s label, as its runs are stored and shown (a matrix's `P=4`, a curve's
    /// `k=8`); its index by default.
    fn label(&self, cell: usize) -> String {
        cell.to_string()
    }

    /// With `--until-ci`, after a round: the cells that need one more run, given every run
    /// so far. None by default (no `--until-ci`).
    fn pending(&self, _runs: &[(Slot, Self::Run)]) -> Vec<usize> {
        Vec::new()
    }

    /// The sentence that stops the grid after `failures` failed runs in a row, the last one
    /// failing because of `last`.
    fn stop_message(&self, failures: u32, last: &str) -> String {
        format!("{failures} runs in a row failed (last: {last}); stopping")
    }
}

/// The grid's shape: how many cells, how many repetitions in the first round, the seed.
#[derive(Debug, Clone, Copy)]
pub struct Grid {
    /// Cells, numbered 0..cells.
    pub cells: usize,
    /// Repetitions of every cell in the first round.
    pub repeat: u32,
    /// The order seed.
    pub seed: u64,
}

/// Where a repeated experiment is, before or after one run: the one progress type of a
/// matrix, a fleet's curve, a mesh and a campaign. A grid tells its runs; a walk that holds
/// grids or rounds says where in it they are (a campaign's tier, with the campaign's counts;
/// a mesh's round). `R` is what a run produced: a test's record, a fleet run's hosts, or in a
/// campaign either (`campaign::Finished`).
#[derive(Debug, Clone)]
pub struct Progress<'a, R> {
    /// The run's slot.
    pub slot: Slot,
    /// Its cell's label, as stored and shown ([`Executor::label`]): `P=4`, `k=8`, `a -> b`.
    pub cell: String,
    /// Runs finished (after the run: this one included), skipped ones not counted.
    pub done: usize,
    /// Runs planned so far (grows with `--until-ci` rounds).
    pub planned: usize,
    /// Estimated time left for the planned runs.
    pub eta: Option<Duration>,
    /// In a campaign: the tier's name, its position (0-based) and the number of tiers.
    pub tier: Option<(&'a str, usize, usize)>,
    /// In a mesh: the round (1-based) and the rounds planned so far.
    pub round: Option<(usize, usize)>,
    /// After the run: what it produced (before it: None).
    pub finished: Option<&'a R>,
}

/// What a grid produced.
#[derive(Debug)]
pub struct Outcome<R> {
    /// `prior`, then every new run in the order run.
    pub runs: Vec<(Slot, R)>,
    /// The slots of the planned walk (all rounds so far), in order: what a complete grid ran.
    pub planned: Vec<Slot>,
    /// Why it stopped early, if it did.
    pub stopped: Option<String>,
}

impl Grid {
    /// The order of one round: each of `cells` `times` times, shuffled with `round`'s seed.
    pub fn round(&self, cells: &[usize], times: u32, round: u64) -> Vec<usize> {
        round_order(self.seed, cells, times, round)
    }

    /// Runs the grid with `exec` after `prior` (runs an earlier, interrupted attempt at the
    /// same grid and seed completed; they are not run again). `progress` is told before and
    /// after each new run; `each` sees each new run as it finishes (to store it).
    pub fn run<E: Executor>(
        &self,
        exec: &mut E,
        prior: Vec<(Slot, E::Run)>,
        interrupt: &Interrupt,
        progress: &mut dyn FnMut(Progress<'_, E::Run>),
        each: &mut dyn FnMut(Slot, &E::Run),
    ) -> Outcome<E::Run> {
        let all: Vec<usize> = (0..self.cells).collect();
        let mut order = self.round(&all, self.repeat, 0);
        let done: HashSet<Slot> = prior.iter().map(|(s, _)| *s).collect();
        let mut out = Outcome { runs: prior, planned: Vec::new(), stopped: None };
        let mut reps = vec![0u32; self.cells];
        let (mut failures, mut round, mut next, mut skipped) = (0u32, 0u64, 0usize, 0usize);
        let started = Instant::now();
        loop {
            if next == order.len() {
                let pending = exec.pending(&out.runs);
                if pending.is_empty() {
                    break;
                }
                round += 1;
                order.extend(self.round(&pending, 1, round));
            }
            if interrupt.count() > 0 {
                out.stopped = Some(format!("interrupted by {}", interrupt.last_name()));
                break;
            }
            let cell = order[next];
            reps[cell] += 1;
            let slot = Slot { cell, repetition: reps[cell] };
            out.planned.push(slot);
            if done.contains(&slot) {
                (next, skipped) = (next + 1, skipped + 1);
                continue;
            }
            let ran = (next - skipped) as u32;
            let left = (order.len() - next).saturating_sub(done.len() - skipped) as u32;
            let eta = |ran: u32, left: u32| (ran > 0).then(|| started.elapsed() / ran * left);
            let label = exec.label(slot.cell);
            progress(Progress {
                slot,
                cell: label.clone(),
                done: next - skipped,
                planned: order.len(),
                eta: eta(ran, left),
                tier: None,
                round: None,
                finished: None,
            });
            let run = exec.run(slot, interrupt);
            each(slot, &run);
            progress(Progress {
                slot,
                cell: label,
                done: next - skipped + 1,
                planned: order.len(),
                eta: eta(ran + 1, left.saturating_sub(1)),
                tier: None,
                round: None,
                finished: Some(&run),
            });
            let failure = exec.failure(&run);
            failures = if failure.is_some() { failures + 1 } else { 0 };
            out.runs.push((slot, run));
            next += 1;
            if failures >= MAX_FAILURES_IN_A_ROW {
                out.stopped =
                    Some(exec.stop_message(failures, failure.as_deref().unwrap_or_default()));
                break;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// A mock executor: each cell's runs give the values listed for it, in turn (a run past
    /// the list repeats its last value); None is a failed run. With `until_ci`, a cell is
    /// pending while its completed values differ by more than `until_ci` and it has fewer
    /// than `max` of them. It can interrupt the grid at a given run.
    struct Mock {
        values: HashMap<usize, Vec<Option<f64>>>,
        until_ci: Option<f64>,
        max: usize,
        calls: Vec<Slot>,
        interrupt_at: Option<usize>,
    }

    impl Mock {
        fn new(values: &[(usize, &[Option<f64>])]) -> Mock {
            Mock {
                values: values.iter().map(|(c, v)| (*c, v.to_vec())).collect(),
                until_ci: None,
                max: 10,
                calls: Vec::new(),
                interrupt_at: None,
            }
        }
    }

    impl Executor for Mock {
        type Run = Option<f64>;

        fn run(&mut self, slot: Slot, interrupt: &Interrupt) -> Option<f64> {
            self.calls.push(slot);
            if self.interrupt_at == Some(self.calls.len()) {
                interrupt.trigger();
            }
            let v = &self.values[&slot.cell];
            v[(slot.repetition as usize - 1).min(v.len() - 1)]
        }

        fn failure(&self, run: &Option<f64>) -> Option<String> {
            run.is_none().then(|| "refused".to_string())
        }

        fn pending(&self, runs: &[(Slot, Option<f64>)]) -> Vec<usize> {
            let Some(width) = self.until_ci else { return Vec::new() };
            let mut cells: Vec<usize> = self.values.keys().copied().collect();
            cells.sort_unstable();
            cells
                .into_iter()
                .filter(|c| {
                    let got: Vec<f64> =
                        runs.iter().filter(|(s, _)| s.cell == *c).filter_map(|(_, v)| *v).collect();
                    let lo = got.iter().copied().fold(f64::INFINITY, f64::min);
                    let hi = got.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    got.len() < self.max && (got.len() < 2 || hi - lo > width)
                })
                .collect()
        }
    }

    fn ok(v: f64) -> Option<f64> {
        Some(v)
    }

    fn run(grid: Grid, exec: &mut Mock, prior: Vec<(Slot, Option<f64>)>) -> Outcome<Option<f64>> {
        let interrupt = Interrupt::manual();
        grid.run(exec, prior, &interrupt, &mut |_| {}, &mut |_, _| {})
    }

    #[test]
    fn every_cell_runs_repeat_times_in_a_seeded_order_with_repetitions_numbered_in_turn() {
        let grid = Grid { cells: 3, repeat: 2, seed: 7 };
        let mut m = Mock::new(&[(0, &[ok(1.0)]), (1, &[ok(2.0)]), (2, &[ok(3.0)])]);
        let out = run(grid, &mut m, Vec::new());
        assert_eq!(out.runs.len(), 6);
        assert!(out.stopped.is_none());
        for c in 0..3 {
            let reps: Vec<u32> =
                m.calls.iter().filter(|s| s.cell == c).map(|s| s.repetition).collect();
            assert_eq!(reps, [1, 2], "cell {c}: repetitions in the order they come");
        }
        let again = run(
            grid,
            &mut Mock::new(&[(0, &[ok(1.0)]), (1, &[ok(2.0)]), (2, &[ok(3.0)])]),
            Vec::new(),
        );
        assert_eq!(
            out.runs.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
            again.runs.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
            "the seed reproduces the order"
        );
        let other = Grid { seed: 8, ..grid };
        let o = run(
            other,
            &mut Mock::new(&[(0, &[ok(1.0)]), (1, &[ok(2.0)]), (2, &[ok(3.0)])]),
            Vec::new(),
        );
        assert_ne!(
            out.runs.iter().map(|(s, _)| s.cell).collect::<Vec<_>>(),
            o.runs.iter().map(|(s, _)| s.cell).collect::<Vec<_>>(),
            "another seed, another order"
        );
    }

    #[test]
    fn resuming_after_an_interruption_at_every_position_runs_exactly_what_was_left() {
        let values: &[(usize, &[Option<f64>])] =
            &[(0, &[ok(1.0)]), (1, &[ok(2.0)]), (2, &[ok(3.0)]), (3, &[ok(4.0)])];
        let grid = Grid { cells: 4, repeat: 3, seed: 42 };
        let whole = run(grid, &mut Mock::new(values), Vec::new());
        let whole_slots: Vec<Slot> = whole.runs.iter().map(|(s, _)| *s).collect();
        for stop in 1..whole_slots.len() {
            let mut first = Mock::new(values);
            first.interrupt_at = Some(stop);
            let cut = run(grid, &mut first, Vec::new());
            assert_eq!(cut.runs.len(), stop, "interrupted after run {stop}");
            assert!(cut.stopped.as_deref().is_some_and(|s| s.starts_with("interrupted")));
            let mut second = Mock::new(values);
            let resumed = run(grid, &mut second, cut.runs);
            assert_eq!(second.calls, whole_slots[stop..], "resumed after {stop}: the rest only");
            let mut all: Vec<Slot> = resumed.runs.iter().map(|(s, _)| *s).collect();
            let mut want = whole_slots.clone();
            all.sort_by_key(|s| (s.cell, s.repetition));
            want.sort_by_key(|s| (s.cell, s.repetition));
            assert_eq!(all, want, "every slot once");
        }
    }

    #[test]
    fn three_failures_in_a_row_stop_the_grid_and_a_success_resets_the_count() {
        let grid = Grid { cells: 1, repeat: 10, seed: 1 };
        let mut m = Mock::new(&[(0, &[None, None, ok(1.0), None, None, None, ok(1.0)])]);
        let out = run(grid, &mut m, Vec::new());
        assert_eq!(out.runs.len(), 6, "two failures, a success, then three failures");
        assert_eq!(
            out.stopped.as_deref(),
            Some("3 runs in a row failed (last: refused); stopping")
        );
    }

    #[test]
    fn until_ci_adds_rounds_for_the_pending_cells_only_until_they_converge() {
        let grid = Grid { cells: 2, repeat: 2, seed: 3 };
        // Cell 0 agrees at once; cell 1 is wide until its fourth run.
        let mut m = Mock::new(&[(0, &[ok(10.0)]), (1, &[ok(1.0), ok(9.0), ok(5.0), ok(5.0)])]);
        m.until_ci = Some(8.5);
        let out = run(grid, &mut m, Vec::new());
        let per = |c| out.runs.iter().filter(|(s, _)| s.cell == c).count();
        assert_eq!(per(0), 2, "a converged cell gets no more runs");
        // After 1 and 9 (width 8 <= 8.5): converged after two runs too.
        assert_eq!(per(1), 2);
        let mut wide = Mock::new(&[(0, &[ok(10.0)]), (1, &[ok(1.0), ok(20.0), ok(5.0)])]);
        wide.until_ci = Some(8.5);
        wide.max = 5;
        let out = run(grid, &mut wide, Vec::new());
        let reps: Vec<u32> =
            out.runs.iter().filter(|(s, _)| s.cell == 1).map(|(s, _)| s.repetition).collect();
        assert_eq!(reps.len(), 5, "a cell that never converges stops at its cap");
        let mut sorted = reps.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, [1, 2, 3, 4, 5], "repetitions go on counting across rounds");
        assert_eq!(out.planned.len(), 7, "the walk planned 2 + 5 runs");
    }

    #[test]
    fn progress_counts_runs_and_estimates_the_time_left() {
        let grid = Grid { cells: 2, repeat: 2, seed: 5 };
        let mut m = Mock::new(&[(0, &[ok(1.0)]), (1, &[ok(2.0)])]);
        let interrupt = Interrupt::manual();
        let mut seen = Vec::new();
        let mut stored = 0;
        grid.run(
            &mut m,
            Vec::new(),
            &interrupt,
            &mut |p| seen.push((p.done, p.planned, p.finished.is_some(), p.eta.is_some())),
            &mut |_, _| stored += 1,
        );
        assert_eq!(stored, 4);
        assert_eq!(seen.len(), 8);
        assert_eq!(seen[0], (0, 4, false, false), "no estimate before the first run");
        assert_eq!(seen[1], (1, 4, true, true));
        assert_eq!(seen[7], (4, 4, true, true));
    }
}
