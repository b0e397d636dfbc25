//! Describe a sample of repeated measurements (one matrix cell run N times): min, max, median,
//! mean, sample standard deviation, a Student-t 95 % confidence interval for the mean, the
//! coefficient of variation, and the indices of outliers. Also the stopping rule behind
//! `--until-ci 5%` ([`ci_within`]), in the spirit of netperf's `-I 95,5` but with a t interval
//! at every n instead of netperf's fixed iteration bounds.
//!
//! Outliers are found with the Iglewicz–Hoaglin modified z-score (as hyperfine does) and are
//! **reported, never removed**: every other figure here is computed over all values, because a
//! slow run on a network is often the finding, not noise. Dropping it is the reader's call.
//!
//! Pure functions: no I/O, no clock, no allocation beyond the result. Must not print, sample a
//! clock or decide anything about a test plan; it only summarises numbers it is given.

use serde::Serialize;

/// Modified z-scores above this are outliers (Iglewicz and Hoaglin, 1993).
pub const OUTLIER_Z: f64 = 3.5;

/// A value must also lie this share of the median away to be called an outlier: with three
/// runs at 61.4, 61.6 and 63.4 Gbit/s the MAD is tiny and the z-score of the last one is 6,
/// but a 3 % spread in throughput is ordinary run-to-run variation, not a separate event.
pub const OUTLIER_MIN_DEVIATION: f64 = 0.05;

/// Φ⁻¹(0.75): turns a median absolute deviation into a normal standard deviation (MAD / 0.6745).
const MAD_TO_SIGMA: f64 = 0.6745;

/// √(π/2): turns a mean absolute deviation into a normal standard deviation, used when the MAD
/// is 0 (more than half the values are equal).
const MEAN_AD_TO_SIGMA: f64 = 1.253314;

/// Φ⁻¹(0.975), the large-sample limit of [`t_critical_975`].
const Z_975: f64 = 1.959_963_984_540_054;

/// Two-sided 95 % Student t quantiles t(0.975, df) for df = 1..=30, to nine decimals.
const T_975: [f64; 30] = [
    12.706_204_736,
    4.302_652_730,
    3.182_446_305,
    2.776_445_105,
    2.570_581_836,
    2.446_911_851,
    2.364_624_252,
    2.306_004_135,
    2.262_157_163,
    2.228_138_852,
    2.200_985_160,
    2.178_812_830,
    2.160_368_656,
    2.144_786_688,
    2.131_449_546,
    2.119_905_299,
    2.109_815_578,
    2.100_922_040,
    2.093_024_054,
    2.085_963_447,
    2.079_613_845,
    2.073_873_068,
    2.068_657_610,
    2.063_898_562,
    2.059_538_553,
    2.055_529_439,
    2.051_830_516,
    2.048_407_142,
    2.045_229_642,
    2.042_272_456,
];

/// What a sample of repeated measurements looks like. All figures are over every value,
/// outliers included.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SampleStats {
    /// Number of values.
    pub n: usize,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Middle value (mean of the two middle values for even n).
    pub median: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (divides by n − 1); None for n < 2.
    pub stddev: Option<f64>,
    /// 95 % confidence interval for the mean, `mean ± t(0.975, n−1) · stddev / √n`; None for
    /// n < 2. Assumes the runs are independent and roughly normal around their mean.
    pub ci95: Option<(f64, f64)>,
    /// Half the width of `ci95`, in the values' unit.
    pub ci95_half_width: Option<f64>,
    /// Coefficient of variation, stddev / |mean|; None for n < 2 or a zero mean.
    pub cv: Option<f64>,
    /// Indices (into the input, ascending) of values whose modified z-score exceeds
    /// [`OUTLIER_Z`]. Reported only: they are still counted in every figure above.
    pub outliers: Vec<usize>,
}

/// Describe `values`. None for an empty slice, for any NaN or infinite value, and for values so
/// large that their sum or spread overflows an f64 (no figure is ever NaN or infinite).
pub fn describe(values: &[f64]) -> Option<SampleStats> {
    if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let n = values.len();
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = median_of_sorted(&sorted);
    let mean = values.iter().sum::<f64>() / n as f64;
    let stddev = (n >= 2).then(|| {
        let ss: f64 = values.iter().map(|v| (v - mean) * (v - mean)).sum();
        (ss / (n - 1) as f64).sqrt()
    });
    let half = stddev.map(|s| t_critical_975(n as u64 - 1) * s / (n as f64).sqrt());
    let stats = SampleStats {
        n,
        min: sorted[0],
        max: sorted[n - 1],
        median,
        mean,
        stddev,
        ci95: half.map(|h| (mean - h, mean + h)),
        ci95_half_width: half,
        cv: stddev.filter(|_| mean != 0.0).map(|s| s / mean.abs()),
        outliers: outliers(values, median),
    };
    all_finite(&stats).then_some(stats)
}

fn all_finite(s: &SampleStats) -> bool {
    let opt = |o: Option<f64>| o.is_none_or(f64::is_finite);
    s.mean.is_finite()
        && opt(s.stddev)
        && opt(s.ci95_half_width)
        && opt(s.cv)
        && opt(s.ci95.map(|(lo, hi)| lo + hi))
}

/// The median of values sorted in ascending order (not empty).
pub(crate) fn median_of_sorted(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        // Halve first so two huge values cannot overflow.
        sorted[n / 2 - 1] / 2.0 + sorted[n / 2] / 2.0
    }
}

/// Indices of values with |modified z| > [`OUTLIER_Z`] that also lie at least
/// [`OUTLIER_MIN_DEVIATION`] of the median away. The scale is MAD / 0.6745; when the MAD is 0
/// it is the mean absolute deviation from the median × √(π/2); when that is 0 too, all values
/// are equal and none is an outlier.
fn outliers(values: &[f64], median: f64) -> Vec<usize> {
    let mut dev: Vec<f64> = values.iter().map(|v| (v - median).abs()).collect();
    let mean_ad = dev.iter().sum::<f64>() / dev.len() as f64;
    dev.sort_by(f64::total_cmp);
    let mad = median_of_sorted(&dev);
    let sigma = if mad > 0.0 { mad / MAD_TO_SIGMA } else { mean_ad * MEAN_AD_TO_SIGMA };
    if !(sigma > 0.0 && sigma.is_finite()) {
        return Vec::new();
    }
    let z = |v: f64| ((v - median) / sigma).abs();
    let far = |v: f64| (v - median).abs() >= OUTLIER_MIN_DEVIATION * median.abs();
    values
        .iter()
        .enumerate()
        .filter(|(_, v)| z(**v) > OUTLIER_Z && far(**v))
        .map(|(i, _)| i)
        .collect()
}

/// The two-sided 95 % Student t quantile t(0.975, df): the multiplier of the standard error in
/// a 95 % confidence interval from df + 1 values. Exact (nine decimals) for df 1..=30; above
/// that the Cornish–Fisher expansion around Φ⁻¹(0.975) to the ν⁻⁴ term (Abramowitz & Stegun
/// 26.7.5), within 1e-6 of the true quantile at df 31 and closer beyond (checked against
/// `compare::student_t_cdf` in the tests); tends to 1.959964. df 0 has no interval: infinity.
pub fn t_critical_975(df: u64) -> f64 {
    match df {
        0 => f64::INFINITY,
        1..=30 => T_975[df as usize - 1],
        _ => cornish_fisher_975(df as f64),
    }
}

fn cornish_fisher_975(nu: f64) -> f64 {
    let z = Z_975;
    let (z2, z3) = (z * z, z * z * z);
    let (z5, z7, z9) = (z3 * z2, z3 * z2 * z2, z3 * z3 * z3);
    let g1 = (z3 + z) / 4.0;
    let g2 = (5.0 * z5 + 16.0 * z3 + 3.0 * z) / 96.0;
    let g3 = (3.0 * z7 + 19.0 * z5 + 17.0 * z3 - 15.0 * z) / 384.0;
    let g4 = (79.0 * z9 + 776.0 * z7 + 1482.0 * z5 - 1920.0 * z3 - 945.0 * z) / 92160.0;
    z + g1 / nu + g2 / (nu * nu) + g3 / nu.powi(3) + g4 / nu.powi(4)
}

/// Whether the 95 % confidence interval is tight enough: half-width / |mean| ≤
/// `relative_half_width` (0.05 for `--until-ci 5%`). False for n < 2 (no interval yet) and for a
/// NaN target. A zero mean has no relative width, so it passes only with a zero half-width
/// (every value the same).
pub fn ci_within(stats: &SampleStats, relative_half_width: f64) -> bool {
    match stats.ci95_half_width {
        Some(h) if stats.n >= 2 => {
            if stats.mean == 0.0 {
                h == 0.0 && relative_half_width >= 0.0
            } else {
                h / stats.mean.abs() <= relative_half_width
            }
        }
        _ => false,
    }
}

#[cfg(test)]
pub(crate) mod tests {

    #[test]
    fn ordinary_spread_is_not_an_outlier_however_small_the_mad() {
        let s = describe(&[61.372e9, 61.571e9, 63.384e9]).expect("stats");
        assert!(s.outliers.is_empty(), "3 % from the median: {:?}", s.outliers);
        let s = describe(&[28.7e9, 62.27e9, 62.3e9]).expect("stats");
        assert_eq!(s.outliers, vec![0], "half the median away");
    }

    use super::*;

    /// Gaussian noise (Box–Muller) around `mean` with relative spread `cv`: `n` results of a
    /// flat series (the trend and drift tests' simulated runs).
    pub(crate) fn noisy(rng: &mut Rng, n: usize, mean: f64, cv: f64) -> Vec<f64> {
        (0..n)
            .map(|_| {
                let u1 = 1.0 - rng.unit();
                let u2 = rng.unit();
                let g = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                mean * (1.0 + cv * g)
            })
            .collect()
    }

    /// xorshift64: deterministic, good enough to generate test samples.
    pub(crate) struct Rng(pub(crate) u64);

    impl Rng {
        pub(crate) fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        /// Uniform in [0, 1).
        pub(crate) fn unit(&mut self) -> f64 {
            (self.next() >> 11) as f64 / (1u64 << 53) as f64
        }

        pub(crate) fn below(&mut self, n: u64) -> u64 {
            self.next() % n.max(1)
        }

        /// `center` ± `spread` (relative), uniform.
        pub(crate) fn around(&mut self, center: f64, spread: f64) -> f64 {
            center * (1.0 + spread * (2.0 * self.unit() - 1.0))
        }
    }

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1.0)
    }

    #[test]
    fn t_quantiles_match_textbook_tables() {
        for (df, t) in [(1, 12.706), (2, 4.303), (5, 2.571), (9, 2.262), (30, 2.042), (120, 1.980)]
        {
            assert!((t_critical_975(df) - t).abs() < 5e-4, "df {df}: {}", t_critical_975(df));
        }
        assert!((t_critical_975(40) - 2.021).abs() < 5e-4);
        assert!((t_critical_975(60) - 2.000).abs() < 5e-4);
        assert!((t_critical_975(1_000_000) - 1.960).abs() < 5e-4);
        assert!((t_critical_975(u64::MAX) - Z_975).abs() < 1e-12);
        assert_eq!(t_critical_975(0), f64::INFINITY);
    }

    #[test]
    fn t_quantiles_decrease_smoothly_across_the_table_edge() {
        let mut last = f64::INFINITY;
        for df in 1..500 {
            let t = t_critical_975(df);
            assert!(t < last && t > Z_975, "df {df}: {t} after {last}");
            last = t;
        }
        // The formula at df 30 agrees with the exact table value.
        assert!((cornish_fisher_975(30.0) - T_975[29]).abs() < 2e-6);
    }

    #[test]
    fn t_quantiles_invert_the_t_distribution() {
        use crate::stats::compare::student_t_cdf;
        for df in 1..=30u64 {
            let p = student_t_cdf(t_critical_975(df), df as f64);
            assert!((p - 0.975).abs() < 1e-10, "df {df}: cdf {p}");
        }
        for df in [31u64, 35, 50, 120, 1000, 100_000] {
            let p = student_t_cdf(t_critical_975(df), df as f64);
            assert!((p - 0.975).abs() < 1e-7, "df {df}: cdf {p}");
        }
    }

    #[test]
    fn describes_one_to_ten() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        let s = describe(&v).expect("finite values");
        assert_eq!((s.n, s.min, s.max, s.median, s.mean), (10, 1.0, 10.0, 5.5, 5.5));
        let sd = (55.0f64 / 6.0).sqrt(); // Σ(x−5.5)² = 82.5, / 9
        assert!(close(s.stddev.expect("n ≥ 2"), sd, 1e-12));
        // 2.262157 · 3.027650 / √10 = 2.165853
        let h = s.ci95_half_width.expect("n ≥ 2");
        assert!((h - 2.165_853).abs() < 1e-5, "{h}");
        let (lo, hi) = s.ci95.expect("n ≥ 2");
        assert!((lo - 3.334_147).abs() < 1e-5 && (hi - 7.665_853).abs() < 1e-5);
        assert!(close(s.cv.expect("mean ≠ 0"), sd / 5.5, 1e-12));
        assert!(s.outliers.is_empty());
    }

    #[test]
    fn ci_of_a_known_sample() {
        // Five throughput runs, Gbit/s: mean 9.40, s = 0.158114, t(4) = 2.776445.
        let s = describe(&[9.2, 9.3, 9.4, 9.5, 9.6]).expect("finite");
        assert!(close(s.mean, 9.4, 1e-12));
        let h = s.ci95_half_width.expect("n ≥ 2");
        assert!((h - 2.776_445_105 * 0.158_113_883 / 5f64.sqrt()).abs() < 1e-8, "{h}");
        assert!((h - 0.196_324).abs() < 1e-6);
        assert!(ci_within(&s, 0.021) && !ci_within(&s, 0.020)); // 0.196/9.4 = 2.09 %
    }

    #[test]
    fn small_and_degenerate_samples() {
        assert_eq!(describe(&[]), None);
        assert_eq!(describe(&[1.0, f64::NAN]), None);
        assert_eq!(describe(&[f64::INFINITY]), None);
        assert_eq!(describe(&[f64::MAX, f64::MAX]), None, "sum overflows");
        let one = describe(&[7.0]).expect("one value");
        assert_eq!(
            (one.median, one.mean, one.stddev, one.ci95, one.cv),
            (7.0, 7.0, None, None, None)
        );
        assert!(!ci_within(&one, 1.0));
        let same = describe(&[3.0; 4]).expect("finite");
        assert_eq!((same.stddev, same.ci95_half_width, same.cv), (Some(0.0), Some(0.0), Some(0.0)));
        assert!(ci_within(&same, 0.0) && same.outliers.is_empty());
        let zeros = describe(&[0.0; 3]).expect("finite");
        assert_eq!(zeros.cv, None);
        assert!(ci_within(&zeros, 0.05));
        let centred = describe(&[-1.0, 1.0]).expect("finite");
        assert!(!ci_within(&centred, 1e9), "zero mean with spread has no relative width");
        assert!(!ci_within(&describe(&[1.0, 2.0]).expect("finite"), f64::NAN));
    }

    /// `n` runs evenly spread over center ± spread (relative), shuffled.
    fn spread_runs(rng: &mut Rng, n: usize, center: f64, spread: f64) -> Vec<f64> {
        let step = 2.0 * spread / (n.max(2) - 1) as f64;
        let mut v: Vec<f64> = (0..n).map(|i| center * (1.0 - spread + step * i as f64)).collect();
        for i in (1..n).rev() {
            v.swap(i, rng.below(i as u64 + 1) as usize);
        }
        v
    }

    #[test]
    fn finds_an_injected_tenfold_value() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..300 {
            let n = 3 + rng.below(40) as usize;
            // Evenly spread runs: the 10x value and nothing else.
            let mut v = spread_runs(&mut rng, n, 9.4e9, 0.02);
            let at = rng.below(n as u64) as usize;
            v[at] *= 10.0;
            let s = describe(&v).expect("finite");
            assert_eq!(s.outliers, vec![at], "{v:?}");
            assert!(s.mean > 9.4e9 * 1.1, "outliers stay in the mean");
            // Random noise: the 10x value is always among them (a chance cluster can make a
            // merely low run stand out too; that is the method, not a defect).
            let mut v: Vec<f64> = (0..n).map(|_| rng.around(9.4e9, 0.02)).collect();
            v[at] *= 10.0;
            assert!(describe(&v).expect("finite").outliers.contains(&at), "{v:?}");
        }
    }

    #[test]
    fn uniform_data_has_no_outliers() {
        let mut rng = Rng(42);
        for n in 1..200 {
            let v = spread_runs(&mut rng, n, 1.0, 0.5);
            assert!(describe(&v).expect("finite").outliers.is_empty(), "{v:?}");
        }
        // Random uniform samples: with a few values the MAD can be small by chance, so the
        // property is stated for n ≥ 30 (MAD ≈ 1/4 of the range, |z| ≤ 0.6745 · 2).
        for _ in 0..200 {
            let n = 30 + rng.below(100) as usize;
            let v: Vec<f64> = (0..n).map(|_| rng.unit()).collect();
            assert!(describe(&v).expect("finite").outliers.is_empty(), "{v:?}");
        }
    }

    #[test]
    fn outliers_when_most_values_are_equal() {
        // MAD is 0: the mean absolute deviation sets the scale.
        let s = describe(&[5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 100.0]).expect("finite");
        assert_eq!(s.outliers, vec![6]); // z = 95 / (95/7 · 1.2533) = 5.59
        let s = describe(&[5.0, 5.0, 5.0, 6.0]).expect("finite");
        assert!(s.outliers.is_empty()); // z = 1 / (0.25 · 1.2533) = 3.19
        let mut v = vec![5.0; 10];
        v.insert(3, 6.0);
        assert_eq!(describe(&v).expect("finite").outliers, vec![3]);
    }

    fn random_sample(rng: &mut Rng) -> Vec<f64> {
        let n = 1 + rng.below(30) as usize;
        let center = 10f64.powi(rng.below(12) as i32);
        (0..n).map(|_| rng.around(center, 0.3)).collect()
    }

    #[test]
    fn describe_ignores_order() {
        let mut rng = Rng(7);
        for _ in 0..300 {
            let v = random_sample(&mut rng);
            let s = describe(&v).expect("finite");
            let mut shuffled: Vec<(usize, f64)> = v.iter().copied().enumerate().collect();
            for i in (1..shuffled.len()).rev() {
                shuffled.swap(i, rng.below(i as u64 + 1) as usize);
            }
            let values: Vec<f64> = shuffled.iter().map(|(_, x)| *x).collect();
            let t = describe(&values).expect("finite");
            assert_eq!((s.n, s.min, s.max, s.median), (t.n, t.min, t.max, t.median));
            assert!(close(t.mean, s.mean, 1e-12));
            if let (Some(a), Some(b)) = (s.stddev, t.stddev) {
                assert!((a - b).abs() <= 1e-9 * s.mean.abs());
            }
            let mut moved: Vec<usize> = t.outliers.iter().map(|&i| shuffled[i].0).collect();
            moved.sort_unstable();
            assert_eq!(moved, s.outliers);
        }
    }

    #[test]
    fn ci_contains_the_mean_and_lies_within_reason() {
        let mut rng = Rng(99);
        for _ in 0..300 {
            let v = random_sample(&mut rng);
            let s = describe(&v).expect("finite");
            assert!(s.min <= s.median && s.median <= s.max);
            assert!(s.min <= s.mean && s.mean <= s.max);
            match (s.ci95, s.ci95_half_width) {
                (Some((lo, hi)), Some(h)) => {
                    assert!(lo <= s.mean && s.mean <= hi && h >= 0.0);
                    assert!(close(hi - lo, 2.0 * h, 1e-9));
                }
                (None, None) => assert_eq!(s.n, 1),
                other => panic!("interval and half-width disagree: {other:?}"),
            }
        }
    }

    #[test]
    fn scaling_the_values_scales_the_figures() {
        let mut rng = Rng(2024);
        for _ in 0..300 {
            let v = random_sample(&mut rng);
            let k = [0.001, 0.5, 3.0, 1e6][rng.below(4) as usize];
            let s = describe(&v).expect("finite");
            let scaled: Vec<f64> = v.iter().map(|x| x * k).collect();
            let t = describe(&scaled).expect("finite");
            for (a, b) in [(s.mean, t.mean), (s.min, t.min), (s.max, t.max), (s.median, t.median)] {
                assert!((b - a * k).abs() <= 1e-12 * (a * k).abs(), "{a} × {k} vs {b}");
            }
            if let (Some(a), Some(b)) = (s.ci95_half_width, t.ci95_half_width) {
                assert!((b - a * k).abs() <= 1e-9 * (a * k).abs().max(1e-300));
            }
            assert_eq!(s.cv.is_some(), t.cv.is_some());
            assert_eq!(s.outliers, t.outliers);
        }
    }
}
