//! The figures of a test under load (`--under-load`): idle and loaded latency of the probes,
//! the delay the load added, the latency on the loaded connections themselves, and a
//! responsiveness figure in round trips per minute (RPM) after draft-ietf-ippm-responsiveness.
//!
//! **Responsiveness.** The draft's TCP-only formula is
//! `(60000 / ((TM(tcp_f) + TM(http_f)) / 2) + 60000 / TM(http_l)) / 2`, where TM is a
//! single-sided trimmed mean keeping the lowest 95 % of the samples, in milliseconds;
//! `tcp_f` and `http_f` are a new connection's handshake and its first request ("foreign"
//! probes), `http_l` a request on a load-generating connection ("self" probes). linerate has
//! no HTTP, so:
//! - `tcp_f` is the connect time of the handshake probes (a new TCP connection each, a tenth
//!   as often as the request probes); `http_f` is the request probes' 1-byte request/response
//!   on their own long-lived connection (a request on a separate connection, but not the
//!   first on a new one); without handshake figures the foreign term is TM(`http_f`) alone
//!   (the draft forbids substituting zero);
//! - the self term is TM of the load-generating connections' own round-trip time as their
//!   senders' kernels smooth it (TCP_INFO `rtt`, sampled every interval of the loaded phase),
//!   which the draft allows "where multiplexing requests into the load-generating connections
//!   is not possible"; without interval samples (`-i 0`) the figure is the foreign term alone.
//!
//! **Confidence** follows the draft's grades with its defaults (MAD 4 intervals of 1 s, SDT
//! 5 %): low when the loaded phase had fewer than 4 probe intervals, high when the last 4
//! intervals' responsiveness (60000 / that interval's median probe latency in ms — a median
//! per interval, where the draft takes a trimmed mean) varies by at most 5 % of their mean
//! (standard deviation), medium otherwise.
//!
//! **Rating.** The draft defines no bands. linerate's, stated with the figure so nobody takes
//! them for Apple's: low below 300 RPM (round trips over 200 ms), medium to 1000 RPM (60 ms),
//! high above.
//!
//! **Finding.** One sentence on what the load did, derived from the rating so the two never
//! disagree (a "bufferbloat" beside "high" would leave the reader to pick one). The added
//! median is the evidence that a queue filled (more than 5 ms and more than the idle median);
//! the rating says whether that queue hurt: *bufferbloat* only when a queue filled **and** the
//! rating is medium or low; a queue that filled while round trips stayed under 60 ms (high)
//! is named with its figures but not called bufferbloat; a low or medium rating without an
//! added delay is the idle path's own round trip, said so, not blamed on a queue.
//!
//! **Queue estimate.** The added median delay times the rate reached, per direction: a round
//! trip crosses each direction's queue once, so with `--bidir` the added delay is the sum of
//! both queues' delays. Which share each queue added cannot be told from the round trip, so
//! the estimate takes an even split: the added delay over the number of directions, times the
//! rates summed (the added delay times the directions' mean rate). Two equal queues are then
//! estimated exactly, where delay × the summed rates counted each twice.

use linerate_proto::StreamRole;
use linerate_proto::histogram::DurationHistogram;
use linerate_proto::latency::RrIntervalSample;
use serde::Serialize;

use crate::record::{ProbePhase, RunRecord};

/// The draft's trimmed-mean share (TMP): the lowest 95 % of the samples are kept.
pub const KEEP: f64 = 0.95;
/// The draft's moving-average distance (MAD), in one-second intervals.
pub const MAD: usize = 4;
/// The draft's standard-deviation tolerance (SDT).
pub const SDT: f64 = 0.05;

/// The probes of one phase.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseFigures {
    /// Probes answered in the phase.
    pub probes: u64,
    /// Exact minimum, the percentiles (within 1.6 %), exact maximum and mean, nanoseconds.
    pub min_ns: Option<u64>,
    /// Median.
    pub p50_ns: Option<u64>,
    /// 90th percentile.
    pub p90_ns: Option<u64>,
    /// 99th percentile.
    pub p99_ns: Option<u64>,
    /// Largest.
    pub max_ns: Option<u64>,
    /// Mean.
    pub mean_ns: Option<u64>,
    /// Mean of the lowest 95 % (the draft's trimmed mean).
    pub trimmed_mean_ns: Option<u64>,
    /// Probes still unanswered when the phase ended.
    pub unanswered: u64,
    /// The handshake probes that connected; None when they did not run.
    pub connects: Option<u64>,
    /// Their median connect time, nanoseconds.
    pub connect_p50_ns: Option<u64>,
    /// The trimmed mean of their connect times (the draft's TM(tcp_f)), nanoseconds.
    pub connect_trimmed_mean_ns: Option<u64>,
}

/// The load-generating connections' own round-trip time during the loaded phase.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoadedConnections {
    /// Interval samples of the senders' smoothed RTT taken in the loaded phase.
    pub samples: usize,
    /// Their median, microseconds.
    pub median_us: u64,
    /// Their largest, microseconds.
    pub max_us: u64,
    /// Mean of the lowest 95 %, microseconds.
    pub trimmed_mean_us: f64,
}

/// Round trips per minute, as the draft computes them (with the substitutions above).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Responsiveness {
    /// The figure: the mean of the two terms, or the foreign term alone.
    pub rpm: f64,
    /// 60000 / ((TM(connect) + TM(probe latency)) / 2), in ms; without connect figures
    /// 60000 / TM(probe latency).
    pub foreign_rpm: f64,
    /// 60000 / TM(loaded connections' RTT in ms); None without interval samples.
    pub loaded_rpm: Option<f64>,
    /// `low`, `medium` or `high` (linerate's bands, see the module docs).
    pub rating: &'static str,
    /// `low`, `medium` or `high` (the draft's grades).
    pub confidence: &'static str,
}

/// A test under load, summed up.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UnderLoadSummary {
    /// Probes per second.
    pub probes_per_second: u64,
    /// The probes on the idle path; None when they failed (`idle_error`).
    pub idle: Option<PhaseFigures>,
    /// Why the idle probes failed.
    pub idle_error: Option<String>,
    /// The probes while the test ran; None when they failed (`loaded_error`).
    pub loaded: Option<PhaseFigures>,
    /// Why the loaded probes failed.
    pub loaded_error: Option<String>,
    /// Loaded minus idle median, nanoseconds (negative when the load sped things up).
    pub added_p50_ns: Option<i64>,
    /// Loaded minus idle 99th percentile, nanoseconds.
    pub added_p99_ns: Option<i64>,
    /// The queue the added median delay implies at the rate the test reached: delay × the
    /// received rate of every direction, bytes.
    pub queue_bytes: Option<u64>,
    /// The loaded connections' own round-trip time; None without interval samples.
    pub loaded_connections: Option<LoadedConnections>,
    /// The responsiveness figure; None without loaded probes.
    pub responsiveness: Option<Responsiveness>,
    /// In words: whether the load filled a queue on the path, and how much it added.
    pub finding: Option<String>,
}

/// How often the probe stream samples an interval (the probe session's `-i`), milliseconds.
pub const PROBE_INTERVAL_MS: u64 = 1000;

/// A probe phase's interval samples placed in time: `(start, end, sample)`, seconds since the
/// phase began. Sample `i` covers `i × L` to `(i + 1) × L`, the last ending with the phase,
/// where `L` is [`PROBE_INTERVAL_MS`] or the power-of-two multiple of it that merged samples
/// cover (docs/JSON.md, "Merged intervals"): the one for which the samples fill the phase.
/// Samples that fit no such `L` (a record edited by hand) are spread evenly over the phase.
pub fn phase_intervals(phase: &ProbePhase) -> Vec<(f64, f64, &RrIntervalSample)> {
    let (n, d) = (phase.intervals.len() as u64, phase.duration_ms);
    if n == 0 || d == 0 {
        return Vec::new();
    }
    let merged = (0..16).map(|k| PROBE_INTERVAL_MS << k).find(|l| d.div_ceil(*l) == n);
    let step = merged.map_or(d as f64 / n as f64, |l| l as f64);
    let end = d as f64 / 1e3;
    (0..n)
        .zip(&phase.intervals)
        .map(|(i, s)| (i as f64 * step / 1e3, ((i + 1) as f64 * step / 1e3).min(end), s))
        .collect()
}

/// A median added by the load beyond this (and beyond the idle median itself) is a queue
/// that filled: bufferbloat, as far as this test can tell.
pub const BLOAT_NS: i64 = 5_000_000;

/// The sentence on what the load did, derived from the responsiveness `rating` (module docs,
/// "Finding"): bufferbloat only when a queue filled and the rating is not high.
fn finding(
    idle: &PhaseFigures,
    loaded: &PhaseFigures,
    queue: Option<u64>,
    rpm: Option<&Responsiveness>,
) -> Option<String> {
    let (i, l) = (idle.p50_ns? as i64, loaded.p50_ns? as i64);
    let added = l - i;
    let ms = |ns: i64| ns as f64 / 1e6;
    let queued = queue.map_or(String::new(), |q| {
        format!(", about {} queued at the rate reached", crate::units::ByteCount(q).iec())
    });
    let rated = rpm.map_or(String::new(), |r| format!(" ({:.0} RPM, {})", r.rpm, r.rating));
    let high = rpm.is_none_or(|r| r.rating == "high");
    Some(match (added > BLOAT_NS.max(i), high) {
        (true, false) => format!(
            "the load filled a queue on the path (bufferbloat){rated}: the median probe took \
             {:.1} ms instead of {:.3} ms idle, +{:.1} ms{queued}; a shorter queue or AQM at the \
             bottleneck would keep it near idle",
            ms(l),
            ms(i),
            ms(added)
        ),
        (true, true) => format!(
            "a queue filled under load, but round trips stayed short{rated}: the median probe \
             took {:.1} ms instead of {:.3} ms idle, +{:.1} ms{queued}; round trips under \
             {:.0} ms rate high in linerate's bands: a queue that did not cost responsiveness",
            ms(l),
            ms(i),
            ms(added),
            60_000.0 / HIGH_RPM
        ),
        (false, high) => format!(
            "latency held under load{rated}: the median probe took {:.3} ms, {:+.3} ms from idle \
             (less than {} ms or the idle median itself): no bloated queue on the path{}",
            ms(l),
            ms(added),
            BLOAT_NS / 1_000_000,
            if high {
                String::new()
            } else {
                format!("; the rating is the idle path's own round trip ({:.3} ms)", ms(i))
            }
        ),
    })
}

fn ns(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn figures(phase: &ProbePhase) -> Option<PhaseFigures> {
    let l = phase.latency.as_deref()?;
    let h: &DurationHistogram = &l.histogram;
    (h.count() > 0).then(|| PhaseFigures {
        probes: h.count(),
        min_ns: h.min().map(ns),
        p50_ns: h.quantile(0.5).map(ns),
        p90_ns: h.quantile(0.9).map(ns),
        p99_ns: h.quantile(0.99).map(ns),
        max_ns: h.max().map(ns),
        mean_ns: h.mean().map(ns),
        trimmed_mean_ns: h.trimmed_mean(KEEP).map(ns),
        unanswered: l.unanswered,
        connects: phase.connect.as_ref().map(|c| c.count()),
        connect_p50_ns: phase.connect.as_ref().and_then(|c| c.quantile(0.5)).map(ns),
        connect_trimmed_mean_ns: phase.connect.as_ref().and_then(|c| c.trimmed_mean(KEEP)).map(ns),
    })
}

/// The senders' smoothed RTT in every interval that ended inside the loaded phase.
fn loaded_connections(record: &RunRecord, phase: &ProbePhase) -> Option<LoadedConnections> {
    let (from, to) = (phase.from_ms * 1000, (phase.from_ms + phase.duration_ms) * 1000);
    let mut rtt: Vec<u64> = record
        .all_streams()
        .filter(|(_, s)| s.role == StreamRole::Sender && s.latency.is_none())
        .flat_map(|(_, s)| &s.intervals)
        .filter(|i| (from..=to).contains(&i.end_us))
        .filter_map(|i| i.tcp.map(|t| u64::from(t.rtt_us)))
        .collect();
    if rtt.is_empty() {
        return None;
    }
    rtt.sort_unstable();
    let kept = &rtt[..((rtt.len() as f64 * KEEP).ceil() as usize).clamp(1, rtt.len())];
    Some(LoadedConnections {
        samples: rtt.len(),
        median_us: rtt[rtt.len() / 2],
        max_us: rtt[rtt.len() - 1],
        trimmed_mean_us: kept.iter().sum::<u64>() as f64 / kept.len() as f64,
    })
}

/// The draft's confidence grade from the loaded probes' interval medians.
fn confidence(intervals: &[RrIntervalSample]) -> &'static str {
    let rpm: Vec<f64> = intervals
        .iter()
        .filter_map(|i| i.p50_ns.filter(|p| *p > 0))
        .map(|p| 60_000.0 / (p as f64 / 1e6))
        .collect();
    if rpm.len() < MAD {
        return "low";
    }
    let last = &rpm[rpm.len() - MAD..];
    let mean = last.iter().sum::<f64>() / MAD as f64;
    let sd = (last.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / MAD as f64).sqrt();
    if sd <= SDT * mean { "high" } else { "medium" }
}

/// Below this many round trips per minute (round trips over 200 ms) the rating is low.
const LOW_RPM: f64 = 300.0;
/// Up to this many (round trips of 60 ms or more) it is medium; above, high.
const HIGH_RPM: f64 = 1000.0;

fn rating(rpm: f64) -> &'static str {
    match rpm {
        r if r < LOW_RPM => "low",
        r if r <= HIGH_RPM => "medium",
        _ => "high",
    }
}

/// The figures of a test under load; None for any other test.
pub fn summarize_under_load(
    record: &RunRecord,
    directions: &[crate::stats::DirectionSummary],
) -> Option<UnderLoadSummary> {
    let p = record.probes.as_deref()?;
    let (idle, loaded) = (figures(&p.idle), figures(&p.loaded));
    let added = |f: fn(&PhaseFigures) -> Option<u64>| {
        let (i, l) = (f(idle.as_ref()?)?, f(loaded.as_ref()?)?);
        Some(l as i64 - i as i64)
    };
    let added_p50_ns = added(|f| f.p50_ns);
    // A round trip crosses each direction's queue once: an even split of the added delay
    // over the directions (module docs, "Queue estimate").
    let rates: Vec<f64> =
        directions.iter().filter_map(|d| d.receiver.as_ref()?.figures.bits_per_second).collect();
    let mean_rate = rates.iter().sum::<f64>() / rates.len().max(1) as f64;
    let queue_bytes = added_p50_ns
        .filter(|a| *a > 0 && mean_rate > 0.0)
        .map(|a| (a as f64 / 1e9 * mean_rate / 8.0) as u64);
    let conns = loaded_connections(record, &p.loaded);
    let responsiveness = loaded.as_ref().and_then(|l| {
        let http_ms = l.trimmed_mean_ns? as f64 / 1e6;
        let foreign_ms = match l.connect_trimmed_mean_ns {
            Some(tcp) => (tcp as f64 / 1e6 + http_ms) / 2.0,
            None => http_ms,
        };
        let foreign_rpm = 60_000.0 / foreign_ms.max(1e-6);
        let loaded_rpm = conns.as_ref().map(|c| 60_000.0 / (c.trimmed_mean_us / 1e3).max(1e-6));
        let rpm = loaded_rpm.map_or(foreign_rpm, |s| (foreign_rpm + s) / 2.0);
        Some(Responsiveness {
            rpm,
            foreign_rpm,
            loaded_rpm,
            rating: rating(rpm),
            confidence: confidence(&p.loaded.intervals),
        })
    });
    let finding = idle
        .as_ref()
        .zip(loaded.as_ref())
        .and_then(|(i, l)| finding(i, l, queue_bytes, responsiveness.as_ref()));
    Some(UnderLoadSummary {
        finding,
        probes_per_second: p.probe.rate_per_second,
        idle_error: p.idle.error.clone().filter(|_| idle.is_none()),
        loaded_error: p.loaded.error.clone().filter(|_| loaded.is_none()),
        added_p99_ns: added(|f| f.p99_ns),
        idle,
        loaded,
        added_p50_ns,
        queue_bytes,
        loaded_connections: conns,
        responsiveness,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interval(p50_ms: f64) -> RrIntervalSample {
        RrIntervalSample {
            transactions: 100,
            p50_ns: Some((p50_ms * 1e6) as u64),
            p99_ns: None,
            max_ns: None,
        }
    }

    #[test]
    fn confidence_needs_four_intervals_and_then_five_percent() {
        assert_eq!(confidence(&[interval(10.0); 3]), "low");
        assert_eq!(confidence(&[interval(10.0); 4]), "high");
        let steady_at_the_end = [20.0, 5.0, 10.0, 10.1, 9.9, 10.0].map(interval);
        assert_eq!(confidence(&steady_at_the_end), "high", "only the last four count");
        let swinging = [10.0, 14.0, 10.0, 14.0].map(interval);
        assert_eq!(confidence(&swinging), "medium");
    }

    #[test]
    fn probe_intervals_are_placed_in_the_phase_merged_or_not() {
        let phase = |duration_ms: u64, n: usize| ProbePhase {
            from_ms: 1000,
            duration_ms,
            latency: None,
            intervals: vec![interval(1.0); n],
            error: None,
            connect: None,
        };
        let times = |p: &ProbePhase| -> Vec<(f64, f64)> {
            phase_intervals(p).iter().map(|(a, b, _)| (*a, *b)).collect()
        };
        assert_eq!(times(&phase(2750, 3)), [(0.0, 1.0), (1.0, 2.0), (2.0, 2.75)]);
        assert_eq!(times(&phase(7000, 2)), [(0.0, 4.0), (4.0, 7.0)], "merged: 4 s each");
        assert_eq!(times(&phase(2000, 4)), [(0.0, 0.5), (0.5, 1.0), (1.0, 1.5), (1.5, 2.0)]);
        assert!(times(&phase(0, 3)).is_empty() && times(&phase(2000, 0)).is_empty());
    }

    /// The under-load fixture (a loopback upload) with its probes' medians set to `idle_ms`
    /// and `loaded_ms`, no handshake probes and no loaded-connection samples: the RPM is then
    /// the loaded probes' alone.
    fn probed(record: &str, idle_ms: f64, loaded_ms: f64) -> UnderLoadSummary {
        let doc: serde_json::Value =
            serde_json::from_str(include_str!("../../tests/fixtures/reports/under-load.json"))
                .expect("fixture");
        let from: RunRecord = serde_json::from_value(doc["record"].clone()).expect("record");
        let mut r: RunRecord = serde_json::from_str(record).expect("record");
        let mut probes = from.probes.expect("probes");
        for (phase, ms) in [(&mut probes.idle, idle_ms), (&mut probes.loaded, loaded_ms)] {
            let l = phase.latency.as_mut().expect("latency");
            l.histogram = DurationHistogram::new();
            l.histogram.record_ns((ms * 1e6) as u64, 200);
            phase.connect = None;
        }
        r.probes = Some(probes);
        for s in [r.client.as_mut(), r.server_results.as_mut()].into_iter().flatten() {
            s.streams.iter_mut().flat_map(|s| &mut s.intervals).for_each(|i| i.tcp = None);
        }
        crate::stats::summarize(&r).under_load.expect("under load")
    }

    const UPLOAD: &str = include_str!("../../tests/fixtures/records/tcp_upload.json");

    /// Issue 34: with bbr a 38 ms loaded delay was "bufferbloat" beside "1073 RPM (high)".
    /// The finding follows the rating: a queue that left round trips short is named, not
    /// called bufferbloat; one that made them long is.
    #[test]
    fn the_finding_never_contradicts_the_rating() {
        for (idle, loaded, rating, bloat) in [
            (0.2, 38.0, "high", false),
            (0.2, 6.0, "high", false),
            (0.2, 150.0, "medium", true),
            (0.2, 400.0, "low", true),
            (0.1, 0.12, "high", false),
            // A long idle path with no queue: low, and said to be the path's own round trip.
            (250.0, 251.0, "low", false),
        ] {
            let u = probed(UPLOAD, idle, loaded);
            let (r, f) = (u.responsiveness.expect("rpm"), u.finding.expect("finding"));
            assert_eq!(r.rating, rating, "{loaded} ms: {f}");
            assert_eq!(f.contains("bufferbloat"), bloat, "{loaded} ms, {}: {f}", r.rating);
            assert!(f.contains(&format!("RPM, {rating})")), "{f}");
        }
        let f = probed(UPLOAD, 0.2, 38.0).finding.expect("finding");
        assert!(f.starts_with("a queue filled under load, but round trips stayed short"), "{f}");
        let long = probed(UPLOAD, 250.0, 251.0);
        let idle_ms = long.idle.and_then(|i| i.p50_ns).expect("idle") as f64 / 1e6;
        let f = long.finding.expect("finding");
        assert!(f.contains(&format!("the idle path's own round trip ({idle_ms:.3} ms)")), "{f}");
    }

    /// Issue 34: `--bidir` through two queues estimated 1.61 MiB, twice the truth: one round
    /// trip crosses both, so the added delay is split between the directions.
    #[test]
    fn a_bidir_queue_estimate_counts_each_queue_once() {
        for (record, directions) in
            [(UPLOAD, 1.0), (include_str!("../../tests/fixtures/records/tcp_bidir.json"), 2.0)]
        {
            let u = probed(record, 0.2, 12.2);
            let r: RunRecord = serde_json::from_str(record).expect("record");
            let rates: Vec<f64> = crate::stats::summarize(&r)
                .directions
                .iter()
                .filter_map(|d| d.receiver.as_ref()?.figures.bits_per_second)
                .collect();
            assert_eq!(rates.len() as f64, directions);
            let added = u.added_p50_ns.expect("added") as f64 / 1e9;
            // Two equal queues of 6 ms each: each holds 6 ms of its direction's rate.
            let truth: f64 = rates.iter().map(|r| added / directions * r / 8.0).sum();
            let got = u.queue_bytes.expect("queue") as f64;
            assert!((got - truth).abs() <= truth * 0.01, "{got} vs {truth} ({directions} dirs)");
        }
    }

    #[test]
    fn ratings_cut_at_200_and_60_ms_round_trips() {
        assert_eq!(rating(60_000.0 / 250.0), "low");
        assert_eq!(rating(60_000.0 / 100.0), "medium");
        assert_eq!(rating(60_000.0 / 20.0), "high");
    }
}
