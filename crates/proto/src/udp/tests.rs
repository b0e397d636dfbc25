//! Property tests of the UDP core against a simple model, with a tiny deterministic PRNG
//! (no proptest in the proto crate), and the `udp_receiver` fuzz body on generated streams.

use std::collections::HashSet;
use std::time::Duration;

use super::*;
use crate::fuzzing;

/// xorshift64: deterministic, good enough to shuffle test inputs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }
}

/// Sequence numbers 1..=n with some dropped, some duplicated and each displaced by up to
/// `max_shift` positions.
fn arrivals(rng: &mut Rng, n: u64, max_shift: u64) -> Vec<u64> {
    let (drop, dup) = (rng.below(300), rng.below(200));
    let mut keyed = Vec::new();
    for seq in 1..=n {
        if rng.chance(drop) {
            continue;
        }
        let pos = seq * 4;
        keyed.push((pos + rng.below(max_shift * 4 + 1), seq));
        if rng.chance(dup) {
            keyed.push((pos + rng.below(max_shift * 8 + 1), seq));
        }
    }
    keyed.sort();
    keyed.into_iter().map(|(_, seq)| seq).collect()
}

/// The specification of `SequenceTracker::on_seq`, written with a hash set instead of a
/// bitmap window.
struct Model {
    seen: HashSet<u64>,
    highest: u64,
    window: u64,
    counts: TrackerCounts,
}

impl Model {
    fn new(window: u64) -> Self {
        Self { seen: HashSet::new(), highest: 0, window, counts: TrackerCounts::default() }
    }

    fn on_seq(&mut self, seq: u64) -> Arrival {
        let c = &mut self.counts;
        if seq == 0 || seq > self.highest + MAX_JUMP {
            c.invalid += 1;
            return Arrival::Invalid;
        }
        if seq > self.highest {
            let skipped = seq - self.highest - 1;
            self.highest = seq;
            self.seen.insert(seq);
            c.received += 1;
            return Arrival::InOrder { skipped };
        }
        if self.highest - seq >= self.window {
            c.too_late += 1;
            Arrival::TooLate
        } else if !self.seen.insert(seq) {
            c.duplicates += 1;
            Arrival::Duplicate
        } else {
            c.received += 1;
            c.out_of_order += 1;
            Arrival::Late { distance: self.highest - seq }
        }
    }
}

#[test]
fn random_orders_match_the_model_and_always_add_up() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut seen_kinds = TrackerCounts::default();
    for case in 0..300 {
        let n = 1 + rng.below(1500);
        let max_shift = [0, 1, 3, 40, 300][case % 5];
        let window = [64, 128, 1024, DEFAULT_WINDOW_BITS][(case / 5) % 4];
        let mut t = SequenceTracker::with_window(window);
        let mut model = Model::new(window as u64);
        for seq in arrivals(&mut rng, n, max_shift) {
            assert_eq!(t.on_seq(seq), model.on_seq(seq), "case {case}, seq {seq}");
            let c = t.snapshot();
            assert_eq!(c.highest_seq, c.received + c.lost, "case {case}");
            assert_eq!(c.highest_seq, model.highest);
            let m = &model.counts;
            assert_eq!(
                (c.received, c.out_of_order, c.duplicates, c.too_late),
                (m.received, m.out_of_order, m.duplicates, m.too_late),
                "case {case}"
            );
        }
        let c = t.snapshot();
        seen_kinds.lost += c.lost;
        seen_kinds.out_of_order += c.out_of_order;
        seen_kinds.duplicates += c.duplicates;
        seen_kinds.too_late += c.too_late;
        let s = t.settle(n);
        assert!(s.lost <= n, "case {case}: loss {} of {n}", s.lost);
        assert_eq!(s.lost, n - c.received);
        assert_eq!(s.tail_lost, n - c.highest_seq);
        assert_eq!(s.inconsistent, None);
        if window == DEFAULT_WINDOW_BITS {
            assert_eq!(c.too_late, 0, "n < window: everything is told apart");
            assert_eq!(c.received as usize, model.seen.len());
        }
    }
    let k = seen_kinds;
    assert!(k.lost > 0 && k.out_of_order > 0 && k.duplicates > 0 && k.too_late > 0, "{k:?}");
}

#[test]
fn settle_never_reports_more_loss_than_sent() {
    let mut rng = Rng(42);
    for _ in 0..200 {
        let mut t = SequenceTracker::new();
        let n = 1 + rng.below(500);
        for seq in arrivals(&mut rng, n, 5) {
            t.on_seq(seq);
        }
        let highest = t.snapshot().highest_seq;
        for sent in [0, 1, highest / 2, highest, highest + rng.below(100), u64::MAX] {
            let s = t.settle(sent);
            assert!(s.lost <= sent && s.tail_lost <= s.lost);
            assert_eq!(s.inconsistent.is_some(), sent < highest);
            if let Some(pct) = s.loss_percent() {
                assert!((0.0..=100.0).contains(&pct), "{pct}");
            }
        }
    }
}

#[test]
fn unwrapper_recovers_true_sequence_numbers_across_wraps() {
    let mut rng = Rng(7);
    for _ in 0..50 {
        let first = (1u64 << 32) * rng.below(3) + (1u64 << 32) - 1 - rng.below(3000);
        let mut u = Unwrapper::new();
        u.extend(first as u32);
        let mut base = first;
        for _ in 0..5000 {
            base += 1 + rng.below(3);
            let seq = base - rng.below(1000.min(base - first + 1));
            let want = seq - first + (first & 0xffff_ffff);
            assert_eq!(u.extend(seq as u32), want, "first {first}, seq {seq}");
        }
    }
}

#[test]
fn interval_deltas_sum_to_the_totals() {
    let mut rng = Rng(99);
    let mut t = SequenceTracker::new();
    let mut last = t.snapshot();
    let (mut received, mut lost, mut dups) = (0u64, 0i64, 0u64);
    for (i, seq) in arrivals(&mut rng, 20_000, 50).into_iter().enumerate() {
        t.on_seq(seq);
        if i % 777 == 0 {
            let now = t.snapshot();
            let d = now.since(&last);
            (received, lost, dups) =
                (received + d.received, lost + d.lost_change, dups + d.duplicates);
            last = now;
        }
    }
    let d = t.snapshot().since(&last);
    let total = t.snapshot();
    assert_eq!(received + d.received, total.received);
    assert_eq!(lost + d.lost_change, total.lost as i64);
    assert_eq!(dups + d.duplicates, total.duplicates);
}

/// Encodes a generated arrival order as `fuzzing::udp_receiver` input.
fn receiver_input(rng: &mut Rng, mode: u8, seqs: &[u64]) -> Vec<u8> {
    let width = if mode & 1 == 1 { SeqWidth::Bits64 } else { SeqWidth::Bits32 };
    let mut out = vec![mode];
    let mut buf = [0u8; 16];
    for &seq in seqs {
        out.push(rng.below(4) as u8);
        let send_time = Duration::from_micros((seq % (1 << 40)) * 10 + rng.below(50));
        let len = DatagramHeader { send_time, seq }.encode(width, &mut buf).unwrap();
        out.extend_from_slice(&buf[..len]);
    }
    out
}

#[test]
fn fuzz_body_survives_generated_datagram_streams() {
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    let mut inputs = Vec::new();
    for mode in 0..8u8 {
        let mut seqs = arrivals(&mut rng, 400, 30);
        seqs.extend([0, 1, u64::MAX, 1 << 40, 5]);
        let base = receiver_input(&mut rng, mode, &seqs);
        for i in (0..base.len()).step_by(7) {
            inputs.push(base[..i].to_vec());
            let mut flipped = base.clone();
            flipped[i] ^= 0x80;
            inputs.push(flipped);
        }
        inputs.push(base);
    }
    for len in 0..300 {
        inputs.push((0..len).map(|_| rng.next() as u8).collect());
    }
    for input in &inputs {
        fuzzing::udp_receiver(input);
    }
    assert!(inputs.len() > 1000);
}

#[test]
fn receiver_pipeline_end_to_end() {
    // Sender paces 10 Mbit/s of 1250-byte datagrams (1 per ms); the network delays each by
    // 5 ms ± a little, reorders two, duplicates one and drops one and the last.
    let mut pacer = Pacer::new(10_000_000, 1250, Duration::ZERO);
    let mut sent = Vec::new();
    for i in 0..10u64 {
        let at = pacer.next_send_at();
        assert_eq!((at, pacer.allowed(at)), (Duration::from_millis(i), 1));
        pacer.on_sent(1, at);
        let mut buf = [0u8; 1250];
        DatagramHeader { send_time: at, seq: i + 1 }.encode(SeqWidth::Bits64, &mut buf).unwrap();
        sent.push(buf);
    }
    let order = [0usize, 1, 3, 2, 4, 4, 6, 7, 8];
    let (mut tracker, mut jitter) = (SequenceTracker::new(), JitterMeter::new());
    for (k, &i) in order.iter().enumerate() {
        let h = DatagramHeader::decode(&sent[i], SeqWidth::Bits64).unwrap();
        let arrival = h.send_time + Duration::from_micros(5000 + 100 * (k as u64 % 2));
        if let Arrival::InOrder { .. } = tracker.on_seq(h.seq) {
            jitter.on_in_order(h.send_time, arrival);
        }
    }
    let s = tracker.settle(pacer.sent());
    assert_eq!((s.sent, s.received, s.lost, s.tail_lost), (10, 8, 2, 1));
    assert_eq!((s.out_of_order, s.duplicates, s.inconsistent), (1, 1, None));
    let j = jitter.summary();
    assert_eq!(j.samples, 6, "7 in-order datagrams, the first sets no D");
    assert_eq!(j.ipdv_max, Some(Duration::from_micros(100)));
}
