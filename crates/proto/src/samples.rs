//! Interval samples kept in bounded memory, whatever a test's length.
//!
//! Each end samples every stream at every interval tick. Kept as they come, samples grow
//! with duration × streams ÷ interval: a 128-stream test at 1 ms intervals would grow by
//! tens of MB a second. A [`SampleLog`] keeps at most its capacity: when the test's logs are
//! full, the owner halves all of them at once ([`SampleLog::halve`] merges samples 0+1, 2+3,
//! …), and from then on every stored sample covers twice as many ticks, so the logs of one
//! test stay aligned sample for sample and memory stays O(capacity) for any duration.
//!
//! Merging keeps every count exact (bytes, datagrams, CPU time add up; start and end span
//! both) and takes point-in-time readings (TCP's view, jitter) from the later sample. A sample
//! in the omitted warm-up is never merged with one after it. This module keeps no clock and
//! does no I/O.

use crate::results::{CostSample, CpuTimes, IntervalSample, ProcessCpu, SystemCpu};

/// Interval samples one end keeps per test, over all its streams and its cost meter; beyond
/// it, adjacent samples are merged (see [`samples_per_stream`]). About 2 MiB in memory and,
/// with TCP's view in every sample, under 5 MB of results JSON (the frame cap is 16 MiB);
/// enough for one stream sampled every second for over an hour, or 128 for a minute, unmerged.
pub const MAX_TEST_SAMPLES: usize = 8192;
/// Samples each stream keeps at least, however many streams a test has.
pub const MIN_STREAM_SAMPLES: usize = 2;

/// The capacity of each stream's log, and of the cost log beside them, in a test with
/// `connections` streams.
pub fn samples_per_stream(connections: u32) -> usize {
    (MAX_TEST_SAMPLES / (connections as usize + 1)).max(MIN_STREAM_SAMPLES)
}

/// A sample that can absorb the one that follows it in time.
pub trait Mergeable {
    /// Extends `self` by `later` (which starts where `self` ends). Returns false, changing
    /// nothing, when the two must stay apart (one is in the omitted warm-up, the other not).
    fn merge(&mut self, later: &Self) -> bool;
}

impl Mergeable for IntervalSample {
    fn merge(&mut self, later: &Self) -> bool {
        if self.omitted != later.omitted {
            return false;
        }
        self.end_us = later.end_us;
        self.bytes = self.bytes.saturating_add(later.bytes);
        self.tcp = later.tcp.or(self.tcp);
        self.udp = match (self.udp, later.udp) {
            (Some(mut a), Some(b)) => {
                a.datagrams = a.datagrams.saturating_add(b.datagrams);
                a.lost = a.lost.saturating_add(b.lost);
                a.out_of_order = a.out_of_order.saturating_add(b.out_of_order);
                a.jitter_ns = b.jitter_ns;
                Some(a)
            }
            (a, b) => b.or(a),
        };
        self.rr = match (self.rr, later.rr) {
            (Some(mut a), Some(b)) => {
                a.merge(&b);
                Some(a)
            }
            (a, b) => b.or(a),
        };
        true
    }
}

impl Mergeable for CostSample {
    fn merge(&mut self, later: &Self) -> bool {
        self.end_us = later.end_us;
        self.process = match (self.process, later.process) {
            (Some(a), Some(b)) => Some(ProcessCpu {
                user_us: a.user_us.saturating_add(b.user_us),
                system_us: a.system_us.saturating_add(b.system_us),
            }),
            _ => None,
        };
        self.system = match (self.system.take(), &later.system) {
            (Some(a), Some(b)) => Some(merge_system(a, b)),
            _ => None,
        };
        true
    }
}

/// Whole-machine CPU over both spans. The busiest CPU is the busier half's; its times cover
/// both halves when it was the busiest in both, else only its own half (a lower bound).
fn merge_system(a: SystemCpu, b: &SystemCpu) -> SystemCpu {
    let all = plus(&a.all, &b.all);
    let (busiest_cpu, busiest) = if a.busiest_cpu == b.busiest_cpu {
        (a.busiest_cpu, plus(&a.busiest, &b.busiest))
    } else if b.busiest.busy_us() > a.busiest.busy_us() {
        (b.busiest_cpu, b.busiest)
    } else {
        (a.busiest_cpu, a.busiest)
    };
    SystemCpu { cpus: a.cpus.max(b.cpus), all, busiest_cpu, busiest }
}

fn plus(a: &CpuTimes, b: &CpuTimes) -> CpuTimes {
    let s = |x: u64, y: u64| x.saturating_add(y);
    CpuTimes {
        user_us: s(a.user_us, b.user_us),
        nice_us: s(a.nice_us, b.nice_us),
        system_us: s(a.system_us, b.system_us),
        idle_us: s(a.idle_us, b.idle_us),
        iowait_us: s(a.iowait_us, b.iowait_us),
        irq_us: s(a.irq_us, b.irq_us),
        softirq_us: s(a.softirq_us, b.softirq_us),
        steal_us: s(a.steal_us, b.steal_us),
    }
}

/// Merges samples pairwise (0+1, 2+3, …); a pair that cannot merge stays two samples.
/// Returns whether anything merged.
pub fn halve<T: Mergeable>(samples: &mut Vec<T>) -> bool {
    let mut merged = false;
    let mut out: Vec<T> = Vec::with_capacity(samples.len().div_ceil(2));
    let mut pairs = std::mem::take(samples).into_iter();
    while let Some(mut first) = pairs.next() {
        match pairs.next() {
            Some(second) if first.merge(&second) => {
                merged = true;
                out.push(first);
            }
            Some(second) => out.extend([first, second]),
            None => out.push(first),
        }
    }
    *samples = out;
    merged
}

/// One stream's (or the cost meter's) samples. The owner halves every log of a test together
/// once one holds more than [`samples_per_stream`] (see the module doc).
#[derive(Debug, Clone, PartialEq)]
pub struct SampleLog<T> {
    samples: Vec<T>,
    /// Ticks each stored sample covers.
    per_sample: u32,
    /// Ticks the last stored sample covers so far.
    last_ticks: u32,
}

impl<T> Default for SampleLog<T> {
    fn default() -> Self {
        Self { samples: Vec::new(), per_sample: 1, last_ticks: 0 }
    }
}

impl<T: Mergeable> SampleLog<T> {
    /// Adds the sample of one tick: merged into the last sample while that covers fewer
    /// ticks than every sample now does, else stored as a new one.
    pub fn push(&mut self, sample: T) {
        if self.last_ticks < self.per_sample
            && let Some(last) = self.samples.last_mut()
            && last.merge(&sample)
        {
            self.last_ticks += 1;
            return;
        }
        self.samples.push(sample);
        self.last_ticks = 1;
    }

    /// Folds a sample into the last one without counting a tick (a final sliver too short to
    /// stand alone). Returns false, changing nothing, when there is none or they cannot merge.
    pub fn fold_into_last(&mut self, sample: &T) -> bool {
        self.samples.last_mut().is_some_and(|last| last.merge(sample))
    }

    /// Samples stored.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// True when no sample is stored.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Merges samples pairwise; every sample now covers twice the ticks.
    pub fn halve(&mut self) {
        let pairs_last = self.samples.len() % 2 == 0;
        halve(&mut self.samples);
        if pairs_last {
            self.last_ticks = self.last_ticks.saturating_add(self.per_sample);
        }
        self.per_sample = self.per_sample.saturating_mul(2);
    }

    /// Sampling intervals each stored sample covers (1 until the first halving).
    pub fn intervals_per_sample(&self) -> u32 {
        self.per_sample
    }

    /// The samples, oldest first.
    pub fn as_slice(&self) -> &[T] {
        &self.samples
    }

    /// The samples, oldest first.
    pub fn into_vec(self) -> Vec<T> {
        self.samples
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tick(i: u64, omitted: bool) -> IntervalSample {
        IntervalSample {
            start_us: i * 100,
            end_us: (i + 1) * 100,
            bytes: i,
            omitted,
            tcp: None,
            udp: None,
            rr: None,
        }
    }

    #[test]
    fn a_log_stays_within_its_capacity_with_exact_totals() {
        let mut log = SampleLog::default();
        let n = 1000u64;
        for i in 0..n {
            log.push(tick(i, false));
            if log.len() > 8 {
                log.halve();
            }
        }
        let s = log.as_slice();
        assert!(s.len() <= 8 && s.len() > 4, "{}", s.len());
        assert_eq!(s.iter().map(|x| x.bytes).sum::<u64>(), n * (n - 1) / 2, "bytes add up");
        assert_eq!((s[0].start_us, s[s.len() - 1].end_us), (0, n * 100), "spans cover the test");
        assert!(s.windows(2).all(|w| w[0].end_us == w[1].start_us), "contiguous");
        assert_eq!(log.intervals_per_sample(), 128);
        // Every sample but the last covers exactly 128 ticks: the grid stays regular.
        assert!(s[..s.len() - 1].iter().all(|x| x.end_us - x.start_us == 128 * 100));
    }

    #[test]
    fn logs_halved_together_stay_aligned_when_one_stream_stops_early() {
        let (mut long, mut short) = (SampleLog::default(), SampleLog::default());
        for i in 0..40 {
            long.push(tick(i, false));
            if i < 7 {
                short.push(tick(i, false));
            }
            if long.len() > 4 || short.len() > 4 {
                long.halve();
                short.halve();
            }
        }
        let ends = |l: &SampleLog<IntervalSample>| {
            l.as_slice().iter().map(|s| s.end_us).collect::<Vec<_>>()
        };
        let (l, s) = (ends(&long), ends(&short));
        assert_eq!(l[..s.len() - 1], s[..s.len() - 1], "same boundaries while both ran");
    }

    #[test]
    fn the_warm_up_is_never_merged_into_measured_time() {
        let mut v = vec![tick(0, true), tick(1, true), tick(2, true), tick(3, false)];
        assert!(halve(&mut v));
        assert_eq!(v.len(), 3);
        assert!(v[0].omitted && v[1].omitted && !v[2].omitted);
        let mut one = vec![tick(0, true), tick(1, false)];
        assert!(!halve(&mut one), "nothing could merge");
    }

    #[test]
    fn per_stream_capacity_shrinks_with_streams_down_to_a_floor() {
        assert_eq!(samples_per_stream(1), MAX_TEST_SAMPLES / 2);
        assert_eq!(samples_per_stream(255), 32);
        assert_eq!(samples_per_stream(8192), MIN_STREAM_SAMPLES);
        assert_eq!(samples_per_stream(0), MAX_TEST_SAMPLES);
    }
}
