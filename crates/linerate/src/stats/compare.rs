//! Compare two samples of the same figure (`linerate compare A B`: before and after tuning, two
//! kernels, two NICs): relative change of the means and Welch's two-sample t-test, which does
//! not assume equal variances (the Welch–Satterthwaite degrees of freedom), as hyperfine's
//! `welch_ttest.py` does. The verdict is in plain words and never claims more than the data
//! allow: too few runs are called too few, and identical runs are called untestable rather
//! than "p = 0".
//!
//! Also the Student t distribution function, via the regularized incomplete beta function
//! evaluated with the modified Lentz continued fraction (Numerical Recipes §6.4), with
//! log-gamma from the Stirling series and a cancellation-free B(ν/2, ½) for large ν; from
//! ν = 10⁶ on, the normal distribution with its 1/ν correction. Checked in the tests against
//! closed forms (ν = 1..4, to 1e-12), mpmath at 40–50 digits (non-integer and large ν, to
//! 1e-12), the t table, and R's Welch test output.
//!
//! Pure functions: no I/O, no clock. Must not print or decide what to run next; it only
//! judges the numbers it is given.

use serde::Serialize;

use crate::stats::sample::describe;

/// The outcome of comparing sample A (the reference) with sample B.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// Values in A.
    pub n_a: usize,
    /// Values in B.
    pub n_b: usize,
    /// Mean of A; NaN when A is empty or holds a non-finite value.
    pub mean_a: f64,
    /// Mean of B; NaN when B is empty or holds a non-finite value.
    pub mean_b: f64,
    /// (mean B − mean A) / |mean A| × 100; None when A's mean is 0 or unknown.
    pub change_percent: Option<f64>,
    /// `welch_t` when a test was run, `none` when the data cannot be tested.
    pub test: &'static str,
    /// Welch's t, (mean B − mean A) / standard error: positive when B is higher.
    pub t: Option<f64>,
    /// Welch–Satterthwaite degrees of freedom (not an integer in general).
    pub df: Option<f64>,
    /// Two-sided p-value of the t-test.
    pub p_value: Option<f64>,
    /// The means differ beyond chance: `p_value < alpha`. Without a test it is true only when
    /// both sides have at least two runs that are all identical within the side and the two
    /// sides differ (a certain difference); never for fewer than two runs on a side.
    pub significant: bool,
    /// The finding in plain words.
    pub verdict: String,
}

/// Compare B against A at significance level `alpha` (0.05 for 95 %). Never panics: empty,
/// non-finite or too-short samples give `test: "none"` and a verdict that says why.
pub fn compare(a: &[f64], b: &[f64], alpha: f64) -> Comparison {
    let (sa, sb) = (describe(a), describe(b));
    let mut c = Comparison {
        n_a: a.len(),
        n_b: b.len(),
        mean_a: sa.as_ref().map_or(f64::NAN, |s| s.mean),
        mean_b: sb.as_ref().map_or(f64::NAN, |s| s.mean),
        change_percent: None,
        test: "none",
        t: None,
        df: None,
        p_value: None,
        significant: false,
        verdict: String::new(),
    };
    let a_usable = sa.is_some();
    let (Some(sa), Some(sb)) = (sa, sb) else {
        let (side, values) = if a_usable { ("B", b) } else { ("A", a) };
        let why = if values.is_empty() {
            "has no runs"
        } else {
            "holds a value that is not a finite number, or too large to summarise"
        };
        c.verdict = format!("cannot compare: {side} {why}");
        return c;
    };
    if c.mean_a != 0.0 {
        c.change_percent = Some((c.mean_b - c.mean_a) / c.mean_a.abs() * 100.0);
    }
    let (va, vb) = match (sa.stddev, sb.stddev) {
        (Some(x), Some(y)) => (x * x, y * y),
        _ => {
            let n = format!("n = {} vs {}", c.n_a, c.n_b);
            c.verdict = format!("too few runs to test ({n}): {}", change_words(&c, true));
            return c;
        }
    };
    match welch(&c, va, vb) {
        Some((t, df, p)) => {
            (c.test, c.t, c.df, c.p_value) = ("welch_t", Some(t), Some(df), Some(p));
            c.significant = p < alpha;
            c.verdict = tested_verdict(&c, t, p);
        }
        None if va == 0.0 && vb == 0.0 => {
            c.significant = c.mean_a != c.mean_b;
            c.verdict = untestable_verdict(&c);
        }
        None => {
            let change = change_words(&c, true);
            c.verdict = format!("cannot test: the values are too large to compute with ({change})");
        }
    }
    c
}

/// Welch's t, its degrees of freedom and the two-sided p-value; None when both variances are
/// zero or the numbers overflow.
fn welch(c: &Comparison, var_a: f64, var_b: f64) -> Option<(f64, f64, f64)> {
    let (na, nb) = (c.n_a as f64, c.n_b as f64);
    let (qa, qb) = (var_a / na, var_b / nb);
    let se2 = qa + qb;
    if !(se2 > 0.0 && se2.is_finite()) {
        return None;
    }
    let t = (c.mean_b - c.mean_a) / se2.sqrt();
    let df = se2 * se2 / (qa * qa / (na - 1.0) + qb * qb / (nb - 1.0));
    let p = (2.0 * student_t_cdf(-t.abs(), df)).min(1.0);
    (t.is_finite() && df.is_finite() && p.is_finite()).then_some((t, df, p))
}

fn tested_verdict(c: &Comparison, t: f64, p: f64) -> String {
    let n = few_runs(c).map(|n| format!(", {n}")).unwrap_or_default();
    if c.significant {
        let change = change_words(c, true);
        format!("{change} (Welch t = {}, {}{n}): significant", sig(t, 3), p_words(p))
    } else {
        let change = change_words(c, false);
        format!("no significant difference ({}{n}; {change})", p_words(p))
    }
}

fn untestable_verdict(c: &Comparison) -> String {
    let n = few_runs(c).map(|n| format!(" ({n})")).unwrap_or_default();
    let (a, b) = (sig(c.mean_a, 6), sig(c.mean_b, 6));
    if c.mean_a == c.mean_b {
        format!("no difference: every run of A and of B gave {a}{n}")
    } else {
        format!(
            "every run gave {a} vs {b}: the difference is certain within these runs but its size \
             cannot be tested ({}{})",
            change_words(c, true),
            few_runs(c).map(|n| format!("; {n}")).unwrap_or_default()
        )
    }
}

/// "n = 2 vs 5" when a side has fewer than three runs: such a test has little power.
fn few_runs(c: &Comparison) -> Option<String> {
    (c.n_a.min(c.n_b) < 3).then(|| format!("n = {} vs {}", c.n_a, c.n_b))
}

/// "B is 4.2 % higher than A" (`than`) or "B is 4.2 % higher".
fn change_words(c: &Comparison, than: bool) -> String {
    let than_a = if than { " than A" } else { "" };
    if c.mean_b == c.mean_a {
        return "B equals A".to_string();
    }
    let dir = if c.mean_b > c.mean_a { "higher" } else { "lower" };
    match c.change_percent {
        Some(pct) => {
            let mag = pct.abs();
            let mag = if mag >= 0.1 { format!("{mag:.1}") } else { sig(mag, 2) };
            format!("B is {mag} % {dir}{than_a}")
        }
        None => format!("B is {dir}{than_a} (A's mean is 0, so no percentage)"),
    }
}

fn p_words(p: f64) -> String {
    if p < 1e-4 { "p < 0.0001".to_string() } else { format!("p = {}", sig(p, 3)) }
}

/// `x` to `digits` significant digits, without trailing zeros.
fn sig(x: f64, digits: i32) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let mag = x.abs().log10().floor() as i32;
    if !(-5..15).contains(&mag) {
        return format!("{x:.*e}", (digits - 1).max(0) as usize);
    }
    let s = format!("{x:.*}", (digits - 1 - mag).max(0) as usize);
    if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s }
}

// ---- the Student t distribution -------------------------------------------------------------

/// Relative tolerance of the continued fractions and series.
const EPS: f64 = 1e-15;
/// Lentz's guard against division by zero.
const TINY: f64 = 1e-300;
/// Iteration cap; the fractions need O(√ν) steps at worst, far fewer in practice.
const MAX_ITER: usize = 1_000_000;
/// From here on the t distribution is the normal one plus a 1/ν correction (remainder below
/// 3e-13, measured against mpmath). Beyond it the beta route loses digits: with x = ν/(ν+t²)
/// near 1 the continued fraction cancels terms close to −1, an error that grows with ν.
const NORMAL_DF: f64 = 1e6;
/// ln Γ(½) = ½ ln π.
const LN_GAMMA_HALF: f64 = 0.572_364_942_924_700_1;

/// P(T ≤ t) for Student's t distribution with `df` degrees of freedom (any real df > 0;
/// infinity gives the normal distribution). Accurate to 1e-10 absolute (1e-12 in the tests,
/// typically 1e-15). Tails keep relative accuracy (1e-12 at p ≈ 1e-75 for ν = 1000), so small
/// p-values are not rounding noise; it weakens for ν ≥ 1e5. NaN for NaN arguments or df ≤ 0.
pub fn student_t_cdf(t: f64, df: f64) -> f64 {
    if t.is_nan() || df.is_nan() || df <= 0.0 {
        return f64::NAN;
    }
    if t == 0.0 {
        return 0.5;
    }
    let upper = if df >= NORMAL_DF { t_upper_normal(t.abs(), df) } else { t_upper(t.abs(), df) };
    if t > 0.0 { 1.0 - upper } else { upper }
}

/// P(T > t) for t > 0 and ν ≥ [`NORMAL_DF`]: the normal tail plus the first term of its
/// expansion in 1/ν, φ(t)(t³ + t)/(4ν); what is left is O(1/ν²), below 3e-13 at ν = 1e6.
fn t_upper_normal(t: f64, df: f64) -> f64 {
    let density = (-t * t / 2.0).exp() / (2.0 * std::f64::consts::PI).sqrt();
    let heavier = if density > 0.0 { density * (t * t * t + t) / (4.0 * df) } else { 0.0 };
    normal_upper(t) + heavier
}

/// P(T > t) for t > 0: ½ I_x(ν/2, ½) with x = ν / (ν + t²).
fn t_upper(t: f64, df: f64) -> f64 {
    let s = t / df.sqrt();
    let q = s * s; // t²/ν; 1/(1+q) and 1/(1+1/q) stay exact at q = 0 and q = ∞
    let (x, y) = (1.0 / (1.0 + q), 1.0 / (1.0 + 1.0 / q));
    0.5 * inc_beta(df / 2.0, 0.5, x, y, ln_beta_half(df / 2.0))
}

/// The regularized incomplete beta I_x(a, b), given y = 1 − x (computed by the caller without
/// cancellation) and ln B(a, b).
fn inc_beta(a: f64, b: f64, x: f64, y: f64, ln_beta: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if y <= 0.0 {
        return 1.0;
    }
    let ln = |u: f64, one_minus_u: f64| if u > 0.5 { (-one_minus_u).ln_1p() } else { u.ln() };
    let front = (a * ln(x, y) + b * ln(y, x) - ln_beta).exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_fraction(a, b, x) / a
    } else {
        1.0 - front * beta_fraction(b, a, y) / b
    }
}

/// The continued fraction for I_x(a, b) by the modified Lentz method (Numerical Recipes
/// `betacf`); converges quickly for x < (a + 1) / (a + b + 2).
fn beta_fraction(a: f64, b: f64, x: f64) -> f64 {
    let guard = |v: f64| if v.abs() < TINY { TINY } else { v };
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 / guard(1.0 - qab * x / qap);
    let mut h = d;
    for m in 1..=MAX_ITER {
        let (m, m2) = (m as f64, 2.0 * m as f64);
        let even = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 / guard(1.0 + even * d);
        c = guard(1.0 + even / c);
        h *= d * c;
        let odd = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 / guard(1.0 + odd * d);
        c = guard(1.0 + odd / c);
        let step = d * c;
        h *= step;
        if (step - 1.0).abs() < EPS {
            break;
        }
    }
    h
}

/// ln B(a, ½). For a ≥ 10 from the difference of Stirling series, so that large a (large df)
/// does not subtract two huge log-gammas.
fn ln_beta_half(a: f64) -> f64 {
    if a < 10.0 {
        return ln_gamma(a) + LN_GAMMA_HALF - ln_gamma(a + 0.5);
    }
    // ln Γ(a + ½) − ln Γ(a) = a·ln(1 + 1/(2a)) + ½ ln a − ½ + S(a + ½) − S(a)
    let ratio =
        a * (0.5 / a).ln_1p() + 0.5 * a.ln() - 0.5 + stirling_tail(a + 0.5) - stirling_tail(a);
    LN_GAMMA_HALF - ratio
}

/// ln Γ(z) for z > 0: shifted up to z ≥ 10, then Stirling's series (error < 1e-15 there).
fn ln_gamma(z: f64) -> f64 {
    let (mut z, mut shift) = (z, 0.0);
    while z < 10.0 {
        shift -= z.ln();
        z += 1.0;
    }
    (z - 0.5) * z.ln() - z + 0.5 * (2.0 * std::f64::consts::PI).ln() + stirling_tail(z) + shift
}

/// Σ B₂ₖ / (2k(2k−1) z^(2k−1)) for k = 1..7: the correction terms of Stirling's series.
fn stirling_tail(z: f64) -> f64 {
    const C: [f64; 7] = [
        1.0 / 12.0,
        -1.0 / 360.0,
        1.0 / 1260.0,
        -1.0 / 1680.0,
        1.0 / 1188.0,
        -691.0 / 360_360.0,
        1.0 / 156.0,
    ];
    let w = 1.0 / (z * z);
    C.iter().rev().fold(0.0, |acc, c| acc * w + c) / z
}

/// P(Z > z) for the standard normal, z ≥ 0: ½ Q(½, z²/2), the regularized upper incomplete
/// gamma function (Numerical Recipes `gser` / `gcf`).
pub(crate) fn normal_upper(z: f64) -> f64 {
    let x = z * z / 2.0;
    if x == 0.0 {
        return 0.5;
    }
    let a = 0.5;
    let front = (-x + a * x.ln() - LN_GAMMA_HALF).exp();
    if x < a + 1.0 {
        let (mut term, mut sum, mut ap) = (1.0 / a, 1.0 / a, a);
        for _ in 0..MAX_ITER {
            ap += 1.0;
            term *= x / ap;
            sum += term;
            if term.abs() < sum.abs() * EPS {
                break;
            }
        }
        0.5 * (1.0 - sum * front)
    } else {
        let guard = |v: f64| if v.abs() < TINY { TINY } else { v };
        let mut b = x + 1.0 - a;
        let (mut c, mut d) = (1.0 / TINY, 1.0 / b);
        let mut h = d;
        for i in 1..MAX_ITER {
            let an = -(i as f64) * (i as f64 - a);
            b += 2.0;
            d = 1.0 / guard(an * d + b);
            c = guard(b + an / c);
            let step = d * c;
            h *= step;
            if (step - 1.0).abs() < EPS {
                break;
            }
        }
        0.5 * front * h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::sample::tests::Rng;
    use std::f64::consts::PI;

    fn near(got: f64, want: f64, tol: f64) {
        assert!((got - want).abs() <= tol, "got {got}, want {want} (±{tol})");
    }

    /// Closed forms of the t distribution function for ν = 1..4.
    fn closed_form(t: f64, df: u32) -> f64 {
        match df {
            1 => 0.5 + t.atan() / PI,
            2 => 0.5 + t / (2.0 * (2.0 + t * t).sqrt()),
            3 => {
                let u = t / 3f64.sqrt();
                0.5 + (u / (1.0 + u * u) + u.atan()) / PI
            }
            _ => {
                let x = t * t / 4.0;
                0.5 + 0.375 * t / (1.0 + x).sqrt() * (1.0 - t * t / (12.0 * (1.0 + x)))
            }
        }
    }

    #[test]
    fn t_cdf_matches_closed_forms() {
        let mut rng = Rng(11);
        for _ in 0..2000 {
            let t = (rng.unit() - 0.5) * 10f64.powf(rng.unit() * 6.0 - 2.0);
            for df in 1..=4 {
                near(student_t_cdf(t, f64::from(df)), closed_form(t, df), 1e-12);
            }
        }
        // Far lower tail, relative: for ν = 1, P(T < −k) = atan(1/k)/π.
        for k in [1e2, 1e5, 1e10, 1e100] {
            let (got, want) = (student_t_cdf(-k, 1.0), (1.0 / k).atan() / PI);
            assert!((got / want - 1.0).abs() < 1e-12, "t = -{k}: {got} vs {want}");
        }
    }

    #[test]
    fn t_cdf_known_values_and_symmetry() {
        near(student_t_cdf(2.228, 10.0), 0.975, 1e-4);
        near(student_t_cdf(2.228_138_852, 10.0), 0.975, 1e-10);
        near(student_t_cdf(1.812_461_123, 10.0), 0.95, 1e-10);
        near(student_t_cdf(3.169_272_673, 10.0), 0.995, 1e-10);
        near(student_t_cdf(-2.527_977_003, 20.0), 0.01, 1e-10);
        // Non-integer df as Welch produces; references from mpmath's betainc at 40 digits.
        near(student_t_cdf(1.0, 1.5), 0.774_432_316_361_644_8, 1e-14);
        near(student_t_cdf(2.5, 7.3), 0.980_174_882_667_199_8, 1e-14);
        near(student_t_cdf(-4.0, 2.7), 0.016_993_079_862_088_39, 1e-14);
        let tail = student_t_cdf(-30.0, 17.776);
        assert!((tail / 5.615_958_438_560_879e-17 - 1.0).abs() < 1e-12, "{tail}");
        let mut rng = Rng(5);
        for _ in 0..2000 {
            let df = 10f64.powf(rng.unit() * 8.0 - 1.0);
            let t = (rng.unit() - 0.5) * 20.0;
            assert_eq!(student_t_cdf(0.0, df), 0.5);
            near(student_t_cdf(-t, df), 1.0 - student_t_cdf(t, df), 1e-14);
            assert!(student_t_cdf(t + 0.01, df) >= student_t_cdf(t, df), "t {t} df {df}");
        }
        assert_eq!(student_t_cdf(f64::INFINITY, 3.0), 1.0);
        assert_eq!(student_t_cdf(f64::NEG_INFINITY, 3.0), 0.0);
        assert!(student_t_cdf(f64::NAN, 3.0).is_nan() && student_t_cdf(1.0, 0.0).is_nan());
    }

    #[test]
    fn t_cdf_tends_to_the_normal() {
        for df in [1e13, 1e15, f64::INFINITY] {
            near(student_t_cdf(1.959_963_984_540_054, df), 0.975, 1e-12);
            near(student_t_cdf(1.0, df), 0.841_344_746_068_542_9, 1e-12);
            near(student_t_cdf(-3.0, df), 0.001_349_898_031_630_095, 1e-14);
            near(student_t_cdf(0.3, df), 0.617_911_422_188_952_8, 1e-12);
        }
        // Large df on both sides of the switch, against mpmath at 50 digits.
        near(student_t_cdf(-1.96, 1e5), 0.024_999_281_597_150_82, 1e-12);
        near(student_t_cdf(-3.0, 1e6), 0.001_349_931_270_710_898_5, 1e-12);
        near(student_t_cdf(-3.0, 9.99e6), 0.001_349_901_358_845_798_5, 1e-12);
        near(student_t_cdf(-1.96, 1e9), 0.024_997_895_286_864_8, 1e-12);
        let tail = student_t_cdf(-20.0, 1000.0);
        assert!((tail / 2.031_144_249_762_385_7e-75 - 1.0).abs() < 1e-12, "{tail}");
        // No step where the normal takes over, and the large-ν beta path stays exact.
        for t in [0.5, 1.0, 1.96, 3.0, 6.0] {
            near(student_t_cdf(t, NORMAL_DF * 0.999_999), student_t_cdf(t, NORMAL_DF), 5e-12);
            let gap = student_t_cdf(t, 1e5) - student_t_cdf(t, f64::INFINITY);
            let phi = (-t * t / 2.0).exp() / (2.0 * PI).sqrt();
            near(gap, -phi * (t * t * t + t) / 4e5, 5e-11); // first-order expansion in 1/ν
        }
    }

    #[test]
    fn welch_worked_examples() {
        // R: t.test(extra ~ group, data = sleep): t = -1.8608, df = 17.776, p-value = 0.07939.
        let g1 = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0];
        let g2 = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4];
        let c = compare(&g2, &g1, 0.05); // t is B − A: A = group 2 gives R's sign
        near(c.t.expect("tested"), -1.8608, 5e-5);
        near(c.df.expect("tested"), 17.776, 5e-4);
        near(c.p_value.expect("tested"), 0.07939, 5e-6);
        assert!(!c.significant && c.test == "welch_t");
        // R: t.test(ts1, ts2) with ts1 = c(11,9,10,11,10,12,9,11,12,9),
        // ts2 = c(11,13,10,13,12,9,11,12,12,11): t = -1.8325, df = 17.9, p-value = 0.08356.
        let ts1 = [11.0, 9.0, 10.0, 11.0, 10.0, 12.0, 9.0, 11.0, 12.0, 9.0];
        let ts2 = [11.0, 13.0, 10.0, 13.0, 12.0, 9.0, 11.0, 12.0, 12.0, 11.0];
        let c = compare(&ts2, &ts1, 0.05);
        near(c.t.expect("tested"), -1.8325, 5e-5);
        near(c.df.expect("tested"), 17.9, 5e-3);
        near(c.p_value.expect("tested"), 0.08356, 5e-6);
        // The same two examples to 1e-12 against mpmath at 40 digits.
        let c = compare(&g2, &g1, 0.05);
        near(c.df.expect("tested"), 17.776_473_516_178_49, 1e-10);
        near(c.p_value.expect("tested"), 0.079_394_140_187_358_14, 1e-12);
        near(compare(&ts2, &ts1, 0.05).p_value.expect("tested"), 0.083_559_791_619_223_3, 1e-12);
    }

    #[test]
    fn verdicts_in_plain_words() {
        let a = [100.0, 101.0, 99.0, 100.5, 99.5];
        let b = [148.0, 149.0, 147.5, 148.5, 148.2];
        let c = compare(&a, &b, 0.05);
        assert_eq!(c.change_percent.map(|p| format!("{p:.1}")).as_deref(), Some("48.2"));
        assert!(c.verdict.starts_with("B is 48.2 % higher than A (Welch t = "), "{}", c.verdict);
        assert!(c.verdict.contains("p < 0.0001): significant"), "{}", c.verdict);

        let c = compare(&[10.0, 12.0, 11.0, 9.0], &[10.5, 11.5, 9.5, 10.8], 0.05);
        assert!(!c.significant);
        let want = format!(
            "no significant difference (p = {}; B is 0.7 % higher)",
            sig(c.p_value.expect("tested"), 3)
        );
        assert_eq!(c.verdict, want);

        let c = compare(&[10.0, 12.0], &[11.0, 13.0, 12.0], 0.05);
        assert!(c.verdict.contains(", n = 2 vs 3;"), "{}", c.verdict);

        let c = compare(&[10.0], &[11.0, 12.0], 0.05);
        assert_eq!((c.test, c.p_value, c.significant), ("none", None, false));
        assert_eq!(c.verdict, "too few runs to test (n = 1 vs 2): B is 15.0 % higher than A");
        let c = compare(&[7.0], &[7.0], 0.05);
        assert_eq!(c.verdict, "too few runs to test (n = 1 vs 1): B equals A");
    }

    #[test]
    fn identical_runs_are_untestable_not_infinitely_significant() {
        let c = compare(&[100.0; 4], &[110.0; 5], 0.05);
        assert_eq!((c.test, c.t, c.p_value, c.significant), ("none", None, None, true));
        assert_eq!(
            c.verdict,
            "every run gave 100 vs 110: the difference is certain within these runs but its size \
             cannot be tested (B is 10.0 % higher than A)"
        );
        let c = compare(&[5.0; 3], &[5.0; 2], 0.05);
        assert!(!c.significant);
        assert_eq!(c.verdict, "no difference: every run of A and of B gave 5 (n = 3 vs 2)");
        // One side constant, the other not: an ordinary Welch test with df = n_b − 1.
        let c = compare(&[100.0; 4], &[101.0, 103.0, 102.0], 0.05);
        assert_eq!(c.test, "welch_t");
        near(c.df.expect("tested"), 2.0, 1e-12);
    }

    #[test]
    fn unusable_and_zero_mean_samples() {
        let c = compare(&[], &[1.0, 2.0], 0.05);
        assert!(c.mean_a.is_nan() && c.test == "none" && !c.significant);
        assert_eq!(c.verdict, "cannot compare: A has no runs");
        let c = compare(&[1.0, 2.0], &[1.0, f64::NAN], 0.05);
        assert!(c.verdict.starts_with("cannot compare: B holds a value that is not a finite"));
        let c = compare(&[-1.0, 1.0, 0.0], &[5.0, 6.0, 7.0], 0.05);
        assert_eq!(c.change_percent, None);
        assert!(c.verdict.starts_with("B is higher than A (A's mean is 0, so no percentage)"));
        assert!(serde_json::to_string(&c).expect("serializes").contains("\"test\":\"welch_t\""));
    }

    #[test]
    fn a_sample_never_differs_from_itself() {
        let mut rng = Rng(3);
        for _ in 0..500 {
            let n = 1 + rng.below(20) as usize;
            let center = 10f64.powi(rng.below(10) as i32);
            let spread = rng.unit();
            let v: Vec<f64> = (0..n).map(|_| rng.around(center, spread)).collect();
            let alpha = rng.unit();
            let c = compare(&v, &v, alpha);
            assert!(!c.significant, "{v:?}: {}", c.verdict);
            if let Some(p) = c.p_value {
                assert_eq!((p, c.t), (1.0, Some(0.0)));
            }
        }
    }

    #[test]
    fn clearly_separated_samples_are_significant() {
        let mut rng = Rng(0x5eed);
        for _ in 0..500 {
            let base = 10f64.powi(rng.below(10) as i32) * (1.0 + rng.unit());
            let a: Vec<f64> = (0..5).map(|_| rng.around(base, 0.01)).collect();
            let b: Vec<f64> = (0..5).map(|_| rng.around(base * 1.1, 0.01)).collect();
            let c = compare(&a, &b, 0.05);
            assert!(c.significant && c.t.expect("tested") > 0.0, "{a:?} {b:?}: {}", c.verdict);
            assert!(c.p_value.expect("tested") < 0.001);
            assert!(c.verdict.contains("higher than A"), "{}", c.verdict);
            let back = compare(&b, &a, 0.05);
            assert!(back.significant && back.verdict.contains("lower than A"));
            near(back.p_value.expect("tested"), c.p_value.expect("tested"), 1e-15);
        }
    }

    #[test]
    fn formats_significant_digits() {
        assert_eq!(sig(0.41, 3), "0.41");
        assert_eq!(sig(0.000_4, 3), "0.0004");
        assert_eq!(sig(12.345, 3), "12.3");
        assert_eq!(sig(-2.456, 3), "-2.46");
        assert_eq!(sig(9.41e9, 6), "9410000000");
        assert_eq!(sig(1e20, 3), "1.00e20");
        assert_eq!(p_words(0.000_04), "p < 0.0001");
    }
}
