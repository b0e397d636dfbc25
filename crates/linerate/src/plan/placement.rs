//! Where a loopback test's two ends run, chosen by measurement on the host (`-A auto`, the
//! default), or as the user says (`-A pair`, `-A split`, `-A none`).
//!
//! On loopback both ends share one kernel, and where a stream's sender and receiver run
//! decides its throughput more than anything else. Which placement wins depends on the host,
//! not on a rule: on one instance of this project's 2-vCPU machine kind, one stream with both
//! ends on one CPU (pairing) moved 1.8–2.2 times the bytes of the scheduler's placement; on
//! another instance of the same kind (AMD EPYC, kernel 6.18) pairing cost 42 % against the two
//! ends on two CPUs (66.0 against 38.5 Gbit/s), and on a third it was 10 % behind (38.7
//! against 43.7; docs/PERFORMANCE.md, "Placement from evidence"). A wake-up of the other end
//! on another core is an inter-processor interrupt, costly on some hypervisors and cheap on
//! others; a byte written into one core's cache and read out of another's costs what that
//! host's caches cost. So linerate measures it.
//!
//! **The placements.** For stream `id` (from 1) and the pairing's CPU list `cpus` (the
//! client's allowed CPUs, starting at the one it runs on):
//! - `pair`: both ends on `cpus[(id - 1) % len]`;
//! - `split`: the server's end there, the client's end on the next CPU of the list, so every
//!   stream's ends are on two CPUs and the CPUs carry the same number of ends (for one stream
//!   on two CPUs this is iperf3's `-A 0,1`; for four it is not `-A 0,1`, which puts every
//!   sender on one CPU);
//! - `system`: nobody pinned, as iperf3 without `-A` (`-A none`).
//!
//! **The calibration** (`cmd/placement.rs` runs it): the first loopback TCP bulk test of a
//! host with `-A auto` runs [`ROUNDS`] interleaved rounds of a [`TRIAL`]-long test of each
//! placement against a server embedded in the process, with the test's shape ([`Shape`]: one
//! stream, or several), and [`choose`] takes the placement with the highest median. A
//! placement within [`MARGIN`] of the best is as good (the machines are shared and noisy), and
//! then the earlier of [`Placement::ALL`] is taken: pair first (half the CPU per byte where
//! it ties), then split, then the system's. The calibration is kept in the history as a group
//! of kind `placement` with the host it ran on ([`HostKey`]: CPU model, kernel, the CPUs the
//! process may use) and used by every later test of that shape on that host; a host whose key
//! differs (a new kernel, another CPU, a resized VM) is calibrated again. Every result names
//! the placement that ran and why (`placement` in the record: "split: calibrated on this
//! host on 2026-11-29, split 43.7, system 42.9, pair 38.7 Gbit/s").
//!
//! **By rule, not measured:** request/response (`--rr`) is paired (each transaction wakes the
//! other end; `plan/affinity.rs` has the figures, and a throughput trial would measure the
//! wrong thing), and a test that cannot be calibrated (no history to keep the result in:
//! `--no-store`, no home directory) is paired as before, and says so.

use serde::{Deserialize, Serialize};

pub use crate::record::{Decision, Placement};

/// How long each calibration trial runs.
pub const TRIAL: std::time::Duration = std::time::Duration::from_millis(300);
/// Interleaved rounds of the calibration (each runs every placement once).
pub const ROUNDS: usize = 3;
/// A placement whose median is within this share of the best one's counts as level with it.
pub const MARGIN: f64 = 0.05;
/// Most streams the several-stream calibration runs (more than 16 use a pool, never paired).
pub const MAX_TRIAL_STREAMS: u32 = 16;

/// What `-A` asked for, when it names a placement rather than CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Choice {
    /// Measure once per host and shape, then use the faster (the default).
    #[default]
    Auto,
    /// This placement (`-A pair`, `-A split`, `-A none`).
    Fixed(Placement),
}

impl Choice {
    /// Parses `auto`, `pair`, `split` and `none`; None for anything else (a CPU list).
    pub fn parse(word: &str) -> Option<Choice> {
        match word.trim() {
            "auto" => Some(Choice::Auto),
            "pair" => Some(Choice::Fixed(Placement::Pair)),
            "split" => Some(Choice::Fixed(Placement::Split)),
            "none" => Some(Choice::Fixed(Placement::System)),
            _ => None,
        }
    }
}

/// The shape of a test the calibration measures: placements rank differently for one stream
/// and for several sharing the CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    /// `-P 1`.
    OneStream,
    /// `-P 2` and more.
    Streams,
}

impl Shape {
    /// The shape of a test of `streams` streams.
    pub fn of(streams: u32) -> Shape {
        if streams <= 1 { Shape::OneStream } else { Shape::Streams }
    }

    /// How many streams the calibration of this shape runs on `cpus` CPUs: one, or two per
    /// CPU (every CPU carries two pairs' ends), at most [`MAX_TRIAL_STREAMS`].
    pub fn trial_streams(self, cpus: usize) -> u32 {
        match self {
            Shape::OneStream => 1,
            Shape::Streams => (2 * cpus.max(1) as u32).min(MAX_TRIAL_STREAMS),
        }
    }

    /// Words for it.
    pub fn words(self) -> &'static str {
        match self {
            Shape::OneStream => "one stream",
            Shape::Streams => "several streams",
        }
    }
}

/// What identifies a host for the calibration: a change in any of these redoes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostKey {
    /// The CPU model, as the kernel names it ("n/a" when it does not).
    pub cpu_model: String,
    /// The kernel release.
    pub kernel: String,
    /// The CPUs this process may run on.
    pub cpus: Vec<u32>,
}

/// One placement's trials: receiver throughput of each, bits per second.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trials {
    /// The placement.
    pub placement: Placement,
    /// One figure per round, in the order they ran; a failed trial is left out.
    pub bits_per_second: Vec<f64>,
}

impl Trials {
    /// The median of the trials (None: none completed).
    pub fn median(&self) -> Option<f64> {
        let mut v = self.bits_per_second.clone();
        v.sort_by(f64::total_cmp);
        (!v.is_empty()).then(|| {
            let n = v.len();
            if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
        })
    }
}

/// A calibration of one shape on one host: what was measured, and when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// The host it ran on.
    pub host: HostKey,
    /// The shape it measured.
    pub shape: Shape,
    /// Streams each trial ran.
    pub streams: u32,
    /// Each trial's length, milliseconds.
    pub trial_ms: u64,
    /// When it ran, milliseconds since the Unix epoch.
    pub at_unix_ms: u64,
    /// Every placement's trials.
    pub trials: Vec<Trials>,
}

/// Pairing by rule, where nothing was measured: `why` says why (module docs).
pub fn by_rule(why: &str) -> Decision {
    Decision { placement: Placement::Pair, why: format!("by rule: {why}") }
}

/// The placement a loopback test of `streams` streams runs with (request/response when
/// `rr`), for the user's `choice` and the calibrated decisions of `-A auto` (module docs).
pub fn decide(
    choice: Choice,
    calibrated: &[(Shape, Decision)],
    streams: u32,
    rr: bool,
) -> Decision {
    match choice {
        Choice::Fixed(p) => Decision {
            placement: p,
            why: format!("-A {}", if p == Placement::System { "none" } else { p.as_str() }),
        },
        Choice::Auto if rr => by_rule(
            "request/response, where each transaction wakes the other end and on one CPU no \
             wake-up crosses cores",
        ),
        Choice::Auto => calibrated
            .iter()
            .find(|(s, _)| *s == Shape::of(streams))
            .map(|(_, d)| d.clone())
            .unwrap_or_else(|| {
                by_rule("not calibrated (no calibration was looked up for this test)")
            }),
    }
}

/// The placement a calibration chose and why (module docs): the highest median, a placement
/// within [`MARGIN`] of it counting as level, ties to the earlier of [`Placement::ALL`].
/// None when no placement completed a trial.
pub fn choose(c: &Calibration) -> Option<Decision> {
    let medians: Vec<(Placement, f64)> =
        c.trials.iter().filter_map(|t| Some((t.placement, t.median()?))).collect();
    let best = medians
        .iter()
        .map(|(_, m)| *m)
        .fold(None, |b: Option<f64>, m| Some(b.map_or(m, |b| b.max(m))))?;
    let chosen = Placement::ALL
        .into_iter()
        .find(|p| medians.iter().any(|(q, m)| q == p && *m >= best * (1.0 - MARGIN)))?;
    let mut ranked = medians.clone();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
    let figures: Vec<String> =
        ranked.iter().map(|(p, m)| format!("{} {:.1}", p.as_str(), m / 1e9)).collect();
    let day = crate::units::utc(c.at_unix_ms);
    let day = day.get(..10).unwrap_or(&day);
    let level = if medians.iter().any(|(p, m)| *p != chosen && *m > best * (1.0 - MARGIN)) {
        format!(" (within {:.0} % counts as level; ties go to pair, then split)", MARGIN * 100.0)
    } else {
        String::new()
    };
    Some(Decision {
        placement: chosen,
        why: format!(
            "calibrated on this host on {day} ({}, {} rounds of {} ms): {} Gbit/s{level}",
            c.shape.words(),
            c.trials.iter().map(|t| t.bits_per_second.len()).max().unwrap_or(0),
            c.trial_ms,
            figures.join(", ")
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(kernel: &str) -> HostKey {
        HostKey { cpu_model: "AMD EPYC".into(), kernel: kernel.into(), cpus: vec![0, 1] }
    }

    fn calibration(figures: &[(Placement, &[f64])]) -> Calibration {
        Calibration {
            host: host("6.18"),
            shape: Shape::OneStream,
            streams: 1,
            trial_ms: 300,
            at_unix_ms: 1_795_000_000_000,
            trials: figures
                .iter()
                .map(|(p, g)| Trials {
                    placement: *p,
                    bits_per_second: g.iter().map(|x| x * 1e9).collect(),
                })
                .collect(),
        }
    }

    #[test]
    fn the_faster_placement_is_chosen_by_its_median() {
        // Made-up timings of the two kinds of host the module docs describe.
        let split_host = calibration(&[
            (Placement::Pair, &[38.0, 39.0, 12.0]),
            (Placement::Split, &[66.0, 20.0, 65.0]),
            (Placement::System, &[44.0, 43.0, 45.0]),
        ]);
        let d = choose(&split_host).expect("decision");
        assert_eq!(d.placement, Placement::Split);
        assert!(d.why.contains("split 65.0, system 44.0, pair 38.0 Gbit/s"), "{}", d.why);
        assert!(d.why.contains("one stream, 3 rounds of 300 ms"), "{}", d.why);
        let pair_host = calibration(&[
            (Placement::Pair, &[41.0, 42.0, 40.0]),
            (Placement::Split, &[22.0, 21.0, 23.0]),
            (Placement::System, &[25.0, 19.0, 24.0]),
        ]);
        assert_eq!(choose(&pair_host).map(|d| d.placement), Some(Placement::Pair));
        let system_host = calibration(&[
            (Placement::Pair, &[30.0]),
            (Placement::Split, &[31.0]),
            (Placement::System, &[40.0]),
        ]);
        assert_eq!(choose(&system_host).map(|d| d.placement), Some(Placement::System));
    }

    #[test]
    fn a_placement_within_the_margin_is_level_and_the_tie_goes_to_pairing() {
        let c = calibration(&[
            (Placement::Pair, &[40.0, 40.5, 39.5]),
            (Placement::Split, &[41.0, 41.5, 40.9]),
            (Placement::System, &[30.0, 31.0, 29.0]),
        ]);
        let d = choose(&c).expect("decision");
        assert_eq!(d.placement, Placement::Pair);
        assert!(d.why.contains("counts as level"), "{}", d.why);
        // Just outside the margin the faster one wins.
        let c = calibration(&[(Placement::Pair, &[40.0]), (Placement::Split, &[42.2])]);
        assert_eq!(choose(&c).map(|d| d.placement), Some(Placement::Split));
    }

    #[test]
    fn failed_trials_are_left_out_and_none_completed_decides_nothing() {
        let c = calibration(&[(Placement::Pair, &[]), (Placement::System, &[10.0])]);
        assert_eq!(choose(&c).map(|d| d.placement), Some(Placement::System));
        assert_eq!(choose(&calibration(&[(Placement::Pair, &[])])), None);
    }

    #[test]
    fn the_users_choice_stands_and_auto_takes_the_calibration_of_the_tests_shape() {
        let split = Decision { placement: Placement::Split, why: "calibrated".into() };
        let system = Decision { placement: Placement::System, why: "calibrated too".into() };
        let calibrated = [(Shape::OneStream, split.clone()), (Shape::Streams, system.clone())];
        assert_eq!(decide(Choice::Auto, &calibrated, 1, false), split);
        assert_eq!(decide(Choice::Auto, &calibrated, 8, false), system);
        let rr = decide(Choice::Auto, &calibrated, 1, true);
        assert_eq!(rr.placement, Placement::Pair);
        assert!(rr.why.starts_with("by rule: request/response"), "{}", rr.why);
        let none = decide(Choice::Fixed(Placement::System), &calibrated, 1, false);
        assert_eq!((none.placement, none.why.as_str()), (Placement::System, "-A none"));
        let pair = decide(Choice::Fixed(Placement::Pair), &calibrated, 1, false);
        assert_eq!((pair.placement, pair.why.as_str()), (Placement::Pair, "-A pair"));
        let unknown = decide(Choice::Auto, &[], 2, false);
        assert_eq!(unknown.placement, Placement::Pair);
        assert!(unknown.why.contains("not calibrated"), "{}", unknown.why);
    }

    #[test]
    fn shapes_and_words() {
        assert_eq!(Shape::of(1), Shape::OneStream);
        assert_eq!(Shape::of(0), Shape::OneStream);
        assert_eq!(Shape::of(2), Shape::Streams);
        assert_eq!(Shape::Streams.trial_streams(2), 4);
        assert_eq!(Shape::Streams.trial_streams(64), MAX_TRIAL_STREAMS);
        assert_eq!(Choice::parse("none"), Some(Choice::Fixed(Placement::System)));
        assert_eq!(Choice::parse(" split"), Some(Choice::Fixed(Placement::Split)));
        assert_eq!(Choice::parse("auto"), Some(Choice::Auto));
        assert_eq!(Choice::parse("0,1"), None);
    }
}
