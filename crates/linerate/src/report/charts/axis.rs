//! Value axes: round ticks (1, 2 or 5 times a power of ten) from zero to past the largest
//! value, as many as fit, or on a logarithmic axis (latencies that span decades) the 1-2-5 or
//! 1-10-100 ticks of the decades the values span; and the unit a throughput axis is read in.
//! Figures in charts keep three significant figures. Must not draw (`frame`, `rows` and
//! `lines` do).

/// A numeric axis from `lo` to `hi` with its ticks.
#[derive(Debug, Clone, PartialEq)]
pub struct Scale {
    /// Start.
    pub lo: f64,
    /// End (the last tick).
    pub hi: f64,
    /// Tick values, `lo` and `hi` included.
    pub ticks: Vec<f64>,
    /// Decimals of the tick labels.
    decimals: usize,
    /// Logarithmic: values are placed by their logarithm (`lo` > 0).
    log: bool,
}

impl Scale {
    /// Zero to past `max` with at most `most` steps (at least 1), each step 1, 2 or 5 × 10^k.
    pub fn zero_to(max: f64, most: usize) -> Scale {
        let max = if max.is_finite() && max > 0.0 { max } else { 1.0 };
        let most = most.max(1) as f64;
        let raw = max / most;
        let power = 10f64.powf(raw.log10().floor());
        let step = [1.0, 2.0, 5.0, 10.0]
            .iter()
            .map(|m| m * power)
            .find(|s| (max / s).ceil() <= most)
            .unwrap_or(10.0 * power);
        let steps = (max / step - 1e-9).ceil().max(1.0) as usize;
        Scale::stepped(0.0, step, steps)
    }

    /// `steps` steps of `step` from `lo`.
    pub fn stepped(lo: f64, step: f64, steps: usize) -> Scale {
        let ticks: Vec<f64> = (0..=steps).map(|i| lo + step * i as f64).collect();
        let decimals = (-(step.log10().floor())).max(0.0) as usize;
        Scale { lo, hi: lo + step * steps as f64, ticks, decimals, log: false }
    }

    /// A logarithmic axis over the decades `lo` to `hi` span (both > 0; a non-positive or
    /// missing bound is taken as a decade around the other), ticked at 1, 2 and 5 times each
    /// power of ten, or only at the powers when `length` leaves too little room for those
    /// labels (each `gap` apart at the least, measured by `label_size`).
    pub fn log(lo: f64, hi: f64, length: f64, gap: f64, label_size: impl Fn(&str) -> f64) -> Scale {
        let ok = |v: f64| v.is_finite() && v > 0.0;
        let (lo, hi) = match (ok(lo), ok(hi)) {
            (true, true) => (lo.min(hi), lo.max(hi)),
            (true, false) => (lo, lo * 10.0),
            (false, true) => (hi / 10.0, hi),
            (false, false) => (1.0, 10.0),
        };
        let first = lo.log10().floor() as i32;
        let last = (hi.log10().ceil() as i32).max(first + 1);
        let steps = |steps: &[f64]| -> Vec<f64> {
            (first..=last).flat_map(|p| steps.iter().map(move |m| m * 10f64.powi(p))).collect()
        };
        // The axis spans the 1-2-5 values just around the data, not whole empty decades.
        let all = steps(&[1.0, 2.0, 5.0]);
        let start = all.iter().copied().filter(|t| *t <= lo * (1.0 + 1e-9)).fold(all[0], f64::max);
        // At least one step long, so one value still has an axis to sit on.
        let end = all
            .iter()
            .copied()
            .find(|t| *t >= hi * (1.0 - 1e-9) && *t > start * (1.0 + 1e-9))
            .unwrap_or(10f64.powi(last + 1));
        let within = |ticks: Vec<f64>| -> Vec<f64> {
            let inside = |t: &f64| *t >= start * (1.0 - 1e-9) && *t <= end * (1.0 + 1e-9);
            ticks.into_iter().filter(inside).collect()
        };
        let mut s =
            Scale { lo: start, hi: end, ticks: within(all.clone()), decimals: 0, log: true };
        let fits = |s: &Scale| {
            s.ticks.windows(2).all(|w| {
                let room = s.at(w[1], 0.0, length) - s.at(w[0], 0.0, length);
                room >= (label_size(&s.label(w[0])) + label_size(&s.label(w[1]))) / 2.0 + gap
            })
        };
        if !fits(&s) {
            s.ticks = within(steps(&[1.0]));
        }
        s
    }

    /// The same ticks on an axis that ends at `max` itself (a time axis: no empty run-out
    /// past the end of the data); ticks beyond `max` are dropped.
    pub fn ending_at(mut self, max: f64) -> Scale {
        if max > self.lo {
            self.ticks.retain(|t| *t <= max * (1.0 + 1e-9));
            self.hi = max;
        }
        self
    }

    /// Where `v` lies between `from` (at `lo`) and `to` (at `hi`).
    pub fn at(&self, v: f64, from: f64, to: f64) -> f64 {
        if self.log {
            let (lo, hi) = (self.lo.log10(), self.hi.log10());
            let v = v.max(self.lo * 1e-3).log10();
            return if hi <= lo { from } else { from + (v - lo) / (hi - lo) * (to - from) };
        }
        let span = self.hi - self.lo;
        if span <= 0.0 { from } else { from + (v - self.lo) / span * (to - from) }
    }

    /// A tick's label.
    pub fn label(&self, v: f64) -> String {
        if self.log {
            let s = sig3(v);
            return if s.contains('.') {
                s.trim_end_matches('0').trim_end_matches('.').to_string()
            } else {
                s
            };
        }
        format!("{v:.*}", self.decimals)
    }

    /// The scale from zero to past `max` whose tick labels, each `gap` apart at the least,
    /// fit `length`; `label_size` measures a label along the axis.
    pub fn fitting(max: f64, length: f64, gap: f64, label_size: impl Fn(&str) -> f64) -> Scale {
        let mut most = 10;
        loop {
            let s = Scale::zero_to(max, most);
            let spacing = length / (s.ticks.len() - 1).max(1) as f64;
            let widest = s.ticks.iter().map(|t| label_size(&s.label(*t))).fold(0.0, f64::max);
            if widest + gap <= spacing || most == 1 {
                return s;
            }
            most -= 1;
        }
    }
}

impl Scale {
    /// [`Scale::fitting`] for a count: no step below 1, so every tick is a whole number, and
    /// at least half a step past `max`, so what is drawn at `max` stays inside the plot.
    pub fn whole(max: f64, length: f64, gap: f64, label_size: impl Fn(&str) -> f64) -> Scale {
        let max = max.max(1.0);
        let mut s = Scale::fitting(max, length, gap, label_size);
        if s.ticks.len() > 1 && s.ticks[1] - s.ticks[0] < 1.0 {
            s = Scale::stepped(0.0, 1.0, max.ceil() as usize);
        }
        let step = if s.ticks.len() > 1 { s.ticks[1] - s.ticks[0] } else { 1.0 };
        if s.hi - max < step / 2.0 {
            s.hi = max + step / 2.0;
        }
        s
    }
}

/// The unit a throughput axis is read in: the largest of Gbit/s, Mbit/s, kbit/s and bit/s
/// that its largest value reaches (so 984 kbit/s is not a row of zeros in Gbit/s).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateUnit {
    /// Bits per second per unit.
    pub per: f64,
    /// Its name.
    pub name: &'static str,
}

impl RateUnit {
    /// The unit for values up to `max` bits per second.
    pub fn for_max(max: f64) -> RateUnit {
        [(1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s")]
            .into_iter()
            .find(|(per, _)| max >= *per)
            .map_or(RateUnit { per: 1.0, name: "bit/s" }, |(per, name)| RateUnit { per, name })
    }

    /// `bps` in this unit.
    pub fn of(self, bps: f64) -> f64 {
        bps / self.per
    }

    /// `bps` as "12.3 Gbit/s", in the unit that suits it.
    pub fn show(bps: f64) -> String {
        let unit = RateUnit::for_max(bps);
        format!("{} {}", sig3(unit.of(bps)), unit.name)
    }
}

/// `v` with three significant figures and no exponent (a whole number keeps its digits):
/// 43.6, 0.951, 1235, 0.000984.
pub fn sig3(v: f64) -> String {
    if !v.is_finite() {
        return "n/a".into();
    }
    if v == 0.0 {
        return "0".into();
    }
    let digits = v.abs().log10().floor() as i32;
    let decimals = (2 - digits).max(0) as usize;
    let rounded = format!("{v:.decimals$}");
    // Rounding up may add a digit (9.996 → 10.00): one decimal fewer then.
    if decimals > 0
        && rounded.trim_start_matches('-').replace('.', "").trim_start_matches('0').len() > 3
    {
        return format!("{v:.*}", decimals - 1);
    }
    rounded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_reach_past_the_largest_value() {
        let s = Scale::zero_to(48.7, 6);
        assert_eq!(s.ticks, vec![0.0, 10.0, 20.0, 30.0, 40.0, 50.0]);
        let s = Scale::zero_to(1.0, 5);
        assert_eq!(s.hi, 1.0);
        assert_eq!(s.label(0.2), "0.2");
        let s = Scale::zero_to(0.0, 5);
        assert!(s.hi > 0.0, "an empty axis still has a length");
        let s = Scale::zero_to(0.023, 4);
        assert_eq!((s.hi, s.label(0.01)), (0.03, "0.01".to_string()));
    }

    #[test]
    fn a_time_axis_ends_with_its_data() {
        let s = Scale::zero_to(2.003, 5).ending_at(2.003);
        assert_eq!((s.hi, s.ticks.last().copied()), (2.003, Some(2.0)));
    }

    #[test]
    fn fewer_ticks_when_their_labels_would_touch() {
        let s = Scale::fitting(48.7, 100.0, 10.0, |l| 10.0 * l.len() as f64);
        let spacing = 100.0 / (s.ticks.len() - 1) as f64;
        assert!(spacing >= 30.0, "{s:?}");
    }

    #[test]
    fn a_count_axis_has_whole_ticks_and_room_past_its_largest_value() {
        let s = Scale::whole(3.0, 900.0, 16.0, |l| 8.0 * l.len() as f64);
        assert_eq!(s.ticks, vec![0.0, 1.0, 2.0, 3.0]);
        assert_eq!(s.hi, 3.5);
        let s = Scale::whole(16.0, 300.0, 16.0, |l| 8.0 * l.len() as f64);
        assert!(s.ticks.iter().all(|t| t.fract() == 0.0) && s.hi >= 16.0, "{s:?}");
    }

    #[test]
    fn a_log_axis_spans_whole_decades_with_1_2_5_ticks_where_they_fit() {
        let s = Scale::log(13.7, 5063.0, 800.0, 10.0, |l| 8.0 * l.len() as f64);
        assert_eq!((s.lo, s.hi), (10.0, 10_000.0));
        assert_eq!(s.ticks[..4], [10.0, 20.0, 50.0, 100.0]);
        assert_eq!(s.ticks.last(), Some(&10_000.0));
        assert_eq!(s.label(0.05), "0.05");
        assert!((s.at(100.0, 0.0, 300.0) - 100.0).abs() < 1e-9, "a decade is a third");
        let narrow = Scale::log(13.7, 5063.0, 100.0, 10.0, |l| 8.0 * l.len() as f64);
        assert_eq!(narrow.ticks, [10.0, 100.0, 1000.0, 10_000.0]);
        assert_eq!((narrow.lo, narrow.hi), (10.0, 10_000.0));
        let one = Scale::log(5.0, 5.0, 800.0, 10.0, |_| 1.0);
        assert_eq!((one.lo, one.hi), (5.0, 10.0), "one value still has an axis");
        let around = Scale::log(52.0, 2700.0, 800.0, 10.0, |l| 8.0 * l.len() as f64);
        assert_eq!((around.lo, around.hi), (50.0, 5000.0), "no empty decade: {around:?}");
        let none = Scale::log(0.0, f64::NAN, 800.0, 10.0, |_| 1.0);
        assert!(none.lo > 0.0 && none.hi > none.lo);
    }

    #[test]
    fn the_unit_follows_the_largest_value() {
        assert_eq!(RateUnit::for_max(43.6e9).name, "Gbit/s");
        assert_eq!(RateUnit::for_max(984e3).name, "kbit/s");
        assert_eq!(RateUnit::show(984_123.0), "984 kbit/s");
        assert_eq!(RateUnit::show(24.128e9), "24.1 Gbit/s");
    }

    #[test]
    fn three_significant_figures() {
        assert_eq!(sig3(43.628), "43.6");
        assert_eq!(sig3(0.9514), "0.951");
        assert_eq!(sig3(1234.6), "1235");
        assert_eq!(sig3(0.000984), "0.000984");
        assert_eq!(sig3(9.996), "10.0");
        assert_eq!(sig3(0.0), "0");
    }
}
