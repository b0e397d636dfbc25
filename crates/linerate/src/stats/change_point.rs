//! Change points: where a series of results changed, and how sure that is.
//!
//! # Method
//!
//! Binary segmentation with a rank statistic and a permutation test (the approach of
//! E-divisive/Hunter-style performance-regression detectors, with a Mann–Whitney statistic
//! instead of an energy distance, because it needs no assumption about how throughput is
//! distributed and is not moved by one outlier):
//!
//! 1. In a segment of n results, for every stretch `[a, b)` — a step (from the start, or to
//!    the end) or a dip or rise that ended — leaving at least [`Method::min_segment`] results
//!    in every part, compute the standardised Mann–Whitney statistic
//!    z = (U − n₁n₂/2) / √(n₁n₂(n+1)/12) of the stretch against the rest. The candidate is the
//!    stretch with the largest |z|. (Long segments are cut on a grid of at most 200 points.)
//! 2. Its significance: the same maximum over [`Method::permutations`] seeded random
//!    permutations of the segment. p = (1 + #{permuted max ≥ observed max}) / (1 + permutations).
//!    Because the maximum is taken over every stretch in both the observed and the permuted
//!    series, p accounts for having searched them all.
//! 3. The stretch's ends are changes when p ≤ [`Method::alpha`] **and** the medians inside and
//!    outside differ by at least [`Method::min_change`] (a practical threshold: a 0.3 % step
//!    that a long series makes "significant" is not news to a network engineer). Each part is
//!    then searched again.
//!
//! **False-alarm rate.** On a flat series whose results are exchangeable (no trend, no drift),
//! the first test reports a change with probability at most α (exact for a permutation test),
//! and no further test runs unless the first one fired, so the chance of any reported change
//! in the whole series is ≤ α = 1 % by default. The unit test
//! `a_flat_series_reports_a_change_about_alpha_of_the_time` measures it on 400 simulated
//! series. Results that drift slowly (autocorrelated noise) break exchangeability and can
//! raise it; the 5 % practical threshold is what guards against that in practice.
//!
//! Its users: `stats::trend` (a target's series, split at its changes), `stats::drift`
//! (whether the steps or a slow drift fit a series better) and `stats::trend_path`.

use serde::Serialize;

use crate::plan::matrix::{round_seed, shuffled};
use crate::stats::sample::median_of_sorted;

/// How change points are found (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Method {
    /// Largest p-value reported as a change.
    pub alpha: f64,
    /// Random permutations per test.
    pub permutations: usize,
    /// Fewest results on each side of a change.
    pub min_segment: usize,
    /// Smallest relative change of the median reported, e.g. 0.05 for 5 %.
    pub min_change: f64,
    /// Seed of the permutations (results are reproducible).
    pub seed: u64,
}

impl Default for Method {
    fn default() -> Self {
        Method { alpha: 0.01, permutations: 999, min_segment: 5, min_change: 0.05, seed: 0x5eed }
    }
}

/// The change points of `values` (index of the first value after each change, and its
/// p-value), in order.
pub fn change_points(values: &[f64], m: &Method) -> Vec<(usize, f64)> {
    let mut found = Vec::new();
    let mut todo = vec![(0, values.len())];
    let mut test = 0u64;
    while let Some((lo, hi)) = todo.pop() {
        let Some(((a, b), p)) = best_cut(&values[lo..hi], m, round_seed(m.seed, test)) else {
            continue;
        };
        test += 1;
        let (a, b) = (lo + a, lo + b);
        let inside = median(&values[a..b]);
        let outside: Vec<f64> = values[lo..a].iter().chain(&values[b..hi]).copied().collect();
        let outside = median(&outside);
        let shift =
            if outside == 0.0 { f64::INFINITY } else { ((inside - outside) / outside).abs() };
        if p <= m.alpha && shift >= m.min_change {
            for at in [a, b] {
                if at != lo && at != hi {
                    found.push((at, p));
                }
            }
            todo.extend([(lo, a), (a, b), (b, hi)].into_iter().filter(|(x, y)| y > x));
        }
    }
    found.sort_by_key(|&(at, _)| at);
    found
}

/// Most split points considered in one segment: a longer segment is searched on an even grid
/// of this many, so the pair search stays quadratic in this, not in the series' length.
const GRID: usize = 200;

/// The stretch `[a, b)` of `seg` that differs most from the rest (a single change when `a` is
/// 0 or `b` is the end: a step; else a dip or a rise that ended), by the largest |z|, with its
/// permutation p-value; None when `seg` is too short to split.
///
/// Searching stretches, not only single splits, is what finds a link that degraded and was
/// repaired: a single split of 9-6-9 Gbit/s compares 9 with a mix of 6 and 9 and may miss both.
fn best_cut(seg: &[f64], m: &Method, seed: u64) -> Option<((usize, usize), f64)> {
    let n = seg.len();
    let min = m.min_segment.max(1);
    if n < 2 * min {
        return None;
    }
    let cuts = cut_points(n, min);
    let ranks = ranks(seg);
    let (cut, observed) = max_z(&ranks, &cuts, min);
    let mut as_large = 0usize;
    for i in 0..m.permutations {
        let permuted = shuffled(ranks.clone(), round_seed(seed, i as u64 + 1));
        // A tolerance, so a permutation that ties the observed maximum (e.g. the identity)
        // is counted as at least as large despite rounding.
        if max_z(&permuted, &cuts, min).1 >= observed - 1e-9 {
            as_large += 1;
        }
    }
    let p = (1 + as_large) as f64 / (1 + m.permutations) as f64;
    Some((cut, p))
}

/// Where a segment of `n` may be cut: its two ends and every point leaving `min` on each
/// side, thinned to at most [`GRID`] evenly spaced points.
fn cut_points(n: usize, min: usize) -> Vec<usize> {
    let inner = n + 1 - 2 * min;
    let step = inner.div_ceil(GRID).max(1);
    let mut cuts = vec![0];
    cuts.extend((min..=n - min).step_by(step));
    cuts.push(n);
    cuts
}

/// The stretch `[a, b)` between two of `cuts` (at least `min` long, and leaving `min` or
/// nothing on each side) whose standardised Mann–Whitney |z| against the rest is the largest.
fn max_z(ranks: &[f64], cuts: &[usize], min: usize) -> ((usize, usize), f64) {
    let n = ranks.len();
    let nf = n as f64;
    let mut prefix = Vec::with_capacity(n + 1);
    prefix.push(0.0);
    for r in ranks {
        prefix.push(prefix.last().copied().unwrap_or(0.0) + r);
    }
    let mut best = ((0, n), f64::NEG_INFINITY);
    for (i, &a) in cuts.iter().enumerate() {
        for &b in &cuts[i + 1..] {
            let n1 = b - a;
            if n1 < min || n - n1 < min || (a == 0 && b == n) {
                continue;
            }
            let (n1, n2) = (n1 as f64, (n - n1) as f64);
            let u = prefix[b] - prefix[a] - n1 * (n1 + 1.0) / 2.0;
            let z = ((u - n1 * n2 / 2.0) / (n1 * n2 * (nf + 1.0) / 12.0).sqrt()).abs();
            if z > best.1 {
                best = ((a, b), z);
            }
        }
    }
    best
}

/// 1-based ranks of `values`, ties sharing their average rank.
fn ranks(values: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    let mut ranks = vec![0.0; values.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && values[order[j + 1]] == values[order[i]] {
            j += 1;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        for &k in &order[i..=j] {
            ranks[k] = rank;
        }
        i = j + 1;
    }
    ranks
}

/// The median of `values` (NaN when there are none).
pub(crate) fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() { f64::NAN } else { median_of_sorted(&v) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::sample::tests::{Rng, noisy};

    #[test]
    fn a_step_is_found_at_the_run_where_it_happened() {
        let mut rng = Rng(7);
        let mut v = noisy(&mut rng, 25, 956e6, 0.01);
        v.extend(noisy(&mut rng, 25, 574e6, 0.01));
        let found = change_points(&v, &Method::default());
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, 25);
        assert!(found[0].1 <= 0.01);
    }

    #[test]
    fn two_steps_are_both_found() {
        let mut rng = Rng(11);
        let mut v = noisy(&mut rng, 15, 9e9, 0.02);
        v.extend(noisy(&mut rng, 15, 6e9, 0.02));
        v.extend(noisy(&mut rng, 15, 9e9, 0.02));
        let at: Vec<usize> = change_points(&v, &Method::default()).iter().map(|c| c.0).collect();
        assert_eq!(at, [15, 30]);
    }

    #[test]
    fn a_flat_series_reports_a_change_about_alpha_of_the_time() {
        // Without the practical threshold, so the permutation test alone is measured.
        let m = Method { min_change: 0.0, permutations: 199, alpha: 0.05, ..Method::default() };
        let mut rng = Rng(3);
        let trials = 400;
        let alarms = (0..trials)
            .filter(|&i| {
                let v = noisy(&mut rng, 50, 1e9, 0.03);
                !change_points(&v, &Method { seed: i, ..m }).is_empty()
            })
            .count();
        let rate = alarms as f64 / trials as f64;
        eprintln!("FIGURE trend_false_alarm_rate_at_alpha_0.05 = {rate}");
        // α = 5 %: 400 trials give a standard error of 1.1 %; 9.5 % is four of them above.
        assert!(rate <= 0.095, "false alarms on flat series: {rate}");
        assert!(rate > 0.0, "a test that never fires measures nothing: {rate}");
    }

    #[test]
    fn a_small_significant_step_is_not_news() {
        let mut rng = Rng(5);
        let mut v = noisy(&mut rng, 40, 1e9, 0.001);
        v.extend(noisy(&mut rng, 40, 0.99e9, 0.001));
        assert!(change_points(&v, &Method::default()).is_empty());
        let m = Method { min_change: 0.005, ..Method::default() };
        assert_eq!(change_points(&v, &m).len(), 1);
    }

    #[test]
    fn ties_share_their_rank() {
        assert_eq!(ranks(&[5.0, 1.0, 5.0, 3.0]), [3.5, 1.0, 3.5, 2.0]);
    }
}
