//! Two signals a trend's step test (`stats::trend`) is too slow or too coarse for: a **fresh
//! drop** in the last one or two runs, and a **drift**, a slow steady decline (or rise).
//!
//! The step test wants [`Method::min_segment`] runs on each side of a change (5 by default),
//! so a link that fell from 200 to 120 Mbit/s two runs ago reads "no change" for three more
//! runs; and a link losing 4 % a run is cut into steps, each a "regression", where the truth
//! is one slow decline. Watching a fabric needs both named early and in their own words.
//!
//! # Fresh drop
//!
//! The last k runs (k = 2, else 1) against the runs before them since the last change (at
//! least [`Method::min_segment`]): a drop when every one of the k is below every earlier run,
//! their median is at least [`Method::min_change`] below the earlier median, and a prediction
//! test says runs like the earlier ones would rarely give a mean this low: Student's t of the
//! difference of means over s·√(1/k + 1/n), one-sided p ≤ α × [`FRESH_ALPHA_SHARE`] (0.0005).
//! For normal noise that is exact, so each k raises at most 0.05 % false alarms; a robust
//! spread (the median absolute deviation) was tried first and raised 1 in 80, because the
//! spread of a dozen runs is itself uncertain and the t distribution is what accounts for it.
//! "How sure" is said with the figures: the runs before, the drop and p.
//!
//! # Drift
//!
//! The Mann–Kendall test (Mann 1945, Kendall 1975): S = Σ sign(xⱼ − xᵢ) over i < j, whose
//! variance under no trend is known in closed form (ties corrected); z = (S ∓ 1)/√Var and a
//! two-sided p from the normal distribution. Its slope is Theil–Sen's (Sen 1968), the median of
//! every pairwise slope: robust to a few outliers, unlike least squares. A series drifts when
//! p ≤ [`Method::alpha`] × [`DRIFT_ALPHA_SHARE`], the fitted line moves by at least [`Method::min_change`] of the
//! median over the series, and the line fits the runs better than the steps the change-point
//! search found (smaller sum of absolute deviations): a step is not a drift, and a drift is not
//! several steps. Rank-based, so it assumes no distribution of the throughput. It is tested at a
//! quarter of the step test's α (p ≤ 0.0025 by default, [`DRIFT_ALPHA_SHARE`]), and the fresh
//! drop at a twentieth, so the three together stay within the step test's 1 %.
//!
//! **False alarms.** On flat series with normal noise (3 % and 8 % spread, 14 and 30 runs),
//! any of the three signals (step, drift, fresh drop) fires on at most 1 % of 2,400 seeded
//! series: `a_flat_series_raises_no_alarm_but_rarely` measures it.

use serde::Serialize;

use crate::stats::change_point::{Method, median};

/// The fresh drop's test level, as a fraction of [`Method::alpha`]: 0.0005 by default, per
/// number of last runs tried (1 and 2).
pub const FRESH_ALPHA_SHARE: f64 = 0.05;

/// The drift test's level, as a fraction of [`Method::alpha`]: 0.0025 by default.
pub const DRIFT_ALPHA_SHARE: f64 = 0.25;

/// Fewest runs a drift is looked for in.
pub const DRIFT_MIN_RUNS: usize = 8;

/// Most runs a drift's pairwise slopes are taken over (the last ones): 2,000 runs are two
/// million slopes.
const DRIFT_MAX_RUNS: usize = 2000;

/// The last runs of a series, well below everything before them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FreshDrop {
    /// How many of the last runs (1 or 2).
    pub runs: usize,
    /// The runs before them it is measured against (since the last change).
    pub before_runs: usize,
    /// Median of those runs.
    pub before: f64,
    /// Median of the last runs.
    pub after: f64,
    /// (after − before) / before.
    pub relative: f64,
    /// The chance that runs like the earlier ones would give a mean this low (one-sided
    /// prediction test, Student's t).
    pub p_value: f64,
}

/// A steady decline or rise over a series.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Drift {
    /// Runs it was measured over.
    pub runs: usize,
    /// Theil–Sen slope, value units a run.
    pub slope_per_run: f64,
    /// The slope over the series' median: −0.041 is −4.1 % a run.
    pub relative_per_run: f64,
    /// Mann–Kendall S.
    pub s: i64,
    /// Two-sided p-value.
    pub p_value: f64,
}

/// The fresh drop at the end of `values` (oldest first), if any; `last_change` is the index of
/// the first run after the step test's last change (0 without one).
pub fn fresh_drop(values: &[f64], last_change: usize, m: &Method) -> Option<FreshDrop> {
    for k in [2usize, 1] {
        let n = values.len();
        if n < k + m.min_segment.max(2) {
            continue;
        }
        let from = last_change.min(n - k);
        let (before, last) = (&values[from..n - k], &values[n - k..]);
        let h = before.len();
        if h < m.min_segment.max(2) {
            continue;
        }
        let low = before.iter().copied().fold(f64::INFINITY, f64::min);
        let high_last = last.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let (b, a) = (median(before), median(last));
        // A baseline of 0 has no ratio to drop by (the negated figures of `trend_path` are
        // below 0, so the sign is taken off).
        if high_last.partial_cmp(&low) != Some(std::cmp::Ordering::Less) || b == 0.0 {
            continue;
        }
        let relative = (a - b) / b.abs();
        if relative > -m.min_change {
            continue;
        }
        // A prediction test: how far the last runs' mean is below the earlier mean, in the
        // standard error of that difference for runs drawn like the earlier ones.
        let mean = before.iter().sum::<f64>() / h as f64;
        let sd = (before.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (h - 1) as f64).sqrt();
        let last_mean = last.iter().sum::<f64>() / k as f64;
        let p_value = match sd > 0.0 {
            true => {
                let t = (mean - last_mean) / (sd * (1.0 / k as f64 + 1.0 / h as f64).sqrt());
                crate::stats::compare::student_t_cdf(-t, (h - 1) as f64)
            }
            false => 0.0, // earlier runs that never varied: any run below them all is news
        };
        if p_value > m.alpha * FRESH_ALPHA_SHARE {
            continue;
        }
        return Some(FreshDrop { runs: k, before_runs: h, before: b, after: a, relative, p_value });
    }
    None
}

/// The drift of `values` (oldest first), if the series has one (see the module's doc);
/// `changes` are the step test's change points, against whose steps the line is weighed.
pub fn drift(values: &[f64], changes: &[usize], m: &Method) -> Option<Drift> {
    let v = &values[values.len().saturating_sub(DRIFT_MAX_RUNS)..];
    let n = v.len();
    if n < DRIFT_MIN_RUNS {
        return None;
    }
    let (s, var) = mann_kendall(v);
    if var <= 0.0 || s == 0 {
        return None;
    }
    let z = (s.abs() as f64 - 1.0) / var.sqrt();
    let p_value = (2.0 * crate::stats::compare::normal_upper(z.max(0.0))).min(1.0);
    let mut slopes = Vec::with_capacity(n * (n - 1) / 2);
    for i in 0..n {
        for j in i + 1..n {
            slopes.push((v[j] - v[i]) / (j - i) as f64);
        }
    }
    let slope = median(&slopes);
    let mid = median(v);
    if mid == 0.0
        || p_value > m.alpha * DRIFT_ALPHA_SHARE
        || (slope * (n - 1) as f64 / mid).abs() < m.min_change
    {
        return None;
    }
    // The line through the medians (Theil–Sen's intercept) against the steps found.
    let intercept =
        median(&v.iter().enumerate().map(|(i, x)| x - slope * i as f64).collect::<Vec<_>>());
    let line: f64 =
        v.iter().enumerate().map(|(i, x)| (x - intercept - slope * i as f64).abs()).sum();
    let offset = values.len() - n;
    let mut bounds: Vec<usize> = vec![0];
    bounds.extend(changes.iter().filter(|c| **c > offset).map(|c| c - offset));
    bounds.push(n);
    let steps: f64 = bounds
        .windows(2)
        .map(|w| {
            let part = &v[w[0]..w[1]];
            let med = median(part);
            part.iter().map(|x| (x - med).abs()).sum::<f64>()
        })
        .sum();
    (line < steps).then_some(Drift {
        runs: n,
        slope_per_run: slope,
        relative_per_run: slope / mid.abs(),
        s,
        p_value,
    })
}

/// The fresh drop and the drift of `values` (oldest first), as `report --trend` finds them,
/// with the step test (`change_point::change_points`, 999 permutations) run only when one of them is
/// a candidate: a mesh's thousands of pairs, an agent's every pair test.
pub fn watch(values: &[f64], m: &Method) -> (Option<FreshDrop>, Option<Drift>) {
    let changes = || -> Vec<usize> {
        crate::stats::change_point::change_points(values, m).iter().map(|c| c.0).collect()
    };
    if drift(values, &[], m).is_some() {
        let changes = changes();
        if let Some(d) = drift(values, &changes, m) {
            return (None, Some(d));
        }
        let last = changes.last().copied().unwrap_or(0);
        return (fresh_drop(values, last, m), None);
    }
    // Whatever the last change, the runs a fresh drop is set against end with the
    // `min_segment` before the last one or two: a drop must at least be below all of those.
    let n = values.len();
    let near = m.min_segment.max(2);
    let candidate = [1usize, 2].iter().any(|&k| {
        n >= k + near && {
            let low = values[n - k - near..n - k].iter().copied().fold(f64::INFINITY, f64::min);
            values[n - k..].iter().all(|v| *v < low)
        }
    });
    if !candidate {
        return (None, None);
    }
    let last = changes().last().copied().unwrap_or(0);
    (fresh_drop(values, last, m), None)
}

/// Mann–Kendall's S and its variance under no trend, ties corrected.
fn mann_kendall(v: &[f64]) -> (i64, f64) {
    let n = v.len();
    let mut s = 0i64;
    for i in 0..n {
        for j in i + 1..n {
            s += match v[j].partial_cmp(&v[i]) {
                Some(std::cmp::Ordering::Greater) => 1,
                Some(std::cmp::Ordering::Less) => -1,
                _ => 0,
            };
        }
    }
    let mut sorted = v.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mut ties = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && sorted[j + 1] == sorted[i] {
            j += 1;
        }
        let t = (j - i + 1) as f64;
        ties += t * (t - 1.0) * (2.0 * t + 5.0);
        i = j + 1;
    }
    let nf = n as f64;
    (s, (nf * (nf - 1.0) * (2.0 * nf + 5.0) - ties) / 18.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::change_point::change_points;
    use crate::stats::sample::tests::{Rng, noisy};

    fn signals(v: &[f64], m: &Method) -> (Vec<usize>, Option<FreshDrop>, Option<Drift>) {
        let changes: Vec<usize> = change_points(v, m).iter().map(|c| c.0).collect();
        let fresh = fresh_drop(v, changes.last().copied().unwrap_or(0), m);
        let drift = drift(v, &changes, m);
        (changes, fresh, drift)
    }

    #[test]
    fn two_low_runs_after_a_stable_twelve_are_a_fresh_drop() {
        let mut rng = Rng(21);
        let mut v = noisy(&mut rng, 12, 200e6, 0.02);
        v.extend(noisy(&mut rng, 2, 120e6, 0.02));
        let (changes, fresh, drift) = signals(&v, &Method::default());
        assert!(changes.is_empty(), "too few runs after it for a step: {changes:?}");
        let f = fresh.expect("a fresh drop");
        assert_eq!((f.runs, f.before_runs), (2, 12));
        assert!((f.relative + 0.4).abs() < 0.03, "{f:?}");
        assert!(f.p_value < 1e-6, "{f:?}");
        assert!(drift.is_none(), "a drop is not a drift: {drift:?}");
        // One low run is news too.
        let one = fresh_drop(&v[..13], 0, &Method::default()).expect("one run");
        assert_eq!(one.runs, 1);
        // A low run inside the earlier spread is not.
        let mut w = noisy(&mut rng, 12, 200e6, 0.05);
        w.push(w.iter().copied().fold(f64::INFINITY, f64::min) * 0.99);
        assert!(fresh_drop(&w, 0, &Method::default()).is_none());
    }

    #[test]
    fn a_drop_after_an_improvement_is_set_against_the_runs_since_it() {
        let mut rng = Rng(8);
        let mut v = noisy(&mut rng, 10, 100e6, 0.01);
        v.extend(noisy(&mut rng, 10, 200e6, 0.01));
        v.extend(noisy(&mut rng, 2, 150e6, 0.01));
        assert!(fresh_drop(&v, 0, &Method::default()).is_none(), "above the first ten");
        let (fresh, drift) = watch(&v, &Method::default());
        let f = fresh.expect("against the ten since the change");
        assert_eq!((f.runs, f.before_runs, drift), (2, 10, None));
        assert!((f.relative + 0.25).abs() < 0.03, "{f:?}");
    }

    #[test]
    fn a_slow_decline_is_one_drift_not_steps() {
        let mut rng = Rng(4);
        let v: Vec<f64> = (0..14).map(|i| 200e6 * 0.96f64.powi(i)).collect();
        let v: Vec<f64> =
            v.iter().zip(noisy(&mut rng, 14, 1.0, 0.01)).map(|(a, b)| a * b).collect();
        let (changes, _, drift) = signals(&v, &Method::default());
        let d = drift.unwrap_or_else(|| panic!("a drift; steps found: {changes:?}"));
        assert_eq!(d.runs, 14);
        assert!(d.relative_per_run < -0.03 && d.relative_per_run > -0.06, "{d:?}");
        assert!(d.p_value < 0.001 && d.s < 0, "{d:?}");
        // A step is a step: a drift test of a step is weighed against it and loses.
        let mut step = noisy(&mut rng, 10, 200e6, 0.02);
        step.extend(noisy(&mut rng, 10, 120e6, 0.02));
        let (changes, _, drift) = signals(&step, &Method::default());
        assert_eq!(changes, [10]);
        assert!(drift.is_none(), "{drift:?}");
    }

    #[test]
    fn a_flat_series_raises_no_alarm_but_rarely() {
        let m = Method::default();
        let mut rng = Rng(99);
        let (mut trials, mut alarms) = (0usize, 0usize);
        for (n, cv) in [(14, 0.03), (30, 0.03), (14, 0.08), (30, 0.08)] {
            for i in 0..600 {
                let v = noisy(&mut rng, n, 1e9, cv);
                let (changes, fresh, drift) = signals(&v, &Method { seed: i, ..m });
                trials += 1;
                alarms += usize::from(!changes.is_empty() || fresh.is_some() || drift.is_some());
            }
        }
        let rate = alarms as f64 / trials as f64;
        eprintln!("FIGURE trend_any_alarm_rate_on_flat_series = {rate} ({alarms} of {trials})");
        assert!(rate <= 0.01, "false alarms on flat series: {rate} ({alarms} of {trials})");
    }

    #[test]
    fn mann_kendall_counts_ties() {
        assert_eq!(mann_kendall(&[1.0, 2.0, 3.0]), (3, 3.0 * 2.0 * 11.0 / 18.0));
        let (s, var) = mann_kendall(&[1.0, 1.0, 2.0]);
        assert_eq!(s, 2);
        assert!((var - (3.0 * 2.0 * 11.0 - 2.0 * 1.0 * 9.0) / 18.0).abs() < 1e-12);
    }
}
