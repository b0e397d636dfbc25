//! Trends: one target's stored results over time, split where they changed.
//!
//! People watch an interconnect for months; what they need from the history is "did this link
//! change, when, and by how much", not a table of 3,000 figures. Runs of the same test against
//! the same target (same protocol, direction, streams, block, window and rate: a
//! [`SeriesKey`]) form a series in time order, and each series is split at its change points.
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
//! Beside the steps, `stats::drift` finds what this test is too slow or too coarse for: a
//! fresh drop in the last one or two runs, and a slow drift (Mann–Kendall with a Theil–Sen
//! slope); a drift that fits better than the steps replaces them.
//!
//! The series is the first direction's receiver rate of each completed run (the figure
//! `linerate history` lists); failed runs are counted, not plotted.

use serde::Serialize;

use crate::plan::matrix::{round_seed, shuffled};
use crate::stats::sample::median_of_sorted;

/// What makes two runs the same test, so their results belong to one series.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct SeriesKey {
    /// The server as the user named it, `host:port`.
    pub server: String,
    /// `tcp` or `udp`.
    pub protocol: String,
    /// `upload`, `download` or `bidirectional`.
    pub direction: String,
    /// Streams per direction.
    pub streams: u32,
    /// Block (write) size, bytes.
    pub block_bytes: u64,
    /// Requested socket buffer (`-w`), bytes; None: the kernel's default.
    pub window_bytes: Option<u64>,
    /// Target rate (`-b`), bits per second; 0: unlimited.
    pub target_bits_per_second: u64,
}

/// One stored run of a series.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrendPoint {
    /// Its run id in the history.
    pub run: i64,
    /// When it started, milliseconds since the Unix epoch.
    pub started_unix_ms: u64,
    /// Its receiver rate (first direction), bits per second.
    pub bits_per_second: f64,
    /// Its path's RTT, retransmits and loss (`stats::trend_path`).
    #[serde(flatten)]
    pub path: crate::stats::trend_path::PathFigures,
}

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

/// A stretch of the series between changes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Segment {
    /// Index of its first point in the series.
    pub first: usize,
    /// Number of points.
    pub count: usize,
    /// Median rate, bits per second.
    pub median: f64,
    /// Lowest and highest rate.
    pub min: f64,
    /// Highest rate.
    pub max: f64,
}

/// A change point: where one segment ends and the next begins.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// Index (in the series) of the first point after the change.
    pub at: usize,
    /// That point's run id.
    pub run: i64,
    /// When that run started.
    pub started_unix_ms: u64,
    /// Median of the segment before, bits per second.
    pub before: f64,
    /// Median of the segment after, bits per second.
    pub after: f64,
    /// (after − before) / before.
    pub relative: f64,
    /// The permutation test's p-value.
    pub p_value: f64,
    /// True when the rate fell.
    pub regression: bool,
}

/// One series with its segments and changes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Series {
    /// Which test it is.
    pub key: SeriesKey,
    /// Completed runs, oldest first.
    pub points: Vec<TrendPoint>,
    /// Runs of this test that failed or were interrupted in the same span (not plotted).
    pub failed: usize,
    /// The stretches between changes (one when nothing changed; none without points).
    pub segments: Vec<Segment>,
    /// The changes found, oldest first (none when a drift explains the series better).
    pub changes: Vec<Change>,
    /// The last runs well below the runs before them (`stats::drift`), without a drift.
    pub fresh_drop: Option<crate::stats::drift::FreshDrop>,
    /// A steady decline or rise that fits the runs better than steps (`stats::drift`).
    pub drift: Option<crate::stats::drift::Drift>,
    /// The path's RTT, retransmits and loss with a finding (`stats::trend_path`).
    pub path: Vec<crate::stats::trend_path::PathSignal>,
}

/// A whole trend: every series of one target.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Trend {
    /// The target as the user gave it.
    pub target: String,
    /// Only runs since this time (milliseconds since the Unix epoch), if the user said.
    pub since_unix_ms: Option<u64>,
    /// How changes were found.
    pub method: Method,
    /// Series, the longest first.
    pub series: Vec<Series>,
}

/// One stored run as the trend reads it: a key, an outcome and a point.
#[derive(Debug, Clone, PartialEq)]
pub struct TrendRun {
    /// Which series.
    pub key: SeriesKey,
    /// None: the run failed or was interrupted, or received nothing.
    pub point: Option<TrendPoint>,
}

/// Groups `runs` (any order) into series and finds each series' changes.
pub fn trend(target: &str, since_unix_ms: Option<u64>, runs: Vec<TrendRun>, m: Method) -> Trend {
    let mut by_key: std::collections::BTreeMap<SeriesKey, (Vec<TrendPoint>, usize)> =
        Default::default();
    for r in runs {
        let entry = by_key.entry(r.key).or_default();
        match r.point {
            Some(p) => entry.0.push(p),
            None => entry.1 += 1,
        }
    }
    let mut series: Vec<Series> = by_key
        .into_iter()
        .map(|(key, (mut points, failed))| {
            points.sort_by_key(|p| (p.started_unix_ms, p.run));
            let values: Vec<f64> = points.iter().map(|p| p.bits_per_second).collect();
            let mut found = change_points(&values, &m);
            let at: Vec<usize> = found.iter().map(|&(at, _)| at).collect();
            let drift = crate::stats::drift::drift(&values, &at, &m);
            if drift.is_some() {
                found.clear(); // one slow decline, not several steps
            }
            let last = found.last().map_or(0, |&(at, _)| at);
            let fresh_drop = match drift {
                None => crate::stats::drift::fresh_drop(&values, last, &m),
                Some(_) => None,
            };
            let segments = segments(&values, &found);
            let figures: Vec<_> = points.iter().map(|p| p.path).collect();
            let path = crate::stats::trend_path::signals(&figures, last, &m);
            let changes = found
                .iter()
                .zip(segments.windows(2))
                .map(|(&(at, p_value), pair)| {
                    let (before, after) = (pair[0].median, pair[1].median);
                    Change {
                        at,
                        run: points[at].run,
                        started_unix_ms: points[at].started_unix_ms,
                        before,
                        after,
                        relative: (after - before) / before,
                        p_value,
                        regression: after < before,
                    }
                })
                .collect();
            Series { key, points, failed, segments, changes, fresh_drop, drift, path }
        })
        .collect();
    series.sort_by(|a, b| b.points.len().cmp(&a.points.len()).then(a.key.cmp(&b.key)));
    Trend { target: target.to_string(), since_unix_ms, method: m, series }
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

/// The segments `values` falls into, split at `changes`.
fn segments(values: &[f64], changes: &[(usize, f64)]) -> Vec<Segment> {
    if values.is_empty() {
        return Vec::new();
    }
    let mut bounds: Vec<usize> = vec![0];
    bounds.extend(changes.iter().map(|&(at, _)| at));
    bounds.push(values.len());
    bounds
        .windows(2)
        .map(|w| {
            let part = &values[w[0]..w[1]];
            Segment {
                first: w[0],
                count: part.len(),
                median: median(part),
                min: part.iter().copied().fold(f64::INFINITY, f64::min),
                max: part.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            }
        })
        .collect()
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
    fn series_are_split_by_test_and_failures_counted() {
        let key = |streams| SeriesKey {
            server: "h:5201".into(),
            protocol: "tcp".into(),
            direction: "upload".into(),
            streams,
            block_bytes: 131072,
            window_bytes: None,
            target_bits_per_second: 0,
        };
        let run = |id, streams, bps: Option<f64>| TrendRun {
            key: key(streams),
            point: bps.map(|b| TrendPoint {
                path: Default::default(),
                run: id,
                started_unix_ms: 1000 - id as u64,
                bits_per_second: b,
            }),
        };
        let t = trend(
            "h",
            None,
            vec![run(1, 1, Some(1.0)), run(2, 4, Some(2.0)), run(3, 1, Some(3.0)), run(4, 1, None)],
            Method::default(),
        );
        assert_eq!(t.series.len(), 2);
        assert_eq!(t.series[0].key.streams, 1);
        assert_eq!(t.series[0].failed, 1);
        // Oldest first: run 3 started before run 1.
        let ids: Vec<i64> = t.series[0].points.iter().map(|p| p.run).collect();
        assert_eq!(ids, [3, 1]);
        assert_eq!(t.series[0].segments.len(), 1);
        assert!(t.series[0].changes.is_empty());
    }

    #[test]
    fn ties_share_their_rank() {
        assert_eq!(ranks(&[5.0, 1.0, 5.0, 3.0]), [3.5, 1.0, 3.5, 2.0]);
    }
}
