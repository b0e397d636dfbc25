//! Receiver-side accounting of one UDP stream: received, lost, out of order, duplicates.
//!
//! iperf3 counts a reordered datagram as lost when the higher one arrives, then "un-loses" it
//! and counts it out of order, and it cannot tell a duplicate from a late datagram (so
//! duplicates make loss go down, and loss can pass 100 %). [`SequenceTracker`] keeps them
//! apart, and at every moment `highest_seq == received + lost`:
//!
//! * `received`: distinct sequence numbers that arrived;
//! * `lost`: sequence numbers at or below the highest that have not arrived (yet): a late
//!   arrival takes one off `lost` and adds one to `out_of_order`;
//! * `out_of_order`: arrived after a higher sequence number (including late gap fillers);
//! * `duplicates`: a sequence number that already arrived, arriving again;
//! * `too_late`: older than the memory window (default [`DEFAULT_WINDOW_BITS`] sequence numbers
//!   behind the highest). The tracker no longer knows whether that number arrived before, so it
//!   does not guess between duplicate and late arrival: it counts it apart and leaves `lost`
//!   as it was (so a real gap filler that late still counts as lost);
//! * `invalid`: sequence number 0, a jump of more than [`MAX_JUMP`] ahead of the highest
//!   (corrupt or foreign datagram), or an undecodable header ([`SequenceTracker::on_malformed`]).
//!   These never move the state.
//!
//! Memory is a bitmap of the window (8 KiB by default). The tracker takes sequence numbers,
//! not bytes or times: decoding is `header`'s job and jitter is `jitter`'s.

use super::window::SeqWindow;

/// Default memory window: how far behind the highest sequence number a datagram can arrive
/// and still be told apart as late or duplicate (65 536 sequence numbers, 8 KiB of bitmap:
/// 44 ms at 1.5 M datagrams/s, far more than any reordering a network does).
pub const DEFAULT_WINDOW_BITS: usize = 1 << 16;
/// The largest window [`SequenceTracker::with_window`] accepts (2 MiB of bitmap).
pub const MAX_WINDOW_BITS: usize = 1 << 24;
/// A sequence number more than this far ahead of the highest is taken as corrupt or foreign.
/// It matches the ambiguity limit of 32-bit sequence numbers (see `Unwrapper`).
pub const MAX_JUMP: u64 = 1 << 31;
/// Buckets of the reorder-distance histogram; bucket `i` counts distances in `[2^i, 2^(i+1))`.
pub const REORDER_BUCKETS: usize = 24;

/// What the tracker made of one sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// Higher than every earlier one; `skipped` sequence numbers between were added to `lost`.
    /// Only these datagrams should feed the jitter meter.
    InOrder {
        /// Sequence numbers jumped over (0 when it was exactly the next one).
        skipped: u64,
    },
    /// Filled a gap: it arrived after a datagram `distance` sequence numbers higher.
    Late {
        /// Highest sequence number seen minus this one (at least 1).
        distance: u64,
    },
    /// Arrived before.
    Duplicate,
    /// Older than the memory window; neither duplicate nor late can be told.
    TooLate,
    /// Sequence number 0, an absurd jump, or a malformed header.
    Invalid,
}

/// A copy of a tracker's counters at one moment. Subtract two with [`TrackerCounts::since`]
/// for an interval, or keep one at the end of the omitted warm-up as a baseline.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TrackerCounts {
    /// Highest valid sequence number seen (0 before the first).
    pub highest_seq: u64,
    /// Distinct sequence numbers that arrived.
    pub received: u64,
    /// Sequence numbers at or below `highest_seq` that have not arrived.
    pub lost: u64,
    /// Datagrams that arrived after a higher sequence number.
    pub out_of_order: u64,
    /// Datagrams whose sequence number had already arrived.
    pub duplicates: u64,
    /// Datagrams older than the memory window.
    pub too_late: u64,
    /// Datagrams with sequence number 0, an absurd jump, or a malformed header.
    pub invalid: u64,
    /// Largest reorder distance seen over the tracker's life (not a per-interval figure).
    pub max_reorder_distance: u64,
    /// Reorder distances: bucket `i` counts late arrivals with distance in `[2^i, 2^(i+1))`.
    pub reorder_distance_log2: [u64; REORDER_BUCKETS],
}

/// The change of the counters between two [`TrackerCounts`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TrackerDelta {
    /// How far the highest sequence number advanced.
    pub highest_seq_advance: u64,
    /// Distinct datagrams that arrived in the interval.
    pub received: u64,
    /// Change of `lost`: gaps opened minus gaps filled. Negative when datagrams counted lost in
    /// an earlier interval arrived in this one.
    pub lost_change: i64,
    /// Out-of-order arrivals in the interval.
    pub out_of_order: u64,
    /// Duplicates in the interval.
    pub duplicates: u64,
    /// Too-late arrivals in the interval.
    pub too_late: u64,
    /// Invalid datagrams in the interval.
    pub invalid: u64,
}

impl TrackerCounts {
    /// Counters gained since `earlier` (a snapshot of the same tracker taken before).
    pub fn since(&self, earlier: &Self) -> TrackerDelta {
        let lost_change = i128::from(self.lost) - i128::from(earlier.lost);
        TrackerDelta {
            highest_seq_advance: self.highest_seq.saturating_sub(earlier.highest_seq),
            received: self.received.saturating_sub(earlier.received),
            lost_change: lost_change.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64,
            out_of_order: self.out_of_order.saturating_sub(earlier.out_of_order),
            duplicates: self.duplicates.saturating_sub(earlier.duplicates),
            too_late: self.too_late.saturating_sub(earlier.too_late),
            invalid: self.invalid.saturating_sub(earlier.invalid),
        }
    }
}

/// The end-of-test reconciliation of a stream with the sender's count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settled {
    /// Datagrams the sender says it sent.
    pub sent: u64,
    /// Distinct datagrams received.
    pub received: u64,
    /// `sent - received`, never negative: gaps plus tail loss. Never more than `sent`.
    pub lost: u64,
    /// Of `lost`, datagrams after the highest sequence number received (lost at the end).
    pub tail_lost: u64,
    /// Out-of-order arrivals.
    pub out_of_order: u64,
    /// Duplicates.
    pub duplicates: u64,
    /// Too-late arrivals (may be late gap fillers or duplicates; see module docs).
    pub too_late: u64,
    /// Invalid datagrams.
    pub invalid: u64,
    /// The receiver saw a sequence number above the sender's count (sender miscounted, or
    /// foreign datagrams): `lost` is then only a lower bound and should be shown as suspect.
    pub inconsistent: Option<Inconsistency>,
}

/// Why the sender's and receiver's counts do not reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inconsistency {
    /// The sender's count.
    pub sent: u64,
    /// The receiver's highest sequence number, above `sent`.
    pub highest_seq: u64,
}

impl Settled {
    /// Lost datagrams as a percentage of sent, 0..=100; None when nothing was sent.
    pub fn loss_percent(&self) -> Option<f64> {
        (self.sent > 0).then(|| 100.0 * self.lost as f64 / self.sent as f64)
    }
}

/// Accounting of one stream's sequence numbers; see the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SequenceTracker {
    counts: TrackerCounts,
    window: SeqWindow,
}

impl Default for SequenceTracker {
    fn default() -> Self {
        Self::new()
    }
}

impl SequenceTracker {
    /// A tracker with the default window of [`DEFAULT_WINDOW_BITS`].
    pub fn new() -> Self {
        Self::with_window(DEFAULT_WINDOW_BITS)
    }

    /// A tracker remembering `window_bits` sequence numbers, rounded up to a power of two and
    /// clamped to 64..=[`MAX_WINDOW_BITS`].
    pub fn with_window(window_bits: usize) -> Self {
        let bits = window_bits.clamp(64, MAX_WINDOW_BITS).next_power_of_two();
        Self { counts: TrackerCounts::default(), window: SeqWindow::new(bits) }
    }

    /// The window size in sequence numbers.
    pub fn window_bits(&self) -> u64 {
        self.window.len_bits()
    }

    /// Accounts one datagram's (64-bit, 1-based) sequence number.
    pub fn on_seq(&mut self, seq: u64) -> Arrival {
        let c = &mut self.counts;
        if seq == 0 || seq.saturating_sub(c.highest_seq) > MAX_JUMP {
            c.invalid += 1;
            return Arrival::Invalid;
        }
        if seq > c.highest_seq {
            let skipped = seq - c.highest_seq - 1;
            self.window.clear_range(c.highest_seq + 1, skipped + 1);
            self.window.insert(seq);
            c.lost += skipped;
            c.received += 1;
            c.highest_seq = seq;
            return Arrival::InOrder { skipped };
        }
        let distance = c.highest_seq - seq;
        if distance >= self.window.len_bits() {
            c.too_late += 1;
            return Arrival::TooLate;
        }
        if self.window.contains(seq) {
            c.duplicates += 1;
            return Arrival::Duplicate;
        }
        self.window.insert(seq);
        c.received += 1;
        c.lost = c.lost.saturating_sub(1);
        c.out_of_order += 1;
        c.max_reorder_distance = c.max_reorder_distance.max(distance);
        let bucket = (distance.ilog2() as usize).min(REORDER_BUCKETS - 1);
        c.reorder_distance_log2[bucket] += 1;
        Arrival::Late { distance }
    }

    /// Counts a datagram whose header could not be decoded as `invalid`.
    pub fn on_malformed(&mut self) {
        self.counts.invalid += 1;
    }

    /// The counters now.
    pub fn snapshot(&self) -> TrackerCounts {
        self.counts
    }

    /// Reconciles with the sender's count at the end of the test: everything sent and not
    /// received is lost, including datagrams after the highest received (tail loss). Loss never
    /// exceeds `sent`; a sender count below the highest sequence number is flagged.
    pub fn settle(&self, sent: u64) -> Settled {
        let c = &self.counts;
        let inconsistent =
            (sent < c.highest_seq).then_some(Inconsistency { sent, highest_seq: c.highest_seq });
        Settled {
            sent,
            received: c.received,
            lost: sent.saturating_sub(c.received),
            tail_lost: sent.saturating_sub(c.highest_seq),
            out_of_order: c.out_of_order,
            duplicates: c.duplicates,
            too_late: c.too_late,
            invalid: c.invalid,
            inconsistent,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(t: &mut SequenceTracker, seqs: &[u64]) -> Vec<Arrival> {
        seqs.iter().map(|&s| t.on_seq(s)).collect()
    }

    #[test]
    fn in_order_gap_late_duplicate() {
        let mut t = SequenceTracker::new();
        let got = feed(&mut t, &[1, 2, 5, 3, 3, 6]);
        assert_eq!(
            got,
            [
                Arrival::InOrder { skipped: 0 },
                Arrival::InOrder { skipped: 0 },
                Arrival::InOrder { skipped: 2 },
                Arrival::Late { distance: 2 },
                Arrival::Duplicate,
                Arrival::InOrder { skipped: 0 },
            ]
        );
        let c = t.snapshot();
        assert_eq!((c.highest_seq, c.received, c.lost), (6, 5, 1));
        assert_eq!((c.out_of_order, c.duplicates, c.too_late, c.invalid), (1, 1, 0, 0));
        assert_eq!(c.max_reorder_distance, 2);
        assert_eq!(c.reorder_distance_log2[1], 1);
    }

    #[test]
    fn iperf3_would_report_loss_for_pure_reordering_and_duplicates_but_we_do_not() {
        let mut t = SequenceTracker::new();
        feed(&mut t, &[2, 1, 4, 3, 4, 4, 5]);
        let c = t.snapshot();
        assert_eq!((c.received, c.lost, c.out_of_order, c.duplicates), (5, 0, 2, 2));
        let s = t.settle(5);
        assert_eq!((s.lost, s.tail_lost, s.inconsistent), (0, 0, None));
        assert_eq!(s.loss_percent(), Some(0.0));
    }

    #[test]
    fn zero_and_absurd_jumps_are_invalid_and_do_not_move_state() {
        let mut t = SequenceTracker::new();
        assert_eq!(t.on_seq(0), Arrival::Invalid);
        assert_eq!(t.on_seq(MAX_JUMP + 1), Arrival::Invalid);
        assert_eq!(t.on_seq(MAX_JUMP), Arrival::InOrder { skipped: MAX_JUMP - 1 });
        assert_eq!(t.on_seq(u64::MAX), Arrival::Invalid);
        t.on_malformed();
        let c = t.snapshot();
        assert_eq!((c.invalid, c.highest_seq, c.received, c.lost), (4, MAX_JUMP, 1, MAX_JUMP - 1));
    }

    #[test]
    fn older_than_window_is_too_late_not_guessed() {
        let mut t = SequenceTracker::with_window(100); // rounds up to 128
        assert_eq!(t.window_bits(), 128);
        feed(&mut t, &[1, 300]);
        assert_eq!(t.on_seq(1), Arrival::TooLate, "a duplicate, but the window forgot");
        assert_eq!(t.on_seq(2), Arrival::TooLate, "a gap filler, but the window forgot");
        assert_eq!(t.on_seq(173), Arrival::Late { distance: 127 });
        assert_eq!(t.on_seq(172), Arrival::TooLate);
        let c = t.snapshot();
        assert_eq!((c.received, c.lost, c.too_late), (3, 297, 3));
        assert_eq!(c.highest_seq, c.received + c.lost);
    }

    #[test]
    fn window_forgets_slid_past_numbers_so_aliases_are_not_duplicates() {
        let mut t = SequenceTracker::with_window(64);
        feed(&mut t, &[1, 2, 3]);
        assert_eq!(t.on_seq(66), Arrival::InOrder { skipped: 62 });
        assert_eq!(t.on_seq(65), Arrival::Late { distance: 1 }, "shares a bit with 1");
        assert_eq!(t.on_seq(67), Arrival::InOrder { skipped: 0 }, "shares a bit with 3");
        assert_eq!(t.on_seq(3), Arrival::TooLate);
        let mut big = SequenceTracker::with_window(128);
        feed(&mut big, &(1..=128).collect::<Vec<_>>());
        assert_eq!(big.on_seq(1000), Arrival::InOrder { skipped: 871 });
        assert_eq!(big.on_seq(990), Arrival::Late { distance: 10 }, "a jump clears every word");
        assert_eq!(big.on_seq(936), Arrival::Late { distance: 64 });
    }

    #[test]
    fn settle_counts_tail_loss_and_flags_inconsistent_sender() {
        let mut t = SequenceTracker::new();
        feed(&mut t, &[1, 2, 4, 4]);
        let s = t.settle(10);
        assert_eq!((s.received, s.lost, s.tail_lost, s.duplicates), (3, 7, 6, 1));
        assert_eq!(s.loss_percent(), Some(70.0));
        let bad = t.settle(2);
        assert_eq!(bad.inconsistent, Some(Inconsistency { sent: 2, highest_seq: 4 }));
        assert_eq!((bad.lost, bad.tail_lost), (0, 0), "never negative, never above sent");
        assert_eq!(t.settle(0).loss_percent(), None);
    }

    #[test]
    fn interval_deltas_show_gaps_filled_later_as_negative_loss() {
        let mut t = SequenceTracker::new();
        feed(&mut t, &[1, 2, 5]);
        let first = t.snapshot();
        feed(&mut t, &[3, 4, 6, 6]);
        let d = t.snapshot().since(&first);
        assert_eq!(d.highest_seq_advance, 1);
        assert_eq!((d.received, d.lost_change, d.out_of_order, d.duplicates), (3, -2, 2, 1));
        assert_eq!(first.since(&TrackerCounts::default()).lost_change, 2);
    }

    #[test]
    fn reorder_histogram_buckets_by_power_of_two() {
        let mut t = SequenceTracker::new();
        feed(&mut t, &[1000, 999, 998, 996, 992, 1]);
        let c = t.snapshot();
        assert_eq!(c.reorder_distance_log2[0], 1); // 1
        assert_eq!(c.reorder_distance_log2[1], 1); // 2
        assert_eq!(c.reorder_distance_log2[2], 1); // 4
        assert_eq!(c.reorder_distance_log2[3], 1); // 8
        assert_eq!(c.reorder_distance_log2[9], 1); // 999
        assert_eq!(c.max_reorder_distance, 999);
    }
}
