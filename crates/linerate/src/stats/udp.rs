//! UDP figures per direction, settled from both ends: the sender says how many datagrams it
//! sent, the receiver what arrived. Loss is `sent − received` (after the warm-up), never
//! negative and never over 100 %; a sender count below the highest sequence number seen is
//! reported as inconsistent instead of producing a nonsense percentage. Reordered and
//! duplicated datagrams are counted on their own, not as loss (iperf3 folds them in).
//!
//! Also the UDP verdict: where datagrams were lost (the receiving host's socket buffer vs the
//! path) and what held the sender back. Pure functions; no I/O.

use serde::Serialize;

use linerate_proto::{Flow, StreamResult, StreamRole};

use crate::plan::search::Trial;
use crate::record::RunRecord;
use crate::stats::DirectionSummary;
use crate::units::format_bits_per_second;

/// Loss at or above this share of datagrams sent is called out in the verdict (0.1 %).
pub const LOSS_NOTABLE: f64 = 0.001;
/// The most datagrams the kernel coalesces into one GRO packet (`UDP_GRO_CNT_MAX`).
pub const GRO_MAX_SEGMENTS: u64 = 64;

/// What the kernel's drop count means: datagrams, or GRO packets of several.
fn drops_in_words(u: &UdpSummary, d: u64) -> String {
    if u.gro {
        format!(
            "{d} packets (coalesced by GRO: each up to {GRO_MAX_SEGMENTS} datagrams, so at most {} datagrams)",
            d.saturating_mul(GRO_MAX_SEGMENTS)
        )
    } else {
        format!("{d} datagrams")
    }
}

/// The most datagrams the kernel's drops can stand for.
fn drops_upper_bound(u: &UdpSummary) -> u64 {
    let d = u.kernel_drops.unwrap_or(0);
    if u.gro { d.saturating_mul(GRO_MAX_SEGMENTS) } else { d }
}

/// One direction's UDP accounting.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UdpSummary {
    /// Which way.
    pub flow: Flow,
    /// Bytes per datagram.
    pub datagram_bytes: u32,
    /// Datagrams sent after the warm-up (None if the sender did not report).
    pub sent: Option<u64>,
    /// Distinct datagrams received after the warm-up.
    pub received: u64,
    /// Datagrams lost: sent − received when the sender's count is known, else the gaps the
    /// receiver saw (tail loss unknown).
    pub lost: u64,
    /// `lost` over `sent`, %.
    pub loss_percent: Option<f64>,
    /// Datagrams that arrived after a higher-numbered one.
    pub out_of_order: u64,
    /// Extra copies.
    pub duplicates: u64,
    /// Arrived too late to place.
    pub too_late: u64,
    /// Not this test's datagrams.
    pub invalid: u64,
    /// Largest reordering distance seen.
    pub max_reorder_distance: u64,
    /// Mean RFC 3550 jitter over streams, milliseconds.
    pub jitter_ms: Option<f64>,
    /// Worst stream's 99th percentile of the transit difference, milliseconds.
    pub ipdv_p99_ms: Option<f64>,
    /// Worst stream's largest transit difference, milliseconds.
    pub ipdv_max_ms: Option<f64>,
    /// Datagrams the receiving host's kernel dropped for a full socket buffer; with
    /// `gro`, packets: one may be a coalesced buffer of up to [`GRO_MAX_SEGMENTS`] datagrams.
    pub kernel_drops: Option<u64>,
    /// Whether a receiver of this direction had UDP receive offload (GRO) on, so that
    /// `kernel_drops` counts coalesced packets, not datagrams.
    pub gro: bool,
    /// Whether a sender of this direction used UDP segmentation offload (GSO).
    pub gso: bool,
    /// The longest nap a receiver of this direction took to batch its wake-ups, µs (None =
    /// none napped; see `traffic::udp::receive`).
    pub nap_us_max: Option<u64>,
    /// Datagrams the sender's pacer gave up on because it fell behind (CPU).
    pub sender_skipped: u64,
    /// Worst stream's most datagrams in 1 ms over the rate's even share (1.0 = smooth).
    pub burstiness: Option<f64>,
    /// Sender counts that cannot be right (fewer sent than the receiver saw numbered).
    pub inconsistent: Vec<String>,
}

/// The UDP summary of every direction of a UDP test (empty for TCP tests).
pub fn summarize_udp(record: &RunRecord) -> Vec<UdpSummary> {
    let mut flows: Vec<Flow> = record.spec.stream_plan().iter().map(|(_, f)| *f).collect();
    flows.dedup();
    flows.into_iter().filter_map(|f| direction(record, f)).collect()
}

/// The UDP figures of one stream (both its ends), settled the way a direction's are; None
/// for a TCP stream or an id not in the test.
pub fn udp_stream(record: &RunRecord, id: u32) -> Option<UdpSummary> {
    let flow = record.spec.flow_of(id)?;
    settle(record, flow, |s| s.id == id)
}

fn direction(record: &RunRecord, flow: Flow) -> Option<UdpSummary> {
    settle(record, flow, |_| true)
}

/// The figures of the streams of `flow` that `keep` accepts.
fn settle(
    record: &RunRecord,
    flow: Flow,
    keep: impl Fn(&StreamResult) -> bool,
) -> Option<UdpSummary> {
    let of = |role: StreamRole| -> Vec<&StreamResult> {
        record
            .all_streams()
            .map(|(_, s)| s)
            .filter(|s| s.flow == flow && s.role == role && keep(s))
            .collect()
    };
    let (senders, receivers) = (of(StreamRole::Sender), of(StreamRole::Receiver));
    let rx: Vec<_> = receivers.iter().filter_map(|s| Some((s.id, s.udp_receiver?))).collect();
    let tx: Vec<_> = senders.iter().filter_map(|s| Some((s.id, s.udp_sender?))).collect();
    if rx.is_empty() && tx.is_empty() {
        return None;
    }
    let mut u = UdpSummary {
        flow,
        datagram_bytes: tx.first().map_or(record.spec.block_bytes, |(_, s)| s.datagram_bytes),
        sent: (!tx.is_empty()).then(|| tx.iter().map(|(_, s)| s.measured_datagrams()).sum()),
        received: rx.iter().map(|(_, r)| r.measured().received).sum(),
        lost: 0,
        loss_percent: None,
        out_of_order: rx.iter().map(|(_, r)| r.measured().out_of_order).sum(),
        duplicates: rx.iter().map(|(_, r)| r.measured().duplicates).sum(),
        too_late: rx.iter().map(|(_, r)| r.measured().too_late).sum(),
        invalid: rx.iter().map(|(_, r)| r.measured().invalid).sum(),
        max_reorder_distance: rx
            .iter()
            .map(|(_, r)| r.counts.max_reorder_distance)
            .max()
            .unwrap_or(0),
        jitter_ms: mean(rx.iter().map(|(_, r)| r.jitter_ns as f64 / 1e6)),
        ipdv_p99_ms: rx.iter().filter_map(|(_, r)| r.ipdv_p99_ns).max().map(|n| n as f64 / 1e6),
        ipdv_max_ms: rx.iter().filter_map(|(_, r)| r.ipdv_max_ns).max().map(|n| n as f64 / 1e6),
        kernel_drops: rx.iter().map(|(_, r)| r.kernel_drops).sum(),
        gro: rx.iter().any(|(_, r)| r.gro),
        gso: tx.iter().any(|(_, s)| s.gso),
        nap_us_max: rx.iter().filter_map(|(_, r)| r.nap_us_max).max(),
        sender_skipped: tx.iter().map(|(_, s)| s.skipped).sum(),
        burstiness: burstiness(record, &tx),
        inconsistent: Vec::new(),
    };
    u.lost = match u.sent {
        Some(sent) => sent.saturating_sub(u.received),
        None => rx.iter().map(|(_, r)| r.measured().lost).sum(),
    };
    u.loss_percent = u.sent.filter(|s| *s > 0).map(|s| u.lost as f64 * 100.0 / s as f64);
    for (id, s) in &tx {
        let seen = rx.iter().find(|(r, _)| r == id).map_or(0, |(_, r)| r.counts.highest_seq);
        if s.datagrams < seen {
            u.inconsistent.push(format!(
                "stream {id}: the sender reports {} datagrams but the receiver saw number {seen}",
                s.datagrams
            ));
        }
    }
    Some(u)
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (n, sum) = values.fold((0u32, 0.0), |(n, s), v| (n + 1, s + v));
    (n > 0).then(|| sum / f64::from(n))
}

/// Worst stream's peak datagrams per millisecond over what the pacing rate allows per ms.
fn burstiness(
    record: &RunRecord,
    tx: &[(u32, linerate_proto::udp::UdpSenderResult)],
) -> Option<f64> {
    let bps = record.spec.bits_per_second;
    let peak = tx.iter().map(|(_, s)| s.max_per_ms).max()?;
    let bits = u64::from(tx.first()?.1.datagram_bytes) * 8;
    let ideal = (bps as f64 / 1000.0 / bits as f64).max(1.0);
    (bps > 0 && peak > 0).then(|| peak as f64 / ideal)
}

/// One `--find-max` trial's figures from its record (first direction).
pub fn trial_of(record: &RunRecord, target_bits_per_second: u64) -> Trial {
    let summary = crate::stats::summarize(record);
    let d = summary.directions.first();
    let rate = |f: Option<&crate::stats::SideFigures>| {
        f.and_then(|s| s.figures.bits_per_second).unwrap_or(0.0)
    };
    let u = summary.udp.first();
    Trial {
        target_bits_per_second,
        sent_bits_per_second: rate(d.and_then(|d| d.sender.as_ref())),
        received_bits_per_second: rate(d.and_then(|d| d.receiver.as_ref())),
        sent: u.and_then(|u| u.sent).unwrap_or(0),
        lost: u.map_or(0, |u| u.lost),
        passed: false,
    }
}

/// Warnings the reader must see for UDP results.
pub fn udp_warnings(udp: &[UdpSummary]) -> Vec<String> {
    let mut out = Vec::new();
    for u in udp {
        let dir = u.flow.label();
        if let Some(d) = u.kernel_drops.filter(|d| *d > 0) {
            out.push(format!(
                "{dir}: the receiving host's kernel dropped {} because the socket buffer was full: \
                 that loss happened in the receiver, not on the path (raise -w and net.core.rmem_max)",
                drops_in_words(u, d)
            ));
        }
        if let Some(share) = sender_skipped_share(u) {
            out.push(format!(
                "{dir}: the sender fell behind its pacing (woken late or short of CPU) and skipped {} \
                 of {} datagrams ({:.2}%) rather than send them in a burst, so it sent below -b",
                u.sender_skipped,
                u.sent.unwrap_or(0) + u.sender_skipped,
                share * 100.0
            ));
        }
        out.extend(u.inconsistent.iter().map(|i| format!("{dir}: inconsistent counts: {i}")));
    }
    out
}

/// The share of its due datagrams the sender skipped because it fell behind its pacing, when
/// it is worth a word (0.1 % or more).
pub fn sender_skipped_share(u: &UdpSummary) -> Option<f64> {
    let due = u.sent.unwrap_or(0) + u.sender_skipped;
    (u.sender_skipped > 0 && u.sender_skipped * 1000 >= due)
        .then(|| u.sender_skipped as f64 / due as f64)
}

/// The UDP verdict for one direction, or None to fall back to the general rules.
pub fn udp_verdict(
    u: &UdpSummary,
    d: &DirectionSummary,
    target_bps: u64,
) -> Option<(String, Vec<String>, bool)> {
    let sent = u.sent?;
    let loss = u.lost as f64 / sent.max(1) as f64;
    let mut evidence = vec![format!(
        "{} of {} datagrams lost ({:.3}%), {} out of order, {} duplicates, kernel receive-buffer drops {}",
        u.lost,
        sent,
        loss * 100.0,
        u.out_of_order,
        u.duplicates,
        u.kernel_drops.map_or("n/a".into(), |k| drops_in_words(u, k))
    )];
    let rate = d.sender.as_ref().and_then(|s| s.figures.bits_per_second);
    if let Some(r) = rate {
        evidence.push(format!("sender rate {}", format_bits_per_second(r)));
    }
    if loss < LOSS_NOTABLE {
        return None;
    }
    // With GRO a drop is a coalesced packet: the receiver is blamed when its drops can
    // account for half the loss at most segments per packet, and the sentence says so.
    let (drops, bound) = (u.kernel_drops.unwrap_or(0), drops_upper_bound(u));
    let receiver = drops > 0 && bound * 2 >= u.lost;
    let summary = if receiver {
        let share = if u.gro {
            format!("the receiving host's own socket buffer dropped {}", drops_in_words(u, drops))
        } else {
            format!("{drops} of the {} in the receiving host's own socket buffer", u.lost)
        };
        format!(
            "receiver-bound: {:.2}% of datagrams were lost, {share}; \
             the receiver could not keep up (raise -w and net.core.rmem_max, or use more streams)",
            loss * 100.0,
        )
    } else {
        let at = if target_bps > 0 {
            format_bits_per_second(target_bps as f64)
        } else {
            rate.map_or("this rate".into(), format_bits_per_second)
        };
        format!(
            "path loss: {:.2}% of datagrams were lost between the hosts at {at} (not by the receiving socket); \
             the path cannot carry this rate without loss — try --find-max",
            loss * 100.0
        )
    };
    Some((summary, evidence, receiver))
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_proto::udp::{UdpCounts, UdpReceiverResult, UdpSenderResult};
    use linerate_proto::{Direction, Protocol, SideResults, TestSpec};

    fn stream(role: StreamRole) -> StreamResult {
        RunRecord::test_stream(role, 0)
    }

    fn record(sent: u64, counts: UdpCounts, omitted: UdpCounts, drops: u64) -> RunRecord {
        let mut tx = stream(StreamRole::Sender);
        tx.udp_sender = Some(UdpSenderResult {
            datagrams: sent,
            omitted_datagrams: omitted.highest_seq,
            datagram_bytes: 1000,
            max_per_ms: 10,
            ..Default::default()
        });
        let mut rx = stream(StreamRole::Receiver);
        rx.udp_receiver = Some(UdpReceiverResult {
            counts,
            omitted,
            jitter_ns: 20_000,
            kernel_drops: Some(drops),
            ..Default::default()
        });
        let side = |s| SideResults { software: "t".into(), streams: vec![s], ..Default::default() };
        let spec = TestSpec {
            protocol: Protocol::Udp,
            direction: Direction::Upload,
            bits_per_second: 80_000_000,
            block_bytes: 1000,
            ..TestSpec::default_tcp()
        };
        RunRecord::for_tests(spec, side(tx), side(rx))
    }

    #[test]
    fn loss_is_sent_minus_received_after_the_warm_up_and_reorder_is_not_loss() {
        let counts = UdpCounts {
            highest_seq: 1000,
            received: 990,
            lost: 10,
            out_of_order: 7,
            duplicates: 2,
            ..Default::default()
        };
        let omitted = UdpCounts { highest_seq: 100, received: 100, ..Default::default() };
        let r = record(1005, counts, omitted, 0);
        let u = &summarize_udp(&r)[0];
        assert_eq!(u.sent, Some(905));
        assert_eq!(u.received, 890);
        assert_eq!(u.lost, 15, "10 gaps plus 5 never-seen tail datagrams");
        assert_eq!(u.out_of_order, 7);
        assert_eq!(u.duplicates, 2);
        assert!((u.loss_percent.expect("pct") - 15.0 * 100.0 / 905.0).abs() < 1e-9);
        assert_eq!(u.jitter_ms, Some(0.02));
        assert_eq!(u.burstiness, Some(1.0), "10 per ms is the even share of 80 Mbit/s at 1000 B");
    }

    #[test]
    fn a_sender_count_below_the_highest_sequence_is_flagged_not_over_100_percent() {
        let counts = UdpCounts { highest_seq: 500, received: 500, ..Default::default() };
        let r = record(400, counts, UdpCounts::default(), 0);
        let u = &summarize_udp(&r)[0];
        assert_eq!(u.lost, 0);
        assert_eq!(u.inconsistent.len(), 1, "{:?}", u.inconsistent);
        assert!(udp_warnings(std::slice::from_ref(u))[0].contains("inconsistent"));
    }

    #[test]
    fn kernel_drops_make_the_receiver_the_culprit() {
        let counts =
            UdpCounts { highest_seq: 1000, received: 900, lost: 100, ..Default::default() };
        let r = record(1000, counts, UdpCounts::default(), 80);
        let summary = crate::stats::summarize(&r);
        let u = &summarize_udp(&r)[0];
        let (text, _, receiver) = udp_verdict(u, &summary.directions[0], 80_000_000).expect("v");
        assert!(receiver && text.starts_with("receiver-bound"), "{text}");
        let r = record(1000, counts, UdpCounts::default(), 5);
        let u = &summarize_udp(&r)[0];
        let (text, _, receiver) = udp_verdict(u, &summary.directions[0], 80_000_000).expect("v");
        assert!(!receiver && text.starts_with("path loss"), "{text}");
        assert!(udp_warnings(std::slice::from_ref(u))[0].contains("kernel dropped 5 datagrams"));
    }

    #[test]
    fn with_gro_a_drop_is_a_coalesced_packet_and_says_so() {
        let counts =
            UdpCounts { highest_seq: 1000, received: 900, lost: 100, ..Default::default() };
        let mut r = record(1000, counts, UdpCounts::default(), 5);
        let rx = r.server_results.as_mut().and_then(|s| s.streams[0].udp_receiver.as_mut());
        rx.expect("receiver").gro = true;
        let summary = crate::stats::summarize(&r);
        let u = &summarize_udp(&r)[0];
        assert!(u.gro);
        let (text, evidence, receiver) =
            udp_verdict(u, &summary.directions[0], 80_000_000).expect("v");
        assert!(receiver && text.starts_with("receiver-bound"), "5 packets may hold 320: {text}");
        assert!(text.contains("5 packets (coalesced by GRO"), "{text}");
        assert!(evidence[0].contains("at most 320 datagrams"), "{evidence:?}");
        let warning = &udp_warnings(std::slice::from_ref(u))[0];
        assert!(warning.contains("dropped 5 packets (coalesced by GRO"), "{warning}");
        let mut r = record(1000, counts, UdpCounts::default(), 0);
        let rx = r.server_results.as_mut().and_then(|s| s.streams[0].udp_receiver.as_mut());
        rx.expect("receiver").gro = true;
        let u = &summarize_udp(&r)[0];
        let (text, _, receiver) = udp_verdict(u, &summary.directions[0], 80_000_000).expect("v");
        assert!(!receiver && text.starts_with("path loss"), "no drops, no blame: {text}");
    }
}
