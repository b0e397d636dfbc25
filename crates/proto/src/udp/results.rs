//! What each end reports about a UDP stream, as exchanged between the ends and stored in the
//! run record. Integer units only (nanoseconds, counts), so results compare exactly.
//!
//! The sender says how many datagrams it sent and how evenly; the receiver says what arrived,
//! in which order, how late, and what its own kernel dropped. Loss is only *settled* when both
//! are known (`stats::udp` in the application does that with [`crate::udp::SequenceTracker`]'s
//! rules): `lost = sent − received`, never negative, never over 100 %.

use serde::{Deserialize, Serialize};

use crate::udp::{BurstReport, JitterSummary, TrackerCounts};

/// A UDP sender's figures for one stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UdpSenderResult {
    /// Datagrams sent over the whole test, warm-up included.
    pub datagrams: u64,
    /// Datagrams sent during the omitted warm-up.
    pub omitted_datagrams: u64,
    /// Bytes per datagram (UDP payload, header included).
    pub datagram_bytes: u32,
    /// Datagrams the pacer gave up on after the sender fell more than its burst allowance
    /// behind (a CPU-bound or descheduled sender), instead of catching up in a burst.
    pub skipped: u64,
    /// How often that happened.
    pub fell_behind: u64,
    /// Most datagrams sent within any 1 ms (compare with the rate's ideal share of 1 ms).
    pub max_per_ms: u64,
    /// Coefficient of variation of the gaps between sends, in thousandths (0 = perfectly even).
    pub gap_cv_milli: Option<u64>,
    /// Longest gap between two sends, nanoseconds.
    pub max_gap_ns: u64,
    /// Whether the sender used UDP segmentation offload (GSO).
    pub gso: bool,
}

impl UdpSenderResult {
    /// Builds the record from the sender's totals and its burst measurement.
    pub fn new(datagrams: u64, datagram_bytes: u32, burst: &BurstReport) -> Self {
        Self {
            datagrams,
            datagram_bytes,
            max_per_ms: burst.max_in_window,
            gap_cv_milli: burst.gap_cv.map(|cv| (cv * 1000.0).round().max(0.0) as u64),
            max_gap_ns: u64::try_from(burst.max_gap.as_nanos()).unwrap_or(u64::MAX),
            ..Self::default()
        }
    }

    /// Datagrams sent after the warm-up.
    pub fn measured_datagrams(&self) -> u64 {
        self.datagrams.saturating_sub(self.omitted_datagrams)
    }
}

/// Receiver counters (a serializable [`TrackerCounts`] without the histogram).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UdpCounts {
    /// Highest sequence number seen.
    pub highest_seq: u64,
    /// Distinct datagrams that arrived.
    pub received: u64,
    /// Sequence numbers at or below the highest that never arrived (gaps; tail loss after the
    /// highest is only known once the sender's count is).
    pub lost: u64,
    /// Datagrams that arrived after a higher-numbered one.
    pub out_of_order: u64,
    /// Datagrams that arrived twice or more (extra copies).
    pub duplicates: u64,
    /// Datagrams so late the receiver no longer remembered their neighbourhood.
    pub too_late: u64,
    /// Datagrams that were not this test's (malformed header, no test secret, sequence 0,
    /// absurd jump).
    pub invalid: u64,
    /// Largest reordering distance seen, in sequence numbers.
    pub max_reorder_distance: u64,
}

impl From<&TrackerCounts> for UdpCounts {
    fn from(c: &TrackerCounts) -> Self {
        Self {
            highest_seq: c.highest_seq,
            received: c.received,
            lost: c.lost,
            out_of_order: c.out_of_order,
            duplicates: c.duplicates,
            too_late: c.too_late,
            invalid: c.invalid,
            max_reorder_distance: c.max_reorder_distance,
        }
    }
}

impl UdpCounts {
    /// Counts gained since `earlier` (gaps may shrink: late arrivals fill them).
    pub fn since(&self, earlier: &Self) -> Self {
        Self {
            highest_seq: self.highest_seq.saturating_sub(earlier.highest_seq),
            received: self.received.saturating_sub(earlier.received),
            lost: self.lost.saturating_sub(earlier.lost),
            out_of_order: self.out_of_order.saturating_sub(earlier.out_of_order),
            duplicates: self.duplicates.saturating_sub(earlier.duplicates),
            too_late: self.too_late.saturating_sub(earlier.too_late),
            invalid: self.invalid.saturating_sub(earlier.invalid),
            max_reorder_distance: self.max_reorder_distance,
        }
    }
}

/// A UDP receiver's figures for one stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UdpReceiverResult {
    /// Counters over the whole test.
    pub counts: UdpCounts,
    /// Counters at the end of the omitted warm-up (all zero without `-O`).
    pub omitted: UdpCounts,
    /// RFC 3550 jitter as iperf computes it, nanoseconds.
    pub jitter_ns: u64,
    /// Median |transit difference| between consecutive in-order datagrams, nanoseconds.
    pub ipdv_p50_ns: Option<u64>,
    /// 99th percentile of the same.
    pub ipdv_p99_ns: Option<u64>,
    /// Largest of the same.
    pub ipdv_max_ns: Option<u64>,
    /// Datagrams the receiving host's kernel dropped because this socket's buffer was full
    /// (SO_RXQ_OVFL), where the OS reports it.
    pub kernel_drops: Option<u64>,
    /// Whether the receiver used UDP receive offload (GRO).
    pub gro: bool,
    /// The longest nap, microseconds, the receiver took between reads that drained its
    /// socket, to batch its wake-ups (unpaced tests only; arrival times are quantized by
    /// it). None = it never napped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nap_us_max: Option<u64>,
}

impl UdpReceiverResult {
    /// Builds the record from the receiver's final counters and jitter.
    pub fn new(counts: &TrackerCounts, jitter: &JitterSummary) -> Self {
        let ns = |d: Option<std::time::Duration>| {
            d.map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        };
        Self {
            counts: counts.into(),
            jitter_ns: (jitter.jitter_seconds.max(0.0) * 1e9).round() as u64,
            ipdv_p50_ns: ns(jitter.ipdv_p50),
            ipdv_p99_ns: ns(jitter.ipdv_p99),
            ipdv_max_ns: ns(jitter.ipdv_max),
            ..Self::default()
        }
    }

    /// Counters after the warm-up.
    pub fn measured(&self) -> UdpCounts {
        self.counts.since(&self.omitted)
    }
}

/// One interval of a UDP stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UdpIntervalSample {
    /// Datagrams sent (sender) or distinct datagrams received (receiver) in the interval.
    pub datagrams: u64,
    /// Receiver: new gaps in the interval (late arrivals filling older gaps are not subtracted).
    pub lost: u64,
    /// Receiver: datagrams that arrived out of order in the interval.
    pub out_of_order: u64,
    /// Receiver: RFC 3550 jitter at the end of the interval, nanoseconds.
    pub jitter_ns: u64,
}
