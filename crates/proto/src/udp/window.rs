//! A sliding bitmap over the most recent sequence numbers: which of them have arrived.
//!
//! Bit `seq % len` stands for `seq` while `seq` is inside the window that ends at the highest
//! sequence number seen. The tracker clears the bits of sequence numbers it slides past, so a
//! set bit always means "this one arrived". Fixed memory (`len / 8` bytes); no other state.

/// A power-of-two-sized ring of bits indexed by sequence number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SeqWindow {
    words: Vec<u64>,
    mask: u64,
}

impl SeqWindow {
    /// A cleared window of `len_bits` bits; `len_bits` must be a power of two and at least 64.
    pub(super) fn new(len_bits: usize) -> Self {
        debug_assert!(len_bits.is_power_of_two() && len_bits >= 64);
        Self { words: vec![0; len_bits / 64], mask: len_bits as u64 - 1 }
    }

    /// How many sequence numbers the window remembers.
    pub(super) fn len_bits(&self) -> u64 {
        self.mask + 1
    }

    fn slot(&self, seq: u64) -> (usize, u64) {
        let idx = seq & self.mask;
        ((idx / 64) as usize, 1u64 << (idx % 64))
    }

    /// Whether `seq`'s bit is set.
    pub(super) fn contains(&self, seq: u64) -> bool {
        let (word, bit) = self.slot(seq);
        self.words.get(word).is_some_and(|w| w & bit != 0)
    }

    /// Sets `seq`'s bit.
    pub(super) fn insert(&mut self, seq: u64) {
        let (word, bit) = self.slot(seq);
        if let Some(w) = self.words.get_mut(word) {
            *w |= bit;
        }
    }

    /// Clears the bits of `count` consecutive sequence numbers starting at `first`, a whole
    /// word at a time where it can (all of them if `count` covers the window).
    pub(super) fn clear_range(&mut self, first: u64, count: u64) {
        if count >= self.len_bits() {
            self.words.fill(0);
            return;
        }
        let mut idx = first & self.mask;
        let mut left = count;
        while left > 0 {
            let bit = idx % 64;
            let n = left.min(64 - bit);
            let ones = if n == 64 { u64::MAX } else { ((1u64 << n) - 1) << bit };
            if let Some(w) = self.words.get_mut((idx / 64) as usize) {
                *w &= !ones;
            }
            idx = (idx + n) & self.mask;
            left -= n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clear_range_clears_exactly_the_range_across_word_and_ring_edges() {
        let mut w = SeqWindow::new(128);
        for s in 0..128 {
            w.insert(s);
        }
        w.clear_range(120, 20); // 120..=127 and, wrapped, 0..=11
        for s in 0..128u64 {
            let cleared = !(12..120).contains(&s);
            assert_eq!(w.contains(s), !cleared, "seq {s}");
            assert_eq!(w.contains(s + 128), !cleared, "aliases share a bit");
        }
        w.clear_range(64, 64);
        assert!((64..128).all(|s| !w.contains(s)));
        assert!(w.contains(12) && w.contains(63));
        for s in 0..128 {
            w.insert(s);
        }
        w.clear_range(5, 1000);
        assert!((0..128).all(|s| !w.contains(s)), "a range longer than the ring clears all");
        assert_eq!(w.len_bits(), 128);
    }
}
